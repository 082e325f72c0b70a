"""Mirrors: the stable class of every numpyro class (made on first request), stable copies of
numpyro instances, and what every construction of a stable class finishes.

A stable class ``S`` mirrors numpyro class ``N``: ``S.__bases__`` are the stable mirrors of
``N``'s bases followed by ``N`` itself, so ``isinstance(stabledist.LogNormal(0, 1), X)`` holds
for ``X`` = ``numpyro.distributions.LogNormal`` and for ``stabledist.TransformedDistribution``.
`stable_class` makes ``S`` with the metaclass of the root mirror (``stabledist.Distribution``,
the mirror of numpyro's ``Distribution``), whose ``__init_subclass__`` registers it
(`stabledist._src.construction.describe.register`); `make_stable` does the same for a user's
numpyro-style class.

After every construction (`stabledist._src.construction.base.StableMeta`) the new instance is
finished: each numpyro distribution it holds (numpyro builds inner distributions from its own
module globals: ``LogNormal``'s base ``Normal``, ``.to_event()``'s ``Independent``) is replaced
by a stable copy with the same state, never mutating an object a user passed in
(`stabilize_children`); a lazy value its constructor stored in ``__dict__`` is given to the
cache, so the tree is the same whatever the constructor was given (`finish_construction`).
Numbers are untouched: every method that runs is numpyro's own.
"""

from __future__ import annotations

import functools
import threading
from collections.abc import Callable, Mapping
from typing import Any, TypeVar, cast

import jax
from numpyro.distributions.distribution import Distribution as _NumpyroDistribution

from stabledist._src.construction.describe import is_fork_base
from stabledist._src.construction.user_classes import lint, warn_undeclared, watches
from stabledist._src.lazy import CACHE, is_numpyro_class
from stabledist._src.pytrees import pytree_of, settled
from stabledist._src.records import (
    StaticPredicate,
    is_stable_class,
    mirror_of,
    record_of,
    replace_held_in,
)

__all__ = ["finish_construction", "make_stable", "stabilize", "stabilize_children",
           "stable_class", "upstream_class", "wrap_factory"]

D = TypeVar("D", bound=type)

_making = threading.RLock()  # one thread makes a mirror (and its bases' mirrors) at a time


def stable_class(cls: type[Any], extra: dict[str, Any] | None = None) -> type[Any]:
    """The stable subclass of a numpyro (or user) distribution class, made on first request.

    ``extra``: class attributes of the stable subclass only, such as `make_stable`'s hybrid
    fields; ``cls`` itself is never changed."""
    if is_stable_class(cls):
        return cls
    if not (isinstance(cls, type) and issubclass(cls, _NumpyroDistribution)):
        raise TypeError(f"{cls!r} is not a numpyro Distribution subclass")
    mirror = mirror_of(cls)
    if mirror is not None:
        return mirror
    with _making:
        mirror = mirror_of(cls)
        if mirror is None:
            root = mirror_of(_NumpyroDistribution)  # stabledist.Distribution
            meta: Any = type(root)
            bases = tuple(stable_class(b) for b in cls.__bases__
                          if issubclass(b, _NumpyroDistribution) and b is not _NumpyroDistribution)
            module = cls.__module__
            if is_numpyro_class(cls):
                module = "stabledist." + module.rpartition(".")[2]
            namespace = {"__module__": module, "__qualname__": cls.__qualname__,
                         "__doc__": cls.__doc__, **(extra or {})}
            # the class statement's equivalent: registered by the root's __init_subclass__
            mirror = meta(cls.__name__, (*(bases or (root,)), cls), namespace, source=cls)
    return mirror


