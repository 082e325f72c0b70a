"""Turn benchmark results into the summary table, target lines, JSON, Markdown and plots.

Aggregates over many cases (every class, every lazy property) are *geometric means* of the
per-case median ratios, shown with the worst case; single-case rows show the median of the
per-repetition ratios with its interquartile range. What is particular to one benchmark (its
rows, targets, report sections and plots) is in its record in :mod:`benchmarks.registry`.
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

from benchmarks.registry import BENCHMARKS, REGISTRY
from benchmarks.rows import LABELS, SLOWER_BOUND, Row, fmt_value, make_row
from benchmarks.timing import BenchResult, summarize

SLOWER_TEXT = "no row slower than numpyro by more than 5%"


# --------------------------------------------------------------------------------------------
# summary rows
# --------------------------------------------------------------------------------------------


def summary_rows(results: Iterable[BenchResult]) -> list[Row]:
    rows: list[Row] = []
    for res in results:
        if res.error:
            rows.append(make_row(res.name, "ERROR", "", speed=False,
                                 note=res.error.splitlines()[-1][:120]))
        else:
            rows += BENCHMARKS[res.name].rows(res)
    return rows


# --------------------------------------------------------------------------------------------
# targets
# --------------------------------------------------------------------------------------------


def _target(key: str, criterion: str, value: str, passed: bool | None,
            detail: str = "") -> dict[str, Any]:
    return {"target": key, "criterion": criterion, "value": value, "passed": passed,
            "detail": detail}


def evaluate_targets(results: Sequence[BenchResult],
                     rows: Sequence[Row]) -> list[dict[str, Any]]:
    """Every registered target of the benchmarks that ran without error, in rank order,
    then whether any speed row is slower than numpyro."""
    by = {r.name: r for r in results if not r.error}
    judged = sorted(((t, verdict) for b in REGISTRY if b.name in by for t in b.targets
                     if (verdict := t.check(by[b.name])) is not None),
                    key=lambda tv: tv[0].rank)
    out = [_target(t.key, t.criterion, v.value, v.passed, v.detail) for t, v in judged]
    speed_rows = [r for r in rows if r["speed"] and r["ratio"] is not None]
    if speed_rows:
        slow = [r for r in speed_rows if r["ratio"] < SLOWER_BOUND]
        worst = min(speed_rows, key=lambda r: r["ratio"])
        out.append(_target(
            "slower", SLOWER_TEXT, f"worst row {worst['benchmark']} / {worst['case']}: "
            f"{worst['ratio']:.2f}x", not slow,
            (f"{len(slow)} of {len(speed_rows)} rows slower by >5%: " + "; ".join(
                f"{r['benchmark']}/{r['case']} {r['ratio']:.2f}x" for r in slow))
            if slow else f"all {len(speed_rows)} rows within 5% or faster"))
    return out


# --------------------------------------------------------------------------------------------
# text
# --------------------------------------------------------------------------------------------


def fmt_ratio(row: dict[str, Any]) -> str:
    if row["ratio"] is None:
        return "-"
    lo, hi = row["ratio_lo"], row["ratio_hi"]
    spread = f" [{lo:.2f}-{hi:.2f}]" if lo is not None and hi is not None else ""
    return f"{row['ratio']:.2f}x{spread}"


def table_lines(rows: Sequence[dict[str, Any]], markdown: bool) -> list[str]:
    head = ["benchmark", "case", "numpyro", "stabledist", "no-cache", "numpyro/stabledist",
            "no-cache/stabledist", "note"]
    body = []
    for r in rows:
        nc = r["nocache_ratio"]
        body.append([r["benchmark"], r["case"], fmt_value(r["numpyro"], r["unit"]),
                     fmt_value(r["stabledist"], r["unit"]), fmt_value(r["nocache"], r["unit"]),
                     fmt_ratio(r), "-" if nc is None or math.isnan(nc) else f"{nc:.2f}x",
                     r["note"]])
    if markdown:
        lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
        lines += ["| " + " | ".join(c.replace("|", "/") for c in row) + " |" for row in body]
        return lines
    widths = [max(len(h), *(len(row[i]) for row in body)) if body else len(h)
              for i, h in enumerate(head[:-1])]
    fmt = "  ".join(f"{{:<{w}}}" for w in widths) + "  {}"
    return [fmt.format(*head), fmt.format(*("-" * w for w in widths), "-" * 4)] + [
        fmt.format(*row) for row in body]


WIDTH = 100


def _clip(text: str, width: int) -> str:
    return text if len(text) <= width else text[: width - 1] + "~"


def compact_lines(payload: dict[str, Any]) -> list[str]:
    """The terminal summary: one line of at most ``WIDTH`` characters per summary row and
    per target (notes, spreads and every case are in report.md)."""
    head = f"{'benchmark':<9} {'case':<47} {'numpyro':>10} {'stabledist':>10} {'ratio':>7}"
    lines = ["ratio = numpyro time / stabledist time (above 1: stabledist faster); "
             "* = >5% slower", head, "-" * len(head)]
    for r in payload["summary"]:
        ratio = "-" if r["ratio"] is None else f"{r['ratio']:.2f}x"
        slow = r["speed"] and r["ratio"] is not None and r["ratio"] < SLOWER_BOUND
        unit = r["unit"]
        lines.append(_clip(
            f"{r['benchmark']:<9} {_clip(r['case'], 47):<47} "
            f"{fmt_value(r['numpyro'], unit):>10} {fmt_value(r['stabledist'], unit):>10} "
            f"{ratio:>7}{' *' if slow else ''}", WIDTH))
    lines.append("")
    for t in payload["targets"]:
        status = {True: "PASS", False: "FAIL", None: "N/A "}[t["passed"]]
        lines.append(_clip(f"{status}  {t['criterion']}: {t['value']}", WIDTH))
    return lines


def target_lines(targets: Sequence[dict[str, Any]]) -> list[str]:
    lines = []
    for t in targets:
        status = {True: "PASS", False: "FAIL", None: "N/A "}[t["passed"]]
        lines.append(f"{status}  {t['criterion']}: {t['value']}"
                     + (f"  ({t['detail']})" if t["detail"] else ""))
    return lines


# --------------------------------------------------------------------------------------------
# files
# --------------------------------------------------------------------------------------------


def write_json(path: Path, payload: dict[str, Any]) -> None:
    def default(obj: Any) -> Any:
        if hasattr(obj, "tolist"):
            return obj.tolist()
        if isinstance(obj, float | int):
            return obj
        return str(obj)

    path.write_text(json.dumps(payload, indent=1, default=default, allow_nan=True))


def _case_table(res: BenchResult) -> list[str]:
    variants = list(res.variants)
    extra_variants = sorted({v for c in res.cases for v in c.samples} - set(variants))
    variants += extra_variants
    head = ["case", *variants, "numpyro/stabledist (IQR)", "no-cache/stabledist"]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for c in res.cases:
        unit = c.params.get("unit", res.unit)
        cells = [c.name]
        for v in variants:
            s = summarize(c.samples.get(v, []))
            cells.append(fmt_value(s.get("median"), unit) if s.get("n") else "-")
        r = summarize(c.ratio("numpyro", "stabledist"))
        cells.append(f"{r['median']:.2f}x ({r['q1']:.2f}-{r['q3']:.2f})" if r.get("n") else "-")
        nc = c.ratio_median("nocache", "stabledist")
        cells.append(f"{nc:.2f}x" if nc else "-")
        lines.append("| " + " | ".join(cells) + " |")
    return lines


def write_markdown(path: Path, payload: dict[str, Any], results: Sequence[BenchResult],
                   plots: Sequence[str]) -> None:
    env = payload["environment"]
    v = env["versions"]
    lines = [
        "# stabledist vs numpyro: benchmark report",
        "",
        f"- command: `{payload['command']}` (profile `{payload['profile']['label']}`)",
        f"- when: {env['timestamp']}, load average at start {env['load_average_start']}, "
        f"at end {payload.get('load_average_end')}",
        f"- jax {v['jax']}, jaxlib {v['jaxlib']}, numpyro {v['numpyro']}, stabledist "
        f"{v['stabledist']}, Python {env['python']}",
        f"- backend `{env['backend']}`, device kind `{env['device_kind']}`, "
        f"{env['device_count']} device(s), {env['cpu_count']} CPUs "
        f"(affinity {env['cpu_affinity']}), {env['platform']}",
        f"- total wall time {payload['seconds']:.0f} s",
        "",
        "Ratios are numpyro/stabledist (above 1: stabledist faster), median of the per-"
        "repetition ratios; aggregates are geometric means over cases with the min-max range.",
        "",
        "## Targets",
        "",
        *[f"- {line}" for line in target_lines(payload["targets"])],
        "",
        "## Summary",
        "",
        *table_lines(payload["summary"], markdown=True),
        "",
    ]
    if plots:
        lines += ["## Plots", ""] + [f"![{p}]({p})" for p in plots] + [""]
    for res in results:
        lines += [f"## {res.name}: {res.title}", ""]
        if res.error:
            lines += ["```", res.error, "```", ""]
            continue
        lines += [f"Unit: {res.unit}. {res.seconds:.0f} s.", "", "Variants:", ""]
        lines += [f"- `{k}`: {t}" for k, t in res.variants.items()]
        lines += ["", f"No-cache here: {res.nocache}", ""]
        lines += [*_case_table(res), ""]
        hd = [c for c in res.cases if c.extra.get("host_device")]
        if hd:
            lines += ["Host and device time per call (median ns over single synchronised "
                      "calls: host = until the call returns, device = from then until "
                      "`block_until_ready` returns):", "",
                      "| case | " + " | ".join(f"{LABELS.get(v, v)} host / device"
                                               for v in hd[0].extra["host_device"]) + " |",
                      "|" + "---|" * (1 + len(hd[0].extra["host_device"]))]
            for c in hd:
                lines.append(f"| {c.name} | " + " | ".join(
                    f"{fmt_value(x['host_ns'], 'ns')} / {fmt_value(x['device_ns'], 'ns')}"
                    for x in c.extra["host_device"].values()) + " |")
            lines.append("")
        lines += BENCHMARKS[res.name].details(res)
        if res.extra.get("skipped"):
            lines += [f"Skipped ({len(res.extra['skipped'])}):", ""]
            lines += [f"- {k}: {why}" for k, why in sorted(res.extra["skipped"].items())]
            lines.append("")
    path.write_text("\n".join(lines) + "\n")

# --------------------------------------------------------------------------------------------
# plots
# --------------------------------------------------------------------------------------------


def write_plots(outdir: Path, results: Sequence[BenchResult]) -> list[str]:
    """The registered plots of the benchmarks that ran without error; returns the file
    names written."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    by = {r.name: r for r in results if not r.error}
    written: list[str] = []
    for res, plot in ((by[b.name], p) for b in REGISTRY if b.name in by for p in b.plots):
        fig = plot.draw(res)
        if fig is None:
            continue
        fig.tight_layout()
        fig.savefig(outdir / plot.file, dpi=110)
        plt.close(fig)
        written.append(plot.file)
    return written
