"""What stabledist tells a user about their own distribution classes, at their own line.

Three mistakes only a user's class can make, each reported once per class as a
`UserWarning` at the first frame outside stabledist, numpyro and JAX: attributes outside the
field table (a `make_stable` class: ``tree_unflatten`` drops them), and, in a class's own
``tree_flatten``, a lazy value returned as a leaf (derived from other leaves: a ``tree_map``
would let them disagree) or a ``set`` (ordered by ``PYTHONHASHSEED``).
"""

from __future__ import annotations

import os
import sys
import warnings
from collections.abc import Callable
from typing import Any

import jax
import numpyro

from stabledist._src.lazy import CACHE
from stabledist._src.records import ClassRecord

__all__ = ["checked_own_flatten", "lint", "warn_undeclared", "watches"]

_linted: set[type] = set()  # classes made by make_stable: attributes outside the table warn
_warned: set[type] = set()  # classes whose undeclared attributes were reported

# Frames a warning skips to reach the user's line: stabledist's, numpyro's and JAX's (a flatten
# is reached through `jax.tree.flatten`, `jax.tree_util`, `jit`, an MCMC run, ... with more or
# fewer frames each). Each is its package's directory: `stabledist/` is two above this file.
_INTERNAL_DIRS = tuple(
    os.path.dirname(path) + os.sep
    for path in (os.path.dirname(os.path.dirname(__file__)), jax.__file__, numpyro.__file__)
)


def warn_at_caller(message: str) -> None:
    """A `UserWarning` at the first frame outside stabledist, numpyro and JAX: the user's line,
    however many internal frames lead here (Python 3.12's ``skip_file_prefixes``, by hand)."""
    frame, level = sys._getframe(), 1
    while frame is not None and frame.f_code.co_filename.startswith(_INTERNAL_DIRS):
        frame, level = frame.f_back, level + 1
    warnings.warn(message, stacklevel=level)  # UserWarning, the default


def lint(cls: type) -> None:
    """Report attributes outside ``cls``'s field table (a class made by `make_stable`, and its
    subclasses): its user wrote it for numpyro, where nothing drops them silently."""
    _linted.add(cls)


def watches(cls: type) -> bool:
    """Whether an instance of ``cls`` is checked for undeclared attributes (its class or a
    base was made by `make_stable`, and no warning was given yet). Hot: every construction."""
    if cls in _warned:
        return False
    return any(c in _linted for c in cls.__mro__)


def warn_undeclared(cls: type, instance: Any, record: ClassRecord) -> None:
    """Once per class made by `make_stable` (and its subclasses): attributes outside the field
    table do not survive tree_unflatten. A numpyro-style subclass (of `stabledist.Distribution`,
    or converted by `stable_internals`) drops such attributes in tree_unflatten exactly as
    numpyro does, and gets no warning numpyro would not give (under ``-W error`` it would
    raise)."""
    if not watches(cls):
        return
    extra = sorted(instance.__dict__.keys() - record.fields)
    if not extra:
        return
    _warned.add(cls)
    warn_at_caller(
        f"{cls.__qualname__} sets attribute(s) {extra} that are not pytree fields, so "
        "tree_unflatten (jit, vmap, scan, ...) drops them; declare them in "
        "pytree_data_fields (arrays, distributions) or pytree_aux_fields (static values)"
    )


def checked_own_flatten(cls: type, flatten: Callable[[Any], Any]) -> Callable[[Any], Any]:
    """A user's flatten, checked on its first call for an instance of exactly ``cls``."""
    checked = False

    def flatten_checked(d: Any) -> Any:
        nonlocal checked
        children, aux = flatten(d)
        if not checked and type(d) is cls:
            checked = True
            _check_own_flatten(cls, d, children, aux)
        return children, aux

    return flatten_checked


def _check_own_flatten(cls: type, d: Any, children: Any, aux: Any) -> None:
    cached = {id(v): name for name, v in CACHE.values_of(d).items()}
    lazy = sorted({cached[id(c)] for c in children if id(c) in cached})
    if lazy:
        warn_at_caller(
            f"{cls.__qualname__}.tree_flatten returns the lazy value(s) {lazy} as leaves: "
            "they are derived from other leaves, so a tree_map would let them disagree; "
            "return the parametrization only (stabledist keeps lazy values in its cache)"
        )
    parts = (children, aux, *(aux if isinstance(aux, tuple | list) else ()))
    unordered = [type(x).__name__ for x in parts if isinstance(x, set | frozenset)]
    if unordered:
        warn_at_caller(
            f"{cls.__qualname__}.tree_flatten returns a {unordered[0]}: its order follows "
            "PYTHONHASHSEED, so the pytree differs between processes; return a tuple in a "
            "fixed order (gather_pytree_data_fields() is ordered on stable classes)"
        )
