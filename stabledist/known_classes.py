"""What stabledist knows about individual numpyro classes, each fact with its reason.

Everything else the fork does is derived from numpyro's own declarations (``arg_constraints``,
``pytree_data_fields``, ``pytree_aux_fields``, ``lazy_property``). The entries here are the
exceptions, keyed by numpyro class name, in one module a maintainer adding support for a new
numpyro release reads top to bottom:

1. what the fork needs (hybrid fields, extra fields, derived attributes);
2. what the property suite needs as plain data (classes without an example, catalog-only
   classes, keywords that are not parametrizations, property exclusions, upstream failures,
   values for ``log_prob`` where a sample cannot be used);
3. the catalog: one small, valid, deterministic example per public name, and variants for
   classes with several construction branches (served by `stabledist.testing.catalog`);
4. strategy hints: how to draw the arguments of the classes whose ``arg_constraints`` do not
   say enough (served by `stabledist.testing.specs`).

Plain data and small functions of numpy/JAX/numpyro only: importing this module imports
nothing from `stabledist.testing` and never hypothesis.
"""

from __future__ import annotations

import types
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

import jax
import jax.numpy as jnp
import numpy as np
from numpyro.distributions import Distribution, constraints
from numpyro.distributions import constraints as C  # noqa: N812 - constraint namespace

from stabledist.pytree import StaticTest, is_static_bool

if TYPE_CHECKING:  # the types hints draw through; never imported at run time
    from stabledist.testing._spec import DistSpec
    from stabledist.testing._strategies import DrawContext

__all__ = [
    "CATALOG_ONLY",
    "DERIVED_ATTRIBUTES",
    "EXAMPLES",
    "EXTRA_FIELDS",
    "HINTS",
    "HYBRID_FIELDS",
    "LOG_PROB_VALUES",
    "NOTES",
    "NOT_PARAMETRIZATIONS",
    "NO_EXAMPLE",
    "PROPERTY_EXCLUSIONS",
    "UPSTREAM_FAILURES",
    "VARIANTS",
    "Builder",
    "Hint",
]

# =============================================================================================
# 1. What the fork needs (stabledist.fork), each entry with its reason.
# =============================================================================================

HYBRID_FIELDS: dict[str, dict[str, StaticTest]] = {
    # numpyro writes a custom tree_flatten for each of these: the field is a leaf when it is an
    # array and static (aux data) otherwise. A numpyro class with a custom tree_flatten that is
    # not listed here makes the import fail, rather than flatten it wrongly.
    "MaskedDistribution": {"_mask": is_static_bool},  # mask=True/False is a Python bool
    # the sparse adjacency matrix (scipy) cannot be a leaf
    "CAR": {"adj_matrix": lambda d, _: bool(d.__dict__.get("is_sparse", False))},
}

EXTRA_FIELDS: dict[str, dict[str, tuple[str, ...]]] = {
    # Attributes numpyro constructors set but numpyro's pytrees drop (a round trip then loses
    # them). Found by tests/test_pytree.py (test_every_attribute_is_a_field).
    # a list of parameter names numpyro sets but does not declare: static, frozen to a tuple
    "Independent": {"aux": ("reparametrized_params",), "list_aux": ("reparametrized_params",)},
}



DERIVED_ATTRIBUTES: dict[str, dict[str, Callable[[Any], Any]]] = {
    # Attributes a constructor computes from the parameters and numpyro's pytree does not
    # declare as data. They become lazy values (the constructor's own value is seeded, so the
    # same instance reads it exactly); an instance rebuilt by tree_unflatten recomputes them
    # from its leaves, so they are never leaves and always agree with them after a tree_map.
    # numpyro drops Levy's support in a round trip (a jitted Levy has no support).
    "Levy": {"_support": lambda d: constraints.greater_than(d.loc)},
    # numpyro 0.21 declares these supports aux data: their bounds are arrays and constraints
    # compare by identity, so no two instances had equal treedefs (no jit cache hit, no scan
    # carry). numpyro 0.22 declares them data fields, which wins (they stay leaves there).
    "DoublyTruncatedPowerLaw": {"_support": lambda d: constraints.interval(d.low, d.high)},
    "LowerTruncatedPowerLaw": {"_support": lambda d: constraints.greater_than(d.low)},
}

# =============================================================================================
# 2. Testing facts (stabledist.testing), plain data, each entry with its reason.
# =============================================================================================

NO_EXAMPLE: dict[str, str] = {
    "Distribution": "abstract base class: no parameters to draw, no sample/log_prob; "
                    "every concrete subclass is tested",
}
"""Public names without a catalog example, hence excluded from every property (below)."""

CATALOG_ONLY: dict[str, str] = {
    "TransformedDistribution": "arguments are a base distribution and a list of transforms",
    "MixtureGeneral": "a list of component distributions whose shapes must agree",
    "SineSkewed": "base must be a circular distribution on a torus (SineBivariateVonMises)",
    "GaussianCopula": "a marginal distribution whose icdf works without optional deps",
    "EulerMaruyama": "an SDE function and an initial distribution of matching shape",
    "IntervalCensoredDistribution": "log_prob values are (lower, upper) pairs, not samples",
}
"""Classes the property suite draws from the catalog only (fixed structure, main example or a
variant), because their arguments cannot be drawn from ``arg_constraints``."""

NOT_PARAMETRIZATIONS: dict[str, dict[str, str]] = {
    "GaussianStateSpace": {
        "initial_value": "optional data (the state at time 0), not an alternative to the "
                         "covariance parametrizations",
    },
}
"""Optional (``None``-default) constrained constructor keywords that are NOT alternative
parametrizations. Every other such keyword is one (MultivariateNormal covariance_matrix /
precision_matrix / scale_tril, the Wisharts' scale_matrix / rate_matrix / scale_tril,
CirculantNormal covariance_row / covariance_rfft, GaussianCopula correlation_matrix /
correlation_cholesky). The factories (Categorical(probs= | logits=), ...) build different
classes per keyword, so they have no common tree structure to check."""

PROPERTY_EXCLUSIONS: dict[str, dict[str, str]] = {
    "*": NO_EXAMPLE,
}
"""(property or "*") -> class -> reason: pairs the property suite collects as skipped tests
carrying the reason (shown by -ra), never drops silently."""

