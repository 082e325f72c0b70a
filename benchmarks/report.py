"""The run's results as the verdict table, the target lines, report.md and the plots.

Generic: what is particular to one benchmark (its rows, targets, report sections and plots)
is in its record in :mod:`benchmarks.registry`.
"""

from __future__ import annotations

import dataclasses
import math
import sys
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

from benchmarks.registry import BENCHMARKS, MAX_BARS, REGISTRY, bar_counts
from stabledist.benchmark._environment import python_build_text
from stabledist.benchmark._measure import SAME_HIGH, SAME_LOW, VERDICTS, BenchResult, summarize
from stabledist.benchmark._rows import (
    LABELS,
    WIDTH,
    Row,
    Verdict,
    fmt_interval,
    fmt_value,
    group_table,
    make_row,
    worst_of,
    wrap,
)

SLOWER_TEXT = (f"no row slower than numpyro (95% interval of the paired ratio wholly below "
               f"{SAME_LOW:.2f})")


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


def _target(key: str, criterion: str, verdict: Verdict) -> dict[str, Any]:
    return {"target": key, "criterion": criterion, **dataclasses.asdict(verdict)}


NOT_JUDGED = "not judged: the smoke profile's timing resolves nothing"


def evaluate_targets(results: Sequence[BenchResult], rows: Sequence[Row],
                     judge_timing: bool = True) -> list[dict[str, Any]]:
    """Every registered target of the benchmarks that ran without error, in rank order, then
    `slower_target`; ``judge_timing=False`` (smoke): timing targets show their value, N/A."""
    by = {r.name: r for r in results if not r.error}
    judged = sorted(((t, verdict) for b in REGISTRY if b.name in by for t in b.targets
                     if (verdict := t.check(by[b.name])) is not None),
                    key=lambda tv: tv[0].rank)
    out = [_target(t.key, t.criterion, v if judge_timing or not t.timing or v.passed is None
                   else Verdict(v.value, None, NOT_JUDGED)) for t, v in judged]
    slower = slower_target(rows, judge_timing)
    return out if slower is None else [*out, slower]


def judged_rows(rows: Iterable[Row]) -> tuple[list[Row], dict[str, int]]:
    """The rows the global "slower" target judges (single-case timed rows with a ratio), and
    how many have each verdict (faster / same / slower / unresolved)."""
    judged = [r for r in rows if r.get("judged") and r.get("ratio") is not None]
    found = [r.get("verdict") or "unresolved" for r in judged]
    return judged, {v: found.count(v) for v in VERDICTS}


def slower_target(rows: Sequence[Row], judge_timing: bool = True) -> dict[str, Any] | None:
    """`SLOWER_TEXT`; its value is the judged row whose interval reaches least high (`worst_of`).
    N/A when no judged row has an interval (one repetition each resolves nothing)."""
    judged, counts = judged_rows(rows)
    if not judged:
        return None
    worst, slow, resolved = worst_of(judged)
    detail = (f"of {len(judged)} judged rows: " + ", ".join(f"{counts[v]} {v}" for v in VERDICTS)
              + (" (one repetition: no interval)" if counts["unresolved"] else "")
              + ("; slower: " + "; ".join(f"{r['benchmark']}/{r['case']} {fmt_interval(r)}"
                                           for r in slow) if slow else ""))
    return _target("slower", SLOWER_TEXT, Verdict(
        f"worst row {worst['benchmark']} / {worst['case']}: {fmt_interval(worst)}",
        (not slow if resolved else None) if judge_timing else None,
        detail if judge_timing else f"{NOT_JUDGED}; {detail}"))


def _summary_table(rows: Sequence[Row]) -> list[str]:
    """report.md's summary: every field of every row."""
    head = ["benchmark", "case", "numpyro", "stabledist", "no-cache", "numpyro/stabledist",
            "range", "verdict", "no-cache/stabledist", "note"]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for r in rows:
        nc = r["nocache_ratio"]
        verdict = (r.get("verdict") or "unresolved") if r.get("judged") else "not judged"
        ratio = "-" if r["ratio"] is None else fmt_interval(r, "")
        values = [fmt_value(r[v], r["unit"]) for v in ("numpyro", "stabledist", "nocache")]
        cells = [r["benchmark"], r["case"], *values, ratio, r.get("spread") or "", verdict,
                 "-" if nc is None or math.isnan(nc) else f"{nc:.2f}x", r["note"]]
        lines.append("| " + " | ".join(c.replace("|", "/") for c in cells) + " |")
    return lines


def _heading(bench: str, rows: Sequence[Row]) -> str:
    return ("ERROR (see report.md)" if any(r["case"] == "ERROR" for r in rows)
            else getattr(BENCHMARKS.get(bench), "heading", ""))


def compact_lines(payload: dict[str, Any]) -> list[str]:
    """The terminal summary (and the page's): the verdict table, then one whole PASS/FAIL/N/A
    line per target (wrapped, never cut; a failed one with its detail), ``WIDTH`` wide."""
    lines = [*wrap("stabledist vs numpyro: the three time columns are in the unit of their "
                    "group's heading; ratio = numpyro time / stabledist time (above 1: "
                    "stabledist faster). A judged row ends in its verdict: \"faster\" or "
                    "\"slower\" when the 95% t-interval of its paired per-repetition ratios "
                    f"lies wholly above {SAME_HIGH:.2f} or below {SAME_LOW:.2f}, nothing when "
                    "the same, \"?\" with one repetition; aggregates and rows with targets "
                    "of their own are not judged", WIDTH, ""), ""]
    lines += [*group_table(payload["summary"], _heading), "", "Targets:"]
    for t in payload["targets"]:
        lines += wrap(target_line(t, t["passed"] is False, " "), WIDTH, " " * 6)
    return lines


