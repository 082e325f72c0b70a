"""Strategy hints: how to draw the arguments of the numpyro classes whose ``arg_constraints``
do not say enough: parameters that depend on each other (`Uniform`'s ``high > low``,
`Wishart`'s ``concentration > dim - 1``), arguments without a constraint (`LKJ`'s
``dimension``, `CAR`'s adjacency matrix) and nested base distributions (`Independent`,
truncated and zero-inflated wrappers, mixtures). A hint draws only through its `HintContext`
(`stabledist.testing.specs` passes one), so this module needs no hypothesis.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, Protocol

import numpy as np
from numpyro.distributions import constraints as C  # noqa: N812 - constraint namespace

from stabledist.testing._examples import _ring_adjacency

if TYPE_CHECKING:  # DistSpec's module imports nothing of this one
    from stabledist.testing._spec import DistSpec, Raw

__all__ = ["CATALOG_ONLY", "FLOAT_BOUND", "HINTS", "Hint", "HintContext"]

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


class HintContext(Protocol):
    """What a hint draws through (`stabledist.testing._strategies.DrawContext` is one): the
    batch shape, an event size and a dtype; structural choices (recorded, so a stack of
    specs shares them) and values."""

    batch: tuple[int, ...]
    n: int
    dtype: Any

    def value(self, constraint: C.Constraint, batch: tuple[int, ...] | None = None,
              n: int | None = None) -> np.ndarray: ...
    def floats(self, lo: float, hi: float,
               shape: tuple[int, ...] | None = None) -> np.ndarray: ...
    def ints(self, lo: int, hi: int, shape: tuple[int, ...] | None = None) -> np.ndarray: ...
    def choice(self, options: Sequence[Any]) -> Any: ...
    def integers(self, lo: int, hi: int) -> int: ...
    def boolean(self) -> bool: ...
    def sub(self, name: str, batch: tuple[int, ...] | None = None) -> DistSpec: ...
    def spec(self, name: str, args: dict[str, Any]) -> DistSpec: ...
    def raw(self, value: Any) -> Raw: ...


FLOAT_BOUND = 3.0
"""Real parameters are drawn from [-FLOAT_BOUND, FLOAT_BOUND]."""

Hint = Callable[[HintContext], dict[str, Any]]


def _one_of(ctx: HintContext, options: Mapping[str, C.Constraint],
            batch: tuple[int, ...] | None = None) -> dict[str, Any]:
    key = ctx.choice(sorted(options))
    return {key: ctx.value(options[key], batch=batch)}


_PD_ALTERNATIVES = {
    "scale_matrix": C.positive_definite,
    "rate_matrix": C.positive_definite,
    "scale_tril": C.lower_cholesky,
}
_CORR_ALTERNATIVES = {"correlation_matrix": C.corr_matrix, "correlation_cholesky": C.corr_cholesky}


def _wishart(ctx: HintContext) -> dict[str, Any]:
    return {"concentration": ctx.floats(0.5, 4.0) + (ctx.n - 1),
            **_one_of(ctx, _PD_ALTERNATIVES, batch=())}


def _uniform(ctx: HintContext) -> dict[str, Any]:
    low = ctx.floats(-FLOAT_BOUND, FLOAT_BOUND)
    return {"low": low, "high": (low + ctx.floats(0.5, 4.0)).astype(ctx.dtype)}


def _truncated(
    base_names: Sequence[str], low: bool, high: bool, lo_range: tuple[float, float] = (-2.0, 0.5)
) -> Hint:
    """Truncation bounds inside the base's support: ``low`` from ``lo_range``, ``high`` above."""

    def hint(ctx: HintContext) -> dict[str, Any]:
        out: dict[str, Any] = {"base_dist": ctx.sub(ctx.choice(base_names))}
        lo = ctx.floats(*lo_range)
        if low:
            out["low"] = lo
        if high:
            out["high"] = (lo + ctx.floats(0.5, 3.0)).astype(ctx.dtype)
        return out

    return hint


def _independent(ctx: HintContext) -> dict[str, Any]:
    k = ctx.integers(0, len(ctx.batch))
    return {"base_dist": ctx.sub(ctx.choice(_SIMPLE_BASES)), "reinterpreted_batch_ndims": k}


def _expanded(ctx: HintContext) -> dict[str, Any]:
    cut = ctx.integers(0, len(ctx.batch))
    base = ctx.sub(ctx.choice(_SIMPLE_BASES), batch=ctx.batch[cut:])
    return {"base_dist": base, "batch_shape": ctx.batch}


