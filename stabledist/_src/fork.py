"""The fork: a stable subclass for every numpyro distribution class, made at import.

A stable class ``S`` mirrors numpyro class ``N``: ``S.__bases__`` are the stable mirrors of
``N``'s bases followed by ``N`` itself, so ``isinstance(stabledist.LogNormal(0, 1), X)`` holds
for ``X`` = ``numpyro.distributions.LogNormal`` and for ``stabledist.TransformedDistribution``.
Creating ``S`` (see `Distribution.__init_subclass__`):

* replaces every numpyro ``lazy_property`` visible on ``S`` by a
  `stabledist._src.cache.cached_lazy_property` over the same function, and adds the derived
  attributes of `stabledist._src.quirks.DERIVED_ATTRIBUTES` as lazy properties;
* computes the class's `stabledist._src.pytree.FieldTable` once and registers ``S`` with JAX with
  key paths (or with the class's own ``tree_flatten`` when a user wrote one).

After every construction the new instance is *settled*: a lazy value its constructor stored
(an alternative parametrization such as ``covariance_matrix=``) moves from ``__dict__`` to the
cache as a seeded value, so the tree is the same whatever the constructor was given; and each
numpyro distribution it holds (numpyro builds inner distributions from its own module globals:
``LogNormal``'s base ``Normal``, ``.to_event()``'s ``Independent``) is replaced by a stable
copy with the same state, never mutating an object a user passed in. Numbers are untouched:
every method that runs is numpyro's own.

Per-class state lives in registries keyed weakly by class (here and in `stabledist._src.pytree`),
never in attributes of the classes.
"""

from __future__ import annotations

import functools
import os
import sys
import threading
import warnings
import weakref
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, TypeVar, cast

import jax
import numpyro
from numpyro.distributions.distribution import Distribution as _NumpyroDistribution
from numpyro.distributions.distribution import DistributionMeta, MaskedDistribution
from numpyro.distributions.util import lazy_property

from stabledist._src.batching import (
    CONSTRUCTING,
    DERIVED_ALIVE,
    batch_rule,
    restored_batch,
    settled,
    settled_arguments,
    settled_value,
)
from stabledist._src.cache import CACHE, cached_lazy_property
from stabledist._src.export import register_serialization  # jax.export hook (export.py)
from stabledist._src.introspect import is_numpyro_class
from stabledist._src.pytree import StaticPredicate, field_table, pytree_of, register
from stabledist._src.quirks import DERIVED_ATTRIBUTES, EXTRA_FIELDS, HYBRID_FIELDS
from stabledist._src.slicing import getitem

__all__ = ["Distribution", "is_stable", "make_stable", "stabilize", "stable_class",
           "upstream_class"]

D = TypeVar("D", bound=type)

_mirrors: dict[type, type] = {}  # numpyro (or user) class -> its stable subclass
_sources: weakref.WeakKeyDictionary[type, type] = weakref.WeakKeyDictionary()  # the reverse
_mirrors_lock = threading.RLock()


@dataclass(frozen=True)
class _ClassInfo:
    """What the fork computed once for a stable class."""

    names: frozenset[str]  # data and aux fields: what an instance's __dict__ may hold
    lazy: frozenset[str]  # names resolving to cached lazy properties: seeded when set
    generated: frozenset[str]  # names the class holds only to restore MRO precedence


_CLASSES: weakref.WeakKeyDictionary[type, _ClassInfo] = weakref.WeakKeyDictionary()


class StableMeta(DistributionMeta):
    """After numpyro's constructor ran, the new instance is settled (see the module doc)."""

    def __call__(cls, *args: Any, **kwargs: Any) -> Any:  # noqa: N805 - a metaclass
        if DERIVED_ALIVE:  # a batch out of vmap lives: constructors get it settled
            args, kwargs = settled_arguments(args, kwargs)
        CONSTRUCTING.depth += 1  # numpyro's constructors rely on stored batch shapes
        try:
            instance = super().__call__(*args, **kwargs)
        finally:
            CONSTRUCTING.depth -= 1
        if isinstance(instance, Distribution):
            _adopt_children(instance)
            _settle(instance)
        return instance


