"""Where stable pytrees save compiles: JAX's persistent compilation cache across processes,
and retraces of a jitted function called with distributions built in different ways.

numpyro's leaf order comes from a ``set`` of field names, so it depends on
``PYTHONHASHSEED``: a second process with another seed compiles another program and misses
the persistent cache. stabledist's order is the declaration order in every process.
"""

from __future__ import annotations

import os
import tempfile
import time
from typing import Any

from benchmarks import child
from benchmarks.config import Profile
from stabledist.benchmark._measure import BenchResult, Case, rounds, step

SEEDS = ("1", "2")
"""PYTHONHASHSEED of the first (cache-writing) and second (cache-reading) process; with
these two, numpyro's leaf order differs for MultivariateNormal and
LowRankMultivariateNormal (checked by each run: see ``leaf_order``)."""

FUNCTION = ("jit(lambda ds, x: sum(d.log_prob(x) for d in ds)) over a "
            "MultivariateNormal(covariance_matrix), a LowRankMultivariateNormal and a "
            "two-sided TruncatedNormal, dim 8")


def first_call(module: str, cache_dir: str) -> dict[str, Any]:
    """Runs in a fresh process: build the distributions, then the first call of the jitted
    function, with JAX's persistent cache in ``cache_dir``."""
    import jax

    jax.config.update("jax_compilation_cache_dir", cache_dir)
    jax.config.update("jax_persistent_cache_min_compile_time_secs", 0.0)
    jax.config.update("jax_persistent_cache_min_entry_size_bytes", -1)
    import jax.numpy as jnp
    import numpy as np

    from benchmarks.phases import record_phases

    m, _ = child.library(module)
    rng = np.random.default_rng(0)
    a = rng.standard_normal((8, 8)).astype(np.float32)
    cov = jnp.asarray(a @ a.T / 8 + np.eye(8, dtype=np.float32))
    ds = (m.MultivariateNormal(jnp.zeros(8), covariance_matrix=cov),
          m.LowRankMultivariateNormal(jnp.zeros(8), jnp.asarray(a[:, :2]), jnp.ones(8)),
          m.TruncatedNormal(jnp.zeros(8), jnp.ones(8), low=-jnp.ones(8), high=2 * jnp.ones(8)))
    x = jnp.asarray(rng.uniform(-0.5, 0.5, 8), jnp.float32)
    f = jax.jit(lambda ds, x: sum(jnp.sum(d.log_prob(x)) for d in ds))
    jax.block_until_ready(ds)
    with record_phases() as rec:
        t0 = time.perf_counter()
        value = float(f(ds, x).block_until_ready())
        first = time.perf_counter() - t0
    order = [[list(np.shape(leaf)) for leaf in jax.tree_util.tree_leaves(d)] for d in ds]
    return {"first_call_s": first, "phases": rec.split(), "value": value, "leaf_order": order,
            "hash_seed": os.environ.get("PYTHONHASHSEED")}


RETRACE_TEXT = (
    "jit(lambda d, x: d.log_prob(x)) called with MultivariateNormal built from "
    "covariance_matrix, precision_matrix and scale_tril, after reading lazy values, and "
    "rebuilt by tree_unflatten; TruncatedNormal before and after reads"
)


def _new_traces(calls: list[tuple[str, Any]], x: Any) -> tuple[int, list[dict[str, Any]]]:
    """Call one fresh ``jit(lambda d, x: d.log_prob(x))`` with each ``(label, d)`` in turn:
    its traces in all, and the traces each call added (after the first, a retrace)."""
    import jax
    import jax.numpy as jnp

    traces: list[str] = []

    def logp(d: Any, x: jax.Array) -> jax.Array:
        traces.append("trace")
        return jnp.sum(d.log_prob(x))

    f = jax.jit(logp)
    per_call = []
    for label, d in calls:
        before = len(traces)
        jax.block_until_ready(f(d, x))
        per_call.append({"call": label, "new_traces": len(traces) - before})
    return len(traces), per_call


def _mvn_calls(m: Any, cov: Any, prec: Any, tril: Any) -> list[tuple[str, Any]]:
    """A MultivariateNormal built in each way a user can, read, and rebuilt from its leaves:
    any of them that changed the pytree would retrace."""
    import jax
    import jax.numpy as jnp

    from benchmarks.common import quiet

    loc = jnp.zeros(4)
    with quiet():
        calls = [("MVN(covariance_matrix)", m.MultivariateNormal(loc, covariance_matrix=cov)),
                 ("MVN(precision_matrix)", m.MultivariateNormal(loc, precision_matrix=prec)),
                 ("MVN(scale_tril)", m.MultivariateNormal(loc, scale_tril=tril))]
        read = m.MultivariateNormal(loc, scale_tril=tril)
        read.precision_matrix, read.covariance_matrix  # noqa: B018 - the reads matter
        calls.append(("MVN(scale_tril) after reading precision/covariance", read))
        leaves, treedef = jax.tree_util.tree_flatten(calls[0][1])
        calls.append(("MVN rebuilt by tree_unflatten",
                      jax.tree_util.tree_unflatten(treedef, leaves)))
    return calls


