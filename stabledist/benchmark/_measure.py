"""Measurement primitives: interleaved repetitions, calibrated loops, robust summaries.

Why this shape: the machine is shared and noisy, so each repetition runs every variant once,
in an order rotated per repetition, and a ratio is taken per repetition before it is
summarized (a 95% t-interval of the paired ratios' logs: :func:`paired_ratio_interval`).
"""

from __future__ import annotations

import gc
import math
import statistics
import sys
import threading
import time
import timeit
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import asdict, dataclass, field
from typing import Any

Timed = Callable[[int], int]
"""``fn(number)`` runs the measured code ``number`` times and returns the elapsed ns."""


class Stopped(BaseException):
    """The run stops now: its deadline passed (at a `Tracker.step`) or a signal asked it to.
    A BaseException, so that no benchmark's ``except Exception`` swallows it."""

    def __init__(self, reason: str, signum: int | None = None) -> None:
        super().__init__(reason)
        self.reason = reason
        self.signum = signum


_T0 = time.perf_counter()


class Tracker:
    """Overall progress on stderr: "step k of n" and the time left (the planned seconds of
    the remaining steps scaled by how fast the finished ones went). A daemon thread repeats
    the line every ``heartbeat`` seconds, so a long step is never silent."""

    def __init__(self, heartbeat: float = 10.0) -> None:
        self.plan: dict[str, tuple[int, float]] = {}  # bench -> (steps, planned seconds)
        self.done: dict[str, int] = {}
        self.bench = self.label = ""
        self.weight = 1  # of the running step
        self.step_t0 = _T0
        self.finished_planned = self.finished_actual = 0.0  # seconds of finished steps
        self.heartbeat = heartbeat
        self.deadline: float | None = None  # perf_counter time after which steps stop
        self.last_print = time.perf_counter()
        self.history: list[tuple[float, float]] = []  # (run clock, estimate left) per line
        self._lock = threading.Lock()
        self._thread: threading.Thread | None = None

    def set_plan(self, plan: Mapping[str, tuple[int, float]]) -> None:
        self.plan = dict(plan)
        self.done = dict.fromkeys(self.plan, 0)

    def begin(self, bench: str, steps: int | None = None) -> None:
        """Start benchmark ``bench`` (``steps``: its real step count, once known)."""
        with self._lock:
            self._close_step()  # the label too
            self.bench = bench
            if steps is not None:
                self.resize(bench, steps)

    def resize(self, bench: str, steps: int) -> None:
        _, secs = self.plan.get(bench, (1, 10.0))
        self.plan[bench] = (max(steps, 1), secs)
        self.done.setdefault(bench, 0)

    def step(self, label: str, weight: int = 1) -> None:
        """Begin the next step of the current benchmark (``weight``: as many planned steps as
        it counts for) and print the progress line; past the deadline, raise `Stopped`."""
        if self.deadline is not None and time.perf_counter() > self.deadline:
            raise Stopped(f"deadline passed before step: {label}")
        with self._lock:
            self._close_step()
            self.label, self.weight = label, weight
            self.step_t0 = time.perf_counter()
            self.done[self.bench] = self.done.get(self.bench, 0) + weight
        progress(self.line(label))

    def end(self) -> None:
        with self._lock:
            self._close_step()
            n, _ = self.plan.get(self.bench, (0, 0.0))
            self.done[self.bench] = n  # skipped steps count as done
            self.bench = ""  # between benchmarks: no heartbeat

    def _close_step(self) -> None:
        """Account for the running step, if any, and clear its label."""
        if self.label:
            n, secs = self.plan.get(self.bench, (1, 0.0))
            self.finished_planned += secs * self.weight / max(n, 1)
            self.finished_actual += time.perf_counter() - self.step_t0
            self.label = ""

    def counts(self) -> tuple[int, int]:
        k = sum(min(self.done.get(b, 0), n) for b, (n, _) in self.plan.items())
        return k, sum(n for n, _ in self.plan.values())

    def eta(self) -> float:
        """Seconds left: planned seconds of the steps not finished, times the observed speed
        (of the finished steps, and of the running one past its planned share; `_speed`)."""
        left = sum(secs * max(n - self.done.get(b, 0), 0) / max(n, 1)
                   for b, (n, secs) in self.plan.items())
        actual, planned = self.finished_actual, self.finished_planned
        share = running = 0.0
        if self.label:
            n, secs = self.plan.get(self.bench, (1, 0.0))
            running = time.perf_counter() - self.step_t0
            share = secs * self.weight / max(n, 1)
            if running > share:  # already slower than planned: it says so before it ends
                actual, planned = actual + running, planned + share
        speed = _speed(actual, planned)
        if self.label:  # the running step: what is left of its planned share, or, once it
            # has run past it, a quarter of what it has run so far (it is not done yet)
            left += max(share - running / speed, running / 4 / speed)
        return left * speed

    def remaining(self, bench: str) -> float:
        """Seconds ``bench`` is planned to take, scaled by how fast the finished steps went."""
        return self.plan.get(bench, (1, 0.0))[1] * _speed(self.finished_actual,
                                                           self.finished_planned)

    def line(self, message: str) -> str:
        """The progress line: steps done of all, the time left (recorded in `history`)."""
        k, n = self.counts()
        if not n:
            return message
        eta = self.eta()
        self.history.append((run_clock(), eta))
        when = f"~{eta / 60:.1f} min left" if eta >= 90 else f"~{eta:.0f} s left"
        return f"{k} of {n}, {when} | {message}"

    def start_heartbeat(self) -> None:
        if self._thread is None:
            self._thread = threading.Thread(target=self._beat, daemon=True, name="bench-heartbeat")
            self._thread.start()

    def _beat(self) -> None:
        while True:
            time.sleep(1.0)
            if time.perf_counter() - self.last_print >= self.heartbeat and self.bench:
                running = time.perf_counter() - self.step_t0
                progress(self.line(f"{self.label or self.bench} (still running, {running:.0f} s)"))


