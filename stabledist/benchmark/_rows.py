"""Building blocks of summary rows and of their text, shared by the benchmarks' own report
code (:mod:`benchmarks.registry`) and the generic report (:mod:`benchmarks.report`).

A separate module so that the registry can use them and the report can walk the registry
without importing each other. No jax here.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from benchmarks.timing import Case, geomean, paired_ratio_interval


@dataclass(frozen=True)
class Verdict:
    """What a target found in one run (here, beside the rows, so that the benchmarks' own
    report modules and the registry share it without importing each other)."""

    value: str
    passed: bool | None  # None: not measured in this profile ("N/A")
    detail: str = ""


Row = dict[str, Any]
"""One summary row (a line of the summary table, an entry of ``summary`` in results.json)."""

SLOWER_BOUND = 1 / 1.05
"""numpyro/stabledist below this: stabledist >5% slower. No longer a row verdict (rows are
judged by the interval of their paired ratio, `benchmarks.timing.paired_ratio_interval`);
kept for the lazy benchmark's note and the "In short" wording of the published page."""

UNJUDGED = frozenset({"lazy"})
"""Benchmarks whose single-case rows the global "no row slower" target does not judge: they
have targets of their own (issue 27 withdrew per-row verdicts for them)."""

LABELS = {
    "numpyro": "numpyro",
    "stabledist": "stabledist",
    "nocache": "no cache (parameters as jit arguments)",
    "numpyro_preread": "numpyro, lazy values read before jit",
    "stabledist_closure": "stabledist closure (simplified constants off)",
    "stabledist_eager": "stabledist, one eager evaluation before jit",
    "plain": "plain attribute read",
    "raw": "raw arrays",
}
"""Variant names in words, for legends and tables."""


def make_row(bench: str, case: str, unit: str, **kw: Any) -> Row:
    """A row with every field; ``verdict`` None and ``judged`` False unless given (a row
    without a paired interval, e.g. an aggregate or a count, is judged by no row rule)."""
    out = {"benchmark": bench, "case": case, "unit": unit, "numpyro": None, "stabledist": None,
           "nocache": None, "ratio": None, "ratio_lo": None, "ratio_hi": None,
           "spread": "", "nocache_ratio": None, "speed": True, "note": "",
           "verdict": None, "judged": False}
    out.update(kw)
    return out


def interval_fields(numpyro: Sequence[float], stabledist: Sequence[float]) -> dict[str, Any]:
    """``ratio``, ``ratio_lo``, ``ratio_hi``, ``spread`` and ``verdict`` of a row from paired
    repetitions: the geometric mean of the per-repetition ratios numpyro/stabledist and its
    95% t-interval (`paired_ratio_interval`). One side missing: no ratio, "unresolved"."""
    if not numpyro or not stabledist:
        return {"ratio": None, "ratio_lo": None, "ratio_hi": None, "spread": "not measured",
                "verdict": "unresolved"}
    iv = paired_ratio_interval(numpyro, stabledist)
    n = iv["n"]
    spread = (f"95% CI (t, {n} reps)" if n >= 2
              else "one run: unresolved" if n == 1 else "no run")
    return {"ratio": iv["ratio"], "ratio_lo": iv["lo"], "ratio_hi": iv["hi"],
            "spread": spread, "verdict": iv["verdict"]}


def _judged(bench: str, judged: bool | None) -> bool:
    return bench not in UNJUDGED if judged is None else judged


def single(bench: str, case: Case, unit: str, label: str | None = None,
           note: str = "", judged: bool | None = None) -> Row:
    """One case: medians per variant; the paired ratio numpyro/stabledist with its 95%
    interval and verdict. ``judged`` (default: unless the benchmark is in `UNJUDGED`):
    whether the global "no row slower" target counts it."""
    return make_row(
        bench, label or case.name, case.params.get("unit", unit),
        numpyro=case.median("numpyro"), stabledist=case.median("stabledist"),
        nocache=case.median("nocache"),
        nocache_ratio=case.ratio_median("nocache", "stabledist"), note=note,
        judged=_judged(bench, judged),
        **interval_fields(case.samples.get("numpyro", []), case.samples.get("stabledist", [])),
    )