def _settle(d: Any) -> None:
    """Move lazy values a constructor stored in ``d.__dict__`` to the cache, and mark the
    construction as ended (hot: every construction; one set comparison and one lookup when
    there is nothing to move)."""
    info = _CLASSES[type(d)]
    state = d.__dict__
    if not state.keys() <= info.names:
        for name in state.keys() & info.lazy:
            CACHE.seed(d, name, state.pop(name))
        if not state.keys() <= info.names:
            _warn_undeclared(type(d), d, info)
    CACHE.settled(d)


_warned: weakref.WeakSet[type] = weakref.WeakSet()
# Classes `make_stable` returned: for them (and their subclasses) stabledist reports
# attributes outside the field table. A numpyro-style subclass (of `stabledist.Distribution`,
# or converted by `stable_internals`) drops such attributes in tree_unflatten exactly as
# numpyro does, and gets no warning numpyro would not give (under ``-W error`` it would raise).
_linted: weakref.WeakSet[type] = weakref.WeakSet()


# Frames a warning skips to reach the user's line: stabledist's, numpyro's and JAX's (a flatten
# is reached through `jax.tree.flatten`, `jax.tree_util`, `jit`, an MCMC run, ... with more or
# fewer frames each).
_INTERNAL_DIRS = tuple(
    os.path.dirname(path) + os.sep
    for path in (os.path.dirname(__file__), jax.__file__, numpyro.__file__)
)


def _warn_at_caller(message: str) -> None:
    """A `UserWarning` at the first frame outside stabledist, numpyro and JAX: the user's line,
    however many internal frames lead here (Python 3.12's ``skip_file_prefixes``, by hand)."""
    frame, level = sys._getframe(), 1
    while frame is not None and frame.f_code.co_filename.startswith(_INTERNAL_DIRS):
        frame, level = frame.f_back, level + 1
    warnings.warn(message, stacklevel=level)  # UserWarning, the default


def _warn_undeclared(cls: type, instance: Any, info: _ClassInfo) -> None:
    """Once per class made by `make_stable`: attributes outside the field table do not
    survive tree_unflatten."""
    if cls in _warned or not any(c in _linted for c in cls.__mro__):
        return
    _warned.add(cls)
    extra = sorted(instance.__dict__.keys() - info.names)
    _warn_at_caller(
        f"{cls.__qualname__} sets attribute(s) {extra} that are not pytree fields, so "
        "tree_unflatten (jit, vmap, scan, ...) drops them; declare them in "
        "pytree_data_fields (arrays, distributions) or pytree_aux_fields (static values)"
    )


def _build_stable_class(cls: type) -> None:
    """Make ``cls`` (a new subclass of `Distribution`) stable: lazy values to the cache, field
    table computed once, pytree registered."""
    own = _own_pytree_methods(cls)
    derived = _derived_attributes(cls)
    for name, compute in derived.items():
        setattr(cls, name, cached_lazy_property(compute, name))
    generated: set[str] = set()
    lazy_names = {
        name
        for base in cls.__mro__
        for name, attr in vars(base).items()
        if isinstance(attr, lazy_property)
    }
    for name in sorted(lazy_names - set(derived)):
        owner, attr = _resolve(cls, name)
        if isinstance(attr, lazy_property) and not isinstance(attr, cached_lazy_property):
            setattr(cls, name, cached_lazy_property(attr.wrapped, name))
            generated.add(name)
        elif owner is not cls:
            # a plain attribute overrides a lazy one further up: restore its precedence over
            # the cached_lazy_property that a stable base generated for that name
            setattr(cls, name, attr)
            generated.add(name)
    hybrid: dict[str, StaticPredicate] = {}
    extra: dict[str, list[str]] = {"data": [], "aux": [], "list_aux": []}
    for base in reversed(cls.__mro__):
        if is_numpyro_class(base):
            hybrid.update(HYBRID_FIELDS.get(base.__name__, {}))
            for kind, names in EXTRA_FIELDS.get(base.__name__, {}).items():
                extra[kind].extend(names)
        hybrid.update(vars(base).get("pytree_hybrid_fields", {}))
    table = field_table(cls, hybrid, extra["data"], extra["aux"], extra["list_aux"],
                        derived=tuple(derived), own_flatten=own is not None)
    if own is not None:
        own = (_checked_own_flatten(cls, own[0]), own[1])
    numpyro_names = tuple(b.__name__ for b in cls.__mro__ if is_numpyro_class(b))
    register(cls, table, own, batch_rule(cls, table.data, table.array_fields, numpyro_names))
    register_serialization(cls, own is not None)  # jax.export hook (export.py)
    lazy = frozenset(n for n in lazy_names | set(derived)
                     if isinstance(getattr(cls, n, None), cached_lazy_property))
    fields = frozenset((*table.data, *table.aux))
    _CLASSES[cls] = _ClassInfo(fields, lazy, frozenset(generated))
    nested = tuple(n for n in table.data if n not in table.array_fields)
    if nested:  # fields that may hold distributions: an assignment to those drops ours
        CACHE.children_of[cls] = _nested_distributions(nested)


