"""The spec of a stable class: everything stabledist knows about it, computed once, in one pure
step, from the class, the class it mirrors and `stabledist._src.facts`.

`class_spec(cls, source)` reads and changes nothing: it returns a `ClassSpec` with the field
table (which attributes are leaves, in declaration order), the attributes the class must get
(cached lazy properties, recomputed attributes, precedence restored), where its batch shape is read
(`BatchRule`), which fields may hold distributions, and the class's `Facts`. The fork then
registers the class (`stabledist._src.fork`): it installs those attributes, puts the spec on
the class (``cls.__stable_spec__``, as equinox keeps a module's field metadata on the class)
and registers it with JAX, ``jax.export`` and the cache. The few per-class caches the other
modules keep (hoisting decisions and programs, batch shapes read from leaves) hang off it.

numpyro gathers a distribution's fields on every flatten by walking the MRO into a ``set``, so
its leaf order follows ``PYTHONHASHSEED``. Here the table is gathered once, in declaration
order; its data fields are exactly numpyro's (the parametrization), so one class has one tree
structure whatever it was built from or has read.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, NamedTuple

from numpyro.distributions.distribution import Distribution as _NumpyroDistribution
from numpyro.distributions.util import lazy_property

from stabledist._src.cache import cached_lazy_property
from stabledist._src.facts import EVENT, Facts, Offset, StaticPredicate, facts_of
from stabledist._src.introspect import (
    SPEC_ATTRIBUTE,
    class_attribute,
    is_lazy,
    is_numpyro_class,
)

__all__ = ["SPEC", "BatchRule", "ClassSpec", "FieldTable", "LazyToInstall", "class_spec",
           "field_table", "is_fork_base", "spec_of", "unknown_own_pytree"]

SPEC = SPEC_ATTRIBUTE
"""The class attribute that holds a stable class's `ClassSpec` (the cache reads ``holds``)."""

FORK_BASE = "_stabledist_fork_base"
"""Set in the body of the fork's own generic base classes: they are not a class's source."""

# Aux fields every distribution has (``_validate_args`` is put last).
BASE_AUX = ("_batch_shape", "_event_shape")
VALIDATE = "_validate_args"
_OWN_METHODS = ("tree_flatten", "tree_unflatten")


@dataclass(frozen=True)
class FieldTable:
    """Which attributes of a class are leaves (``data``) and which are static (``aux``).

    ``hybrid`` fields appear in both: a hybrid value is a leaf unless its test says it is
    static (numpyro's ``MaskedDistribution._mask`` is a leaf when an array, static when a
    ``bool``). ``array_fields`` are the parameters from ``arg_constraints``, which must never
    be unflattened from a distribution or a string. ``list_aux``: aux names whose value may be
    a list, frozen to a tuple in aux data (which must be hashable) and thawed back to a list.
    """

    data: tuple[str, ...]
    aux: tuple[str, ...]
    hybrid: Mapping[str, StaticPredicate] = field(default_factory=dict)
    array_fields: frozenset[str] = frozenset()
    list_aux: frozenset[str] = frozenset()


class LazyToInstall(NamedTuple):
    """A lazy property the registration step installs: a `cached_lazy_property` over
    ``function`` (made there: making one registers its value table in the cache)."""

    function: Callable[[Any], Any]


@dataclass(frozen=True, eq=False)  # hashed by identity: a key of derived shapes
class BatchRule:
    """Where a class's batch shape can be read from its leaves (TFP's ``parameter_properties``
    in spirit: an event rank per parameter). ``arrays`` are ``(leaf index, event rank)``
    (`EVENT`: the instance's event rank), ``children`` ``(leaf index, offset)`` for nested
    distributions whose batch shape tells the parent's; ``event_shaped`` leaves end in the
    event shape. ``keep``: the batch shape is not a function of the leaves (stored one kept);
    ``restores_children``: after an unflatten that keeps this parent's shape, its nested
    distributions keep theirs too; ``pure``: parameters only (no field may hold a
    distribution), so the answer depends on the leaf shapes alone."""

    arrays: tuple[tuple[int, int], ...]
    children: tuple[tuple[int, Offset], ...]
    keep: bool = False
    restores_children: bool = False
    pure: bool = False
    event_shaped: tuple[int, ...] = ()


