"""The registry of benchmarks: one `Benchmark` record each, in `REGISTRY` (the run order).

A record says how its benchmark runs, what the progress tracker plans for it, and how its
result becomes rows, target lines, report.md sections and plots: the runner and the report
walk the records and name no benchmark. No jax at import time (`Deferred`): ``python -m
benchmarks`` lists the names before it configures jax.
"""

from __future__ import annotations

import importlib
import math
import statistics
from collections.abc import Callable
from dataclasses import dataclass
from functools import partial
from typing import TYPE_CHECKING, Any

from benchmarks import scale_report
from benchmarks.bench_import import MAX_EXTRA_MIB, MAX_RATIO, import_rows, import_target
from benchmarks.config import PROFILES, Profile
from benchmarks.lazy_report import FLOORS, first_read_guard, hit_guard, lazy_rows, miss_guard
from stabledist.benchmark._measure import (
    BenchResult,
    Case,
    geomean,
    paired_ratio_interval,
    summarize,
)
from stabledist.benchmark._rows import (
    LABELS,
    Row,
    Verdict,
    aggregate,
    first_call_row,
    fmt_interval,
    fmt_value,
    host_device_note,
    make_row,
    single,
    worst_of,
)

if TYPE_CHECKING:
    from matplotlib.figure import Figure


@dataclass(frozen=True)
class Target:
    """A pass/fail criterion judged on one benchmark's result (``check`` None: nothing to
    judge in this run); ``rank`` orders the target lines, headline targets first; a
    ``timing`` target is N/A in a profile that judges no timing (smoke)."""

    key: str
    criterion: str
    rank: int
    check: Callable[[BenchResult], Verdict | None]
    timing: bool = True


@dataclass(frozen=True)
class Plot:
    """One PNG of one benchmark's result (``draw`` None: nothing to draw in this run), at
    most `MAX_BARS` bars per panel; ``caption``: its caption in docs/benchmarks.md."""

    file: str
    caption: str
    draw: Callable[[BenchResult], Figure | None]


@dataclass(frozen=True)
class Benchmark:
    """One benchmark: ``name`` (``--only``, results.json), ``summary`` (``--help``, progress),
    ``heading`` (its group in the verdict table); how it runs, its progress ``steps`` and
    planned ``seconds`` on 2 busy cores; its rows, targets, report.md ``details``, plots."""

    name: str
    summary: str
    heading: str
    run: Callable[[Profile], BenchResult]
    steps: Callable[[Profile], int]
    seconds: Callable[[Profile], float]
    rows: Callable[[BenchResult], list[Row]]
    targets: tuple[Target, ...] = ()
    details: Callable[[BenchResult], list[str]] = lambda res: []
    plots: tuple[Plot, ...] = ()


@dataclass(frozen=True)
class Deferred:
    """``benchmarks.<module>.<function>(profile)``, imported at the first call (after
    ``python -m benchmarks`` has configured jax)."""

    module: str
    function: str

    def __call__(self, profile: Profile) -> Any:
        return getattr(importlib.import_module(f"benchmarks.{self.module}"), self.function)(profile)


def _planned(smoke: float, quick: float, default: float, full: float,
             accelerator: float | None = None) -> Callable[[Profile], float]:
    """Planned seconds per profile (another name: the default's); ``accelerator``: on one
    GPU. A deadline skips benchmarks by these; the time-left estimate starts from them."""
    table = {"smoke": smoke, "quick": quick, "default": default, "full": full,
             "accelerator": default if accelerator is None else accelerator}
    return lambda p: table.get(p.name, default)


def _on_case(name: str, check: Callable[[BenchResult, Case], Verdict]
             ) -> Callable[[BenchResult], Verdict | None]:
    """``check`` of the result's case ``name``; no verdict when the run has no such case."""

    def on_case(res: BenchResult) -> Verdict | None:
        case = res.case(name)
        return None if case is None else check(res, case)

    return on_case


def _pyplot() -> Any:
    import matplotlib.pyplot as plt  # the report has chosen the Agg backend

    return plt


def label_panel(ax: Any, xlabel: str, ylabel: str, title: str, loglog: bool = False,
                **legend: Any) -> None:
    """A panel's axis labels, title, legend (``legend``: its options) and grid."""
    if loglog:
        ax.set_xscale("log")
        ax.set_yscale("log")
    ax.set_xlabel(xlabel)
    ax.set_ylabel(ylabel)
    ax.set_title(title, fontsize=9)
    ax.legend(**{"fontsize": 8, **legend})
    ax.grid(True, which="both" if loglog else "major", alpha=0.3)


COLORS = {"numpyro": "#d62728", "stabledist": "#1f77b4", "nocache": "#7f7f7f",
          "numpyro_preread": "#ff9896"}

MAX_BARS = 15
"""Bars per plot panel at most: more are unreadable on the docs page."""


