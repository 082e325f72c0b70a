"""The external weak-key cache that holds lazy values of distributions.

numpyro's ``lazy_property`` writes its value into the instance ``__dict__``. That changes what a
distribution *is* (its ``vars()``, ``get_args()``, pickles) and, under tracing, it would keep
tracers alive after their trace, so upstream skips caching under any trace. Here the values live
outside the instance, in one process-wide table keyed by the instance's identity and held by a
weak reference, so:

* the instance never changes: its pytree and ``vars()`` are the same whatever was read;
* an entry disappears the moment its instance is garbage-collected;
* a value is computed at most once per instance, also when several threads race for it;
* a lazy value of a distribution with concrete parameters is computed eagerly (under
  `jax.ensure_compile_time_eval`), even when first read inside ``jit``/``vmap``/``grad``,
  cached, and enters the trace as a constant; a value that depends on tracers is returned
  without being cached, so no tracer outlives its trace.
"""

from __future__ import annotations

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

try:  # jax's own "no trace is active" test; absent in some future jax: always be careful then
    from jax._src.core import trace_state_clean as _eager
except ImportError:  # pragma: no cover

    def _eager() -> bool:
        return False


T = TypeVar("T")
_MISSING: Any = object()


class CacheInfo(NamedTuple):
    """How much the cache holds right now."""

    instances: int
    values: int


class _KeyedRef(weakref.ref):  # type: ignore[type-arg]
    """A weak reference that knows its cache key, so one bound method serves as every
    entry's callback (as in WeakValueDictionary) instead of a closure per entry."""

    __slots__ = ("key",)

    def __new__(cls, obj: Any, callback: Any, key: int) -> _KeyedRef:
        self = super().__new__(cls, obj, callback)
        self.key = key
        return self

    def __init__(self, obj: Any, callback: Any, key: int) -> None:
        super().__init__(obj, callback)


class _Entry:
    """One live instance's bookkeeping: the per-property tables that hold its values, the lock
    that makes each computation happen once, and the weak reference whose callback drops it."""

    __slots__ = ("lock", "ref", "tables")

    def __init__(self) -> None:
        self.tables: dict[str, dict[int, Any]] = {}  # name -> the property's value table
        self.lock = threading.RLock()  # re-entrant: one lazy value may read another
        self.ref: weakref.ref[Any] | None = None


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

    def get_or_compute(
        self,
        instance: T,
        name: str,
        compute: Callable[[T], Any],
        compiled: Callable[[T], Any] | None = None,
    ) -> Any:
        """Return the value of ``name``, computing it once and caching it if it is concrete.

        ``compiled`` (``jax.jit(compute)``) is used for the first read inside a trace.
        """
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
            else:
                with jax.ensure_compile_time_eval():
                    value = _compiled_or_eager(instance, compute, compiled)
            if _is_concrete(value):
                table[id(instance)] = value
                entry.tables[name] = table
            return value

    def adopt(self, instance: object, name: str, value: Any) -> bool:
        """Take over a lazy value numpyro already cached in some ``__dict__`` (for a numpyro
        instance being copied into its stable class). Traced values are refused."""
        if not _is_concrete(value):
            return False
        table = self._tables.get(name) or self.table(name)
        entry = self._entry(instance)
        with entry.lock:
            table.setdefault(id(instance), value)
            entry.tables[name] = table
        return True

    def cached(self, instance: object) -> dict[str, Any]:
        """A copy of the values cached for ``instance`` (empty if none)."""
        entry = self._entries.get(id(instance))
        if entry is None:
            return {}
        key = id(instance)
        return {name: table[key] for name, table in entry.tables.items() if key in table}

    def discard(self, instance: object) -> None:
        """Forget everything cached for ``instance``."""
        entry = self._entries.pop(id(instance), None)
        if entry is not None:
            for table in entry.tables.values():
                table.pop(id(instance), None)

    def clear(self) -> None:
        """Forget everything (live instances recompute on their next read)."""
        with self._lock:
            self._entries.clear()
            for table in self._tables.values():
                table.clear()

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
                    entry.ref = _KeyedRef(instance, self._drop, key)
                except TypeError:
                    raise TypeError(
                        f"{type(instance).__name__} instances cannot be weakly referenced "
                        "(a __slots__ without '__weakref__'?), so their lazy values cannot be "
                        "cached externally"
                    ) from None
                self._entries[key] = entry
            return entry

    def _drop(self, ref: _KeyedRef) -> None:
        entries = self._entries
        entry = entries.get(ref.key)
        if entry is not None and entry.ref is ref:
            del entries[ref.key]
            for table in entry.tables.values():
                table.pop(ref.key, None)


_CONCRETE_TYPES = frozenset({float, int, bool, np.ndarray, type(jnp.zeros(()))})


def _is_concrete(value: Any) -> bool:
    if type(value) in _CONCRETE_TYPES:
        return True
    if isinstance(value, Tracer):
        return False
    return not any(isinstance(leaf, Tracer) for leaf in jax.tree_util.tree_leaves(value))


def _compiled_or_eager(
    instance: Any, compute: Callable[[Any], Any], compiled: Callable[[Any], Any] | None
) -> Any:
    """Under a trace, for an instance whose leaves are all concrete: run the lazy property
    as one compiled function (one XLA compile per class and shape, instead of one per
    primitive when evaluated op by op). Falls back to op-by-op evaluation for anything jit
    cannot take (Python control flow on values, non-array results, a numpyro error)."""
    if compiled is not None:
        try:
            value = compiled(instance)
        except Exception:  # any failure: evaluate op by op instead
            pass
        else:
            if _is_concrete(value):
                return value
    return compute(instance)


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
        self._compiled = jax.jit(self.wrapped)

    def __get__(self, instance: Any, obj_type: type | None = None) -> Any:
        if instance is None:
            return self
        value = self._values.get(id(instance), _MISSING)
        if value is _MISSING:
            return CACHE.get_or_compute(instance, self.name, self.wrapped, self._compiled)
        return value
