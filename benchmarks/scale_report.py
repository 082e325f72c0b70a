"""The ``scale`` benchmark's rows, targets and plot (its record is in `benchmarks.registry`).

A module of its own because the registry is already long; no jax here.
"""

from __future__ import annotations

import math
import operator
import statistics
from collections.abc import Sequence
from functools import reduce
from typing import TYPE_CHECKING, Any

from stabledist.benchmark._measure import BenchResult, Case, t_975
from stabledist.benchmark._rows import Row, Verdict, fmt_interval, make_row, single, worst_of

if TYPE_CHECKING:
    from matplotlib.figure import Figure

FLATTEN_BOUND = 5.0
"""flatten + unflatten of N distributions: at least this many times numpyro's speed."""
COLLECT_BOUND = 1.1
"""A full collection over a live heap of N instances: at most this many times numpyro's."""
MEMORY_BOUND = 1.1
"""Memory per live instance: at most this many times numpyro's."""
KEPT_SLACK = 16.0
"""Bytes per dropped instance that may stay beyond numpyro's (allocator rounding)."""
SHAPE_GROWTH = 0.1
"""Table entries per new distinct shape at most (a memo with a cap, or keyed by ranks,
adds none; one entry per shape is growth without bound)."""
SLOPE_TOLERANCE = 0.03
"""A slope difference whose 95% interval lies wholly below minus this is "steeper"."""

STAGING = ("sites_trace", "sites_compile", "sites_fresh_trace", "sites_fresh_compile",
           "plate_compile")


def _gc_note(case: Case) -> str:
    """Mean and slowest repetition per variant, and the generation-2 collections that ran
    in its repetitions: the collector is part of the measure."""
    to_ms = 1e-6 if case.params.get("unit", "s").startswith("ns") else 1e3
    gcs = case.extra.get("gc", {})
    return "; ".join(f"{v} mean {statistics.fmean(s) * to_ms:.3g} max {max(s) * to_ms:.3g} ms, "
                     f"gen-2 collections {int(gcs.get(v, {}).get('gen2', 0))}"
                     for v in ("numpyro", "stabledist") if (s := case.samples.get(v)))


def child_result_cases(runs: dict[str, dict[str, Any]]) -> list[Case]:
    """The children's numbers as cases: one value per variant (counts and bytes; the memory
    per instance has one value per tracemalloc repetition)."""
    def each(*path: str) -> dict[str, list[float]]:
        found: dict[str, Any] = {v: reduce(operator.getitem, path, run) for v, run in runs.items()}
        return {v: [float(x) for x in (value if isinstance(value, list) else [value])]
                for v, value in found.items()}

    mem = runs["stabledist"]["memory"]
    return [
        Case(f"memory per instance, {mem.get('traced_n', mem['n']):,} live (tracemalloc)",
             {"kind": "mem_traced", "unit": "bytes"}, each("memory", "traced_per")),
        Case(f"memory per instance, {mem['n']:,} live (RSS)",
             {"kind": "mem_rss", "unit": "bytes"}, each("memory", "rss_per")),
        Case("kept after the instances are dropped (tracemalloc)",
             {"kind": "mem_kept", "unit": "bytes"}, each("memory", "kept")),
        Case("gc-tracked objects per live instance", {"kind": "mem_objects", "unit": "objects"},
             each("memory", "objects_per")),
        *(Case(f"gen-2 collections: {key}", {"kind": "gc_gen2", "unit": "count"},
               each("cycles", key, "gen2")) for key in runs["stabledist"]["cycles"]),
        *(Case(f"a full collection over {key} live instances", {"kind": "gc_full", "unit": "ms"},
               each("heap", key)) for key in runs["stabledist"].get("heap", {})),
    ]


