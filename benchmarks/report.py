"""Turn benchmark results into the summary table, target lines, JSON, Markdown and plots.

Aggregates over many cases (every class, every lazy property) are *geometric means* of the
per-case median ratios, shown with the worst case; single-case rows show the geometric mean of
the per-repetition ratios with its 95% t-interval and a verdict from that interval
(:func:`benchmarks.timing.paired_ratio_interval`). What is particular to one benchmark (its
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

from benchmarks.environment import python_build_text
from benchmarks.registry import BENCHMARKS, MAX_BARS, REGISTRY, bar_counts
from benchmarks.rows import LABELS, Row, fmt_value, make_row
from benchmarks.timing import SAME_HIGH, SAME_LOW, VERDICTS, BenchResult, summarize

SLOWER_TEXT = (f"no row slower than numpyro (95% interval of the paired ratio wholly below "
               f"{SAME_LOW:.2f})")


# --------------------------------------------------------------------------------------------
# summary rows
# --------------------------------------------------------------------------------------------


def summary_rows(results: Iterable[BenchResult]) -> list[Row]:
    """Every benchmark's rows; a result its record cannot summarize (a benchmark stopped
    midway, with cases missing) gives an ERROR row instead of losing the others."""
    rows: list[Row] = []
    for res in results:
        error = res.error
        if not error:
            try:
                rows += BENCHMARKS[res.name].rows(res)
            except Exception as exc:
                error = f"summary failed ({'stopped' if res.extra.get('stopped') else 'bug'})" \
                    f": {type(exc).__name__}: {exc}"
        if error:
            rows.append(make_row(res.name, "ERROR", "", speed=False,
                                 note=error.splitlines()[-1][:120]))
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
    then whether any judged row is slower than numpyro (`slower_target`).
    ``judge_timing=False`` (the smoke profile): timing targets show their value but pass N/A
    (``passed`` None)."""
    by = {r.name: r for r in results if not r.error}
    judged = sorted(((t, verdict) for b in REGISTRY if b.name in by for t in b.targets
                     if (verdict := t.check(by[b.name])) is not None),
                    key=lambda tv: tv[0].rank)
    out = [_target(t.key, t.criterion, v.value, v.passed, v.detail)
           if judge_timing or not t.timing or v.passed is None
           else _target(t.key, t.criterion, v.value, None, NOT_JUDGED) for t, v in judged]
    slower = slower_target(rows, judge_timing)
    return out if slower is None else [*out, slower]


def judged_rows(rows: Iterable[Row]) -> list[Row]:
    """The rows the global "slower" target judges (single-case timed rows with a ratio)."""
    return [r for r in rows if r.get("judged") and r.get("ratio") is not None]


def _interval(r: Row) -> str:
    lo, hi = r.get("ratio_lo"), r.get("ratio_hi")
    return (f"{r['ratio']:.2f}x [{lo:.2f}-{hi:.2f}]" if lo is not None and hi is not None
            else f"{r['ratio']:.2f}x (unresolved)")


def verdict_counts(rows: Iterable[Row]) -> dict[str, int]:
    """How many judged rows have each verdict (faster / same / slower / unresolved)."""
    found = [r.get("verdict") or "unresolved" for r in judged_rows(rows)]
    return {v: found.count(v) for v in VERDICTS}


