"""The catalog's data: one small, valid, deterministic example per public name of
``numpyro.distributions``, variants for classes with several construction branches, and the
facts a test of an example needs (served by `stabledist.testing.catalog`).

Examples use fixed float32 parameters (event sizes 2-4, batch shapes (), (2,), (3,)) and
``validate_args=True`` wherever accepted. A builder takes the distributions module
(``numpyro.distributions`` or ``stabledist``) and reaches every class, nested distribution,
transform and constraint through it, so one builder gives a numpyro and a stabledist instance
with identical parameters. Plain data and small functions of NumPy/JAX/numpyro only.
"""

from __future__ import annotations

import types
from collections.abc import Callable

import jax
import jax.numpy as jnp
import numpy as np
from numpyro.distributions import Distribution

__all__ = ["EXAMPLES", "LOG_PROB_VALUES", "NOTES", "NO_EXAMPLE", "VARIANTS", "Builder"]

Builder = Callable[[types.ModuleType], Distribution]
"""Builds one distribution instance using the given distributions module."""

NO_EXAMPLE: dict[str, str] = {
    "Distribution": "abstract base class: no parameters to draw, no sample/log_prob; "
                    "every concrete subclass is tested",
}
"""Public names without a catalog example: abstract, nothing to draw or compare (the property
suite leaves them out, and a test checks each is abstract)."""

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
        _a([0.0, 1.0]), _a([1.0, 0.5]), _a([0.7, 1.5]), validate_args=True
    ),
    "AsymmetricLaplaceQuantile": lambda m: m.AsymmetricLaplaceQuantile(
        _a(0.5), _a(1.5), _a(0.3), validate_args=True
    ),
    "Beta": lambda m: m.Beta(_a([2.0, 0.8, 5.0]), _a([3.0, 1.5, 1.2]), validate_args=True),
    "BetaProportion": lambda m: m.BetaProportion(_a(0.3), _a(6.0), validate_args=True),
    "Cauchy": lambda m: m.Cauchy(_a(0.5), _a(2.0), validate_args=True),
    "Chi2": lambda m: m.Chi2(_a([3.0, 5.5]), validate_args=True),
    "Dagum": lambda m: m.Dagum(_a(2.0), _a(3.0), _a(1.5), validate_args=True),
    "Exponential": lambda m: m.Exponential(_a([1.0, 2.0, 0.5]), validate_args=True),
    "Gamma": lambda m: m.Gamma(_a(2.5), _a(1.5), validate_args=True),
    "Gompertz": lambda m: m.Gompertz(_a(1.5), _a(0.7), validate_args=True),
    "Gumbel": lambda m: m.Gumbel(_a([0.0, 2.0]), _a(1.5), validate_args=True),
    "HalfCauchy": lambda m: m.HalfCauchy(_a(1.5), validate_args=True),
    "HalfNormal": lambda m: m.HalfNormal(_a([1.0, 2.5]), validate_args=True),
    "InverseGamma": lambda m: m.InverseGamma(_a(3.0), _a(2.0), validate_args=True),
    "Kumaraswamy": lambda m: m.Kumaraswamy(_a(2.0), _a(3.0), validate_args=True),
    "Laplace": lambda m: m.Laplace(_a(0.5), _a(1.5), validate_args=True),
    "Levy": lambda m: m.Levy(_a(0.5), _a(1.5), validate_args=True),
    "Logistic": lambda m: m.Logistic(_a([0.0, -1.0, 2.0]), _a(0.8), validate_args=True),
    "LogNormal": lambda m: m.LogNormal(_a(0.3), _a(0.7), validate_args=True),
    "LogUniform": lambda m: m.LogUniform(_a(1.0), _a([10.0, 20.0]), validate_args=True),
    "Normal": lambda m: m.Normal(_a([0.0, 1.0, -2.0]), _a([1.0, 0.5, 2.0]), validate_args=True),
    "Pareto": lambda m: m.Pareto(_a(1.5), _a(3.0), validate_args=True),
    "RelaxedBernoulliLogits": lambda m: m.RelaxedBernoulliLogits(
        _a(0.5), _a([-1.0, 0.5]), validate_args=True
    ),
    "SoftLaplace": lambda m: m.SoftLaplace(_a(0.5), _a(1.5), validate_args=True),
    "StudentT": lambda m: m.StudentT(_a(4.0), _a(0.5), _a(1.5), validate_args=True),
    "Uniform": lambda m: m.Uniform(_a([0.0, -1.0]), _a([1.0, 3.0]), validate_args=True),
    "VonMises": lambda m: m.VonMises(_a([0.5, -2.0]), _a([2.0, 0.5]), validate_args=True),
    "Weibull": lambda m: m.Weibull(_a(1.5), _a(2.0), validate_args=True),
    # --- continuous, multivariate ---------------------------------------------------------
    "CAR": lambda m: m.CAR(
        _a([0.0, 1.0, -1.0, 0.5]), _a(0.7), _a(2.0), _ring_adjacency(4), validate_args=True
    ),
    "CirculantNormal": lambda m: m.CirculantNormal(
        _a([0.0, 1.0, 2.0, 3.0]), covariance_row=_a([2.0, 0.5, 0.1, 0.5]), validate_args=True
    ),
    "Dirichlet": lambda m: m.Dirichlet(_a([1.5, 2.0, 3.0]), validate_args=True),
    # Marginals need an icdf that works without tensorflow_probability (not Gamma/Beta/StudentT).
    "GaussianCopula": lambda m: m.GaussianCopula(
        m.LogNormal(_a([0.0, 0.5, 1.0]), _a(0.7), validate_args=True),
        correlation_matrix=_corr3(),
        validate_args=True,
    ),
    "GaussianCopulaBeta": lambda m: m.GaussianCopulaBeta(
        _a([2.0, 3.0, 4.0]), _a([3.0, 2.0, 2.0]), correlation_matrix=_corr3(), validate_args=True
    ),
    "GaussianRandomWalk": lambda m: m.GaussianRandomWalk(
        _a([1.5, 0.5]), num_steps=4, validate_args=True
    ),
    "GaussianStateSpace": lambda m: m.GaussianStateSpace(
        3,
        _a([[0.9, 0.1], [-0.2, 0.8]]),
        covariance_matrix=_cov2(),
        initial_value=_a([0.5, -0.5]),
        validate_args=True,
    ),
    "InverseWishart": lambda m: m.InverseWishart(_a(5.0), scale_matrix=_cov3(), validate_args=True),
    "InverseWishartCholesky": lambda m: m.InverseWishartCholesky(
        _a(5.0), scale_tril=jnp.linalg.cholesky(_cov3()), validate_args=True
    ),
    "LKJ": lambda m: m.LKJ(3, _a(1.5), validate_args=True),
    "LKJCholesky": lambda m: m.LKJCholesky(3, _a([0.5, 2.0]), validate_args=True),
    "LowRankMultivariateNormal": lambda m: m.LowRankMultivariateNormal(
        _a([0.0, 1.0, -1.0]),
        _a([[1.0, 0.0], [0.5, 1.0], [-0.3, 0.2]]),
        _a([0.5, 1.0, 1.5]),
        validate_args=True,
    ),
    "MatrixNormal": lambda m: m.MatrixNormal(
        _a([[0.0, 1.0, 2.0], [-1.0, 0.5, 0.0]]),
        jnp.linalg.cholesky(_cov2()),
        jnp.linalg.cholesky(_cov3()),
        validate_args=True,
    ),
    "MultivariateNormal": lambda m: m.MultivariateNormal(
        _a([0.0, 1.0, -1.0]), precision_matrix=_cov3(), validate_args=True
    ),
    "MultivariateStudentT": lambda m: m.MultivariateStudentT(
        _a(5.0),
        _a([[0.0, 1.0, -1.0], [1.0, 2.0, 0.0]]),
        jnp.linalg.cholesky(_cov3()),
        validate_args=True,
    ),
    "ProjectedNormal": lambda m: m.ProjectedNormal(_a([1.0, 0.5, -0.3]), validate_args=True),
    "SineBivariateVonMises": lambda m: m.SineBivariateVonMises(
        _a(0.5), _a(-1.0), _a(2.0), _a(3.0), correlation=_a(0.8), validate_args=True
    ),
    "Wishart": lambda m: m.Wishart(_a(5.0), scale_matrix=_cov3(), validate_args=True),
    "WishartCholesky": lambda m: m.WishartCholesky(
        _a([4.0, 6.0]), rate_matrix=_cov3(), validate_args=True
    ),
    "ZeroSumNormal": lambda m: m.ZeroSumNormal(_a(1.5), (4,), validate_args=True),
    "EulerMaruyama": lambda m: m.EulerMaruyama(
        _a([0.0, 0.1, 0.25, 0.4]),
        _ou_sde,
        m.Normal(_a([0.0, 1.0]), _a(1.0), validate_args=True),
        validate_args=True,
    ),
    # --- discrete --------------------------------------------------------------------------
    "BernoulliLogits": lambda m: m.BernoulliLogits(_a([-1.0, 0.5, 2.0]), validate_args=True),
    "BernoulliProbs": lambda m: m.BernoulliProbs(_a(0.3), validate_args=True),
    "BetaBinomial": lambda m: m.BetaBinomial(_a(2.0), _a(3.0), _i(10), validate_args=True),
    "BetaNegativeBinomial": lambda m: m.BetaNegativeBinomial(
        _a([2.0, 3.5]), _a(4.0), _a(3.0), validate_args=True
    ),
    "BinomialLogits": lambda m: m.BinomialLogits(_a([-0.5, 1.0]), _i(8), validate_args=True),
    "BinomialProbs": lambda m: m.BinomialProbs(_a(0.4), _i([5, 10, 3]), validate_args=True),
    "CategoricalLogits": lambda m: m.CategoricalLogits(
        _a([[0.0, 1.0, -1.0], [2.0, 0.5, 0.0]]), validate_args=True
    ),
    "CategoricalProbs": lambda m: m.CategoricalProbs(_a([0.2, 0.3, 0.5]), validate_args=True),
    "DirichletMultinomial": lambda m: m.DirichletMultinomial(
        _a([1.5, 2.0, 3.0]), _i(5), validate_args=True
    ),
    "DiscreteUniform": lambda m: m.DiscreteUniform(_i([0, 2]), _i([3, 5]), validate_args=True),
    "GammaPoisson": lambda m: m.GammaPoisson(_a(2.0), _a(0.5), validate_args=True),
    "GeometricLogits": lambda m: m.GeometricLogits(_a([-1.0, 0.5]), validate_args=True),
    "GeometricProbs": lambda m: m.GeometricProbs(_a(0.3), validate_args=True),
    "MultinomialLogits": lambda m: m.MultinomialLogits(
        _a([0.0, 1.0, -0.5, 0.3]), _i(6), validate_args=True
    ),
    "MultinomialProbs": lambda m: m.MultinomialProbs(
        _a([[0.2, 0.3, 0.5], [0.6, 0.3, 0.1]]), _i(4), validate_args=True
    ),
    "NegativeBinomial2": lambda m: m.NegativeBinomial2(_a(3.0), _a(2.0), validate_args=True),
    "NegativeBinomialLogits": lambda m: m.NegativeBinomialLogits(
        _a(4.0), _a([-0.5, 0.5]), validate_args=True
    ),
    "NegativeBinomialProbs": lambda m: m.NegativeBinomialProbs(
        _a(3.0), _a(0.4), validate_args=True
    ),
    "OrderedLogistic": lambda m: m.OrderedLogistic(
        _a([-0.5, 1.0]), _a([-1.0, 0.0, 1.5]), validate_args=True
    ),
    "Poisson": lambda m: m.Poisson(_a([1.0, 3.5, 0.2]), validate_args=True),
    # --- zero inflated / hurdle --------------------------------------------------------------
    "ZeroInflatedLogits": lambda m: m.ZeroInflatedLogits(
        m.Poisson(_a([2.0, 4.0]), validate_args=True), _a(-0.5), validate_args=True
    ),
    "ZeroInflatedPoisson": lambda m: m.ZeroInflatedPoisson(_a(0.3), _a(2.5), validate_args=True),
    "ZeroInflatedProbs": lambda m: m.ZeroInflatedProbs(
        m.BinomialProbs(_a(0.4), _i(6), validate_args=True), _a([0.2, 0.5]), validate_args=True
    ),
    "HurdleGamma": lambda m: m.HurdleGamma(_a(0.3), _a(2.0), _a(1.5), validate_args=True),
    "HurdleLogits": lambda m: m.HurdleLogits(
        m.Poisson(_a(3.0), validate_args=True), _a([-0.5, 1.0]), validate_args=True
    ),
    "HurdleLogNormal": lambda m: m.HurdleLogNormal(_a(0.4), _a(0.5), _a(0.8), validate_args=True),
    "HurdlePoisson": lambda m: m.HurdlePoisson(_a([0.2, 0.6]), _a(2.5), validate_args=True),
    "HurdleProbs": lambda m: m.HurdleProbs(
        m.NegativeBinomial2(_a(3.0), _a(2.0), validate_args=True), _a(0.3), validate_args=True
    ),
    # --- truncated ----------------------------------------------------------------------------
    # Truncated StudentT bases are avoided: their sample() needs tensorflow_probability.
    "LeftTruncatedDistribution": lambda m: m.LeftTruncatedDistribution(
        m.SoftLaplace(_a(0.0), _a(1.0), validate_args=True), _a(-0.5), validate_args=True
    ),
    "RightTruncatedDistribution": lambda m: m.RightTruncatedDistribution(
        m.Laplace(_a([0.0, 1.0]), _a(1.0), validate_args=True), _a(0.7), validate_args=True
    ),
    "TwoSidedTruncatedDistribution": lambda m: m.TwoSidedTruncatedDistribution(
        m.Normal(_a(0.5), _a(1.0), validate_args=True), _a(-1.0), _a(2.0), validate_args=True
    ),
    "LeftTruncatedGamma": lambda m: m.LeftTruncatedGamma(
        m.Gamma(_a(2.0), _a(1.0), validate_args=True), _a(0.5), validate_args=True
    ),
    "RightTruncatedGamma": lambda m: m.RightTruncatedGamma(
        m.Gamma(_a([2.0, 0.7]), _a(1.0), validate_args=True), _a(3.0), validate_args=True
    ),
    "TwoSidedTruncatedGamma": lambda m: m.TwoSidedTruncatedGamma(
        m.Gamma(_a(2.0), _a(1.0), validate_args=True), _a(0.5), _a(4.0), validate_args=True
    ),
    "TruncatedPolyaGamma": lambda m: m.TruncatedPolyaGamma((2,), validate_args=True),
    "DoublyTruncatedPowerLaw": lambda m: m.DoublyTruncatedPowerLaw(
        _a(-1.5), _a(1.0), _a(5.0), validate_args=True
    ),
    "LowerTruncatedPowerLaw": lambda m: m.LowerTruncatedPowerLaw(
        _a([-2.5, -3.0]), _a(1.0), validate_args=True
    ),
    # --- censored --------------------------------------------------------------------------
    "LeftCensoredDistribution": lambda m: m.LeftCensoredDistribution(
        m.Normal(_a(0.5), _a(1.0), validate_args=True),
        jnp.array([True, False, True]),
        validate_args=True,
    ),
    "RightCensoredDistribution": lambda m: m.RightCensoredDistribution(
        m.Weibull(_a(1.5), _a(2.0), validate_args=True),
        jnp.array([False, True]),
        validate_args=True,
    ),
    "IntervalCensoredDistribution": lambda m: m.IntervalCensoredDistribution(
        m.Exponential(_a(1.5), validate_args=True),
        jnp.array([False, True, False]),
        jnp.array([False, False, True]),
        validate_args=True,
    ),
    # --- wrappers / meta ---------------------------------------------------------------------
    "Delta": lambda m: m.Delta(_a([1.0, 2.0, 3.0]), _a(0.5), event_dim=1, validate_args=True),
    "Unit": lambda m: m.Unit(_a([-0.5, 0.3]), validate_args=True),
    "ImproperUniform": lambda m: m.ImproperUniform(
        m.constraints.positive, (2,), (3,), validate_args=True
    ),
    "ExpandedDistribution": lambda m: m.ExpandedDistribution(
        m.Normal(_a([0.0, 1.0, 2.0]), _a(1.0), validate_args=True), (2, 3)
    ),
    "FoldedDistribution": lambda m: m.FoldedDistribution(
        m.Normal(_a(0.5), _a(1.0), validate_args=True), validate_args=True
    ),
    "Independent": lambda m: m.Independent(
        m.Normal(_a([[0.0, 1.0, 2.0], [-1.0, 0.0, 1.0]]), _a(1.0), validate_args=True),
        1,
        validate_args=True,
    ),
    "MaskedDistribution": lambda m: m.MaskedDistribution(
        m.Normal(_a([0.0, 1.0, 2.0]), _a(1.0), validate_args=True), jnp.array([True, False, True])
    ),
    "TransformedDistribution": lambda m: m.TransformedDistribution(
        m.Normal(_a(0.0), _a(1.0), validate_args=True),
        [m.transforms.AffineTransform(_a(1.0), _a(2.0)), m.transforms.ExpTransform()],
        validate_args=True,
    ),
    "MixtureGeneral": lambda m: m.MixtureGeneral(
        m.CategoricalProbs(_a([0.3, 0.5, 0.2]), validate_args=True),
        [
            m.Normal(_a(0.0), _a(1.0), validate_args=True),
            m.StudentT(_a(4.0), _a(-0.5), _a(0.3), validate_args=True),
            m.Laplace(_a(0.6), _a(1.2), validate_args=True),
        ],
        validate_args=True,
    ),
    "MixtureSameFamily": lambda m: m.MixtureSameFamily(
        m.CategoricalLogits(_a([0.0, 1.0, -0.5]), validate_args=True),
        m.MultivariateNormal(
            _a([[0.0, 0.0], [1.0, 2.0], [-1.0, 0.5]]),
            scale_tril=jnp.linalg.cholesky(_cov2()),
            validate_args=True,
        ),
        validate_args=True,
    ),
    "SineSkewed": lambda m: m.SineSkewed(
        m.SineBivariateVonMises(
            _a(0.5), _a(-1.0), _a(2.0), _a(3.0), correlation=_a(0.8), validate_args=True
        ),
        _a([0.3, -0.2]),
        validate_args=True,
    ),
    # --- factory functions --------------------------------------------------------------------
    "Bernoulli": lambda m: m.Bernoulli(probs=_a([0.2, 0.7]), validate_args=True),
    "Binomial": lambda m: m.Binomial(_i(5), logits=_a(0.3), validate_args=True),
    "Categorical": lambda m: m.Categorical(logits=_a([0.0, 1.0, -1.0, 0.5]), validate_args=True),
    "Geometric": lambda m: m.Geometric(probs=_a(0.4), validate_args=True),
    "HurdleDistribution": lambda m: m.HurdleDistribution(
        m.Poisson(_a(2.0), validate_args=True), gate=_a([0.3, 0.6]), validate_args=True
    ),
    "HurdleNegativeBinomial2": lambda m: m.HurdleNegativeBinomial2(
        _a(0.3), _a(3.0), _a(2.0), validate_args=True
    ),
    "Mixture": lambda m: m.Mixture(
        m.CategoricalProbs(_a([0.4, 0.6]), validate_args=True),
        [
            m.Gamma(_a(2.0), _a(1.0), validate_args=True),
            m.LogNormal(_a(0.0), _a(0.5), validate_args=True),
        ],
        validate_args=True,
    ),
    "Multinomial": lambda m: m.Multinomial(_i(4), probs=_a([0.2, 0.3, 0.5]), validate_args=True),
    "NegativeBinomial": lambda m: m.NegativeBinomial(_a(3.0), probs=_a(0.4), validate_args=True),
    "RelaxedBernoulli": lambda m: m.RelaxedBernoulli(_a(0.7), probs=_a(0.3), validate_args=True),
    "TruncatedCauchy": lambda m: m.TruncatedCauchy(
        _a(0.0), _a(1.0), low=_a(-1.0), high=_a(2.0), validate_args=True
    ),
    "TruncatedDistribution": lambda m: m.TruncatedDistribution(
        m.Logistic(_a(0.0), _a(1.0), validate_args=True), low=_a(-0.5), validate_args=True
    ),
    "TruncatedGamma": lambda m: m.TruncatedGamma(
        _a(2.0), _a(1.0), low=_a(0.5), high=_a(4.0), validate_args=True
    ),
    "TruncatedNormal": lambda m: m.TruncatedNormal(
        _a([0.0, 1.0]), _a(1.0), low=_a(-0.5), validate_args=True
    ),
    "ZeroInflatedDistribution": lambda m: m.ZeroInflatedDistribution(
        m.Poisson(_a(2.0), validate_args=True), gate=_a(0.3), validate_args=True
    ),
    "ZeroInflatedNegativeBinomial2": lambda m: m.ZeroInflatedNegativeBinomial2(
        _a(3.0), _a(2.0), gate=_a([0.2, 0.5]), validate_args=True
    ),
}
"""name -> builder.  Covers every public class and factory except those in ``NO_EXAMPLE``."""