UPSTREAM_FAILURES: dict[str, dict[str, dict[str, str]]] = {
    "shard_map": {
        "Gompertz": {
            "mean": "Gompertz.mean calls jax.scipy.special.expi, whose while_loop carry is "
                    "not varying-manual-axes aware: inside shard_map JAX raises 'while_loop "
                    "body function carry input and carry output must have equal types' for "
                    "numpyro's own Gompertz too (the same JAX bug class as jax-ml/jax#31080, "
                    "fixed there for random.gamma). The structure and every other read are "
                    "still checked; test_upstream_failures_still_fail drops the entry's "
                    "reason to exist when JAX fixes it",
        },
    },
}
"""(property) -> class -> method -> reason: reads that fail under the transformation for
numpyro's own class (a JAX or numpyro bug, not a stabledist one). Only that read is left out;
each entry is re-verified upstream by test_upstream_failures_still_fail
(tests/test_properties.py)."""

LOG_PROB_VALUES: dict[str, Callable[[], jax.Array]] = {
    # ``sample`` is not implemented; a point in the support is given instead.
    "ImproperUniform": lambda: _a([[0.5, 1.0, 2.0], [3.0, 0.1, 1.0]]),
    # ``sample`` needs tensorflow_probability (Beta icdf), an optional dependency.
    "GaussianCopulaBeta": lambda: _a([0.3, 0.6, 0.8]),
    # Values are (lower, upper) intervals, while ``sample`` returns plain points.
    "IntervalCensoredDistribution": lambda: _a([[0.2, 0.9], [0.0, 0.4], [1.0, jnp.inf]]),
}
"""name -> a valid value for ``log_prob`` where the example's own sample cannot be used."""


NOTES: dict[str, str] = {
    "ImproperUniform": "sample() raises NotImplementedError by design; use LOG_PROB_VALUES",
    "GaussianCopulaBeta": (
        "sample() raises ImportError unless tensorflow_probability is installed "
        "(betaincinv); log_prob works, see LOG_PROB_VALUES"
    ),
    "IntervalCensoredDistribution": (
        "sample() returns points of shape batch_shape although event_shape == (2,); "
        "log_prob expects (lower, upper) pairs, see LOG_PROB_VALUES"
    ),
}
"""name -> known numpyro behaviour a test should be aware of."""


# =============================================================================================
# 3. The catalog: small, valid, deterministic examples (fixed float32 parameters, event sizes
# 2-4, batch shapes (), (2,), (3,), validate_args=True wherever accepted). A builder takes the
# distributions module (numpyro.distributions or stabledist) and reaches every class, nested
# distribution, transform and constraint through it, so one builder gives a numpyro and a
# stabledist instance with identical parameters.
# =============================================================================================

Builder = Callable[[types.ModuleType], Distribution]
"""Builds one distribution instance using the given distributions module."""

V = True  # shorthand for ``validate_args=True`` in the builders below


# ---------------------------------------------------------------------------------------------
# Small helpers (plain arrays only; nothing here touches a distribution class).
# ---------------------------------------------------------------------------------------------


def _a(x) -> jax.Array:
    """float32 jnp array, so numpyro and stabledist see bit-identical parameters."""
    return jnp.asarray(x, dtype=jnp.float32)


def _i(x) -> jax.Array:
    """int32 jnp array for count parameters."""
    return jnp.asarray(x, dtype=jnp.int32)


def _cov3() -> jax.Array:
    """A fixed, well-conditioned 3x3 symmetric positive definite matrix."""
    return _a([[2.0, 0.5, 0.2], [0.5, 1.5, 0.3], [0.2, 0.3, 1.0]])


def _cov2() -> jax.Array:
    """A fixed 2x2 symmetric positive definite matrix."""
    return _a([[1.0, 0.3], [0.3, 0.5]])


def _corr3() -> jax.Array:
    """A fixed 3x3 correlation matrix (unit diagonal, positive definite)."""
    return _a([[1.0, 0.4, 0.1], [0.4, 1.0, -0.3], [0.1, -0.3, 1.0]])


def _ring_adjacency(n: int = 4) -> np.ndarray:
    """Dense symmetric adjacency matrix of an ``n``-cycle (every site has two neighbours)."""
    adj = np.zeros((n, n), dtype=np.float32)
    for k in range(n):
        adj[k, (k + 1) % n] = adj[(k + 1) % n, k] = 1.0
    return adj


def _ou_sde(y: jax.Array, t: jax.Array) -> tuple[jax.Array, jax.Array]:
    """Ornstein-Uhlenbeck drift/diffusion for EulerMaruyama.

    Module level (not a lambda) so that it is the *same* hashable object on every build:
    it is a pytree aux field, and aux fields must compare equal across instances.
    """
    return -0.5 * y, jnp.ones_like(y)



# ---------------------------------------------------------------------------------------------
# Examples: one builder per public name.
# ---------------------------------------------------------------------------------------------

