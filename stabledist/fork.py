"""The fork: a stable subclass for every numpyro distribution class, made at import.

A stable class ``S`` mirrors numpyro class ``N``: ``S.__bases__`` are the stable mirrors of
``N``'s bases followed by ``N`` itself, so ``isinstance(stabledist.LogNormal(0, 1), X)`` holds
for ``X`` = ``numpyro.distributions.LogNormal`` and for ``stabledist.TransformedDistribution``.
Creating ``S`` (see `Distribution.__init_subclass__`):

* replaces every numpyro ``lazy_property`` visible on ``S`` by a
  `stabledist.cache.cached_lazy_property` over the same function;
* computes the class's `stabledist.pytree.FieldTable` once and registers ``S`` with
  JAX with key paths.

numpyro builds inner distributions (``LogNormal``'s base ``Normal``, ``StudentT``'s ``Chi2``,
``.to_event()``'s ``Independent``) from its own module globals, so after every construction
the new instance *adopts* them: each numpyro distribution it holds is replaced by a stable
copy with the same ``__dict__`` (never mutating an object a user passed in). Numbers are
untouched: every method that runs is numpyro's own.
"""

from __future__ import annotations

import inspect
import threading
import warnings
from collections.abc import Callable, Mapping, Sequence
from typing import Any, TypeVar, cast

import numpyro.distributions as _nd
from numpyro.distributions.distribution import Distribution as _NumpyroDistribution
from numpyro.distributions.distribution import DistributionMeta
from numpyro.distributions.util import lazy_property

from stabledist.cache import CACHE, cached_lazy_property
from stabledist.known_classes import EXTRA_FIELDS, HYBRID_FIELDS
from stabledist.pytree import StaticTest, field_table, register

__all__ = ["Distribution", "is_stable", "make_stable", "stabilize", "stable_class"]

D = TypeVar("D", bound=type)

_GENERATED = "__stable_generated__"  # names a stable class's namespace holds only by resolution
_mirrors: dict[type, type] = {}  # numpyro (or user) class -> its stable subclass
_mirrors_lock = threading.RLock()


class StableMeta(DistributionMeta):
    """After numpyro's constructor ran, the new instance adopts the distributions it holds."""

    def __call__(cls, *args: Any, **kwargs: Any) -> Any:  # noqa: N805 - a metaclass
        instance = super().__call__(*args, **kwargs)
        if isinstance(instance, Distribution):
            _adopt_children(instance)
            if not instance.__dict__.keys() <= cls.__stable_names__:
                _warn_undeclared(cls, instance)
        return instance


_warned: set[type] = set()


def _warn_undeclared(cls: type, instance: Any) -> None:
    """Once per class: attributes outside the field table do not survive tree_unflatten."""
    if cls in _warned:
        return
    _warned.add(cls)
    extra = sorted(instance.__dict__.keys() - cls.__stable_names__)
    warnings.warn(
        f"{cls.__qualname__} sets attribute(s) {extra} that are not pytree fields, so "
        "tree_unflatten (jit, vmap, scan, ...) drops them; declare them in "
        "pytree_data_fields (arrays, distributions) or pytree_aux_fields (static values)",
        UserWarning,
        stacklevel=3,
    )


def _build_stable_class(cls: type) -> None:
    """Make ``cls`` (a new subclass of `Distribution`) stable: lazy values to the
    cache, field table computed once, pytree registered with key paths."""
    _check_coverable(cls)
    generated: set[str] = set()
    lazy_names = {
        name
        for base in cls.__mro__
        for name, attr in vars(base).items()
        if isinstance(attr, lazy_property)
    }
    for name in sorted(lazy_names):
        owner, attr = _resolve(cls, name)
        if isinstance(attr, lazy_property) and not isinstance(attr, cached_lazy_property):
            setattr(cls, name, cached_lazy_property(attr.wrapped, name))
            generated.add(name)
        elif owner is not cls:
            # a plain attribute overrides a lazy one further up: restore its precedence over
            # the cached_lazy_property that a stable base generated for that name
            setattr(cls, name, attr)
            generated.add(name)
    setattr(cls, _GENERATED, frozenset(generated))
    hybrid: dict[str, StaticTest] = {}
    extra: dict[str, list[str]] = {"data": [], "aux": [], "list_aux": []}
    for base in reversed(cls.__mro__):
        if _is_numpyro(base):
            hybrid.update(HYBRID_FIELDS.get(base.__name__, {}))
            for kind, names in EXTRA_FIELDS.get(base.__name__, {}).items():
                extra[kind].extend(names)
        hybrid.update(vars(base).get("pytree_hybrid_fields", {}))
    table = field_table(cls, hybrid, extra["data"], extra["aux"], extra["list_aux"])
    register(cls, table)
    cls.__stable_names__ = frozenset((*table.data, *table.aux))


