"""Describing a stable class, registering it, and the errors its mirror explains.

Describing: a class's `ClassRecord` and the attributes it must get, computed in one pure step
from the class, the class it mirrors and `stabledist._src.records.facts`. `describe(cls,
source)` reads and changes nothing: it returns the record (the field table - which attributes
are leaves, in declaration order -, the lazy names, the nested fields, each parameter's event
rank, where the batch shape is read (`BatchRule`) and the class's `Facts`) and the attributes
to install (cached lazy properties, recomputed attributes, precedence restored, a mirror's
``sample`` whose errors say what to pass: `explaining`). The registration (`register`)
installs them and records the record (`stabledist._src.records`).

numpyro gathers a distribution's fields on every flatten by walking the MRO into a ``set``, so
its leaf order follows ``PYTHONHASHSEED``. Here the table is gathered once, in declaration
order; its data fields are exactly numpyro's (the parametrization), so one class has one tree
structure whatever it was built from or has read.

The registration (`register`): what makes a class stable, once, when it is created. Every
subclass of `stabledist.Distribution` - the mirrors of numpyro's classes, a user's subclass, a
class given to ``make_stable`` - is registered by `register` from the base class's
``__init_subclass__`` (`stabledist._src.construction.base`): its record is described
(`describe`, pure), its lazy properties and recomputed attributes installed, the record kept
(`stabledist._src.records`), its flatten and unflatten generated and registered with JAX
(`stabledist._src.pytrees.pytree`), and its name with ``jax.export``
(`stabledist._src.pytrees.export`). JAX's pytree registry keeps every registered class alive,
so a record lives as long as the process.

Errors that say what to pass (`explaining`): where numpyro's own error for a common mistake
says nothing useful, the same exception, of the same type, with a message naming the mistake
and the fix. Only ``sample`` is explained, and only on stabledist's own mirrors of numpyro's
classes (`explaining`, installed by `describe`): a mirror's MRO holds nothing but mirrors
before the class it mirrors, so the wrapper calls exactly the method Python would have
resolved, and only acts when it raises. A user's class never gets one: what it defines, at any
depth, is what runs. ``log_prob`` is not wrapped: numpyro warns about out-of-support values at
the first frame outside numpyro, and a wrapper's frame would take the user's line.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Mapping, Sequence
from typing import Any, NamedTuple

from numpyro.distributions.distribution import Distribution as _NumpyroDistribution
from numpyro.distributions.util import lazy_property
from numpyro.util import is_prng_key

from stabledist._src import pytrees, records
from stabledist._src.construction.user_classes import checked_own_flatten
from stabledist._src.lazy import (
    cached_lazy_property,
    class_attribute,
    is_lazy,
    is_numpyro_class,
    lazy_property_of,
)
from stabledist._src.records import (
    BASE_AUX,
    EVENT,
    VALIDATE,
    BatchRule,
    ClassRecord,
    Facts,
    FieldTable,
    StaticPredicate,
    facts_of,
    find,
)

__all__ = ["EXPLAINED", "FORK_BASE", "Description", "LazyToInstall", "describe", "explaining",
           "field_table", "is_fork_base", "register", "unknown_own_pytree"]

FORK_BASE = "_stabledist_fork_base"
"""Set in the body of stabledist's own generic base classes: they are not a class's source."""

_OWN_METHODS = ("tree_flatten", "tree_unflatten")


class LazyToInstall(NamedTuple):
    """A lazy property the registration step installs: a `cached_lazy_property` over
    ``function`` (made there: making one registers its value table in the cache)."""

    function: Callable[[Any], Any]


class Description(NamedTuple):
    """What `describe` found: the class's record, and the attributes the registration must
    install on the class (name -> value; a `LazyToInstall` becomes a cached lazy property)."""

    record: ClassRecord
    install: dict[str, Any]


def is_fork_base(cls: type) -> bool:
    """Whether ``cls`` is one of the fork's own generic bases (``stabledist.Distribution``)."""
    return FORK_BASE in vars(cls)


def describe(cls: type, source: type) -> Description:
    """The record of the stable class ``cls`` mirroring ``source``, and what to install on it
    (pure: reads the classes and `stabledist._src.records.facts`, changes nothing)."""
    facts = facts_of(cls)
    own = _own_pytree_methods(cls)
    install, lazy, generated = _lazy_attributes(cls, source, facts)
    hybrid = {**facts.hybrid}
    for base in reversed(cls.__mro__):
        hybrid.update(vars(base).get("pytree_hybrid_fields", {}))
    table = field_table(cls, hybrid, (), facts.extra_aux, facts.list_aux,
                        recomputed=tuple(recomputed_attributes(cls, facts)),
                        own_flatten=own is not None)
    if own is not None and own[2]:
        install.update(own[2])
    for name in EXPLAINED:
        method = explaining(cls, name, source)
        if method is not None:
            install[name] = method
    install = _not_resolved_already(cls, install)
    nested = tuple(n for n in table.data if n not in table.array_fields)
    ranks = _event_ranks(cls, facts)
    record = ClassRecord(
        qualname=cls.__qualname__, source=source, facts=facts, table=table, lazy=lazy,
        generated=generated, added=frozenset(install) - set(vars(cls)),
        fields=frozenset((*table.data, *table.aux)), nested=nested,
        event_ranks=ranks, batch=batch_rule(table, facts, ranks),
        own=None if own is None else (own[0], own[1]))
    return Description(record, install)


