"""Real numpyro workloads, each written once as a function of the distributions module and run
with ``numpyro.distributions`` and with ``stabledist``.

Where both runs execute the same program, the results must be bitwise equal
(``np.testing.assert_array_equal``) and every distribution they return must have numpyro's leaf
layout. The legitimate difference: a GLOBAL distribution's lazy value first read inside a
compiled program is hoisted by stabledist (computed once, a constant) where numpyro
recomputes it in the program. A long MCMC chain over such a model can
drift apart in the last bits, so those tests compare the posteriors statistically instead
(Monte Carlo standard errors from ``numpyro.diagnostics.effective_sample_size``).

Models are tiny (a handful of data points, 2 chains, 50-200 draws): the cost is tracing and
compilation, and numpyro's and stabledist's programs are the same HLO, so the second run of
each pair hits JAX's compilation cache.

They run under XLA's default code generation, the one users run (``make
test-integration``, CI), and only there: ``make test``'s cheaper code generation ran them
once more (90 worker-seconds of a clean clone's run) to compare the same two programs again.
"""

from __future__ import annotations

import pickle
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, nullcontext
from types import ModuleType
from typing import Any

import cloudpickle
import jax
import jax.numpy as jnp
import numpy as np
import numpyro
import numpyro.distributions as nd
import optax
import pytest
from jax import lax
from numpyro import optim
from numpyro.contrib.control_flow import scan as numpyro_scan
from numpyro.diagnostics import effective_sample_size
from numpyro.distributions.batch_util import vmap_over
from numpyro.infer import HMC, MCMC, NUTS, SVI, Predictive, Trace_ELBO, autoguide, log_likelihood
from numpyro.infer.util import log_density

import stabledist as sd

pytestmark = pytest.mark.xla_defaults  # `make test-integration` (the docstring)

Workload = Callable[..., Any]

# --- comparison helpers -------------------------------------------------------------------


def both(workload: Workload, *args: Any, **kwargs: Any) -> tuple[Any, Any]:
    """``workload`` run with numpyro's distributions, then with stabledist's."""
    return workload(nd, *args, **kwargs), workload(sd, *args, **kwargs)


def is_distribution(x: Any) -> bool:
    return isinstance(x, nd.Distribution)


def assert_bitwise(expected: Any, actual: Any) -> None:
    """Same leaves, bit for bit, in the same order; distributions are compared by their values
    (see `values`), not by their pytree structure, which names different classes."""
    expected_leaves = jax.tree_util.tree_leaves(values(expected))
    actual_leaves = jax.tree_util.tree_leaves(values(actual))
    assert expected_leaves and len(actual_leaves) == len(expected_leaves)
    for e, a in zip(expected_leaves, actual_leaves):
        e, a = np.asarray(e), np.asarray(a)
        assert a.dtype == e.dtype
        np.testing.assert_array_equal(a, e)


def values(tree: Any) -> Any:
    """``tree`` with every distribution replaced by its numpyro class name and its leaves in
    field-name order (numpyro's leaf order follows PYTHONHASHSEED, stabledist's does not)."""
    def one(x: Any) -> Any:
        if not is_distribution(x):
            return x
        leaves = [leaf for _, leaf in sorted(named_leaves(x), key=lambda item: item[0])]
        return [numpyro_class(x).__name__, *leaves]

    return jax.tree_util.tree_map(one, tree, is_leaf=is_distribution)


def numpyro_class(d: Any) -> type:
    """The numpyro class a (stable or numpyro) distribution is an instance of."""
    return next(c for c in type(d).__mro__ if c.__module__.startswith("numpyro."))


def named_leaves(d: Any) -> list[tuple[str, Any]]:
    """(name, leaf) pairs of a distribution for numpyro's declared data fields, read from the
    instance state (never through a lazy property), recursing into nested distributions."""
    out = []
    for name in numpyro_class(d).gather_pytree_data_fields():
        value = vars(d).get(name)
        if value is None:
            continue
        if is_distribution(value):
            out += [(f"{name}.{sub}", leaf) for sub, leaf in named_leaves(value)]
        else:
            out += [(f"{name}{jax.tree_util.keystr(p)}", leaf)
                    for p, leaf in jax.tree_util.tree_flatten_with_path(value)[0]]
    return out


def assert_same_layout(expected: Any, actual: Any) -> None:
    """stabledist's distribution flattens to as many leaves as numpyro's, of the same shapes:
    alternative parametrizations are not leaves (the core contract)."""
    e_leaves, a_leaves = jax.tree_util.tree_leaves(expected), jax.tree_util.tree_leaves(actual)
    assert len(a_leaves) == len(e_leaves), (
        f"{type(actual).__name__}: {len(a_leaves)} leaves, numpyro has {len(e_leaves)}")
    shapes = sorted((jnp.shape(x), str(jnp.result_type(x))) for x in e_leaves)
    assert sorted((jnp.shape(x), str(jnp.result_type(x))) for x in a_leaves) == shapes


def assert_same_posterior(expected: dict, actual: dict, tolerance: float = 5.0) -> None:
    """Posterior means of each site agree within ``tolerance`` Monte Carlo standard errors.
    Samples are grouped by chain: (chains, draws, ...)."""
    assert expected.keys() == actual.keys()
    for site in expected:
        means, variances = [], []
        for samples in (np.asarray(expected[site]), np.asarray(actual[site])):
            ess = effective_sample_size(samples)
            flat = samples.reshape((-1, *samples.shape[2:]))
            means.append(flat.mean(0))
            variances.append(flat.var(0) / ess)
        assert np.all(np.isfinite(means[0])) and np.all(np.isfinite(means[1]))
        mcse = np.sqrt(variances[0] + variances[1])
        z = np.abs(means[0] - means[1]) / mcse
        assert np.all(z < tolerance), f"{site}: means {means[0]} vs {means[1]}, z={z}"