def _nested_distributions(names: tuple[str, ...]) -> Callable[[Any], list[Any]]:
    """``d -> the distributions d holds in the fields names`` (directly or in a list).

    Hot: it runs at the first lazy value of every instance of a class with such fields,
    right after the value's computation has evicted our data from the CPU caches. So it
    touches little: a field's kind is looked up by its type in one small table (an
    ``isinstance`` walks the type's MRO), and plain loops (no generator)."""
    kinds = _FIELD_KINDS

    def children(d: Any) -> list[Any]:
        state = d.__dict__
        found = []
        for name in names:
            value = state.get(name)
            kind = kinds.get(type(value)) or _field_kind(type(value))
            if kind is _HOLDS_ONE:
                found.append(value)
            elif kind is _HOLDS_SOME:
                for v in value:  # (by type too: numpyro's metaclass makes isinstance slow)
                    if (kinds.get(type(v)) or _field_kind(type(v))) is _HOLDS_ONE:
                        found.append(v)
        return found

    return children


_HOLDS_ONE, _HOLDS_SOME, _HOLDS_NONE = "distribution", "sequence", "other"
_FIELD_KINDS: dict[type, str] = {}  # a field value's type -> what it may hold


def _field_kind(t: type) -> str:
    kind = (_HOLDS_ONE if issubclass(t, _NumpyroDistribution)
            else _HOLDS_SOME if t in _SEQUENCES else _HOLDS_NONE)
    if len(_FIELD_KINDS) < 4096:  # bounded: classes made in a loop must not grow it forever
        _FIELD_KINDS[t] = kind
    return kind


def _derived_attributes(cls: type) -> dict[str, Callable[[Any], Any]]:
    """`DERIVED_ATTRIBUTES` of the numpyro classes ``cls`` derives from, except names numpyro
    itself declares as data fields (those stay leaves, as in numpyro)."""
    declared = {
        name
        for base in cls.__mro__
        if is_numpyro_class(base)
        for name in vars(base).get("pytree_data_fields", ())
    }
    derived: dict[str, Callable[[Any], Any]] = {}
    for base in reversed(cls.__mro__):
        if is_numpyro_class(base):
            for name, compute in DERIVED_ATTRIBUTES.get(base.__name__, {}).items():
                if name not in declared:
                    derived[name] = compute
    return derived


def _resolve(cls: type, name: str) -> tuple[type, Any]:
    """The attribute ``name`` of ``cls`` ignoring what stable classes only re-exposed."""
    for base in cls.__mro__:
        info = _CLASSES.get(base)
        if name in vars(base) and (info is None or name not in info.generated):
            return base, vars(base)[name]
    raise AttributeError(name)  # pragma: no cover - names come from the MRO


_OWN_METHODS = ("tree_flatten", "tree_unflatten")