def _not_resolved_already(cls: type, install: dict[str, Any]) -> dict[str, Any]:
    """``install`` less what ``cls`` resolves to already (Python's MRO): a user's class at any
    depth gets nothing set over what it or its bases define."""
    return {name: value for name, value in install.items()
            if isinstance(value, LazyToInstall) or class_attribute(cls, name) is not value}


def recomputed_attributes(cls: type, facts: Facts) -> dict[str, Callable[[Any], Any]]:
    """The recomputed attributes of ``facts``, except names numpyro declares as data fields
    (those stay leaves, as in numpyro)."""
    declared = {name for base in cls.__mro__ if is_numpyro_class(base)
                for name in vars(base).get("pytree_data_fields", ())}
    return {n: compute for n, compute in facts.recomputed.items() if n not in declared}


def _lazy_attributes(cls: type, source: type, facts: Facts
                     ) -> tuple[dict[str, Any], frozenset[str], frozenset[str]]:
    """``(install, lazy, generated)``: every lazy property visible on ``cls`` becomes a cached
    lazy property over the same function, recomputed attributes become ones, and a plain attribute
    that overrides a lazy one further up keeps its precedence over the cached property a stable
    base generated for that name. ``generated``: what the class holds only for that (a
    subclass resolves past it), not its own lazy properties converted in place."""
    recomputed = recomputed_attributes(cls, facts)
    # a mirror gets them; a user's class inherits its mirror's, or keeps its own override
    install: dict[str, Any] = {n: LazyToInstall(f) for n, f in recomputed.items()
                               if source is not cls}
    generated: set[str] = set()
    names = {n for base in cls.__mro__ for n, a in vars(base).items() if is_lazy(a)}
    for name in sorted(names - set(recomputed)):
        owner, attr = _resolve(cls, name)
        if type(attr) is property and is_lazy(attr):
            continue  # installed by a stable base: inherited as it is
        if isinstance(attr, cached_lazy_property):  # one in a class body: its installed form
            install[name] = attr.installed
        elif isinstance(attr, lazy_property):
            install[name] = LazyToInstall(attr.wrapped)
        elif owner is not cls:
            install[name] = attr
        else:
            continue
        if owner is not cls:  # (the class's own lazy property, converted, stays its own)
            generated.add(name)
    lazy = frozenset(n for n in names | set(recomputed) if _is_cached_lazy(
        install[n] if n in install else class_attribute(cls, n)))
    return install, lazy, frozenset(generated)


def _is_cached_lazy(attribute: Any) -> bool:
    """Whether a class attribute is (or will be installed as) one of stabledist's lazy
    properties, not numpyro's or a plain attribute."""
    return isinstance(attribute, LazyToInstall) or (
        is_lazy(attribute) and type(lazy_property_of(attribute)) is cached_lazy_property)


def _resolve(cls: type, name: str) -> tuple[type, Any]:
    """The attribute ``name`` of ``cls`` ignoring what stable classes only re-exposed."""
    for base in cls.__mro__:
        record = find(base)
        if name in vars(base) and (record is None or name not in record.generated):
            return base, vars(base)[name]
    raise AttributeError(name)  # pragma: no cover - names come from the MRO


def _own_pytree_methods(cls: type) -> tuple[Any, Any, dict[str, Any]] | None:
    """A user class's own ``(tree_flatten, tree_unflatten, attributes to install)``, which JAX
    should call for ``cls``; None when the field table describes the class.

    numpyro classes with their own methods are the hybrid ones of `stabledist._src.records.facts`,
    which the table handles; any other numpyro class with its own methods makes the import
    fail rather than be flattened wrongly."""
    for base in cls.__mro__:
        if is_fork_base(base) or base is _NumpyroDistribution:
            continue
        custom = set(_OWN_METHODS) & set(vars(base))
        if not custom:
            continue
        if is_numpyro_class(base):
            unknown_own_pytree(base)
            return None
        if base is cls:
            return cls.tree_flatten, cls.tree_unflatten, {}
        # a mirror: the user's methods must win over stabledist's generic ones
        install = {n: _method_skipping_our_bases(cls, n) for n in _OWN_METHODS}
        flatten, unflatten = (install[n].__get__(None, cls) for n in _OWN_METHODS)
        return flatten, unflatten, install
    return None


