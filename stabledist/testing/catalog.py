"""A catalog of small, valid, deterministic examples for every public distribution.

Every public name of the installed ``numpyro.distributions`` (each ``Distribution`` subclass
and each factory function listed in ``__all__``) gets a *builder*: a function taking the
distributions **module** to build with (``numpyro.distributions`` or ``stabledist``, which
exposes the same names) and returning an instance.  Builders reach every class, nested base
distribution, transform and constraint through that module argument, so one builder yields a
numpyro instance or a stabledist instance with identical parameters; tests can therefore
compare the two implementations example by example.

Examples use fixed float32 parameters (no randomness), small event sizes (2-4) and a mix of
batch shapes ``()``, ``(2,)`` and ``(3,)``.  Every class that accepts ``validate_args`` is
built with ``validate_args=True`` so the parameters are checked against ``arg_constraints``.

``tests/test_testing_api.py`` checks the catalog against the installed numpyro.
"""

from __future__ import annotations

import inspect
import types
from collections.abc import Callable
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
import numpyro.distributions
from numpyro.distributions import Distribution

__all__ = [
    "EXAMPLES",
    "EXCLUDED",
    "LOG_PROB_VALUES",
    "METHODS",
    "NOTES",
    "VARIANTS",
    "Builder",
    "all_builders",
    "example",
    "public_names",
    "supported_methods",
]

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
"""name -> builder.  Covers every public class and factory except those in ``EXCLUDED``."""


EXCLUDED: dict[str, str] = {
    "Distribution": "abstract base class: no sample/log_prob, nothing meaningful to construct",
}
"""name -> reason it has no example."""


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


# ---------------------------------------------------------------------------------------------
# Public functions.
# ---------------------------------------------------------------------------------------------


def public_names(
    module: types.ModuleType = numpyro.distributions,
) -> tuple[list[str], list[str]]:
    """Return ``(class names, factory names)`` derived from ``module.__all__``.

    Classes are the subclasses of ``module.Distribution``; factories are the plain functions
    with a capitalised name (numpyro's convention for functions returning a distribution,
    which separates them from helpers such as ``kl_divergence`` or ``biject_to``).  Deriving
    the list instead of hard-coding it makes a numpyro upgrade that adds a name fail loudly.
    """
    base = module.Distribution
    classes: list[str] = []
    factories: list[str] = []
    for name in getattr(module, "__all__", dir(module)):
        obj = getattr(module, name)
        if inspect.isclass(obj):
            if issubclass(obj, base):
                classes.append(name)
        elif inspect.isfunction(obj) and name[:1].isupper():
            factories.append(name)
    return classes, factories


def example(name: str, module: types.ModuleType) -> Distribution:
    """Build the catalog example ``name`` with ``module``.

    Raises ``KeyError`` (with the reason) for excluded or unknown names, so a test
    parametrised over names cannot silently skip one.
    """
    if name in EXCLUDED:
        raise KeyError(f"{name!r} is excluded from the catalog: {EXCLUDED[name]}")
    try:
        builder = EXAMPLES[name]
    except KeyError:
        raise KeyError(f"{name!r} is not a known distribution name in the catalog") from None
    return builder(module)


def all_builders() -> list[tuple[str, Builder]]:
    """Every ``(id, builder)`` pair: the main examples then the variants (``Name[k]``), for the
    names the installed numpyro has (the catalog also covers names added by later releases)."""
    have = set(numpyro.distributions.__all__)
    out: list[tuple[str, Builder]] = [(n, b) for n, b in EXAMPLES.items() if n in have]
    for name, builders in VARIANTS.items():
        if name in have:
            out.extend((f"{name}[{k}]", b) for k, b in enumerate(builders, start=1))
    return out


METHODS: tuple[str, ...] = (
    "sample",
    "log_prob",
    "mean",
    "variance",
    "cdf",
    "icdf",
    "entropy",
    "enumerate_support",
)
"""Methods probed by :func:`supported_methods`, in reporting order."""


_UNSUPPORTED = (NotImplementedError, ImportError)
"""Exceptions meaning "not available": not implemented, or needs an absent optional dependency
(numpyro's Beta/Gamma/StudentT ``icdf`` raise ImportError without tensorflow_probability)."""


def supported_methods(
    d: Distribution, key: jax.Array | None = None, value: jax.Array | None = None
) -> tuple[str, ...]:
    """Names from ``METHODS`` that work for ``d``, found by calling each once.

    ``NotImplementedError`` (and ``ImportError``, see ``_UNSUPPORTED``) means "unsupported";
    any other exception propagates, since it signals a broken example rather than a missing
    feature.  ``log_prob`` and ``cdf`` are evaluated at ``value`` (default: ``d.sample(key)``),
    ``icdf`` at 0.5 with ``d``'s batch shape, and ``enumerate_support`` is only tried when
    ``d.has_enumerate_support``.  Probing at call time (not import time) keeps the answer
    honest for whatever numpyro and optional dependencies are installed.
    """
    key = jax.random.PRNGKey(0) if key is None else key
    found: list[str] = []
    try:
        sample: Any = d.sample(key)
        found.append("sample")
    except _UNSUPPORTED:
        sample = None
    if value is None:
        value = sample
    probes: dict[str, Callable[[], object]] = {
        "mean": lambda: d.mean,
        "variance": lambda: d.variance,
        "icdf": lambda: d.icdf(jnp.full(d.batch_shape, 0.5, dtype=jnp.float32)),
        "entropy": d.entropy,
    }
    if value is not None:
        probes["log_prob"] = lambda: d.log_prob(value)
        probes["cdf"] = lambda: d.cdf(value)
    if d.has_enumerate_support:
        probes["enumerate_support"] = d.enumerate_support
    for method in METHODS[1:]:
        if method not in probes:
            continue
        try:
            probes[method]()
        except _UNSUPPORTED:
            continue
        found.append(method)
    return tuple(found)
