"""Hypothesis strategies for distributions and for the ways code reads them.

* :func:`specs` draws a :class:`DistSpec`: a class and constructor arguments that satisfy its
  ``arg_constraints``, with a random batch shape (``()`` included) and float32 or float64
  parameters. A spec is plain data (numpy arrays, Python values, nested specs), so it prints
  readably when a property fails, shrinks well, pickles into other processes, and builds the
  *same* distribution with ``stabledist`` or with upstream ``numpyro.distributions``.
* :func:`distributions` draws built instances; :func:`stacks` draws several specs of one
  structure (same tree, same leaf shapes), for ``vmap``/``pmap``/``shard_map`` over a stacked
  batch.
* :func:`access_plans` draws an :class:`AccessPlan`: a random sequence of reads of every lazy
  property and calls of ``mean``, ``variance``, ``log_prob``, ``sample``, ``cdf``, ``icdf``,
  ``entropy``, ``enumerate_support``, ``expand``, ``to_event``, ``mask``.

How a class's arguments are drawn (see :data:`DRAW_MODE`):

``generic``
    Derived from the class: each constructor parameter that has an ``arg_constraints`` entry
    gets a value from :func:`constraint_values` (real, positive, intervals, simplex, ordered
    vectors, correlation Cholesky factors, positive definite matrices, integer counts, ...);
    several optional (``None``-default) constrained parameters are alternative
    parametrizations, of which exactly one is drawn. Works for users' classes too.
``hinted``
    Generic values, but :data:`HINTS` says how parameters depend on each other or on
    arguments that have no constraint (``Uniform``'s ``high > low``, ``Wishart``'s
    ``concentration > dim - 1``, ``LKJ``'s ``dimension``, ``CAR``'s adjacency matrix,
    nested base distributions of ``Independent``, truncated and zero-inflated wrappers ...).
``catalog``
    A fixed-structure example from :mod:`stabledist.testing.catalog` (its main example or
    one of its variants), for classes whose arguments are functions, transforms or lists of
    distributions (:data:`CATALOG_ONLY` says why for each).
"""

from __future__ import annotations

import inspect
import math
import types
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import hypothesis.extra.numpy as hnp
import jax
import jax.numpy as jnp
import numpy as np
import numpyro.distributions as nd
from hypothesis import strategies as st
from numpyro.distributions import constraints as C  # noqa: N812 - constraint namespace
from numpyro.distributions.util import lazy_property

import stabledist
from stabledist.testing import catalog

__all__ = [
    "CATALOG_ONLY",
    "HINTS",
    "AccessPlan",
    "DistSpec",
    "DrawContext",
    "Step",
    "access_plans",
    "catalog_specs",
    "constraint_values",
    "distributions",
    "draw_mode",
    "full_plan",
    "lazy_names",
    "specs",
    "stacks",
    "upstream_class",
    "valid_value",
]

UNSUPPORTED = (NotImplementedError, ImportError)
"""A method raising one of these is "not defined" for that distribution (numpyro raises
ImportError where an optional dependency, tensorflow_probability, would be needed)."""


# ---------------------------------------------------------------------------------------------
# Specs: plain-data descriptions of one distribution.
# ---------------------------------------------------------------------------------------------


@dataclass(frozen=True, eq=False)
class DistSpec:
    """A distribution class and constructor arguments, as plain data.

    ``name`` is a public ``numpyro.distributions`` name (built from whichever module
    :meth:`build` is given) unless ``cls`` is set (a user's class). ``catalog_id`` names a
    catalog builder instead of ``args``. Float leaves are float64 when ``x64`` is true: build
    and use such a spec inside :meth:`x64_context`.
    """

    name: str
    args: tuple[tuple[str, Any], ...] = ()
    cls: type | None = None
    catalog_id: str | None = None
    x64: bool = False
    mode: str = "generic"

    def build(self, module: types.ModuleType | None = None) -> nd.Distribution:
        """The instance, from ``module`` (default :mod:`stabledist`)."""
        module = stabledist if module is None else module
        with self.x64_context():
            if self.catalog_id is not None:
                d = _catalog_builders()[self.catalog_id](module)
                return _cast_floats(d, jnp.float64) if self.x64 else d
            kwargs = {k: _materialize(v, module) for k, v in self.args}
            return self.target(module)(**kwargs)

    def target(self, module: types.ModuleType | None = None) -> Callable[..., Any]:
        """The class (or factory) that :meth:`build` calls."""
        module = stabledist if module is None else module
        if self.cls is None:
            return getattr(module, self.name)
        if module is nd:
            return upstream_class(self.cls)
        return self.cls

    def x64_context(self) -> Any:
        """``jax.enable_x64(True)`` for a float64 spec, else a no-op context."""
        return jax.enable_x64(True) if self.x64 else _nullcontext()

    def _repr_pretty_(self, printer: Any, cycle: bool) -> None:  # hypothesis's printer
        printer.text(repr(self))

    def __repr__(self) -> str:
        if self.catalog_id is not None:
            head = f"catalog[{self.catalog_id}]"
            return head + (".astype(float64)" if self.x64 else "")
        args = ", ".join(f"{k}={_short(v)}" for k, v in self.args)
        return f"{self.name}({args})"


