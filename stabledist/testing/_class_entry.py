"""What the tests must know about one numpyro class, as one record: `ClassEntry` (its catalog
example and variants, how to draw its arguments, its alternative parametrizations, its float64
checks, and numpyro's quirks with their reasons), and the plain-array helpers its builders use.

The records themselves are in `_entries_continuous`, `_entries_discrete` and `_entries_wrappers`
(one module would pass 600 lines), merged into `stabledist.testing._catalog_entries.CATALOG`.
Every other per-class table of the tests is a view of `CATALOG`, so each fact has one home.
Run-time facts (hybrid fields, batch shapes, slicing) are the fork's, in
``stabledist/_src/records/facts.py``, never here.

A quirk (`NumpyroFailure`, `UpstreamFailure`, ``promote_wrong``, ``catalog_only``,
``not_parametrizations``, ``log_prob_value``) carries what shows it still holds;
``tests/test_catalog.py`` (and `test_upstream_failures_still_fail` /
``test_numpyro_promote_wrong_still_needed``) fail once an entry is no longer needed.
"""

from __future__ import annotations

import types
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import jax
import jax.numpy as jnp
import numpy as np
from numpyro.distributions import Distribution

if TYPE_CHECKING:  # the hints import this module's helpers
    from stabledist.testing._hints import Hint

__all__ = ["Builder", "ClassEntry", "NumpyroFailure", "UpstreamFailure", "round_trip"]

Builder = Callable[[types.ModuleType], Distribution]
"""Builds one distribution instance using the given distributions module."""


@dataclass(frozen=True)
class NumpyroFailure:
    """numpyro's own pytree breaks a program that stabledist's runs: where numpyro raises for
    the class, stabledist's outcome is its own (`same_outcome`: returning is the documented
    improvement). ``program`` run on numpyro's instance of the catalog example ``shown_by``
    (default: the class's own) still raises ``raises`` (its text matching ``match``, where
    given); the test of that tells when numpyro is fixed and the entry must go."""

    reason: str
    program: Callable[[Any], object]
    raises: type[BaseException]
    match: str | None = None
    shown_by: str | None = None


@dataclass(frozen=True)
class UpstreamFailure:
    """A read (``method``) that fails under the transformation of property ``prop`` for
    numpyro's own class (a JAX or numpyro bug, not stabledist's): only that read is left out
    of the property; `test_upstream_failures_still_fail` re-runs it on numpyro's class and
    expects an error matching ``match``."""

    prop: str
    method: str
    match: str
    reason: str


@dataclass(frozen=True)
class ClassEntry:
    """Everything the tests must know about one public name of ``numpyro.distributions``.

    ``example``: a builder (module -> instance, every class, nested distribution, transform
    and constraint reached through the module); ``variants``: builders of other construction
    branches; ``no_example``: why there is none (abstract). ``log_prob_value`` / ``note``: a
    valid ``log_prob`` argument where the example's own sample cannot be one, and why.
    ``hint`` draws arguments ``arg_constraints`` do not describe; ``catalog_only``: why the
    property suite draws the class from the catalog only. ``parametrizations``: the class's
    alternative constructor keywords (`testing.parametrizations` must derive exactly these);
    ``not_parametrizations``: optional constrained keywords that are not alternatives, and
    why; ``alternatives``: one builder per keyword, equal shapes (tests/test_parametrizations.py).
    ``float64``: cast to float64 by ``make test-x64``; ``x64_switch``: also under a scoped
    ``jax.enable_x64`` in ``make test``. ``numpyro_fails``, ``upstream_failures`` and
    ``promote_wrong`` (numpyro's default `promote_batch_shape` gives a wrong batch shape for
    the vmapped class, and why) are numpyro's quirks.
    """

    example: Builder | None = None
    variants: tuple[Builder, ...] = ()
    no_example: str | None = None
    log_prob_value: Callable[[], jax.Array] | None = None
    note: str | None = None
    hint: Hint | None = None
    catalog_only: str | None = None
    parametrizations: tuple[str, ...] = ()
    not_parametrizations: Mapping[str, str] = field(default_factory=dict)
    alternatives: Mapping[str, Builder] = field(default_factory=dict)
    float64: bool = False
    x64_switch: bool = False
    numpyro_fails: NumpyroFailure | None = None
    upstream_failures: tuple[UpstreamFailure, ...] = ()
    promote_wrong: str | None = None


def round_trip(d: Any) -> Any:
    """``d`` rebuilt from its leaves by its own ``tree_unflatten`` (numpyro's, for numpyro's
    instance): what every transformation does at its boundary."""
    leaves, treedef = jax.tree_util.tree_flatten(d)
    return jax.tree_util.tree_unflatten(treedef, leaves)


# ---------------------------------------------------------------------------------------------
# Plain-array helpers of the builders (nothing here touches a distribution class).
# ---------------------------------------------------------------------------------------------


def _a(x: Any) -> jax.Array:
    """float32 jnp array, so numpyro and stabledist see bit-identical parameters."""
    return jnp.asarray(x, dtype=jnp.float32)


def _i(x: Any) -> jax.Array:
    """int32 jnp array for count parameters."""
    return jnp.asarray(x, dtype=jnp.int32)


def _cov3() -> jax.Array:
    """A fixed, well-conditioned 3x3 symmetric positive definite matrix."""
    return _a([[2.0, 0.5, 0.2], [0.5, 1.5, 0.3], [0.2, 0.3, 1.0]])


def _cov2() -> jax.Array:
    """A fixed 2x2 symmetric positive definite matrix."""
    return _a([[1.0, 0.3], [0.3, 0.5]])


def _corr3() -> jax.Array:
    """A fixed 3x3 correlation matrix (unit diagonal, positive definite)."""
    return _a([[1.0, 0.4, 0.1], [0.4, 1.0, -0.3], [0.1, -0.3, 1.0]])


def _loc3() -> jax.Array:
    """A fixed location vector of size 3 (the alternative parametrizations' builders)."""
    return _a([0.5, -1.0, 2.0])


def _row4() -> jax.Array:
    """A fixed first row of a 4x4 positive definite circulant covariance."""
    return _a([2.0, 0.5, 0.2, 0.5])


def _ring_adjacency(n: int = 4) -> np.ndarray:
    """Dense symmetric adjacency matrix of an ``n``-cycle (every site has two neighbours)."""
    adj = np.zeros((n, n), dtype=np.float32)
    for k in range(n):
        adj[k, (k + 1) % n] = adj[(k + 1) % n, k] = 1.0
    return adj


def _ou_sde(y: jax.Array, t: jax.Array) -> tuple[jax.Array, jax.Array]:
    """Ornstein-Uhlenbeck drift/diffusion for EulerMaruyama.

    Module level (not a lambda) so that it is the *same* hashable object on every build:
    it is a pytree aux field, and aux fields must compare equal across instances.
    """
    return -0.5 * y, jnp.ones_like(y)