def scale_rows(res: BenchResult) -> list[Row]:
    """Staging and per-call rows (judged by the "no row slower" rule), the pytree rows
    (their own target), memory, collections and the tables."""
    timed = res.of_kind(*STAGING, "sites_call", "plate_call", "tree_trip", "tree_tree_map")
    rows = [single(res.name, c, c.params["unit"], note=_gc_note(c),
                   judged=c.params["kind"] != "tree_trip") for c in timed]
    for c in res.of_kind("mem_traced", "mem_rss", "mem_kept", "mem_objects", "gc_gen2", "gc_full"):
        np_, sd = c.median("numpyro"), c.median("stabledist")
        rows.append(make_row(res.name, c.name, c.params["unit"], numpyro=np_, stabledist=sd,
                             ratio=np_ / sd if np_ and sd else None, speed=False))
    if tables := _tables(res):
        grow, new = _shape_growth(tables)
        rows.append(make_row(
            res.name, f"hoisting entries after {tables['after_shapes']['shapes']} shapes",
            "count", stabledist=tables["after_shapes"]["hoisting_entries"], speed=False,
            note=f"+{grow} over the last {new} new shapes"))
    return rows


def _tables(res: BenchResult) -> dict[str, Any] | None:
    return res.extra.get("children", {}).get("stabledist", {}).get("tables")


def _shape_growth(tables: dict[str, Any]) -> tuple[int, int]:
    """The hoisting entries the second half of the new shapes added, and how many shapes."""
    half, full = tables["after_half_shapes"], tables["after_shapes"]
    return full["hoisting_entries"] - half["hoisting_entries"], full["shapes"] - half["shapes"]


def log_slope(points: Sequence[tuple[float, float]]) -> dict[str, float] | None:
    """Least-squares slope of ``log y`` on ``log x`` with its 95% t-interval (None with fewer
    than two distinct x, or no residual degree of freedom for an interval: lo = hi)."""
    pts = [(math.log(x), math.log(y)) for x, y in points if x > 0 and y > 0]
    if len({x for x, _ in pts}) < 2:
        return None
    mx = statistics.fmean(x for x, _ in pts)
    my = statistics.fmean(y for _, y in pts)
    sxx = sum((x - mx) ** 2 for x, _ in pts)
    slope = sum((x - mx) * (y - my) for x, y in pts) / sxx
    df = len(pts) - 2
    if df < 1:
        return {"slope": slope, "lo": slope, "hi": slope}
    resid = sum((y - my - slope * (x - mx)) ** 2 for x, y in pts)
    half = t_975(df) * math.sqrt(resid / df / sxx)
    return {"slope": slope, "lo": slope - half, "hi": slope + half}


def _slopes(cases: Sequence[Case]) -> dict[str, Any] | None:
    """Each library's log-log slope of its medians against N, and the slope of the paired
    log ratio numpyro/stabledist against N over every repetition: below zero, stabledist
    grows the steeper."""
    if len({c.params["n"] for c in cases}) < 2:
        return None
    out: dict[str, Any] = {v: log_slope([(c.params["n"], c.median(v) or 0) for c in cases])
                           for v in ("numpyro", "stabledist")}
    out["ratio"] = log_slope([(c.params["n"], a / b) for c in cases
                              for a, b in zip(c.samples["numpyro"], c.samples["stabledist"])])
    return out


def growth_target(res: BenchResult) -> Verdict | None:
    """At every N no staging row slower (95% interval), nor steeper (`SLOPE_TOLERANCE`)."""
    cases = res.of_kind(*STAGING)
    if not (rows := [single(res.name, c, "s") for c in cases]):
        return None
    worst, slower, resolved = worst_of(rows)
    slow = [r["case"] for r in slower]
    slopes = {k: _slopes([c for c in cases if c.params["kind"] == k]) for k in STAGING}
    steep = [k for k, s in slopes.items() if s and s["ratio"]["hi"] < -SLOPE_TOLERANCE]
    text = "; ".join(
        f"{k}: slope numpyro {s['numpyro']['slope']:.2f}, stabledist "
        f"{s['stabledist']['slope']:.2f}, ratio {s['ratio']['slope']:+.3f} "
        f"[{s['ratio']['lo']:+.3f}, {s['ratio']['hi']:+.3f}]"
        for k, s in slopes.items() if s)
    return Verdict(f"worst {worst['case']} {fmt_interval(worst, '')}",
                   (not slow and not steep) if resolved else None,
                   ("slower: " + ", ".join(slow) + "; " if slow else "")
                   + ("steeper: " + ", ".join(steep) + "; " if steep else "") + text)


