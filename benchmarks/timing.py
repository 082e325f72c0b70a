"""Measurement primitives: interleaved repetitions, calibrated loops, robust summaries.

Why this shape: the machine is shared and noisy, so variants are never measured in separate
blocks. Each repetition runs every variant once, in an order rotated by one position per
repetition; a ratio is taken *per repetition* (variant A and B measured seconds apart) and
only then summarized, which cancels most slow drifts of machine load.
"""

from __future__ import annotations

import gc
import math
import statistics
import sys
import time
import timeit
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import asdict, dataclass, field
from typing import Any

Timed = Callable[[int], int]
"""``fn(number)`` runs the measured code ``number`` times and returns the elapsed ns."""

_T0 = time.perf_counter()


def progress(message: str) -> None:
    """A progress line on stderr with the elapsed wall time of the run."""
    print(f"[{time.perf_counter() - _T0:7.1f}s] {message}", file=sys.stderr, flush=True)


@contextmanager
def no_gc() -> Iterator[None]:
    """Keep the cyclic GC out of a timed region (as :mod:`timeit` does)."""
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()


def stmt_timer(stmt: str, namespace: Mapping[str, Any]) -> Timed:
    """A :class:`timeit.Timer` loop over ``stmt`` (compiled inline, so a statement such as
    ``d.loc`` costs one attribute read plus the loop step), timed in ns."""
    timer = timeit.Timer(stmt, globals=dict(namespace), timer=time.perf_counter_ns)
    return timer.timeit  # type: ignore[return-value]


def calibrate(fn: Timed, target_ns: float, max_number: int = 10_000_000) -> int:
    """Warm ``fn`` up and return the loop count that makes one call last about
    ``target_ns`` (at least 1). Each trial is the fastest of three, so one preemption or GC
    pause during calibration cannot shrink the loop count to a noisy single call."""
    fn(1)  # warm-up: compilation, caches, first-touch allocations
    number = 1
    while True:
        elapsed = max(min(fn(number) for _ in range(3)), 1)
        if elapsed >= target_ns / 10 or number >= max_number:
            break
        number = min(max_number, number * max(2, int(target_ns / 10 / elapsed) + 1))
    per_call = elapsed / number
    return max(1, min(max_number, round(target_ns / per_call)))


def interleave(
    fns: Mapping[str, Timed], loops: Mapping[str, int], reps: int
) -> dict[str, list[float]]:
    """Per-call ns of each variant for ``reps`` repetitions, variants in rotating order."""
    names = list(fns)
    out: dict[str, list[float]] = {name: [] for name in names}
    for rep in range(reps):
        k = rep % len(names)
        for name in names[k:] + names[:k]:
            out[name].append(fns[name](loops[name]) / loops[name])
    return out


def measure(
    fns: Mapping[str, Timed], reps: int, rep_ms: float, max_number: int = 10_000_000
) -> tuple[dict[str, list[float]], dict[str, int]]:
    """Calibrate (which warms up) every variant, then :func:`interleave` them."""
    loops = {name: calibrate(fn, rep_ms * 1e6, max_number) for name, fn in fns.items()}
    return interleave(fns, loops, reps), loops


def summarize(values: Sequence[float]) -> dict[str, float]:
    """Median, quartiles, extremes and count of ``values``."""
    vals = sorted(v for v in values if v is not None and math.isfinite(v))
    if not vals:
        return {"n": 0}
    if len(vals) >= 2:
        q1, _, q3 = statistics.quantiles(vals, n=4, method="inclusive")
    else:
        q1 = q3 = vals[0]
    return {
        "n": len(vals),
        "median": statistics.median(vals),
        "q1": q1,
        "q3": q3,
        "min": vals[0],
        "max": vals[-1],
    }


def geomean(values: Sequence[float]) -> float:
    vals = [v for v in values if v and v > 0 and math.isfinite(v)]
    return math.exp(sum(map(math.log, vals)) / len(vals)) if vals else float("nan")


@dataclass
class Case:
    """One measured situation (a class, a size...) with every variant's raw repetitions."""

    name: str
    params: dict[str, Any] = field(default_factory=dict)
    samples: dict[str, list[float]] = field(default_factory=dict)  # variant -> per rep
    loops: dict[str, int] = field(default_factory=dict)  # variant -> loop count per rep
    extra: dict[str, Any] = field(default_factory=dict)

    def ratio(self, num: str, den: str) -> list[float]:
        """``num/den`` repetition by repetition (both were measured in the same round)."""
        a, b = self.samples.get(num), self.samples.get(den)
        if not a or not b:
            return []
        if len(a) != len(b):
            raise ValueError(f"{self.name}: {num} and {den} have different repetition counts")
        return [x / y for x, y in zip(a, b) if y]

    def median(self, variant: str) -> float | None:
        values = self.samples.get(variant)
        return statistics.median(values) if values else None

    def ratio_median(self, num: str, den: str) -> float | None:
        r = self.ratio(num, den)
        return statistics.median(r) if r else None


@dataclass
class BenchResult:
    """Everything one benchmark produced, JSON-ready through :meth:`as_dict`."""

    name: str
    title: str
    unit: str
    variants: dict[str, str]  # variant -> what it is
    nocache: str  # what "no-cache" means here (or why it does not apply)
    cases: list[Case] = field(default_factory=list)
    extra: dict[str, Any] = field(default_factory=dict)
    seconds: float = 0.0
    error: str | None = None

    def case(self, name: str) -> Case | None:
        return next((c for c in self.cases if c.name == name), None)

    def as_dict(self) -> dict[str, Any]:
        out = asdict(self)
        for case, raw in zip(self.cases, out["cases"]):
            raw["summary"] = {v: summarize(s) for v, s in case.samples.items()}
            raw["ratios"] = {
                f"{a}/{b}": summarize(case.ratio(a, b))
                for a, b in RATIO_PAIRS
                if a in case.samples and b in case.samples
            }
        return out


RATIO_PAIRS: tuple[tuple[str, str], ...] = (
    ("numpyro", "stabledist"),
    ("nocache", "stabledist"),
    ("numpyro_preread", "stabledist"),
    ("stabledist", "plain"),
    ("numpyro", "plain"),
    ("stabledist", "raw"),
    ("numpyro", "raw"),
)
"""Ratios stored per case: ``numpyro/stabledist`` > 1 means stabledist is faster."""
