"""Hypothesis strategies: distributions drawn from their `arg_constraints` (`specs`,
`distributions`, `stacks`, `catalog_specs`), constraint values (`constraint_values`) and access
plans (`access_plans`).

How a class's arguments are drawn (`draw_mode`):

- `generic`: derived from the class. Each constructor parameter that has an `arg_constraints`
  entry gets a value from `constraint_values` (`biject_to` of a moderate unconstrained draw);
  several optional (`None`-default) constrained parameters are alternative parametrizations,
  of which exactly one is drawn. Works for users' classes too.
- `hinted`: the class's catalog record has a ``hint`` (`stabledist.testing._hints`): how
  parameters depend on each other or on arguments that have no constraint.
- `catalog`: a fixed-structure example from `stabledist.testing.catalog`, for the classes whose
  record says ``catalog_only`` (arguments that are functions, transforms or lists of
  distributions).
"""

from __future__ import annotations

import inspect
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import hypothesis.extra.numpy as hnp
import numpy as np
import numpyro.distributions as nd
from hypothesis import strategies as st
from numpyro.distributions import constraints as C  # noqa: N812 - constraint namespace

import stabledist
from stabledist._src.lazy import lazy_names
from stabledist.testing import catalog
from stabledist.testing._catalog_entries import entry_of
from stabledist.testing._constraints import constrained_value
from stabledist.testing._plans import AccessPlan, Step
from stabledist.testing._spec import ARG_KINDS, ArgStyle, DistSpec, Raw

__all__ = [
    "ARG_STYLES",
    "DrawContext",
    "access_plans",
    "catalog_specs",
    "constraint_values",
    "distributions",
    "draw_mode",
    "specs",
    "stacks",
]


def _floats(draw: Any, shape: tuple[int, ...], lo: float, hi: float, dtype: Any) -> np.ndarray:
    width = 64 if np.dtype(dtype) == np.float64 else 32
    if width == 32:  # bounds must be float32 numbers, inside [lo, hi]
        lo = float(np.nextafter(np.float32(lo), np.float32(np.inf))) if float(
            np.float32(lo)) < lo else float(np.float32(lo))
        hi = float(np.nextafter(np.float32(hi), np.float32(-np.inf))) if float(
            np.float32(hi)) > hi else float(np.float32(hi))
    elements = st.floats(lo, hi, width=width, allow_nan=False, allow_subnormal=False)
    if width == 64 and lo <= 0.0 <= hi:  # without x64, JAX casts a float64 draw to float32
        elements = elements.map(_normal_in_float32)
    return draw(hnp.arrays(np.dtype(dtype), shape, elements=elements))


_FLOAT32_TINY = float(np.finfo(np.float32).tiny)


def _normal_in_float32(x: float) -> float:
    """0 for a float64 that is a float32 subnormal (or would round to one): XLA's compiled
    CPU code flushes those to zero (even a ``pmap`` of the identity returns 0 for numpyro's
    own classes), so a leaf of 1e-45 passed through a transformation is not the leaf that went
    in, for reasons that are XLA's, not stabledist's."""
    return 0.0 if abs(x) < _FLOAT32_TINY else x


def _ints(draw: Any, shape: tuple[int, ...], lo: int, hi: int,
          like: Any = np.float32) -> np.ndarray:
    """Integer counts, int64 beside float64 parameters (what ``jnp`` makes under x64: numpyro's
    binomial sampler fails on int32 counts with float64 probabilities)."""
    dtype = np.int64 if np.dtype(like) == np.float64 else np.int32
    return draw(hnp.arrays(dtype, shape, elements=st.integers(lo, hi)))


