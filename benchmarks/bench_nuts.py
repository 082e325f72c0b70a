"""End-to-end NUTS with global (concrete, module-level) priors and parallel chains."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
import numpyro
from numpyro.infer import MCMC, NUTS

from benchmarks.common import MODULES, quiet, spd
from benchmarks.config import Profile
from benchmarks.timing import BenchResult, Case, interleave, progress

Model = Callable[..., None]


def _data(model: str) -> tuple[Any, ...]:
    rng = np.random.default_rng(7)
    if model == "regression":
        x = rng.standard_normal((200, 8)).astype(np.float32)
        y = x @ np.linspace(-1, 1, 8, dtype=np.float32) + 0.5 * rng.standard_normal(200)
        return jnp.asarray(x), jnp.asarray(y, jnp.float32)
    if model == "angles":
        return (jnp.asarray(rng.vonmises([0.4, -0.8], 2.0, (60, 2)), jnp.float32),)
    if model == "tiny":
        return (jnp.asarray(rng.normal(0.5, 1.0, 10), jnp.float32),)
    raise KeyError(model)


def build_model(m: Any, model: str) -> Model:
    """The model with its global priors built now (concrete parameters), as users write
    them at module level."""
    if model == "regression":
        beta_prior = m.MultivariateNormal(jnp.zeros(8), covariance_matrix=jnp.asarray(spd(8)))
        sigma_prior = m.TruncatedNormal(1.0, 0.5, low=0.1, high=3.0)

        def regression(x: jax.Array, y: jax.Array) -> None:
            beta = numpyro.sample("beta", beta_prior)
            sigma = numpyro.sample("sigma", sigma_prior)
            numpyro.sample("y", m.Normal(x @ beta, sigma), obs=y)

        return regression
    if model == "angles":
        prior = m.SineBivariateVonMises(0.5, -1.0, 2.0, 3.0, correlation=0.8)

        def angles(y: jax.Array) -> None:
            a = numpyro.sample("angles", prior)
            numpyro.sample("phi", m.VonMises(a[0], 2.0), obs=y[:, 0])
            numpyro.sample("psi", m.VonMises(a[1], 2.0), obs=y[:, 1])

        return angles
    if model == "tiny":
        location_prior = m.TruncatedNormal(0.0, 1.0, low=-1.0, high=2.0)

        def tiny(y: jax.Array) -> None:
            loc = numpyro.sample("loc", location_prior)
            numpyro.sample("y", m.Normal(loc, 1.0), obs=y)

        return tiny
    raise KeyError(model)


MODEL_TEXT = {
    "regression": "linear regression, 200 x 8: beta ~ global MultivariateNormal(0, Sigma), "
    "sigma ~ global TruncatedNormal(1, 0.5, low=0.1, high=3)",
    "angles": "a pair of angles ~ global SineBivariateVonMises (its norm_const is lazy), "
    "60 von Mises observations each",
    "tiny": "loc ~ global TruncatedNormal(0, 1, low=-1, high=2), 10 normal observations "
    "(smoke profile only)",
}


def chains_setup(chains: int | None = None) -> tuple[int, str]:
    """Chains (default: one per device, at least 2) and the method: parallel (pmap) when
    there is a device per chain, else vectorized."""
    n = jax.local_device_count()
    chains = chains or max(n, 2)
    return chains, "parallel" if chains <= n else "vectorized"


def _run(m: Any, model: str, warmup: int, samples: int, data: tuple,
         chains: int | None) -> dict[str, Any]:
    chains, method = chains_setup(chains)
    with quiet():
        fn = build_model(m, model)
        mcmc = MCMC(NUTS(fn), num_warmup=warmup, num_samples=samples, num_chains=chains,
                    chain_method=method, progress_bar=False)
        t0 = time.perf_counter()
        mcmc.run(jax.random.PRNGKey(0), *data)
        draws = jax.block_until_ready(mcmc.get_samples())
        elapsed = time.perf_counter() - t0
    means = {k: np.asarray(v).mean(axis=0).round(4).tolist() for k, v in draws.items()}
    return {"seconds": elapsed, "posterior_means": means}


def bench_nuts(profile: Profile) -> BenchResult:
    chains, method = chains_setup(profile.nuts_chains)
    result = BenchResult(
        name="nuts",
        title=f"End-to-end NUTS (compile + {profile.nuts_warmup} warmup + "
        f"{profile.nuts_samples} samples), {chains} chains, chain_method={method!r}",
        unit="s",
        variants={
            "numpyro": "global numpyro priors (recomputed inside the traced potential)",
            "stabledist": "global stabledist priors (lazy values computed once, constants)",
        },
        nocache="not measured separately: under tracing numpyro recomputes lazy values in "
        "the potential, which is the no-cache behaviour",
        extra={"chains": chains, "chain_method": method, "devices": jax.local_device_count(),
               "warmup": profile.nuts_warmup, "samples": profile.nuts_samples},
    )
    for model in profile.nuts_models:
        data = _data(model)
        if profile.nuts_prewarm:
            progress(f"nuts {model}: warm-up runs (eager-op caches, not timed)")
            for variant in MODULES:
                _run(MODULES[variant], model, 5, 5, data, profile.nuts_chains)
        records: dict[str, list[dict[str, Any]]] = {v: [] for v in MODULES}

        def timed(variant: str, model: str = model, data: tuple = data,
                  records: dict = records) -> Callable[[int], int]:
            def run(number: int) -> int:
                rec = _run(MODULES[variant], model, profile.nuts_warmup,
                           profile.nuts_samples, data, profile.nuts_chains)
                records[variant].append(rec)
                progress(f"nuts {model}: {variant} {rec['seconds']:.1f}s")
                return int(rec["seconds"] * 1e9)

            return run

        samples = interleave({v: timed(v) for v in MODULES}, dict.fromkeys(MODULES, 1),
                             profile.nuts_reps)
        result.cases.append(
            Case(model, {"model": MODEL_TEXT[model], "unit": "s"},
                 {v: [s / 1e9 for s in vals] for v, vals in samples.items()},
                 dict.fromkeys(MODULES, 1),
                 extra={"records": records}),
        )
    return result
