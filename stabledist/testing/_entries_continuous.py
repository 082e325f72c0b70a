"""The catalog's records of the continuous distributions, univariate then multivariate: one
`ClassEntry` per public name of ``numpyro.distributions``, merged into
`stabledist.testing._catalog_entries.CATALOG`.

Examples use fixed float32 parameters (event sizes 2-4, batch shapes (), (2,), (3,)) and
``validate_args=True`` wherever accepted; a builder reaches every class, nested distribution,
transform and constraint through its module argument, so one builder gives a numpyro and a
stabledist instance with identical parameters.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
from numpyro.distributions import constraints as C  # noqa: N812 - constraint namespace

from stabledist.testing._class_entry import (
    ClassEntry,
    NumpyroFailure,
    UpstreamFailure,
    _a,
    _corr3,
    _cov2,
    _cov3,
    _loc3,
    _ou_sde,
    _ring_adjacency,
    _row4,
    round_trip,
)
from stabledist.testing._hints import (
    CORR_ALTERNATIVES,
    FLOAT_BOUND,
    car,
    circulant,
    gaussian_state_space,
    one_of,
    sine_bivariate,
    uniform,
    wishart,
)

__all__ = ["CONTINUOUS"]

CONTINUOUS: dict[str, ClassEntry] = {
    # --- continuous, univariate --------------------------------------------------------------
    "AsymmetricLaplace": ClassEntry(
        lambda m: m.AsymmetricLaplace(
            _a([0.0, 1.0]), _a([1.0, 0.5]), _a([0.7, 1.5]), validate_args=True
        ),
    ),
    "AsymmetricLaplaceQuantile": ClassEntry(
        lambda m: m.AsymmetricLaplaceQuantile(_a(0.5), _a(1.5), _a(0.3), validate_args=True),
    ),
    "Beta": ClassEntry(
        lambda m: m.Beta(_a([2.0, 0.8, 5.0]), _a([3.0, 1.5, 1.2]), validate_args=True),
        float64=True,
    ),
    "BetaProportion": ClassEntry(lambda m: m.BetaProportion(_a(0.3), _a(6.0), validate_args=True)),
    "Cauchy": ClassEntry(lambda m: m.Cauchy(_a(0.5), _a(2.0), validate_args=True)),
    "Chi2": ClassEntry(lambda m: m.Chi2(_a([3.0, 5.5]), validate_args=True)),
    "Dagum": ClassEntry(lambda m: m.Dagum(_a(2.0), _a(3.0), _a(1.5), validate_args=True)),
    "Exponential": ClassEntry(lambda m: m.Exponential(_a([1.0, 2.0, 0.5]), validate_args=True)),
    "Gamma": ClassEntry(
        lambda m: m.Gamma(_a(2.5), _a(1.5), validate_args=True),
        float64=True,
    ),
    "Gompertz": ClassEntry(
        lambda m: m.Gompertz(_a(1.5), _a(0.7), validate_args=True),
        upstream_failures=(UpstreamFailure(
            "shard_map", "mean", match="carry input and carry output must have equal types",
            reason="Gompertz.mean calls jax.scipy.special.expi, whose while_loop carry is not "
                   "varying-manual-axes aware: inside shard_map JAX raises 'while_loop body "
                   "function carry input and carry output must have equal types' for numpyro's "
                   "own Gompertz too (the same JAX bug class as jax-ml/jax#31080, fixed there "
                   "for random.gamma). The structure and every other read are still checked",
        ),),
    ),
    "Gumbel": ClassEntry(lambda m: m.Gumbel(_a([0.0, 2.0]), _a(1.5), validate_args=True)),
    "HalfCauchy": ClassEntry(lambda m: m.HalfCauchy(_a(1.5), validate_args=True)),
    "HalfNormal": ClassEntry(lambda m: m.HalfNormal(_a([1.0, 2.5]), validate_args=True)),
    "InverseGamma": ClassEntry(lambda m: m.InverseGamma(_a(3.0), _a(2.0), validate_args=True)),
    "Kumaraswamy": ClassEntry(lambda m: m.Kumaraswamy(_a(2.0), _a(3.0), validate_args=True)),
    "Laplace": ClassEntry(lambda m: m.Laplace(_a(0.5), _a(1.5), validate_args=True)),
    "Levy": ClassEntry(
        lambda m: m.Levy(_a(0.5), _a(1.5), validate_args=True),
        numpyro_fails=NumpyroFailure(
            "numpyro's round trip drops Levy's support, so a validated log_prob raises there",
            lambda d: round_trip(d).log_prob(d.sample(jax.random.PRNGKey(0))), AssertionError,
        ),
        float64=True,
    ),
    "Logistic": ClassEntry(lambda m: m.Logistic(_a([0.0, -1.0, 2.0]), _a(0.8), validate_args=True)),
    "LogNormal": ClassEntry(lambda m: m.LogNormal(_a(0.3), _a(0.7), validate_args=True)),
    "LogUniform": ClassEntry(
        lambda m: m.LogUniform(_a(1.0), _a([10.0, 20.0]), validate_args=True),
        hint=lambda c: {"low": (lo := c.floats(0.25, 2.0)),
                        "high": (lo + c.floats(0.5, 4.0)).astype(c.dtype)},
    ),
    "Normal": ClassEntry(
        lambda m: m.Normal(_a([0.0, 1.0, -2.0]), _a([1.0, 0.5, 2.0]), validate_args=True),
        float64=True, x64_switch=True,
    ),
    "Pareto": ClassEntry(lambda m: m.Pareto(_a(1.5), _a(3.0), validate_args=True)),
    "RelaxedBernoulliLogits": ClassEntry(
        lambda m: m.RelaxedBernoulliLogits(_a(0.5), _a([-1.0, 0.5]), validate_args=True),
    ),
    "SoftLaplace": ClassEntry(lambda m: m.SoftLaplace(_a(0.5), _a(1.5), validate_args=True)),
    "StudentT": ClassEntry(lambda m: m.StudentT(_a(4.0), _a(0.5), _a(1.5), validate_args=True)),
    "Uniform": ClassEntry(
        lambda m: m.Uniform(_a([0.0, -1.0]), _a([1.0, 3.0]), validate_args=True),
        hint=uniform,
    ),
    "VonMises": ClassEntry(
        lambda m: m.VonMises(_a([0.5, -2.0]), _a([2.0, 0.5]), validate_args=True),
    ),
    "Weibull": ClassEntry(lambda m: m.Weibull(_a(1.5), _a(2.0), validate_args=True)),
    # --- continuous, multivariate ------------------------------------------------------------
    "CAR": ClassEntry(
        lambda m: m.CAR(
            _a([0.0, 1.0, -1.0, 0.5]), _a(0.7), _a(2.0), _ring_adjacency(4), validate_args=True
        ),
        variants=(
            lambda m: m.CAR(
                _a([0.0, 1.0, -1.0, 0.5]),
                _a(0.7),
                _a(2.0),
                _ring_adjacency(4),
                is_sparse=True,
                validate_args=True,
            ),
        ),
        hint=car,
        float64=True,
    ),
    "CirculantNormal": ClassEntry(
        lambda m: m.CirculantNormal(
            _a([0.0, 1.0, 2.0, 3.0]), covariance_row=_a([2.0, 0.5, 0.1, 0.5]), validate_args=True
        ),
        variants=(
            lambda m: m.CirculantNormal(
                _a([0.0, 1.0, 2.0, 3.0]), covariance_rfft=_a([3.1, 1.9, 1.1]), validate_args=True
            ),
        ),
        hint=circulant,
        alternatives={
            "covariance_row": lambda m: m.CirculantNormal(jnp.zeros(4), covariance_row=_row4()),
            "covariance_rfft": lambda m: m.CirculantNormal(
                jnp.zeros(4), covariance_rfft=jnp.fft.rfft(_row4()).real),
        },
        parametrizations=("covariance_row", "covariance_rfft"),
    ),
    "Dirichlet": ClassEntry(lambda m: m.Dirichlet(_a([1.5, 2.0, 3.0]), validate_args=True)),
    # Marginals need an icdf that works without tensorflow_probability (not Gamma/Beta/StudentT).
    "GaussianCopula": ClassEntry(
        lambda m: m.GaussianCopula(
            m.LogNormal(_a([0.0, 0.5, 1.0]), _a(0.7), validate_args=True),
            correlation_matrix=_corr3(),
            validate_args=True,
        ),
        variants=(
            lambda m: m.GaussianCopula(
                m.Logistic(_a([0.0, 1.0, -1.0]), _a(2.0), validate_args=True),
                correlation_cholesky=jnp.linalg.cholesky(_corr3()),
                validate_args=True,
            ),
        ),
        alternatives={
            "correlation_matrix": lambda m: m.GaussianCopula(
                m.Normal(jnp.zeros(3), 1.0), correlation_matrix=_corr3()),
            "correlation_cholesky": lambda m: m.GaussianCopula(
                m.Normal(jnp.zeros(3), 1.0), correlation_cholesky=jnp.linalg.cholesky(_corr3())),
        },
        parametrizations=("correlation_matrix", "correlation_cholesky"),
        catalog_only="a marginal distribution whose icdf works without optional deps",
    ),
    "GaussianCopulaBeta": ClassEntry(
        lambda m: m.GaussianCopulaBeta(
            _a([2.0, 3.0, 4.0]), _a([3.0, 2.0, 2.0]), correlation_matrix=_corr3(),
            validate_args=True,
        ),
        hint=lambda c: {
            "concentration1": c.floats(0.5, 4.0, shape=(*c.batch, c.n)),
            "concentration0": c.floats(0.5, 4.0, shape=(*c.batch, c.n)),
            **one_of(c, CORR_ALTERNATIVES, batch=())},
        parametrizations=("correlation_matrix", "correlation_cholesky"),
        log_prob_value=lambda: _a([0.3, 0.6, 0.8]),
        note=("sample() raises ImportError unless tensorflow_probability is installed "
              "(betaincinv); log_prob works, see LOG_PROB_VALUES"),
    ),
    "GaussianRandomWalk": ClassEntry(
        lambda m: m.GaussianRandomWalk(_a([1.5, 0.5]), num_steps=4, validate_args=True),
        hint=lambda c: {"scale": c.value(C.positive),
                        "num_steps": c.integers(1, 4)},
    ),
    "GaussianStateSpace": ClassEntry(
        lambda m: m.GaussianStateSpace(
            3,
            _a([[0.9, 0.1], [-0.2, 0.8]]),
            covariance_matrix=_cov2(),
            initial_value=_a([0.5, -0.5]),
            validate_args=True,
        ),
        variants=(
            lambda m: m.GaussianStateSpace(
                4, _a([[0.9, 0.1], [-0.2, 0.8]]), precision_matrix=_cov2(), validate_args=True
            ),
        ),
        hint=gaussian_state_space,
        parametrizations=("covariance_matrix", "precision_matrix", "scale_tril"),
        not_parametrizations={"initial_value": "optional data (the state at time 0), not an "
                                               "alternative to the covariance parametrizations"},
        float64=True,
    ),
    "InverseWishart": ClassEntry(
        lambda m: m.InverseWishart(_a(5.0), scale_matrix=_cov3(), validate_args=True),
        variants=(
            lambda m: m.InverseWishart(
                _a(5.0), scale_tril=jnp.linalg.cholesky(_cov3()), validate_args=True
            ),
        ),
        hint=wishart,
        alternatives={
            "scale_matrix": lambda m: m.InverseWishart(5.0, scale_matrix=_cov3()),
            "rate_matrix": lambda m: m.InverseWishart(5.0, rate_matrix=_cov3()),
            "scale_tril": lambda m: m.InverseWishart(
                5.0, scale_tril=jnp.linalg.cholesky(_cov3())),
        },
        parametrizations=("scale_matrix", "rate_matrix", "scale_tril"),
    ),
    "InverseWishartCholesky": ClassEntry(
        lambda m: m.InverseWishartCholesky(
            _a(5.0), scale_tril=jnp.linalg.cholesky(_cov3()), validate_args=True
        ),
        variants=(
            lambda m: m.InverseWishartCholesky(_a(5.0), rate_matrix=_cov3(), validate_args=True),
        ),
        hint=wishart,
        alternatives={
            "scale_matrix": lambda m: m.InverseWishartCholesky(5.0, scale_matrix=_cov3()),
            "rate_matrix": lambda m: m.InverseWishartCholesky(5.0, rate_matrix=_cov3()),
            "scale_tril": lambda m: m.InverseWishartCholesky(
                5.0, scale_tril=jnp.linalg.cholesky(_cov3())),
        },
        parametrizations=("scale_matrix", "rate_matrix", "scale_tril"),
    ),
    "LKJ": ClassEntry(
        lambda m: m.LKJ(3, _a(1.5), validate_args=True),
        hint=lambda c: {"dimension": max(c.n, 2), "concentration": c.value(C.positive),
                        "sample_method": c.choice(("onion", "cvine"))},
    ),
    "LKJCholesky": ClassEntry(
        lambda m: m.LKJCholesky(3, _a([0.5, 2.0]), validate_args=True),
        variants=(
            lambda m: m.LKJCholesky(4, _a(1.5), sample_method="cvine", validate_args=True),
        ),
        hint=lambda c: {"dimension": max(c.n, 2), "concentration": c.value(C.positive),
                        "sample_method": c.choice(("onion", "cvine"))},
        float64=True,
    ),
    "LowRankMultivariateNormal": ClassEntry(
        lambda m: m.LowRankMultivariateNormal(
            _a([0.0, 1.0, -1.0]),
            _a([[1.0, 0.0], [0.5, 1.0], [-0.3, 0.2]]),
            _a([0.5, 1.0, 1.5]),
            validate_args=True,
        ),
        hint=lambda c: {
            "loc": c.value(C.real_vector),
            "cov_factor": c.floats(-1.0, 1.0, shape=(c.n, c.integers(1, 2))),
            "cov_diag": c.value(C.independent(C.positive, 1), batch=())},
        float64=True,
    ),
    "MatrixNormal": ClassEntry(
        lambda m: m.MatrixNormal(
            _a([[0.0, 1.0, 2.0], [-1.0, 0.5, 0.0]]),
            jnp.linalg.cholesky(_cov2()),
            jnp.linalg.cholesky(_cov3()),
            validate_args=True,
        ),
        hint=lambda c: {
            "loc": c.floats(-FLOAT_BOUND, FLOAT_BOUND, shape=(*c.batch, c.n, 2)),
            "scale_tril_row": c.value(C.lower_cholesky, batch=()),
            "scale_tril_column": c.value(C.lower_cholesky, batch=(), n=2)},
        promote_wrong=(
            "numpyro's default rule reads the matrix-valued loc (a real_vector constraint) "
            "as a vector: one batch dimension too many"
        ),
    ),
    "MultivariateNormal": ClassEntry(
        lambda m: m.MultivariateNormal(
            _a([0.0, 1.0, -1.0]), precision_matrix=_cov3(), validate_args=True
        ),
        variants=(
            lambda m: m.MultivariateNormal(
                _a([0.0, 1.0, -1.0]), covariance_matrix=_cov3(), validate_args=True
            ),
            lambda m: m.MultivariateNormal(
                _a([[0.0, 1.0, -1.0], [2.0, 0.0, 0.0]]),
                scale_tril=jnp.linalg.cholesky(_cov3()),
                validate_args=True,
            ),
        ),
        alternatives={
            "covariance_matrix": lambda m: m.MultivariateNormal(
                _loc3(), covariance_matrix=_cov3()),
            "precision_matrix": lambda m: m.MultivariateNormal(
                _loc3(), precision_matrix=_cov3()),
            "scale_tril": lambda m: m.MultivariateNormal(
                _loc3(), scale_tril=jnp.linalg.cholesky(_cov3())),
        },
        parametrizations=("covariance_matrix", "precision_matrix", "scale_tril"),
        float64=True, x64_switch=True,
    ),
    "MultivariateStudentT": ClassEntry(
        lambda m: m.MultivariateStudentT(
            _a(5.0),
            _a([[0.0, 1.0, -1.0], [1.0, 2.0, 0.0]]),
            jnp.linalg.cholesky(_cov3()),
            validate_args=True,
        ),
    ),
    "ProjectedNormal": ClassEntry(
        lambda m: m.ProjectedNormal(_a([1.0, 0.5, -0.3]), validate_args=True),
    ),
    "SineBivariateVonMises": ClassEntry(
        lambda m: m.SineBivariateVonMises(
            _a(0.5), _a(-1.0), _a(2.0), _a(3.0), correlation=_a(0.8), validate_args=True
        ),
        variants=(
            lambda m: m.SineBivariateVonMises(
                _a([0.5, 1.0]),
                _a(-1.0),
                _a(2.0),
                _a(3.0),
                weighted_correlation=_a(0.5),
                validate_args=True,
            ),
        ),
        hint=sine_bivariate,
    ),
    "Wishart": ClassEntry(
        lambda m: m.Wishart(_a(5.0), scale_matrix=_cov3(), validate_args=True),
        variants=(
            lambda m: m.Wishart(_a([4.0, 6.0]), rate_matrix=_cov3(), validate_args=True),
            lambda m: m.Wishart(
                _a(5.0), scale_tril=jnp.linalg.cholesky(_cov3()), validate_args=True
            ),
        ),
        hint=wishart,
        alternatives={
            "scale_matrix": lambda m: m.Wishart(5.0, scale_matrix=_cov3()),
            "rate_matrix": lambda m: m.Wishart(5.0, rate_matrix=_cov3()),
            "scale_tril": lambda m: m.Wishart(5.0, scale_tril=jnp.linalg.cholesky(_cov3())),
        },
        parametrizations=("scale_matrix", "rate_matrix", "scale_tril"),
        float64=True,
    ),
    "WishartCholesky": ClassEntry(
        lambda m: m.WishartCholesky(_a([4.0, 6.0]), rate_matrix=_cov3(), validate_args=True),
        variants=(
            lambda m: m.WishartCholesky(_a(5.0), scale_matrix=_cov3(), validate_args=True),
        ),
        hint=wishart,
        alternatives={
            "scale_matrix": lambda m: m.WishartCholesky(5.0, scale_matrix=_cov3()),
            "rate_matrix": lambda m: m.WishartCholesky(5.0, rate_matrix=_cov3()),
            "scale_tril": lambda m: m.WishartCholesky(
                5.0, scale_tril=jnp.linalg.cholesky(_cov3())),
        },
        parametrizations=("scale_matrix", "rate_matrix", "scale_tril"),
    ),
    "ZeroSumNormal": ClassEntry(
        lambda m: m.ZeroSumNormal(_a(1.5), (4,), validate_args=True),
        # scale must broadcast to the transformed event shape: batch is always ()
        hint=lambda c: {"scale": c.value(C.positive, batch=()),
                        "event_shape": (c.n,) * c.integers(1, 2)},
    ),
    "EulerMaruyama": ClassEntry(
        lambda m: m.EulerMaruyama(
            _a([0.0, 0.1, 0.25, 0.4]),
            _ou_sde,
            m.Normal(_a([0.0, 1.0]), _a(1.0), validate_args=True),
            validate_args=True,
        ),
        catalog_only="an SDE function and an initial distribution of matching shape",
    ),
}
"""name -> record, in the catalog's order."""