def bar_counts(fig: Figure) -> list[int]:
    """Bars per panel of ``fig`` (stacked segments at one position count once)."""
    counts = []
    for ax in fig.axes:
        positions = set()
        for container in ax.containers:
            horizontal = getattr(container, "orientation", None) == "horizontal"
            for patch in getattr(container, "patches", ()):
                x, y = patch.get_xy()
                positions.add(round(y + patch.get_height() / 2, 6) if horizontal
                              else round(x + patch.get_width() / 2, 6))
        counts.append(len(positions))
    return counts


def _flatten_rows(res: BenchResult) -> list[Row]:
    return [aggregate(res.name, res.of_kind("roundtrip"), "tree_flatten+tree_unflatten", res.unit)]


def _flatten_target(res: BenchResult) -> Verdict:
    ratios = {c.name: c.ratio_median("numpyro", "stabledist") for c in res.of_kind("roundtrip")}
    g = geomean(list(ratios.values()))
    below = sorted((r, n) for n, r in ratios.items() if r < 5)
    return Verdict(f"geomean {g:.2f}x over {len(ratios)} classes", g >= 5,
                   f"{len(below)} classes below 5x" + (
                       f" (slowest: {', '.join(f'{n} {r:.2f}x' for r, n in below[:5])})"
                       if below else ""))


def _ratio_bars(ax: Any, data: list[tuple[float, str]], title: str) -> None:
    """Horizontal bars of ``(ratio, label)`` (at most `MAX_BARS`), the 5x target and 1x."""
    ys = list(range(len(data)))
    ax.barh(ys, [r for r, _ in data], color=COLORS["stabledist"])
    ax.set_yticks(ys, [n for _, n in data], fontsize=8)
    ax.set_ylim(-0.7, len(data) - 0.3)
    ax.axvline(5, color="k", ls="--", lw=1, label="target: 5x faster")
    ax.axvline(1, color=COLORS["numpyro"], lw=1, label="as fast as numpyro")
    ax.set_xlabel("numpyro / stabledist time, higher is better")
    ax.set_title(title, fontsize=9)
    ax.legend(fontsize=8, loc="lower right")


def _flatten_plot(res: BenchResult) -> Figure | None:
    """Every class when they fit in `MAX_BARS` bars; else the distribution of the speed-ups
    (a histogram) and the slowest and fastest classes."""
    plt = _pyplot()
    data = sorted((c.ratio_median("numpyro", "stabledist") or 0, c.name)
                  for c in res.of_kind("roundtrip"))
    if not data:
        return None
    title = "Pytree round trip (flatten + unflatten) speed-up per class"
    if len(data) <= MAX_BARS:
        fig, ax = plt.subplots(figsize=(7, 1.6 + 0.3 * len(data)))
        _ratio_bars(ax, data, title)
        return fig
    fig, (ax, ax2) = plt.subplots(1, 2, figsize=(11, 4.6))
    ratios = [r for r, _ in data]
    g = geomean(ratios)
    ax.hist(ratios, bins=min(12, MAX_BARS), color=COLORS["stabledist"], edgecolor="white")
    ax.axvline(5, color="k", ls="--", lw=1, label="target: 5x faster")
    ax.axvline(g, color="#2ca02c", lw=2, label=f"geometric mean {g:.1f}x")
    if min(ratios) < 1.5:
        ax.axvline(1, color=COLORS["numpyro"], lw=1, label="as fast as numpyro")
    ax.set_xlabel("numpyro / stabledist time, higher is better")
    ax.set_ylabel("classes")
    ax.yaxis.get_major_locator().set_params(integer=True)
    ax.set_title(f"Speed-up over all {len(data)} classes", fontsize=9)
    ax.legend(fontsize=8)
    k = (MAX_BARS - 1) // 2
    _ratio_bars(ax2, [*data[:k], *data[-k:]], f"The {k} slowest and the {k} fastest classes")
    ax2.axhline(k - 0.5, color="0.5", lw=0.8, ls=":")
    fig.suptitle(title, fontsize=10)
    return fig


def _dispatch_rows(res: BenchResult) -> list[Row]:
    return [single(res.name, c, res.unit, note=(
        f"stabledist/raw {c.ratio_median('stabledist', 'raw'):.2f}x, "
        f"numpyro/raw {c.ratio_median('numpyro', 'raw'):.2f}x, stabledist/bare nodes "
        f"{c.ratio_median('stabledist', 'nodes'):.2f}x ({c.params.get('nodes')} node(s))"
        + ("" if c.params.get("results_agree", True) else "; RESULTS DIFFER")))
        for c in res.cases]


DISPATCH_BOUND = 1.2
"""The dispatch target: a jitted call taking a stabledist distribution at most this many
times one taking its leaves in bare pytree nodes of the same shape. JAX pays 2-3 us per
node in every call whatever the node's flatten does (a three-node two-sided
``TruncatedNormal`` 1.3-1.4x over its four raw arrays on a 2-core CPU, bare nodes 1.2x):
the bound judges stabledist's flatten, not JAX's per-node cost."""


