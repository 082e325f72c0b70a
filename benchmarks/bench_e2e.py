"""End-to-end inference on real models, as users pay for it: ``MCMC(NUTS).run`` and
``SVI.run``, compile included, split into trace / lower / compile / run. Each model builds its
global distributions once, as users write them at module level; the variants differ only in
the module they come from.
"""

from __future__ import annotations

import gc
import hashlib
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
from numpyro.contrib.control_flow import scan
from numpyro.infer import MCMC, NUTS, SVI, Predictive, Trace_ELBO
from numpyro.infer.autoguide import AutoNormal

from benchmarks.common import MODULES, quiet
from benchmarks.config import Profile
from benchmarks.phases import PHASES, record_phases
from stabledist.benchmark._measure import BenchResult, Case, rounds, step

Model = Callable[..., None]

PREDICT_INDUCING, PREDICT_DRAWS, PREDICT_CALLS, PREDICT_POINTS = 500, 200, 50, 50
METHODS = {"gp_predict": ("Predictive",)}
"""A model's own inference methods (the others run the profile's ``e2e_methods``)."""


def methods(model: str, profile: Profile) -> tuple[str, ...]:
    return METHODS.get(model, profile.e2e_methods)

MODEL_TEXT = {
    "gp": "Gaussian process regression, 30 points, fixed RBF kernel: f ~ global "
    "MultivariateNormal(0, covariance_matrix=K); y ~ Normal(f, sigma); the posterior mean at "
    "20 test points, K_* @ (prior.precision_matrix @ f), is a deterministic site (reads a lazy "
    "value of the global prior)",
    "hierarchical": "hierarchical normal model, 40 groups x 5 observations, non-centred: "
    "mu ~ global Normal, tau ~ global HalfCauchy, theta_j = mu + tau * z_j (no lazy value read)",
    "regression": "linear regression 200 x 8 with global TruncatedNormal priors: beta ~ "
    "TruncatedNormal(0, 1, low=-3, high=3) (batch 8, to_event), sigma ~ TruncatedNormal(1, "
    "0.5, low=0.1, high=3) (their log_prob reads the lazy truncation normalizers)",
    "statespace": "local-level state-space model, 60 steps with numpyro's scan: level_t ~ "
    "Normal(level_t-1, s_level), y_t ~ Normal(level_t, s_obs); s_level, s_obs ~ global "
    "TruncatedNormal, level_0 ~ global Normal",
    "angles": "a pair of angles ~ global SineBivariateVonMises (its log_prob reads the lazy "
    "norm_const, a 50 x 10001-term series), 60 von Mises observations each",
    "tiny": "loc ~ global TruncatedNormal(0, 1, low=-1, high=2), 10 normal observations "
    "(smoke profile only)",
    "gp_predict": f"forecasting with an inducing-point GP: u ~ global MultivariateNormal(0, "
    f"covariance_matrix=K_uu) over {PREDICT_INDUCING} inducing points, f(x) = K_xu @ "
    "(prior.precision_matrix @ u) a deterministic site, y ~ Normal(f, sigma); "
    f"jax.jit(Predictive(model, posterior)) with {PREDICT_DRAWS} posterior draws, called on "
    f"{PREDICT_CALLS} new batches of {PREDICT_POINTS} inputs (first call with its compile "
    "included). numpyro's traced program recomputes K_uu^-1 (two triangular solves in its "
    "jaxpr) in every call; stabledist's reads it as a constant",
}


