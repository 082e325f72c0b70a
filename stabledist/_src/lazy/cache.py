"""Storage: the external weak-key cache that holds the lazy values of distributions.

numpyro's ``lazy_property`` writes its value into the instance ``__dict__``. That changes what a
distribution *is* (its ``vars()``, ``get_args()``, pickles) and, under tracing, it would keep
tracers alive after their trace, so upstream skips caching under any trace. Here the values live
outside the instance, in one process-wide table per property keyed by the instance's identity,
released by a weak reference when the instance dies, so:

* the instance never changes: its pytree and ``vars()`` are the same whatever was read;
* an entry disappears the moment its instance is garbage-collected;
* every reader of an instance's value gets the same object, also when threads race for it
  (each may compute it, the first one stored is kept for all), and no reader sees a
  half-written cache: the bookkeeping changes under one lock, never held while a value is
  computed (that is the caller's business: `stabledist._src.lazy.reads`);
* a value the constructor was *given* or computed as an alternative parametrization
  (``MultivariateNormal(covariance_matrix=C)``) is state of that instance (`give`): kept
  exactly (a tracer or not: it lives and dies with the instance, as its leaves do), kept by
  `clear`, carried by copies and pickles; an instance rebuilt from the leaves recomputes it;
* assigning a field of an instance after its construction (``d.scale_tril = L``,
  ``d.base_dist.loc = x``) drops its values, given or not, and those of every distribution
  that holds it (`changed`): a value is never served for leaves it was not computed from
  (numpyro serves the stale ``__dict__`` value there). The holders are found when the
  assignment happens: the instances with values whose class may hold a distribution are
  indexed (`holding`), and each is walked then (`stabledist._src.records.children.descendants`). An
  assignment after construction is rare (numpyro's own inference code makes none), a first
  read is not: it pays one dict insert for a holder, nothing for the others.

The cache knows nothing of traces, hoisting or where a value was computed: it gets, stores
and releases. Whether a value may be stored (it holds no tracer) is decided by its caller.
"""

from __future__ import annotations

import contextlib
import threading
import weakref
from collections.abc import Callable, Collection, Iterator, Mapping
from typing import Any, NamedTuple

from stabledist._src.records import descendants, find

__all__ = ["CACHE", "CacheInfo", "LazyValueCache", "cache_info", "clear_cache"]

_MISSING: Any = object()
_NOTHING: frozenset[str] = frozenset()


class CacheInfo(NamedTuple):
    """How much the cache holds right now."""

    instances: int
    values: int


class _Owner(weakref.ref):
    """The weak reference to an instance with values, and its bookkeeping: its key, the names
    it has values for and which of them it was given. One object per instance with values,
    made in C (no Python ``__init__``); its callback drops the instance's values.
    ``names`` and ``given`` are shared frozensets (`LazyValueCache._canonical`), replaced,
    never changed in place. Whether its instance is still under construction is the cache's
    ``_constructing``, not a field: one truth, and one field less per instance."""

    __slots__ = ("given", "key", "names")
    key: int
    names: frozenset[str]
    given: frozenset[str]