def _dispatch_target(res: BenchResult) -> Verdict:
    """Fails where a case's 95% interval of stabledist/bare nodes (paired repetitions) lies
    wholly above `DISPATCH_BOUND`: a small program's time swings between repetitions on a
    shared CPU (a two-sided ``TruncatedNormal`` 15-110 us), so a median alone decides by chance."""
    ivs = {c.name: paired_ratio_interval(c.samples["stabledist"], c.samples["nodes"])
           for c in res.cases}
    text = {n: f"{iv['ratio']:.2f}x" + ("" if iv["lo"] is None else
                                         f" [{iv['lo']:.2f}-{iv['hi']:.2f}]")
            for n, iv in ivs.items()}
    worst = max(ivs, key=lambda n: ivs[n]["ratio"])
    return Verdict(f"worst stabledist/bare nodes {text[worst]} ({worst})",
                   not any((iv["lo"] or 0) > DISPATCH_BOUND for iv in ivs.values()), ", ".join(
                       f"{c.name} {text[c.name]} (raw arrays "
                       f"{c.ratio_median('stabledist', 'raw'):.2f}x)" for c in res.cases))


def _call_rows(res: BenchResult, note: Callable[[Case, str], str]) -> list[Row]:
    """Per-call rows, then first-call rows (the repeated first calls, paired by round, if
    recorded, else one run); ``note(case, "per call" or "first call")``."""
    rows = [single(res.name, c, res.unit, label=f"{c.name} per call", note=note(c, "per call"))
            for c in res.cases]
    for c in res.cases:
        first = c.extra.get("first_call_reps") or c.extra.get("first_call_s", {})
        if "numpyro" in first and "stabledist" in first:
            rows.append(first_call_row(res.name, f"{c.name} first call", first, judged=True,
                                       note=note(c, "first call")))
    return rows


def _closure_note(c: Case, timing: str) -> str:
    if timing == "first call":
        return "XLA compiles " + ", ".join(
            f"{k} {int(v.get('xla_compiles', 0))}" for k, v in
            c.extra.get("first_call_phases", {}).items() if k in ("numpyro", "stabledist"))
    agree = c.params.get("results_agree", True)
    return host_device_note(c) + ("" if agree else "; RESULTS DIFFER")


def _precision_target(res: BenchResult) -> Verdict:
    case = res.case("mvn_precision 1024")
    if case is None:
        return Verdict("dim 1024 not measured in this profile", None)
    r = summarize(case.ratio("numpyro", "stabledist"))
    return Verdict(f"{r['median']:.1f}x (IQR {r['q1']:.1f}-{r['q3']:.1f})", r["median"] >= 10,
                   f"numpyro {case.median('numpyro') / 1e6:.2f} ms/call, "
                   f"stabledist {case.median('stabledist') / 1e6:.3f} ms/call")


def _closure_details(res: BenchResult) -> list[str]:
    first_calls = res.cases[0].extra["first_call_s"]
    lines = ["First call of each new closure (s; trace + lower + compile + run, "
             "XLA compiles):", "",
             "| case | " + " | ".join(LABELS[v] for v in LABELS if v in first_calls) + " |",
             "|" + "---|" * (1 + len(first_calls))]
    for c in res.cases:
        fc, ph = c.extra["first_call_s"], c.extra.get("first_call_phases", {})
        lines.append(f"| {c.name} | " + " | ".join(
            f"{fc[v]:.2f} ({int(ph.get(v, {}).get('xla_compiles', 0))})"
            for v in LABELS if v in fc) + " |")
    return [*lines, ""]


def _closure_plot(res: BenchResult, family: str, xlabel: str, title: str) -> Figure | None:
    """Per call (median, IQR) and first call against the problem size, one family."""
    cases = [c for c in res.cases if c.params["family"] == family]
    if not cases:
        return None
    fig, (ax, ax2) = _pyplot().subplots(1, 2, figsize=(11, 4.4))
    sizes = [c.params["size"] for c in cases]
    for variant, color in COLORS.items():
        stats = [summarize(c.samples.get(variant, [])) for c in cases]
        if not all(s.get("n") for s in stats):
            continue
        style = "--" if variant == "numpyro_preread" else "-"
        med = [s["median"] / 1e3 for s in stats]
        err = [[(s["median"] - s["q1"]) / 1e3 for s in stats],
               [(s["q3"] - s["median"]) / 1e3 for s in stats]]
        ax.errorbar(sizes, med, yerr=err, marker="o", ms=4, capsize=2, color=color,
                    label=LABELS[variant], ls=style)
        first = [c.extra.get("first_call_s", {}).get(variant) for c in cases]
        if all(f is not None for f in first):
            ax2.plot(sizes, first, marker="o", ms=4, color=color, label=LABELS[variant], ls=style)
    label_panel(ax, xlabel, "time per call (us), median and IQR", title, loglog=True)
    label_panel(ax2, xlabel, "first call: trace + compile + run (s)",
                "first call of a new jitted closure (once per distribution)", loglog=True)
    return fig