def stable_internals(dist: ModuleType) -> AbstractContextManager[Any]:
    """numpyro's own code (autoguides, Predictive) builds stable instances under stabledist."""
    return sd.stable_internals() if dist is sd else nullcontext()


def key(i: int) -> jax.Array:
    return jax.random.PRNGKey(i)


# --- data and models ------------------------------------------------------------------------

X = jnp.array([[1.0, 0.5], [0.2, -1.0], [-0.7, 0.3], [1.5, 1.1], [-1.2, -0.4], [0.3, 0.8]])
Y = jnp.array([1.1, -0.8, 0.1, 2.3, -1.5, 0.9])
PRIOR_COV = jnp.array([[2.0, 0.3], [0.3, 1.0]])


def regression(dist: ModuleType) -> Callable[..., None]:
    """A Bayesian linear regression whose distributions are built inside the model (their
    parameters are tracers under MCMC/SVI), one of them from a covariance matrix."""
    def model(x: jax.Array, y: jax.Array | None = None) -> None:
        beta = numpyro.sample("beta", dist.MultivariateNormal(jnp.zeros(2), PRIOR_COV))
        sigma = numpyro.sample("sigma", dist.HalfNormal(1.0))
        with numpyro.plate("data", x.shape[0]):
            numpyro.sample("y", dist.Normal(x @ beta, sigma), obs=y)

    return model


# --- MCMC ----------------------------------------------------------------------------------


def mcmc_workload(dist: ModuleType, kernel: type, chain_method: str) -> dict:
    mcmc = MCMC(kernel(regression(dist)), num_warmup=60, num_samples=60, num_chains=2,
                chain_method=chain_method, progress_bar=False)
    mcmc.run(key(0), X, Y, extra_fields=("potential_energy",))
    return {"samples": mcmc.get_samples(group_by_chain=True),
            "extra": mcmc.get_extra_fields(group_by_chain=True)}


@pytest.mark.parametrize(("kernel", "chain_method"), [
    (NUTS, "vectorized"), (NUTS, "sequential"), (NUTS, "parallel"), (HMC, "vectorized"),
], ids=["nuts-vectorized", "nuts-sequential", "nuts-parallel", "hmc-vectorized"])
def test_mcmc_chains(kernel: type, chain_method: str) -> None:
    """Two chains of NUTS/HMC over a model that builds its distributions: the same program, so
    the same draws bit for bit (parallel: pmap over 2 of the 4 host devices)."""
    expected, actual = both(mcmc_workload, kernel, chain_method)
    assert expected["samples"]["beta"].shape == (2, 60, 2)
    assert_bitwise(expected, actual)


def nuts_chains(model: Callable[..., None], chain_method: str = "vectorized") -> dict:
    """2 NUTS chains (vectorized unless asked) of 60 + 60 draws on the regression data,
    grouped by chain: the workloads below compare them bit for bit (every draw depends on
    all earlier ones, so a longer chain would prove nothing more)."""
    mcmc = MCMC(NUTS(model), num_warmup=60, num_samples=60, num_chains=2,
                chain_method=chain_method, progress_bar=False)
    mcmc.run(key(1), X, Y)
    return mcmc.get_samples(group_by_chain=True)


def global_prior_workload(dist: ModuleType) -> dict:
    """A model over GLOBAL priors (built once, outside the model, with concrete parameters):
    the two-sided TruncatedNormal's log density reads its lazy log normalizer; the MVN's
    ``variance`` (a lazy value) is read outside the model, eagerly in both."""
    mu_prior = dist.TruncatedNormal(0.0, jnp.array([1.0, 2.0]), low=-1.0, high=1.5).to_event(1)
    beta_prior = dist.MultivariateNormal(jnp.zeros(2), precision_matrix=jnp.linalg.inv(PRIOR_COV))
    noise_scale = jnp.sqrt(beta_prior.variance.sum())  # a lazy value read outside the model

    def model(x: jax.Array, y: jax.Array) -> None:
        mu = numpyro.sample("mu", mu_prior)
        beta = numpyro.sample("beta", beta_prior)
        sigma = numpyro.sample("sigma", dist.HalfNormal(noise_scale))
        with numpyro.plate("data", x.shape[0]):
            numpyro.sample("y", dist.Normal(mu.sum() + x @ beta, sigma), obs=y)

    return nuts_chains(model)


def test_mcmc_global_elementwise_priors_bitwise() -> None:
    """The priors are global, but their lazy values (TruncatedNormal's log normalizer) are
    elementwise work, which stabledist computes in the trace exactly as numpyro does
    (`stabledist._src.lazy.hoisting`): the same compiled program, the same draws."""
    expected, actual = both(global_prior_workload)
    assert expected["beta"].shape == actual["beta"].shape == (2, 60, 2)
    assert_bitwise(expected, actual)
    for site in ("mu",):  # the truncation holds in both
        assert np.all((actual[site] >= -1.0) & (actual[site] <= 1.5))


def global_precision_workload(dist: ModuleType, chain_method: str) -> dict:
    """A model whose log density reads the ``precision_matrix`` of a GLOBAL MVN (built once,
    outside the model, from a covariance)."""
    prior = dist.MultivariateNormal(jnp.zeros(2), covariance_matrix=PRIOR_COV)

    def model(x: jax.Array, y: jax.Array) -> None:
        beta = numpyro.sample("beta", dist.Normal(0.0, 3.0).expand([2]).to_event(1))
        numpyro.factor("prior", -0.5 * beta @ prior.precision_matrix @ beta)
        with numpyro.plate("data", x.shape[0]):
            numpyro.sample("y", dist.Normal(x @ beta, 1.0), obs=y)

    return nuts_chains(model, chain_method)


@pytest.mark.parametrize("chain_method", ["vectorized", "parallel"])
def test_mcmc_global_precision_bitwise(chain_method: str) -> None:
    """NUTS first evaluates the potential and its gradient outside ``jit`` (``grad``,
    ``vmap``: finding initial parameters), where the global MVN's ``precision_matrix`` is
    computed eagerly; numpyro caches it in ``__dict__``, stabledist in its cache, and every
    later compiled program uses that constant: the same programs, the same draws (parallel:
    ``pmap`` over 2 of the 4 host devices)."""
    expected, actual = both(global_precision_workload, chain_method)
    assert expected["beta"].shape == actual["beta"].shape == (2, 60, 2)
    assert_bitwise(expected, actual)


