"""Compiled benchmarks: a concrete global distribution read inside ``jit`` (per-call
runtime as the problem grows) and the trace + compile time of a model reading lazy
properties repeatedly (in this process, and cold in fresh processes)."""

from __future__ import annotations

import argparse
import itertools
import json
import statistics
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from functools import partial
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
import numpyro
from numpyro.infer.util import log_density

from benchmarks.common import MODULES, lazy_names, quiet, spd
from benchmarks.config import Profile
from benchmarks.environment import subprocess_env
from benchmarks.phases import record_phases
from benchmarks.timing import (
    BenchResult,
    Case,
    Timed,
    host_device_split,
    interleave,
    measure,
    step,
    stmt_timer,
)

# --------------------------------------------------------------------------------------------
# a concrete global distribution inside a compiled function
# --------------------------------------------------------------------------------------------

Build = Callable[[Any, tuple], Any]
Expr = Callable[[Any, jax.Array], jax.Array]


def _family(family: str, size: int) -> tuple[Build, tuple, jax.Array, Expr, str]:
    """``(build(module, params), params, x, expr(d, x), what)`` for one problem size."""
    rng = np.random.default_rng(size)
    if family == "mvn_precision":
        tril = jnp.asarray(np.linalg.cholesky(spd(size, seed=size)))
        params = (jnp.zeros(size, jnp.float32), tril)
        x = jnp.asarray(rng.standard_normal(size), jnp.float32)
        return (
            lambda m, p: m.MultivariateNormal(p[0], scale_tril=p[1]),
            params,
            x,
            lambda d, x: d.precision_matrix @ x,
            "d.precision_matrix @ x, d = MultivariateNormal(loc, scale_tril=L), L of dim n",
        )
    if family == "truncnormal_logp":
        def u(lo: float, hi: float) -> jax.Array:
            return jnp.asarray(rng.uniform(lo, hi, size), jnp.float32)

        params = (u(-1, 1), u(0.5, 3), u(-2.5, -0.5), u(0.5, 2.5))
        x = u(-0.4, 0.4)
        return (
            lambda m, p: m.TruncatedNormal(p[0], p[1], low=p[2], high=p[3]),
            params,
            x,
            lambda d, x: d.log_prob(x),
            "d.log_prob(x), d = TruncatedNormal(loc, scale, low, high), every parameter and "
            "x of shape (B,): the two-sided normalizer is per element",
        )
    if family == "sbvm_logp":
        params = tuple(jnp.asarray(v, jnp.float32) for v in (0.5, -1.0, 2.0, 3.0, 0.8))
        x = jnp.asarray(rng.uniform(-np.pi, np.pi, (size, 2)), jnp.float32)
        return (
            lambda m, p: m.SineBivariateVonMises(*p[:4], correlation=p[4]),
            params,
            x,
            lambda d, x: d.log_prob(x),
            "d.log_prob(x), d = SineBivariateVonMises with scalar parameters, x of shape "
            "(B, 2): norm_const is one 50 x 10001-term series",
        )
    raise KeyError(family)


FIRST_BUDGET_S = 20.0
"""First calls of one closure case stop repeating once they have taken this long in all."""

CLOSURE_FAMILIES = {
    "mvn_precision": "mvn_dims",
    "truncnormal_logp": "tn_batches",
    "sbvm_logp": "sbvm_batches",
}


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
    """One variant of a closure case, built and ready: ``first()`` is its timed first call
    (any eager work the variant does before ``jit``, then trace, compile and run), ``call()``
    one later call, ``timer`` the loop that times later calls, ``program()`` the text of the
    compiled program (cached by then: no second compile)."""

    first: Callable[[], Any]
    call: Callable[[], Any]
    timer: Timed
    program: Callable[[], str]


Maker = Callable[[Build, tuple, jax.Array, Expr], Prepared]
"""Builds one variant of a case from ``(build, params, x, expr)`` (see `_family`)."""


def closure_variant(module: str, before: str = "") -> Maker:
    """``jit(lambda x: expr(d, x))`` over a concrete global ``d`` of ``module``. ``before``:
    ``"preread"`` reads every lazy value eagerly first, untimed (numpyro then stores them in
    ``__dict__``); ``"eager"`` evaluates ``expr(d, x)`` once eagerly inside the timed first
    call (a user's remedy: the lazy values are then cached, concrete, before the trace)."""

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


