"""Copies and pickles: a stable distribution carries the values it was given, and a mirror of
a user's class is found again in the process that loads it.

A copy or a pickle of a distribution carries its ``__dict__`` and the values its constructor
was *given* (an alternative parametrization, ``covariance_matrix=``), as numpyro's
``__dict__`` does; never the lazy values read since (numpyro's pickle grows with every read).
A mirror made by ``make_stable(cls)`` shares ``cls``'s name, so pickle cannot find it by name:
it is pickled as "the stable class of ``cls``" (`_from_source`), as are numpyro's mirrors, so a
loading process makes the mirror if it has not yet (mirrors are made on first use).
"""

from __future__ import annotations

from typing import Any

from numpyro.distributions.distribution import Distribution as _NumpyroDistribution

from stabledist._src.cache import CACHE
from stabledist._src.mirrors import stable_class
from stabledist._src.records import record_of

__all__ = ["_from_source", "reduce", "restore_state", "state_of"]


def _from_source(source: type) -> Any:
    """Unpickling: a bare instance of ``source``'s stable class (its state follows)."""
    cls: Any = stable_class(source)
    return cls.__new__(cls)


# Pickles name the unpickling function by module and name: the package's own name, which no
# move of private modules can break (`stabledist/__init__.py` exports it; pickles written by
# 0.1.0 name `stabledist.fork._from_source`, kept in `stabledist/fork.py`).
_from_source.__module__ = "stabledist"


def state_of(d: Any) -> Any:
    """``__getstate__``: the instance's ``__dict__``, with the values it was given if any."""
    given = CACHE.given(d)
    return (d.__dict__, given) if given else d.__dict__


def restore_state(d: Any, state: Any) -> None:
    """``__setstate__``: the state `state_of` gave, the given values given again."""
    given: dict[str, Any] = {}
    if isinstance(state, tuple):
        state, given = state
    vars(d).update(state)
    for name, value in given.items():
        CACHE.give(d, name, value)
    CACHE.constructed(d)


def reduce(d: Any, protocol: Any) -> Any:
    """``__reduce_ex__``: by the class's own name where pickle can find it, else (a mirror)
    through `_from_source`."""
    source = record_of(type(d)).source
    if source is type(d) or source is _NumpyroDistribution:
        return object.__reduce_ex__(d, protocol)
    return _from_source, (source,), state_of(d)
