"""The ``lazy`` benchmark's rows and regression guards (its record is in
`benchmarks.registry`; no jax here). The eager rows sit on the floor of a Python-level getter
over an external weak-key cache (docs/benchmarks.md, "The cost model"): they are guarded
against regression, not held to a target.
"""

from __future__ import annotations

import math
import statistics
from dataclasses import dataclass
from typing import Any

from stabledist.benchmark._measure import BenchResult, Case, geomean, summarize
from stabledist.benchmark._rows import (
    Row,
    Verdict,
    aggregate,
    fmt_interval,
    fmt_value,
    interval_fields,
    single,
)


@dataclass(frozen=True)
class Floor:
    """An eager speed ratio (``reference`` / stabledist) that a run must not fall below by
    more than its own 95% interval. ``source``: where the floor comes from; ``spread``: the
    floor's own interval (one commit's runs spread by 4-8%)."""

    ratio: float
    source: str
    spread: float = 0.05
    reference: str = "numpyro"

    @property
    def bound(self) -> float:
        return self.ratio * (1 - self.spread)


FLOORS = {
    "first_read": Floor(0.50, "published at 43ffabe and 091acbe (0.53x at 5483256)"),
    "miss": Floor(0.76, "published at 5483256 to 60edf5e (0.79x at 091acbe and 43ffabe)"),
    "hit": Floor(1.0, "measured in this run: a bare Python property getter doing one "
                 "subscript by id, as a hit does", spread=0.10, reference="getter"),
}
"""A trivial first read and the catalog's first reads (geometric mean): the lowest ratio to
numpyro the 2-core CPU runs published since the cache took its present form. A cache hit:
the floor of any Python-level getter, timed beside it (numpyro's hit, a plain ``__dict__``
read, runs 3.5-4x faster than a Python call on one host and 4-4.5x on another, so a
published ratio to it judged the host)."""


def lazy_rows(res: BenchResult) -> list[Row]:
    miss, hit = res.of_kind("miss"), res.of_kind("hit")
    slow = [c for c in miss if (c.ratio_median("numpyro", "stabledist") or 9) < 1 / 1.05]
    overhead = summarize([
        statistics.median([a - b for a, b in zip(c.samples["stabledist"], c.samples["nocache"])])
        for c in miss]).get("median", math.nan)
    rows = [aggregate(res.name, miss, "miss: first read", res.unit,
                      note=f"{len(slow)} cases >5% slower; cache bookkeeping per miss "
                      f"(stabledist - no-cache, median) {fmt_value(overhead, 'ns')}; guard: "
                      f"not below {FLOORS['miss'].ratio}x")]
    worst_miss = min(miss, key=lambda c: c.ratio_median("numpyro", "stabledist") or 9, default=None)
    if worst_miss is not None:
        rows.append(single(res.name, worst_miss, res.unit,
                           label=f"miss, worst case: {worst_miss.name[5:]}"))
    hit_row = aggregate(res.name, hit, "hit: repeated read", res.unit,
                        note=f"stabledist/plain attribute {_plain(hit):.1f}x", speed=False)
    hit_row["note"] += "; numpyro's hit is a plain __dict__ read"
    if getter := _per_rep_geomean(hit, "getter")["ratio"]:  # none in runs before the getter
        hit_row["note"] += (f"; guard: stabledist/bare getter {1 / getter:.2f}x, not above "
                            f"{1 / FLOORS['hit'].bound:.2f}x")
    if first := res.of_kind("first"):
        rows.insert(0, single(res.name, first[0], res.unit, label="first read, trivial value",
                              note=f"stabledist adds {_first_read_extra(first[0]):.0f} ns "
                              f"(medians; guard: not below {FLOORS['first_read'].ratio}x)",
                              judged=False))
    return [*rows, hit_row]


def _first_read_extra(case: Case) -> float:
    return (case.median("stabledist") or math.nan) - (case.median("numpyro") or math.nan)


def _plain(hit: list[Case]) -> float:
    """A cache hit's time over a plain attribute read's (geometric mean over the cases)."""
    return geomean([c.ratio_median("stabledist", "plain") for c in hit])


def _per_rep_geomean(cases: list[Case], reference: str = "numpyro") -> dict[str, Any]:
    """The geometric mean over ``cases`` of reference/stabledist, repetition by repetition
    (the i-th repetitions of every case ran in the same round), with its 95% t-interval over
    the rounds (`interval_fields` of the per-round geometric means)."""
    reps = min((len(c.samples.get(reference, [])) for c in cases), default=0)
    rounds = [geomean([c.samples[reference][i] / c.samples["stabledist"][i] for c in cases])
              for i in range(reps)]
    return interval_fields(rounds, [1.0] * len(rounds))


def _guard(key: str, iv: dict[str, Any], what: str, note: str = "") -> Verdict:
    """Fails when the run's interval lies wholly below the floor's (`Floor.bound`); one
    repetition: no interval, no verdict. ``note`` ends the detail."""
    floor = FLOORS[key]
    value = f"{what} {fmt_interval(iv, ' (one repetition)')}"
    if iv["ratio_hi"] is None:
        return Verdict(value, None, note)
    return Verdict(value, iv["ratio_hi"] >= floor.bound, f"floor {floor.ratio}x (fails below "
                   f"{floor.bound:.3f}x), {floor.source}{note}")


def first_read_guard(res: BenchResult) -> Verdict | None:
    if not (first := res.of_kind("first")):
        return None
    iv = interval_fields(first[0].samples["numpyro"], first[0].samples["stabledist"])
    return _guard("first_read", iv, f"stabledist adds {_first_read_extra(first[0]):.0f} ns;")


def miss_guard(res: BenchResult) -> Verdict | None:
    miss = res.of_kind("miss")
    return (_guard("miss", _per_rep_geomean(miss), f"geomean over {len(miss)} properties")
            if miss else None)


def hit_guard(res: BenchResult) -> Verdict | None:
    hit = res.of_kind("hit")
    return (_guard("hit", _per_rep_geomean(hit, "getter"), "bare getter/stabledist, geomean "
                   f"over {len(hit)} properties", f"; numpyro/stabledist "
                   f"{_per_rep_geomean(hit)['ratio']:.2f}x, stabledist/plain attribute "
                   f"{_plain(hit):.1f}x") if hit else None)