class _nullcontext:  # noqa: N801 - tiny, picklable, reusable stand-in for contextlib's
    def __enter__(self) -> None:
        return None

    def __exit__(self, *exc: object) -> None:
        return None


@dataclass(frozen=True, eq=False)
class Raw:
    """An argument passed to the constructor as is (e.g. ``CAR``'s numpy adjacency matrix,
    which numpyro requires to be a numpy array, not a JAX array)."""

    value: Any

    def __repr__(self) -> str:
        return _short(self.value)


def _materialize(value: Any, module: types.ModuleType) -> Any:
    if isinstance(value, DistSpec):
        return value.build(module)
    if isinstance(value, Raw):
        return value.value
    if isinstance(value, np.ndarray | np.generic):
        return jnp.asarray(value)
    if isinstance(value, list):
        return [_materialize(v, module) for v in value]
    return value


def _short(value: Any) -> str:
    if isinstance(value, np.ndarray | np.generic):
        body = np.array2string(value, precision=4, separator=", ", threshold=20)
        return f"{body}:{value.dtype}"
    if isinstance(value, list):
        return "[" + ", ".join(_short(v) for v in value) + "]"
    return repr(value)


def _cast_floats(d: Any, dtype: Any) -> Any:
    """``d`` with every floating leaf cast to ``dtype`` (no constructor runs)."""

    def cast(x: Any) -> Any:
        if isinstance(x, jax.Array | np.ndarray) and jnp.issubdtype(x.dtype, jnp.floating):
            return jnp.asarray(x, dtype=dtype)
        return x

    return jax.tree_util.tree_map(cast, d)


_CATALOG: dict[str, Callable[[types.ModuleType], Any]] | None = None


def _catalog_builders() -> dict[str, Callable[[types.ModuleType], Any]]:
    global _CATALOG
    if _CATALOG is None:
        _CATALOG = dict(catalog.all_builders())
    return _CATALOG


def upstream_class(cls: type) -> type:
    """The numpyro (or user) class a stable class mirrors; ``cls`` itself if not stable."""
    if not stabledist.is_stable(cls):
        return cls
    for base in cls.__mro__:
        if (
            issubclass(base, nd.Distribution)
            and not stabledist.is_stable(base)
            and base.__module__ != "stabledist.fork"
        ):
            return base
    raise TypeError(f"{cls!r} has no upstream class")  # pragma: no cover


def lazy_names(cls_or_instance: Any) -> tuple[str, ...]:
    """Names of the lazy properties of a class (or of an instance's class), sorted."""
    cls = cls_or_instance if isinstance(cls_or_instance, type) else type(cls_or_instance)
    return tuple(
        sorted(n for n in dir(cls) if isinstance(inspect.getattr_static(cls, n, None),
                                                  lazy_property))
    )


# ---------------------------------------------------------------------------------------------
# Values satisfying a constraint.
# ---------------------------------------------------------------------------------------------

FLOAT_BOUND = 3.0
"""Real parameters are drawn from [-FLOAT_BOUND, FLOAT_BOUND]: property tests are about
structure and tracing, not about extreme-value numerics, so values stay moderate."""


def _floats(draw: Any, shape: tuple[int, ...], lo: float, hi: float, dtype: Any) -> np.ndarray:
    width = 64 if np.dtype(dtype) == np.float64 else 32
    if width == 32:  # bounds must be float32 numbers, inside [lo, hi]
        lo = float(np.nextafter(np.float32(lo), np.float32(np.inf))) if float(
            np.float32(lo)) < lo else float(np.float32(lo))
        hi = float(np.nextafter(np.float32(hi), np.float32(-np.inf))) if float(
            np.float32(hi)) > hi else float(np.float32(hi))
    elements = st.floats(lo, hi, width=width, allow_nan=False, allow_subnormal=False)
    return draw(hnp.arrays(np.dtype(dtype), shape, elements=elements))


def _ints(draw: Any, shape: tuple[int, ...], lo: int, hi: int,
          like: Any = np.float32) -> np.ndarray:
    """Integer counts, int64 beside float64 parameters (what ``jnp`` makes under x64: numpyro's
    binomial sampler fails on int32 counts with float64 probabilities)."""
    dtype = np.int64 if np.dtype(like) == np.float64 else np.int32
    return draw(hnp.arrays(dtype, shape, elements=st.integers(lo, hi)))


def _lower_tril(draw: Any, batch: tuple[int, ...], n: int, dtype: Any) -> np.ndarray:
    """A well-conditioned lower triangular matrix with positive diagonal."""
    off = _floats(draw, (*batch, n, n), -0.5, 0.5, dtype)
    diag = _floats(draw, (*batch, n), 0.5, 2.0, dtype)
    tril = np.tril(off, -1) + diag[..., None] * np.eye(n, dtype=dtype)
    return tril.astype(dtype)