def _resolve(cls: type, name: str) -> tuple[type, Any]:
    """The attribute ``name`` of ``cls`` ignoring what stable classes only re-exposed."""
    for base in cls.__mro__:
        if name in vars(base) and name not in vars(base).get(_GENERATED, ()):
            return base, vars(base)[name]
    raise AttributeError(name)  # pragma: no cover - names come from the MRO


def _is_numpyro(cls: type) -> bool:
    return cls.__module__.startswith("numpyro.")


def _check_coverable(cls: type) -> None:
    """Fail loudly for a class whose pytree stabledist cannot derive from its declarations."""
    for base in cls.__mro__:
        if base is _NumpyroDistribution or not issubclass(base, _NumpyroDistribution):
            continue
        if _GENERATED in vars(base):  # stable already
            continue
        custom = {"tree_flatten", "tree_unflatten"} & set(vars(base))
        known = _is_numpyro(base) and base.__name__ in HYBRID_FIELDS
        if custom and not known and "pytree_hybrid_fields" not in vars(base):
            raise TypeError(
                f"{base.__module__}.{base.__qualname__} defines its own "
                f"{'/'.join(sorted(custom))}; stabledist derives pytrees from "
                "pytree_data_fields / pytree_aux_fields and cannot keep that one stable. "
                "Declare the fields instead (and pytree_hybrid_fields for fields that are "
                "sometimes static), or report this if it is a numpyro class new to stabledist."
            )


def stable_class(cls: type[Any]) -> type[Any]:
    """The stable subclass of a numpyro (or user) distribution class, made on first request."""
    if issubclass(cls, Distribution):
        return cls
    if not issubclass(cls, _NumpyroDistribution):
        raise TypeError(f"{cls!r} is not a numpyro Distribution subclass")
    mirror = _mirrors.get(cls)
    if mirror is not None:
        return mirror
    with _mirrors_lock:
        mirror = _mirrors.get(cls)
        if mirror is None:
            bases = tuple(
                stable_class(b)
                for b in cls.__bases__
                if issubclass(b, _NumpyroDistribution) and b is not _NumpyroDistribution
            )
            bases = bases or (Distribution,)
            module = cls.__module__
            if _is_numpyro(cls):
                module = "stabledist." + module.rpartition(".")[2]
            namespace = {
                "__module__": module,
                "__qualname__": cls.__qualname__,
                "__doc__": cls.__doc__,
            }
            mirror = StableMeta(cls.__name__, (*bases, cls), namespace)
            _mirrors[cls] = mirror
    return mirror


def make_stable(cls: D, *, hybrid: Mapping[str, StaticTest] | None = None) -> D:
    """Return the stable subclass of a user's numpyro ``Distribution`` subclass.

    Use it as a decorator (``@stabledist.make_stable``) or a call. The result has the same
    constructor, is a subclass of ``cls``, caches ``lazy_property`` values externally and has
    a stable, key-path pytree built from ``pytree_data_fields`` / ``pytree_aux_fields`` (or
    ``arg_constraints``). ``hybrid`` names fields that are static when ``test(d, value)``.
    Subclasses of `stabledist.Distribution` are stable already.
    """
    if not (isinstance(cls, type) and issubclass(cls, _NumpyroDistribution)):
        raise TypeError(f"make_stable expects a numpyro Distribution subclass, got {cls!r}")
    if hybrid:
        if issubclass(cls, Distribution) or cls in _mirrors:
            raise TypeError(f"{cls.__qualname__} is already stable; declare hybrid fields "
                            "as the class attribute pytree_hybrid_fields instead")
        cls.pytree_hybrid_fields = dict(hybrid)  # type: ignore[attr-defined]
    return cast(D, stable_class(cls))


def is_stable(d: object) -> bool:
    """Whether ``d`` is a stable distribution (instance) or class."""
    return isinstance(d, Distribution) or (isinstance(d, type) and issubclass(d, Distribution))


