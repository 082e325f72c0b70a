"""Compiled benchmarks: a concrete global distribution read inside ``jit`` (per-call
runtime as the problem grows) and the first trace + compile of a model reading lazy
properties repeatedly, in fresh processes."""

from __future__ import annotations

import itertools
import statistics
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from functools import partial
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
import numpyro

from benchmarks.common import MODULES, lazy_names, quiet, spd
from benchmarks.config import Profile
from benchmarks.phases import record_phases
from stabledist.benchmark._measure import (
    BenchResult,
    Case,
    Timed,
    host_device_split,
    measure,
    step,
    stmt_timer,
)

Build = Callable[[Any, tuple], Any]
Expr = Callable[[Any, jax.Array], jax.Array]


def _family(family: str, size: int) -> tuple[Build, tuple, jax.Array, Expr, str]:
    """``(build(module, params), params, x, expr(d, x), what)`` for one problem size."""
    rng = np.random.default_rng(size)
    if family == "mvn_precision":
        tril = jnp.asarray(np.linalg.cholesky(spd(size, seed=size)))
        params = (jnp.zeros(size, jnp.float32), tril)
        x = jnp.asarray(rng.standard_normal(size), jnp.float32)
        return (lambda m, p: m.MultivariateNormal(p[0], scale_tril=p[1]), params, x,
                lambda d, x: d.precision_matrix @ x,
                "d.precision_matrix @ x, d = MultivariateNormal(loc, scale_tril=L), L of dim n")
    if family == "truncnormal_logp":
        def u(lo: float, hi: float) -> jax.Array:
            return jnp.asarray(rng.uniform(lo, hi, size), jnp.float32)

        params = (u(-1, 1), u(0.5, 3), u(-2.5, -0.5), u(0.5, 2.5))
        x = u(-0.4, 0.4)
        return (lambda m, p: m.TruncatedNormal(p[0], p[1], low=p[2], high=p[3]), params, x,
                lambda d, x: d.log_prob(x),
                "d.log_prob(x), d = TruncatedNormal(loc, scale, low, high), every parameter "
                "and x of shape (B,): the two-sided normalizer is per element")
    if family == "sbvm_logp":
        params = tuple(jnp.asarray(v, jnp.float32) for v in (0.5, -1.0, 2.0, 3.0, 0.8))
        x = jnp.asarray(rng.uniform(-np.pi, np.pi, (size, 2)), jnp.float32)
        return (lambda m, p: m.SineBivariateVonMises(*p[:4], correlation=p[4]), params, x,
                lambda d, x: d.log_prob(x),
                "d.log_prob(x), d = SineBivariateVonMises with scalar parameters, x of shape "
                "(B, 2): norm_const is one 50 x 10001-term series")
    raise KeyError(family)


FIRST_BUDGET_S = 20.0
"""First calls of one closure case stop repeating once they have taken this long in all."""

CLOSURE_FAMILIES = {"mvn_precision": "mvn_dims", "truncnormal_logp": "tn_batches",
                    "sbvm_logp": "sbvm_batches"}


def _preread(d: Any) -> None:
    """Read every lazy property of ``d`` (and of the distributions it holds) eagerly."""
    for name in lazy_names(type(d)):
        try:
            jax.block_until_ready(getattr(d, name))
        except Exception:  # numpyro raises for some, as upstream does
            pass
    for value in vars(d).values():
        if isinstance(value, numpyro.distributions.Distribution):
            _preread(value)


@dataclass(frozen=True)
class Prepared:
    """One variant of a closure case, built: ``first()`` its timed first call (eager work,
    trace, compile, run), ``call()`` a later call, ``timer`` their loop, ``program()`` its HLO."""

    first: Callable[[], Any]
    call: Callable[[], Any]
    timer: Timed
    program: Callable[[], str]


Maker = Callable[[Build, tuple, jax.Array, Expr], Prepared]
"""Builds one variant of a case from ``(build, params, x, expr)`` (see `_family`)."""


def closure_variant(module: str, before: str = "") -> Maker:
    """``jit(lambda x: expr(d, x))`` over a concrete global ``d`` of ``module``; ``before``:
    ``"preread"`` reads every lazy value eagerly first, untimed; ``"eager"`` evaluates
    ``expr(d, x)`` once eagerly inside the timed first call (a user's remedy)."""

    def make(build: Build, params: tuple, x: jax.Array, expr: Expr) -> Prepared:
        d = build(MODULES[module], params)
        if before == "preread":
            _preread(d)
        f = jax.jit(lambda x: expr(d, x))

        def first() -> Any:
            if before == "eager":
                jax.block_until_ready(expr(d, x))
            return f(x)

        return Prepared(first, partial(f, x), stmt_timer("f(x).block_until_ready()",
                                                          {"f": f, "x": x}),
                        lambda: f.lower(x).compile().as_text())

    return make


def _jitted(fn: Callable[[Any, jax.Array], jax.Array], a: Any, x: jax.Array) -> Prepared:
    """``jit(fn)(a, x)``: ``a``'s leaves are runtime values, nothing is folded at compile
    time, every lazy value is computed in every call."""
    g = jax.jit(fn)
    return Prepared(partial(g, a, x), partial(g, a, x),
                    stmt_timer("g(a, x).block_until_ready()", {"g": g, "a": a, "x": x}),
                    lambda: g.lower(a, x).compile().as_text())


def argument_variant(module: str) -> Maker:
    """``jit(lambda d, x: expr(d, x))(d, x)``: the distribution as an argument."""
    return lambda build, params, x, expr: _jitted(
        lambda d, x: expr(d, x), build(MODULES[module], params), x)