# --- SVI -----------------------------------------------------------------------------------

GUIDES: dict[str, Callable[[Callable[..., None]], Any]] = {
    "AutoNormal": autoguide.AutoNormal,
    "AutoMultivariateNormal": autoguide.AutoMultivariateNormal,
    "AutoLowRankMultivariateNormal": lambda m: autoguide.AutoLowRankMultivariateNormal(m, rank=2),
    "AutoDelta": autoguide.AutoDelta,
    "AutoIAFNormal": lambda m: autoguide.AutoIAFNormal(m, num_flows=1, hidden_dims=[4]),
}


def svi_workload(dist: ModuleType, guide_name: str, internals: bool = False) -> dict:
    """SVI, posterior draws; ``internals``: under stabledist, numpyro's own code (the guide,
    its posterior) builds stable distributions too."""
    with stable_internals(dist) if internals else nullcontext():
        model = regression(dist)
        guide = GUIDES[guide_name](model)
        svi = SVI(model, guide, optim.Adam(0.05), Trace_ELBO())
        result = svi.run(key(2), 40, X, Y, progress_bar=False)
        draws = guide.sample_posterior(key(3), result.params, sample_shape=(4,))
        out = {"params": result.params, "losses": result.losses, "draws": draws}
        if internals:
            out["posterior"] = guide.get_posterior(result.params)
            assert sd.is_stable(out["posterior"]) == (dist is sd)
        return out


@pytest.mark.parametrize("guide_name", sorted(GUIDES))
def test_svi_autoguides(guide_name: str) -> None:
    """40 Adam steps of SVI and posterior draws: bitwise equal (guide predictions: see
    `test_predictive`)."""
    expected, actual = both(svi_workload, guide_name)
    assert expected["losses"].shape == (40,)
    assert_bitwise(expected, actual)


@pytest.mark.parametrize("guide_name", ["AutoMultivariateNormal", "AutoIAFNormal"])
def test_svi_autoguides_with_stable_internals(guide_name: str) -> None:
    """The same under ``stabledist.stable_internals()``: the guide's own distributions (an
    MVN from ``scale_tril``, a flow's TransformedDistribution) are stable instances."""
    expected, actual = both(svi_workload, guide_name, internals=True)
    assert_same_layout(expected["posterior"], actual["posterior"])
    assert_bitwise(expected, actual)


def posterior_stack_workload(dist: ModuleType) -> tuple:
    """``tree_map(jnp.stack)`` over an autoguide's posterior MVN (built from ``scale_tril`` by
    numpyro's code) and a user's MVN built from a covariance matrix: one tree structure."""
    model = regression(dist)
    guide = autoguide.AutoMultivariateNormal(model)
    svi = SVI(model, guide, optim.Adam(0.05), Trace_ELBO())
    params = svi.get_params(svi.init(key(5), X, Y))
    with stable_internals(dist):
        posterior = guide.get_posterior(params)
    user = dist.MultivariateNormal(jnp.ones(3), covariance_matrix=jnp.diag(jnp.array([1., 2., 3.])))
    stacked = jax.tree_util.tree_map(lambda *xs: jnp.stack(xs), posterior, user)
    point = jnp.array([0.1, -0.2, 0.3])
    return stacked, (stacked.loc, stacked.scale_tril, stacked.covariance_matrix,
                     stacked.log_prob(point), stacked.sample(key(6)))


def test_tree_map_stack_guide_posterior_and_user_mvn() -> None:
    """The stack is the batch of its two elements (issue 24): numpyro keeps the first's batch
    shape ``()``, so its sample draws one noise vector for both rows; the log-densities and
    parametrizations are numpyro's, bit for bit."""
    (expected_d, expected), (actual_d, actual) = both(posterior_stack_workload)
    assert expected_d.batch_shape == () and actual_d.batch_shape == (2,)
    assert actual_d.loc.shape == (2, 3) and actual[2].shape == (2, 3, 3)
    assert jax.tree.structure(actual_d) == jax.tree.structure(actual_d[0].__class__(
        actual_d.loc[0], scale_tril=actual_d.scale_tril[0]))  # the treedef of an element
    assert_same_layout(expected_d, actual_d)
    assert_bitwise(expected[:4], actual[:4])
    noise = [jnp.linalg.solve(actual_d.scale_tril[i], actual[4][i] - actual_d.loc[i])
             for i in range(2)]
    assert actual[4].shape == (2, 3) and not np.allclose(noise[0], noise[1])


# --- Predictive ----------------------------------------------------------------------------

POSTERIOR = {  # fixed "posterior draws": (chains=2, draws=3)
    "beta": jnp.array([[[0.5, 1.0], [0.6, 0.9], [0.4, 1.2]],
                       [[0.7, 0.8], [0.5, 1.1], [0.3, 1.0]]]),
    "sigma": jnp.array([[0.5, 0.6, 0.4], [0.7, 0.5, 0.6]]),
}
FLAT_POSTERIOR = {k: v.reshape((6, *v.shape[2:])) for k, v in POSTERIOR.items()}
X_NEW = jnp.linspace(-1.0, 1.0, 16).reshape(8, 2)  # a new input shape: 8 rows instead of 6