def _mean_ratio(case: Case) -> float:
    """numpyro's mean time over stabledist's: every repetition counts, the ones a full
    collection slowed too (the collector is part of the measure)."""
    a, b = case.samples.get("numpyro") or [0.0], case.samples.get("stabledist") or [0.0]
    return statistics.fmean(a) / statistics.fmean(b) if statistics.fmean(b) else 0.0


def flatten_target(res: BenchResult) -> Verdict | None:
    """At least `FLATTEN_BOUND` times numpyro's speed at every N, by the median times (a
    generation-2 collection costs either library the same; the mean is in the detail)."""
    ratios = [(r, c) for c in res.of_kind("tree_trip")
              if (r := c.ratio_median("numpyro", "stabledist")) is not None]
    if not ratios:
        return None
    worst = min(ratios, key=lambda rc: rc[0])
    return Verdict(f"worst {worst[1].name} {worst[0]:.1f}x (median times)",
                   worst[0] >= FLATTEN_BOUND, "; ".join(
                       f"{c.name} {r:.1f}x (mean {_mean_ratio(c):.1f}x; {_gc_share(c)})"
                       for r, c in ratios))


def _gc_share(case: Case) -> str:
    """Each library's generation-2 collections in its repetitions and their share of its
    time: the floor the two share."""
    parts = []
    for v in ("stabledist", "numpyro"):
        gc = case.extra.get("gc", {}).get(v, {})
        total_ms = case.extra.get("spent_ms", {}).get(v, 0.0)
        share = gc.get("gen2_ms", 0.0) / total_ms if total_ms else 0.0
        parts.append(f"{v} {int(gc.get('gen2', 0))} gen-2 collections, {share:.0%} of its time")
    return ", ".join(parts)


def memory_target(res: BenchResult) -> Verdict | None:
    if not (cases := res.of_kind("mem_traced", "mem_rss")):
        return None
    found = [((c.median("stabledist") or 0) / (c.median("numpyro") or 1), c) for c in cases]
    worst = max(found, key=lambda rc: rc[0])
    return Verdict(f"worst {worst[1].name} {worst[0]:.2f}x numpyro's",
                   worst[0] <= MEMORY_BOUND, "; ".join(
                       f"{c.name}: stabledist {c.median('stabledist'):,.0f}, numpyro "
                       f"{c.median('numpyro'):,.0f} bytes" for _, c in found))


def release_target(res: BenchResult) -> Verdict | None:
    kept = res.of_kind("mem_kept")
    runs = res.extra.get("children", {})
    if not kept or "stabledist" not in runs:
        return None
    sd, np_ = kept[0].median("stabledist") or 0.0, kept[0].median("numpyro") or 0.0
    cache = runs["stabledist"]["memory"]["cache_after_drop"] + runs["stabledist"][
        "cache_after_cycles"]
    ok = sd <= np_ + KEPT_SLACK and not any(cache)
    return Verdict(f"stabledist keeps {sd:.0f} bytes per dropped instance (numpyro {np_:.0f})"
                   f"; cache entries after the drops {cache}", ok,
                   "tracemalloc: what the process still holds after the instances are "
                   "dropped and collected, per instance")


def gc_target(res: BenchResult) -> Verdict | None:
    """No more generation-2 collections than numpyro's (counts: judged in every profile)."""
    runs = res.extra.get("children", {})
    if set(runs) != {"numpyro", "stabledist"}:
        return None
    cycles = {k: (runs["numpyro"]["cycles"][k]["gen2"], v["gen2"])
              for k, v in runs["stabledist"]["cycles"].items()}
    more = [k for k, (a, b) in cycles.items() if b > a]
    fresh = {v: runs[v]["fresh"] for v in runs}
    return Verdict(", ".join(f"{k}: {b} vs {a}" for k, (a, b) in cycles.items()), not more,
                   ("more: " + ", ".join(more) + "; " if more else "")
                   + "right after the import (informative): stabledist "
                   f"{fresh['stabledist']['gen2']}, numpyro {fresh['numpyro']['gen2']}")