@dataclass(eq=False)
class ClassSpec:
    """What `class_spec` computed for a stable class, and the per-class caches that hang off
    it. ``source`` is the class it mirrors (numpyro's or a user's class given to
    ``make_stable``), or the class itself. ``install``: attributes the class must get
    (name -> value). ``lazy``: names that resolve to cached lazy properties (a constructor's
    assignment to one is seeded); ``generated``: names the class holds only to restore MRO
    precedence; ``fields``: everything an instance's ``__dict__`` may hold by declaration;
    ``nested``: data fields that may hold distributions, ``holds``: ``d -> the distributions
    d holds there`` (None without such fields); ``own``: a user class's own
    ``(tree_flatten, tree_unflatten)``."""

    qualname: str
    source: type
    facts: Facts
    table: FieldTable
    install: dict[str, Any]
    lazy: frozenset[str]
    generated: frozenset[str]
    fields: frozenset[str]
    nested: tuple[str, ...]
    holds: Callable[[Any], list[Any]] | None
    batch: BatchRule | None
    own: tuple[Callable[..., Any], Callable[..., Any]] | None
    lint: bool = False  # made by make_stable: attributes outside the table warn (fork)
    warned: bool = False  # that warning was given (fork)
    pytree: Any = None  # the registered flatten/unflatten (pytree.ClassPytree)
    hoisting: dict[Any, Any] = field(default_factory=dict)  # decisions and programs (hoisting)
    shapes: dict[Any, Any] = field(default_factory=dict)  # derived batch shapes (batching)


def spec_of(cls: type) -> ClassSpec:
    """The spec of a stable class (its own, not a base's: KeyError for any other class)."""
    return vars(cls)[SPEC]


def is_fork_base(cls: type) -> bool:
    """Whether ``cls`` is one of the fork's own generic bases (``stabledist.Distribution``)."""
    return FORK_BASE in vars(cls)


def class_spec(cls: type, source: type) -> ClassSpec:
    """The `ClassSpec` of the stable class ``cls`` mirroring ``source`` (pure: reads the classes
    and `stabledist._src.facts`, changes nothing)."""
    facts = facts_of(cls)
    own = _own_pytree_methods(cls)
    install, lazy, generated = _lazy_attributes(cls, facts)
    hybrid = {**facts.hybrid}
    for base in reversed(cls.__mro__):
        hybrid.update(vars(base).get("pytree_hybrid_fields", {}))
    table = field_table(cls, hybrid, (), facts.extra_aux, facts.list_aux,
                        recomputed=tuple(recomputed_attributes(cls, facts)),
                        own_flatten=own is not None)
    if own is not None and own[2]:
        install.update(own[2])
    nested = tuple(n for n in table.data if n not in table.array_fields)
    return ClassSpec(
        qualname=cls.__qualname__, source=source, facts=facts, table=table, install=install,
        lazy=lazy, generated=generated, fields=frozenset((*table.data, *table.aux)),
        nested=nested, holds=_held_distributions(nested) if nested else None,
        batch=batch_rule(cls, table, facts),
        own=None if own is None else (own[0], own[1]))


_DISTRIBUTION_META = type(_NumpyroDistribution)
_SEQUENCES = (list, tuple)


def _held_distributions(names: tuple[str, ...]) -> Callable[[Any], list[Any]]:
    """``d -> the distributions d holds in the fields names`` (directly or in a list). Runs at
    the first lazy value of every instance of such a class, so it touches little: a value is a
    distribution by its metaclass (``isinstance`` against numpyro's classes goes through their
    metaclass's ``__instancecheck__``), and plain loops (no generator)."""
    meta = _DISTRIBUTION_META

    def holds(d: Any) -> list[Any]:
        state = d.__dict__
        found = []
        for name in names:
            value = state.get(name)
            if isinstance(type(value), meta):
                found.append(value)
            elif type(value) in _SEQUENCES:
                for v in value:
                    if isinstance(type(v), meta):
                        found.append(v)
        return found

    return holds


def recomputed_attributes(cls: type, facts: Facts) -> dict[str, Callable[[Any], Any]]:
    """The recomputed attributes of ``facts``, except names numpyro declares as data fields
    (those stay leaves, as in numpyro)."""
    declared = {name for base in cls.__mro__ if is_numpyro_class(base)
                for name in vars(base).get("pytree_data_fields", ())}
    return {n: compute for n, compute in facts.recomputed.items() if n not in declared}