def slower_target(rows: Sequence[Row], judge_timing: bool = True) -> dict[str, Any] | None:
    """The "no row slower" target: it fails when a judged row's 95% interval of the paired
    ratio lies wholly below `SAME_LOW`; its value is the row whose interval reaches least
    high. N/A when no judged row has an interval (one repetition each resolves nothing)."""
    judged = judged_rows(rows)
    if not judged:
        return None
    counts = verdict_counts(judged)
    resolved = [r for r in judged if r.get("ratio_hi") is not None]
    worst = (min(resolved, key=lambda r: r["ratio_hi"]) if resolved
             else min(judged, key=lambda r: r["ratio"]))
    slow = [r for r in judged if r.get("verdict") == "slower"]
    detail = (f"of {len(judged)} judged rows: " + ", ".join(
        f"{counts[v]} {v}" for v in VERDICTS)
        + (" (one repetition: no interval)" if counts["unresolved"] else "")
        + ("; slower: " + "; ".join(f"{r['benchmark']}/{r['case']} {_interval(r)}"
                                     for r in slow) if slow else ""))
    return _target(
        "slower", SLOWER_TEXT, f"worst row {worst['benchmark']} / {worst['case']}: "
        f"{_interval(worst)}", (not slow if resolved else None) if judge_timing else None,
        detail if judge_timing else f"{NOT_JUDGED}; {detail}")


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
            "range", "verdict", "no-cache/stabledist", "note"]
    body = []
    for r in rows:
        nc = r["nocache_ratio"]
        verdict = (r.get("verdict") or "unresolved") if r.get("judged") else "not judged"
        body.append([r["benchmark"], r["case"], fmt_value(r["numpyro"], r["unit"]),
                     fmt_value(r["stabledist"], r["unit"]), fmt_value(r["nocache"], r["unit"]),
                     fmt_ratio(r), r.get("spread") or "", verdict,
                     "-" if nc is None or math.isnan(nc) else f"{nc:.2f}x", r["note"]])
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


MARKS = {"faster": "faster", "slower": "slower", "unresolved": "?"}
"""A judged row's trailing mark in the verdict table by its verdict ("same": none)."""
MARK_WIDTH = 1 + max(map(len, MARKS.values()))


def mark(r: Row) -> str:
    """`MARKS` of a judged row's verdict, with its leading space; "" otherwise."""
    verdict = r.get("verdict") or "unresolved"
    return f" {MARKS[verdict]}" if r.get("judged") and verdict in MARKS else ""


def verdict_table(payload: dict[str, Any]) -> list[str]:
    """The summary rows grouped per benchmark and unit: a heading line per group names the
    unit of its three time columns; ratio = numpyro / stabledist."""
    groups = row_groups(payload["summary"])
    cases = [len(r["case"]) + 2 for _, _, g in groups for r in g]
    num = 10
    case_w = min(max([28, *cases]), WIDTH - 4 * num - MARK_WIDTH)
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
                         + mark(r))
    return lines


def compact_lines(payload: dict[str, Any]) -> list[str]:
    """The terminal summary: the verdict table, then one whole PASS/FAIL/N/A line per target
    (wrapped, never cut; a failed target with its detail), at most ``WIDTH`` wide. The
    published page shows the same lines."""
    lines = [*_wrap("stabledist vs numpyro: the three time columns are in the unit of their "
                    "group's heading; ratio = numpyro time / stabledist time (above 1: "
                    "stabledist faster). A judged row ends in its verdict: \"faster\" or "
                    "\"slower\" when the 95% t-interval of its paired per-repetition ratios "
                    f"lies wholly above {SAME_HIGH:.2f} or below {SAME_LOW:.2f}, nothing when "
                    "the same, \"?\" with one repetition; aggregates and rows with targets "
                    "of their own are not judged", WIDTH, ""), ""]
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
    rows = judged_rows(payload["summary"])
    counts = verdict_counts(rows)
    text = "Verdict: " + (f"{len(errors)} benchmark(s) raised ({', '.join(errors)}); "
                          if errors else "")
    text += (f"{len(judged) - len(failed)} of {len(judged)} judged targets pass"
             + (f" ({len(targets) - len(judged)} N/A"
                + ("" if payload.get("profile", {}).get("judge_timing", True) else
                   ": the smoke profile judges no timing") + ")"
                if len(judged) < len(targets) else "")
             + (f"; failing: {', '.join(failed)}" if failed else "") + ". ")
    if rows:
        text += (f"Of {len(rows)} judged timed rows (95% interval of the paired ratio), "
                 f"stabledist is faster in {counts['faster']}, the same in {counts['same']}, "
                 f"slower in {counts['slower']}"
                 + (f", unresolved in {counts['unresolved']} (one repetition)"
                    if counts["unresolved"] else "") + ". ")
    text += _stops(payload)
    text += f"Exit status {status}"
    if failed and not errors:
        text += (" (--strict: failed targets fail the run)" if strict else
                 " (failed targets fail the run only with --strict)")
    return _wrap(text + ".", WIDTH, "")