def constraint_values(
    draw: Any,
    constraint: C.Constraint,
    batch: tuple[int, ...],
    n: int,
    dtype: Any = np.float32,
) -> np.ndarray:
    """Draw an array in ``constraint`` with batch shape ``batch`` and event size ``n``.

    ``draw`` is hypothesis's draw function (call this inside a `st.composite`). Continuous
    values are `biject_to(constraint)` of a moderate unconstrained draw (see
    `stabledist.testing._constraints`). Raises `NotImplementedError` for constraints whose
    values depend on other parameters (``dependent``), so callers can fall back to a hint.
    """
    return constrained_value(
        constraint, tuple(batch), n, dtype,
        floats=lambda shape, lo, hi: _floats(draw, shape, lo, hi, np.float64),
        ints=lambda shape, lo, hi: _ints(draw, shape, lo, hi, dtype),
    )


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
        """One of ``options`` (a structural choice: recorded on the tape)."""
        return self.pick(st.sampled_from(list(options)))

    def integers(self, lo: int, hi: int) -> int:
        """A structural integer in ``[lo, hi]`` (recorded on the tape)."""
        return self.pick(st.integers(lo, hi))

    def boolean(self) -> bool:
        """A structural boolean (recorded on the tape)."""
        return self.pick(st.booleans())

    def ints(self, lo: int, hi: int, shape: tuple[int, ...] | None = None) -> np.ndarray:
        """Integer values in ``[lo, hi]`` (int64 beside float64 parameters)."""
        return _ints(self.draw, self.batch if shape is None else shape, lo, hi, self.dtype)

    def sub(self, name: str, batch: tuple[int, ...] | None = None) -> DistSpec:
        """A nested spec of public class ``name`` with this context's dtype and event size."""
        batch = self.batch if batch is None else batch
        options = SpecOptions(st.just(batch), st.just(self.n), st.just(self.dtype),
                              allow_catalog=False)
        return _draw_spec(self.draw, name, options, self.tape)

    def spec(self, name: str, args: dict[str, Any]) -> DistSpec:
        """A nested spec of public class ``name`` with exactly these arguments."""
        return DistSpec(name, tuple(args.items()), x64=self.x64, mode="generic")

    def raw(self, value: Any) -> Raw:
        """An argument the constructor gets as is (not converted to a JAX array)."""
        return Raw(value)


def draw_mode(cls_or_name: type | str) -> str:
    """``"generic"``, ``"hinted"`` or ``"catalog"``: how :func:`specs` draws this class."""
    name = cls_or_name if isinstance(cls_or_name, str) else cls_or_name.__name__
    if isinstance(cls_or_name, type) and not _is_public(cls_or_name):
        return "generic"
    entry = entry_of(name)
    if entry.catalog_only:
        return "catalog"
    if entry.hint is not None:
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

ARG_STYLES: Any = st.builds(
    ArgStyle,
    kinds=st.lists(st.sampled_from(ARG_KINDS), min_size=1, max_size=3).map(tuple),
    validate_args=st.sampled_from([None, True, False]),
)
"""How a user passes the arguments (`ArgStyle`): a kind per array argument (Python numbers,
NumPy scalars and arrays, ``jnp`` arrays, mixed) and ``validate_args`` passed or not. The
simplest draw (what a one-example profile gets) is the most common user code: Python numbers
(NumPy arrays where not 0-d) and no ``validate_args``."""


@dataclass(frozen=True)
class SpecOptions:
    """How :func:`specs` draws: strategies of batch shapes, event sizes and dtypes."""

    batch_shapes: Any = CI_BATCH_SHAPES
    event_sizes: Any = DEFAULT_EVENT_SIZES
    dtypes: Any = FLOAT32
    params: Mapping[str, Any] | None = None
    allow_catalog: bool = True
    validate_args: bool | None = None
    styles: Any = ARG_STYLES


def specs(
    cls: type | str,
    *,
    batch_shapes: Any = CI_BATCH_SHAPES,
    event_sizes: Any = DEFAULT_EVENT_SIZES,
    dtypes: Any = FLOAT32,
    params: Mapping[str, Any] | None = None,
    allow_catalog: bool = True,
    validate_args: bool | None = None,
    styles: Any = ARG_STYLES,
) -> Any:
    """Strategy of `DistSpec` for ``cls`` (a class, or a public name).

    ``params`` overrides how individual constructor arguments are drawn: a value, a
    hypothesis strategy, or a callable ``(DrawContext) -> value`` (use it for a user's
    class whose arguments are not described by ``arg_constraints``). ``dtypes`` may include
    ``np.float64``: such specs must be built and used under ``jax.enable_x64(True)`` (see
    `DistSpec.x64_context`). ``styles`` draws how the arguments are passed (`ArgStyle`:
    Python numbers, NumPy scalars and arrays, ``jnp`` arrays; ``validate_args`` passed or
    not); ``validate_args`` (``True``/``False``) overrides the style's.
    """
    options = SpecOptions(batch_shapes, event_sizes, dtypes, params, allow_catalog,
                          validate_args, styles)
    return st.composite(lambda draw: _draw_spec(draw, cls, options, Tape()))()