def stabilize(value: Any) -> Any:
    """A stable version of ``value``: stable distributions and non-distributions unchanged,
    a numpyro distribution copied (same ``__dict__``) into its stable class, lists and tuples
    of distributions stabilized element-wise."""
    if isinstance(value, _NumpyroDistribution):
        if isinstance(value, Distribution):
            return value
        cls = stable_class(type(value))
        copy = cls.__new__(cls)
        state = copy.__dict__
        state.update(value.__dict__)
        for name in state.keys() - cls.__stable_names__:
            # a value numpyro's lazy_property cached before we got the instance: to the cache
            if isinstance(getattr(cls, name, None), cached_lazy_property):
                CACHE.adopt(copy, name, state.pop(name))
        _adopt_children(copy)
        return copy
    if type(value) in (list, tuple) and any(isinstance(v, _NumpyroDistribution) for v in value):
        return type(value)(stabilize(v) for v in value)
    return value


def _adopt_children(d: Distribution) -> None:
    """Replace the numpyro distributions ``d`` holds by stable copies (hot: every construction)."""
    state = d.__dict__
    for name, value in state.items():
        if isinstance(value, _NumpyroDistribution):
            if not isinstance(value, Distribution):
                state[name] = stabilize(value)
        elif type(value) in _SEQUENCES and value and not isinstance(value[0], int):
            stable = stabilize(value)  # shapes are tuples of ints: skipped above
            if stable is not value:
                state[name] = stable


_SEQUENCES = (list, tuple)


def mirror_all() -> dict[str, type]:
    """Stable mirrors of every numpyro distribution class, keyed by name (public first)."""
    found: dict[str, type] = {}
    pending: list[type] = [_NumpyroDistribution]
    seen: set[type] = set()
    while pending:
        cls = pending.pop()
        for sub in cls.__subclasses__():
            if sub not in seen and _is_numpyro(sub) and sub.__module__.startswith(
                "numpyro.distributions"
            ):
                seen.add(sub)
                pending.append(sub)
    found["Distribution"] = Distribution
    _mirrors[_NumpyroDistribution] = Distribution
    for cls in sorted(seen, key=lambda c: (c.__module__, c.__qualname__)):
        found.setdefault(cls.__name__, stable_class(cls))
    return found


def is_factory_name(name: str) -> bool:
    """Public callables of numpyro.distributions that build distributions but are not classes."""
    obj = getattr(_nd, name)
    return (
        callable(obj)
        and not inspect.isclass(obj)
        and not inspect.ismodule(obj)
        and name not in NOT_FACTORIES
    )


NOT_FACTORIES = frozenset({"biject_to", "kl_divergence"})


def wrap_factory(factory: Callable[..., Any]) -> Callable[..., Any]:
    """``factory`` returning stable distributions, same signature and docs."""
    import functools

    @functools.wraps(factory)
    def stable_factory(*args: Any, **kwargs: Any) -> Any:
        return stabilize(factory(*args, **kwargs))

    stable_factory.__module__ = "stabledist"
    return stable_factory


class _SkipNumpyroRegistration(_NumpyroDistribution):
    """Stops numpyro's ``__init_subclass__`` (an MRO-walking, set-ordered pytree registration)
    for every class below, which `Distribution` registers itself."""

    def __init_subclass__(cls, **kwargs: Any) -> None:
        object.__init_subclass__(**kwargs)
        _build_stable_class(cls)


class Distribution(_SkipNumpyroRegistration, _NumpyroDistribution, metaclass=StableMeta):
    """Base of every stable distribution; subclass it as you would numpyro's ``Distribution``.

    Overrides only what returns new distributions, so that they are stable too.
    """

    def expand(self, batch_shape: Sequence[int]) -> _NumpyroDistribution:
        return stabilize(super().expand(batch_shape))

    def expand_by(self, sample_shape: Sequence[int]) -> _NumpyroDistribution:
        return stabilize(super().expand_by(sample_shape))

    def to_event(self, reinterpreted_batch_ndims: int | None = None) -> _NumpyroDistribution:
        return stabilize(super().to_event(reinterpreted_batch_ndims))

    def mask(self, mask: Any) -> _NumpyroDistribution:
        return stabilize(super().mask(mask))
