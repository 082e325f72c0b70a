"""The external weak-key cache that holds lazy values of distributions.

numpyro's ``lazy_property`` writes its value into the instance ``__dict__``. That changes what a
distribution *is* (its ``vars()``, ``get_args()``, pickles) and, under tracing, it would keep
tracers alive after their trace, so upstream skips caching under any trace. Here the values live
outside the instance, in one process-wide table keyed by the instance's identity and held by a
weak reference, so:

* the instance never changes: its pytree and ``vars()`` are the same whatever was read;
* an entry disappears the moment its instance is garbage-collected;
* a value is computed at most once per instance, also when several threads race for it;
* a lazy value of a distribution with concrete parameters is computed eagerly, op by op (under
  `jax.ensure_compile_time_eval`), even when first read inside ``jit``/``vmap``/``grad``: it is
  numpyro's eager value bit for bit, it is cached, and it enters the trace as a constant; a
  value computed from tracers is returned without being cached, so no tracer outlives its
  trace;
* a value the constructor was *given* or computed as an alternative parametrization
  (``MultivariateNormal(covariance_matrix=C)``) is *seeded*: it is state of that instance, kept
  exactly (tracer or not, it lives and dies with the instance, as its leaves do), survives
  `clear_cache`, and travels with copies and pickles; an instance rebuilt from the leaves
  (``tree_unflatten``) recomputes it, as numpyro does.
"""

from __future__ import annotations

import functools
import threading
import weakref
from collections.abc import Callable
from typing import Any, Generic, NamedTuple, TypeVar

import jax
import jax.numpy as jnp
import numpy as np
from jax.core import Tracer
from numpyro.distributions.util import lazy_property as _numpyro_lazy_property

__all__ = ["CacheInfo", "LazyValueCache", "cache_info", "cached_lazy_property", "clear_cache"]

try:  # jax's own "no trace is active" test (no public equivalent that works inside a trace)
    from jax._src.core import trace_state_clean as _eager
except ImportError as error:  # pragma: no cover - a jax release stabledist has not seen
    raise ImportError(
        "stabledist needs jax._src.core.trace_state_clean to tell eager code from traced code; "
        "this jax release does not have it. Install a jax version stabledist supports (see "
        "README) or report this; guessing would silently change numerics."
    ) from error


T = TypeVar("T")
_MISSING: Any = object()


class CacheInfo(NamedTuple):
    """How much the cache holds right now."""

    instances: int
    values: int


class _Entry:
    """One live instance's bookkeeping: the per-property tables that hold its values, the lock
    that makes each computation happen once, and the weak reference whose callback drops it."""

    __slots__ = ("lock", "ref", "seeded", "tables")

    def __init__(self) -> None:
        self.tables: dict[str, dict[int, Any]] = {}  # name -> the property's value table
        self.lock = threading.RLock()  # re-entrant: one lazy value may read another
        self.ref: weakref.ref[Any] | None = None
        self.seeded: frozenset[str] = frozenset()  # names the constructor set


