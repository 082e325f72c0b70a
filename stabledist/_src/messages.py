"""Errors that say what to pass: where numpyro's own error for a common mistake says nothing
useful, the same exception, of the same type, with a message naming the mistake and the fix.

Each class's ``sample`` and ``log_prob`` are wrapped (`explaining`, installed by
`stabledist._src.describe`); the wrapper only acts when the method raises, so a call that
succeeds is numpyro's call, one frame deeper. Per class, with ``functools.wraps``: the
wrapper carries each class's own signature and annotations (``typing.get_type_hints``).
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any

from numpyro.util import is_prng_key

from stabledist._src.records import find

__all__ = ["EXPLAINED", "explaining"]

EXPLAINED = ("sample", "log_prob")
"""The methods whose errors are explained."""

_MARK = "_stabledist_explained"


def explaining(cls: type, name: str) -> Callable[..., Any] | None:
    """``cls``'s own method ``name`` (the first in its MRO that is not one of these
    wrappers), wrapped so that its errors say what to pass; None where the one ``cls``
    inherits wraps it already, or it has none."""
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