def _lazy_attributes(cls: type, facts: Facts
                     ) -> tuple[dict[str, Any], frozenset[str], frozenset[str]]:
    """``(install, lazy, generated)``: every lazy property visible on ``cls`` becomes a cached
    lazy property over the same function, recomputed attributes become ones, and a plain attribute
    that overrides a lazy one further up keeps its precedence over the cached property a stable
    base generated for that name. ``generated``: what the class holds only for that (a
    subclass resolves past it), not its own lazy properties converted in place."""
    recomputed = recomputed_attributes(cls, facts)
    install: dict[str, Any] = {n: LazyToInstall(f) for n, f in recomputed.items()}
    generated: set[str] = set()
    names = {n for base in cls.__mro__ for n, a in vars(base).items() if is_lazy(a)}
    for name in sorted(names - set(recomputed)):
        owner, attr = _resolve(cls, name)
        if isinstance(attr, cached_lazy_property):  # stabledist's: a record, or installed
            if type(attr) is property:
                continue  # installed by a stable base: inherited as it is
            install[name] = attr.installed
        elif isinstance(attr, lazy_property):
            install[name] = LazyToInstall(attr.wrapped)
        elif owner is not cls:
            install[name] = attr
        else:
            continue
        if owner is not cls:  # (the class's own lazy property, converted, stays its own)
            generated.add(name)
    lazy = frozenset(n for n in names | set(recomputed) if isinstance(
        install[n] if n in install else class_attribute(cls, n),
        LazyToInstall | cached_lazy_property))
    return install, lazy, frozenset(generated)


def _resolve(cls: type, name: str) -> tuple[type, Any]:
    """The attribute ``name`` of ``cls`` ignoring what stable classes only re-exposed."""
    for base in cls.__mro__:
        spec = vars(base).get(SPEC)
        if name in vars(base) and (spec is None or name not in spec.generated):
            return base, vars(base)[name]
    raise AttributeError(name)  # pragma: no cover - names come from the MRO


def _own_pytree_methods(cls: type) -> tuple[Any, Any, dict[str, Any]] | None:
    """A user class's own ``(tree_flatten, tree_unflatten, attributes to install)``, which JAX
    should call for ``cls``; None when the field table describes the class.

    numpyro classes with their own methods are the hybrid ones of `stabledist._src.facts`,
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
        # a mirror: the user's methods must win over the fork's generic ones
        install = {n: _method_skipping_fork(cls, n) for n in _OWN_METHODS}
        flatten, unflatten = (install[n].__get__(None, cls) for n in _OWN_METHODS)
        return flatten, unflatten, install
    return None


def unknown_own_pytree(cls: type) -> None:
    """Raise for a numpyro class that defines its own pytree methods stabledist does not know
    (the hybrid classes of `stabledist._src.facts` are known): it would be flattened wrongly."""
    custom = set(_OWN_METHODS) & set(vars(cls))
    if custom and not facts_of(cls).hybrid:
        raise TypeError(
            f"{cls.__module__}.{cls.__qualname__} defines its own "
            f"{'/'.join(sorted(custom))}, which stabledist does not know; please report "
            "this numpyro class (new to stabledist) so that it can be covered")


def _method_skipping_fork(cls: type, name: str) -> Any:
    """``name`` as ``cls``'s MRO resolves it, ignoring the fork's generic bases."""
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
    for name in (*extra_data, *recomputed):  # the fork's word wins over an aux declaration
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


def batch_rule(cls: type, table: FieldTable, facts: Facts) -> BatchRule | None:
    """The `BatchRule` of a class with field table ``table``, or None when nothing in its
    leaves tells the batch shape (and it holds no distribution to give its shape back)."""
    data = table.data
    nested = tuple(n for n in data if n not in table.array_fields)
    if facts.keeps_batch:
        return BatchRule((), (), keep=True, restores_children=bool(nested))
    ranks = tuple((i, rank) for i, name in enumerate(data) if name in table.array_fields
                  and (rank := event_rank(cls, name, facts)) is not None)
    children = tuple((i, facts.child_offsets[n]) for i, n in enumerate(data)
                     if n in facts.child_offsets)
    if not ranks and not children:
        return None
    event_shaped = tuple(i for i, rank in ranks
                         if rank == EVENT or data[i] in facts.event_shaped)
    return BatchRule(ranks, children, restores_children=facts.children_keep_batch,
                     pure=not nested, event_shaped=event_shaped)


def event_rank(cls: type, name: str, facts: Facts | None = None) -> int | None:
    """The event rank of parameter ``name`` (`EVENT`: the instance's): the facts' override,
    else the first ``arg_constraints`` in the MRO that has it (None for a dependent constraint
    without one: it says nothing)."""
    overrides = (facts or facts_of(cls)).event_ranks
    if name in overrides:
        return overrides[name]
    for base in cls.__mro__:
        found: Mapping[str, Any] = vars(base).get("arg_constraints", {})
        if isinstance(found, Mapping) and name in found:
            try:
                return int(found[name].event_dim)
            except NotImplementedError:
                return None
    return None