EXAMPLES: dict[str, Builder] = {
    # --- continuous, univariate -----------------------------------------------------------
    "AsymmetricLaplace": lambda m: m.AsymmetricLaplace(
        _a([0.0, 1.0]), _a([1.0, 0.5]), _a([0.7, 1.5]), validate_args=V
    ),
    "AsymmetricLaplaceQuantile": lambda m: m.AsymmetricLaplaceQuantile(
        _a(0.5), _a(1.5), _a(0.3), validate_args=V
    ),
    "Beta": lambda m: m.Beta(_a([2.0, 0.8, 5.0]), _a([3.0, 1.5, 1.2]), validate_args=V),
    "BetaProportion": lambda m: m.BetaProportion(_a(0.3), _a(6.0), validate_args=V),
    "Cauchy": lambda m: m.Cauchy(_a(0.5), _a(2.0), validate_args=V),
    "Chi2": lambda m: m.Chi2(_a([3.0, 5.5]), validate_args=V),
    "Dagum": lambda m: m.Dagum(_a(2.0), _a(3.0), _a(1.5), validate_args=V),
    "Exponential": lambda m: m.Exponential(_a([1.0, 2.0, 0.5]), validate_args=V),
    "Gamma": lambda m: m.Gamma(_a(2.5), _a(1.5), validate_args=V),
    "Gompertz": lambda m: m.Gompertz(_a(1.5), _a(0.7), validate_args=V),
    "Gumbel": lambda m: m.Gumbel(_a([0.0, 2.0]), _a(1.5), validate_args=V),
    "HalfCauchy": lambda m: m.HalfCauchy(_a(1.5), validate_args=V),
    "HalfNormal": lambda m: m.HalfNormal(_a([1.0, 2.5]), validate_args=V),
    "InverseGamma": lambda m: m.InverseGamma(_a(3.0), _a(2.0), validate_args=V),
    "Kumaraswamy": lambda m: m.Kumaraswamy(_a(2.0), _a(3.0), validate_args=V),
    "Laplace": lambda m: m.Laplace(_a(0.5), _a(1.5), validate_args=V),
    "Levy": lambda m: m.Levy(_a(0.5), _a(1.5), validate_args=V),
    "Logistic": lambda m: m.Logistic(_a([0.0, -1.0, 2.0]), _a(0.8), validate_args=V),
    "LogNormal": lambda m: m.LogNormal(_a(0.3), _a(0.7), validate_args=V),
    "LogUniform": lambda m: m.LogUniform(_a(1.0), _a([10.0, 20.0]), validate_args=V),
    "Normal": lambda m: m.Normal(_a([0.0, 1.0, -2.0]), _a([1.0, 0.5, 2.0]), validate_args=V),
    "Pareto": lambda m: m.Pareto(_a(1.5), _a(3.0), validate_args=V),
    "RelaxedBernoulliLogits": lambda m: m.RelaxedBernoulliLogits(
        _a(0.5), _a([-1.0, 0.5]), validate_args=V
    ),
    "SoftLaplace": lambda m: m.SoftLaplace(_a(0.5), _a(1.5), validate_args=V),
    "StudentT": lambda m: m.StudentT(_a(4.0), _a(0.5), _a(1.5), validate_args=V),
    "Uniform": lambda m: m.Uniform(_a([0.0, -1.0]), _a([1.0, 3.0]), validate_args=V),
    "VonMises": lambda m: m.VonMises(_a([0.5, -2.0]), _a([2.0, 0.5]), validate_args=V),
    "Weibull": lambda m: m.Weibull(_a(1.5), _a(2.0), validate_args=V),
    # --- continuous, multivariate ---------------------------------------------------------
    "CAR": lambda m: m.CAR(
        _a([0.0, 1.0, -1.0, 0.5]), _a(0.7), _a(2.0), _ring_adjacency(4), validate_args=V
    ),
    "CirculantNormal": lambda m: m.CirculantNormal(
        _a([0.0, 1.0, 2.0, 3.0]), covariance_row=_a([2.0, 0.5, 0.1, 0.5]), validate_args=V
    ),
    "Dirichlet": lambda m: m.Dirichlet(_a([1.5, 2.0, 3.0]), validate_args=V),
    # Marginals need an icdf that works without tensorflow_probability (not Gamma/Beta/StudentT).
    "GaussianCopula": lambda m: m.GaussianCopula(
        m.LogNormal(_a([0.0, 0.5, 1.0]), _a(0.7), validate_args=V),
        correlation_matrix=_corr3(),
        validate_args=V,
    ),
    "GaussianCopulaBeta": lambda m: m.GaussianCopulaBeta(
        _a([2.0, 3.0, 4.0]), _a([3.0, 2.0, 2.0]), correlation_matrix=_corr3(), validate_args=V
    ),
    "GaussianRandomWalk": lambda m: m.GaussianRandomWalk(
        _a([1.5, 0.5]), num_steps=4, validate_args=V
    ),
    "GaussianStateSpace": lambda m: m.GaussianStateSpace(
        3,
        _a([[0.9, 0.1], [-0.2, 0.8]]),
        covariance_matrix=_cov2(),
        initial_value=_a([0.5, -0.5]),
        validate_args=V,
    ),
    "InverseWishart": lambda m: m.InverseWishart(_a(5.0), scale_matrix=_cov3(), validate_args=V),
    "InverseWishartCholesky": lambda m: m.InverseWishartCholesky(
        _a(5.0), scale_tril=jnp.linalg.cholesky(_cov3()), validate_args=V
    ),
    "LKJ": lambda m: m.LKJ(3, _a(1.5), validate_args=V),
    "LKJCholesky": lambda m: m.LKJCholesky(3, _a([0.5, 2.0]), validate_args=V),
    "LowRankMultivariateNormal": lambda m: m.LowRankMultivariateNormal(
        _a([0.0, 1.0, -1.0]),
        _a([[1.0, 0.0], [0.5, 1.0], [-0.3, 0.2]]),
        _a([0.5, 1.0, 1.5]),
        validate_args=V,
    ),
    "MatrixNormal": lambda m: m.MatrixNormal(
        _a([[0.0, 1.0, 2.0], [-1.0, 0.5, 0.0]]),
        jnp.linalg.cholesky(_cov2()),
        jnp.linalg.cholesky(_cov3()),
        validate_args=V,
    ),
    "MultivariateNormal": lambda m: m.MultivariateNormal(
        _a([0.0, 1.0, -1.0]), precision_matrix=_cov3(), validate_args=V
    ),
    "MultivariateStudentT": lambda m: m.MultivariateStudentT(
        _a(5.0),
        _a([[0.0, 1.0, -1.0], [1.0, 2.0, 0.0]]),
        jnp.linalg.cholesky(_cov3()),
        validate_args=V,
    ),
    "ProjectedNormal": lambda m: m.ProjectedNormal(_a([1.0, 0.5, -0.3]), validate_args=V),
    "SineBivariateVonMises": lambda m: m.SineBivariateVonMises(
        _a(0.5), _a(-1.0), _a(2.0), _a(3.0), correlation=_a(0.8), validate_args=V
    ),
    "Wishart": lambda m: m.Wishart(_a(5.0), scale_matrix=_cov3(), validate_args=V),
    "WishartCholesky": lambda m: m.WishartCholesky(
        _a([4.0, 6.0]), rate_matrix=_cov3(), validate_args=V
    ),
    "ZeroSumNormal": lambda m: m.ZeroSumNormal(_a(1.5), (4,), validate_args=V),
    "EulerMaruyama": lambda m: m.EulerMaruyama(
        _a([0.0, 0.1, 0.25, 0.4]),
        _ou_sde,
        m.Normal(_a([0.0, 1.0]), _a(1.0), validate_args=V),
        validate_args=V,
    ),
    # --- discrete --------------------------------------------------------------------------
    "BernoulliLogits": lambda m: m.BernoulliLogits(_a([-1.0, 0.5, 2.0]), validate_args=V),
    "BernoulliProbs": lambda m: m.BernoulliProbs(_a(0.3), validate_args=V),
    "BetaBinomial": lambda m: m.BetaBinomial(_a(2.0), _a(3.0), _i(10), validate_args=V),
    "BetaNegativeBinomial": lambda m: m.BetaNegativeBinomial(
        _a([2.0, 3.5]), _a(4.0), _a(3.0), validate_args=V
    ),
    "BinomialLogits": lambda m: m.BinomialLogits(_a([-0.5, 1.0]), _i(8), validate_args=V),
    "BinomialProbs": lambda m: m.BinomialProbs(_a(0.4), _i([5, 10, 3]), validate_args=V),
    "CategoricalLogits": lambda m: m.CategoricalLogits(
        _a([[0.0, 1.0, -1.0], [2.0, 0.5, 0.0]]), validate_args=V
    ),
    "CategoricalProbs": lambda m: m.CategoricalProbs(_a([0.2, 0.3, 0.5]), validate_args=V),
    "DirichletMultinomial": lambda m: m.DirichletMultinomial(
        _a([1.5, 2.0, 3.0]), _i(5), validate_args=V
    ),
    "DiscreteUniform": lambda m: m.DiscreteUniform(_i([0, 2]), _i([3, 5]), validate_args=V),
    "GammaPoisson": lambda m: m.GammaPoisson(_a(2.0), _a(0.5), validate_args=V),
    "GeometricLogits": lambda m: m.GeometricLogits(_a([-1.0, 0.5]), validate_args=V),
    "GeometricProbs": lambda m: m.GeometricProbs(_a(0.3), validate_args=V),
    "MultinomialLogits": lambda m: m.MultinomialLogits(
        _a([0.0, 1.0, -0.5, 0.3]), _i(6), validate_args=V
    ),
    "MultinomialProbs": lambda m: m.MultinomialProbs(
        _a([[0.2, 0.3, 0.5], [0.6, 0.3, 0.1]]), _i(4), validate_args=V
    ),
    "NegativeBinomial2": lambda m: m.NegativeBinomial2(_a(3.0), _a(2.0), validate_args=V),
    "NegativeBinomialLogits": lambda m: m.NegativeBinomialLogits(
        _a(4.0), _a([-0.5, 0.5]), validate_args=V
    ),
    "NegativeBinomialProbs": lambda m: m.NegativeBinomialProbs(_a(3.0), _a(0.4), validate_args=V),
    "OrderedLogistic": lambda m: m.OrderedLogistic(
        _a([-0.5, 1.0]), _a([-1.0, 0.0, 1.5]), validate_args=V
    ),
    "Poisson": lambda m: m.Poisson(_a([1.0, 3.5, 0.2]), validate_args=V),
    # --- zero inflated / hurdle --------------------------------------------------------------
    "ZeroInflatedLogits": lambda m: m.ZeroInflatedLogits(
        m.Poisson(_a([2.0, 4.0]), validate_args=V), _a(-0.5), validate_args=V
    ),
    "ZeroInflatedPoisson": lambda m: m.ZeroInflatedPoisson(_a(0.3), _a(2.5), validate_args=V),
    "ZeroInflatedProbs": lambda m: m.ZeroInflatedProbs(
        m.BinomialProbs(_a(0.4), _i(6), validate_args=V), _a([0.2, 0.5]), validate_args=V
    ),
    "HurdleGamma": lambda m: m.HurdleGamma(_a(0.3), _a(2.0), _a(1.5), validate_args=V),
    "HurdleLogits": lambda m: m.HurdleLogits(
        m.Poisson(_a(3.0), validate_args=V), _a([-0.5, 1.0]), validate_args=V
    ),
    "HurdleLogNormal": lambda m: m.HurdleLogNormal(_a(0.4), _a(0.5), _a(0.8), validate_args=V),
    "HurdlePoisson": lambda m: m.HurdlePoisson(_a([0.2, 0.6]), _a(2.5), validate_args=V),
    "HurdleProbs": lambda m: m.HurdleProbs(
        m.NegativeBinomial2(_a(3.0), _a(2.0), validate_args=V), _a(0.3), validate_args=V
    ),
    # --- truncated ----------------------------------------------------------------------------
    # Truncated StudentT bases are avoided: their sample() needs tensorflow_probability.
    "LeftTruncatedDistribution": lambda m: m.LeftTruncatedDistribution(
        m.SoftLaplace(_a(0.0), _a(1.0), validate_args=V), _a(-0.5), validate_args=V
    ),
    "RightTruncatedDistribution": lambda m: m.RightTruncatedDistribution(
        m.Laplace(_a([0.0, 1.0]), _a(1.0), validate_args=V), _a(0.7), validate_args=V
    ),
    "TwoSidedTruncatedDistribution": lambda m: m.TwoSidedTruncatedDistribution(
        m.Normal(_a(0.5), _a(1.0), validate_args=V), _a(-1.0), _a(2.0), validate_args=V
    ),
    "LeftTruncatedGamma": lambda m: m.LeftTruncatedGamma(
        m.Gamma(_a(2.0), _a(1.0), validate_args=V), _a(0.5), validate_args=V
    ),
    "RightTruncatedGamma": lambda m: m.RightTruncatedGamma(
        m.Gamma(_a([2.0, 0.7]), _a(1.0), validate_args=V), _a(3.0), validate_args=V
    ),
    "TwoSidedTruncatedGamma": lambda m: m.TwoSidedTruncatedGamma(
        m.Gamma(_a(2.0), _a(1.0), validate_args=V), _a(0.5), _a(4.0), validate_args=V
    ),
    "TruncatedPolyaGamma": lambda m: m.TruncatedPolyaGamma((2,), validate_args=V),
    "DoublyTruncatedPowerLaw": lambda m: m.DoublyTruncatedPowerLaw(
        _a(-1.5), _a(1.0), _a(5.0), validate_args=V
    ),
    "LowerTruncatedPowerLaw": lambda m: m.LowerTruncatedPowerLaw(
        _a([-2.5, -3.0]), _a(1.0), validate_args=V
    ),
    # --- censored --------------------------------------------------------------------------
    "LeftCensoredDistribution": lambda m: m.LeftCensoredDistribution(
        m.Normal(_a(0.5), _a(1.0), validate_args=V),
        jnp.array([True, False, True]),
        validate_args=V,
    ),
    "RightCensoredDistribution": lambda m: m.RightCensoredDistribution(
        m.Weibull(_a(1.5), _a(2.0), validate_args=V),
        jnp.array([False, True]),
        validate_args=V,
    ),
    "IntervalCensoredDistribution": lambda m: m.IntervalCensoredDistribution(
        m.Exponential(_a(1.5), validate_args=V),
        jnp.array([False, True, False]),
        jnp.array([False, False, True]),
        validate_args=V,
    ),
    # --- wrappers / meta ---------------------------------------------------------------------
    "Delta": lambda m: m.Delta(_a([1.0, 2.0, 3.0]), _a(0.5), event_dim=1, validate_args=V),
    "Unit": lambda m: m.Unit(_a([-0.5, 0.3]), validate_args=V),
    "ImproperUniform": lambda m: m.ImproperUniform(
        m.constraints.positive, (2,), (3,), validate_args=V
    ),
    "ExpandedDistribution": lambda m: m.ExpandedDistribution(
        m.Normal(_a([0.0, 1.0, 2.0]), _a(1.0), validate_args=V), (2, 3)
    ),
    "FoldedDistribution": lambda m: m.FoldedDistribution(
        m.Normal(_a(0.5), _a(1.0), validate_args=V), validate_args=V
    ),
    "Independent": lambda m: m.Independent(
        m.Normal(_a([[0.0, 1.0, 2.0], [-1.0, 0.0, 1.0]]), _a(1.0), validate_args=V),
        1,
        validate_args=V,
    ),
    "MaskedDistribution": lambda m: m.MaskedDistribution(
        m.Normal(_a([0.0, 1.0, 2.0]), _a(1.0), validate_args=V), jnp.array([True, False, True])
    ),
    "TransformedDistribution": lambda m: m.TransformedDistribution(
        m.Normal(_a(0.0), _a(1.0), validate_args=V),
        [m.transforms.AffineTransform(_a(1.0), _a(2.0)), m.transforms.ExpTransform()],
        validate_args=V,
    ),
    "MixtureGeneral": lambda m: m.MixtureGeneral(
        m.CategoricalProbs(_a([0.3, 0.5, 0.2]), validate_args=V),
        [
            m.Normal(_a(0.0), _a(1.0), validate_args=V),
            m.StudentT(_a(4.0), _a(-0.5), _a(0.3), validate_args=V),
            m.Laplace(_a(0.6), _a(1.2), validate_args=V),
        ],
        validate_args=V,
    ),
    "MixtureSameFamily": lambda m: m.MixtureSameFamily(
        m.CategoricalLogits(_a([0.0, 1.0, -0.5]), validate_args=V),
        m.MultivariateNormal(
            _a([[0.0, 0.0], [1.0, 2.0], [-1.0, 0.5]]),
            scale_tril=jnp.linalg.cholesky(_cov2()),
            validate_args=V,
        ),
        validate_args=V,
    ),
    "SineSkewed": lambda m: m.SineSkewed(
        m.SineBivariateVonMises(
            _a(0.5), _a(-1.0), _a(2.0), _a(3.0), correlation=_a(0.8), validate_args=V
        ),
        _a([0.3, -0.2]),
        validate_args=V,
    ),
    # --- factory functions --------------------------------------------------------------------
    "Bernoulli": lambda m: m.Bernoulli(probs=_a([0.2, 0.7]), validate_args=V),
    "Binomial": lambda m: m.Binomial(_i(5), logits=_a(0.3), validate_args=V),
    "Categorical": lambda m: m.Categorical(logits=_a([0.0, 1.0, -1.0, 0.5]), validate_args=V),
    "Geometric": lambda m: m.Geometric(probs=_a(0.4), validate_args=V),
    "HurdleDistribution": lambda m: m.HurdleDistribution(
        m.Poisson(_a(2.0), validate_args=V), gate=_a([0.3, 0.6]), validate_args=V
    ),
    "HurdleNegativeBinomial2": lambda m: m.HurdleNegativeBinomial2(
        _a(0.3), _a(3.0), _a(2.0), validate_args=V
    ),
    "Mixture": lambda m: m.Mixture(
        m.CategoricalProbs(_a([0.4, 0.6]), validate_args=V),
        [
            m.Gamma(_a(2.0), _a(1.0), validate_args=V),
            m.LogNormal(_a(0.0), _a(0.5), validate_args=V),
        ],
        validate_args=V,
    ),
    "Multinomial": lambda m: m.Multinomial(_i(4), probs=_a([0.2, 0.3, 0.5]), validate_args=V),
    "NegativeBinomial": lambda m: m.NegativeBinomial(_a(3.0), probs=_a(0.4), validate_args=V),
    "RelaxedBernoulli": lambda m: m.RelaxedBernoulli(_a(0.7), probs=_a(0.3), validate_args=V),
    "TruncatedCauchy": lambda m: m.TruncatedCauchy(
        _a(0.0), _a(1.0), low=_a(-1.0), high=_a(2.0), validate_args=V
    ),
    "TruncatedDistribution": lambda m: m.TruncatedDistribution(
        m.Logistic(_a(0.0), _a(1.0), validate_args=V), low=_a(-0.5), validate_args=V
    ),
    "TruncatedGamma": lambda m: m.TruncatedGamma(
        _a(2.0), _a(1.0), low=_a(0.5), high=_a(4.0), validate_args=V
    ),
    "TruncatedNormal": lambda m: m.TruncatedNormal(
        _a([0.0, 1.0]), _a(1.0), low=_a(-0.5), validate_args=V
    ),
    "ZeroInflatedDistribution": lambda m: m.ZeroInflatedDistribution(
        m.Poisson(_a(2.0), validate_args=V), gate=_a(0.3), validate_args=V
    ),
    "ZeroInflatedNegativeBinomial2": lambda m: m.ZeroInflatedNegativeBinomial2(
        _a(3.0), _a(2.0), gate=_a([0.2, 0.5]), validate_args=V
    ),
}
"""name -> builder.  Covers every public class and factory except those in ``NO_EXAMPLE``."""


