"""Turn benchmark results into the summary table, target lines, JSON, Markdown and plots.

Aggregates over many cases (every class, every lazy property) are *geometric means* of the
per-case median ratios, shown with the worst case; single-case rows show the median of the
per-repetition ratios with its interquartile range. What is particular to one benchmark (its
rows, targets, report sections and plots) is in its record in :mod:`benchmarks.registry`.
"""

from __future__ import annotations

import json
import math
import sys
import textwrap
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

from benchmarks.registry import BENCHMARKS, MAX_BARS, REGISTRY, bar_counts
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


NOT_JUDGED = "not judged: the smoke profile's timing resolves nothing"


def evaluate_targets(results: Sequence[BenchResult], rows: Sequence[Row],
                     judge_timing: bool = True) -> list[dict[str, Any]]:
    """Every registered target of the benchmarks that ran without error, in rank order,
    then whether any speed row is slower than numpyro. ``judge_timing=False`` (the smoke
    profile): timing targets show their value but pass N/A (``passed`` None)."""
    by = {r.name: r for r in results if not r.error}
    judged = sorted(((t, verdict) for b in REGISTRY if b.name in by for t in b.targets
                     if (verdict := t.check(by[b.name])) is not None),
                    key=lambda tv: tv[0].rank)
    out = [_target(t.key, t.criterion, v.value, v.passed, v.detail)
           if judge_timing or not t.timing or v.passed is None
           else _target(t.key, t.criterion, v.value, None, NOT_JUDGED) for t, v in judged]
    speed_rows = [r for r in rows if r["speed"] and r["ratio"] is not None]
    if speed_rows:
        slow = [r for r in speed_rows if r["ratio"] < SLOWER_BOUND]
        worst = min(speed_rows, key=lambda r: r["ratio"])
        out.append(_target(
            "slower", SLOWER_TEXT, f"worst row {worst['benchmark']} / {worst['case']}: "
            f"{worst['ratio']:.2f}x", not slow if judge_timing else None,
            NOT_JUDGED if not judge_timing else
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
"""Terminal lines at most this wide (longer text wraps; nothing is cut)."""

_TIME_UNITS = {"s": 1.0, "ms": 1e-3, "us": 1e-6, "µs": 1e-6, "ns": 1e-9}
_SCALES = (("s", 1.0), ("ms", 1e-3), ("µs", 1e-6), ("ns", 1e-9))
_VARIANTS = ("stabledist", "numpyro", "nocache")
_HEAD = ("stabledist", "numpyro", "no-cache", "ratio")


def _is_nan(value: float | None) -> bool:
    return value is None or (isinstance(value, float) and math.isnan(value))


def _number(value: float | None) -> str:
    """Three significant digits, never an exponent (a thousands separator instead)."""
    if _is_nan(value):
        return "-"
    assert value is not None
    value = float(f"{value:.3g}")
    if value == 0:
        return "0"
    if abs(value) >= 100:
        return f"{value:,.0f}"
    return f"{value:.{2 - math.floor(math.log10(abs(value)))}f}"


def fmt_x(ratio: float | None) -> str:
    """A ratio: two decimals below 10x (1.01x vs 0.99x matters), three digits above."""
    if _is_nan(ratio):
        return "-"
    assert ratio is not None
    return f"{ratio:.2f}x" if ratio < 10 else f"{ratio:.3g}x"


def column_scale(rows: Sequence[Row]) -> tuple[str, float]:
    """The group's display unit and the factor from its rows' unit to it: rows of one
    benchmark and one unit share it, so a column never mixes units. Times: the largest of
    s/ms/µs/ns in which the smallest value is at least 0.5."""
    unit = rows[0]["unit"]
    base, _, per = unit.partition("/")
    seconds = _TIME_UNITS.get(base.strip())
    if seconds is None:
        return unit, 1.0
    values = [abs(r[v]) * seconds for r in rows for v in _VARIANTS if not _is_nan(r[v])]
    values = [v for v in values if v > 0]
    low = min(values, default=1.0)
    name, scale = next(((n, f) for n, f in _SCALES if low / f >= 0.5), _SCALES[-1])
    return (f"{name} per {per.strip()}" if per else name), seconds / scale


def _cell(value: float | None, unit: str, factor: float) -> str:
    if _is_nan(value):
        return "-"
    assert value is not None
    if unit == "MB":
        return f"{value:+.1f}"
    if unit == "traces":
        return f"{value:.0f}"
    return _number(value * factor)


def row_groups(rows: Sequence[Row]) -> list[tuple[str, str, list[Row]]]:
    """``(benchmark, unit, rows)`` per benchmark and unit, in order of first appearance."""
    groups: dict[tuple[str, str], list[Row]] = {}
    for r in rows:
        groups.setdefault((r["benchmark"], r["unit"]), []).append(r)
    return [(b, u, g) for (b, u), g in groups.items()]


def _wrap(text: str, width: int, indent: str) -> list[str]:
    return textwrap.wrap(text, width, subsequent_indent=indent, break_on_hyphens=False,
                         break_long_words=True) or [""]


def _slow(r: Row) -> bool:
    return bool(r["speed"]) and r["ratio"] is not None and r["ratio"] < SLOWER_BOUND


def verdict_table(payload: dict[str, Any]) -> list[str]:
    """The summary rows grouped per benchmark and unit: a heading line per group names the
    unit of its three time columns; ratio = numpyro / stabledist."""
    groups = row_groups(payload["summary"])
    cases = [len(r["case"]) + 2 for _, _, g in groups for r in g]
    num = 10
    case_w = min(max([28, *cases]), WIDTH - 4 * num - 2)
    lines = [f"{'case':<{case_w}}" + "".join(f"{h:>{num}}" for h in _HEAD),
             "-" * (case_w + 4 * num)]
    for bench, unit, rows in groups:
        record = BENCHMARKS.get(bench)
        label, factor = column_scale(rows) if unit else ("", 1.0)
        what = record.heading if record else ""
        if any(r["case"] == "ERROR" for r in rows):
            label, what = "", "ERROR (see report.md)"
        lines.append(f"{bench}: {what}" + (f"  [{label}]" if label else ""))
        for r in rows:
            cells = [_cell(r[v], unit, factor) for v in _VARIANTS] + [fmt_x(r["ratio"])]
            name = _wrap(r["case"], case_w - 2, "    ")
            lines += [f"  {n}" for n in name[:-1]]
            lines.append(f"  {name[-1]:<{case_w - 2}}" + "".join(f"{c:>{num}}" for c in cells)
                         + (" *" if _slow(r) else ""))
    return lines


def compact_lines(payload: dict[str, Any]) -> list[str]:
    """The terminal summary: the verdict table, then one whole PASS/FAIL/N/A line per target
    (wrapped, never cut; a failed target with its detail), at most ``WIDTH`` wide. The
    published page shows the same lines."""
    lines = [*_wrap("stabledist vs numpyro: the three time columns are in the unit of their "
                    "group's heading; ratio = numpyro time / stabledist time (above 1: "
                    "stabledist faster; * = more than 5% slower)", WIDTH, ""), ""]
    lines += verdict_table(payload)
    lines += ["", "Targets:"]
    for t in payload["targets"]:
        status = {True: "PASS", False: "FAIL", None: "N/A "}[t["passed"]]
        text = f"{status}  {t['criterion']}: {t['value']}"
        if t["detail"] and t["passed"] is False:
            text += f" ({t['detail']})"
        lines += _wrap(text, WIDTH, " " * 6)
    return lines


def verdict_lines(payload: dict[str, Any], status: int, strict: bool,
                  errors: Sequence[str]) -> list[str]:
    """The closing verdict: targets, how the timed rows compare, the exit status."""
    targets = payload["targets"]
    judged = [t for t in targets if t["passed"] is not None]
    failed = [t["target"] for t in judged if t["passed"] is False]
    speed = [r for r in payload["summary"] if r["speed"] and r["ratio"] is not None]
    faster = sum(r["ratio"] > 1 / SLOWER_BOUND for r in speed)
    slower = sum(_slow(r) for r in speed)
    text = "Verdict: " + (f"{len(errors)} benchmark(s) raised ({', '.join(errors)}); "
                          if errors else "")
    text += (f"{len(judged) - len(failed)} of {len(judged)} judged targets pass"
             + (f" ({len(targets) - len(judged)} N/A"
                + ("" if payload.get("profile", {}).get("judge_timing", True) else
                   ": the smoke profile judges no timing") + ")"
                if len(judged) < len(targets) else "")
             + (f"; failing: {', '.join(failed)}" if failed else "") + ". ")
    if speed:
        text += (f"stabledist is faster by more than 5% in {faster} of {len(speed)} timed "
                 f"rows, within 5% in {len(speed) - faster - slower}, slower by more than 5% "
                 f"in {slower} (*). ")
    text += f"Exit status {status}"
    if failed and not errors:
        text += (" (--strict: failed targets fail the run)" if strict else
                 " (failed targets fail the run only with --strict)")
    return _wrap(text + ".", WIDTH, "")


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
        if max(bar_counts(fig), default=0) > MAX_BARS:  # tests/test_benchmarks_smoke.py
            print(f"warning: {plot.file} has {max(bar_counts(fig))} bars in one panel "
                  f"(at most {MAX_BARS} are readable)", file=sys.stderr)
        fig.tight_layout()
        fig.savefig(outdir / plot.file, dpi=110)
        plt.close(fig)
        written.append(plot.file)
    return written