def _tn_calls(m: Any) -> list[tuple[str, Any]]:
    """A TruncatedNormal before and after an eager read of its lazy values."""
    import jax

    from benchmarks.common import quiet

    with quiet():
        t1 = m.TruncatedNormal(0.0, 1.0, low=-1.0, high=2.0)
        t2 = m.TruncatedNormal(0.0, 1.0, low=-1.0, high=2.0)
        jax.block_until_ready(t2.log_prob(0.5))  # eager reads of its lazy values
    return [("TruncatedNormal", t1), ("TruncatedNormal after eager log_prob", t2)]


def retraces() -> dict[str, dict[str, Any]]:
    """Traces of one jitted function per module over the same sequence of calls."""
    import jax.numpy as jnp
    import numpy as np

    from benchmarks.common import MODULES

    rng = np.random.default_rng(1)
    a = rng.standard_normal((4, 4)).astype(np.float32)
    cov = a @ a.T / 4 + np.eye(4, dtype=np.float32)
    prec = np.linalg.inv(cov).astype(np.float32)
    tril = np.linalg.cholesky(cov).astype(np.float32)
    x = jnp.asarray(rng.standard_normal(4), jnp.float32)
    out: dict[str, dict[str, Any]] = {}
    for variant, m in MODULES.items():
        mvn_traces, mvn_per_call = _new_traces(_mvn_calls(m, cov, prec, tril), x)
        tn_traces, tn_per_call = _new_traces(_tn_calls(m), jnp.asarray(0.5))
        # the two functions each need one trace; anything beyond is a retrace
        total = mvn_traces + tn_traces
        out[variant] = {"traces": total, "extra_traces": total - 2,
                        "calls": mvn_per_call + tn_per_call}
    return out


def steps(profile: Profile) -> int:
    return 1 + (2 * len(SEEDS) * profile.pcache_reps)


def bench_pcache(profile: Profile) -> BenchResult:
    result = BenchResult(
        name="pcache",
        title="Compiles saved by stable pytrees: JAX's persistent cache across processes "
        "(another PYTHONHASHSEED) and retraces",
        unit="s", variants={"numpyro": "numpyro.distributions", "stabledist": "stabledist"},
        nocache="not applicable",
        extra={"function": FUNCTION, "seeds": SEEDS, "retrace_calls": RETRACE_TEXT},
    )
    step("pcache: retraces of a jitted function over differently built distributions")
    rt = retraces()
    result.extra["retraces"] = rt
    result.cases.append(Case("extra traces", {"kind": "retrace", "unit": "traces"},
                             {v: [float(r["extra_traces"])] for v, r in rt.items()},
                             extra={"calls": {v: r["calls"] for v, r in rt.items()}}))
    runs: dict[str, list[list[dict[str, Any]]]] = {"numpyro": [], "stabledist": []}
    with child.forked({seed: {"PYTHONHASHSEED": seed} for seed in SEEDS}) as call:
        for rep, variant in rounds(list(runs), profile.pcache_reps):
            with tempfile.TemporaryDirectory(prefix="stabledist-pcache-") as cache_dir:
                pair = []
                for i, seed in enumerate(SEEDS):
                    step(f"pcache: {variant} process {i + 1} (PYTHONHASHSEED={seed}) "
                         f"rep {rep + 1}/{profile.pcache_reps}")
                    pair.append(call(seed, "bench_pcache", "first_call", module=variant,
                                     cache_dir=cache_dir))
                runs[variant].append(pair)
    result.extra["runs"] = runs
    if not profile.pcache_reps:
        return result
    def of(process: int, key: str, phase: bool = False) -> dict[str, list[float]]:
        return {v: [(p[process]["phases"] if phase else p[process])[key] for p in pairs]
                for v, pairs in runs.items()}

    order_changed = {v: any(p[0]["leaf_order"] != p[1]["leaf_order"] for p in pairs)
                     for v, pairs in runs.items()}
    result.cases.append(Case("first call, second process (cache warm)",
                             {"kind": "second", "unit": "s"}, of(1, "first_call_s"), {},
                             extra={"cache_hits": of(1, "cache_hits", phase=True),
                                    "cache_misses": of(1, "cache_misses", phase=True),
                                    "leaf_order_changed": order_changed}))
    result.cases.append(Case("XLA compile time, second process", {"kind": "compile2", "unit": "s"},
                             of(1, "compile", phase=True)))
    result.cases.append(Case("first call, first process (cache empty)",
                             {"kind": "first", "unit": "s"}, of(0, "first_call_s")))
    return result