# ---------------------------------------------------------------------------------------------
# Variants: second examples hitting meaningfully different construction branches.
# ---------------------------------------------------------------------------------------------

VARIANTS: dict[str, list[Builder]] = {
    "MultivariateNormal": [
        lambda m: m.MultivariateNormal(
            _a([0.0, 1.0, -1.0]), covariance_matrix=_cov3(), validate_args=V
        ),
        lambda m: m.MultivariateNormal(
            _a([[0.0, 1.0, -1.0], [2.0, 0.0, 0.0]]),
            scale_tril=jnp.linalg.cholesky(_cov3()),
            validate_args=V,
        ),
    ],
    "Wishart": [
        lambda m: m.Wishart(_a([4.0, 6.0]), rate_matrix=_cov3(), validate_args=V),
        lambda m: m.Wishart(_a(5.0), scale_tril=jnp.linalg.cholesky(_cov3()), validate_args=V),
    ],
    "InverseWishart": [
        lambda m: m.InverseWishart(
            _a(5.0), scale_tril=jnp.linalg.cholesky(_cov3()), validate_args=V
        ),
    ],
    "WishartCholesky": [
        lambda m: m.WishartCholesky(_a(5.0), scale_matrix=_cov3(), validate_args=V),
    ],
    "InverseWishartCholesky": [
        lambda m: m.InverseWishartCholesky(_a(5.0), rate_matrix=_cov3(), validate_args=V),
    ],
    "GaussianStateSpace": [
        lambda m: m.GaussianStateSpace(
            4, _a([[0.9, 0.1], [-0.2, 0.8]]), precision_matrix=_cov2(), validate_args=V
        ),
    ],
    "GaussianCopula": [
        lambda m: m.GaussianCopula(
            m.Logistic(_a([0.0, 1.0, -1.0]), _a(2.0), validate_args=V),
            correlation_cholesky=jnp.linalg.cholesky(_corr3()),
            validate_args=V,
        ),
    ],
    "CirculantNormal": [
        lambda m: m.CirculantNormal(
            _a([0.0, 1.0, 2.0, 3.0]), covariance_rfft=_a([3.1, 1.9, 1.1]), validate_args=V
        ),
    ],
    "CAR": [
        lambda m: m.CAR(
            _a([0.0, 1.0, -1.0, 0.5]),
            _a(0.7),
            _a(2.0),
            _ring_adjacency(4),
            is_sparse=True,
            validate_args=V,
        ),
    ],
    "SineBivariateVonMises": [
        lambda m: m.SineBivariateVonMises(
            _a([0.5, 1.0]),
            _a(-1.0),
            _a(2.0),
            _a(3.0),
            weighted_correlation=_a(0.5),
            validate_args=V,
        ),
    ],
    "LKJCholesky": [
        lambda m: m.LKJCholesky(4, _a(1.5), sample_method="cvine", validate_args=V),
    ],
    "MaskedDistribution": [
        lambda m: m.MaskedDistribution(m.Normal(_a([0.0, 1.0]), _a(1.0), validate_args=V), False),
    ],
    "Poisson": [
        lambda m: m.Poisson(_a([1.0, 3.5]), is_sparse=True, validate_args=V),
    ],
    "DoublyTruncatedPowerLaw": [
        # alpha == -1 takes the logarithmic-normaliser branch.
        lambda m: m.DoublyTruncatedPowerLaw(_a(-1.0), _a(1.0), _a([5.0, 8.0]), validate_args=V),
    ],
    "Categorical": [
        lambda m: m.Categorical(probs=_a([[0.2, 0.8], [0.5, 0.5]]), validate_args=V),
    ],
    "Bernoulli": [lambda m: m.Bernoulli(logits=_a(0.3), validate_args=V)],
    "Binomial": [lambda m: m.Binomial(_i([3, 6]), probs=_a(0.4), validate_args=V)],
    "Geometric": [lambda m: m.Geometric(logits=_a([-0.5, 0.5]), validate_args=V)],
    "Multinomial": [lambda m: m.Multinomial(_i(3), logits=_a([0.0, 1.0, 0.5]), validate_args=V)],
    "NegativeBinomial": [
        lambda m: m.NegativeBinomial(_a([2.0, 5.0]), logits=_a(0.3), validate_args=V),
    ],
    "RelaxedBernoulli": [lambda m: m.RelaxedBernoulli(_a(0.5), logits=_a(-0.4), validate_args=V)],
    "TruncatedNormal": [
        lambda m: m.TruncatedNormal(_a(0.0), _a(1.0), high=_a(0.5), validate_args=V),
        lambda m: m.TruncatedNormal(
            _a(0.0), _a([1.0, 2.0]), low=_a(-1.0), high=_a(1.5), validate_args=V
        ),
    ],
    "TruncatedGamma": [
        lambda m: m.TruncatedGamma(_a(2.0), _a(1.0), low=_a(0.5), validate_args=V),
        lambda m: m.TruncatedGamma(_a(2.0), _a(1.0), high=_a(3.0), validate_args=V),
    ],
    "TruncatedDistribution": [
        lambda m: m.TruncatedDistribution(
            m.Cauchy(_a(0.0), _a(1.0), validate_args=V), high=_a(1.0), validate_args=V
        ),
        lambda m: m.TruncatedDistribution(
            m.Laplace(_a(0.0), _a(1.0), validate_args=V),
            low=_a(-1.0),
            high=_a(2.0),
            validate_args=V,
        ),
    ],
    "Mixture": [
        # A single vectorised component distribution dispatches to MixtureSameFamily.
        lambda m: m.Mixture(
            m.CategoricalProbs(_a([0.4, 0.6]), validate_args=V),
            m.Normal(_a([-1.0, 1.0]), _a([0.5, 1.0]), validate_args=V),
            validate_args=V,
        ),
    ],
    "ZeroInflatedDistribution": [
        lambda m: m.ZeroInflatedDistribution(
            m.Poisson(_a([2.0, 4.0]), validate_args=V), gate_logits=_a(-0.5), validate_args=V
        ),
    ],
    "ZeroInflatedNegativeBinomial2": [
        lambda m: m.ZeroInflatedNegativeBinomial2(
            _a(3.0), _a(2.0), gate_logits=_a(-1.0), validate_args=V
        ),
    ],
    "HurdleDistribution": [
        lambda m: m.HurdleDistribution(
            m.Gamma(_a(2.0), _a(1.0), validate_args=V), gate_logits=_a(-0.5), validate_args=V
        ),
    ],
}
"""name -> extra builders for classes/factories with several construction branches."""