def _constants_note(case: Case, timing: str) -> str:
    """The case's reference variants beside its row: the flag-off closure and the closure
    after one eager evaluation (``timing``: "per call" or "first call")."""
    first = case.extra.get("first_call_s", {})
    values = {v: fmt_value(case.median(v), "ns") if timing == "per call"
              else fmt_value(first.get(v), "s") for v in ("stabledist_closure", "stabledist_eager")}
    parts = [f"{LABELS[v]} {value}" for v, value in values.items() if value != "-"]
    ops = case.extra.get("program_ops", {}).get("stabledist")
    if ops:
        parts.append(f"stabledist's program: {ops['transcendental']} transcendental op(s), "
                     f"{ops['parameters']} argument(s)")
    return "; ".join(parts)


def _constants_details(res: BenchResult) -> list[str]:
    modes = res.extra.get("modes", {})
    lines = ["Modes (each a fresh process): " + "; ".join(
        f"{m.get('label', k)}: JAX_USE_SIMPLIFIED_JAXPR_CONSTANTS={m.get('flag')} (read as "
        f"{m.get('flag_read')})" for k, m in modes.items()) + ".", "",
             "| case | variant | first call (s): median, first repetition | per call | "
             "compiled program: transcendental ops, linear algebra, arguments |",
             "|---|---|---|---|---|"]
    for c in res.cases:
        first, reps = c.extra.get("first_call_s", {}), c.extra.get("first_call_reps", {})
        for v in c.samples:
            ops = c.extra.get("program_ops", {}).get(v, {})
            lines.append(
                f"| {c.name} | {LABELS.get(v, v)} | {first.get(v, math.nan):.3g}, "
                f"{(reps.get(v) or [math.nan])[0]:.3g} | {fmt_value(c.median(v), 'ns')} | "
                f"{ops.get('transcendental', '-')}, {ops.get('linear algebra', '-')}, "
                f"{ops.get('parameters', '-')} |")
    return [*lines, ""]


def phase_medians(phases: dict[str, dict[str, list[float]]], variant: str) -> dict[str, float]:
    """``variant``'s median seconds per phase over an end-to-end case's repetitions (its
    ``extra["phases"]``), ``trace`` with the lowering; its XLA compiles; {} if none ran."""
    medians = {k: statistics.median(v) for k, v in phases.get(variant, {}).items() if v}
    if medians:
        medians["trace"] += medians.pop("lower")
    return medians


def _phase_note(case: Case) -> str:
    """trace/compile/run seconds of both variants, and whether results agree."""
    parts = []
    for v in ("numpyro", "stabledist"):
        if m := phase_medians(case.extra.get("phases", {}), v):
            parts.append(f"{v} trace {m['trace']:.2f} + compile "
                         f"{m['compile']:.2f} + run {m['run']:.2f} s")
    summ = case.extra.get("summary", {})
    same = summ.get("numpyro") == summ.get("stabledist")
    program = {True: "the same inference program as numpyro's",
               False: "a different inference program"}.get(case.params.get("same_program"))
    return "; ".join(([program] if program else []) + parts) + (
        "" if same else "; results differ in the 4th decimal")


def _e2e_rows(res: BenchResult) -> list[Row]:
    return [single(res.name, c, res.unit, note=_phase_note(c)) for c in res.cases]


def _e2e_seconds(profile: Profile) -> float:
    """Scaled by ``--e2e-reps`` against the profile's own repetitions."""
    base = _planned(smoke=6, quick=15, default=16, full=1500, accelerator=150)(profile)
    if profile.name in PROFILES:
        base *= profile.e2e_reps / PROFILES[profile.name].e2e_reps
    return base


def _interval_rows(res: BenchResult) -> list[Row]:
    """The row of every case with a paired ratio numpyro/stabledist."""
    return [r for r in (single(res.name, c, res.unit) for c in res.cases) if r["ratio"] is not None]


def _e2e_target(res: BenchResult) -> Verdict | None:
    """No end-to-end row slower by its 95% interval (compile times scatter by up to 15%
    from run to run: a bare ratio below 1 is no finding); N/A without intervals."""
    rows = _interval_rows(res)
    if not rows:
        return None

    def text(r: Row) -> str:
        same = res.case(r["case"]).params.get("same_program")  # None: no fingerprint
        program = "" if same is None else (" (the same program)" if same else " (another program)")
        verdict = f" {r['verdict']}" if r["ratio_hi"] is not None else ""
        return f"{r['case']} {fmt_interval(r, ' (one run: unresolved)')}{verdict}{program}"

    worst, slow, resolved = worst_of(rows)
    return Verdict(f"worst {text(worst)}", not slow if resolved else None,
                   ("slower: " + ", ".join(r["case"] for r in slow) + "; " if slow else "")
                   + "; ".join(map(text, rows)))


