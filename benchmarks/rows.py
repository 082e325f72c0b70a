"""Building blocks of summary rows and of their text, shared by the benchmarks' own report
code (:mod:`benchmarks.registry`) and the generic report (:mod:`benchmarks.report`).

A separate module so that the registry can use them and the report can walk the registry
without importing each other. No jax here.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

from benchmarks.timing import Case, geomean, summarize

Row = dict[str, Any]
"""One summary row (a line of the summary table, an entry of ``summary`` in results.json)."""

SLOWER_BOUND = 1 / 1.05  # numpyro/stabledist below this: stabledist >5% slower
LABELS = {
    "numpyro": "numpyro",
    "stabledist": "stabledist",
    "nocache": "no cache (parameters as jit arguments)",
    "numpyro_preread": "numpyro, lazy values read before jit",
    "plain": "plain attribute read",
    "raw": "raw arrays",
}
"""Variant names in words, for legends and tables."""


def make_row(bench: str, case: str, unit: str, **kw: Any) -> Row:
    out = {"benchmark": bench, "case": case, "unit": unit, "numpyro": None, "stabledist": None,
           "nocache": None, "ratio": None, "ratio_lo": None, "ratio_hi": None,
           "spread": "IQR", "nocache_ratio": None, "speed": True, "note": ""}
    out.update(kw)
    return out


def single(bench: str, case: Case, unit: str, label: str | None = None,
           note: str = "") -> Row:
    """One case: the median of its per-repetition ratios, with their IQR."""
    r = summarize(case.ratio("numpyro", "stabledist"))
    return make_row(
        bench, label or case.name, case.params.get("unit", unit),
        numpyro=case.median("numpyro"), stabledist=case.median("stabledist"),
        nocache=case.median("nocache"), ratio=r.get("median"), ratio_lo=r.get("q1"),
        ratio_hi=r.get("q3"), nocache_ratio=case.ratio_median("nocache", "stabledist"),
        note=note,
    )


def aggregate(bench: str, cases: Sequence[Case], label: str, unit: str,
              note: str = "", speed: bool = True) -> Row:
    """Many cases: geometric means of the per-case median ratios, with the min-max range."""
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
        speed=speed,
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