# =============================================================================================
# 4. Strategy hints: how to draw the arguments of the numpyro classes whose `arg_constraints`
# do not say enough: parameters that depend on each other (`Uniform`'s `high > low`,
# `Wishart`'s `concentration > dim - 1`), arguments without a constraint (`LKJ`'s `dimension`,
# `CAR`'s adjacency matrix) and nested base distributions (`Independent`, truncated and
# zero-inflated wrappers, mixtures). One entry per class in `HINTS`, each a function of a
# `DrawContext` (`stabledist.testing._strategies`); a hint draws only through its context
# (`value`, `floats`, `ints`, `integers`, `boolean`, `choice`, `sub`, `spec`, `raw`), so this
# module needs no hypothesis. The classes drawn from the catalog only are in `CATALOG_ONLY`.
# =============================================================================================

FLOAT_BOUND = 3.0
"""Real parameters are drawn from [-FLOAT_BOUND, FLOAT_BOUND]."""

Hint = Callable[["DrawContext"], dict[str, Any]]


def _one_of(ctx: DrawContext, options: Mapping[str, C.Constraint],
            batch: tuple[int, ...] | None = None) -> dict[str, Any]:
    key = ctx.choice(sorted(options))
    return {key: ctx.value(options[key], batch=batch)}


_PD_ALTERNATIVES = {
    "scale_matrix": C.positive_definite,
    "rate_matrix": C.positive_definite,
    "scale_tril": C.lower_cholesky,
}
_CORR_ALTERNATIVES = {"correlation_matrix": C.corr_matrix, "correlation_cholesky": C.corr_cholesky}