def _own_pytree_methods(cls: type) -> tuple[Callable[..., Any], Callable[..., Any]] | None:
    """A user class's own ``(tree_flatten, tree_unflatten)``, which JAX should call for
    ``cls``; ``None`` when the field table describes the class.

    numpyro classes with their own methods are the hybrid ones of `HYBRID_FIELDS`, which the
    table handles; any other numpyro class with its own methods makes the import fail rather
    than be flattened wrongly.
    """
    for base in cls.__mro__:
        if base in _fork_bases() or base is _NumpyroDistribution:
            continue
        custom = set(_OWN_METHODS) & set(vars(base))
        if not custom:
            continue
        if is_numpyro_class(base):
            if base.__name__ in HYBRID_FIELDS:
                return None
            raise TypeError(
                f"{base.__module__}.{base.__qualname__} defines its own "
                f"{'/'.join(sorted(custom))}, which stabledist does not know; please report "
                "this numpyro class (new to stabledist) so that it can be covered"
            )
        if base is not cls:  # a mirror: the user's methods must win over Distribution's
            for name in _OWN_METHODS:
                setattr(cls, name, _method_skipping_fork(cls, name))
        return cls.tree_flatten, cls.tree_unflatten
    return None


def _fork_bases() -> tuple[type, ...]:
    """The fork's own generic bases (while `Distribution` itself is being made, not yet it)."""
    return tuple(c for c in (globals().get("Distribution"), _SkipNumpyroRegistration) if c)


def _method_skipping_fork(cls: type, name: str) -> Any:
    """``name`` as ``cls``'s MRO resolves it, ignoring the fork's generic `Distribution`."""
    for base in cls.__mro__:
        if base not in _fork_bases() and name in vars(base):
            return vars(base)[name]
    raise AttributeError(name)  # pragma: no cover - numpyro's Distribution defines both


def _checked_own_flatten(cls: type, flatten: Callable[[Any], Any]) -> Callable[[Any], Any]:
    """A user's flatten, checked on its first call for an instance of exactly ``cls``: a lazy
    value returned as a leaf, or a set (ordered by ``PYTHONHASHSEED``), warns."""
    checked = False

    def flatten_checked(d: Any) -> Any:
        nonlocal checked
        children, aux = flatten(d)
        if not checked and type(d) is cls:
            checked = True
            _check_own_flatten(cls, d, children, aux)
        return children, aux

    return flatten_checked