def predictive_workload(dist: ModuleType) -> dict:
    model = regression(dist)
    guide = autoguide.AutoNormal(model)
    svi = SVI(model, guide, optim.Adam(0.05), Trace_ELBO())
    params = svi.get_params(svi.init(key(7), X, Y))
    return {
        "posterior": Predictive(model, FLAT_POSTERIOR)(key(8), X),
        "new_shape": Predictive(model, FLAT_POSTERIOR)(key(8), X_NEW),
        "parallel": Predictive(model, FLAT_POSTERIOR, parallel=True)(key(8), X_NEW),
        "batch_ndims_2": Predictive(model, POSTERIOR, batch_ndims=2)(key(9), X),
        "guide": Predictive(model, guide=guide, params=params, num_samples=4)(key(10), X_NEW),
        "prior": Predictive(model, num_samples=5)(key(11), X),
        "log_likelihood": log_likelihood(model, FLAT_POSTERIOR, X, Y),
        "log_likelihood_2": log_likelihood(model, POSTERIOR, X, Y, batch_ndims=2),
        "log_likelihood_parallel": log_likelihood(model, FLAT_POSTERIOR, X, Y, parallel=True),
    }


def test_predictive() -> None:
    """Predictive from posterior draws (old and new input shape, vectorized and parallel,
    batch_ndims=2), from a guide, from the prior; log_likelihood: bitwise equal."""
    expected, actual = both(predictive_workload)
    assert actual["new_shape"]["y"].shape == (6, 8)
    assert actual["batch_ndims_2"]["y"].shape == (2, 3, 6)
    assert actual["log_likelihood_2"]["y"].shape == (2, 3, 6)
    assert_bitwise(expected, actual)


# --- numpyro.contrib.control_flow.scan models ------------------------------------------------

SERIES = jnp.array([0.3, 0.5, 0.1, -0.2, -0.4, 0.0, 0.6])


def ar1(dist: ModuleType) -> Callable[..., None]:
    """A latent AR(1) process: a numpyro scan whose body samples and observes."""
    def model(y: jax.Array | None = None, length: int = 7) -> None:
        rho = numpyro.sample("rho", dist.Uniform(-1.0, 1.0))
        scale = numpyro.sample("scale", dist.HalfNormal(1.0))

        def transition(z_prev: jax.Array, y_t: jax.Array | None) -> tuple:
            z = numpyro.sample("z", dist.Normal(rho * z_prev, scale))
            numpyro.sample("y", dist.Normal(z, 0.3), obs=y_t)
            return z, z

        numpyro_scan(transition, jnp.array(0.0), y, length=length)

    return model


def scan_model_workload(dist: ModuleType) -> dict:
    """Prior predictive, the jitted log density and its gradient (what NUTS evaluates), with
    numpyro's validation disabled (see `test_contrib_scan_model_with_validation` for why)."""
    model = ar1(dist)
    with numpyro.validation_enabled(False):
        prior = Predictive(model, num_samples=4)(key(12))
        points = {k: v[:2] for k, v in prior.items() if k != "y"}
        density = jax.jit(jax.vmap(lambda p: log_density(model, (SERIES,), {}, p)[0]))
        grad = jax.jit(jax.vmap(jax.grad(lambda p: log_density(model, (SERIES,), {}, p)[0])))
        return {"prior": prior, "log_density": density(points), "grad": grad(points)}


def test_contrib_scan_model() -> None:
    """A numpyro-scan model: prior predictive, jitted log density and its gradient."""
    expected, actual = both(scan_model_workload)
    assert actual["prior"]["z"].shape == (4, 7) and actual["log_density"].shape == (2,)
    assert_bitwise(expected, actual)


def scan_model_validated_workload(dist: ModuleType) -> dict:
    model = ar1(dist)
    prior = Predictive(model, num_samples=4)(key(12))
    point = {k: v[0] for k, v in prior.items() if k != "y"}
    mcmc = MCMC(NUTS(model), num_warmup=60, num_samples=60, num_chains=2,
                chain_method="vectorized", progress_bar=False)
    mcmc.run(key(13), SERIES)
    return {"prior": prior, "log_density": log_density(model, (SERIES,), {}, point)[0],
            "samples": mcmc.get_samples(group_by_chain=True)}


def test_contrib_scan_model_with_validation() -> None:
    """numpyro 0.22 validates by default; numpyro's scan returns each site's distribution
    through ``lax.scan``, whose round trip leaves ``validate_args`` unset (``None``) in both
    libraries: the same compiled potential, so NUTS gives numpyro's chains bit for bit."""
    expected, actual = both(scan_model_validated_workload)
    assert actual["samples"]["z"].shape == (2, 60, 7)
    assert_bitwise(expected, actual)


# --- lax control flow over distributions of every parametrization ---------------------------
# Each family: canonical parameters (loc-like, matrix-like) read from an instance, a way to move
# them, and one builder per parametrization, so a loop can start from one parametrization and
# produce another. numpyro's pytree of each family is the same for every parametrization.


def _spd(n: int, shift: float) -> jax.Array:
    a = jnp.arange(1.0, n * n + 1).reshape(n, n) / (n * n)
    return a @ a.T + shift * jnp.eye(n)


FAMILIES: dict[str, dict[str, Any]] = {
    "MultivariateNormal": {
        "read": lambda d: (d.loc, d.covariance_matrix),
        "init": (jnp.array([0.5, -0.5]), _spd(2, 1.0)),
        "build": {
            "covariance_matrix": lambda m, loc, s: m.MultivariateNormal(loc, covariance_matrix=s),
            "precision_matrix": lambda m, loc, s: m.MultivariateNormal(
                loc, precision_matrix=jnp.linalg.inv(s)),
            "scale_tril": lambda m, loc, s: m.MultivariateNormal(
                loc, scale_tril=jnp.linalg.cholesky(s)),
        },
        "point": jnp.array([0.2, 0.1]),
    },
    "Wishart": {
        "read": lambda d: (d.concentration, d.scale_matrix),
        "init": (jnp.array(5.0), _spd(2, 0.5)),
        "build": {
            "scale_matrix": lambda m, c, s: m.Wishart(c, scale_matrix=s),
            "rate_matrix": lambda m, c, s: m.Wishart(c, rate_matrix=jnp.linalg.inv(s)),
            "scale_tril": lambda m, c, s: m.Wishart(c, scale_tril=jnp.linalg.cholesky(s)),
        },
        "point": _spd(2, 2.0),
    },
    "CirculantNormal": {
        "read": lambda d: (d.loc, d.covariance_row),
        "init": (jnp.array([0.1, 0.2, 0.3, 0.4]), jnp.array([1.0, 0.3, 0.1, 0.3])),
        "build": {
            "covariance_row": lambda m, loc, r: m.CirculantNormal(loc, covariance_row=r),
            "covariance_rfft": lambda m, loc, r: m.CirculantNormal(
                loc, covariance_rfft=jnp.fft.rfft(r).real),
        },
        "point": jnp.array([0.0, 0.5, -0.5, 1.0]),
    },
}
PARAMETRIZATIONS = [(family, p) for family, spec in FAMILIES.items() for p in spec["build"]]
PARAM_IDS = [f"{family}-{p}" for family, p in PARAMETRIZATIONS]


