"""Strategy hints: how to draw the arguments of the numpyro classes whose ``arg_constraints``
do not say enough: parameters that depend on each other (`Uniform`'s ``high > low``,
`Wishart`'s ``concentration > dim - 1``), arguments without a constraint (`LKJ`'s
``dimension``, `CAR`'s adjacency matrix) and nested base distributions (`Independent`,
truncated and zero-inflated wrappers, mixtures). A hint draws only through its `HintContext`
(`stabledist.testing.specs` passes one), so this module needs no hypothesis.

Which class draws with which hint is its catalog record's ``hint``
(`stabledist.testing._class_entry.ClassEntry`); here are the hints several records share and
the bases they draw nested distributions from.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, Protocol

import numpy as np
from numpyro.distributions import constraints as C  # noqa: N812 - constraint namespace

from stabledist.testing._class_entry import _ring_adjacency

if TYPE_CHECKING:  # DistSpec's module imports nothing of this one
    from stabledist.testing._spec import DistSpec, Raw

__all__ = ["CORR_ALTERNATIVES", "DISCRETE_BASES", "FLOAT_BOUND", "PD_ALTERNATIVES",
           "SIMPLE_BASES", "SYMMETRIC_BASES", "Hint", "HintContext", "car", "censored",
           "circulant", "delta", "expanded", "gated", "gaussian_state_space", "improper_uniform",
           "independent", "masked", "mixture_same_family", "one_of", "sine_bivariate",
           "truncated", "uniform", "wishart"]


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


def one_of(ctx: HintContext, options: Mapping[str, C.Constraint],
            batch: tuple[int, ...] | None = None) -> dict[str, Any]:
    key = ctx.choice(sorted(options))
    return {key: ctx.value(options[key], batch=batch)}


PD_ALTERNATIVES = {
    "scale_matrix": C.positive_definite,
    "rate_matrix": C.positive_definite,
    "scale_tril": C.lower_cholesky,
}
CORR_ALTERNATIVES = {"correlation_matrix": C.corr_matrix, "correlation_cholesky": C.corr_cholesky}


def wishart(ctx: HintContext) -> dict[str, Any]:
    return {"concentration": ctx.floats(0.5, 4.0) + (ctx.n - 1),
            **one_of(ctx, PD_ALTERNATIVES, batch=())}


def uniform(ctx: HintContext) -> dict[str, Any]:
    low = ctx.floats(-FLOAT_BOUND, FLOAT_BOUND)
    return {"low": low, "high": (low + ctx.floats(0.5, 4.0)).astype(ctx.dtype)}


def truncated(
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


def independent(ctx: HintContext) -> dict[str, Any]:
    k = ctx.integers(0, len(ctx.batch))
    return {"base_dist": ctx.sub(ctx.choice(SIMPLE_BASES)), "reinterpreted_batch_ndims": k}


def expanded(ctx: HintContext) -> dict[str, Any]:
    cut = ctx.integers(0, len(ctx.batch))
    base = ctx.sub(ctx.choice(SIMPLE_BASES), batch=ctx.batch[cut:])
    return {"base_dist": base, "batch_shape": ctx.batch}


def masked(ctx: HintContext) -> dict[str, Any]:
    mask: Any = ctx.choice([True, False, "array"])
    if mask == "array":
        mask = ctx.value(C.boolean)
    return {"base_dist": ctx.sub(ctx.choice(SIMPLE_BASES)), "mask": mask}


def gated(bases: Sequence[str], gate: str) -> Hint:
    constraint = C.real if gate == "gate_logits" else C.unit_interval

    def hint(ctx: HintContext) -> dict[str, Any]:
        return {"base_dist": ctx.sub(ctx.choice(bases)), gate: ctx.value(constraint)}

    return hint


def censored(ctx: HintContext) -> dict[str, Any]:
    return {"base_dist": ctx.sub(ctx.choice(("Normal", "Exponential", "Weibull", "Gumbel"))),
            "censored": ctx.value(C.boolean)}


def mixture_same_family(ctx: HintContext) -> dict[str, Any]:
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


SIMPLE_BASES = ("Normal", "Gamma", "Poisson", "BernoulliProbs", "Dirichlet",
                 "MultivariateNormal", "Exponential", "Laplace")
SYMMETRIC_BASES = ("Normal", "Laplace", "Logistic", "Cauchy", "SoftLaplace")
DISCRETE_BASES = ("Poisson", "BinomialProbs", "NegativeBinomial2", "GeometricProbs")


def sine_bivariate(ctx: HintContext) -> dict[str, Any]:
    phi_c, psi_c = ctx.floats(0.5, 4.0), ctx.floats(0.5, 4.0)
    w = ctx.floats(-0.8, 0.8)
    return {"phi_loc": ctx.value(C.circular), "psi_loc": ctx.value(C.circular),
            "phi_concentration": phi_c, "psi_concentration": psi_c,
            "correlation": (w * np.sqrt(phi_c * psi_c)).astype(ctx.dtype)}


def gaussian_state_space(ctx: HintContext) -> dict[str, Any]:
    s = ctx.n
    out: dict[str, Any] = {
        "num_steps": ctx.integers(1, 3),
        "transition_matrix": ctx.floats(-0.5, 0.5, shape=(s, s)),
        **one_of(ctx, {"covariance_matrix": C.positive_definite,
                        "precision_matrix": C.positive_definite,
                        "scale_tril": C.lower_cholesky}),
    }
    if ctx.boolean():  # its batch must cover the covariance's
        out["initial_value"] = ctx.value(C.real_vector)
    return out


def circulant(ctx: HintContext) -> dict[str, Any]:
    out: dict[str, Any] = {"loc": ctx.value(C.real_vector)}
    if ctx.boolean():
        out["covariance_row"] = ctx.value(C.positive_definite_circulant_vector, batch=())
    else:
        out["covariance_rfft"] = ctx.floats(0.5, 3.0, shape=(ctx.n // 2 + 1,))
    return out


def car(ctx: HintContext) -> dict[str, Any]:
    # is_sparse=True stores a scipy sparse matrix as static pytree data (upstream too), which
    # is unhashable, so such an instance cannot cross a jit boundary: dense only here.
    n = max(ctx.n, 3)
    return {"loc": ctx.value(C.real_vector, n=n), "correlation": ctx.floats(-0.9, 0.9),
            "conditional_precision": ctx.value(C.positive),
            "adj_matrix": ctx.raw(_ring_adjacency(n)),
            "is_sparse": False}


def improper_uniform(ctx: HintContext) -> dict[str, Any]:
    vector = ctx.boolean()
    if vector:
        support = ctx.choice((C.real_vector, C.simplex, C.ordered_vector))
        return {"support": support, "batch_shape": ctx.batch, "event_shape": (ctx.n,)}
    support = ctx.choice((C.real, C.positive, C.unit_interval))
    return {"support": support, "batch_shape": ctx.batch, "event_shape": ()}


def delta(ctx: HintContext) -> dict[str, Any]:
    event_dim = ctx.integers(0, 1)
    return {"v": ctx.floats(-FLOAT_BOUND, FLOAT_BOUND, shape=(*ctx.batch, *(ctx.n,) * event_dim)),
            "log_density": ctx.value(C.real), "event_dim": event_dim}
