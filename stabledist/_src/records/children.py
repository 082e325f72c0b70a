"""The distributions a distribution holds: one walk, used by every module that needs them.

A distribution holds others in its data fields (``Independent.base_dist``), directly or in a
list or tuple (``MixtureGeneral``'s components). For a stable class the fields that may hold
one are its record's ``nested`` fields; a numpyro instance (one being made stable) is looked
at whole. The cache finds what holds an assigned distribution (its holders' values are
dropped), construction replaces numpyro children by stable copies, batch shapes
are restored or settled child by child, slices slice each child: all through `held` and
`replace_held`, so a list and a tuple mean the same everywhere.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

from numpyro.distributions.distribution import Distribution as _NumpyroDistribution

from stabledist._src.records.records import find

__all__ = ["descendants", "held", "holding_fields", "is_distribution", "replace_held",
           "replace_held_in"]

_META = type(_NumpyroDistribution)


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
    """The distributions ``d`` holds, directly or in a list or tuple field, in field order. A
    stable instance's fields are read as attributes: reading ``__dict__`` would give an
    instance whose attributes CPython keeps inline a dict object for good (one more object for
    the garbage collector, on every construction of a holder)."""
    record = find(type(d))
    if record is None:
        return _held_in(list(getattr(d, "__dict__", {}).values()))
    if not record.nested:
        return []
    values = []
    for name in record.nested:
        try:
            values.append(_getattribute(d, name))
        except AttributeError:  # an unset field
            pass
    return _held_in(values)


def _held_in(values: list[Any]) -> list[Any]:
    found = []
    for value in values:
        kind = type(value)
        if kind is list or kind is tuple:
            for element in value:
                if isinstance(type(element), _META):
                    found.append(element)
        elif isinstance(kind, _META):
            found.append(value)
    return found


_getattribute = object.__getattribute__


def descendants(d: Any) -> list[Any]:
    """Every distribution below ``d``: what it holds, what those hold, ... (each once). Runs
    for every holder with values when a distribution is assigned to: a holder whose children
    hold nothing (the common case) costs one `held` and one record lookup per child."""
    found = held(d)
    seen: set[int] | None = None
    i = 0
    while i < len(found):
        child = found[i]
        i += 1
        record = find(type(child))
        if record is not None and not record.nested:
            continue
        for grandchild in held(child):
            if seen is None:
                seen = {id(x) for x in found}
            if id(grandchild) not in seen:
                seen.add(id(grandchild))
                found.append(grandchild)
    return found


def _field(d: Any, name: str) -> Any:
    try:
        return object.__getattribute__(d, name)
    except AttributeError:  # an unset field
        return None


def replace_held_in(d: Any, replace: Callable[[Any], Any]) -> None:
    """`replace_held` on a stable instance itself, its fields read and set as attributes (no
    ``__dict__`` object made: see `held`; ``object.__setattr__``: no bookkeeping)."""
    record = find(type(d))
    if record is None or not record.nested:
        return
    for name in record.nested:
        value = _field(d, name)
        if isinstance(type(value), _META):
            new = replace(value)
            if new is not value:
                object.__setattr__(d, name, new)
        elif (type(value) is list or type(value) is tuple) and value:
            new_items = [replace(v) if isinstance(type(v), _META) else v for v in value]
            if any(a is not b for a, b in zip(new_items, value)):
                object.__setattr__(d, name, type(value)(new_items))


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
        elif (type(value) is list or type(value) is tuple) and value:
            new_items = [replace(v) if isinstance(type(v), _META) else v for v in value]
            if any(a is not b for a, b in zip(new_items, value)):
                state[name] = type(value)(new_items)