def _next_parametrization(family: str, name: str) -> str:
    names = list(FAMILIES[family]["build"])
    return names[(names.index(name) + 1) % len(names)]


def _move(a: jax.Array, s: jax.Array) -> tuple[jax.Array, jax.Array]:
    """One step of a loop body: still a valid parameter pair for every family."""
    return a * 0.9 + 0.05, s * 0.8 + 0.1 * jnp.diag(jnp.diag(s)) if s.ndim == 2 else s * 0.9


def _readout(family: str, d: Any) -> tuple:
    """Everything a user reads from a loop's result: parameters in every parametrization,
    a log density and a draw."""
    spec = FAMILIES[family]
    lazy = {"MultivariateNormal": ("loc", "scale_tril", "covariance_matrix", "precision_matrix"),
            "Wishart": ("concentration", "scale_tril", "scale_matrix", "rate_matrix"),
            "CirculantNormal": ("loc", "covariance_rfft", "covariance_row")}[family]
    return (*(getattr(d, name) for name in lazy), d.log_prob(spec["point"]), d.sample(key(14)))


def scan_parametrization_workload(dist: ModuleType, family: str, start: str) -> tuple:
    """A scan whose carry starts in parametrization ``start`` and whose body returns the next
    parametrization of the same family (the Kalman filter below also runs under jit)."""
    spec = FAMILIES[family]
    produce = _next_parametrization(family, start)
    init = spec["build"][start](dist, *spec["init"])

    def body(d: Any, t: jax.Array) -> tuple:
        a, s = _move(*spec["read"](d))
        return spec["build"][produce](dist, a, s), d.log_prob(spec["point"]) * t

    final, trace = lax.scan(body, init, jnp.arange(4.0))
    return final, (_readout(family, final), trace, _readout(family, init))


@pytest.mark.parametrize(("family", "start"), PARAMETRIZATIONS, ids=PARAM_IDS)
def test_scan_carry_changes_parametrization(family: str, start: str) -> None:
    (expected_d, expected), (actual_d, actual) = both(scan_parametrization_workload, family, start)
    assert_same_layout(expected_d, actual_d)
    assert_bitwise(expected, actual)


def while_parametrization_workload(dist: ModuleType, family: str, start: str) -> tuple:
    """A while_loop whose state holds a distribution: starts in ``start``, each iteration
    rebuilds the next parametrization."""
    spec = FAMILIES[family]
    produce = _next_parametrization(family, start)

    def body(state: tuple) -> tuple:
        i, d = state
        return i + 1, spec["build"][produce](dist, *_move(*spec["read"](d)))

    _, final = lax.while_loop(lambda s: s[0] < 3, body,
                              (0, spec["build"][start](dist, *spec["init"])))
    return final, _readout(family, final)


@pytest.mark.parametrize(("family", "start"), PARAMETRIZATIONS, ids=PARAM_IDS)
def test_while_loop_state_changes_parametrization(family: str, start: str) -> None:
    (expected_d, expected), (actual_d, actual) = both(while_parametrization_workload, family, start)
    assert_same_layout(expected_d, actual_d)
    assert_bitwise(expected, actual)


def cond_parametrization_workload(dist: ModuleType, family: str, first: str) -> tuple:
    """lax.cond whose branches build different parametrizations (on traced parameters, and
    returning the distribution), under jit, for both outcomes of the predicate."""
    spec = FAMILIES[family]
    second = _next_parametrization(family, first)

    @jax.jit
    def choose(pred: jax.Array, a: jax.Array, s: jax.Array) -> Any:
        return lax.cond(pred, lambda a, s: spec["build"][first](dist, a, s),
                        lambda a, s: spec["build"][second](dist, *_move(a, s)), a, s)

    results = [choose(jnp.array(p), *spec["init"]) for p in (True, False)]
    return results, [_readout(family, d) for d in results]


@pytest.mark.parametrize(("family", "first"), PARAMETRIZATIONS, ids=PARAM_IDS)
def test_cond_branches_build_different_parametrizations(family: str, first: str) -> None:
    (expected_ds, expected), (actual_ds, actual) = both(cond_parametrization_workload, family,
                                                        first)
    for e, a in zip(expected_ds, actual_ds):
        assert_same_layout(e, a)
    assert_bitwise(expected, actual)


# A Kalman filter over a 2-d constant-velocity model, with 1-d observations.
KF_A = jnp.array([[1.0, 1.0], [0.0, 1.0]])
KF_Q = jnp.array([[0.05, 0.0], [0.0, 0.02]])
KF_H = jnp.array([[1.0, 0.0]])
KF_R = jnp.array([[0.3]])
KF_P0 = jnp.array([[1.0, 0.2], [0.2, 0.5]])
KF_YS = jnp.array([[0.1], [0.9], [2.2], [2.8], [4.1], [5.2]])


