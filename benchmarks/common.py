"""Helpers shared by the benchmarks: the two distribution modules, lazy-property lookup,
fresh copies, deterministic test matrices."""

from __future__ import annotations

import types
import warnings
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import jax
import numpy as np
import numpyro.distributions as nd
from numpyro.distributions.util import lazy_property

import stabledist as sd
from stabledist._src.lazy.cache import CACHE
from stabledist._src.lazy.introspect import class_attribute, lazy_names
from stabledist._src.lazy.reads import cached_lazy_property, lazy_property_of

__all__ = ["MODULES", "block", "fresh_copy", "is_stable_lazy", "lazy_names", "quiet",
           "recompute_fn", "spd"]

MODULES: dict[str, types.ModuleType] = {"numpyro": nd, "stabledist": sd}
"""The two implementations, by variant name."""


@contextmanager
def quiet() -> Iterator[None]:
    """Silence construction warnings (e.g. numpyro's about validation under jit)."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        yield


def recompute_fn(cls: type, name: str) -> Callable[[Any], Any]:
    """The no-cache read of a lazy property: its wrapped function, called on every read."""
    attr = lazy_property_of(class_attribute(cls, name))
    if not isinstance(attr, lazy_property):
        raise TypeError(f"{cls.__name__}.{name} is not a lazy property here")
    return attr.wrapped


def is_stable_lazy(cls: type, name: str) -> bool:
    return isinstance(class_attribute(cls, name), cached_lazy_property)


def fresh_copy(template: Any) -> Any:
    """A new instance with ``template``'s constructor state, as if just constructed.

    numpyro keeps lazy values a constructor computed in ``__dict__`` (copied here); stabledist
    keeps them in the cache as the template's seeded values, so they are seeded for the
    copy (untimed), otherwise the copy would pay for values a real fresh instance has.
    """
    cls = type(template)
    copy = cls.__new__(cls)
    copy.__dict__.update(template.__dict__)
    for name, value in CACHE.given(template).items():
        CACHE.give(copy, name, value)
    return copy


def spd(n: int, seed: int = 0) -> np.ndarray:
    """A well-conditioned symmetric positive definite ``n x n`` float32 matrix."""
    rng = np.random.default_rng(seed)
    a = rng.standard_normal((n, n)).astype(np.float32)
    return (a @ a.T / n + np.eye(n, dtype=np.float32)).astype(np.float32)


def block(value: Any) -> Any:
    return jax.block_until_ready(value)