def _masked(ctx: HintContext) -> dict[str, Any]:
    mask: Any = ctx.choice([True, False, "array"])
    if mask == "array":
        mask = ctx.value(C.boolean)
    return {"base_dist": ctx.sub(ctx.choice(_SIMPLE_BASES)), "mask": mask}


def _gated(bases: Sequence[str], gate: str) -> Hint:
    constraint = C.real if gate == "gate_logits" else C.unit_interval

    def hint(ctx: HintContext) -> dict[str, Any]:
        return {"base_dist": ctx.sub(ctx.choice(bases)), gate: ctx.value(constraint)}

    return hint


def _censored(ctx: HintContext) -> dict[str, Any]:
    return {"base_dist": ctx.sub(ctx.choice(("Normal", "Exponential", "Weibull", "Gumbel"))),
            "censored": ctx.value(C.boolean)}


def _mixture_same_family(ctx: HintContext) -> dict[str, Any]:
    k = ctx.integers(2, 3)
    mixing = ctx.sub(ctx.choice(("CategoricalProbs", "CategoricalLogits")), batch=())
    mixing = _with_event(mixing, k, ctx)
    component = ctx.sub(ctx.choice(("Normal", "MultivariateNormal", "Laplace")), batch=(k,))
    return {"mixing_distribution": mixing, "component_distribution": component}


def _with_event(spec: DistSpec, n: int, ctx: HintContext) -> DistSpec:
    """Redraw a categorical spec's parameter with event size ``n``."""
    name = spec.name
    param = "probs" if name.endswith("Probs") else "logits"
    constraint = C.simplex if param == "probs" else C.real_vector
    return ctx.spec(name, {param: ctx.value(constraint, batch=(), n=n), "validate_args": True})


_SIMPLE_BASES = ("Normal", "Gamma", "Poisson", "BernoulliProbs", "Dirichlet",
                 "MultivariateNormal", "Exponential", "Laplace")
_SYMMETRIC_BASES = ("Normal", "Laplace", "Logistic", "Cauchy", "SoftLaplace")
_DISCRETE_BASES = ("Poisson", "BinomialProbs", "NegativeBinomial2", "GeometricProbs")


def _sine_bivariate(ctx: HintContext) -> dict[str, Any]:
    phi_c, psi_c = ctx.floats(0.5, 4.0), ctx.floats(0.5, 4.0)
    w = ctx.floats(-0.8, 0.8)
    return {"phi_loc": ctx.value(C.circular), "psi_loc": ctx.value(C.circular),
            "phi_concentration": phi_c, "psi_concentration": psi_c,
            "correlation": (w * np.sqrt(phi_c * psi_c)).astype(ctx.dtype)}


def _gaussian_state_space(ctx: HintContext) -> dict[str, Any]:
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


def _circulant(ctx: HintContext) -> dict[str, Any]:
    out: dict[str, Any] = {"loc": ctx.value(C.real_vector)}
    if ctx.boolean():
        out["covariance_row"] = ctx.value(C.positive_definite_circulant_vector, batch=())
    else:
        out["covariance_rfft"] = ctx.floats(0.5, 3.0, shape=(ctx.n // 2 + 1,))
    return out


def _car(ctx: HintContext) -> dict[str, Any]:
    # is_sparse=True stores a scipy sparse matrix as static pytree data (upstream too), which
    # is unhashable, so such an instance cannot cross a jit boundary: dense only here.
    n = max(ctx.n, 3)
    return {"loc": ctx.value(C.real_vector, n=n), "correlation": ctx.floats(-0.9, 0.9),
            "conditional_precision": ctx.value(C.positive),
            "adj_matrix": ctx.raw(_ring_adjacency(n)),
            "is_sparse": False}


def _improper_uniform(ctx: HintContext) -> dict[str, Any]:
    vector = ctx.boolean()
    if vector:
        support = ctx.choice((C.real_vector, C.simplex, C.ordered_vector))
        return {"support": support, "batch_shape": ctx.batch, "event_shape": (ctx.n,)}
    support = ctx.choice((C.real, C.positive, C.unit_interval))
    return {"support": support, "batch_shape": ctx.batch, "event_shape": ()}


def _delta(ctx: HintContext) -> dict[str, Any]:
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