def stacks(cls: type | str, n: int, **kwargs: Any) -> Any:
    """Strategy of lists of ``n`` `DistSpec`s with one structure and independent values.

    Same tree, same leaf shapes and statics, independently drawn values: the structural
    choices of the first are replayed."""
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
    style = _style(tape.pick(draw, options.styles), options.validate_args)
    entry = entry_of(name)
    if user_cls is None and not params and (
        entry.catalog_only or (entry.hint is None and not _derivable(target))
    ):
        if not options.allow_catalog:
            raise ValueError(f"{name} can only be drawn from the catalog")
        ids = [i for i, _ in catalog.all_builders() if i.split("[")[0] == name]
        return DistSpec(name, catalog_id=tape.pick(draw, st.sampled_from(ids)), x64=x64,
                        mode="catalog", style=style)
    batch = tuple(tape.pick(draw, options.batch_shapes))
    ctx = DrawContext(draw, batch, tape.pick(draw, options.event_sizes), dtype, x64, tape)
    hint = entry.hint if user_cls is None and not params else None
    kwargs = hint(ctx) if hint is not None else _generic_kwargs(ctx, target, params or {})
    return DistSpec(name, tuple(kwargs.items()), cls=user_cls, x64=x64,
                    mode="generic" if hint is None else "hinted", style=style)


def _style(drawn: ArgStyle | None, validate_args: bool | None) -> ArgStyle | None:
    """The drawn style, ``validate_args`` overridden when the caller fixed it."""
    if drawn is None or validate_args is None:
        return drawn
    return ArgStyle(drawn.kinds, validate_args)


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
        kwargs[p.name] = _draw_param(ctx, cls, p.name, c, full=first)
        first = False
    if alternatives:
        chosen = ctx.choice(alternatives)
        kwargs[chosen] = _draw_param(ctx, cls, chosen, constraints[chosen], full=first)
    return kwargs


def _draw_param(ctx: DrawContext, cls: type, name: str, c: C.Constraint,
                full: bool) -> np.ndarray:
    """A value with the full batch shape (``full``) or a random suffix of it (broadcasts);
    a constraint with no values to draw (a dependent one) raises, naming what to pass."""
    try:
        if C.is_dependent(c):
            raise NotImplementedError(f"its values depend on other parameters ({c!r})")
        cut = 0 if full else ctx.pick(st.integers(0, len(ctx.batch)))
        return ctx.value(c, batch=ctx.batch[cut:])
    except NotImplementedError as e:
        raise TypeError(
            f"cannot draw {cls.__qualname__}({name}=...): its constraint has no values to "
            f"draw from ({e}); pass params={{{name!r}: strategy_or_callable}}") from None


def _resolve_param(ctx: DrawContext, how: Any) -> Any:
    if isinstance(how, st.SearchStrategy):
        return ctx.draw(how)
    if callable(how):
        return how(ctx)
    return how


def catalog_specs(name: str, x64: bool = False, styles: Any = ARG_STYLES) -> Any:
    """Strategy of `DistSpec`s of the catalog's examples of the public class ``name``.

    The main example first, then its variants (it shrinks to the main example), with their
    arguments passed in a drawn
    `ArgStyle` (``styles``; ``st.none()``: as the catalog writes them, ``jnp`` arrays and
    ``validate_args=True``). Fixed structure and values: the examples every other test of the
    suite uses, so their compiled operations are already cached."""
    ids = [i for i, _ in catalog.all_builders() if i.split("[")[0] == name]
    if not ids:
        raise ValueError(f"the catalog has no example of {name!r}")
    return st.tuples(st.sampled_from(ids), styles).map(
        lambda x: DistSpec(name, catalog_id=x[0], x64=x64, mode="catalog", style=x[1]))


def distributions(cls: type | str, **kwargs: Any) -> Any:
    """Strategy of built stable instances of ``cls`` (see `specs` for options)."""
    return specs(cls, **kwargs).map(lambda s: s.build())


# ---------------------------------------------------------------------------------------------
# Access plans.
# ---------------------------------------------------------------------------------------------


def access_plans(d_or_cls: Any, *, max_steps: int = 8,
                 sample_shapes: Any = UNIT_SAMPLE_SHAPES) -> Any:
    """Strategy of `AccessPlan` for a distribution (instance, class or spec).

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