def _rbf(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    return np.exp(-0.5 * (a[:, None] - b[None, :]) ** 2 / 0.2**2)


def _gp(m: Any, rng: np.random.Generator) -> tuple[Model, tuple]:
    x, xs = np.linspace(0, 1, 30), np.linspace(0, 1, 20)
    k = (_rbf(x, x) + 0.05 * np.eye(30)).astype(np.float32)
    k_star = jnp.asarray(_rbf(xs, x), jnp.float32)
    y = jnp.asarray(np.sin(6 * x) + 0.2 * rng.standard_normal(30), jnp.float32)
    prior = m.MultivariateNormal(jnp.zeros(30), covariance_matrix=jnp.asarray(k))
    sigma_prior = m.HalfNormal(1.0)

    def gp(y: jax.Array) -> None:
        f = numpyro.sample("f", prior)
        sigma = numpyro.sample("sigma", sigma_prior)
        numpyro.deterministic("f_test", k_star @ (prior.precision_matrix @ f))
        numpyro.sample("y", m.Normal(f, sigma), obs=y)

    return gp, (y,)


def _hierarchical(m: Any, rng: np.random.Generator) -> tuple[Model, tuple]:
    groups = np.repeat(np.arange(40), 5)
    y = jnp.asarray(rng.normal(rng.normal(1.0, 2.0, 40)[groups], 1.0), jnp.float32)
    mu_prior, tau_prior, z_prior = m.Normal(0.0, 5.0), m.HalfCauchy(2.5), m.Normal(0.0, 1.0)
    g = jnp.asarray(groups)

    def hierarchical(y: jax.Array) -> None:
        mu = numpyro.sample("mu", mu_prior)
        tau = numpyro.sample("tau", tau_prior)
        with numpyro.plate("groups", 40):
            z = numpyro.sample("z", z_prior)
        numpyro.sample("y", m.Normal((mu + tau * z)[g], 1.0), obs=y)

    return hierarchical, (y,)


def _regression(m: Any, rng: np.random.Generator) -> tuple[Model, tuple]:
    x = rng.standard_normal((200, 8)).astype(np.float32)
    y = x @ np.linspace(-1, 1, 8, dtype=np.float32) + 0.5 * rng.standard_normal(200)
    beta_prior = m.TruncatedNormal(jnp.zeros(8), jnp.ones(8), low=-3.0, high=3.0).to_event(1)
    sigma_prior = m.TruncatedNormal(1.0, 0.5, low=0.1, high=3.0)

    def regression(x: jax.Array, y: jax.Array) -> None:
        beta = numpyro.sample("beta", beta_prior)
        sigma = numpyro.sample("sigma", sigma_prior)
        numpyro.sample("y", m.Normal(x @ beta, sigma), obs=y)

    return regression, (jnp.asarray(x), jnp.asarray(y, jnp.float32))


def _statespace(m: Any, rng: np.random.Generator) -> tuple[Model, tuple]:
    level = np.cumsum(0.3 * rng.standard_normal(60))
    y = jnp.asarray(level + 0.5 * rng.standard_normal(60), jnp.float32)
    s_level_prior = m.TruncatedNormal(0.3, 0.3, low=0.01, high=2.0)
    s_obs_prior = m.TruncatedNormal(0.5, 0.3, low=0.01, high=2.0)
    level0_prior = m.Normal(0.0, 2.0)

    def statespace(y: jax.Array) -> None:
        s_level = numpyro.sample("s_level", s_level_prior)
        s_obs = numpyro.sample("s_obs", s_obs_prior)
        level0 = numpyro.sample("level0", level0_prior)

        def transition(prev: jax.Array, y_t: jax.Array) -> tuple[jax.Array, None]:
            lvl = numpyro.sample("level", m.Normal(prev, s_level))
            numpyro.sample("y", m.Normal(lvl, s_obs), obs=y_t)
            return lvl, None

        scan(transition, level0, y)

    return statespace, (y,)


def _angles(m: Any, rng: np.random.Generator) -> tuple[Model, tuple]:
    prior = m.SineBivariateVonMises(0.5, -1.0, 2.0, 3.0, correlation=0.8)
    obs = jnp.asarray(rng.vonmises([0.4, -0.8], 2.0, (60, 2)), jnp.float32)

    def angles(y: jax.Array) -> None:
        a = numpyro.sample("angles", prior)
        numpyro.sample("phi", m.VonMises(a[0], 2.0), obs=y[:, 0])
        numpyro.sample("psi", m.VonMises(a[1], 2.0), obs=y[:, 1])

    return angles, (obs,)


def _gp_predict(m: Any, rng: np.random.Generator) -> tuple[Model, tuple]:
    """Its data is ``(posterior draws, batches of new inputs)``, what ``Predictive`` takes."""
    z = np.linspace(0, 1, PREDICT_INDUCING)
    k_uu = (_rbf(z, z) + 1e-3 * np.eye(PREDICT_INDUCING)).astype(np.float32)
    u_prior = m.MultivariateNormal(jnp.zeros(PREDICT_INDUCING), covariance_matrix=jnp.asarray(k_uu))
    sigma_prior = m.HalfNormal(1.0)
    zz = jnp.asarray(z, jnp.float32)

    def gp_predict(x: jax.Array, y: jax.Array | None = None) -> None:
        u = numpyro.sample("u", u_prior)
        sigma = numpyro.sample("sigma", sigma_prior)
        k_xu = jnp.exp(-0.5 * (x[:, None] - zz[None, :]) ** 2 / 0.2**2)
        f = numpyro.deterministic("f", k_xu @ (u_prior.precision_matrix @ u))
        numpyro.sample("y", m.Normal(f, sigma), obs=y)

    draws = {"u": jnp.asarray(rng.standard_normal((PREDICT_DRAWS, PREDICT_INDUCING)), jnp.float32),
             "sigma": jnp.asarray(0.1 + 0.3 * np.abs(rng.standard_normal(PREDICT_DRAWS)),
                                  jnp.float32)}
    inputs = tuple(jnp.asarray(np.sort(rng.uniform(0, 1, PREDICT_POINTS)), jnp.float32)
                   for _ in range(PREDICT_CALLS))
    return gp_predict, (draws, inputs)


def _tiny(m: Any, rng: np.random.Generator) -> tuple[Model, tuple]:
    loc_prior = m.TruncatedNormal(0.0, 1.0, low=-1.0, high=2.0)
    y = jnp.asarray(rng.normal(0.5, 1.0, 10), jnp.float32)

    def tiny(y: jax.Array) -> None:
        loc = numpyro.sample("loc", loc_prior)
        numpyro.sample("y", m.Normal(loc, 1.0), obs=y)

    return tiny, (y,)


_BUILDERS: dict[str, Callable[[Any, np.random.Generator], tuple[Model, tuple]]] = {
    "gp": _gp, "hierarchical": _hierarchical, "regression": _regression,
    "statespace": _statespace, "angles": _angles, "gp_predict": _gp_predict, "tiny": _tiny,
}
"""Each model's ``(module, rng) -> (model function, data)``: its global distributions from
``module``, its data drawn from ``rng``."""


def build(m: Any, model: str) -> tuple[Model, tuple]:
    """``(model function, data)`` with the model's global distributions built now (its data
    drawn from the same seed for both variants: they must run on the very same data)."""
    return _BUILDERS[model](m, np.random.default_rng(7))


def chains_setup(chains: int | None = None) -> tuple[int, str]:
    """Chains (default: one per device, at least 2) and the method: parallel (pmap) when
    there is a device per chain, else vectorized."""
    n = jax.local_device_count()
    chains = chains or max(n, 2)
    return chains, "parallel" if chains <= n else "vectorized"


def _summary(values: dict[str, Any]) -> dict[str, list[float]]:
    return {k: np.round(np.asarray(v, np.float64).reshape(-1, *np.shape(v)[1:]).mean(0),
                        4).reshape(-1)[:4].tolist() for k, v in values.items()}


def run_once(variant: str, model: str, method: str, profile: Profile,
             warmup: int | None = None, samples: int | None = None) -> dict[str, Any]:
    """One end-to-end run (build the model's distributions, run inference, block on the
    results), with its phase split."""
    key = jax.random.PRNGKey(0)
    with quiet(), record_phases() as rec:
        t0 = time.perf_counter()
        fn, data = build(MODULES[variant], model)
        if method == "Predictive":
            draws, inputs = data
            predict = jax.jit(Predictive(fn, draws, return_sites=["f", "y"]))
            for i, x in enumerate(inputs[: samples or len(inputs)]):
                out = jax.block_until_ready(predict(jax.random.fold_in(key, i), x))
            summary = _summary({"f": out["f"]})
        elif method == "NUTS":
            chains, chain_method = chains_setup(profile.e2e_chains)
            mcmc = MCMC(NUTS(fn), num_warmup=warmup or profile.e2e_warmup,
                        num_samples=samples or profile.e2e_samples, num_chains=chains,
                        chain_method=chain_method, progress_bar=False)
            mcmc.run(key, *data)
            out = jax.block_until_ready(mcmc.get_samples())
            summary = _summary({k: v for k, v in out.items() if k != "f_test"})
        else:
            svi = SVI(fn, AutoNormal(fn), numpyro.optim.Adam(0.01), Trace_ELBO())
            res = svi.run(key, samples or profile.e2e_svi_steps, *data, progress_bar=False)
            out = jax.block_until_ready(res.params)
            summary = {"final_loss": [round(float(res.losses[-1]), 3)]}
        seconds = time.perf_counter() - t0
    return {"seconds": seconds, "phases": {**rec.split(), "total": seconds}, "summary": summary}


@contextmanager
def dumped_programs() -> Iterator[list[str]]:
    """The StableHLO text (without source locations) of every program compiled in the block,
    in order, through JAX's ``jax_dump_ir_to``."""
    texts: list[str] = []
    before = (jax.config.read("jax_dump_ir_to"), jax.config.read("jax_include_debug_info_in_dumps"))
    with tempfile.TemporaryDirectory() as out:
        jax.config.update("jax_dump_ir_to", out)
        jax.config.update("jax_include_debug_info_in_dumps", False)
        try:
            yield texts
        finally:
            jax.config.update("jax_dump_ir_to", before[0])
            jax.config.update("jax_include_debug_info_in_dumps", before[1])
            texts.extend(p.read_text() for p in sorted(Path(out).glob("*.mlir")))


def inference_program(texts: list[str]) -> str:
    """A fingerprint of the largest program of a run: the compiled sampler (NUTS) or
    optimisation loop (SVI). Equal fingerprints mean both variants compiled the very same
    inference program, so a difference in their end-to-end times is the machine's noise."""
    return hashlib.sha256(max(texts, key=len, default="").encode()).hexdigest()[:16]


FIRST_WARMUP_WEIGHT = 4
"""Progress steps a row's first warm-up counts for: it compiles the eager programs both
variants then share (measured: 4-16 s, against 1-2 s for every other run of the row)."""


def steps(profile: Profile) -> int:
    warmups = len(MODULES) + FIRST_WARMUP_WEIGHT - 1 if profile.e2e_prewarm else 0
    per = len(MODULES) * profile.e2e_reps + warmups
    return sum(len(methods(m, profile)) for m in profile.e2e_models) * per


def bench_e2e(profile: Profile) -> BenchResult:
    chains, chain_method = chains_setup(profile.e2e_chains)
    result = BenchResult(
        name="e2e", unit="s",
        title=f"End-to-end inference: NUTS ({chains} chains, {chain_method}, "
        f"{profile.e2e_warmup} warmup + {profile.e2e_samples} samples) and SVI "
        f"(AutoNormal, {profile.e2e_svi_steps} steps), compile included",
        variants={"numpyro": "the model's global distributions from numpyro.distributions",
                  "stabledist": "the same distributions from stabledist"},
        nocache="not measured separately: under tracing numpyro recomputes lazy values in "
        "the traced model, which is the no-cache behaviour",
        extra={"chains": chains, "chain_method": chain_method,
               "devices": jax.local_device_count(), "warmup": profile.e2e_warmup,
               "samples": profile.e2e_samples, "svi_steps": profile.e2e_svi_steps,
               "phases": "trace / lower / compile: JAX's own spans (jax.monitoring), "
               "attributed exclusively; run: the rest (sampling or optimisation, device "
               "time, host Python outside traces)"},
    )
    variants = list(MODULES)
    for model in profile.e2e_models:
        for method in methods(model, profile):
            programs: dict[str, str] = {}
            if profile.e2e_prewarm:
                # jax keeps every compiled program until clear_caches: ~140 NUTS runs in
                # one process exhaust its memory maps. Each row starts clean; its untimed
                # warm-up compiles the eager per-primitive programs both variants share.
                jax.clear_caches()
                gc.collect()
                for variant in variants:
                    step(f"e2e {model} {method}: untimed warm-up run ({variant})",
                         weight=FIRST_WARMUP_WEIGHT if variant == variants[0] else 1)
                    with dumped_programs() as texts:
                        run_once(variant, model, method, profile, warmup=5, samples=5)
                    programs[variant] = inference_program(texts)
            records: dict[str, list[dict[str, Any]]] = {v: [] for v in variants}
            for rep, variant in rounds(variants, profile.e2e_reps):
                step(f"e2e {model} {method}: {variant} rep {rep + 1}/{profile.e2e_reps}")
                records[variant].append(run_once(variant, model, method, profile))
            samples = {v: [r["seconds"] for r in recs] for v, recs in records.items()}
            phases = {v: {p: [r["phases"][p] for r in recs] for p in (*PHASES, "xla_compiles")}
                      for v, recs in records.items()}
            result.cases.append(Case(
                f"{model} {method}",
                {"model": model, "method": method, "what": MODEL_TEXT[model], "unit": "s",
                 "same_program": len(set(programs.values())) == 1 if programs else None},
                samples, dict.fromkeys(variants, 1),
                extra={"phases": phases, "inference_program": programs,
                       "summary": {v: recs[0]["summary"] for v, recs in records.items()}},
            ))
    return result