class LazyValueCache:
    """Lazy values keyed by instance identity, released with the instance.

    Each lazy property owns a table ``id(instance) -> value`` (`table`), so a hit is one dict
    lookup, done by the property itself. Keys are ids, not instances, so distributions need
    neither ``__hash__`` nor ``__eq__``; an instance's weak-reference callback removes its
    values before its ``id`` can be reused. ``holding`` indexes the owners of instances whose
    class may hold distributions: an assignment to a distribution below one drops its values.
    """

    def __init__(self) -> None:
        self._tables: dict[str, dict[int, Any]] = {}
        self._singletons: dict[str, frozenset[str]] = {}
        self._owners: dict[int, _Owner] = {}
        self._holding: dict[int, _Owner] = {}  # the owners whose instance may hold others
        self._constructing: set[int] = set()  # keys of instances whose __init__ runs
        # read-only views, for the one test on every field assignment (`Distribution`)
        self.owners: Mapping[int, object] = self._owners
        self.holding: Mapping[int, object] = self._holding
        self.constructing_keys: Collection[int] = self._constructing
        self.lock = threading.Lock()
        self._release_callback = self._release  # one bound method, not one per owner
        self._sets: dict[frozenset[str], frozenset[str]] = {_NOTHING: _NOTHING}
        self.store: Callable[[object, str, dict[int, Any], Any], Any] = self._storing()
        """``store(instance, name, table, value)``: store ``value`` as ``instance``'s value of
        ``name`` unless one is stored already; return the one kept (every reader gets the
        first stored). On the first-read path of every lazy property (`_storing`)."""

    def table(self, name: str) -> dict[int, Any]:
        """The value table of the lazy property ``name`` (shared by every class)."""
        with self.lock:
            self._singletons.setdefault(name, self._canonical(frozenset((name,))))
            return self._tables.setdefault(name, {})

    def _storing(self) -> Callable[[object, str, dict[int, Any], Any], Any]:
        """`store`, with what it reads bound once as closure cells (no attribute lookups on
        the first-read path), and an instance's first value made inline: one weak reference,
        two inserts (three for a class that may hold distributions), no call."""
        owners, owners_get, singletons = self._owners, self._owners.get, self._singletons
        acquire, release = self.lock.acquire, self.lock.release
        callback, new_owner = self._release_callback, self._new_owner
        canonical, holding = self._canonical, self._holding

        def store(instance: object, name: str, table: dict[int, Any], value: Any) -> Any:
            key = id(instance)
            acquire()  # (no `with`: half the cost)
            try:
                stored = table.get(key, _MISSING)
                if stored is not _MISSING:
                    return stored
                owner = owners_get(key)
                if owner is None:
                    try:
                        owner = _Owner(instance, callback)
                    except TypeError:
                        owner = new_owner(instance, key)  # raises the clear error
                    owner.key, owner.names, owner.given = key, singletons[name], _NOTHING
                    owners[key] = owner
                    record = find(type(instance))
                    if record is None or record.nested:
                        holding[key] = owner
                elif name not in owner.names:
                    owner.names = canonical(owner.names | singletons[name])
                table[key] = value
                return value
            finally:
                release()

        return store

    def give(self, instance: object, name: str, value: Any) -> None:
        """Store ``value`` as a value ``instance`` was given (its constructor's, a copy's, a
        pickle's): replaces any value stored before, and is kept by `clear`."""
        table = self._tables.get(name) or self.table(name)
        key = id(instance)
        with self.lock:
            owner = self._owners.get(key) or self._new_owner(instance, key)
            owner.names = self._canonical(owner.names | self._singletons[name])
            owner.given = self._canonical(owner.given | self._singletons[name])
            table[key] = value

    def given(self, instance: object) -> dict[str, Any]:
        """The values ``instance`` was given (empty if none)."""
        owner = self._owners.get(id(instance))
        if owner is None or not owner.given:
            return {}
        key = id(instance)
        return {name: self._tables[name][key] for name in owner.given}

    def values_of(self, instance: object) -> dict[str, Any]:
        """A copy of the values held for ``instance``, given or computed (empty if none)."""
        owner = self._owners.get(id(instance))
        if owner is None:
            return {}
        key, tables = id(instance), self._tables
        return {name: tables[name][key] for name in owner.names if key in tables[name]}

    @contextlib.contextmanager
    def constructing(self, instance: object) -> Iterator[None]:
        """``instance``'s constructor runs in this block: its given values stay through its
        constructor's own field assignments; outside it an assignment drops them too."""
        key = id(instance)
        self._constructing.add(key)
        try:
            yield
        finally:
            self._constructing.discard(key)

    def changed(self, instance: object) -> None:
        """A field of ``instance`` was assigned: drop its values and those of every
        distribution with values that holds it, directly or further up, as they hold it now
        (values given during a construction that is still running stay: the constructor's
        own assignments follow them). Walks every indexed holder: an assignment after
        construction is rare, a first read is not."""
        key = id(instance)
        with self.lock:
            self._drop(key)
            # a copy (made in C, no callback can run inside it): a dying instance's callback
            # may remove its entry at any allocation of the walk below
            for holder_key, owner in self._holding.copy().items():
                holder = owner()
                if holder is not None and holder_key != key and any(
                        d is instance for d in descendants(holder)):
                    self._drop(holder_key)

    def _drop(self, key: int) -> None:
        owner = self._owners.get(key)
        if owner is not None:
            constructed = key not in self._constructing
            drop = owner.names if constructed else owner.names - owner.given
            for name in drop:
                self._tables[name].pop(key, None)
            owner.names = self._canonical(owner.names - drop)
            if constructed:
                owner.given = _NOTHING

    def clear(self) -> None:
        """Forget every computed value (live instances recompute on their next read); given
        values are instance state and stay."""
        with self.lock:
            for key, owner in self._owners.copy().items():
                for name in owner.names - owner.given:
                    self._tables[name].pop(key, None)
                owner.names = self._canonical(owner.names & owner.given)
                if not owner.names and self._owners.get(key) is owner:
                    del self._owners[key]  # (its instance may have died during this loop)
                    if self._holding.get(key) is owner:
                        del self._holding[key]

    def info(self) -> CacheInfo:
        owners = list(self._owners.values())
        return CacheInfo(sum(1 for o in owners if o.names),
                         sum(len(t) for t in list(self._tables.values())))

    def _canonical(self, names: frozenset[str]) -> frozenset[str]:
        """One object per set of names: owners share it (a frozenset per instance would be
        one more object per instance to keep and to track)."""
        return self._sets.setdefault(names, names)

    def _new_owner(self, instance: object, key: int) -> _Owner:
        try:
            owner = _Owner(instance, self._release_callback)
        except TypeError:
            raise TypeError(
                f"{type(instance).__name__} instances cannot be weakly referenced "
                "(a __slots__ without '__weakref__'?), so their lazy values cannot be "
                "cached externally"
            ) from None
        owner.key, owner.names, owner.given = key, _NOTHING, _NOTHING
        self._owners[key] = owner
        record = find(type(instance))
        if record is None or record.nested:
            self._holding[key] = owner
        return owner

    def _shrink(self, names: frozenset[str]) -> None:
        """Give back the memory of tables that emptied (a dict keeps its largest size): a
        service that once held 100,000 instances and dropped them holds nothing after."""
        for name in names:
            if not self._tables[name]:
                self._tables[name].clear()
        if not self._owners:
            self._owners.clear()
        if not self._holding:
            self._holding.clear()

    def _release(self, owner: _Owner) -> None:
        """Weak-reference callback: the instance died; drop its values and index entries at
        once (its id cannot be reused before this returns; the callback may run inside the
        cache's own locked code, at any allocation, in any thread: single dict operations
        only), and give back emptied tables' memory when the lock is free."""
        key = owner.key
        if self._owners.get(key) is owner:
            self._owners.pop(key, None)  # (`clear` may have removed it meanwhile)
        if self._holding.get(key) is owner:
            self._holding.pop(key, None)
        tables = self._tables
        for name in owner.names:
            tables[name].pop(key, None)
        if self.lock.acquire(blocking=False):
            try:
                self._shrink(owner.names)
            finally:
                self.lock.release()


CACHE = LazyValueCache()
"""The process-wide cache used by every stable distribution."""


def cache_info() -> CacheInfo:
    """Number of instances with cached values, and number of values, right now."""
    return CACHE.info()


def clear_cache() -> None:
    """Drop every cached lazy value (they are recomputed on next read)."""
    CACHE.clear()