def _wishart(ctx: DrawContext) -> dict[str, Any]:
    return {"concentration": ctx.floats(0.5, 4.0) + (ctx.n - 1),
            **_one_of(ctx, _PD_ALTERNATIVES, batch=())}


def _uniform(ctx: DrawContext) -> dict[str, Any]:
    low = ctx.floats(-FLOAT_BOUND, FLOAT_BOUND)
    return {"low": low, "high": (low + ctx.floats(0.5, 4.0)).astype(ctx.dtype)}


def _truncated(
    base_names: Sequence[str], low: bool, high: bool, lo_range: tuple[float, float] = (-2.0, 0.5)
) -> Hint:
    """Truncation bounds inside the base's support: ``low`` from ``lo_range``, ``high`` above."""

    def hint(ctx: DrawContext) -> dict[str, Any]:
        out: dict[str, Any] = {"base_dist": ctx.sub(ctx.choice(base_names))}
        lo = ctx.floats(*lo_range)
        if low:
            out["low"] = lo
        if high:
            out["high"] = (lo + ctx.floats(0.5, 3.0)).astype(ctx.dtype)
        return out

    return hint


def _independent(ctx: DrawContext) -> dict[str, Any]:
    k = ctx.integers(0, len(ctx.batch))
    return {"base_dist": ctx.sub(ctx.choice(_SIMPLE_BASES)), "reinterpreted_batch_ndims": k}