E2E_GAIN = 1.3


def _e2e_gain_target(res: BenchResult) -> Verdict | None:
    """The best end-to-end row (where numpyro's program recomputes a lazy value in every
    call) at least `E2E_GAIN` x numpyro and "faster" by its 95% interval."""
    rows = [r for r in _interval_rows(res) if r["ratio_lo"] is not None]
    if not rows:
        return None
    r = max(rows, key=lambda r: r["ratio"])
    return Verdict(f"{r['case']} {fmt_interval(r)} {r['verdict']}",
                   r["ratio"] >= E2E_GAIN and r["verdict"] == "faster",
                   res.case(r["case"]).params.get("what", ""))


def _e2e_details(res: BenchResult) -> list[str]:
    lines = ["Phases (median s over repetitions; trace includes lowering):", "",
             "| case | variant | trace | compile | run | total | XLA compiles |",
             "|---|---|---|---|---|---|---|"]
    for c in res.cases:
        for v in res.variants:
            if m := phase_medians(c.extra.get("phases", {}), v):
                lines.append(f"| {c.name} | {v} | {m['trace']:.2f} | {m['compile']:.2f} | "
                             f"{m['run']:.2f} | {c.median(v):.2f} | {m['xla_compiles']:.0f} |")
    models: dict[str, str] = {}
    for c in res.cases:
        models.setdefault(c.params["model"], c.params["what"])
    return [*lines, "", "Models:", "", *(f"- `{m}`: {what}" for m, what in models.items()), ""]


def _e2e_plot(res: BenchResult) -> Figure | None:
    """Phases per case and variant, one panel per method (NUTS, SVI): at most `MAX_BARS`
    bars (two per case) in each."""
    per_panel = MAX_BARS // 2
    panels: list[tuple[str, list[Case]]] = []
    for method in dict.fromkeys(c.params.get("method", "") for c in res.cases):
        cases = [c for c in res.cases if c.params.get("method", "") == method]
        for i in range(0, len(cases), per_panel):
            panels.append((method, cases[i:i + per_panel]))
    if not panels:
        return None
    rows = max(len(cases) for _, cases in panels)
    fig, axes = _pyplot().subplots(1, len(panels), figsize=(5.5 * len(panels) + 1,
                                                              1.6 + 0.6 * rows), squeeze=False)
    colors = {"trace": "#9467bd", "compile": "#8c564b", "run": "#2ca02c"}
    for ax, (method, cases) in zip(axes[0], panels):
        ys, labels, longest = [], [], 0.0
        for i, c in enumerate(cases):
            for j, variant in enumerate(("numpyro", "stabledist")):
                m = phase_medians(c.extra.get("phases", {}), variant)
                if not m:
                    continue
                y = i * 2.6 + j
                left = 0.0
                for phase, color in colors.items():
                    ax.barh(y, m[phase], left=left, color=color,
                            label=phase if (i, j) == (0, 0) else None,
                            hatch="//" if variant == "numpyro" else None, edgecolor="white")
                    left += m[phase]
                longest = max(longest, left)
                ys.append(y)
                labels.append(f"{c.params.get('model', c.name)}, {variant}")
        ax.set_yticks(ys, labels, fontsize=8)
        ax.invert_yaxis()
        ax.set_xlabel("seconds (median): trace (incl. lowering), XLA compile, run", fontsize=8)
        ax.set_title(method or "inference", fontsize=10)
        ax.set_xlim(0, longest * 1.35 or 1)  # room for the legend right of the bars
        ax.legend(fontsize=8, loc="lower right")
        ax.grid(True, axis="x", alpha=0.3)
    fig.suptitle("End-to-end inference, per phase (hatched: numpyro)", fontsize=10)
    return fig


def _pcache_rows(res: BenchResult) -> list[Row]:
    rows = []
    for c in res.cases:
        kind = c.params.get("kind")
        if kind == "retrace":
            rows.append(make_row(res.name, "extra traces (retraces)", "traces",
                            numpyro=c.median("numpyro"), stabledist=c.median("stabledist"),
                            speed=False))
            continue
        # first calls (cache empty, cache warm) are judged; the compile phase is a part of one
        first_call = kind in ("first", "second")
        r = single(res.name, c, res.unit, judged=first_call)
        r["speed"] = first_call
        if kind == "second":
            hits, misses = c.extra["cache_hits"], c.extra["cache_misses"]
            r["note"] = "persistent-cache hits/misses: " + ", ".join(
                f"{v} {int(sum(hits[v]))}/{int(sum(misses[v]))}" for v in hits) + (
                "; numpyro leaf order changed: "
                f"{c.extra['leaf_order_changed'].get('numpyro')}")
        rows.append(r)
    return rows