def kalman_workload(dist: ModuleType, init_parametrization: str) -> tuple:
    """The carry starts as ``MVN(covariance_matrix=P0)`` (or another parametrization) and the
    body returns ``MVN(scale_tril=...)``: numpyro's pytree has one layout for both."""
    init = FAMILIES["MultivariateNormal"]["build"][init_parametrization](
        dist, jnp.zeros(2), KF_P0)

    def step(belief: Any, y: jax.Array) -> tuple:
        m, p = KF_A @ belief.loc, KF_A @ belief.covariance_matrix @ KF_A.T + KF_Q
        predicted = dist.MultivariateNormal(KF_H @ m, covariance_matrix=KF_H @ p @ KF_H.T + KF_R)
        gain = p @ KF_H.T @ jnp.linalg.inv(predicted.covariance_matrix)
        m = m + gain @ (y - predicted.loc)
        p = (jnp.eye(2) - gain @ KF_H) @ p
        p = (p + p.T) / 2
        return dist.MultivariateNormal(m, scale_tril=jnp.linalg.cholesky(p)), predicted.log_prob(y)

    final, log_liks = lax.scan(step, init, KF_YS)
    jitted_final, jitted_liks = jax.jit(lambda d: lax.scan(step, d, KF_YS))(init)
    total = jax.grad(lambda d: lax.scan(step, d, KF_YS)[1].sum())(init)  # d/d(loc, scale_tril)
    return final, (final.loc, final.covariance_matrix, log_liks, jitted_final.covariance_matrix,
                   jitted_liks, total, init.covariance_matrix)


@pytest.mark.parametrize("init_parametrization",
                         ["covariance_matrix", "precision_matrix", "scale_tril"])
def test_kalman_filter_scan(init_parametrization: str) -> None:
    (expected_d, expected), (actual_d, actual) = both(kalman_workload, init_parametrization)
    assert_same_layout(expected_d, actual_d)
    assert_bitwise(expected, actual)
    if init_parametrization == "covariance_matrix":  # the constructor's own value, exactly
        np.testing.assert_array_equal(actual[-1], KF_P0)


def stack_parametrizations_workload(dist: ModuleType) -> tuple:
    """``tree_map(jnp.stack)`` over MVNs built from each parametrization: one structure."""
    build = FAMILIES["MultivariateNormal"]["build"]
    ds = [build[p](dist, jnp.array([0.1 * i, -0.1 * i]), _spd(2, 1.0 + i))
          for i, p in enumerate(build)]
    stacked = jax.tree_util.tree_map(lambda *xs: jnp.stack(xs), *ds)
    return stacked, (stacked.covariance_matrix, stacked.precision_matrix,
                     stacked.log_prob(jnp.zeros(2)))


def test_tree_map_stack_parametrizations() -> None:
    (expected_d, expected), (actual_d, actual) = both(stack_parametrizations_workload)
    assert actual[0].shape == (3, 2, 2)
    assert_same_layout(expected_d, actual_d)
    assert_bitwise(expected, actual)


# --- optimizer steps over distributions ------------------------------------------------------

FIT_DATA = jnp.array([[0.5, 1.0], [1.5, 0.2], [-0.3, 0.8], [0.9, 1.9], [1.2, 0.4]])


def _fit_loss(d: Any) -> jax.Array:
    return -d.log_prob(FIT_DATA).sum()


def optimizer_workload(dist: ModuleType, optimizer: str) -> Any:
    """Fit an MVN, the distribution itself being the optimized pytree (optax Adam, or SGD by
    ``tree_map``), starting from ``covariance_matrix=``."""
    d = dist.MultivariateNormal(jnp.zeros(2), covariance_matrix=jnp.eye(2) * 2.0)
    if optimizer == "optax-adam":
        opt = optax.adam(0.05)
        state = opt.init(d)

        @jax.jit
        def step(d: Any, state: Any) -> tuple:
            updates, state = opt.update(jax.grad(_fit_loss)(d), state, d)
            return optax.apply_updates(d, updates), state

        for _ in range(15):
            d, state = step(d, state)
        return d

    @jax.jit
    def sgd(d: Any) -> Any:
        return jax.tree_util.tree_map(lambda p, g: p - 0.02 * g, d, jax.grad(_fit_loss)(d))

    for _ in range(15):
        d = sgd(d)
    return d


@pytest.mark.parametrize("optimizer", ["optax-adam", "tree-map-sgd"])
def test_optimizer_steps_over_distribution(optimizer: str) -> None:
    """After training, the covariance is recomputed from the trained ``scale_tril`` (as numpyro
    does): never the stale constructor value, never a separately "trained" leaf."""
    expected, actual = both(optimizer_workload, optimizer)
    assert_same_layout(expected, actual)
    for d in (expected, actual):
        tril = d.scale_tril
        np.testing.assert_array_equal(d.covariance_matrix,
                                      jnp.matmul(tril, jnp.swapaxes(tril, -1, -2)))
        assert not np.allclose(d.covariance_matrix, jnp.eye(2) * 2.0)  # it did train
    assert_bitwise((expected, expected.covariance_matrix, expected.precision_matrix),
                   (actual, actual.covariance_matrix, actual.precision_matrix))


# --- vmap_over -------------------------------------------------------------------------------

LOCS = jnp.array([[0.0, 1.0], [1.0, 0.0], [-1.0, 2.0]])
COVS = jnp.stack([_spd(2, s) for s in (0.5, 1.0, 2.0)])


def vmap_over_workload(dist: ModuleType) -> tuple:
    """numpyro's own idiom: ``vmap_over`` gives the axes of a batched distribution, for
    ``out_axes`` of a vmapped constructor and ``in_axes`` of a vmapped function."""
    template = dist.MultivariateNormal(LOCS[0], covariance_matrix=COVS[0])
    axes = vmap_over(template, loc=0, scale_tril=0)
    batched = jax.vmap(lambda loc, c: dist.MultivariateNormal(loc, covariance_matrix=c),
                       out_axes=axes)(LOCS, COVS)
    inner = jax.vmap(lambda d: d.covariance_matrix, in_axes=(axes,))(batched)
    log_probs = jax.vmap(lambda d, x: d.log_prob(x), in_axes=(axes, 0))(batched, LOCS[::-1])
    # only loc mapped: the covariance the constructor was given is not a leaf, and is
    # recomputed from the unmapped scale_tril
    loc_only = jax.vmap(lambda loc: dist.MultivariateNormal(loc, covariance_matrix=COVS[0]),
                        out_axes=vmap_over(template, loc=0))(LOCS)
    return batched, (batched.covariance_matrix, inner, log_probs, loc_only.loc,
                     loc_only.covariance_matrix)