def params_variant() -> Maker:
    """The no-cache baseline: ``jit(lambda p, x: expr(Dist(*p), x))`` (stabledist classes),
    the parameters as arguments."""
    return lambda build, params, x, expr: _jitted(
        lambda p, x: expr(build(MODULES["stabledist"], p), x), params, x)


CLOSURE_VARIANTS: dict[str, Maker] = {
    "numpyro": closure_variant("numpyro"), "stabledist": closure_variant("stabledist"),
    "numpyro_preread": closure_variant("numpyro", before="preread"), "nocache": params_variant()}
"""The closure benchmark's variants, in their base order."""


def _warm_tracing_caches(build: Build, params: tuple, x: jax.Array, expr: Expr) -> None:
    """Build once and trace once abstractly, untimed (nothing lazy cached or hoisted): the
    constructors' eager ops and jax's per-shape tracing caches are then warm for every
    variant, and no variant pays for the others (a fresh process's cost is the cold row)."""
    for m in MODULES.values():
        build(m, params)
    for m in MODULES.values():
        jax.make_jaxpr(lambda p, x, m=m: expr(build(m, p), x))(params, x)


def _first_calls(makers: dict[str, Maker], case: tuple, profile: Profile,
                 rotation: Iterator[int], repeated: tuple[str, ...]
                 ) -> tuple[dict[str, list[float]], dict[str, dict[str, float]],
                            dict[str, Prepared], dict[str, np.ndarray]]:
    """Repeated first calls of new closures (new distributions and jitted functions) in
    rotated order, after the first only of the ``repeated`` variants, until `FIRST_BUDGET_S`:
    the times, and of the first each variant's phases, `Prepared` (timed later) and output."""
    order = list(makers)
    first: dict[str, list[float]] = {v: [] for v in order}
    phases: dict[str, dict[str, float]] = {}
    prepared: dict[str, Prepared] = {}
    outs: dict[str, np.ndarray] = {}
    spent = 0.0
    for rep in range(max(profile.first_reps, 1)):
        k = next(rotation) % len(order)  # rotate who goes first (per-shape eager caches)
        for variant in order[k:] + order[:k]:
            if rep and variant not in repeated:
                continue
            ready = makers[variant](*case)
            with record_phases() as rec:
                t0 = time.perf_counter()
                out = np.asarray(jax.block_until_ready(ready.first()))
                first[variant].append(time.perf_counter() - t0)
            spent += first[variant][-1]
            if not rep:  # the per-call rows time the first repetition's closures
                phases[variant], prepared[variant], outs[variant] = rec.split(), ready, out
        if spent > FIRST_BUDGET_S:
            break
    return first, phases, prepared, outs


def closure_case(family: str, size: int, makers: dict[str, Maker], profile: Profile,
                 rotation: Iterator[int], name: str = "",
                 repeated: tuple[str, ...] = ("numpyro", "stabledist")
                 ) -> tuple[Case, dict[str, Prepared]]:
    """One case: first calls (`_first_calls`), then every variant's later calls,
    calibrated and interleaved, with the host / device split of single calls. Returns the
    case and the variants it timed (their compiled programs can still be read)."""
    build, params, x, expr, what = _family(family, size)
    case = (build, params, x, expr)
    with quiet():
        _warm_tracing_caches(*case)
        first, phases, prepared, outs = _first_calls(makers, case, profile, rotation, repeated)
    ref = outs.get("numpyro", next(iter(outs.values())))
    agree = all(np.allclose(ref, o, rtol=2e-3, atol=2e-3 * float(np.abs(ref).max()))
                for o in outs.values())
    samples, loops = measure({v: p.timer for v, p in prepared.items()}, profile.closure_reps,
                             profile.closure_rep_ms)
    split = {v: host_device_split(p.call, min(loops[v], 200)) for v, p in prepared.items()}
    return Case(
        name or f"{family} {size}",
        {"family": family, "size": size, "what": what, "results_agree": agree},
        samples, loops,
        extra={"first_call_s": {v: statistics.median(t) for v, t in first.items() if t},
               "first_call_reps": first, "first_call_phases": phases,
               "host_device": split}), prepared


def bench_closure(profile: Profile) -> BenchResult:
    """Per-call runtime of ``jit(lambda x: expr(d, x))`` with a concrete global ``d``."""
    result = BenchResult(
        name="closure",
        title="Concrete global distribution read inside a compiled function (per call)",
        unit="ns/call",
        variants={
            "numpyro": "fresh numpyro instance closed over by the jitted function",
            "stabledist": "fresh stabledist instance closed over by the jitted function",
            "numpyro_preread": "numpyro instance whose lazy values were read eagerly before "
            "jit (so numpyro stored them in __dict__; its pytree then differs)",
            "nocache": "jit(lambda params, x: expr(Dist(*params), x)): the parameters are "
            "arguments, every lazy value is recomputed from them in every call",
        },
        nocache="parameters passed as jit arguments, so the compiled function recomputes "
        "every lazy value on every call (numpyro's closed-over case also recomputes under "
        "tracing, but XLA may constant-fold that recomputation at compile time)",
    )
    rotation = itertools.count()
    for family, sizes_attr in CLOSURE_FAMILIES.items():
        for size in getattr(profile, sizes_attr):
            step(f"closure {family}: size {size}")
            result.cases.append(closure_case(family, size, CLOSURE_VARIANTS, profile, rotation)[0])
    return result
