"""A catalog of small, valid, deterministic examples for every public distribution.

Every public name of the installed ``numpyro.distributions`` (each ``Distribution`` subclass
and each factory function listed in ``__all__``) gets a *builder*: a function taking the
distributions **module** to build with (``numpyro.distributions`` or ``stabledist``, which
exposes the same names) and returning an instance.  Builders reach every class, nested base
distribution, transform and constraint through that module argument, so one builder yields a
numpyro instance or a stabledist instance with identical parameters; tests can therefore
compare the two implementations example by example.

Examples use fixed float32 parameters (no randomness), small event sizes (2-4) and a mix of
batch shapes ``()``, ``(2,)`` and ``(3,)``.  Every class that accepts ``validate_args`` is
built with ``validate_args=True`` so the parameters are checked against ``arg_constraints``.

The examples are fields of the catalog's records (`stabledist.testing._catalog_entries.CATALOG`,
one per name, beside everything else the tests know about the class); this module serves them
as the tables below, views of those records. ``tests/test_testing_api.py`` checks the catalog
against the installed numpyro.
"""

from __future__ import annotations

import types
from collections.abc import Callable
from typing import Any

import jax
import jax.numpy as jnp
import numpyro.distributions
from numpyro.distributions import Distribution

from stabledist._src.lazy import public_names as _public_names
from stabledist.testing._catalog_entries import CATALOG
from stabledist.testing._class_entry import Builder

__all__ = [
    "EXAMPLES",
    "EXCLUDED",
    "LOG_PROB_VALUES",
    "METHODS",
    "NOTES",
    "VARIANTS",
    "Builder",
    "all_builders",
    "example",
    "public_names",
    "supported_methods",
]

EXAMPLES: dict[str, Builder] = {n: e.example for n, e in CATALOG.items() if e.example is not None}
"""name -> builder.  Covers every public class and factory except those in ``EXCLUDED``."""

VARIANTS: dict[str, list[Builder]] = {n: list(e.variants) for n, e in CATALOG.items() if e.variants}
"""name -> extra builders for classes/factories with several construction branches."""

EXCLUDED: dict[str, str] = {n: e.no_example for n, e in CATALOG.items() if e.no_example}
"""Public names without a catalog example, and why: abstract, nothing to draw or compare (the
property suite leaves them out, and a test checks each is abstract)."""

LOG_PROB_VALUES: dict[str, Callable[[], jax.Array]] = {
    n: e.log_prob_value for n, e in CATALOG.items() if e.log_prob_value is not None}
"""name -> a valid value for ``log_prob`` where the example's own sample cannot be used."""

NOTES: dict[str, str] = {n: e.note for n, e in CATALOG.items() if e.note}
"""name -> known numpyro behaviour a test should be aware of."""

# ---------------------------------------------------------------------------------------------
# Public functions.
# ---------------------------------------------------------------------------------------------


def public_names(
    module: types.ModuleType = numpyro.distributions,
) -> tuple[list[str], list[str]]:
    """Return ``(class names, factory names)`` derived from ``module.__all__``.

    Classes are the subclasses of numpyro's ``Distribution``; factories are the functions that
    build distributions (``TruncatedNormal``, ``Categorical``), not helpers such as
    ``kl_divergence``. It is the rule stabledist's own namespace is made by, so the tests and
    the package agree on what is public; deriving the list instead of hard-coding it makes a
    numpyro upgrade that adds a name fail loudly.
    """
    return _public_names(module)


def example(name: str, module: types.ModuleType) -> Distribution:
    """Build the catalog example ``name`` with ``module``.

    Raises ``KeyError`` (with the reason) for excluded or unknown names, so a test
    parametrised over names cannot silently skip one.
    """
    if name in EXCLUDED:
        raise KeyError(f"{name!r} is excluded from the catalog: {EXCLUDED[name]}")
    try:
        builder = EXAMPLES[name]
    except KeyError:
        raise KeyError(f"{name!r} is not a known distribution name in the catalog") from None
    return builder(module)


def all_builders() -> list[tuple[str, Builder]]:
    """Every ``(id, builder)`` pair: the main examples then the variants (``Name[k]``), for the
    names the installed numpyro has (the catalog also covers names added by later releases)."""
    have = set(numpyro.distributions.__all__)
    out: list[tuple[str, Builder]] = [(n, b) for n, b in EXAMPLES.items() if n in have]
    for name, builders in VARIANTS.items():
        if name in have:
            out.extend((f"{name}[{k}]", b) for k, b in enumerate(builders, start=1))
    return out


METHODS: tuple[str, ...] = (
    "sample",
    "log_prob",
    "mean",
    "variance",
    "cdf",
    "icdf",
    "entropy",
    "enumerate_support",
)
"""Methods probed by `supported_methods`, in reporting order."""


_UNSUPPORTED = (NotImplementedError, ImportError)
"""Exceptions meaning "not available": not implemented, or needs an absent optional dependency
(numpyro's Beta/Gamma/StudentT ``icdf`` raise ImportError without tensorflow_probability)."""


def supported_methods(
    d: Distribution, key: jax.Array | None = None, value: jax.Array | None = None
) -> tuple[str, ...]:
    """Names from ``METHODS`` that work for ``d``, found by calling each once.

    ``NotImplementedError`` (and ``ImportError``, see ``_UNSUPPORTED``) means "unsupported";
    any other exception propagates, since it signals a broken example rather than a missing
    feature.  ``log_prob`` and ``cdf`` are evaluated at ``value`` (default: ``d.sample(key)``),
    ``icdf`` at 0.5 with ``d``'s batch shape, and ``enumerate_support`` is only tried when
    ``d.has_enumerate_support``.  Probing at call time (not import time) keeps the answer
    honest for whatever numpyro and optional dependencies are installed.
    """
    key = jax.random.PRNGKey(0) if key is None else key
    found: list[str] = []
    try:
        sample: Any = d.sample(key)
        found.append("sample")
    except _UNSUPPORTED:
        sample = None
    if value is None:
        value = sample
    probes: dict[str, Callable[[], object]] = {
        "mean": lambda: d.mean,
        "variance": lambda: d.variance,
        "icdf": lambda: d.icdf(jnp.full(d.batch_shape, 0.5, dtype=jnp.float32)),
        "entropy": d.entropy,
    }
    if value is not None:
        probes["log_prob"] = lambda: d.log_prob(value)
        probes["cdf"] = lambda: d.cdf(value)
    if d.has_enumerate_support:
        probes["enumerate_support"] = d.enumerate_support
    for method in METHODS[1:]:
        if method not in probes:
            continue
        try:
            probes[method]()
        except _UNSUPPORTED:
            continue
        found.append(method)
    return tuple(found)
