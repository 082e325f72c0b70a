"""The class record: what stabledist knows about one stable class, frozen, in one table.

`stabledist._src.construction.describe` computes a class's `ClassRecord` (pure: from the class, the
class it mirrors and `stabledist._src.records.facts`); the registration
(`stabledist._src.construction.describe.register`) adds it here, once, before anything reads it.
Nothing writes a record afterwards: what other modules keep per class at run time (the generated
pytree functions, hoisting's decisions and programs, derived batch shapes, the warnings given) lives
in each module's own table, keyed by class, as equinox keeps per-class state.

The table also maps each mirrored class to its stable class (``MIRRORS``): a numpyro class or a
user's class given to ``make_stable`` -> the stable subclass made for it.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from stabledist._src.records.facts import Facts, Offset, StaticPredicate

__all__ = ["BASE_AUX", "MIRRORS", "VALIDATE", "BatchRule", "ClassRecord", "FieldTable", "add",
           "find", "is_stable_class", "mirror_of", "record_of"]

BASE_AUX = ("_batch_shape", "_event_shape")
"""Aux fields every distribution has (``_validate_args`` is put last)."""

VALIDATE = "_validate_args"


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


@dataclass(frozen=True)
class BatchRule:
    """Where a class's batch shape can be read from its leaves (TFP's ``parameter_properties``
    in spirit: an event rank per parameter). ``arrays`` are ``(leaf index, event rank)``
    (`stabledist._src.records.facts.EVENT`: the instance's event rank), ``children`` ``(leaf index,
    offset)`` for nested distributions whose batch shape tells the parent's; ``event_shaped``
    leaves end in the event shape. ``keep``: the batch shape is not a function of the leaves
    (stored one kept); ``restores_children``: after an unflatten that keeps this parent's
    shape, its nested distributions keep theirs too; ``pure``: parameters only (no field may
    hold a distribution), so the answer depends on the leaf shapes alone."""

    arrays: tuple[tuple[int, int], ...]
    children: tuple[tuple[int, Offset], ...]
    keep: bool = False
    restores_children: bool = False
    pure: bool = False
    event_shaped: tuple[int, ...] = ()


@dataclass(frozen=True, eq=False)
class ClassRecord:
    """What `stabledist._src.construction.describe.describe` found for a stable class. ``source`` is
    the class it mirrors (numpyro's or a user's class given to ``make_stable``), or the class
    itself. ``lazy``: names that resolve to cached lazy properties (a constructor's assignment
    to one is a given value); ``generated``: names the class holds only to restore MRO
    precedence; ``added``: names the registration set that the class statement did not write
    (what the class's numpyro twin leaves out); ``fields``: everything an instance's
    ``__dict__`` may hold by declaration;
    ``nested``: data fields that may hold distributions; ``event_ranks``: each parameter's
    event rank where known (`stabledist._src.records.facts.EVENT`: the instance's), read by batch
    shapes and slices alike; ``batch``: where the batch shape is read from the leaves (None:
    nowhere);
    ``own``: a user class's own ``(tree_flatten, tree_unflatten)``."""

    qualname: str
    source: type
    facts: Facts
    table: FieldTable
    lazy: frozenset[str]
    generated: frozenset[str]
    added: frozenset[str]
    fields: frozenset[str]
    nested: tuple[str, ...]
    event_ranks: Mapping[str, int]
    batch: BatchRule | None
    own: tuple[Callable[..., Any], Callable[..., Any]] | None


_RECORDS: dict[type, ClassRecord] = {}
MIRRORS: dict[type, type] = {}
"""A mirrored class -> its stable class (numpyro's classes are not ours to annotate)."""


def add(cls: type, record: ClassRecord) -> None:
    """Record ``cls``'s record (the registration, once per class)."""
    _RECORDS[cls] = record
    if record.source is not cls:
        MIRRORS[record.source] = cls


def record_of(cls: type) -> ClassRecord:
    """The record of the stable class ``cls`` (KeyError for any other class)."""
    return _RECORDS[cls]


find: Callable[[type], ClassRecord | None] = _RECORDS.get
"""The record of a class, or None for a class that is not stable (one dict lookup)."""


def is_stable_class(cls: type) -> bool:
    """Whether ``cls`` is a registered stable class."""
    return cls in _RECORDS


def mirror_of(source: type) -> type | None:
    """The stable class made for ``source`` so far, or None."""
    return MIRRORS.get(source)
