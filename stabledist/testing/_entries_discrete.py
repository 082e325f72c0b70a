"""The catalog's records of the discrete distributions, then the zero-inflated and hurdle
ones: one `ClassEntry` per public name of ``numpyro.distributions``, merged into
`stabledist.testing._catalog_entries.CATALOG`.

Examples use fixed float32 parameters (event sizes 2-4, batch shapes (), (2,), (3,)) and
``validate_args=True`` wherever accepted; a builder reaches every class, nested distribution,
transform and constraint through its module argument, so one builder gives a numpyro and a
stabledist instance with identical parameters.
"""

from __future__ import annotations

from numpyro.distributions import constraints as C  # noqa: N812 - constraint namespace

from stabledist.testing._class_entry import ClassEntry, NumpyroFailure, _a, _i, round_trip
from stabledist.testing._hints import DISCRETE_BASES, gated

__all__ = ["DISCRETE"]

DISCRETE: dict[str, ClassEntry] = {
    # --- discrete ----------------------------------------------------------------------------
    "BernoulliLogits": ClassEntry(
        lambda m: m.BernoulliLogits(_a([-1.0, 0.5, 2.0]), validate_args=True),
    ),
    "BernoulliProbs": ClassEntry(lambda m: m.BernoulliProbs(_a(0.3), validate_args=True)),
    "BetaBinomial": ClassEntry(
        lambda m: m.BetaBinomial(_a(2.0), _a(3.0), _i(10), validate_args=True),
    ),
    "BetaNegativeBinomial": ClassEntry(
        lambda m: m.BetaNegativeBinomial(_a([2.0, 3.5]), _a(4.0), _a(3.0), validate_args=True),
    ),
    "BinomialLogits": ClassEntry(
        lambda m: m.BinomialLogits(_a([-0.5, 1.0]), _i(8), validate_args=True),
    ),
    "BinomialProbs": ClassEntry(
        lambda m: m.BinomialProbs(_a(0.4), _i([5, 10, 3]), validate_args=True),
        float64=True,
    ),
    "CategoricalLogits": ClassEntry(
        lambda m: m.CategoricalLogits(_a([[0.0, 1.0, -1.0], [2.0, 0.5, 0.0]]), validate_args=True),
        float64=True,
    ),
    "CategoricalProbs": ClassEntry(
        lambda m: m.CategoricalProbs(_a([0.2, 0.3, 0.5]), validate_args=True),
    ),
    "DirichletMultinomial": ClassEntry(
        lambda m: m.DirichletMultinomial(_a([1.5, 2.0, 3.0]), _i(5), validate_args=True),
        hint=lambda c: {"concentration": c.value(C.independent(C.positive, 1)),
                        "total_count": c.integers(0, 8)},
    ),
    "DiscreteUniform": ClassEntry(
        lambda m: m.DiscreteUniform(_i([0, 2]), _i([3, 5]), validate_args=True),
        hint=lambda c: {"low": (lo := c.ints(-3, 3)),
                        "high": lo + c.ints(0, 4)},
    ),
    "GammaPoisson": ClassEntry(lambda m: m.GammaPoisson(_a(2.0), _a(0.5), validate_args=True)),
    "GeometricLogits": ClassEntry(lambda m: m.GeometricLogits(_a([-1.0, 0.5]), validate_args=True)),
    "GeometricProbs": ClassEntry(lambda m: m.GeometricProbs(_a(0.3), validate_args=True)),
    "MultinomialLogits": ClassEntry(
        lambda m: m.MultinomialLogits(_a([0.0, 1.0, -0.5, 0.3]), _i(6), validate_args=True),
        hint=lambda c: {"logits": c.value(C.real_vector),
                        "total_count": c.integers(0, 8)},
    ),
    "MultinomialProbs": ClassEntry(
        lambda m: m.MultinomialProbs(
            _a([[0.2, 0.3, 0.5], [0.6, 0.3, 0.1]]), _i(4), validate_args=True
        ),
        # total_count is a static (aux) pytree field upstream: a Python int, part of the structure
        hint=lambda c: {"probs": c.value(C.simplex),
                        "total_count": c.integers(0, 8)},
    ),
    "NegativeBinomial2": ClassEntry(
        lambda m: m.NegativeBinomial2(_a(3.0), _a(2.0), validate_args=True),
    ),
    "NegativeBinomialLogits": ClassEntry(
        lambda m: m.NegativeBinomialLogits(_a(4.0), _a([-0.5, 0.5]), validate_args=True),
    ),
    "NegativeBinomialProbs": ClassEntry(
        lambda m: m.NegativeBinomialProbs(_a(3.0), _a(0.4), validate_args=True),
    ),
    "OrderedLogistic": ClassEntry(
        lambda m: m.OrderedLogistic(_a([-0.5, 1.0]), _a([-1.0, 0.0, 1.5]), validate_args=True),
    ),
    "Poisson": ClassEntry(
        lambda m: m.Poisson(_a([1.0, 3.5, 0.2]), validate_args=True),
        variants=(
            lambda m: m.Poisson(_a([1.0, 3.5]), is_sparse=True, validate_args=True),
        ),
    ),
    # --- zero inflated / hurdle --------------------------------------------------------------
    "ZeroInflatedLogits": ClassEntry(
        lambda m: m.ZeroInflatedLogits(
            m.Poisson(_a([2.0, 4.0]), validate_args=True), _a(-0.5), validate_args=True
        ),
        hint=gated(DISCRETE_BASES, "gate_logits"),
    ),
    "ZeroInflatedPoisson": ClassEntry(
        lambda m: m.ZeroInflatedPoisson(_a(0.3), _a(2.5), validate_args=True),
    ),
    "ZeroInflatedProbs": ClassEntry(
        lambda m: m.ZeroInflatedProbs(
            m.BinomialProbs(_a(0.4), _i(6), validate_args=True), _a([0.2, 0.5]), validate_args=True
        ),
        hint=gated(DISCRETE_BASES, "gate"),
    ),
    "HurdleGamma": ClassEntry(
        lambda m: m.HurdleGamma(_a(0.3), _a(2.0), _a(1.5), validate_args=True),
    ),
    "HurdleLogits": ClassEntry(
        lambda m: m.HurdleLogits(
            m.Poisson(_a(3.0), validate_args=True), _a([-0.5, 1.0]), validate_args=True
        ),
        hint=gated(DISCRETE_BASES, "gate_logits"),
    ),
    "HurdleLogNormal": ClassEntry(
        lambda m: m.HurdleLogNormal(_a(0.4), _a(0.5), _a(0.8), validate_args=True),
    ),
    "HurdlePoisson": ClassEntry(
        lambda m: m.HurdlePoisson(_a([0.2, 0.6]), _a(2.5), validate_args=True),
    ),
    "HurdleProbs": ClassEntry(
        lambda m: m.HurdleProbs(
            m.NegativeBinomial2(_a(3.0), _a(2.0), validate_args=True), _a(0.3), validate_args=True
        ),
        hint=gated(DISCRETE_BASES, "gate"),
        numpyro_fails=NumpyroFailure(
            "numpyro's tree_unflatten of a hurdle whose base is HurdleNegativeBinomial2's own "
            "negative binomial raises: that base's mean is a property without a setter",
            round_trip, AttributeError, match="has no setter", shown_by="HurdleNegativeBinomial2",
        ),
    ),
}
"""name -> record, in the catalog's order."""