def verdict_lines(payload: dict[str, Any], status: int, strict: bool,
                  errors: Sequence[str]) -> list[str]:
    """The closing verdict: targets, how the timed rows compare, the exit status."""
    targets = payload["targets"]
    judged = [t for t in targets if t["passed"] is not None]
    failed = [t["target"] for t in judged if t["passed"] is False]
    rows, counts = judged_rows(payload["summary"])
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
    text += _stops(payload) + f"Exit status {status}"
    if failed and not errors:
        text += (" (--strict: failed targets fail the run)" if strict else
                 " (failed targets fail the run only with --strict)")
    return wrap(text + ".", WIDTH, "")


def _stops(payload: dict[str, Any]) -> str:
    """Which benchmarks stopped midway or were skipped, and why ("" when none)."""
    stopped = [f"{name} {b['extra']['stopped']}"
               for name, b in payload.get("benchmarks", {}).items()
               if b.get("extra", {}).get("stopped")]
    skipped = [f"{name} ({why})" for name, why in payload.get("skipped", {}).items()]
    return (("Stopped: " + "; ".join(stopped) + ". " if stopped else "")
            + ("Skipped: " + "; ".join(skipped) + ". " if skipped else ""))


def target_line(t: dict[str, Any], detail: bool = True, sep: str = "  ") -> str:
    """``PASS  criterion: value`` (``N/A`` when not judged), with its detail."""
    status = {True: "PASS", False: "FAIL", None: "N/A "}[t["passed"]]
    return (f"{status}  {t['criterion']}: {t['value']}"
            + (f"{sep}({t['detail']})" if t["detail"] and detail else ""))


def _case_table(res: BenchResult) -> list[str]:
    variants = [*res.variants, *sorted({v for c in res.cases for v in c.samples}
                                       - set(res.variants))]
    head = ["case", *variants, "numpyro/stabledist (IQR)", "no-cache/stabledist"]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for c in res.cases:
        unit = c.params.get("unit", res.unit)
        cells = [c.name, *(fmt_value(c.median(v), unit) for v in variants)]
        r = summarize(c.ratio("numpyro", "stabledist"))
        cells.append(f"{r['median']:.2f}x ({r['q1']:.2f}-{r['q3']:.2f})" if r.get("n") else "-")
        nc = c.ratio_median("nocache", "stabledist")
        cells.append(f"{nc:.2f}x" if nc else "-")
        lines.append("| " + " | ".join(cells) + " |")
    return lines


def host_device_table(cases: Sequence[Any]) -> list[str]:
    """Host and device time per call of the cases that recorded them, a cell looked up by its
    variant (cases record their variants in the order they ran, which rotates)."""
    if not (hd := [c for c in cases if c.extra.get("host_device")]):
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
    env, v = payload["environment"], payload["environment"]["versions"]
    lines = [
        "# stabledist vs numpyro: benchmark report", "",
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
        f"- total wall time {payload['seconds']:.0f} s", "",
        "Ratios are numpyro/stabledist (above 1: stabledist faster). A single case's ratio is "
        "the geometric mean of its per-repetition ratios (interleaved pairs) with their 95% "
        f"t-interval; its verdict: slower when the interval lies wholly below {SAME_LOW:.2f}, "
        f"faster when wholly above {SAME_HIGH:.2f}, else the same (one repetition: "
        "unresolved). Aggregates are geometric means over cases with the min-max range, not "
        "judged.",
        "", "## Targets", "", *[f"- {target_line(t)}" for t in payload["targets"]],
        "", "## Summary", "", *_summary_table(payload["summary"]), "",
    ]
    if plots:
        lines += ["## Plots", ""] + [f"![{p}]({p})" for p in plots] + [""]
    for res in results:
        lines += [f"## {res.name}: {res.title}", ""]
        if res.error:
            lines += ["```", res.error, "```", ""]
            continue
        lines += [f"Unit: {res.unit}. {res.seconds:.0f} s.", "", "Variants:", "",
                  *(f"- `{k}`: {t}" for k, t in res.variants.items()),
                  "", f"No-cache here: {res.nocache}", "", *_case_table(res), "",
                  *host_device_table(res.cases)]
        try:
            lines += BENCHMARKS[res.name].details(res)
        except Exception as exc:  # a result stopped midway may lack what details read
            lines += [f"(details unavailable: {type(exc).__name__}: {exc})", ""]
        if res.extra.get("stopped"):
            lines += [f"Stopped: {res.extra['stopped']}.", ""]
        if res.extra.get("skipped"):
            lines += [f"Skipped ({len(res.extra['skipped'])}):", "",
                      *(f"- {k}: {why}" for k, why in sorted(res.extra["skipped"].items())), ""]
    path.write_text("\n".join(lines) + "\n")


def write_plots(outdir: Path, results: Sequence[BenchResult]) -> list[str]:
    """The registered plots of the benchmarks that ran without error; the files written."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    by = {r.name: r for r in results if not r.error}
    written: list[str] = []
    for res, plot in ((by[b.name], p) for b in REGISTRY if b.name in by for p in b.plots):
        try:
            fig = plot.draw(res)
        except Exception as exc:  # a result stopped midway may lack what the plot reads
            print(f"warning: {plot.file} not drawn: {type(exc).__name__}: {exc}", file=sys.stderr)
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