def _runs(value: float | Sequence[float] | None) -> list[float]:
    if value is None:
        return []
    return [float(value)] if isinstance(value, int | float) else [float(v) for v in value]


def first_call_row(bench: str, case: str, first: Mapping[str, float | Sequence[float]],
                   note: str = "", judged: bool | None = None) -> Row:
    """A first-call row (seconds) from ``first``: variant -> one run, or the runs of repeated
    first calls in interleaved order (the i-th of each variant in the same round). Paired as
    in `single`; one run each is "unresolved"."""
    runs = {v: _runs(first.get(v)) for v in ("numpyro", "stabledist", "nocache")}
    np_, sd, nc = runs["numpyro"], runs["stabledist"], runs["nocache"]
    paired = interval_fields(np_, sd) if len(np_) == len(sd) else interval_fields([], [])
    return make_row(
        bench, case, "s", numpyro=statistics.median(np_) if np_ else None,
        stabledist=statistics.median(sd) if sd else None,
        nocache=statistics.median(nc) if nc else None,
        nocache_ratio=(statistics.median(nc) / statistics.median(sd)) if nc and sd else None,
        note=note, judged=_judged(bench, judged), **paired,
    )


def aggregate(bench: str, cases: Sequence[Case], label: str, unit: str,
              note: str = "", speed: bool = True) -> Row:
    """Many cases: geometric means of the per-case median ratios, with the min-max range.
    Not judged by the global "no row slower" target (no interval; such benchmarks have
    targets of their own), so no ``verdict``."""
    ratios = [(c.ratio_median("numpyro", "stabledist"), c) for c in cases]
    ratios = [(r, c) for r, c in ratios if r is not None]
    worst = min(ratios, key=lambda rc: rc[0]) if ratios else (None, None)
    nocache = [c.ratio_median("nocache", "stabledist") for c in cases]
    return make_row(
        bench, f"{label} ({len(cases)} cases)", unit,
        numpyro=geomean([c.median("numpyro") for c in cases]),
        stabledist=geomean([c.median("stabledist") for c in cases]),
        nocache=geomean([c.median("nocache") for c in cases if "nocache" in c.samples]),
        ratio=geomean([r for r, _ in ratios]),
        ratio_lo=worst[0], ratio_hi=max((r for r, _ in ratios), default=None),
        spread="min-max over cases",
        nocache_ratio=geomean([r for r in nocache if r is not None]),
        note=(note + "; " if note else "") + (
            f"slowest vs numpyro: {worst[1].name} {worst[0]:.2f}x" if worst[1] else ""),
        speed=speed, judged=False,
    )


def host_device_note(case: Case) -> str:
    """Host (until the call returns) and device (until synchronised) medians per call."""
    hd = case.extra.get("host_device", {})
    parts = [f"{k} {fmt_value(v['host_ns'], 'ns')}+{fmt_value(v['device_ns'], 'ns')}"
             for k, v in hd.items() if k in ("numpyro", "stabledist")]
    return ("host+device per call: " + ", ".join(parts)) if parts else ""


def fmt_value(value: float | None, unit: str) -> str:
    """A human number in the row's unit (ns values shown as ns/us/ms/s)."""
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "-"
    if unit.startswith("ns"):
        for scale, suffix in ((1e9, "s"), (1e6, "ms"), (1e3, "us")):
            if abs(value) >= scale:
                return f"{value / scale:.3g} {suffix}"
        return f"{value:.0f} ns"
    if unit == "s":
        return f"{value:.3g} s"
    if unit == "MB":
        return f"{value:+.1f} MB"
    if unit == "traces":
        return f"{value:.0f}"
    if unit == "us/cycle":
        return f"{value:.0f} us"
    return f"{value:.3g} {unit}"