SPEED_PRIOR_S = 60.0
"""Planned seconds at the planned speed the observed speed starts from: one benchmark slower
than its plan (a first compile, a busy minute) moves the estimate of every later one by a
part of its slowness, not by all of it; over a long run the observed speed wins."""


def _speed(actual: float, planned: float) -> float:
    """Actual over planned seconds, each plus `SPEED_PRIOR_S`, clamped to 0.3-5."""
    return min(5.0, max(0.3, (actual + SPEED_PRIOR_S) / (planned + SPEED_PRIOR_S)))


TRACKER = Tracker()
"""The run's progress tracker (the runner sets its plan; benchmarks call ``step``)."""


def eta_error(history: Sequence[tuple[float, float]], end: float, after: float = 60.0,
              floor: float = 30.0) -> dict[str, Any] | None:
    """The worst relative error of the progress lines' time-left estimates (the truth:
    ``end`` minus their time), of the lines from ``after`` seconds on while at least
    ``floor`` seconds were left; None when no line qualifies."""
    found = [(abs(eta - (end - t)) / (end - t), t, eta) for t, eta in history
             if t >= after and end - t >= floor]
    if not found:
        return None
    error, at, estimate = max(found)
    return {"worst": error, "at": at, "estimate": estimate, "truth": end - at, "lines": len(found)}


def run_clock() -> float:
    """Seconds since the suite was imported (about when the process started)."""
    return time.perf_counter() - _T0


def progress(message: str) -> None:
    """A progress line on stderr with the elapsed wall time of the run."""
    print(f"[{time.perf_counter() - _T0:7.1f}s] {message}", file=sys.stderr, flush=True)
    TRACKER.last_print = time.perf_counter()


step = TRACKER.step


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


def staged(jitted: Any, *args: Any, compile: bool = True) -> tuple[dict[str, float], Any, Any]:
    """Seconds to trace, lower and compile ``jitted(*args)`` (a ``jax.jit`` function; only
    the trace unless ``compile``), with ``total``; the traced and the compiled program."""
    t0 = time.perf_counter()
    traced = jitted.trace(*args)
    t1 = time.perf_counter()
    if not compile:
        return {"trace": t1 - t0, "total": t1 - t0}, traced, None
    lowered = traced.lower()
    t2 = time.perf_counter()
    compiled = lowered.compile()
    t3 = time.perf_counter()
    return ({"trace": t1 - t0, "lower": t2 - t1, "compile": t3 - t2, "total": t3 - t0},
            traced, compiled)


