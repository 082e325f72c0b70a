"""The catalog's records of the truncated, censored, wrapper and meta distributions, the
factory functions and the abstract base: one `ClassEntry` per public name of
``numpyro.distributions``, merged into `stabledist.testing._catalog_entries.CATALOG`.

Examples use fixed float32 parameters (event sizes 2-4, batch shapes (), (2,), (3,)) and
``validate_args=True`` wherever accepted; a builder reaches every class, nested distribution,
transform and constraint through its module argument, so one builder gives a numpyro and a
stabledist instance with identical parameters.
"""

from __future__ import annotations

import jax.numpy as jnp

from stabledist.testing._class_entry import ClassEntry, _a, _cov2, _i
from stabledist.testing._hints import (
    SYMMETRIC_BASES,
    censored,
    delta,
    expanded,
    improper_uniform,
    independent,
    masked,
    mixture_same_family,
    truncated,
)

__all__ = ["WRAPPERS"]

NESTED_ONLY = ("numpyro's default rule broadcasts the parameters' shapes only, and this class's "
               "parameters are all nested distributions: it returns the stored shape")
"""Why numpyro's `promote_batch_shape` is wrong for a vmapped wrapper of nested distributions."""

WRAPPERS: dict[str, ClassEntry] = {
    # --- truncated ---------------------------------------------------------------------------
    # Truncated StudentT bases are avoided: their sample() needs tensorflow_probability.
    "LeftTruncatedDistribution": ClassEntry(
        lambda m: m.LeftTruncatedDistribution(
            m.SoftLaplace(_a(0.0), _a(1.0), validate_args=True), _a(-0.5), validate_args=True
        ),
        hint=truncated(SYMMETRIC_BASES, low=True, high=False),
    ),
    "RightTruncatedDistribution": ClassEntry(
        lambda m: m.RightTruncatedDistribution(
            m.Laplace(_a([0.0, 1.0]), _a(1.0), validate_args=True), _a(0.7), validate_args=True
        ),
        hint=truncated(SYMMETRIC_BASES, low=False, high=True),
    ),
    "TwoSidedTruncatedDistribution": ClassEntry(
        lambda m: m.TwoSidedTruncatedDistribution(
            m.Normal(_a(0.5), _a(1.0), validate_args=True), _a(-1.0), _a(2.0), validate_args=True
        ),
        hint=truncated(SYMMETRIC_BASES, low=True, high=True),
        float64=True, x64_switch=True,
    ),
    "LeftTruncatedGamma": ClassEntry(
        lambda m: m.LeftTruncatedGamma(
            m.Gamma(_a(2.0), _a(1.0), validate_args=True), _a(0.5), validate_args=True
        ),
        hint=truncated(("Gamma",), low=True, high=False, lo_range=(0.1, 1.0)),
    ),
    "RightTruncatedGamma": ClassEntry(
        lambda m: m.RightTruncatedGamma(
            m.Gamma(_a([2.0, 0.7]), _a(1.0), validate_args=True), _a(3.0), validate_args=True
        ),
        hint=truncated(("Gamma",), low=False, high=True, lo_range=(0.1, 1.0)),
    ),
    "TwoSidedTruncatedGamma": ClassEntry(
        lambda m: m.TwoSidedTruncatedGamma(
            m.Gamma(_a(2.0), _a(1.0), validate_args=True), _a(0.5), _a(4.0), validate_args=True
        ),
        hint=truncated(("Gamma",), low=True, high=True, lo_range=(0.1, 1.0)),
    ),
    "TruncatedPolyaGamma": ClassEntry(
        lambda m: m.TruncatedPolyaGamma((2,), validate_args=True),
        hint=lambda c: {"batch_shape": c.batch},
    ),
    "DoublyTruncatedPowerLaw": ClassEntry(
        lambda m: m.DoublyTruncatedPowerLaw(_a(-1.5), _a(1.0), _a(5.0), validate_args=True),
        variants=(  # alpha == -1 takes the logarithmic-normaliser branch
            lambda m: m.DoublyTruncatedPowerLaw(
                _a(-1.0), _a(1.0), _a([5.0, 8.0]), validate_args=True
            ),
        ),
        hint=lambda c: {
            "alpha": c.floats(-3.0, 2.0), "low": (lo := c.floats(0.5, 2.0)),
            "high": (lo + c.floats(0.5, 4.0)).astype(c.dtype)},
    ),
    "LowerTruncatedPowerLaw": ClassEntry(
        lambda m: m.LowerTruncatedPowerLaw(_a([-2.5, -3.0]), _a(1.0), validate_args=True),
    ),
    # --- censored ----------------------------------------------------------------------------
    "LeftCensoredDistribution": ClassEntry(
        lambda m: m.LeftCensoredDistribution(
            m.Normal(_a(0.5), _a(1.0), validate_args=True),
            jnp.array([True, False, True]),
            validate_args=True,
        ),
        hint=censored,
    ),
    "RightCensoredDistribution": ClassEntry(
        lambda m: m.RightCensoredDistribution(
            m.Weibull(_a(1.5), _a(2.0), validate_args=True),
            jnp.array([False, True]),
            validate_args=True,
        ),
        hint=censored,
    ),
    "IntervalCensoredDistribution": ClassEntry(
        lambda m: m.IntervalCensoredDistribution(
            m.Exponential(_a(1.5), validate_args=True),
            jnp.array([False, True, False]),
            jnp.array([False, False, True]),
            validate_args=True,
        ),
        catalog_only="log_prob values are (lower, upper) pairs, not samples",
        log_prob_value=lambda: _a([[0.2, 0.9], [0.0, 0.4], [1.0, jnp.inf]]),
        note=("sample() returns points of shape batch_shape although event_shape == (2,); "
              "log_prob expects (lower, upper) pairs, see LOG_PROB_VALUES"),
    ),
    # --- wrappers / meta ---------------------------------------------------------------------
    "Delta": ClassEntry(
        lambda m: m.Delta(_a([1.0, 2.0, 3.0]), _a(0.5), event_dim=1, validate_args=True),
        # batch dimensions in front of an event: the constructor's event_dim is not stored
        variants=(
            lambda m: m.Delta(
                _a([[1.0, 2.0], [3.0, 4.0], [5.0, 6.0]]), _a([0.5, -0.5, 1.0]), event_dim=1,
                validate_args=True,
            ),
        ),
        hint=delta,
    ),
    "Unit": ClassEntry(
        lambda m: m.Unit(_a([-0.5, 0.3]), validate_args=True),
        promote_wrong="numpyro registers a rule for Unit that keeps the stored shape",
    ),
    "ImproperUniform": ClassEntry(
        lambda m: m.ImproperUniform(m.constraints.positive, (2,), (3,), validate_args=True),
        hint=improper_uniform,
        log_prob_value=lambda: _a([[0.5, 1.0, 2.0], [3.0, 0.1, 1.0]]),
        note="sample() raises NotImplementedError by design; use LOG_PROB_VALUES",
    ),
    "ExpandedDistribution": ClassEntry(
        lambda m: m.ExpandedDistribution(
            m.Normal(_a([0.0, 1.0, 2.0]), _a(1.0), validate_args=True), (2, 3)
        ),
        hint=expanded,
    ),
    "FoldedDistribution": ClassEntry(
        lambda m: m.FoldedDistribution(
            m.Normal(_a(0.5), _a(1.0), validate_args=True), validate_args=True
        ),
        hint=lambda c: {"base_dist": c.sub(c.choice(SYMMETRIC_BASES))},
        promote_wrong=NESTED_ONLY,
    ),
    "Independent": ClassEntry(
        lambda m: m.Independent(
            m.Normal(_a([[0.0, 1.0, 2.0], [-1.0, 0.0, 1.0]]), _a(1.0), validate_args=True),
            1,
            validate_args=True,
        ),
        hint=independent,
        float64=True,
    ),
    "MaskedDistribution": ClassEntry(
        lambda m: m.MaskedDistribution(
            m.Normal(_a([0.0, 1.0, 2.0]), _a(1.0), validate_args=True),
            jnp.array([True, False, True]),
        ),
        variants=(
            lambda m: m.MaskedDistribution(
                m.Normal(_a([0.0, 1.0]), _a(1.0), validate_args=True), False
            ),
        ),
        hint=masked,
        float64=True,
    ),
    "TransformedDistribution": ClassEntry(
        lambda m: m.TransformedDistribution(
            m.Normal(_a(0.0), _a(1.0), validate_args=True),
            [m.transforms.AffineTransform(_a(1.0), _a(2.0)), m.transforms.ExpTransform()],
            validate_args=True,
        ),
        catalog_only="arguments are a base distribution and a list of transforms",
        promote_wrong=NESTED_ONLY,
        float64=True,
    ),
    "MixtureGeneral": ClassEntry(
        lambda m: m.MixtureGeneral(
            m.CategoricalProbs(_a([0.3, 0.5, 0.2]), validate_args=True),
            [
                m.Normal(_a(0.0), _a(1.0), validate_args=True),
                m.StudentT(_a(4.0), _a(-0.5), _a(0.3), validate_args=True),
                m.Laplace(_a(0.6), _a(1.2), validate_args=True),
            ],
            validate_args=True,
        ),
        catalog_only="a list of component distributions whose shapes must agree",
        promote_wrong=NESTED_ONLY,
    ),
    "MixtureSameFamily": ClassEntry(
        lambda m: m.MixtureSameFamily(
            m.CategoricalLogits(_a([0.0, 1.0, -0.5]), validate_args=True),
            m.MultivariateNormal(
                _a([[0.0, 0.0], [1.0, 2.0], [-1.0, 0.5]]),
                scale_tril=jnp.linalg.cholesky(_cov2()),
                validate_args=True,
            ),
            validate_args=True,
        ),
        hint=mixture_same_family,
        promote_wrong=NESTED_ONLY,
        float64=True,
    ),
    "SineSkewed": ClassEntry(
        lambda m: m.SineSkewed(
            m.SineBivariateVonMises(
                _a(0.5), _a(-1.0), _a(2.0), _a(3.0), correlation=_a(0.8), validate_args=True
            ),
            _a([0.3, -0.2]),
            validate_args=True,
        ),
        catalog_only="base must be a circular distribution on a torus (SineBivariateVonMises)",
    ),
    # --- factory functions -------------------------------------------------------------------
    "Bernoulli": ClassEntry(
        lambda m: m.Bernoulli(probs=_a([0.2, 0.7]), validate_args=True),
        variants=(
            lambda m: m.Bernoulli(logits=_a(0.3), validate_args=True),
        ),
    ),
    "Binomial": ClassEntry(
        lambda m: m.Binomial(_i(5), logits=_a(0.3), validate_args=True),
        variants=(
            lambda m: m.Binomial(_i([3, 6]), probs=_a(0.4), validate_args=True),
        ),
    ),
    "Categorical": ClassEntry(
        lambda m: m.Categorical(logits=_a([0.0, 1.0, -1.0, 0.5]), validate_args=True),
        variants=(
            lambda m: m.Categorical(probs=_a([[0.2, 0.8], [0.5, 0.5]]), validate_args=True),
        ),
    ),
    "Geometric": ClassEntry(
        lambda m: m.Geometric(probs=_a(0.4), validate_args=True),
        variants=(
            lambda m: m.Geometric(logits=_a([-0.5, 0.5]), validate_args=True),
        ),
    ),
    "HurdleDistribution": ClassEntry(
        lambda m: m.HurdleDistribution(
            m.Poisson(_a(2.0), validate_args=True), gate=_a([0.3, 0.6]), validate_args=True
        ),
        variants=(
            lambda m: m.HurdleDistribution(
                m.Gamma(_a(2.0), _a(1.0), validate_args=True), gate_logits=_a(-0.5),
                validate_args=True,
            ),
        ),
    ),
    "HurdleNegativeBinomial2": ClassEntry(
        lambda m: m.HurdleNegativeBinomial2(_a(0.3), _a(3.0), _a(2.0), validate_args=True),
    ),
    "Mixture": ClassEntry(
        lambda m: m.Mixture(
            m.CategoricalProbs(_a([0.4, 0.6]), validate_args=True),
            [
                m.Gamma(_a(2.0), _a(1.0), validate_args=True),
                m.LogNormal(_a(0.0), _a(0.5), validate_args=True),
            ],
            validate_args=True,
        ),
        variants=(  # one vectorised component distribution dispatches to MixtureSameFamily
            lambda m: m.Mixture(
                m.CategoricalProbs(_a([0.4, 0.6]), validate_args=True),
                m.Normal(_a([-1.0, 1.0]), _a([0.5, 1.0]), validate_args=True),
                validate_args=True,
            ),
        ),
    ),
    "Multinomial": ClassEntry(
        lambda m: m.Multinomial(_i(4), probs=_a([0.2, 0.3, 0.5]), validate_args=True),
        variants=(
            lambda m: m.Multinomial(_i(3), logits=_a([0.0, 1.0, 0.5]), validate_args=True),
        ),
    ),
    "NegativeBinomial": ClassEntry(
        lambda m: m.NegativeBinomial(_a(3.0), probs=_a(0.4), validate_args=True),
        variants=(
            lambda m: m.NegativeBinomial(_a([2.0, 5.0]), logits=_a(0.3), validate_args=True),
        ),
    ),
    "RelaxedBernoulli": ClassEntry(
        lambda m: m.RelaxedBernoulli(_a(0.7), probs=_a(0.3), validate_args=True),
        variants=(
            lambda m: m.RelaxedBernoulli(_a(0.5), logits=_a(-0.4), validate_args=True),
        ),
    ),
    "TruncatedCauchy": ClassEntry(
        lambda m: m.TruncatedCauchy(
            _a(0.0), _a(1.0), low=_a(-1.0), high=_a(2.0), validate_args=True
        ),
    ),
    "TruncatedDistribution": ClassEntry(
        lambda m: m.TruncatedDistribution(
            m.Logistic(_a(0.0), _a(1.0), validate_args=True), low=_a(-0.5), validate_args=True
        ),
        variants=(
            lambda m: m.TruncatedDistribution(
                m.Cauchy(_a(0.0), _a(1.0), validate_args=True), high=_a(1.0), validate_args=True
            ),
            lambda m: m.TruncatedDistribution(
                m.Laplace(_a(0.0), _a(1.0), validate_args=True),
                low=_a(-1.0),
                high=_a(2.0),
                validate_args=True,
            ),
        ),
    ),
    "TruncatedGamma": ClassEntry(
        lambda m: m.TruncatedGamma(_a(2.0), _a(1.0), low=_a(0.5), high=_a(4.0), validate_args=True),
        variants=(
            lambda m: m.TruncatedGamma(_a(2.0), _a(1.0), low=_a(0.5), validate_args=True),
            lambda m: m.TruncatedGamma(_a(2.0), _a(1.0), high=_a(3.0), validate_args=True),
        ),
    ),
    "TruncatedNormal": ClassEntry(
        lambda m: m.TruncatedNormal(_a([0.0, 1.0]), _a(1.0), low=_a(-0.5), validate_args=True),
        variants=(
            lambda m: m.TruncatedNormal(_a(0.0), _a(1.0), high=_a(0.5), validate_args=True),
            lambda m: m.TruncatedNormal(
                _a(0.0), _a([1.0, 2.0]), low=_a(-1.0), high=_a(1.5), validate_args=True
            ),
        ),
    ),
    "ZeroInflatedDistribution": ClassEntry(
        lambda m: m.ZeroInflatedDistribution(
            m.Poisson(_a(2.0), validate_args=True), gate=_a(0.3), validate_args=True
        ),
        variants=(
            lambda m: m.ZeroInflatedDistribution(
                m.Poisson(_a([2.0, 4.0]), validate_args=True), gate_logits=_a(-0.5),
                validate_args=True,
            ),
        ),
    ),
    "ZeroInflatedNegativeBinomial2": ClassEntry(
        lambda m: m.ZeroInflatedNegativeBinomial2(
            _a(3.0), _a(2.0), gate=_a([0.2, 0.5]), validate_args=True
        ),
        variants=(
            lambda m: m.ZeroInflatedNegativeBinomial2(
                _a(3.0), _a(2.0), gate_logits=_a(-1.0), validate_args=True
            ),
        ),
    ),
    # --- abstract ----------------------------------------------------------------------------
    "Distribution": ClassEntry(
        no_example="abstract base class: no parameters to draw, no sample/log_prob; "
                   "every concrete subclass is tested",
    ),
}
"""name -> record, in the catalog's order."""