# ---------------------------------------------------------------------------------------------
# Variants: second examples hitting meaningfully different construction branches.
# ---------------------------------------------------------------------------------------------

VARIANTS: dict[str, list[Builder]] = {
    "Delta": [  # batch dimensions in front of an event: the constructor's event_dim is not stored
        lambda m: m.Delta(
            _a([[1.0, 2.0], [3.0, 4.0], [5.0, 6.0]]), _a([0.5, -0.5, 1.0]), event_dim=1,
            validate_args=True,
        ),
    ],
    "MultivariateNormal": [
        lambda m: m.MultivariateNormal(
            _a([0.0, 1.0, -1.0]), covariance_matrix=_cov3(), validate_args=True
        ),
        lambda m: m.MultivariateNormal(
            _a([[0.0, 1.0, -1.0], [2.0, 0.0, 0.0]]),
            scale_tril=jnp.linalg.cholesky(_cov3()),
            validate_args=True,
        ),
    ],
    "Wishart": [
        lambda m: m.Wishart(_a([4.0, 6.0]), rate_matrix=_cov3(), validate_args=True),
        lambda m: m.Wishart(_a(5.0), scale_tril=jnp.linalg.cholesky(_cov3()), validate_args=True),
    ],
    "InverseWishart": [
        lambda m: m.InverseWishart(
            _a(5.0), scale_tril=jnp.linalg.cholesky(_cov3()), validate_args=True
        ),
    ],
    "WishartCholesky": [
        lambda m: m.WishartCholesky(_a(5.0), scale_matrix=_cov3(), validate_args=True),
    ],
    "InverseWishartCholesky": [
        lambda m: m.InverseWishartCholesky(_a(5.0), rate_matrix=_cov3(), validate_args=True),
    ],
    "GaussianStateSpace": [
        lambda m: m.GaussianStateSpace(
            4, _a([[0.9, 0.1], [-0.2, 0.8]]), precision_matrix=_cov2(), validate_args=True
        ),
    ],
    "GaussianCopula": [
        lambda m: m.GaussianCopula(
            m.Logistic(_a([0.0, 1.0, -1.0]), _a(2.0), validate_args=True),
            correlation_cholesky=jnp.linalg.cholesky(_corr3()),
            validate_args=True,
        ),
    ],
    "CirculantNormal": [
        lambda m: m.CirculantNormal(
            _a([0.0, 1.0, 2.0, 3.0]), covariance_rfft=_a([3.1, 1.9, 1.1]), validate_args=True
        ),
    ],
    "CAR": [
        lambda m: m.CAR(
            _a([0.0, 1.0, -1.0, 0.5]),
            _a(0.7),
            _a(2.0),
            _ring_adjacency(4),
            is_sparse=True,
            validate_args=True,
        ),
    ],
    "SineBivariateVonMises": [
        lambda m: m.SineBivariateVonMises(
            _a([0.5, 1.0]),
            _a(-1.0),
            _a(2.0),
            _a(3.0),
            weighted_correlation=_a(0.5),
            validate_args=True,
        ),
    ],
    "LKJCholesky": [
        lambda m: m.LKJCholesky(4, _a(1.5), sample_method="cvine", validate_args=True),
    ],
    "MaskedDistribution": [
        lambda m: m.MaskedDistribution(
            m.Normal(_a([0.0, 1.0]), _a(1.0), validate_args=True), False
        ),
    ],
    "Poisson": [
        lambda m: m.Poisson(_a([1.0, 3.5]), is_sparse=True, validate_args=True),
    ],
    "DoublyTruncatedPowerLaw": [
        # alpha == -1 takes the logarithmic-normaliser branch.
        lambda m: m.DoublyTruncatedPowerLaw(_a(-1.0), _a(1.0), _a([5.0, 8.0]), validate_args=True),
    ],
    "Categorical": [
        lambda m: m.Categorical(probs=_a([[0.2, 0.8], [0.5, 0.5]]), validate_args=True),
    ],
    "Bernoulli": [lambda m: m.Bernoulli(logits=_a(0.3), validate_args=True)],
    "Binomial": [lambda m: m.Binomial(_i([3, 6]), probs=_a(0.4), validate_args=True)],
    "Geometric": [lambda m: m.Geometric(logits=_a([-0.5, 0.5]), validate_args=True)],
    "Multinomial": [lambda m: m.Multinomial(_i(3), logits=_a([0.0, 1.0, 0.5]), validate_args=True)],
    "NegativeBinomial": [
        lambda m: m.NegativeBinomial(_a([2.0, 5.0]), logits=_a(0.3), validate_args=True),
    ],
    "RelaxedBernoulli": [
        lambda m: m.RelaxedBernoulli(_a(0.5), logits=_a(-0.4), validate_args=True),
    ],
    "TruncatedNormal": [
        lambda m: m.TruncatedNormal(_a(0.0), _a(1.0), high=_a(0.5), validate_args=True),
        lambda m: m.TruncatedNormal(
            _a(0.0), _a([1.0, 2.0]), low=_a(-1.0), high=_a(1.5), validate_args=True
        ),
    ],
    "TruncatedGamma": [
        lambda m: m.TruncatedGamma(_a(2.0), _a(1.0), low=_a(0.5), validate_args=True),
        lambda m: m.TruncatedGamma(_a(2.0), _a(1.0), high=_a(3.0), validate_args=True),
    ],
    "TruncatedDistribution": [
        lambda m: m.TruncatedDistribution(
            m.Cauchy(_a(0.0), _a(1.0), validate_args=True), high=_a(1.0), validate_args=True
        ),
        lambda m: m.TruncatedDistribution(
            m.Laplace(_a(0.0), _a(1.0), validate_args=True),
            low=_a(-1.0),
            high=_a(2.0),
            validate_args=True,
        ),
    ],
    "Mixture": [
        # A single vectorised component distribution dispatches to MixtureSameFamily.
        lambda m: m.Mixture(
            m.CategoricalProbs(_a([0.4, 0.6]), validate_args=True),
            m.Normal(_a([-1.0, 1.0]), _a([0.5, 1.0]), validate_args=True),
            validate_args=True,
        ),
    ],
    "ZeroInflatedDistribution": [
        lambda m: m.ZeroInflatedDistribution(
            m.Poisson(_a([2.0, 4.0]), validate_args=True), gate_logits=_a(-0.5), validate_args=True
        ),
    ],
    "ZeroInflatedNegativeBinomial2": [
        lambda m: m.ZeroInflatedNegativeBinomial2(
            _a(3.0), _a(2.0), gate_logits=_a(-1.0), validate_args=True
        ),
    ],
    "HurdleDistribution": [
        lambda m: m.HurdleDistribution(
            m.Gamma(_a(2.0), _a(1.0), validate_args=True), gate_logits=_a(-0.5), validate_args=True
        ),
    ],
}
"""name -> extra builders for classes/factories with several construction branches."""