def unknown_own_pytree(cls: type) -> None:
    """Raise for a numpyro class that defines its own pytree methods stabledist does not know
    (the hybrid classes of `stabledist._src.records.facts` are known): it would be flattened
    wrongly."""
    custom = set(_OWN_METHODS) & set(vars(cls))
    if custom and not facts_of(cls).hybrid:
        raise TypeError(
            f"{cls.__module__}.{cls.__qualname__} defines its own "
            f"{'/'.join(sorted(custom))}, which stabledist does not know; please report "
            "this numpyro class (new to stabledist) so that it can be covered")


def _method_skipping_our_bases(cls: type, name: str) -> Any:
    """``name`` as ``cls``'s MRO resolves it, ignoring stabledist's generic bases."""
    for base in cls.__mro__:
        if not is_fork_base(base) and name in vars(base):
            return vars(base)[name]
    raise AttributeError(name)  # pragma: no cover - numpyro's Distribution defines both


def field_table(
    cls: type,
    hybrid: Mapping[str, StaticPredicate] | None = None,
    extra_data: Sequence[str] = (),
    extra_aux: Sequence[str] = (),
    list_aux: Sequence[str] = (),
    recomputed: Sequence[str] = (),
    own_flatten: bool = False,
) -> FieldTable:
    """Gather the field table of ``cls`` in declaration order.

    numpyro's rules (``pytree_data_fields`` if a class declares it, else its
    ``arg_constraints`` keys that are not lazy properties; ``pytree_aux_fields`` added up), in
    first-seen order instead of a ``set``: the data fields are exactly numpyro's, so a stable
    instance has numpyro's leaves. ``extra_data`` / ``extra_aux`` add attributes a constructor
    sets and numpyro's tree drops (an ``extra_data`` name is data even where a class declares
    it aux); ``recomputed`` names are recomputed from the leaves, so they are neither. With
    ``own_flatten`` (a user class with its own ``tree_flatten``, which decides what is static),
    a name declared both data and aux is in both, as in numpyro.
    """
    data, aux, arrays = _declared_fields(cls)
    data.update(dict.fromkeys(extra_data))
    aux.update(dict.fromkeys(extra_aux))
    for name in (*extra_data, *recomputed):  # the facts' word wins over an aux declaration
        aux.pop(name, None)
    for name in recomputed:
        data.pop(name, None)
    aux.pop(VALIDATE, None)
    aux[VALIDATE] = None
    hybrid = dict(hybrid or {})
    unknown = [name for name in data if name in aux and name not in hybrid]
    if unknown and not own_flatten:
        raise TypeError(
            f"{cls.__qualname__} declares {unknown} as both pytree data and aux fields; "
            "stabledist needs to know when such a field is static: pass "
            "hybrid={name: test} to stabledist.make_stable, or declare pytree_hybrid_fields")
    for name in hybrid:
        if name not in data:
            raise TypeError(f"{cls.__qualname__}: hybrid field {name!r} is not a data field")
    return FieldTable(
        data=tuple(data), aux=tuple(name for name in aux if name not in hybrid), hybrid=hybrid,
        array_fields=frozenset(arrays - set(hybrid)), list_aux=frozenset(list_aux))


def _declared_fields(cls: type) -> tuple[dict[str, None], dict[str, None], set[str]]:
    """numpyro's declarations over the MRO, bases first: data, aux (ordered dicts) and the
    parameters among the data fields."""
    data: dict[str, None] = {}
    aux: dict[str, None] = dict.fromkeys(BASE_AUX)
    arrays: set[str] = set()
    for base in reversed(cls.__mro__):
        if not (isinstance(base, type) and issubclass(base, _NumpyroDistribution)):
            continue
        constraints = base.__dict__.get("arg_constraints", {})
        declared = base.__dict__.get("pytree_data_fields")
        if declared is None:
            declared = tuple(arg for arg in constraints
                             if not is_lazy(getattr(cls, arg, None)))
        data.update(dict.fromkeys(declared))
        aux.update(dict.fromkeys(base.__dict__.get("pytree_aux_fields", ())))
        arrays.update(a for a in constraints if a in data)
    return data, aux, arrays


