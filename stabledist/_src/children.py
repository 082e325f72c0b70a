"""The distributions a distribution holds: one walk, used by every module that needs them.

A distribution holds others in its data fields (``Independent.base_dist``), directly or in a
list or tuple (``MixtureGeneral``'s components). For a stable class the fields that may hold
one are its record's ``nested`` fields; a numpyro instance (one being made stable) is looked
at whole. The cache records what a holder holds (an assignment to a held distribution drops
its holders' values), construction replaces numpyro children by stable copies, batch shapes
are restored or settled child by child, slices slice each child: all through `held` and
`replace_held`, so a list and a tuple mean the same everywhere.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from typing import Any, cast

from numpyro.distributions.distribution import Distribution as _NumpyroDistribution

from stabledist._src.records import find

__all__ = ["descendants", "held", "holding_fields", "is_distribution", "replace_held"]

_META = type(_NumpyroDistribution)
_SEQUENCES = (list, tuple)


def is_distribution(value: Any) -> bool:
    """Whether ``value`` is a (numpyro or stable) distribution. By its metaclass: this runs on
    every element of list fields, and ``isinstance`` against numpyro's classes goes through
    their metaclass's ``__instancecheck__``."""
    return isinstance(type(value), _META)


def holding_fields(d: Any) -> Iterable[str]:
    """The fields of ``d`` that may hold distributions: its class record's ``nested`` fields,
    or every attribute of a distribution whose class has no record."""
    record = find(type(d))
    return record.nested if record is not None else list(getattr(d, "__dict__", ()))


def held(d: Any) -> list[Any]:
    """The distributions ``d`` holds, directly or in a list or tuple field, in field order."""
    state = getattr(d, "__dict__", {})
    found = []
    for name in holding_fields(d):
        value = state.get(name)
        if isinstance(type(value), _META):
            found.append(value)
        elif type(value) in _SEQUENCES:
            found.extend(v for v in cast(Sequence[Any], value) if isinstance(type(v), _META))
    return found


def descendants(d: Any) -> list[Any]:
    """Every distribution below ``d``: what it holds, what those hold, ... (each once)."""
    found: dict[int, Any] = {}
    pending = held(d)
    while pending:
        child = pending.pop()
        if id(child) not in found:
            found[id(child)] = child
            pending.extend(held(child))
    return list(found.values())


def replace_held(state: dict[str, Any], names: Iterable[str],
                 replace: Callable[[Any], Any]) -> None:
    """Put ``replace(child)`` in place of each distribution held in the fields ``names`` of
    ``state`` (an instance's ``__dict__``, or a copy of one): lists stay lists, tuples stay
    tuples, and a field none of whose children is replaced keeps its own object."""
    for name in names:
        value = state.get(name)
        if isinstance(type(value), _META):
            new = replace(value)
            if new is not value:
                state[name] = new
        elif type(value) in _SEQUENCES and value:
            new_items = [replace(v) if isinstance(type(v), _META) else v for v in value]
            if any(a is not b for a, b in zip(new_items, value)):
                state[name] = type(value)(new_items)