class LazyValueCache:
    """Lazy values keyed by instance identity, released with the instance.

    Each lazy property owns a table ``id(instance) -> value``, so a hit is one dict lookup.
    Keys are ids, not instances, so distributions need neither ``__hash__`` nor ``__eq__``; an
    instance's weak-reference callback removes its values from every table when it dies,
    before its ``id`` can be reused.
    """

    def __init__(self) -> None:
        self._entries: dict[int, _Entry] = {}
        self._tables: dict[str, dict[int, Any]] = {}
        self._lock = threading.Lock()

    def table(self, name: str) -> dict[int, Any]:
        """The value table of the lazy property ``name`` (shared by all classes)."""
        with self._lock:
            return self._tables.setdefault(name, {})

    def get_or_compute(self, instance: T, name: str, compute: Callable[[T], Any]) -> Any:
        """Return the value of ``name``, computing it once and caching it if it is concrete."""
        table = self._tables.get(name) or self.table(name)
        entry = self._entry(instance)
        with entry.lock:
            value = table.get(id(instance), _MISSING)
            if value is not _MISSING:
                return value
            if _eager() or not _is_concrete(jax.tree_util.tree_leaves(instance)):
                # eager: nothing to hoist; traced leaves: compute in the trace, as numpyro does
                # (ensure_compile_time_eval there breaks e.g. shard_map's varying axes)
                value = compute(instance)
            else:  # concrete leaves under a trace: numpyro's eager value, hoisted as a constant
                with jax.ensure_compile_time_eval():
                    value = compute(instance)
            if _is_concrete(value):
                table[id(instance)] = value
                entry.tables[name] = table
            return value

    def seed(self, instance: object, name: str, value: Any) -> None:
        """Store ``value`` as state of ``instance`` given by its constructor (an alternative
        parametrization): kept even if traced, since it lives exactly as long as the instance
        and its leaves; read back as is; kept by `clear`."""
        table = self._tables.get(name) or self.table(name)
        entry = self._entry(instance)
        with entry.lock:
            table[id(instance)] = value
            entry.tables[name] = table
            entry.seeded = entry.seeded | {name}

    def seeded(self, instance: object) -> dict[str, Any]:
        """The values the constructor of ``instance`` set (empty if none)."""
        entry = self._entries.get(id(instance))
        if entry is None or not entry.seeded:
            return {}
        key = id(instance)
        return {name: entry.tables[name][key] for name in entry.seeded}

    def cached(self, instance: object) -> dict[str, Any]:
        """A copy of the values held for ``instance``, seeded or computed (empty if none)."""
        entry = self._entries.get(id(instance))
        if entry is None:
            return {}
        key = id(instance)
        return {name: table[key] for name, table in entry.tables.items() if key in table}

    def clear(self) -> None:
        """Forget every computed value (live instances recompute on their next read); values
        a constructor seeded are instance state and stay."""
        with self._lock:
            for key, entry in list(self._entries.items()):
                with entry.lock:
                    for name in [n for n in entry.tables if n not in entry.seeded]:
                        entry.tables.pop(name).pop(key, None)
                if not entry.tables:
                    del self._entries[key]

    def info(self) -> CacheInfo:
        return CacheInfo(len(self._entries), sum(len(t) for t in list(self._tables.values())))

    def _entry(self, instance: object) -> _Entry:
        key = id(instance)
        entry = self._entries.get(key)
        if entry is not None:
            return entry
        with self._lock:
            entry = self._entries.get(key)
            if entry is None:
                entry = _Entry()
                try:
                    entry.ref = weakref.ref(instance, functools.partial(self._drop, key))
                except TypeError:
                    raise TypeError(
                        f"{type(instance).__name__} instances cannot be weakly referenced "
                        "(a __slots__ without '__weakref__'?), so their lazy values cannot be "
                        "cached externally"
                    ) from None
                self._entries[key] = entry
            return entry

    def _drop(self, key: int, ref: weakref.ref[Any]) -> None:
        entries = self._entries
        entry = entries.get(key)
        if entry is not None and entry.ref is ref:
            del entries[key]
            for table in entry.tables.values():
                table.pop(key, None)


_CONCRETE_TYPES = frozenset({float, int, bool, np.ndarray, type(jnp.zeros(()))})


def _is_concrete(value: Any) -> bool:
    if type(value) in _CONCRETE_TYPES:
        return True
    if isinstance(value, Tracer):
        return False
    return not any(isinstance(leaf, Tracer) for leaf in jax.tree_util.tree_leaves(value))


CACHE = LazyValueCache()
"""The process-wide cache used by every stable distribution."""


def cache_info() -> CacheInfo:
    """Number of instances with cached values, and number of values, right now."""
    return CACHE.info()


def clear_cache() -> None:
    """Drop every cached lazy value (they are recomputed on next read)."""
    CACHE.clear()


class cached_lazy_property(_numpyro_lazy_property, Generic[T]):  # noqa: N801 - a decorator
    """A numpyro ``lazy_property`` whose value lives in `CACHE`, not in ``__dict__``.

    It subclasses numpyro's descriptor so numpyro code that recognises lazy properties
    (``get_args``, ``gather_pytree_data_fields``) keeps treating it as one. It is a non-data
    descriptor: a value a constructor stores under the same name wins, as it does upstream.
    """

    def __init__(self, wrapped: Callable[[Any], T], name: str | None = None) -> None:
        super().__init__(wrapped)
        self._bind(name or wrapped.__name__)

    def __set_name__(self, owner: type, name: str) -> None:
        self._bind(name)

    def _bind(self, name: str) -> None:
        self.name = name
        self._values = CACHE.table(name)

    def __get__(self, instance: Any, obj_type: type | None = None) -> Any:
        if instance is None:
            return self
        value = self._values.get(id(instance), _MISSING)
        if value is _MISSING:
            return CACHE.get_or_compute(instance, self.name, self.wrapped)
        return value
