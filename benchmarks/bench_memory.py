"""Memory churn: create a distribution, read its lazy values, drop it - many times - and
watch the cache size and the process RSS. Each implementation runs in its own fresh
subprocess, so the RSS is not polluted by the rest of the suite."""

from __future__ import annotations

import contextlib
import gc
import resource
import sys
import time
from collections.abc import Callable
from typing import Any

from benchmarks import child
from benchmarks.config import Profile
from stabledist.benchmark._measure import BenchResult, Case, progress, step


def rss_mb() -> float:
    """Current resident set size (VmRSS) in MB; peak RSS where /proc is unavailable."""
    with contextlib.suppress(OSError), open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return peak / (1024 * 1024) if sys.platform == "darwin" else peak / 1024


CYCLE = (
    "BernoulliLogits(256 logits) reading probs; every 8th cycle also a "
    "MultivariateNormal(loc, scale_tril=L) of dim 16 reading covariance_matrix and "
    "precision_matrix; every 64th also a two-sided TruncatedNormal (batch 64) reading its "
    "normalizer; each dropped at once"
)


def _workload(module: str,
              light: bool) -> tuple[Callable[[int], None], Callable[[], tuple[int, int]]]:
    """``(cycle(i), cache_info())`` of one module; the cycles' inputs are made once, so a
    cycle allocates only what the distributions do."""
    import jax.numpy as jnp
    import numpy as np

    m, cache_info = child.library(module)
    rng = np.random.default_rng(0)
    logits = jnp.asarray(rng.standard_normal(256), jnp.float32)
    a = rng.standard_normal((16, 16)).astype(np.float32)
    tril = jnp.asarray(np.linalg.cholesky(a @ a.T / 16 + np.eye(16, dtype=np.float32)))
    loc = jnp.zeros(16, jnp.float32)
    tn_args = [jnp.asarray(rng.uniform(lo, hi, 64), jnp.float32)
               for lo, hi in ((-1, 1), (0.5, 2), (-3, -1), (1, 3))]

    def cycle(i: int) -> None:
        b = m.BernoulliLogits(logits)
        b.probs.block_until_ready()
        del b
        if light:
            return
        if i % 8 == 0:
            d = m.MultivariateNormal(loc, scale_tril=tril)
            d.covariance_matrix.block_until_ready()
            d.precision_matrix.block_until_ready()
            del d
        if i % 64 == 0:
            t = m.TruncatedNormal(tn_args[0], tn_args[1], low=tn_args[2], high=tn_args[3])
            t._log_diff_tail_probs.block_until_ready()
            del t

    return cycle, cache_info


def churn(module: str, cycles: int, points: int, light: bool = False) -> dict[str, Any]:
    """Runs in the child: ``cycles`` create/read/drop cycles, ``points`` RSS checkpoints;
    ``light``: only the BernoulliLogits part (fewer first-use compilations)."""
    import jax

    cycle, cache_info = _workload(module, light)
    warmup = max(1, min(2000, cycles // 10))
    for i in range(warmup):
        cycle(i)
    gc.collect()
    device = jax.devices()[0]

    def device_bytes() -> int | None:
        stats = device.memory_stats() if hasattr(device, "memory_stats") else None
        return None if not stats else stats.get("bytes_in_use")

    every = max(1, cycles // points)
    trace = []
    t0 = time.perf_counter()
    for i in range(cycles + 1):
        if i % every == 0 or i == cycles:
            instances, values = cache_info()
            trace.append({"cycle": i, "rss_mb": rss_mb(), "cache_instances": instances,
                          "cache_values": values, "device_bytes": device_bytes(),
                          "seconds": time.perf_counter() - t0})
        if i < cycles:
            cycle(i)
    elapsed = time.perf_counter() - t0
    gc.collect()
    after_gc = {"rss_mb": rss_mb(), "cache": list(cache_info())}
    return {"module": module, "cycles": cycles, "light": light, "warmup_cycles": warmup,
            "trace": trace, "after_gc": after_gc, "us_per_cycle": elapsed / cycles * 1e6}


def bench_memory(profile: Profile) -> BenchResult:
    result = BenchResult(
        name="memory",
        title=f"Create/read/drop churn, {profile.churn_cycles} cycles, fresh subprocess each",
        unit="MB", variants={"numpyro": "numpyro.distributions", "stabledist": "stabledist"},
        nocache="not applicable",
        extra={"cycle": CYCLE if not profile.churn_light else CYCLE.split(";")[0]},
    )
    step(f"memory: {profile.churn_cycles} cycles per implementation, both subprocesses "
         "at once (RSS, not time, is measured)")
    procs = {m: child.spawn("bench_memory", "churn", module=m, cycles=profile.churn_cycles,
                            points=profile.churn_points, light=profile.churn_light)
             for m in ("numpyro", "stabledist")}
    runs = {}
    for module, proc in procs.items():
        runs[module] = child.result(proc, f"churn ({module})")
        progress(f"memory: {module} done, {runs[module]['us_per_cycle']:.0f} us/cycle")
    growth = {m: [r["trace"][-1]["rss_mb"] - r["trace"][0]["rss_mb"]] for m, r in runs.items()}
    peak = {m: [max(p["rss_mb"] for p in r["trace"]) - r["trace"][0]["rss_mb"]]
            for m, r in runs.items()}
    result.cases.append(Case("rss growth", {"kind": "growth", "unit": "MB"}, growth))
    result.cases.append(Case("rss peak above start", {"kind": "peak", "unit": "MB"}, peak))
    result.cases.append(Case("time per cycle", {"kind": "time", "unit": "us/cycle"},
                             {m: [r["us_per_cycle"]] for m, r in runs.items()}))
    result.extra["runs"] = runs
    result.extra["max_cache_instances"] = max(p["cache_instances"]
                                              for p in runs["stabledist"]["trace"])
    return result