def make_stable(cls: D, *, hybrid: Mapping[str, StaticPredicate] | None = None) -> D:
    """Return the stable subclass of a user's numpyro ``Distribution`` subclass.

    Use it as a decorator (``@stabledist.make_stable``) or a call. The result has the same
    constructor, is a subclass of ``cls``, caches ``lazy_property`` values externally and has
    a stable pytree: built from ``pytree_data_fields`` / ``pytree_aux_fields`` (or
    ``arg_constraints``) with key paths, or the class's own ``tree_flatten`` /
    ``tree_unflatten`` if it defines them. ``hybrid`` names fields that are static when
    ``test(d, value)``. Subclasses of `stabledist.Distribution` are stable already.
    """
    if not (isinstance(cls, type) and issubclass(cls, _NumpyroDistribution)):
        raise TypeError(f"make_stable expects a numpyro Distribution subclass, got {cls!r}")
    if hybrid and (is_stable_class(cls) or mirror_of(cls) is not None):
        raise TypeError(f"{cls.__qualname__} is already stable; declare hybrid fields "
                        "as the class attribute pytree_hybrid_fields instead")
    stable = stable_class(cls, {"pytree_hybrid_fields": dict(hybrid)} if hybrid else None)
    lint(stable)
    return cast(D, stable)


def upstream_class(cls: type) -> type:
    """The class a stable class mirrors (numpyro's or a user's); ``cls`` if it is not stable.
    A user's subclass of a stable class mirrors nothing itself: its first non-stable base."""
    if not is_stable_class(cls):
        return cls
    source = record_of(cls).source
    if source is not cls:
        return source
    for base in cls.__mro__:
        if issubclass(base, _NumpyroDistribution) and not is_stable_class(base) \
                and not is_fork_base(base):
            return base
    raise TypeError(f"{cls!r} mirrors no class")  # pragma: no cover - mirrors have a base


def stabilize(value: Any) -> Any:
    """Return a stable version of ``value``: a distribution, or any pytree holding some.

    ``value`` may be a distribution or a list, tuple, dict, ... of them. A numpyro
    distribution is copied (same state) into its stable class, with the batch shape a round
    trip gives it (a numpyro distribution out of ``vmap`` is batched); stable distributions
    and everything else come back as they are, and ``value`` itself when it holds no numpyro
    distribution."""
    if isinstance(value, _NumpyroDistribution):
        return value if is_stable_class(type(value)) else _stable_copy(value)
    leaves, treedef = jax.tree_util.tree_flatten(value, is_leaf=_is_distribution)
    if not any(_is_distribution(x) and not is_stable_class(type(x)) for x in leaves):
        return value
    return treedef.unflatten([stabilize(x) if _is_distribution(x) else x for x in leaves])


def _is_distribution(value: Any) -> bool:
    return isinstance(value, _NumpyroDistribution)


def _stable_copy(value: Any) -> Any:
    cls = stable_class(type(value))
    copy = cast(Any, cls).__new__(cls)
    vars(copy).update(vars(value))
    stabilize_children(copy, settled)
    pytree_of(cls).set_batch_from_leaves(copy)  # the batch shape a round trip gives it
    _finish_copy(copy)
    return copy


def stabilize_children(d: Any, batched: Callable[[Any], Any]) -> None:
    """Replace the numpyro distributions ``d`` holds by stable copies (`stabilize`: with the
    batch shapes a round trip gives them), and stable ones by ``batched(child)``: `restored`
    after a stable constructor (what its own tree maps derived gets numpyro's shape back),
    `settled` for a numpyro-built object being stabilized. Hot: every construction."""
    def stable(child: Any) -> Any:
        return batched(child) if is_stable_class(type(child)) else stabilize(child)

    replace_held_in(d, stable)


def finish_construction(d: Any) -> None:
    """What every construction ends with (hot): its constructor's values for lazy properties
    reached the cache through their setters; ``d.__dict__`` is only looked at for a class
    `make_stable` made (its undeclared attributes are reported): reading it would give every
    instance a dict object for good."""
    if watches(type(d)):
        warn_undeclared(type(d), d, record_of(type(d)))


def _finish_copy(d: Any) -> None:
    """`finish_construction` of a copy of a numpyro instance: the lazy values numpyro stored in
    its ``__dict__`` (its constructor's, or read since) are given to the cache first."""
    record = record_of(type(d))
    state = d.__dict__
    for name in state.keys() & record.lazy:
        CACHE.give(d, name, state.pop(name))
    finish_construction(d)


def wrap_factory(factory: Callable[..., Any]) -> Callable[..., Any]:
    """``factory`` returning stable distributions, same signature and docs."""

    @functools.wraps(factory)
    def stable_factory(*args: Any, **kwargs: Any) -> Any:
        return stabilize(factory(*args, **kwargs))

    stable_factory.__module__ = "stabledist"
    return stable_factory