def _check_own_flatten(cls: type, d: Any, children: Any, aux: Any) -> None:
    cached = {id(v): name for name, v in CACHE.cached(d).items()}
    lazy = sorted({cached[id(c)] for c in children if id(c) in cached})
    if lazy:
        _warn_at_caller(
            f"{cls.__qualname__}.tree_flatten returns the lazy value(s) {lazy} as leaves: "
            "they are derived from other leaves, so a tree_map would let them disagree; "
            "return the parametrization only (stabledist keeps lazy values in its cache)"
        )
    parts = (children, aux, *(aux if isinstance(aux, tuple | list) else ()))
    unordered = [type(x).__name__ for x in parts if isinstance(x, set | frozenset)]
    if unordered:
        _warn_at_caller(
            f"{cls.__qualname__}.tree_flatten returns a {unordered[0]}: its order follows "
            "PYTHONHASHSEED, so the pytree differs between processes; return a tuple in a "
            "fixed order (gather_pytree_data_fields() is ordered on stable classes)"
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
            if is_numpyro_class(cls):
                module = "stabledist." + module.rpartition(".")[2]
            namespace = {
                "__module__": module,
                "__qualname__": cls.__qualname__,
                "__doc__": cls.__doc__,
            }
            mirror = StableMeta(cls.__name__, (*bases, cls), namespace)
            _mirrors[cls] = mirror
            _sources[mirror] = cls
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
    if hybrid:
        if issubclass(cls, Distribution) or cls in _mirrors:
            raise TypeError(f"{cls.__qualname__} is already stable; declare hybrid fields "
                            "as the class attribute pytree_hybrid_fields instead")
        setattr(cls, "pytree_hybrid_fields", dict(hybrid))  # noqa: B010 - on a user class
    stable = stable_class(cls)
    _linted.add(stable)
    return cast(D, stable)


def is_stable(d: object) -> bool:
    """Whether ``d`` is a stable distribution (instance) or class."""
    return isinstance(d, Distribution) or (isinstance(d, type) and issubclass(d, Distribution))


def stabilize(value: Any) -> Any:
    """Return a stable version of ``value``: a distribution, or a list or tuple of them.

    Stable distributions and non-distributions come back unchanged, a numpyro distribution
    copied (same state) into its stable class, lists and tuples of distributions stabilized
    element-wise."""
    if isinstance(value, _NumpyroDistribution):
        if isinstance(value, Distribution):
            return value
        cls = stable_class(type(value))
        copy = cast(Any, cls).__new__(cls)
        vars(copy).update(vars(value))
        _adopt_children(copy)
        _settle(copy)  # lazy values numpyro stored (its constructor's or a read's): seeded
        return copy
    if type(value) in (list, tuple) and any(isinstance(v, _NumpyroDistribution) for v in value):
        return type(value)(stabilize(v) for v in value)
    return value


def _adopt_children(d: Distribution) -> None:
    """Replace the numpyro distributions ``d`` holds by stable copies, and batched ones (out of
    ``vmap``) by copies whose batch shape is their own (`batching.settled`: the constructor
    read it). Hot: every construction."""
    state = vars(d)
    for name, value in state.items():
        if isinstance(value, _NumpyroDistribution):
            if not isinstance(value, Distribution):
                state[name] = stabilize(value)
            else:  # a batched one (a pickled copy too, so no liveness test): settled
                state[name] = settled(value)
        elif type(value) in _SEQUENCES and value and not isinstance(value[0], int):
            stable = settled_value(stabilize(value))  # shapes are tuples of ints: skipped above
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
            if sub not in seen and is_numpyro_class(sub):
                seen.add(sub)
                pending.append(sub)
    found["Distribution"] = Distribution
    _mirrors[_NumpyroDistribution] = Distribution
    for cls in sorted(seen, key=lambda c: (c.__module__, c.__qualname__)):
        found.setdefault(cls.__name__, stable_class(cls))
    return found


def wrap_factory(factory: Callable[..., Any]) -> Callable[..., Any]:
    """``factory`` returning stable distributions, same signature and docs."""

    @functools.wraps(factory)
    def stable_factory(*args: Any, **kwargs: Any) -> Any:
        return stabilize(factory(*args, **kwargs))

    stable_factory.__module__ = "stabledist"
    return stable_factory


def upstream_class(cls: type) -> type:
    """The class a stable class mirrors (numpyro's or a user's); ``cls`` if it is not stable."""
    if not issubclass(cls, Distribution):
        return cls
    for base in cls.__mro__:
        if (
            issubclass(base, _NumpyroDistribution)
            and not issubclass(base, Distribution)
            and base.__module__ != __name__  # the fork's own registration guard
        ):
            return base
    raise TypeError(f"{cls!r} mirrors no class")  # pragma: no cover - mirrors have a base


def _from_source(source: type) -> Any:
    """Unpickling: a bare instance of ``source``'s stable class (its state follows)."""
    cls: Any = stable_class(source)
    return cls.__new__(cls)


# Pickles name the unpickling function by module and name: the package's own name, which no
# move of private modules can break (`stabledist/__init__.py` exports it; pickles written by
# 0.1.0 name `stabledist.fork._from_source`, kept in `stabledist/fork.py`).
_from_source.__module__ = "stabledist"


class _SkipNumpyroRegistration(_NumpyroDistribution):
    """Stops numpyro's ``__init_subclass__`` (an MRO-walking, set-ordered pytree registration)
    for every class below, which `Distribution` registers itself."""

    def __init_subclass__(cls, **kwargs: Any) -> None:
        object.__init_subclass__(**kwargs)
        _build_stable_class(cls)


class Distribution(_SkipNumpyroRegistration, _NumpyroDistribution, metaclass=StableMeta):
    """Base of every stable distribution; subclass it as you would numpyro's ``Distribution``.

    Overrides what returns new distributions (so that they are stable too), the pytree
    methods (ordered, from the class's field table), and what must see values the constructor
    was given even though they live in the cache (`get_args`, copies and pickles).
    """

    def expand(self, batch_shape: Sequence[int]) -> _NumpyroDistribution:
        return stabilize(super().expand(batch_shape))

    def expand_by(self, sample_shape: Sequence[int]) -> _NumpyroDistribution:
        return stabilize(super().expand_by(sample_shape))

    def to_event(self, reinterpreted_batch_ndims: int | None = None) -> _NumpyroDistribution:
        return stabilize(super().to_event(reinterpreted_batch_ndims))

    def mask(self, mask: Any) -> MaskedDistribution:
        return stabilize(super().mask(mask))

    def __getitem__(self, index: Any) -> Distribution:
        """The distribution of the batch elements ``index`` selects (NumPy's indexing of the
        batch dimensions; event dimensions untouched): `stabledist._src.slicing`."""
        return getitem(self, index)

    __iter__ = None  # indexable, not iterable: ``for x in d`` would loop until IndexError

    def __setattr__(self, name: str, value: Any) -> None:
        """numpyro's assignment; after construction, assigning a pytree field drops the
        lazy values that depend on it (this instance's and its holders', `stabledist._src.cache`),
        so none is served for leaves it was not computed from (numpyro's would be stale)."""
        object.__setattr__(self, name, value)
        if id(self) in CACHE.owners and name in _CLASSES[type(self)].names:
            CACHE.invalidate(self)

    for _name in ("expand", "expand_by", "to_event", "mask"):  # numpyro's annotations
        functools.update_wrapper(locals()[_name], getattr(_NumpyroDistribution, _name),
                                 assigned=("__annotations__",), updated=())
    del _name

    def get_args(self) -> dict[str, Any]:
        """numpyro's ``get_args``: the parameters given or stored at construction, never
        the lazy values read since (numpyro's answer grows with every read)."""
        seeded = CACHE.seeded(self)
        cls = type(self)
        return {
            param: getattr(self, param)
            for param in self.arg_constraints
            if param in self.__dict__
            or param in seeded
            or not isinstance(getattr(cls, param), lazy_property)
        }

    def __getstate__(self) -> Any:
        """Copies and pickles carry the values the constructor was given (as numpyro's
        ``__dict__`` does), not the lazy values read since."""
        seeded = CACHE.seeded(self)
        return (self.__dict__, seeded) if seeded else self.__dict__

    def __setstate__(self, state: Any) -> None:
        seeded: dict[str, Any] = {}
        if isinstance(state, tuple):
            state, seeded = state
        vars(self).update(state)
        for name, value in seeded.items():
            CACHE.seed(self, name, value)
        restored_batch(self)
        CACHE.settled(self)

    def __reduce_ex__(self, protocol: Any) -> Any:
        """A mirror made by `make_stable(cls)` shares ``cls``'s name, so pickle cannot find it
        by name: it is pickled as "the stable class of ``cls``" (numpyro's mirrors too)."""
        source = _sources.get(type(self))
        if source is None:
            return super().__reduce_ex__(protocol)
        return _from_source, (source,), self.__getstate__()

    def tree_flatten(self) -> tuple[tuple[Any, ...], tuple[Any, ...]]:
        """``(leaves, aux)`` by the class's field table, in declaration order."""
        return pytree_of(type(self)).flatten(self)

    @classmethod
    def tree_unflatten(cls, aux_data: tuple[Any, ...], params: tuple[Any, ...]) -> Any:
        """Rebuild from `tree_flatten` output; malformed input raises a clear error."""
        return pytree_of(cls).checked_unflatten(aux_data, params)

    @classmethod
    def gather_pytree_data_fields(cls) -> tuple[str, ...]:
        """numpyro's data fields of the class, in declaration order (numpyro's is a set)."""
        return pytree_of(cls).table.data

    @classmethod
    def gather_pytree_aux_fields(cls) -> tuple[str, ...]:
        """The aux fields of the class, in a fixed order."""
        table = pytree_of(cls).table
        return table.aux + tuple(table.hybrid)