def _expanded(ctx: DrawContext) -> dict[str, Any]:
    cut = ctx.integers(0, len(ctx.batch))
    base = ctx.sub(ctx.choice(_SIMPLE_BASES), batch=ctx.batch[cut:])
    return {"base_dist": base, "batch_shape": ctx.batch}


def _masked(ctx: DrawContext) -> dict[str, Any]:
    mask: Any = ctx.choice([True, False, "array"])
    if mask == "array":
        mask = ctx.value(C.boolean)
    return {"base_dist": ctx.sub(ctx.choice(_SIMPLE_BASES)), "mask": mask}


def _gated(bases: Sequence[str], gate: str) -> Hint:
    constraint = C.real if gate == "gate_logits" else C.unit_interval

    def hint(ctx: DrawContext) -> dict[str, Any]:
        return {"base_dist": ctx.sub(ctx.choice(bases)), gate: ctx.value(constraint)}

    return hint


def _censored(ctx: DrawContext) -> dict[str, Any]:
    return {"base_dist": ctx.sub(ctx.choice(("Normal", "Exponential", "Weibull", "Gumbel"))),
            "censored": ctx.value(C.boolean)}


def _mixture_same_family(ctx: DrawContext) -> dict[str, Any]:
    k = ctx.integers(2, 3)
    mixing = ctx.sub(ctx.choice(("CategoricalProbs", "CategoricalLogits")), batch=())
    mixing = _with_event(mixing, k, ctx)
    component = ctx.sub(ctx.choice(("Normal", "MultivariateNormal", "Laplace")), batch=(k,))
    return {"mixing_distribution": mixing, "component_distribution": component}


def _with_event(spec: DistSpec, n: int, ctx: DrawContext) -> DistSpec:
    """Redraw a categorical spec's parameter with event size ``n``."""
    name = spec.name
    param = "probs" if name.endswith("Probs") else "logits"
    constraint = C.simplex if param == "probs" else C.real_vector
    return ctx.spec(name, {param: ctx.value(constraint, batch=(), n=n), "validate_args": True})


_SIMPLE_BASES = ("Normal", "Gamma", "Poisson", "BernoulliProbs", "Dirichlet",
                 "MultivariateNormal", "Exponential", "Laplace")
_SYMMETRIC_BASES = ("Normal", "Laplace", "Logistic", "Cauchy", "SoftLaplace")
_DISCRETE_BASES = ("Poisson", "BinomialProbs", "NegativeBinomial2", "GeometricProbs")


def _sine_bivariate(ctx: DrawContext) -> dict[str, Any]:
    phi_c, psi_c = ctx.floats(0.5, 4.0), ctx.floats(0.5, 4.0)
    w = ctx.floats(-0.8, 0.8)
    return {"phi_loc": ctx.value(C.circular), "psi_loc": ctx.value(C.circular),
            "phi_concentration": phi_c, "psi_concentration": psi_c,
            "correlation": (w * np.sqrt(phi_c * psi_c)).astype(ctx.dtype)}


def _gaussian_state_space(ctx: DrawContext) -> dict[str, Any]:
    s = ctx.n
    out: dict[str, Any] = {
        "num_steps": ctx.integers(1, 3),
        "transition_matrix": ctx.floats(-0.5, 0.5, shape=(s, s)),
        **_one_of(ctx, {"covariance_matrix": C.positive_definite,
                        "precision_matrix": C.positive_definite,
                        "scale_tril": C.lower_cholesky}),
    }
    if ctx.boolean():  # its batch must cover the covariance's
        out["initial_value"] = ctx.value(C.real_vector)
    return out


