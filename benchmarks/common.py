"""Helpers shared by the benchmarks: the two distribution modules, lazy-property lookup,
deterministic test matrices."""

from __future__ import annotations

import types
import warnings
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any
from unittest.mock import patch

import numpy as np
import numpyro.distributions as nd
from numpyro.distributions.distribution import Distribution as NumpyroDistribution
from numpyro.distributions.util import lazy_property

import stabledist as sd
from stabledist._src.lazy.introspect import class_attribute, lazy_names
from stabledist._src.lazy.reads import cached_lazy_property, lazy_property_of

__all__ = ["MODULES", "fresh_process_cases", "is_stable_lazy", "lazy_names", "quiet",
           "recompute_fn", "spd", "unchecked"]

MODULES: dict[str, types.ModuleType] = {"numpyro": nd, "stabledist": sd}
"""The two implementations, by variant name."""


@contextmanager
def quiet() -> Iterator[None]:
    """Silence construction warnings (e.g. numpyro's about validation under jit)."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        yield


@contextmanager
def unchecked() -> Iterator[None]:
    """Quiet builds whose argument checks are skipped: the catalog's examples ask for
    ``validate_args=True``, and the checks compile eager operations of their own (a third of
    the time of the catalog's first builds). What the checks do to the instance stays: they
    gather its arguments (`get_args`, which asks for its ``__dict__``, and so changes how
    CPython holds its fields and how fast an attribute read is), as here."""
    skipped = patch.object(NumpyroDistribution, "validate_args",
                           lambda self, strict=True: self.get_args() and None)
    with skipped, quiet():
        yield


def recompute_fn(cls: type, name: str) -> Callable[[Any], Any]:
    """The no-cache read of a lazy property: its wrapped function, called on every read."""
    attr = lazy_property_of(class_attribute(cls, name))
    if not isinstance(attr, lazy_property):
        raise TypeError(f"{cls.__name__}.{name} is not a lazy property here")
    return attr.wrapped


def is_stable_lazy(cls: type, name: str) -> bool:
    return isinstance(class_attribute(cls, name), cached_lazy_property)


def spd(n: int, seed: int = 0) -> np.ndarray:
    """A well-conditioned symmetric positive definite ``n x n`` float32 matrix."""
    a = np.random.default_rng(seed).standard_normal((n, n)).astype(np.float32)
    return (a @ a.T / n + np.eye(n, dtype=np.float32)).astype(np.float32)


FRESH_PHASES = {"trace_s": "first trace", "compile_s": "compile"}
PROGRAMS = Path(__file__).with_name("programs.py")


def fresh_process_cases(program: str, args: tuple, processes: int, label: str,
                        params: dict[str, Any], **kwargs: Any) -> list[Any]:
    """The first trace and compile of ``jax.jit(benchmarks.programs:<program>)(*args)``
    (``kwargs`` bound) in fresh processes, the first thing jitted there, as a user's first
    ``jit`` pays it, measured by `stabledist.benchmark.function` (calls timed briefly: they
    are not these cases)."""
    from stabledist import benchmark
    from stabledist.benchmark._measure import Case

    # by its file: the benchmarks package imports stabledist's own modules, and numpyro's
    # process must not
    report = benchmark.function(f"{PROGRAMS}:{program}", *args, processes=processes, reps=2,
                                rep_ms=2.0, fork=True, quiet=True, **kwargs)
    return [Case(f"{label}: {FRESH_PHASES[c.params['phase']]} (fresh process)",
                 {**params, "kind": f"{params['kind']}_{c.params['phase'].removesuffix('_s')}"},
                 c.samples)
            for c in report.cases if c.params["phase"] in FRESH_PHASES]