def constraint_values(
    draw: Any,
    constraint: C.Constraint,
    batch: tuple[int, ...],
    n: int,
    dtype: Any = np.float32,
) -> np.ndarray:
    """Draw an array in ``constraint`` with batch shape ``batch`` and event size ``n``.

    ``draw`` is hypothesis's draw function (call this inside a ``@st.composite``). Raises
    ``NotImplementedError`` for constraints whose values depend on other parameters
    (``dependent``), so callers can fall back to a hint or the catalog.
    """
    value = _constraint_values(draw, constraint, batch, n, dtype)
    return np.asarray(value, dtype=value.dtype)


def _constraint_values(
    draw: Any, c: C.Constraint, batch: tuple[int, ...], n: int, dtype: Any
) -> np.ndarray:
    if isinstance(c, C._IndependentConstraint) and not isinstance(
        c, C._RealVector | C._RealMatrix
    ):
        k = c.reinterpreted_batch_ndims
        return constraint_values(draw, c.base_constraint, (*batch, *(n,) * k), n, dtype)
    if isinstance(c, C._RealMatrix):
        return _floats(draw, (*batch, n, n), -FLOAT_BOUND, FLOAT_BOUND, dtype)
    if isinstance(c, C._RealVector):
        return _floats(draw, (*batch, n), -FLOAT_BOUND, FLOAT_BOUND, dtype)
    if isinstance(c, C._Boolean):
        return draw(hnp.arrays(np.bool_, batch))
    if isinstance(c, C._IntegerInterval):
        return _ints(draw, batch, int(c.lower_bound), int(c.upper_bound), dtype)
    if isinstance(c, C._IntegerGreaterThan):
        return _ints(draw, batch, int(c.lower_bound), int(c.lower_bound) + 10, dtype)
    if isinstance(c, C._Simplex):
        w = _floats(draw, (*batch, n), 0.1, 1.0, dtype)
        return (w / w.sum(-1, keepdims=True)).astype(dtype)
    if isinstance(c, C._PositiveOrderedVector):
        return np.cumsum(_floats(draw, (*batch, n), 0.25, 2.0, dtype), -1).astype(dtype)
    if isinstance(c, C._OrderedVector):
        start = _floats(draw, (*batch, 1), -FLOAT_BOUND, FLOAT_BOUND, dtype)
        steps = _floats(draw, (*batch, n - 1), 0.25, 2.0, dtype)
        return np.concatenate([start, start + np.cumsum(steps, -1)], -1).astype(dtype)
    if isinstance(c, C._CorrCholesky):
        tril = _lower_tril(draw, batch, n, dtype)
        return (tril / np.linalg.norm(tril, axis=-1, keepdims=True)).astype(dtype)
    if isinstance(c, C._CorrMatrix):
        tril = constraint_values(draw, C.corr_cholesky, batch, n, dtype).astype(np.float64)
        corr = tril @ np.swapaxes(tril, -1, -2)
        corr = 0.5 * (corr + np.swapaxes(corr, -1, -2))
        idx = np.arange(n)
        corr[..., idx, idx] = 1.0
        return corr.astype(dtype)
    if isinstance(c, C._PositiveDefinite | C._PositiveSemiDefinite):
        tril = _lower_tril(draw, batch, n, dtype).astype(np.float64)
        pd = tril @ np.swapaxes(tril, -1, -2)
        return (0.5 * (pd + np.swapaxes(pd, -1, -2))).astype(dtype)
    if isinstance(c, C._LowerCholesky | C._ScaledUnitLowerCholesky | C._SoftplusLowerCholesky):
        return _lower_tril(draw, batch, n, dtype)
    if isinstance(c, C._L1Ball):
        v = _floats(draw, (*batch, n), -1.0, 1.0, dtype)
        norm = np.abs(v).sum(-1, keepdims=True)
        return (v * 0.9 / np.maximum(norm, 0.9)).astype(dtype)
    if isinstance(c, C._PositiveDefiniteCirculantVector):
        spectrum = _floats(draw, (*batch, n // 2 + 1), 0.5, 3.0, dtype)
        return np.fft.irfft(spectrum, n).astype(dtype)
    if isinstance(c, C._Sphere):
        v = _floats(draw, (*batch, n), 0.1, 1.0, dtype)
        return (v / np.linalg.norm(v, axis=-1, keepdims=True)).astype(dtype)
    if isinstance(c, C._Interval):  # unit_interval, open_interval, circular, interval
        lo, hi = float(c.lower_bound), float(c.upper_bound)
        u = _floats(draw, batch, 0.05, 0.95, dtype)
        return (lo + (hi - lo) * u).astype(dtype)
    if isinstance(c, C._GreaterThan):  # positive, nonnegative, softplus_positive, ...
        return (float(c.lower_bound) + _floats(draw, batch, 0.25, 4.0, dtype)).astype(dtype)
    if isinstance(c, C._LessThan):
        return (float(c.upper_bound) - _floats(draw, batch, 0.25, 4.0, dtype)).astype(dtype)
    if isinstance(c, C._Real):
        return _floats(draw, batch, -FLOAT_BOUND, FLOAT_BOUND, dtype)
    raise NotImplementedError(f"no generic values for constraint {c!r}")


# ---------------------------------------------------------------------------------------------
# Draw context and per-class hints.
# ---------------------------------------------------------------------------------------------


class Tape:
    """Structural choices of one draw (shapes, which parametrization, nested classes, static
    arguments), recorded so that :func:`stacks` can replay them and draw only new values."""

    def __init__(self, replay: Sequence[Any] | None = None) -> None:
        self.recorded: list[Any] = []
        self._replay = None if replay is None else iter(replay)

    def pick(self, draw: Any, strategy: Any) -> Any:
        if self._replay is not None:
            return next(self._replay)
        value = draw(strategy)
        self.recorded.append(value)
        return value

    def replay(self) -> Tape:
        return Tape(self.recorded)


@dataclass
class DrawContext:
    """What a hint needs: hypothesis's ``draw``, the batch shape, an event size, a dtype.

    Structural choices go through :meth:`pick` / :meth:`choice` (recorded on the tape, so a
    stack of specs shares them); values through :meth:`value` / :meth:`floats` / ``draw``.
    """

    draw: Any
    batch: tuple[int, ...]
    n: int
    dtype: Any
    x64: bool
    tape: Tape

    def value(self, constraint: C.Constraint, batch: tuple[int, ...] | None = None,
              n: int | None = None) -> np.ndarray:
        return constraint_values(
            self.draw, constraint, self.batch if batch is None else batch,
            self.n if n is None else n, self.dtype,
        )

    def floats(self, lo: float, hi: float, shape: tuple[int, ...] | None = None) -> np.ndarray:
        return _floats(self.draw, self.batch if shape is None else shape, lo, hi, self.dtype)

    def pick(self, strategy: Any) -> Any:
        return self.tape.pick(self.draw, strategy)

    def choice(self, options: Sequence[Any]) -> Any:
        return self.pick(st.sampled_from(list(options)))

    def sub(self, name: str, batch: tuple[int, ...] | None = None) -> DistSpec:
        """A nested spec of public class ``name`` with this context's dtype and event size."""
        batch = self.batch if batch is None else batch
        options = SpecOptions(st.just(batch), st.just(self.n), st.just(self.dtype),
                              allow_catalog=False)
        return _draw_spec(self.draw, name, options, self.tape)


Hint = Callable[[DrawContext], dict[str, Any]]


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
    k = ctx.pick(st.integers(0, len(ctx.batch)))
    return {"base_dist": ctx.sub(ctx.choice(_SIMPLE_BASES)), "reinterpreted_batch_ndims": k}


def _expanded(ctx: DrawContext) -> dict[str, Any]:
    cut = ctx.pick(st.integers(0, len(ctx.batch)))
    base = ctx.sub(ctx.choice(_SIMPLE_BASES), batch=ctx.batch[cut:])
    return {"base_dist": base, "batch_shape": ctx.batch}


def _masked(ctx: DrawContext) -> dict[str, Any]:
    mask: Any = ctx.pick(st.sampled_from([True, False, "array"]))
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
    k = ctx.pick(st.integers(2, 3))
    mixing = ctx.sub(ctx.choice(("CategoricalProbs", "CategoricalLogits")), batch=())
    mixing = _with_event(mixing, k, ctx)
    component = ctx.sub(ctx.choice(("Normal", "MultivariateNormal", "Laplace")), batch=(k,))
    return {"mixing_distribution": mixing, "component_distribution": component}


def _with_event(spec: DistSpec, n: int, ctx: DrawContext) -> DistSpec:
    """Redraw a categorical spec's parameter with event size ``n``."""
    name = spec.name
    param = "probs" if name.endswith("Probs") else "logits"
    constraint = C.simplex if param == "probs" else C.real_vector
    return DistSpec(name, ((param, ctx.value(constraint, batch=(), n=n)),
                           ("validate_args", True)), x64=ctx.x64, mode="generic")


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
        "num_steps": ctx.pick(st.integers(1, 3)),
        "transition_matrix": ctx.floats(-0.5, 0.5, shape=(s, s)),
        **_one_of(ctx, {"covariance_matrix": C.positive_definite,
                        "precision_matrix": C.positive_definite,
                        "scale_tril": C.lower_cholesky}),
    }
    if ctx.pick(st.booleans()):  # its batch must cover the covariance's
        out["initial_value"] = ctx.value(C.real_vector)
    return out


def _circulant(ctx: DrawContext) -> dict[str, Any]:
    out: dict[str, Any] = {"loc": ctx.value(C.real_vector)}
    if ctx.pick(st.booleans()):
        out["covariance_row"] = ctx.value(C.positive_definite_circulant_vector, batch=())
    else:
        out["covariance_rfft"] = ctx.floats(0.5, 3.0, shape=(ctx.n // 2 + 1,))
    return out


def _car(ctx: DrawContext) -> dict[str, Any]:
    # is_sparse=True stores a scipy sparse matrix as static pytree data (upstream too), which
    # is unhashable, so such an instance cannot cross a jit boundary: dense only here.
    n = max(ctx.n, 3)
    adj = np.zeros((n, n), dtype=np.float32)
    for k in range(n):
        adj[k, (k + 1) % n] = adj[(k + 1) % n, k] = 1.0
    return {"loc": ctx.value(C.real_vector, n=n), "correlation": ctx.floats(-0.9, 0.9),
            "conditional_precision": ctx.value(C.positive), "adj_matrix": Raw(adj),
            "is_sparse": False}


def _improper_uniform(ctx: DrawContext) -> dict[str, Any]:
    vector = ctx.pick(st.booleans())
    if vector:
        support = ctx.choice((C.real_vector, C.simplex, C.ordered_vector))
        return {"support": support, "batch_shape": ctx.batch, "event_shape": (ctx.n,)}
    support = ctx.choice((C.real, C.positive, C.unit_interval))
    return {"support": support, "batch_shape": ctx.batch, "event_shape": ()}


def _delta(ctx: DrawContext) -> dict[str, Any]:
    event_dim = ctx.pick(st.integers(0, 1))
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
    "DiscreteUniform": lambda c: {"low": (lo := _ints(c.draw, c.batch, -3, 3, c.dtype)),
                                  "high": lo + _ints(c.draw, c.batch, 0, 4, c.dtype)},
    "DoublyTruncatedPowerLaw": lambda c: {
        "alpha": c.floats(-3.0, 2.0), "low": (lo := c.floats(0.5, 2.0)),
        "high": (lo + c.floats(0.5, 4.0)).astype(c.dtype)},
    "LKJ": lambda c: {"dimension": max(c.n, 2), "concentration": c.value(C.positive),
                      "sample_method": c.choice(("onion", "cvine"))},
    "LKJCholesky": lambda c: {"dimension": max(c.n, 2), "concentration": c.value(C.positive),
                              "sample_method": c.choice(("onion", "cvine"))},
    "GaussianRandomWalk": lambda c: {"scale": c.value(C.positive),
                                     "num_steps": c.pick(st.integers(1, 4))},
    # scale must broadcast to the transformed event shape: batch is always ()
    "ZeroSumNormal": lambda c: {"scale": c.value(C.positive, batch=()),
                                "event_shape": (c.n,) * c.pick(st.integers(1, 2))},
    # total_count is a static (aux) pytree field upstream: a Python int, part of the structure
    "MultinomialProbs": lambda c: {"probs": c.value(C.simplex),
                                   "total_count": c.pick(st.integers(0, 8))},
    "MultinomialLogits": lambda c: {"logits": c.value(C.real_vector),
                                    "total_count": c.pick(st.integers(0, 8))},
    "DirichletMultinomial": lambda c: {"concentration": c.value(C.independent(C.positive, 1)),
                                       "total_count": c.pick(st.integers(0, 8))},
    "TruncatedPolyaGamma": lambda c: {"batch_shape": c.batch},
    "MatrixNormal": lambda c: {
        "loc": c.floats(-FLOAT_BOUND, FLOAT_BOUND, shape=(*c.batch, c.n, 2)),
        "scale_tril_row": c.value(C.lower_cholesky, batch=()),
        "scale_tril_column": c.value(C.lower_cholesky, batch=(), n=2)},
    "LowRankMultivariateNormal": lambda c: {
        "loc": c.value(C.real_vector),
        "cov_factor": c.floats(-1.0, 1.0, shape=(c.n, c.pick(st.integers(1, 2)))),
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

CATALOG_ONLY: dict[str, str] = {
    "TransformedDistribution": "arguments are a base distribution and a list of transforms",
    "MixtureGeneral": "a list of component distributions whose shapes must agree",
    "SineSkewed": "base must be a circular distribution on a torus (SineBivariateVonMises)",
    "GaussianCopula": "a marginal distribution whose icdf works without optional deps",
    "EulerMaruyama": "an SDE function and an initial distribution of matching shape",
    "IntervalCensoredDistribution": "log_prob values are (lower, upper) pairs, not samples",
}
"""Classes drawn from the catalog only (fixed structure, main example or a variant)."""


def draw_mode(cls_or_name: type | str) -> str:
    """``"generic"``, ``"hinted"`` or ``"catalog"``: how :func:`specs` draws this class."""
    name = cls_or_name if isinstance(cls_or_name, str) else cls_or_name.__name__
    if isinstance(cls_or_name, type) and not _is_public(cls_or_name):
        return "generic"
    if name in CATALOG_ONLY:
        return "catalog"
    if name in HINTS:
        return "hinted"
    return "generic"


def _is_public(cls: type) -> bool:
    return getattr(stabledist, cls.__name__, None) is cls or getattr(nd, cls.__name__, None) is cls


# ---------------------------------------------------------------------------------------------
# The spec strategies.
# ---------------------------------------------------------------------------------------------

DEFAULT_EVENT_SIZES: Any = st.sampled_from([2, 3])
FLOAT32: Any = st.just(np.float32)
UNIT_SAMPLE_SHAPES: Any = st.sampled_from([(), (2,)])
CI_BATCH_SHAPES: Any = st.sampled_from([(), (2,)])
"""Batch shapes in the default profile: few distinct shapes keep JAX compilations cached."""

WIDE_BATCH_SHAPES: Any = hnp.array_shapes(min_dims=0, max_dims=2, min_side=1, max_side=3)


@dataclass(frozen=True)
class SpecOptions:
    """How :func:`specs` draws: strategies of batch shapes, event sizes and dtypes."""

    batch_shapes: Any = CI_BATCH_SHAPES
    event_sizes: Any = DEFAULT_EVENT_SIZES
    dtypes: Any = FLOAT32
    params: Mapping[str, Any] | None = None
    allow_catalog: bool = True
    validate_args: bool = True


def specs(
    cls: type | str,
    *,
    batch_shapes: Any = CI_BATCH_SHAPES,
    event_sizes: Any = DEFAULT_EVENT_SIZES,
    dtypes: Any = FLOAT32,
    params: Mapping[str, Any] | None = None,
    allow_catalog: bool = True,
    validate_args: bool = True,
) -> Any:
    """Strategy of :class:`DistSpec` for ``cls`` (a class, or a public name).

    ``params`` overrides how individual constructor arguments are drawn: a value, a
    hypothesis strategy, or a callable ``(DrawContext) -> value`` (use it for a user's
    class whose arguments are not described by ``arg_constraints``). ``dtypes`` may include
    ``np.float64``: such specs must be built and used under ``jax.enable_x64(True)`` (see
    :meth:`DistSpec.x64_context`).
    """
    options = SpecOptions(batch_shapes, event_sizes, dtypes, params, allow_catalog,
                          validate_args)
    return st.composite(lambda draw: _draw_spec(draw, cls, options, Tape()))()


def stacks(cls: type | str, n: int, **kwargs: Any) -> Any:
    """Strategy of ``n`` specs with one structure (same tree, same leaf shapes and statics)
    and independently drawn values: the structural choices of the first are replayed."""
    options = SpecOptions(**kwargs)

    @st.composite
    def strategy(draw: Any) -> list[DistSpec]:
        tape = Tape()
        out = [_draw_spec(draw, cls, options, tape)]
        out += [_draw_spec(draw, cls, options, tape.replay()) for _ in range(n - 1)]
        return out

    return strategy()


def _draw_spec(draw: Any, cls: type | str, options: SpecOptions, tape: Tape) -> DistSpec:
    name = cls if isinstance(cls, str) else cls.__name__
    user_cls = None if (isinstance(cls, str) or _is_public(cls)) else cls
    params = options.params
    dtype = np.dtype(tape.pick(draw, options.dtypes)).type
    x64 = dtype is np.float64
    target = user_cls if user_cls is not None else getattr(stabledist, name)
    if user_cls is None and not params and (
        name in CATALOG_ONLY or (name not in HINTS and not _derivable(target))
    ):
        if not options.allow_catalog:
            raise ValueError(f"{name} can only be drawn from the catalog")
        ids = [i for i, _ in catalog.all_builders() if i.split("[")[0] == name]
        return DistSpec(name, catalog_id=tape.pick(draw, st.sampled_from(ids)), x64=x64,
                        mode="catalog")
    batch = tuple(tape.pick(draw, options.batch_shapes))
    ctx = DrawContext(draw, batch, tape.pick(draw, options.event_sizes), dtype, x64, tape)
    hinted = user_cls is None and name in HINTS and not params
    kwargs = HINTS[name](ctx) if hinted else _generic_kwargs(ctx, target, params or {})
    if options.validate_args and _accepts(target, "validate_args"):
        kwargs["validate_args"] = True
    return DistSpec(name, tuple(kwargs.items()), cls=user_cls, x64=x64,
                    mode="hinted" if hinted else "generic")


def _accepts(target: Any, param: str) -> bool:
    try:
        return param in inspect.signature(target).parameters
    except (TypeError, ValueError):  # pragma: no cover
        return False


def _constructor_params(cls: type) -> list[inspect.Parameter]:
    sig = inspect.signature(cls.__init__)
    return [
        p for p in list(sig.parameters.values())[1:]
        if p.kind not in (p.VAR_POSITIONAL, p.VAR_KEYWORD) and p.name != "validate_args"
    ]


def _derivable(cls: type) -> bool:
    """Whether :func:`_generic_kwargs` can build ``cls`` from ``arg_constraints`` alone."""
    constraints = getattr(cls, "arg_constraints", {})
    for p in _constructor_params(cls):
        c = constraints.get(p.name)
        if c is None and p.default is inspect.Parameter.empty:
            return False
        if c is not None and C.is_dependent(c):
            return False
    return True


def _generic_kwargs(ctx: DrawContext, cls: type, params: Mapping[str, Any]) -> dict[str, Any]:
    constraints = getattr(cls, "arg_constraints", {})
    kwargs: dict[str, Any] = {}
    alternatives: list[str] = []
    first = True
    for p in _constructor_params(cls):
        if p.name in params:
            kwargs[p.name] = _resolve_param(ctx, params[p.name])
            continue
        c = constraints.get(p.name)
        if c is None:
            if p.default is inspect.Parameter.empty:
                raise TypeError(
                    f"cannot draw {cls.__qualname__}({p.name}=...): it has no "
                    "arg_constraints entry and no default; pass params={"
                    f"{p.name!r}: strategy_or_callable}}"
                )
            continue
        if p.default is None:
            alternatives.append(p.name)
            continue
        kwargs[p.name] = _draw_param(ctx, c, full=first)
        first = False
    if alternatives:
        chosen = ctx.choice(alternatives)
        kwargs[chosen] = _draw_param(ctx, constraints[chosen], full=first)
    return kwargs


def _draw_param(ctx: DrawContext, c: C.Constraint, full: bool) -> np.ndarray:
    """A value with the full batch shape (``full``) or a random suffix of it (broadcasts)."""
    if C.is_dependent(c):
        raise NotImplementedError(
            f"parameter with dependent constraint {c!r}: give it a hint or params=..."
        )
    cut = 0 if full else ctx.pick(st.integers(0, len(ctx.batch)))
    value = ctx.value(c, batch=ctx.batch[cut:])
    return value


def _resolve_param(ctx: DrawContext, how: Any) -> Any:
    if isinstance(how, st.SearchStrategy):
        return ctx.draw(how)
    if callable(how):
        return how(ctx)
    return how


def catalog_specs(name: str, x64: bool = False) -> Any:
    """Strategy of the catalog's examples of public class ``name`` (main example first, then
    variants; shrinks to the main example). Fixed structure and values: the examples every
    other test of the suite uses, so their compiled operations are already cached."""
    ids = [i for i, _ in catalog.all_builders() if i.split("[")[0] == name]
    if not ids:
        raise ValueError(f"the catalog has no example of {name!r}")
    return st.sampled_from(ids).map(lambda i: DistSpec(name, catalog_id=i, x64=x64,
                                                       mode="catalog"))


def distributions(cls: type | str, **kwargs: Any) -> Any:
    """Strategy of built stable instances of ``cls`` (see :func:`specs` for options)."""
    return specs(cls, **kwargs).map(lambda s: s.build())


# ---------------------------------------------------------------------------------------------
# Valid values for log_prob / cdf.
# ---------------------------------------------------------------------------------------------


def valid_value(d: Any, key: jax.Array) -> Any:
    """A point where ``d.log_prob`` is defined, of shape ``batch_shape + event_shape``.

    Continuous supports: ``biject_to(support)`` of uniform noise (no sampling, so no costly
    sampler compile). Otherwise ``d.sample(key)``. ``None`` when neither works.
    """
    shape = tuple(d.batch_shape) + tuple(d.event_shape)
    if type(d).__name__ == "IntervalCensoredDistribution":
        lower = valid_value(d.base_dist, key)
        return jnp.stack([lower, lower + 1.0], -1)
    try:
        support = d.support
        if not support.is_discrete:
            t = nd.transforms.biject_to(support)
            u = jax.random.uniform(key, t.inverse_shape(shape), minval=-1.0, maxval=1.0)
            x = t(u)
            if tuple(x.shape) == shape:
                return x
        else:
            x = _discrete_point(support, shape)
            if x is not None:
                return x
    except (NotImplementedError, ImportError, TypeError, ValueError, AttributeError):
        pass
    try:
        x = d.sample(key)
    except UNSUPPORTED:
        return None
    return x if tuple(jnp.shape(x)) == shape else None


def _discrete_point(support: C.Constraint, shape: tuple[int, ...]) -> jax.Array | None:
    """The lower end of a discrete support (no sampling), or ``None`` for other supports."""
    if isinstance(support, C._Boolean):
        return jnp.zeros(shape, jnp.int32)
    if isinstance(support, C._IntegerInterval | C._IntegerGreaterThan):
        low = jnp.asarray(support.lower_bound)  # both include their lower bound
        return jnp.broadcast_to(low, shape).astype(jnp.int32)
    return None


# ---------------------------------------------------------------------------------------------
# Access plans.
# ---------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Step:
    """One access: ``kind`` is ``lazy`` (read property ``arg``) or a method name."""

    kind: str
    arg: Any = None

    def __repr__(self) -> str:
        if self.kind == "lazy":
            return f".{self.arg}"
        if self.kind in ("mean", "variance"):
            return f".{self.kind}"
        if self.arg is None:
            return f".{self.kind}()"
        return f".{self.kind}({self.arg!r})"


@dataclass(frozen=True)
class AccessPlan:
    """A sequence of accesses to one distribution; prints as ``d.a .b() ...``."""

    steps: tuple[Step, ...] = field(default_factory=tuple)

    def _repr_pretty_(self, printer: Any, cycle: bool) -> None:
        printer.text(repr(self))

    def __repr__(self) -> str:
        return "AccessPlan(d" + " ".join(repr(s) for s in self.steps) + ")" if self.steps \
            else "AccessPlan(<nothing>)"

    def run(self, d: Any, key: jax.Array | None = None,
            tolerate_errors: bool = True) -> list[tuple[Step, str]]:
        """Run every step on ``d``; return ``(step, outcome)`` with outcome ``ok``,
        ``unsupported: <Error>`` or (with ``tolerate_errors``) ``error: <Error>``.

        Errors are tolerated by default because numpyro itself raises for some parameter
        combinations (the ``upstream`` property checks that stabledist raises exactly where
        numpyro does); what an access plan checks is that the instance does not change.
        ``AssertionError`` (a derived distribution that is not stable) always propagates."""
        key = jax.random.PRNGKey(0) if key is None else key
        value = None
        outcomes: list[tuple[Step, str]] = []
        for i, step in enumerate(self.steps):
            k = jax.random.fold_in(key, i)
            try:
                if step.kind in ("log_prob", "cdf") and value is None:
                    value = valid_value(d, key)
                    if value is None:
                        raise NotImplementedError("no valid value")
                run_step(d, step, k, value)
            except UNSUPPORTED as e:
                outcomes.append((step, f"unsupported: {type(e).__name__}"))
                continue
            except AssertionError:
                raise
            except Exception as e:  # numpyro's own errors (upstream raises them too)
                if not tolerate_errors:
                    raise
                outcomes.append((step, f"error: {type(e).__name__}: {e}"[:200]))
                continue
            outcomes.append((step, "ok"))
        return outcomes


def run_step(d: Any, step: Step, key: jax.Array, value: Any) -> Any:
    """Perform one :class:`Step` on ``d`` and return its result."""
    kind = step.kind
    if kind == "lazy":
        return getattr(d, step.arg)
    if kind in ("mean", "variance"):
        return getattr(d, kind)
    if kind == "entropy":
        return d.entropy()
    if kind == "sample":
        return d.sample(key, step.arg)
    if kind == "log_prob":
        return d.log_prob(value)
    if kind == "cdf":
        return d.cdf(value)
    if kind == "icdf":
        return d.icdf(jnp.full(d.batch_shape, step.arg, dtype=jnp.result_type(float)))
    if kind == "enumerate_support":
        if not d.has_enumerate_support:
            raise NotImplementedError("no enumerate_support")
        return d.enumerate_support(expand=step.arg)
    if kind == "expand":
        return _checked_derived(d, d.expand(tuple(step.arg) + tuple(d.batch_shape)))
    if kind == "to_event":
        return _checked_derived(d, d.to_event(min(step.arg, len(d.batch_shape))))
    if kind == "mask":
        mask: Any = step.arg if isinstance(step.arg, bool) else (
            jnp.arange(math.prod(d.batch_shape)).reshape(d.batch_shape) % 2 == 0
        )
        return _checked_derived(d, d.mask(mask))
    raise ValueError(f"unknown step {step!r}")  # pragma: no cover


def _checked_derived(d: Any, derived: Any) -> Any:
    """A distribution derived from a stable one must be stable too (and readable)."""
    if stabledist.is_stable(d) and not stabledist.is_stable(derived):
        raise AssertionError(f"{type(derived).__name__} derived from a stable distribution "
                             "is not stable")
    return derived


def full_plan(d: Any) -> AccessPlan:
    """Every lazy property of ``d``, then every method once: the deterministic plan that
    :func:`~stabledist.testing.check.check_stable` runs before random ones."""
    steps = [Step("lazy", n) for n in lazy_names(d)]
    steps += [Step("mean"), Step("variance"), Step("entropy"), Step("log_prob"), Step("cdf"),
              Step("sample", ()), Step("icdf", 0.5), Step("enumerate_support", True),
              Step("expand", (2,)), Step("to_event", 1), Step("mask", "array"),
              Step("mask", False)]
    return AccessPlan(tuple(steps))


METHOD_STEPS: tuple[str, ...] = (
    "mean", "variance", "log_prob", "sample", "cdf", "icdf", "entropy", "enumerate_support",
    "expand", "to_event", "mask",
)


def access_plans(d_or_cls: Any, *, max_steps: int = 8,
                 sample_shapes: Any = UNIT_SAMPLE_SHAPES) -> Any:
    """Strategy of :class:`AccessPlan` for a distribution (instance, class or spec).

    Steps read lazy properties (all of the class's, each possibly several times) and call
    methods; a step that is not defined for the distribution runs as "unsupported".
    """
    target = d_or_cls.build() if isinstance(d_or_cls, DistSpec) else d_or_cls
    names = lazy_names(target)
    steps: list[Any] = [
        st.sampled_from(["mean", "variance", "entropy", "log_prob", "cdf"]).map(Step),
        sample_shapes.map(lambda s: Step("sample", s)),
        st.sampled_from([0.25, 0.5]).map(lambda q: Step("icdf", q)),
        st.booleans().map(lambda e: Step("enumerate_support", e)),
        st.sampled_from([(2,), (1, 2)]).map(lambda s: Step("expand", s)),
        st.integers(0, 2).map(lambda k: Step("to_event", k)),
        st.sampled_from([True, False, "array"]).map(lambda m: Step("mask", m)),
    ]
    @st.composite
    def strategy(draw: Any) -> AccessPlan:
        options = list(steps)
        if names:
            options.insert(0, st.sampled_from(names).map(lambda n: Step("lazy", n)))
        chosen = draw(st.lists(st.one_of(options), max_size=max_steps))
        return AccessPlan(tuple(chosen))

    return strategy()