def test_vmap_over_mvn_covariance() -> None:
    (expected_d, expected), (actual_d, actual) = both(vmap_over_workload)
    assert actual[0].shape == (3, 2, 2) and actual[1].shape == (3, 2, 2)
    assert actual[3].shape == (3, 2) and actual[4].shape == (2, 2)
    assert_same_layout(expected_d, actual_d)
    assert_bitwise(expected, actual)


# --- pickle / cloudpickle --------------------------------------------------------------------


def pickled_distributions(dist: ModuleType) -> dict[str, Any]:
    build = FAMILIES["MultivariateNormal"]["build"]
    ds = {f"mvn-{p}": build[p](dist, jnp.array([0.2, -0.1]), _spd(2, 1.0)) for p in build}
    ds["wishart-rate"] = dist.Wishart(5.0, rate_matrix=_spd(2, 0.5))
    ds["truncated"] = dist.TruncatedNormal(0.5, 1.0, low=-1.0, high=2.0)
    ds["low-rank"] = dist.LowRankMultivariateNormal(jnp.zeros(2), jnp.ones((2, 1)), jnp.ones(2))
    ds["circulant"] = dist.CirculantNormal(jnp.zeros(4), covariance_row=FAMILIES[
        "CirculantNormal"]["init"][1])
    return ds


READS = ("covariance_matrix", "precision_matrix", "scale_tril", "rate_matrix", "scale_matrix",
         "covariance_row", "covariance_rfft", "variance", "mean")


def _read(d: Any) -> dict[str, Any]:
    # numpyro 0.22's LowRankMultivariateNormal.precision_matrix fails for rank < dimension
    # (solve_triangular's arguments are swapped), so it is not read
    skip = ("precision_matrix",) if isinstance(d, nd.LowRankMultivariateNormal) else ()
    out = {name: getattr(d, name) for name in READS if hasattr(type(d), name) and name not in skip}
    point = d.sample(key(15))
    return {**out, "log_prob": d.log_prob(point), "point": point}


def pickle_workload(dist: ModuleType, module: str) -> tuple:
    """Round trips, before and after lazy values were read: every value reads back exactly."""
    dumps, loads = {"pickle": (pickle.dumps, pickle.loads),
                    "cloudpickle": (cloudpickle.dumps, cloudpickle.loads)}[module]
    fresh = pickled_distributions(dist)
    used = pickled_distributions(dist)
    before = {name: _read(d) for name, d in used.items()}
    out = {}
    for name in fresh:
        for state, d in (("fresh", fresh[name]), ("used", used[name])):
            back = loads(dumps(d))
            assert type(back) is type(d)
            out[f"{name}-{state}"] = (back, _read(back))
    return before, out


@pytest.mark.parametrize("module", ["pickle", "cloudpickle"])
def test_pickle_round_trips(module: str) -> None:
    (_, expected), (actual_before, actual) = both(pickle_workload, module)
    for name, (back, read) in actual.items():
        assert_same_layout(expected[name][0], back)
        assert_bitwise(actual_before[name.rsplit("-", 1)[0]], read)  # exactly what it was
    assert_bitwise(expected, actual)


def closure_workload(dist: ModuleType) -> dict:
    """cloudpickle a model closing over a global prior, and the guide's parameters; the
    unpickled model gives the same predictions."""
    prior = dist.MultivariateNormal(jnp.zeros(2), covariance_matrix=PRIOR_COV)

    def model(x: jax.Array, y: jax.Array | None = None) -> None:
        beta = numpyro.sample("beta", prior)
        with numpyro.plate("data", x.shape[0]):
            numpyro.sample("y", dist.Normal(x @ beta, 0.5), obs=y)

    back = cloudpickle.loads(cloudpickle.dumps(model))
    return {"original": Predictive(model, num_samples=3)(key(16), X),
            "unpickled": Predictive(back, num_samples=3)(key(16), X)}


def test_cloudpickle_model_closure() -> None:
    expected, actual = both(closure_workload)
    assert_bitwise(actual["original"], actual["unpickled"])
    assert_bitwise(expected, actual)


# --- kl_divergence ---------------------------------------------------------------------------


def kl_pairs(dist: ModuleType) -> Iterator[tuple[str, Any, Any]]:
    mvn = FAMILIES["MultivariateNormal"]["build"]
    loc = jnp.array([0.2, -0.1])
    yield "normal", dist.Normal(jnp.array([0.0, 1.0]), 2.0), dist.Normal(0.5, jnp.array([1., 3.]))
    yield "mvn-cov-prec", mvn["covariance_matrix"](dist, loc, _spd(2, 1.0)), mvn[
        "precision_matrix"](dist, -loc, _spd(2, 2.0))
    yield "mvn-tril-cov", mvn["scale_tril"](dist, loc, _spd(2, 0.5)), mvn[
        "covariance_matrix"](dist, loc, _spd(2, 1.5))
    yield "independent", dist.Normal(jnp.zeros(3), 1.0).to_event(1), dist.Normal(
        jnp.ones(3), 2.0).to_event(1)
    yield "beta", dist.Beta(2.0, 3.0), dist.Beta(1.5, 1.5)
    yield "dirichlet", dist.Dirichlet(jnp.array([1.0, 2.0, 3.0])), dist.Dirichlet(jnp.ones(3))
    yield "gamma", dist.Gamma(2.0, 1.5), dist.Gamma(3.0, 0.5)
    yield "weibull-gamma", dist.Weibull(1.5, 2.0), dist.Gamma(2.0, 1.0)
    yield "expanded", dist.Normal(0.0, 1.0).expand([3]), dist.Normal(1.0, 2.0).expand([3])
    yield "independent-circulant", dist.Normal(jnp.zeros(4), 1.5).to_event(1), dist.CirculantNormal(
        jnp.zeros(4), covariance_row=FAMILIES["CirculantNormal"]["init"][1])