def _pcache_target(res: BenchResult, case: Case) -> Verdict:
    hits, misses = case.extra["cache_hits"], case.extra["cache_misses"]
    ok = (sum(hits["stabledist"]) > 0 and sum(misses["stabledist"]) == 0
          and sum(misses["numpyro"]) > 0)
    saved = (case.median("numpyro") or math.nan) - (case.median("stabledist") or math.nan)
    return Verdict(
        f"stabledist {int(sum(hits['stabledist']))} hit(s), "
        f"{int(sum(misses['stabledist']))} miss(es); numpyro "
        f"{int(sum(misses['numpyro']))} miss(es)", ok,
        f"first call in the second process {case.median('numpyro'):.2f} s numpyro, "
        f"{case.median('stabledist'):.2f} s stabledist: {saved:.2f} s saved")


def _retrace_target(res: BenchResult) -> Verdict | None:
    rt = res.extra.get("retraces")
    if not rt:
        return None
    return Verdict(
        f"stabledist {rt['stabledist']['extra_traces']} extra, numpyro "
        f"{rt['numpyro']['extra_traces']} extra", rt["stabledist"]["extra_traces"] == 0,
        "; ".join(f"{c['call']}: +{c['new_traces']}"
                  for c in rt["stabledist"]["calls"] if c["new_traces"]))


def _pcache_details(res: BenchResult) -> list[str]:
    if not res.extra.get("retraces"):
        return []
    lines = [f"Persistent cache: {res.extra['function']}; first process "
             f"PYTHONHASHSEED={res.extra['seeds'][0]}, second "
             f"{res.extra['seeds'][1]}, fresh cache directory per variant.", "",
             f"Retraces ({res.extra['retrace_calls']}):", "",
             "| call | numpyro new traces | stabledist new traces |", "|---|---|---|"]
    rt = res.extra["retraces"]
    for a, b in zip(rt["numpyro"]["calls"], rt["stabledist"]["calls"]):
        lines.append(f"| {a['call']} | {a['new_traces']} | {b['new_traces']} |")
    return [*lines, ""]


def _memory_rows(res: BenchResult) -> list[Row]:
    rows = []
    for c in res.cases:
        r = make_row(res.name, c.name, c.params.get("unit", res.unit),
                     numpyro=c.median("numpyro"), stabledist=c.median("stabledist"), speed=False)
        if c.params.get("kind") == "growth":
            r["note"] = (f"max live cache instances {res.extra.get('max_cache_instances')}; "
                         f"after gc {res.extra['runs']['stabledist']['after_gc']['cache']}")
        if c.params.get("kind") == "time":
            r["note"] = "informative only: both children ran at the same time"
        rows.append(r)
    return rows


def _rss_target(res: BenchResult, case: Case) -> Verdict:
    g = case.median("stabledist")
    return Verdict(f"stabledist {g:+.1f} MB", g < 20,
                   f"numpyro {case.median('numpyro'):+.1f} MB over the same churn; "
                   f"{res.extra['runs']['stabledist']['cycles']} cycles")


def _memory_plot(res: BenchResult) -> Figure:
    runs = res.extra["runs"]
    fig, (ax, ax2) = _pyplot().subplots(1, 2, figsize=(11, 4.2))
    for module, run in runs.items():
        trace = run["trace"]
        base = trace[0]["rss_mb"]
        ax.plot([p["cycle"] for p in trace], [p["rss_mb"] - base for p in trace],
                color=COLORS[module], lw=3.5 if module == "numpyro" else 1.5,
                alpha=0.6 if module == "numpyro" else 1.0, marker="o", ms=2,
                label=f"{LABELS[module]} (RSS at start {base:.0f} MB)")
    ax.axhline(20, color="k", ls="--", lw=1, label="target: less than 20 MB growth")
    ax.set_ylim(min(-1.0, ax.get_ylim()[0]), 25)
    label_panel(ax, "create / read / drop cycle", "process RSS growth since the start (MB)",
                "Process memory over the churn run (fresh process each)", loc="upper left")
    trace = runs["stabledist"]["trace"]
    ax2.plot([p["cycle"] for p in trace], [p["cache_instances"] for p in trace],
             color=COLORS["stabledist"], marker="o", ms=2,
             label="stabledist: instances with cached values")
    ax2.plot([p["cycle"] for p in trace], [p["cache_values"] for p in trace],
             color="#17becf", ls="--", label="stabledist: cached values")
    ax2.set_ylim(bottom=-0.5, top=max(10, *(p["cache_values"] for p in trace)) * 1.2)
    label_panel(ax2, "create / read / drop cycle", "live cache entries",
                "stabledist's cache between cycles (dropped instances leave nothing)",
                loc="upper left")
    return fig