def _circulant(ctx: DrawContext) -> dict[str, Any]:
    out: dict[str, Any] = {"loc": ctx.value(C.real_vector)}
    if ctx.boolean():
        out["covariance_row"] = ctx.value(C.positive_definite_circulant_vector, batch=())
    else:
        out["covariance_rfft"] = ctx.floats(0.5, 3.0, shape=(ctx.n // 2 + 1,))
    return out


def _car(ctx: DrawContext) -> dict[str, Any]:
    # is_sparse=True stores a scipy sparse matrix as static pytree data (upstream too), which
    # is unhashable, so such an instance cannot cross a jit boundary: dense only here.
    n = max(ctx.n, 3)
    return {"loc": ctx.value(C.real_vector, n=n), "correlation": ctx.floats(-0.9, 0.9),
            "conditional_precision": ctx.value(C.positive),
            "adj_matrix": ctx.raw(_ring_adjacency(n)),
            "is_sparse": False}


def _improper_uniform(ctx: DrawContext) -> dict[str, Any]:
    vector = ctx.boolean()
    if vector:
        support = ctx.choice((C.real_vector, C.simplex, C.ordered_vector))
        return {"support": support, "batch_shape": ctx.batch, "event_shape": (ctx.n,)}
    support = ctx.choice((C.real, C.positive, C.unit_interval))
    return {"support": support, "batch_shape": ctx.batch, "event_shape": ()}


def _delta(ctx: DrawContext) -> dict[str, Any]:
    event_dim = ctx.integers(0, 1)
    return {"v": ctx.floats(-FLOAT_BOUND, FLOAT_BOUND, shape=(*ctx.batch, *(ctx.n,) * event_dim)),
            "log_density": ctx.value(C.real), "event_dim": event_dim}


HINTS: dict[str, Hint] = {
    "Wishart": _wishart,
    "WishartCholesky": _wishart,
    "InverseWishart": _wishart,
    "InverseWishartCholesky": _wishart,
    "Uniform": _uniform,
    "LogUniform": lambda c: {"low": (lo := c.floats(0.25, 2.0)),
                             "high": (lo + c.floats(0.5, 4.0)).astype(c.dtype)},
    "DiscreteUniform": lambda c: {"low": (lo := c.ints(-3, 3)),
                                  "high": lo + c.ints(0, 4)},
    "DoublyTruncatedPowerLaw": lambda c: {
        "alpha": c.floats(-3.0, 2.0), "low": (lo := c.floats(0.5, 2.0)),
        "high": (lo + c.floats(0.5, 4.0)).astype(c.dtype)},
    "LKJ": lambda c: {"dimension": max(c.n, 2), "concentration": c.value(C.positive),
                      "sample_method": c.choice(("onion", "cvine"))},
    "LKJCholesky": lambda c: {"dimension": max(c.n, 2), "concentration": c.value(C.positive),
                              "sample_method": c.choice(("onion", "cvine"))},
    "GaussianRandomWalk": lambda c: {"scale": c.value(C.positive),
                                     "num_steps": c.integers(1, 4)},
    # scale must broadcast to the transformed event shape: batch is always ()
    "ZeroSumNormal": lambda c: {"scale": c.value(C.positive, batch=()),
                                "event_shape": (c.n,) * c.integers(1, 2)},
    # total_count is a static (aux) pytree field upstream: a Python int, part of the structure
    "MultinomialProbs": lambda c: {"probs": c.value(C.simplex),
                                   "total_count": c.integers(0, 8)},
    "MultinomialLogits": lambda c: {"logits": c.value(C.real_vector),
                                    "total_count": c.integers(0, 8)},
    "DirichletMultinomial": lambda c: {"concentration": c.value(C.independent(C.positive, 1)),
                                       "total_count": c.integers(0, 8)},
    "TruncatedPolyaGamma": lambda c: {"batch_shape": c.batch},
    "MatrixNormal": lambda c: {
        "loc": c.floats(-FLOAT_BOUND, FLOAT_BOUND, shape=(*c.batch, c.n, 2)),
        "scale_tril_row": c.value(C.lower_cholesky, batch=()),
        "scale_tril_column": c.value(C.lower_cholesky, batch=(), n=2)},
    "LowRankMultivariateNormal": lambda c: {
        "loc": c.value(C.real_vector),
        "cov_factor": c.floats(-1.0, 1.0, shape=(c.n, c.integers(1, 2))),
        "cov_diag": c.value(C.independent(C.positive, 1), batch=())},
    "GaussianCopulaBeta": lambda c: {
        "concentration1": c.floats(0.5, 4.0, shape=(*c.batch, c.n)),
        "concentration0": c.floats(0.5, 4.0, shape=(*c.batch, c.n)),
        **_one_of(c, _CORR_ALTERNATIVES, batch=())},
    "SineBivariateVonMises": _sine_bivariate,
    "GaussianStateSpace": _gaussian_state_space,
    "CirculantNormal": _circulant,
    "CAR": _car,
    "ImproperUniform": _improper_uniform,
    "Delta": _delta,
    "Independent": _independent,
    "ExpandedDistribution": _expanded,
    "MaskedDistribution": _masked,
    "FoldedDistribution": lambda c: {"base_dist": c.sub(c.choice(_SYMMETRIC_BASES))},
    "LeftTruncatedDistribution": _truncated(_SYMMETRIC_BASES, low=True, high=False),
    "RightTruncatedDistribution": _truncated(_SYMMETRIC_BASES, low=False, high=True),
    "TwoSidedTruncatedDistribution": _truncated(_SYMMETRIC_BASES, low=True, high=True),
    "LeftTruncatedGamma": _truncated(("Gamma",), low=True, high=False, lo_range=(0.1, 1.0)),
    "RightTruncatedGamma": _truncated(("Gamma",), low=False, high=True, lo_range=(0.1, 1.0)),
    "TwoSidedTruncatedGamma": _truncated(("Gamma",), low=True, high=True, lo_range=(0.1, 1.0)),
    "ZeroInflatedProbs": _gated(_DISCRETE_BASES, "gate"),
    "ZeroInflatedLogits": _gated(_DISCRETE_BASES, "gate_logits"),
    "HurdleProbs": _gated(_DISCRETE_BASES, "gate"),
    "HurdleLogits": _gated(_DISCRETE_BASES, "gate_logits"),
    "LeftCensoredDistribution": _censored,
    "RightCensoredDistribution": _censored,
    "MixtureSameFamily": _mixture_same_family,
}
"""Class name -> how to draw its constructor arguments when they depend on each other."""