def count_equations(jaxpr: Any) -> int:
    """Equations of a jaxpr, those of its sub-jaxprs (scan, cond, custom_jvp bodies, ...)
    included: what a program computes, whatever JAX nests it in."""
    n = len(jaxpr.eqns)
    for eqn in jaxpr.eqns:
        for value in eqn.params.values():
            for sub in value if isinstance(value, list | tuple) else (value,):
                sub = getattr(sub, "jaxpr", sub)  # a ClosedJaxpr's own
                if hasattr(sub, "eqns"):
                    n += count_equations(sub)
    return n


def call_timer(call: Callable[[], Any]) -> Timed:
    """``number`` calls of ``call()`` in ns, the last result blocked on (so the device work
    of asynchronous dispatches is counted)."""
    def run(number: int) -> int:
        import jax

        start = time.perf_counter_ns()
        out = None
        for _ in range(number):
            out = call()
        jax.block_until_ready(out)
        return time.perf_counter_ns() - start

    return run


def calibrate(fn: Timed, target_ns: float, max_number: int = 10_000_000) -> int:
    """Warm ``fn`` up and return the loop count that makes one call last about
    ``target_ns`` (each trial the fastest of three: a preemption cannot shrink it)."""
    fn(1)  # warm-up: compilation, caches, first-touch allocations
    number = 1
    while True:
        elapsed = max(min(fn(number) for _ in range(3)), 1)
        if elapsed >= target_ns / 10 or number >= max_number:
            break
        number = min(max_number, number * max(2, int(target_ns / 10 / elapsed) + 1))
    per_call = elapsed / number
    return max(1, min(max_number, round(target_ns / per_call)))


def rounds(names: Sequence[str], reps: int) -> Iterator[tuple[int, str]]:
    """``(repetition, name)``: ``reps`` rounds of every name, the order rotated by one per
    round (the i-th of each name ran in the same round: a pair)."""
    names = list(names)
    for rep in range(reps):
        k = rep % len(names)
        for name in names[k:] + names[:k]:
            yield rep, name


def interleave(fns: Mapping[str, Timed], loops: Mapping[str, int], reps: int
               ) -> dict[str, list[float]]:
    """Per-call ns of each variant for ``reps`` repetitions, variants in rotating order."""
    out: dict[str, list[float]] = {name: [] for name in fns}
    for _, name in rounds(list(fns), reps):
        out[name].append(fns[name](loops[name]) / loops[name])
    return out


def measure(fns: Mapping[str, Timed], reps: int, rep_ms: float, max_number: int = 10_000_000
            ) -> tuple[dict[str, list[float]], dict[str, int]]:
    """Calibrate (which warms up) every variant, then :func:`interleave` them."""
    loops = {name: calibrate(fn, rep_ms * 1e6, max_number) for name, fn in fns.items()}
    return interleave(fns, loops, reps), loops


def summarize(values: Sequence[float]) -> dict[str, float]:
    """Median, quartiles, extremes and count of ``values``."""
    vals = sorted(v for v in values if v is not None and math.isfinite(v))
    if not vals:
        return {"n": 0}
    q1, _, q3 = (statistics.quantiles(vals, n=4, method="inclusive") if len(vals) >= 2
                 else [vals[0]] * 3)
    return {"n": len(vals), "median": statistics.median(vals), "q1": q1, "q3": q3, "min": vals[0],
            "max": vals[-1]}


def geomean(values: Sequence[float | None]) -> float:
    """Geometric mean of the positive finite values (a missing ratio is skipped, not 0)."""
    vals = [v for v in values if v and v > 0 and math.isfinite(v)]
    return math.exp(sum(map(math.log, vals)) / len(vals)) if vals else float("nan")


SAME_LOW, SAME_HIGH = 0.97, 1.03
"""A paired ratio's 95% interval wholly below `SAME_LOW`: stabledist slower; wholly above
`SAME_HIGH`: faster; else the same (3% either way is below what the rows resolve)."""

VERDICTS = ("faster", "same", "slower", "unresolved")