REGISTRY: tuple[Benchmark, ...] = (
    Benchmark(
        name="lazy", heading="eager lazy-property reads",
        summary="lazy property read, eager: first read (miss) and repeated read (hit)",
        run=Deferred("bench_micro", "bench_lazy"), steps=Deferred("bench_micro", "lazy_steps"),
        seconds=_planned(smoke=3, quick=22, default=30, full=200, accelerator=45), rows=lazy_rows,
        targets=(
            Target("first_read", "regression guard: a trivial first read not slower than "
                   f"the published floor ({FLOORS['first_read'].ratio}x numpyro's speed, "
                   "within 5%) by more than this run's 95% interval", rank=9,
                   check=first_read_guard),
            Target("miss", "regression guard: the catalog's first reads (geometric mean) not "
                   f"slower than the published floor ({FLOORS['miss'].ratio}x, within 5%) by "
                   "more than this run's 95% interval", rank=10, check=miss_guard),
            Target("hit", "regression guard: a cache hit not slower than the floor of a "
                   f"Python getter ({FLOORS['hit'].ratio}x a bare property getter's speed, "
                   "timed beside it; within 10%) by more than this run's 95% interval",
                   rank=3, check=hit_guard),
        ),
    ),
    Benchmark(
        name="flatten", heading="pytree flatten + unflatten",
        summary="jax.tree_util flatten + unflatten of every distribution class",
        run=Deferred("bench_micro", "bench_flatten"), steps=lambda p: p.flatten_limit or 100,
        seconds=_planned(smoke=1, quick=1, default=2, full=60, accelerator=5), rows=_flatten_rows,
        targets=(Target("flatten", "flatten+unflatten at least 5x faster than numpyro",
                        rank=1, check=_flatten_target),),
        plots=(Plot("bench-flatten.png", "Flatten + unflatten speed-up per class",
                    _flatten_plot),),
    ),
    Benchmark(
        name="dispatch", heading="jitted call taking a distribution",
        summary="jitted function taking a distribution vs the same function taking arrays",
        run=Deferred("bench_micro", "bench_dispatch"), steps=lambda p: len(p.dispatch_cases),
        seconds=_planned(smoke=1, quick=6, default=8, full=20, accelerator=8), rows=_dispatch_rows,
        targets=(Target("dispatch", "jitted dispatch with a distribution argument within "
                        f"{DISPATCH_BOUND}x of its leaves in bare pytree nodes of the same "
                        "shape (JAX's own cost per node; 95% interval)", rank=2,
                        check=_dispatch_target),),
    ),
    Benchmark(
        name="closure", heading="jit closing over a global distribution",
        summary="concrete global distribution read inside a compiled function, per call",
        run=Deferred("bench_compiled", "bench_closure"),
        steps=lambda p: len(p.mvn_dims) + len(p.tn_batches) + len(p.sbvm_batches),
        seconds=_planned(smoke=2, quick=10, default=20, full=500, accelerator=50),
        rows=partial(_call_rows, note=_closure_note),
        targets=(Target("precision", "closed-over precision_matrix at dim 1024 at least 10x "
                        "faster per call", rank=4, check=_precision_target),),
        details=_closure_details,
        plots=(
            Plot("bench-precision.png", "precision_matrix per call and first call vs dimension",
                 partial(_closure_plot, family="mvn_precision", xlabel="dimension n",
                         title="jit(lambda x: d.precision_matrix @ x), d a global MVN")),
            Plot("bench-truncnormal.png",
                 "TruncatedNormal log_prob per call and first call vs batch",
                 partial(_closure_plot, family="truncnormal_logp", xlabel="batch size B",
                         title="jit(lambda x: d.log_prob(x)), d a global TruncatedNormal")),
            Plot("bench-sbvm.png", "SineBivariateVonMises log_prob per call and first call",
                 partial(_closure_plot, family="sbvm_logp", xlabel="observations B",
                         title="jit(lambda x: d.log_prob(x)), d a global "
                         "SineBivariateVonMises")),
        ),
    ),
    Benchmark(
        name="constants",
        heading="large closed-over constants: jit arguments, simplified constants",
        summary="a global distribution with large parameters in jit: as a jit argument, and "
        "closed over with JAX_USE_SIMPLIFIED_JAXPR_CONSTANTS=1 (one fresh process per mode)",
        run=Deferred("bench_constants", "bench_constants"),
        steps=Deferred("bench_constants", "steps"),
        seconds=_planned(smoke=7, quick=18, default=34, full=200, accelerator=50),
        rows=partial(_call_rows, note=_constants_note), details=_constants_details,
    ),
    Benchmark(
        name="e2e", heading="end-to-end NUTS and SVI",
        summary="end-to-end NUTS and SVI on real models (GP, hierarchical, regression, "
        "state space, angles) and a jitted Predictive in a forecasting loop (inducing-point "
        "GP), split into trace / lower / compile / run",
        run=Deferred("bench_e2e", "bench_e2e"), steps=Deferred("bench_e2e", "steps"),
        seconds=_e2e_seconds, rows=_e2e_rows,
        targets=(
            Target("e2e", "no end-to-end row slower than numpyro (95% interval of the "
                   "paired ratio wholly below 0.97)", rank=6, check=_e2e_target),
            Target("e2e_gain", f"a realistic model at least {E2E_GAIN}x faster end to end "
                   "(where numpyro's program recomputes a lazy value in every call)", rank=11,
                   check=_e2e_gain_target),
        ),
        details=_e2e_details,
        plots=(Plot("bench-e2e.png", "End-to-end inference per phase", _e2e_plot),),
    ),
    Benchmark(
        name="pcache", heading="persistent compilation cache, retraces",
        summary="persistent compilation cache across processes (another PYTHONHASHSEED) "
        "and retraces of a jitted function taking distributions",
        run=Deferred("bench_pcache", "bench_pcache"), steps=Deferred("bench_pcache", "steps"),
        seconds=_planned(smoke=2, quick=5, default=15, full=70, accelerator=30), rows=_pcache_rows,
        targets=(
            Target("pcache", "second process (other PYTHONHASHSEED) hits JAX's persistent "
                   "cache", rank=7,
                   check=_on_case("first call, second process (cache warm)", _pcache_target),
                   timing=False),
            Target("retrace", "no extra trace for distributions built another way or after "
                   "reads", rank=8, check=_retrace_target, timing=False),
        ),
        details=_pcache_details,
    ),
    Benchmark(
        name="memory", heading="create / read / drop churn",
        summary="cache size and process RSS over create/read/drop cycles (subprocesses)",
        run=Deferred("bench_memory", "bench_memory"), steps=lambda p: 1,
        seconds=_planned(smoke=4, quick=10, default=9, full=150, accelerator=25),
        rows=_memory_rows,
        targets=(Target("rss", "RSS flat over the churn run (under 20 MB growth)", rank=5,
                        check=_on_case("rss growth", _rss_target), timing=False),),
        plots=(Plot("bench-rss.png", "Memory and cache entries over the churn run",
                    _memory_plot),),
    ),
    Benchmark(
        name="scale", heading="many sites, large pytrees, many instances",
        summary="costs as the work grows: a jitted log density of a model with N sample sites "
        "(and with a plate), pytrees of N distributions, memory per live instance, "
        "generation-2 collections, the cache's and hoisting's tables",
        run=Deferred("bench_scale", "bench_scale"), steps=Deferred("bench_scale", "steps"),
        seconds=_planned(smoke=20, quick=70, default=65, full=1700, accelerator=150),
        rows=scale_report.scale_rows,
        targets=(
            Target("scale_growth", "at every N stabledist's trace and compile no slower than "
                   "numpyro's (95% interval) and their growth with N no steeper (fitted "
                   "log-log slope)", rank=12, check=scale_report.growth_target),
            Target("scale_flatten", "flatten+unflatten of a pytree of N distributions at least "
                   f"{scale_report.FLATTEN_BOUND:g}x faster than numpyro at every N (median: the "
                   "round trip's own work; collections in the detail)", rank=13,
                   check=scale_report.flatten_target),
            Target("scale_memory", "memory per live instance with two lazy values read at most "
                   f"{scale_report.MEMORY_BOUND:g}x numpyro's (tracemalloc and RSS)", rank=14,
                   check=scale_report.memory_target),
            Target("scale_release", "nothing kept after the instances are dropped", rank=15,
                   check=scale_report.release_target),
            Target("scale_gc", "no more generation-2 collections than numpyro's in create/drop "
                   "cycles and 40 round trips at each size", rank=16, check=scale_report.gc_target,
                   timing=False),
            Target("scale_heap", "a full collection over the live instances at most "
                   f"{scale_report.COLLECT_BOUND:g}x numpyro's", rank=17,
                   check=scale_report.heap_target),
            Target("scale_tables", "the cache's and hoisting's tables do not grow without "
                   "bound (many instances, shapes, classes)", rank=18,
                   check=scale_report.tables_target, timing=False),
        ),
        plots=(Plot("bench-scale.png", "Time against size: a model with N sample sites, a "
                    "pytree of N distributions (log-log)", scale_report.scale_plot),),
    ),
    Benchmark(
        name="import", heading="the import",
        summary="import stabledist against import numpyro.distributions: wall time and peak "
        "RSS in paired fresh processes, and whether the import started a JAX backend",
        run=Deferred("bench_import", "bench_import"), steps=lambda p: p.import_reps,
        seconds=lambda p: 2.5 * p.import_reps, rows=import_rows,
        targets=(Target("import", f"import stabledist at most {MAX_RATIO:.2f}x the wall time "
                        f"of import numpyro.distributions and at most +{MAX_EXTRA_MIB:g} MiB "
                        "peak RSS (medians of paired fresh processes), no backend started",
                        rank=19, check=import_target),),
    ),
)

BENCHMARKS: dict[str, Benchmark] = {b.name: b for b in REGISTRY}
"""The records by name (``--only``), in run order."""