def kl_workload(dist: ModuleType) -> dict:
    """Eager, jitted (distributions as arguments), closed over (global distributions read
    inside jit) and differentiated with respect to the distributions."""
    out = {}
    for name, p, q in kl_pairs(dist):
        out[name] = (dist.kl_divergence(p, q), jax.jit(lambda p, q: dist.kl_divergence(p, q))(p, q),
                     jax.grad(lambda p, q: dist.kl_divergence(p, q).sum())(p, q),
                     jax.jit(lambda p=p, q=q: dist.kl_divergence(p, q))())
    return out


def test_kl_divergence() -> None:
    """Same numbers eagerly, under jit and under grad (the gradient is a distribution with
    numpyro's layout)."""
    expected, actual = both(kl_workload)
    for name in expected:
        assert_same_layout(expected[name][2], actual[name][2])
    assert_bitwise(expected, actual)


# --- transformations of a function closing over global distributions ------------------------

TRANSFORMS: dict[str, tuple[Callable[[Callable[[jax.Array], jax.Array]], Callable], bool]] = {
    # name: (transformation, whether it stages the function: lazy values may be hoisted)
    "hessian": (jax.hessian, False),  # forward over reverse: a Laplace approximation's
    "linearize": (lambda f: lambda x: jax.linearize(f, x)[1](jnp.ones_like(x)), False),
    "vmap-jacrev": (lambda f: lambda x: jax.vmap(jax.jacrev(f))(jnp.stack([x, 0.5 * x])), False),
    "eval_shape": (lambda f: lambda x: jnp.zeros((*jax.eval_shape(f, x).shape, 1)), True),
    "checkpoint": (jax.checkpoint, True),
    "jit-grad-remat": (lambda f: jax.jit(jax.grad(jax.remat(f))), True),
    "jit-hessian": (lambda f: jax.jit(jax.hessian(f)), True),
    "jit-cond": (lambda f: jax.jit(lambda x: lax.cond(x[0] < 0, f, lambda y: 0.0 * y.sum(), x)),
                 True),
}


def transform_workload(dist: ModuleType, transform: str) -> tuple[Any, Any]:
    """A log density closing over GLOBAL distributions whose lazy values are first read under
    the transformation (an MVN's precision_matrix, TruncatedNormal's normalizers; compiled:
    also the von Mises series and Wishart's matrices, whose op-by-op evaluation under the
    eager transformations would only compile kernels), called twice: the second call reads
    the cache."""
    cov = jnp.array([[2.0, 0.3, 0.1], [0.3, 1.0, 0.2], [0.1, 0.2, 1.5]])
    mvn = dist.MultivariateNormal(jnp.zeros(3), covariance_matrix=cov)
    tn = dist.TruncatedNormal(jnp.zeros(3), jnp.ones(3), low=-1.0, high=2.0)
    angles = dist.SineBivariateVonMises(0.5, -1.0, 2.0, 3.0, correlation=0.8)
    wishart = dist.Wishart(6.0, scale_matrix=cov)
    transformation, staged = TRANSFORMS[transform]

    def log_density(x: jax.Array) -> jax.Array:
        out = mvn.log_prob(x) + tn.log_prob(x).sum() + x @ mvn.precision_matrix @ x
        if staged and transform != "checkpoint":
            out += angles.log_prob(x[:2]) + wishart.log_prob(wishart.mean + jnp.diag(x**2))
        return out

    fn = transformation(log_density)
    x = jnp.array([-0.5, 0.2, 0.7])
    with jax.checking_leaks():
        return fn(x), fn(x)


@pytest.mark.parametrize("transform", sorted(TRANSFORMS))
def test_transforms_of_a_function_closing_over_global_distributions(transform: str) -> None:
    """Second order, ``linearize``, ``vmap`` of ``jacrev``, ``eval_shape``,
    ``checkpoint``/``remat`` and ``cond``: no error, no leaked tracer, numpyro's numbers - bit
    for bit where nothing is staged (the lazy values are computed eagerly, op by op, as
    numpyro does), to rounding where a staged program may hoist them (computed once by a
    compiled program: the last bits may move)."""
    expected, actual = both(transform_workload, transform)
    if TRANSFORMS[transform][1]:
        for e, a in zip(jax.tree_util.tree_leaves(expected), jax.tree_util.tree_leaves(actual),
                        strict=True):
            np.testing.assert_allclose(np.asarray(a), np.asarray(e), rtol=1e-5, atol=1e-6)
    else:
        assert_bitwise(expected, actual)


def hoisted_under_pmap_workload(dist: ModuleType) -> tuple[jax.Array, jax.Array]:
    """A GLOBAL MVN's precision_matrix first read inside ``pmap`` (parallel chains), then
    outside it under ``vmap`` (``Predictive``)."""
    mvn = dist.MultivariateNormal(jnp.zeros(3), covariance_matrix=jnp.eye(3) + 0.3)
    draws = jax.pmap(lambda b: b * jnp.diag(mvn.precision_matrix))(jnp.ones((2, 3)))
    later = jax.vmap(lambda b: b @ mvn.precision_matrix @ b)(draws)
    return draws, later


def test_value_hoisted_under_pmap_is_usable_outside_it() -> None:
    """The value is computed once under ``pmap``'s manual mesh; cached, it must not carry that
    mesh into later programs ("Mesh for all inputs should be equal": ``Predictive`` after
    ``MCMC(..., chain_method="parallel")`` failed where numpyro works)."""
    expected, actual = both(hoisted_under_pmap_workload)
    for e, a in zip(expected, actual, strict=True):
        np.testing.assert_allclose(np.asarray(a), np.asarray(e), rtol=1e-6)