def t_975(df: int) -> float:
    """The two-sided 95% quantile of Student's t with ``df`` degrees of freedom (scipy's
    special functions import in milliseconds, ``scipy.stats`` in most of a second)."""
    if df < 1:
        raise ValueError(f"a t quantile needs df >= 1, not {df}")
    from scipy.special import stdtrit

    return float(stdtrit(df, 0.975))


def paired_ratio_interval(a: Sequence[float], b: Sequence[float]) -> dict[str, Any]:
    """``a/b`` from paired repetitions (``a[i]`` and ``b[i]`` measured in the same round):
    the geometric mean of the per-pair ratios, the 95% t-interval of their logs and its
    verdict (see `SAME_LOW`). Logs: ratios are multiplicative and skewed, their logs nearly
    symmetric; pairs: each shares the machine's load of its moment, so the drift cancels.
    Pairs with a non-positive or non-finite member are dropped; under two pairs: no
    interval, "unresolved" (never "slower")."""
    if len(a) != len(b):
        raise ValueError(f"paired samples differ in length: {len(a)} and {len(b)}")
    logs = [math.log(x / y) for x, y in zip(a, b)
            if x is not None and y is not None and x > 0 and y > 0
            and math.isfinite(x) and math.isfinite(y)]
    n = len(logs)
    if n < 2:
        ratio = math.exp(logs[0]) if logs else None
        return {"ratio": ratio, "lo": None, "hi": None, "n": n, "verdict": "unresolved"}
    mean = statistics.fmean(logs)
    half = t_975(n - 1) * statistics.stdev(logs) / math.sqrt(n)
    lo, hi = math.exp(mean - half), math.exp(mean + half)
    verdict = "slower" if hi < SAME_LOW else "faster" if lo > SAME_HIGH else "same"
    return {"ratio": math.exp(mean), "lo": lo, "hi": hi, "n": n, "verdict": verdict}


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
    """Everything one benchmark produced, JSON-ready through :meth:`as_dict`; the latest one
    per name is in `LIVE` (a run stopped midway keeps the cases it finished)."""

    name: str
    title: str
    unit: str
    variants: dict[str, str]  # variant -> what it is
    nocache: str  # what "no-cache" means here (or why it does not apply)
    cases: list[Case] = field(default_factory=list)
    extra: dict[str, Any] = field(default_factory=dict)
    seconds: float = 0.0
    error: str | None = None

    def __post_init__(self) -> None:
        LIVE[self.name] = self

    def case(self, name: str) -> Case | None:
        return next((c for c in self.cases if c.name == name), None)

    def of_kind(self, *kinds: str) -> list[Case]:
        """The cases whose ``params["kind"]`` is one of ``kinds``."""
        return [c for c in self.cases if c.params.get("kind") in kinds]

    def as_dict(self) -> dict[str, Any]:
        out = asdict(self)
        for case, raw in zip(self.cases, out["cases"]):
            raw["summary"] = {v: summarize(s) for v, s in case.samples.items()}
            raw["ratios"] = {f"{a}/{b}": summarize(case.ratio(a, b)) for a,
                             b in RATIO_PAIRS if a in case.samples and b in case.samples}
        return out


LIVE: dict[str, BenchResult] = {}
"""The latest `BenchResult` created per benchmark name (the one being filled)."""

RATIO_PAIRS: tuple[tuple[str, str], ...] = (
    ("numpyro", "stabledist"), ("nocache", "stabledist"), ("numpyro_preread", "stabledist"),
    ("stabledist", "plain"), ("numpyro", "plain"), ("stabledist", "raw"), ("numpyro", "raw"))
"""Ratios stored per case: ``numpyro/stabledist`` > 1 means stabledist is faster."""


def host_device_split(call: Callable[[], Any], number: int) -> dict[str, float]:
    """Median ns over ``number`` calls of the host part (until ``call()`` returns: Python,
    dispatch) and of the device part (from then until ``block_until_ready`` returns)."""
    import jax

    host, device = [], []
    with no_gc():
        for _ in range(max(number, 1)):
            t0 = time.perf_counter_ns()
            out = call()
            t1 = time.perf_counter_ns()
            jax.block_until_ready(out)
            t2 = time.perf_counter_ns()
            host.append(t1 - t0)
            device.append(t2 - t1)
    return {"host_ns": statistics.median(host), "device_ns": statistics.median(device),
            "n": len(host)}
