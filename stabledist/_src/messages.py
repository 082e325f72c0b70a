"""Errors that say what to pass: where numpyro's own error for a common mistake says nothing
useful, the same exception, of the same type, with a message naming the mistake and the fix.

Only ``sample`` is explained, and only on stabledist's own mirrors of numpyro's classes
(`explaining`, installed by `stabledist._src.describe`): a mirror's MRO holds nothing but
mirrors before the class it mirrors, so the wrapper calls exactly the method Python would have
resolved, and only acts when it raises. A user's class never gets one: what it defines, at any
depth, is what runs. ``log_prob`` is not wrapped: numpyro warns about out-of-support values at
the first frame outside numpyro, and a wrapper's frame would take the user's line.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any

from numpyro.util import is_prng_key

from stabledist._src.records import find

__all__ = ["EXPLAINED", "explaining"]

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