def _stops(payload: dict[str, Any]) -> str:
    """Which benchmarks stopped midway or were skipped, and why ("" when none)."""
    stopped = [f"{name} {b['extra']['stopped']}"
               for name, b in payload.get("benchmarks", {}).items()
               if b.get("extra", {}).get("stopped")]
    skipped = [f"{name} ({why})" for name, why in payload.get("skipped", {}).items()]
    return (("Stopped: " + "; ".join(stopped) + ". " if stopped else "")
            + ("Skipped: " + "; ".join(skipped) + ". " if skipped else ""))


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


def host_device_table(cases: Sequence[Any]) -> list[str]:
    """Host and device time per call of the cases that recorded them, one column per
    variant, each cell looked up by its variant (cases record their variants in the order
    they ran, which rotates)."""
    hd = [c for c in cases if c.extra.get("host_device")]
    if not hd:
        return []
    variants = list(dict.fromkeys(v for c in hd for v in c.extra["host_device"]))
    lines = ["Host and device time per call (median ns over single synchronised calls: host = "
             "until the call returns, device = from then until `block_until_ready` returns):",
             "", "| case | " + " | ".join(f"{LABELS.get(v, v)} host / device"
                                          for v in variants) + " |",
             "|" + "---|" * (1 + len(variants))]
    for c in hd:
        split = c.extra["host_device"]
        lines.append(f"| {c.name} | " + " | ".join(
            f"{fmt_value(split[v]['host_ns'], 'ns')} / {fmt_value(split[v]['device_ns'], 'ns')}"
            if v in split else "-" for v in variants) + " |")
    return [*lines, ""]


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
        f"{v['stabledist']}, {python_build_text(env.get('python_build'))}",
        *([f"- {payload['profile_note']}"] if payload.get("profile_note") else []),
        *([f"- not run: {_stops(payload)}"] if _stops(payload) else []),
        f"- backend `{env['backend']}`, device kind `{env['device_kind']}`, "
        f"{env['device_count']} device(s), {env['cpu_count']} CPUs "
        f"(affinity {env['cpu_affinity']}), {env['platform']}",
        f"- total wall time {payload['seconds']:.0f} s",
        "",
        "Ratios are numpyro/stabledist (above 1: stabledist faster). A single case's ratio is "
        "the geometric mean of its per-repetition ratios (interleaved pairs) with their 95% "
        f"t-interval; its verdict: slower when the interval lies wholly below {SAME_LOW:.2f}, "
        f"faster when wholly above {SAME_HIGH:.2f}, else the same (one repetition: "
        "unresolved). Aggregates are geometric means over cases with the min-max range, not "
        "judged.",
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
        lines += host_device_table(res.cases)
        try:
            lines += BENCHMARKS[res.name].details(res)
        except Exception as exc:  # a result stopped midway may lack what details read
            lines += [f"(details unavailable: {type(exc).__name__}: {exc})", ""]
        if res.extra.get("stopped"):
            lines += [f"Stopped: {res.extra['stopped']}.", ""]
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
        try:
            fig = plot.draw(res)
        except Exception as exc:  # a result stopped midway may lack what the plot reads
            print(f"warning: {plot.file} not drawn: {type(exc).__name__}: {exc}",
                  file=sys.stderr)
            continue
        if fig is None:
            continue
        if max(bar_counts(fig), default=0) > MAX_BARS:  # benchmarks/tests/test_smoke.py
            print(f"warning: {plot.file} has {max(bar_counts(fig))} bars in one panel "
                  f"(at most {MAX_BARS} are readable)", file=sys.stderr)
        fig.tight_layout()
        fig.savefig(outdir / plot.file, dpi=110)
        plt.close(fig)
        written.append(plot.file)
    return written