def argument_variant(module: str) -> Maker:
    """``jit(lambda d, x: expr(d, x))(d, x)``: the distribution is an argument, so its
    leaves are runtime values: nothing is folded at compile time, every lazy value is
    computed in every call."""

    def make(build: Build, params: tuple, x: jax.Array, expr: Expr) -> Prepared:
        d = build(MODULES[module], params)
        g = jax.jit(lambda d, x: expr(d, x))
        return Prepared(partial(g, d, x), partial(g, d, x),
                        stmt_timer("g(d, x).block_until_ready()", {"g": g, "d": d, "x": x}),
                        lambda: g.lower(d, x).compile().as_text())

    return make


def params_variant() -> Maker:
    """The no-cache baseline: ``jit(lambda p, x: expr(Dist(*p), x))`` (stabledist classes),
    the parameters as arguments."""

    def make(build: Build, params: tuple, x: jax.Array, expr: Expr) -> Prepared:
        g = jax.jit(lambda p, x: expr(build(MODULES["stabledist"], p), x))
        return Prepared(partial(g, params, x), partial(g, params, x),
                        stmt_timer("g(p, x).block_until_ready()", {"g": g, "p": params, "x": x}),
                        lambda: g.lower(params, x).compile().as_text())

    return make


CLOSURE_VARIANTS: dict[str, Maker] = {
    "numpyro": closure_variant("numpyro"),
    "stabledist": closure_variant("stabledist"),
    "numpyro_preread": closure_variant("numpyro", before="preread"),
    "nocache": params_variant(),
}
"""The closure benchmark's variants, in their base order."""


def _warm_tracing_caches(build: Build, params: tuple, x: jax.Array, expr: Expr) -> None:
    """The constructors' own eager ops are the same code in both modules: build once,
    untimed, so that first calls time jit's trace + compile + run only. jax's per-shape
    tracing caches (jnp's own jitted helpers) are filled by whichever variant first traces a
    shape: fill them untimed, abstractly (traced parameters: nothing lazy is cached or
    hoisted), so that no variant pays for the others; a fresh process's cost is the "cold"
    compile row."""
    for m in MODULES.values():
        build(m, params)
    for m in MODULES.values():
        jax.make_jaxpr(lambda p, x, m=m: expr(build(m, p), x))(params, x)


def _first_calls(makers: dict[str, Maker], case: tuple, profile: Profile,
                 rotation: Iterator[int], repeated: tuple[str, ...]
                 ) -> tuple[dict[str, list[float]], dict[str, dict[str, float]],
                            dict[str, Prepared], dict[str, np.ndarray]]:
    """Repeated first calls of new closures: each repetition builds new distributions and
    new jitted functions and times their first calls, in rotated order. Later repetitions
    run only the ``repeated`` variants (those a row compares); a case whose first calls take
    long (a 1M-element constant) stops after `FIRST_BUDGET_S`. Returns the times, the phase
    split of each variant's first repetition, the first repetition's variants (their later
    calls are timed) and their outputs."""
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
        first, phases, prepared, outs = _first_calls(makers, case, profile, rotation,
                                                     repeated)
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
            result.cases.append(
                closure_case(family, size, CLOSURE_VARIANTS, profile, rotation)[0])
    return result


# --------------------------------------------------------------------------------------------
# trace + compile of a model that reads lazy properties repeatedly
# --------------------------------------------------------------------------------------------


def _model_params(dim: int) -> tuple:
    a = jnp.asarray
    return (a(np.zeros(dim, np.float32)), a(spd(dim, seed=3)), a(0.0), a(1.0), a(-1.0), a(2.0))


def _build_priors(m: Any, p: tuple) -> tuple[Any, Any]:
    return (m.MultivariateNormal(p[0], covariance_matrix=p[1]),
            m.TruncatedNormal(p[2], p[3], low=p[4], high=p[5]))


def make_model(m: Any, dim: int, reads: int, params: tuple | None) -> Callable[..., None]:
    """A model with a global MVN prior and a global two-sided TruncatedNormal likelihood
    whose log density reads ``precision_matrix`` and the truncation normalizer ``reads``
    times. ``params=None``: the priors are arguments (the no-cache variant builds them from
    traced parameters)."""
    priors = None if params is None else _build_priors(m, params)

    def model(y: jax.Array, p: tuple | None = None) -> None:
        mvn, tn = priors if priors is not None else _build_priors(m, p)
        z = numpyro.sample("z", mvn)
        for k in range(reads):
            r = y[k] - z
            numpyro.factor(f"q{k}", -0.5 * r @ (mvn.precision_matrix @ r))
            numpyro.sample(f"t{k}", tn, obs=0.1 * jnp.tanh(y[k, 0] - z[0]))

    return model


