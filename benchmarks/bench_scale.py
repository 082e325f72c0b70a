"""Scale: how the costs grow with the work - many sample sites in one trace, large pytrees
of distributions, many live instances - stabledist and numpyro side by side.

The garbage collector is part of the measure here: the timed regions run with it enabled and
every collection is recorded by generation. Memory, the collector's counts and the cache's
tables are measured in a fresh process per library (`benchmarks.bench_scale_child`).
"""

from __future__ import annotations

import functools
import gc
import tempfile
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
import numpyro
from numpyro.infer.util import log_density

from benchmarks import child
from benchmarks.bench_scale_child import PARTS, GcWatch
from benchmarks.common import MODULES, fresh_process_cases, lazy_names, quiet
from benchmarks.config import Profile
from benchmarks.programs import sites_point
from benchmarks.scale_report import child_result_cases
from stabledist._src.lazy.introspect import class_attribute
from stabledist._src.lazy.reads import lazy_property_of
from stabledist.benchmark._measure import (
    BenchResult,
    Case,
    Timed,
    calibrate,
    interleave,
    measure,
    progress,
    staged,
    step,
    stmt_timer,
)

VARIANTS = ("numpyro", "stabledist")
COV = np.array([[1.0, 0.3], [0.3, 2.0]], np.float32)
MIX = ("Normal(0, 1)", "TruncatedNormal(0, 1, low=-1, high=2)",
       "MultivariateNormal(0, covariance_matrix) of dim 2")
"""The sites, in turn: a class without lazy values, one whose log density reads them (the
truncation's normaliser), one whose constructor factors a matrix."""


def gc_timer(op: Callable[[], Any], watch: GcWatch, label: str) -> Timed:
    """``number`` calls of ``op`` timed in ns with the garbage collector left on, its
    collections attributed to ``label``."""

    def run(number: int) -> int:
        watch.label = label
        t0 = time.perf_counter_ns()
        for _ in range(number):
            op()
        elapsed = time.perf_counter_ns() - t0
        watch.label = None
        return elapsed

    return run


def _loops(fn: Timed, rep_ms: float) -> int:
    """`calibrate`'s loop count, without its trials when one call (the warm-up) already
    lasts a repetition: a round trip of 100,000 distributions takes seconds."""
    return 1 if fn(1) >= rep_ms * 1e6 else calibrate(fn, rep_ms * 1e6, max_number=1000)


def measure_gc(ops: dict[str, Callable[[], Any]], reps: int, rep_ms: float
               ) -> tuple[dict[str, list[float]], dict[str, int], dict[str, dict[str, float]]]:
    """Per-call ns of each variant over ``reps`` interleaved repetitions (calibrated, GC on),
    the calls per repetition, and each variant's collections during the repetitions
    (`GcWatch.summary`)."""
    watch = GcWatch()
    with watch.active():
        fns = {v: gc_timer(op, watch, v) for v, op in ops.items()}
        loops = {v: _loops(fn, rep_ms) for v, fn in fns.items()}
        watch.records.clear()
        samples = interleave(fns, loops, reps)
    return samples, loops, {v: watch.summary(v) for v in ops}


def mixed(m: Any, i: int, loc: Any, mvn: dict[str, Any], **options: Any) -> Any:
    """The ``i``-th distribution in the turn of `MIX` (``mvn``: the MVN's arguments, built
    once by the caller: an array made in a trace would be an equation of the program)."""
    if i % 3 == 0:
        return m.Normal(loc, 1.0, **options)
    if i % 3 == 1:
        return m.TruncatedNormal(loc, 1.0, low=-1.0, high=2.0, **options)
    return m.MultivariateNormal(**mvn, **options)


def site_model(m: Any, n: int) -> Callable[[], None]:
    """``n`` sample sites, each its own distribution, in the turn of `MIX`."""
    mvn = {"loc": jnp.zeros(2), "covariance_matrix": jnp.asarray(COV)}

    def model() -> None:
        for i in range(n):
            numpyro.sample(f"s{i}", mixed(m, i, 0.0, mvn))

    return model


def site_values(n: int) -> dict[str, jax.Array]:
    return {f"s{i}": jnp.full((2,) if i % 3 == 2 else (), 0.5, jnp.float32) for i in range(n)}