def heap_target(res: BenchResult) -> Verdict | None:
    """A full collection over the live instances at most `COLLECT_BOUND` times numpyro's."""
    runs = res.extra.get("children", {})
    if set(runs) != {"numpyro", "stabledist"} or not runs["stabledist"].get("heap"):
        return None
    heap = {k: (runs["numpyro"]["heap"][k], v) for k, v in runs["stabledist"]["heap"].items()}
    slower = [k for k, (a, b) in heap.items() if b > COLLECT_BOUND * a]
    return Verdict("; ".join(f"over {k} live: {b:.1f} ms vs {a:.1f} ms"
                             for k, (a, b) in heap.items()), not slower,
                   ("slower: " + ", ".join(slower)) if slower else "")


def tables_target(res: BenchResult) -> Verdict | None:
    if not (tables := _tables(res)):
        return None
    inst = tables["after_instances"]
    grow, new = _shape_growth(tables)
    ok = inst["owners"] == 0 and inst["values"] == 0 and grow <= SHAPE_GROWTH * new
    return Verdict(f"after the instances: {inst['owners']} owners, {inst['values']} values; "
                   f"hoisting +{grow} entries over {new} new shapes", ok,
                   f"after {tables['after_classes']['classes']} classes' lazy values: "
                   f"{tables['after_classes']}")


def scale_plot(res: BenchResult) -> Figure | None:
    """Log-log: staging time against the number of sites, and pytree time against the
    number of distributions; median and interquartile range per variant."""
    import matplotlib.pyplot as plt

    from benchmarks.registry import COLORS, label_panel

    panels = ((STAGING, "sample sites", "seconds (median, IQR)",
               "jitted log density: trace, trace + compile"),
              (("tree_trip", "tree_tree_map"), "distributions in the pytree",
               "seconds per call (median, IQR)", "pytree: flatten + unflatten, tree_map"))
    if not res.of_kind(*STAGING, "tree_trip"):
        return None
    fig, axes = plt.subplots(1, 2, figsize=(11, 4.4))
    styles = ["-", "--", ":", "-."]
    for ax, (kinds, xlabel, ylabel, title) in zip(axes, panels):
        series: dict[str, list[Case]] = {}
        for c in res.of_kind(*kinds):
            key = c.name.split(":")[-1].strip() + (", read" if c.params.get("read") else "")
            series.setdefault(f"{c.name.split()[0]} {key}", []).append(c)
        for i, (label, cases) in enumerate(series.items()):
            _line(ax, cases, label, styles[i % len(styles)], COLORS)
        label_panel(ax, xlabel, ylabel, title, loglog=True, fontsize=7)
    fig.suptitle("Scale: time against size (stabledist blue, numpyro red)", fontsize=10)
    return fig


def _line(ax: Any, cases: list[Case], label: str, style: str, colors: dict[str, str]) -> None:
    cases = sorted(cases, key=lambda c: c.params["n"])
    xs = [c.params["n"] for c in cases]
    factor = 1e-9 if cases[0].params.get("unit", "s").startswith("ns") else 1.0
    for v in ("numpyro", "stabledist"):
        values = [sorted(c.samples[v]) for c in cases]
        med = [statistics.median(s) * factor for s in values]
        lo = [m - s[len(s) // 4] * factor for m, s in zip(med, values)]
        hi = [s[-1 - len(s) // 4] * factor - m for m, s in zip(med, values)]
        ax.errorbar(xs, med, yerr=[lo, hi], color=colors[v], ls=style, marker="o", ms=3,
                    capsize=2, label=f"{label} ({v})")