def _logp_and_args(variant: str, dim: int, reads: int) -> tuple[Callable[..., Any], tuple]:
    """The model's log density (to differentiate) and its arguments, priors built now."""
    params = _model_params(dim)
    y = jnp.asarray(np.random.default_rng(4).standard_normal((reads, dim)), jnp.float32)
    z0 = jnp.full(dim, 0.1, jnp.float32)
    if variant == "nocache":
        model = make_model(MODULES["stabledist"], dim, reads, None)

        def logp_args(z: jax.Array, p: tuple) -> jax.Array:
            return log_density(model, (y, p), {}, {"z": z})[0]

        return logp_args, (z0, params)
    with quiet():
        model = make_model(MODULES[variant], dim, reads, params)

    def logp(z: jax.Array) -> jax.Array:
        return log_density(model, (y,), {}, {"z": z})[0]

    return logp, (z0,)


def _compile_once(variant: str, dim: int, reads: int) -> tuple[dict[str, float], Any, tuple]:
    """Trace, lower and compile value_and_grad of the model's log density from scratch
    (fresh priors, fresh function: no JAX cache can hit). Returns the timings (and the
    jaxpr size), the compiled function and its arguments."""
    logp, args = _logp_and_args(variant, dim, reads)
    fn = jax.jit(jax.value_and_grad(logp))
    t0 = time.perf_counter()
    with quiet():
        traced = fn.trace(*args)
    t1 = time.perf_counter()
    lowered = traced.lower()
    t2 = time.perf_counter()
    compiled = lowered.compile()
    t3 = time.perf_counter()
    jax.block_until_ready(compiled(*args))
    t4 = time.perf_counter()
    rec = {"trace_s": t1 - t0, "lower_s": t2 - t1, "compile_s": t3 - t2, "total_s": t3 - t0,
           "first_run_s": t4 - t3, "jaxpr_eqns": _count_eqns(traced.jaxpr.jaxpr)}
    return rec, compiled, args


def _count_eqns(jaxpr: Any) -> int:
    """Equations of a jaxpr, sub-jaxprs (scan/cond/custom_jvp bodies...) included."""
    n = 0
    for eqn in jaxpr.eqns:
        n += 1
        for value in eqn.params.values():
            for sub in value if isinstance(value, list | tuple) else (value,):
                inner = getattr(sub, "jaxpr", None)
                if inner is not None and hasattr(inner, "eqns"):
                    n += _count_eqns(inner)
                elif hasattr(sub, "eqns"):
                    n += _count_eqns(sub)
    return n


COMPILE_VARIANTS = ("numpyro", "stabledist", "nocache")


def compile_weight(profile: Profile) -> int:
    """The progress steps the warm traces and compiles count for: each takes about as long
    as a cold compile in a fresh process (one step), and there are ``compile_reps`` per
    variant and one warm-up."""
    return 2 * (profile.compile_reps + int(profile.compile_warmup))


def compile_steps(profile: Profile) -> int:
    return compile_weight(profile) + 1 + 3 * profile.cold_reps


def bench_compile(profile: Profile) -> BenchResult:
    """Trace + compile time (and the compiled call) of the model of :func:`make_model`."""
    dim, reads = profile.compile_dim, profile.compile_reads
    result = BenchResult(
        name="compile",
        title=f"Trace + compile of value_and_grad(log density) of a model reading "
        f"precision_matrix and a TruncatedNormal normalizer {reads} times (dim {dim})",
        unit="s",
        variants={
            "numpyro": "global numpyro priors, built fresh (untimed) before each trace",
            "stabledist": "global stabledist priors, built fresh (untimed) before each trace "
            "(so their lazy values are computed eagerly inside the timed trace)",
            "nocache": "the prior parameters are jit arguments (stabledist classes): every "
            "read recomputes from tracers",
        },
        nocache="the prior parameters are jit arguments, so every read is recomputed in the "
        "trace and in every compiled call",
        extra={"dim": dim, "reads": reads},
    )
    warm_cases, compiled = _warm_cases(profile)
    result.cases.extend(warm_cases)
    result.cases.append(_compiled_call_case(compiled, profile))
    # cold: the first trace + compile in a fresh process (eager-op caches empty)
    if profile.cold_reps:
        result.cases.append(_cold_case(profile))
    return result