def plate_model(m: Any, n: int) -> Callable[[], None]:
    """The same three kinds of site, each one vectorized site of ``n // 3`` under a plate."""
    mvn = {"loc": jnp.zeros(2), "covariance_matrix": jnp.asarray(COV)}

    def model() -> None:
        with numpyro.plate("n", max(n // 3, 1)):
            for i, name in enumerate("abc"):
                numpyro.sample(name, mixed(m, i, 0.0, mvn))

    return model


def plate_values(n: int) -> dict[str, jax.Array]:
    k = max(n // 3, 1)
    return {"a": jnp.full(k, 0.5), "b": jnp.full(k, 0.5), "c": jnp.full((k, 2), 0.5)}


def _stage(maker: Callable[[Any, int], Callable[[], None]], m: Any, n: int,
           values: dict[str, jax.Array], compile_too: bool) -> tuple[dict[str, float], Any]:
    """One trace (and lowering and compile) of a new jitted log density (a new function:
    nothing cached from an earlier trace): seconds per phase, and the compiled function."""
    model = maker(m, n)
    fn = jax.jit(lambda values: log_density(model, (), {}, values)[0])
    with quiet():
        seconds, _, compiled = staged(fn, values, compile=compile_too)
    return seconds, compiled


def _staging_cases(name: str, maker: Callable[[Any, int], Callable[[], None]], n: int,
                   values: dict[str, jax.Array], reps: int, compile_too: bool, warm: bool,
                   profile: Profile) -> list[Case]:
    """``reps`` interleaved traces (and compiles, then calls) per variant, GC on, each a new
    function; ``warm``: one untimed trace per variant first (eager kernels, hoisting's
    decisions). Each repetition starts after a full collection (untimed): both libraries
    allocate alike (the same objects survive a trace), so a generation-2 collection of this
    process's large heap (150 ms) lands in whichever repetition crosses the threshold, two of
    five in one variant's by chance; the collections left are counted in the detail."""
    records: dict[str, list[dict[str, float]]] = {v: [] for v in VARIANTS}
    compiled: dict[str, Any] = {}
    watch = GcWatch()

    def timed(variant: str) -> Timed:
        def run(number: int) -> int:
            gc.collect()
            watch.label = variant
            rec, fn = _stage(maker, MODULES[variant], n, values, compile_too)
            watch.label = None
            records[variant].append(rec)
            compiled[variant] = fn
            return int(rec["total"] * 1e9)
        return run

    for v in VARIANTS if warm else ():
        _stage(maker, MODULES[v], n, values, False)
    with watch.active():
        interleave({v: timed(v) for v in VARIANTS}, dict.fromkeys(VARIANTS, 1), reps)
    gcs = {v: watch.summary(v) for v in VARIANTS}
    params = {"n": n, "unit": "s"}
    cases = [Case(f"{name} {n}: trace", {**params, "kind": f"{name}_trace"},
                  {v: [r["trace"] for r in records[v]] for v in VARIANTS}, extra={"gc": gcs})]
    if compile_too:
        cases += [Case(f"{name} {n}: trace+compile", {**params, "kind": f"{name}_compile"},
                       {v: [r["total"] for r in records[v]] for v in VARIANTS},
                       extra={"records": records, "gc": gcs}),
                  _per_call_case(name, n, compiled, values, profile)]
    return cases


def _per_call_case(name: str, n: int, compiled: dict[str, Any],
                   values: dict[str, jax.Array], profile: Profile) -> Case:
    fns = {v: stmt_timer("block(f(values))", {"block": jax.block_until_ready, "f": f,
                                              "values": values}) for v, f in compiled.items()}
    samples, loops = measure(fns, max(profile.scale_reps, 3), profile.closure_rep_ms)
    return Case(f"{name} {n}: per call", {"n": n, "kind": f"{name}_call", "unit": "ns/call"},
                samples, loops)


LONG_SITES = 1000
"""From this many sites on, a trace takes seconds: three repetitions per variant (an
interval, if a wide one), whatever the profile's count."""


def sites_cases(result: BenchResult, profile: Profile) -> None:
    """The unrolled model: trace at every size, compile and per call at the small ones."""
    sizes = sorted({*profile.scale_sites, *profile.scale_compile_sites})
    for n in sizes:
        compile_too = n in profile.scale_compile_sites
        reps = min(profile.scale_reps, 3) if n >= LONG_SITES else profile.scale_reps
        step(f"scale: a model with {n} sample sites, trace" + (" + compile" if compile_too else ""))
        result.cases += _staging_cases("sites", site_model, n, site_values(n), reps, compile_too,
                                       n == sizes[0], profile)


def fresh_weight(profile: Profile) -> int:
    """Progress steps one size of the fresh-process case counts for: one per pair of processes
    and one (measured: 22 s for three pairs, against 2-9 s for each other step of `scale`),
    so the time-left estimate does not swell while it runs."""
    return profile.scale_fresh_processes + 1


def fresh_sites_cases(result: BenchResult, profile: Profile) -> None:
    """The many-site model's log density: its first trace and compile in fresh processes,
    nothing traced or drawn before it there."""
    for n in profile.scale_fresh_sites:
        step(f"scale: a model with {n} sample sites in fresh processes",
             weight=fresh_weight(profile))
        result.cases += fresh_process_cases("sites_density", (sites_point(n),),
                                            profile.scale_fresh_processes, f"sites {n}",
                                            {"n": n, "unit": "s", "kind": "sites_fresh"}, n=n)


def plate_cases(result: BenchResult, profile: Profile) -> None:
    """The model written with a plate: trace + compile, and per call, at each size."""
    for n in profile.scale_plate:
        step(f"scale: the same model with a plate, {n} sites")
        result.cases += _staging_cases("plate", plate_model, n, plate_values(n),
                                       profile.scale_reps, True, n == profile.scale_plate[0],
                                       profile)


def tree_of(m: Any, n: int) -> list[Any]:
    """``n`` distributions in the turn of `MIX` (the MVN from its ``scale_tril``; argument
    checks off: they cost seconds at this size and change no pytree)."""
    loc = jnp.float32(0.0)
    mvn = {"loc": jnp.zeros(2), "scale_tril": jnp.linalg.cholesky(jnp.asarray(COV))}
    with quiet():
        return [mixed(m, i, loc, mvn, validate_args=False) for i in range(n)]


def read_values(tree: list[Any]) -> None:
    """Read the lazy values of ``tree``'s distributions in place: the MVN's covariance and
    precision matrices, the truncation's normaliser. Each kind's values are computed once
    (`_computed_once`): every read stores a value as a user's would, in ``__dict__`` or in
    the cache, without recomputing the same numbers (seconds of eager work at 2,000)."""
    with _computed_once({type(d) for d in tree}):
        for d in tree:
            if hasattr(d, "precision_matrix"):
                d.covariance_matrix  # noqa: B018 - the read is the point
                d.precision_matrix  # noqa: B018
            elif hasattr(d, "_log_diff_tail_probs"):
                d._log_diff_tail_probs  # noqa: B018


@contextmanager
def _computed_once(classes: set[type]) -> Iterator[None]:
    """Every lazy property of ``classes`` computes its value at its first read only and gives
    that value to the later first reads: `tree_of` builds each kind with the same parameters,
    so the values are the same numbers. The function each read calls (``wrapped``) is the
    one replaced, so the reads themselves, and where they store, are the library's own."""
    props = {id(p): p for cls in classes for name in lazy_names(cls)
             if hasattr(p := lazy_property_of(class_attribute(cls, name)), "wrapped")}.values()
    originals = [(p, p.wrapped) for p in props]

    def once(compute: Callable[[Any], Any]) -> Callable[[Any], Any]:
        memo: dict[type, Any] = {}

        @functools.wraps(compute)
        def first(instance: Any) -> Any:
            if type(instance) not in memo:
                memo[type(instance)] = compute(instance)
            return memo[type(instance)]

        return first

    for p, compute in originals:
        p.wrapped = once(compute)
    try:
        yield
    finally:
        for p, compute in originals:
            p.wrapped = compute


OPS = ("flatten", "unflatten", "tree_map")


def _spent_ms(samples: dict[str, list[float]], loops: dict[str, int], variant: str) -> float:
    """The time a round trip's repetitions took in all (flatten's and unflatten's), in ms: what
    a collection's milliseconds are a share of."""
    return sum(sum(samples[f"{variant}|{op}"]) * loops[f"{variant}|{op}"]
               for op in ("flatten", "unflatten")) * 1e-6
TREE_REP_MS = 50.0
"""A repetition of the pytree operations lasts this long: several round trips of 2,000
distributions, not one, whose time swings twofold with where the allocator finds memory."""


def _tree_ops(tree: list[Any]) -> dict[str, Callable[[], Any]]:
    tu = jax.tree_util
    leaves, treedef = tu.tree_flatten(tree)
    return {"flatten": lambda: tu.tree_flatten(tree),
            "unflatten": lambda: tu.tree_unflatten(treedef, leaves),
            "tree_map": lambda: tu.tree_map(lambda x: x, tree)}


def tree_cases(result: BenchResult, profile: Profile) -> None:
    """Flatten, unflatten and ``tree_map`` of a list of N distributions, lazy values read
    and not, GC on; the round trip is flatten + unflatten of the same repetition."""
    for n in profile.scale_tree:
        trees = {v: tree_of(MODULES[v], n) for v in VARIANTS}
        for read in (False, True):
            state = "values read" if read else "nothing read"
            step(f"scale: a pytree of {n} distributions, {state}")
            if read:
                for tree in trees.values():
                    read_values(tree)
            ops = {f"{v}|{op}": f for v in VARIANTS for op, f in _tree_ops(trees[v]).items()}
            samples, loops, gcs = measure_gc(ops, profile.scale_reps, TREE_REP_MS)
            params = {"n": n, "read": read, "unit": "ns/call"}
            for op in OPS:
                result.cases.append(Case(
                    f"pytree {n}, {state}: {op}", {**params, "kind": f"tree_{op}"},
                    {v: samples[f"{v}|{op}"] for v in VARIANTS},
                    {v: loops[f"{v}|{op}"] for v in VARIANTS},
                    extra={"gc": {v: gcs[f"{v}|{op}"] for v in VARIANTS}}))
            trip = {v: [a + b for a, b in zip(samples[f"{v}|flatten"],
                                              samples[f"{v}|unflatten"])] for v in VARIANTS}
            result.cases.append(Case(
                f"pytree {n}, {state}: flatten+unflatten", {**params, "kind": "tree_trip"},
                trip, extra={"gc": {v: {k: gcs[f"{v}|flatten"][k] + gcs[f"{v}|unflatten"][k]
                                        for k in ("gen2", "gen2_ms", "collections")}
                                    for v in VARIANTS},
                             "spent_ms": {v: _spent_ms(samples, loops, v) for v in VARIANTS}}))
            del ops
        del trees


CHILD_WEIGHT = 1
"""Progress steps each part of the fresh processes counts for (measured: 2-7 s each, about
as long as the steps before them)."""


def child_cases(result: BenchResult, profile: Profile) -> None:
    """`benchmarks.bench_scale_child` in a fresh process per library, both at once (they
    measure memory and counts, not time); a progress step as stabledist's child ends each of
    its parts."""
    from benchmarks.bench_scale_child import PART

    args = {"memory": profile.scale_memory, "cycles": list(profile.scale_cycles),
            "shapes": profile.scale_shapes, "classes": profile.scale_classes}
    labels = list(PARTS.values())
    step(f"scale, a fresh process per library: {labels[0]}", weight=CHILD_WEIGHT)
    with tempfile.TemporaryDirectory() as tmp:
        errs = {v: Path(tmp) / f"{v}.err" for v in VARIANTS}
        procs = {}
        for v, err in errs.items():
            with err.open("w") as stderr:
                procs[v] = child.spawn("bench_scale_child", "run", stderr=stderr, module=v,
                                       args=args)
        done = 0
        while any(p.poll() is None for p in procs.values()):
            time.sleep(0.5)
            parts = errs["stabledist"].read_text().count(PART)
            for label in labels[done + 1:parts + 1]:
                step(f"scale, a fresh process per library: {label}", weight=CHILD_WEIGHT)
            done = max(done, parts)
        runs = {}
        for v, proc in procs.items():
            if proc.returncode != 0:
                raise RuntimeError(f"scale child ({v}) failed:\n{errs[v].read_text()[-3000:]}")
            runs[v] = child.result(proc, f"scale child ({v})")
            progress(f"scale: {v} child done in {runs[v]['seconds']:.0f} s")
    result.extra["children"] = runs
    result.cases += child_result_cases(runs)


def bench_scale(profile: Profile) -> BenchResult:
    result = BenchResult(
        name="scale",
        title="Scale: a model with many sample sites, pytrees of many distributions, many "
        "live instances",
        unit="s", variants={"numpyro": "numpyro.distributions", "stabledist": "stabledist"},
        nocache="not applicable: the models build their distributions in the trace, and the "
        "pytrees, memory and tables compare the two libraries",
        extra={"mix": list(MIX)},
    )
    for part in (sites_cases, fresh_sites_cases, plate_cases, tree_cases, child_cases):
        part(result, profile)
    return result


def steps(profile: Profile) -> int:
    return (len({*profile.scale_sites, *profile.scale_compile_sites})
            + fresh_weight(profile) * len(profile.scale_fresh_sites) + len(profile.scale_plate)
            + 2 * len(profile.scale_tree) + len(PARTS) * CHILD_WEIGHT)