def batch_rule(table: FieldTable, facts: Facts, event_ranks: Mapping[str, int]
               ) -> BatchRule | None:
    """The `BatchRule` of a class with field table ``table``, or None when nothing in its
    leaves tells the batch shape (and it holds no distribution to give its shape back)."""
    data = table.data
    nested = tuple(n for n in data if n not in table.array_fields)
    if facts.keeps_batch:
        return BatchRule((), (), keep=True, restores_children=bool(nested))
    ranks = tuple((i, event_ranks[name]) for i, name in enumerate(data)
                  if name in table.array_fields and name in event_ranks)
    children = tuple((i, facts.child_offsets[n]) for i, n in enumerate(data)
                     if n in facts.child_offsets)
    if not ranks and not children:
        return None
    event_shaped = tuple(i for i, rank in ranks
                         if rank == EVENT or data[i] in facts.event_shaped)
    return BatchRule(ranks, children, restores_children=facts.children_keep_batch,
                     pure=not nested, event_shaped=event_shaped)


def _event_ranks(cls: type, facts: Facts) -> dict[str, int]:
    """Each parameter's event rank (`EVENT`: the instance's), where known: the facts'
    override, else the first ``arg_constraints`` in the MRO that has it (a dependent
    constraint without one says nothing)."""
    ranks = dict(facts.event_ranks)
    for base in cls.__mro__:
        found: Mapping[str, Any] = vars(base).get("arg_constraints", {})
        if not isinstance(found, Mapping):
            continue
        for name, constraint in found.items():
            if name not in ranks:
                try:
                    ranks[name] = int(constraint.event_dim)
                except NotImplementedError:
                    ranks[name] = _UNKNOWN
    return {n: r for n, r in ranks.items() if r is not _UNKNOWN}


_UNKNOWN: Any = object()


# --- the registration ------------------------------------------------------------------------


def register(cls: type, source: type) -> None:
    """Make ``cls`` stable: ``source`` is the class it mirrors (numpyro's, or a user's class
    given to ``make_stable``), or ``cls`` itself."""
    record, install = describe(cls, source)
    for name, value in install.items():
        if isinstance(value, LazyToInstall):
            value = cached_lazy_property(value.function, name).installed
        setattr(cls, name, value)
    records.add(cls, record)
    own = record.own
    if own is not None:  # a user's flatten, checked at its first call
        own = (checked_own_flatten(cls, own[0]), own[1])
    pytrees.register(cls, record, own)
    pytrees.register_serialization(cls, record)


# --- errors that say what to pass ------------------------------------------------------------


EXPLAINED = ("sample",)
"""The methods whose errors are explained (on mirrors only)."""

_MARK = "_stabledist_explained"


def explaining(cls: type, name: str, source: type) -> Callable[..., Any] | None:
    """The method ``name`` of the mirror ``cls`` of ``source`` (the first in its MRO that is
    not one of these wrappers: the mirrors before ``source`` hold only wrappers), wrapped so
    that its errors say what to pass; None for a class that mirrors nothing (a user's class
    keeps Python's resolution), where the one ``cls`` inherits wraps it already, or it has
    none."""
    if source is cls:
        return None
    method = next((vars(b)[name] for b in cls.__mro__
                   if name in vars(b) and not hasattr(vars(b)[name], _MARK)), None)
    inherited = next((vars(b)[name] for b in cls.__mro__ if name in vars(b)), None)
    if not callable(method) or getattr(inherited, "__wrapped__", None) is method:
        return None

    @functools.wraps(method)
    def explained(self: Any, *args: Any, **kwargs: Any) -> Any:
        try:
            return method(self, *args, **kwargs)
        except (AssertionError, TypeError) as error:
            message = _explanation(self, name, args, kwargs, error)
            if message is None:
                raise
            raise type(error)(message) from error

    setattr(explained, _MARK, True)
    return explained


def _explanation(d: Any, name: str, args: tuple[Any, ...], kwargs: dict[str, Any],
                 error: Exception) -> str | None:
    """What the mistake behind ``error`` was, or None (numpyro's error stands)."""
    cls = type(d).__name__
    key = args[0] if args else kwargs.get("key")
    if name == "sample" and isinstance(error, AssertionError) and not error.args and (
            not is_prng_key(key)):
        return (f"{cls}.sample expects a PRNG key as its first argument, such as "
                f"jax.random.key(0) or jax.random.PRNGKey(0); got {_described(key)}")
    if isinstance(error, TypeError):
        record = find(type(d))
        state = vars(d)
        for field in sorted(record.table.array_fields) if record is not None else ():
            value = state.get(field)
            if type(value) in (list, tuple):
                return (f"{cls}'s parameter {field} is a Python {type(value).__name__} "
                        f"({str(value)[:60]}), which numpyro does not convert: pass an array, "
                        f"jnp.asarray(...) (numpyro's {type(error).__name__}: {error})")
    return None


def _described(value: Any) -> str:
    shape, dtype = getattr(value, "shape", None), getattr(value, "dtype", None)
    if shape is not None and dtype is not None:
        return f"an array of shape {tuple(shape)} and dtype {dtype}"
    return f"{type(value).__name__} {value!r}"[:120]