def _warm_cases(profile: Profile) -> tuple[list[Case], dict[str, tuple[Any, tuple]]]:
    """The cases of the traces and compiles in this process (the whole, then its parts), and
    each variant's last compiled function with its arguments, for the per-call case."""
    dim, reads = profile.compile_dim, profile.compile_reads
    step(f"compile: warm trace+compile, dim {dim}, {reads} reads",
         weight=compile_weight(profile))
    records: dict[str, list[dict[str, float]]] = {v: [] for v in COMPILE_VARIANTS}
    compiled: dict[str, tuple[Any, tuple]] = {}

    def timed(variant: str) -> Callable[[int], int]:
        def run(number: int) -> int:
            total = 0.0
            for _ in range(number):
                rec, fn, args = _compile_once(variant, dim, reads)
                compiled[variant] = (fn, args)
                records[variant].append(rec)
                total += rec["total_s"]
            return int(total * 1e9)

        return run

    warm = ({v: _compile_once(v, dim, reads)[0] for v in COMPILE_VARIANTS}
            if profile.compile_warmup else {})
    # one trace+compile per variant per repetition, rotating order (each is slow)
    samples_ns = interleave({v: timed(v) for v in COMPILE_VARIANTS},
                            dict.fromkeys(COMPILE_VARIANTS, 1), profile.compile_reps)
    samples = {v: [s / 1e9 for s in vals] for v, vals in samples_ns.items()}
    eqns = {v: records[v][-1]["jaxpr_eqns"] for v in COMPILE_VARIANTS}
    cases = [Case("trace+compile", {"kind": "warm", "unit": "s"}, samples,
                  dict.fromkeys(COMPILE_VARIANTS, 1),
                  extra={"records": records, "warmup": warm, "jaxpr_eqns": eqns})]
    for part in ("trace_s", "lower_s", "compile_s"):
        cases.append(
            Case(part.removesuffix("_s"), {"kind": "part", "unit": "s"},
                 {v: [r[part] for r in records[v]] for v in COMPILE_VARIANTS})
        )
    return cases, compiled


def _compiled_call_case(compiled: dict[str, tuple[Any, tuple]], profile: Profile) -> Case:
    """Per-call time of each variant's compiled value_and_grad: where ``nocache`` pays its
    recomputations again in every call."""
    step("compile: the compiled value_and_grad, per call")
    block = jax.block_until_ready
    fns = {v: stmt_timer("block(f(*args))", {"block": block, "f": f, "args": args})
           for v, (f, args) in compiled.items()}
    run_samples, loops = measure(fns, profile.reps, profile.closure_rep_ms)
    split = {v: host_device_split(lambda f=f, a=a: f(*a), min(loops[v], 200))
             for v, (f, a) in compiled.items()}
    return Case("compiled call", {"kind": "run", "unit": "ns/call"}, run_samples,
                loops, extra={"host_device": split})


def _cold_case(profile: Profile) -> Case:
    """The first trace + compile in fresh processes, rotating the variants' order per rep."""
    dim, reads = profile.compile_dim, profile.compile_reads
    cold: dict[str, list[float]] = {v: [] for v in COMPILE_VARIANTS}
    cold_records: dict[str, list[dict[str, float]]] = {v: [] for v in COMPILE_VARIANTS}
    for rep in range(profile.cold_reps):
        order = list(COMPILE_VARIANTS)
        k = rep % len(order)
        for variant in order[k:] + order[:k]:
            step(f"compile: cold (fresh process) {variant} {rep + 1}/{profile.cold_reps}")
            rec = _cold(variant, dim, reads)
            cold_records[variant].append(rec)
            cold[variant].append(rec["total_s"])
    return Case("cold trace+compile", {"kind": "cold", "unit": "s"}, cold,
                dict.fromkeys(COMPILE_VARIANTS, 1), extra={"records": cold_records})


def _cold(variant: str, dim: int, reads: int) -> dict[str, float]:
    """Run :func:`_compile_once` as the first thing in a fresh Python process."""
    cmd = [sys.executable, "-m", "benchmarks.bench_compiled", "--variant", variant,
           "--dim", str(dim), "--reads", str(reads)]
    proc = subprocess.run(cmd, capture_output=True, text=True, env=subprocess_env(),
                          check=False, timeout=900)
    if proc.returncode != 0:
        raise RuntimeError(f"cold compile subprocess failed:\n{proc.stderr[-3000:]}")
    return json.loads(proc.stdout.strip().splitlines()[-1])


def _main() -> None:
    parser = argparse.ArgumentParser(description="one cold trace+compile (used by the suite)")
    parser.add_argument("--variant", choices=COMPILE_VARIANTS, required=True)
    parser.add_argument("--dim", type=int, required=True)
    parser.add_argument("--reads", type=int, required=True)
    ns = parser.parse_args()
    print(json.dumps(_compile_once(ns.variant, ns.dim, ns.reads)[0]))


if __name__ == "__main__":
    _main()
