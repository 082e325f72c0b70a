"""The external weak-key cache that holds lazy values of distributions.

numpyro's ``lazy_property`` writes its value into the instance ``__dict__``. That changes what a
distribution *is* (its ``vars()``, ``get_args()``, pickles) and, under tracing, it would keep
tracers alive after their trace, so upstream skips caching under any trace. Here the values live
outside the instance, in one process-wide table keyed by the instance's identity and held by a
weak reference, so:

* the instance never changes: its pytree and ``vars()`` are the same whatever was read;
* an entry disappears the moment its instance is garbage-collected;
* every reader of an instance's lazy value gets the same object, also when threads race for
  it (each may compute it, one value is kept for all), and no reader sees a half-written
  cache: its bookkeeping changes under one lock, never held while a value is computed;
* a lazy value of a distribution with concrete parameters first read inside ``grad`` or
  ``vmap`` is computed eagerly and cached, as numpyro does; first read inside ``jit`` (or
  ``scan``, ``pmap``, ...) it is either *hoisted* - computed once (by a compiled program
  shared per class and shape), cached, entering the trace as a constant - when it does more
  than elementwise work (`stabledist._src.hoisting`), or
  computed in the trace exactly as numpyro does;
  a value computed from tracers is returned without being cached, so no tracer outlives its
  trace;
* a value the constructor was *given* or computed as an alternative parametrization
  (``MultivariateNormal(covariance_matrix=C)``) is *seeded*: it is state of that instance, kept
  exactly (tracer or not, it lives and dies with the instance, as its leaves do), survives
  `clear_cache`, and travels with copies and pickles; an instance rebuilt from the leaves
  (``tree_unflatten``) recomputes it, as numpyro does;
* assigning a field of an instance after its construction (``d.scale_tril = L``,
  ``d.base_dist.loc = x``) drops its values, seeded or not, and those of every distribution
  that holds it and has values (`LazyValueCache.invalidate`): a value is never served for
  leaves it was not computed from. numpyro serves the stale ``__dict__`` value there.
"""

from __future__ import annotations

import threading
import weakref
from collections.abc import Callable, Mapping
from typing import Any, Generic, NamedTuple, TypeVar

from numpyro.distributions.util import lazy_property as _numpyro_lazy_property

from stabledist._src.hoisting import CONCRETE_TYPES, is_concrete, traced_value
from stabledist._src.introspect import SPEC_ATTRIBUTE
from stabledist._src.jax_private import is_top_level, top_level_state

__all__ = ["CacheInfo", "LazyValueCache", "cache_info", "cached_lazy_property", "clear_cache",
           "lazy_record"]

_TOP_LEVEL = top_level_state()  # the eager test, inlined in the first-read path

T = TypeVar("T")
_PENDING_MAX = 1 << 16  # holders whose children wait to be recorded: then recorded at once
_MISSING: Any = object()
_NOTHING: frozenset[str] = frozenset()


class CacheInfo(NamedTuple):
    """How much the cache holds right now."""

    instances: int
    values: int


class _Owner(weakref.ref):
    """The weak reference to an instance that has values in the cache, and the bookkeeping
    its death and its changes need: the instance's key, the names it has values for, which
    of them its constructor seeded, whether its construction has ended (``constructed``: from
    then on an assignment drops seeded values too), the owners of the distributions that
    hold it and have values (``holders``, by key: an assignment to this instance drops
    theirs), and the owners of the distributions it holds (``held``, recorded at its first
    value and again after an assignment to it; ``None`` until then: its death removes it from
    their ``holders``). One object per instance with values, made in C (no Python
    ``__init__``); its callback drops every value of the instance.

    ``names`` and ``seeded`` are frozensets, replaced, never changed in place: a first value
    shares its property's one-name set (no set built on the first-read path)."""

    __slots__ = ("constructed", "held", "holders", "key", "names", "seeded")
    key: int
    names: frozenset[str]
    seeded: frozenset[str]
    constructed: bool
    holders: dict[int, _Owner] | None
    held: list[_Owner] | None


class LazyValueCache:
    """Lazy values keyed by instance identity, released with the instance.

    Each lazy property owns a table ``id(instance) -> value``, so a hit is one dict lookup.
    Keys are ids, not instances, so distributions need neither ``__hash__`` nor ``__eq__``; an
    instance's weak-reference callback removes its values from every table when it dies,
    before its ``id`` can be reused. The weak reference is made when the instance's first
    value is stored, never for instances whose lazy values are not read.

    One lock guards the bookkeeping (owners, names, tables' inserts), never held while a value
    is computed (a value may read another, of the same instance or not): threads racing for a
    value may each compute it, and the first one stored is the one every reader gets; a hit
    takes no lock at all. Which distributions an instance holds is recorded only when an
    assignment could need it (`pending`, resolved at the next field assignment anywhere):
    a first read does not pay for it.
    """

    def __init__(self) -> None:
        self._tables: dict[str, dict[int, Any]] = {}
        self._owners: dict[int, _Owner] = {}
        self.owners: Mapping[int, object] = self._owners  # read-only view for `in` tests
        self.lock = threading.Lock()
        # owners of holders whose held distributions are not recorded yet (`resolve_pending`)
        self.pending: list[_Owner] = []
        self._release_callback = self._release  # one bound method, not one per owner
        self._readers = self._reader_factory()

    def reader(self, name: str, prop: cached_lazy_property[Any]) -> Callable[[Any], Any]:
        """The getter of the lazy property ``prop`` under ``name``: ``prop.wrapped``, its
        function, is looked up on each miss (tests replace it).

        A hit is one subscript in a function with two free variables and nothing else: the
        hit must not pay for the first read (a ``dict.get`` and a test cost more than a
        hit's whole budget; a miss pays for its ``KeyError`` instead). The commonest miss,
        an eager first read by an instance with no values yet, is inlined in ``miss``: one
        trace-state test, the value, then under the lock one weak reference and two
        inserts. Everything else goes through `get_or_compute`.
        """
        return self._readers(name, prop)

    def _reader_factory(self) -> Callable[[str, Any], Callable[[Any], Any]]:
        """`reader`, with what every property's ``miss`` shares bound once, here: closures
        made by one call share its cells, so a property's reader adds only the cells of its
        own name, table and descriptor (a few hundred properties: each cell is one more
        object for the garbage collector to walk)."""
        owners, owners_get = self._owners, self._owners.get
        acquire, release = self.lock.acquire, self.lock.release
        strong, eval_trace, axis, top_axis_env = _TOP_LEVEL
        concrete_types, holds_of, pending = CONCRETE_TYPES, _holds_of, self.pending
        new_owner, callback = _Owner, self._release_callback
        get_or_compute, store, checked_owner = self.get_or_compute, self._store, self._new_owner
        resolve_pending = self._resolve_pending  # (the lock is held where it is called)
        missing = _MISSING

        def reader(name: str, prop: Any) -> Callable[[Any], Any]:
            values = self.table(name)
            values_get = values.get
            only_this = frozenset((name,))

            def miss(instance: Any) -> Any:
                if strong.value is not eval_trace or axis.value is not top_axis_env:
                    return get_or_compute(instance, name, prop.wrapped, values)
                value = prop.wrapped(instance)  # no lock held: it may read other values
                if type(value) not in concrete_types and not is_concrete(value):
                    return value  # computed from leaked tracers: never cached
                key = id(instance)
                acquire()  # (no `with`: half the cost)
                try:
                    stored = values_get(key, missing)
                    if stored is not missing:  # another thread, or the value itself, stored
                        return stored
                    if owners_get(key) is not None:  # it has values: the general path
                        store(instance, key, name, values, value)
                        return value
                    try:
                        owner = new_owner(instance, callback)
                    except TypeError:
                        owner = checked_owner(instance, key)  # raises the clear error
                    owner.key, owner.names, owner.seeded = key, only_this, _NOTHING
                    owner.constructed, owner.holders, owner.held = False, None, None
                    owners[key] = owner
                    values[key] = value
                    if holds_of(type(instance)) is not None:
                        pending.append(owner)  # its children: recorded when needed
                        if len(pending) > _PENDING_MAX:
                            resolve_pending()
                    return value
                finally:
                    release()

            def read(instance: Any) -> Any:
                try:  # a hit: one dict lookup, no call
                    return values[id(instance)]
                except KeyError:
                    return miss(instance)

            read.__name__ = name
            return read

        return reader

    def table(self, name: str) -> dict[int, Any]:
        """The value table of the lazy property ``name`` (shared by all classes)."""
        with self.lock:
            return self._tables.setdefault(name, {})

    def get_or_compute(self, instance: T, name: str, compute: Callable[[T], Any],
                       table: dict[int, Any] | None = None) -> Any:
        """Return the value of ``name``, computing it and caching it if it is concrete.

        Eagerly: computed and cached. Under a trace: as `stabledist._src.hoisting.traced_value`
        decides (hoisted, or computed where it is read as numpyro does), cached unless it
        holds a tracer.
        """
        if table is None:
            table = self._tables.get(name) or self.table(name)
        key = id(instance)
        value = table.get(key, _MISSING)
        if value is not _MISSING:
            return value
        if is_top_level():
            value = compute(instance)
        else:
            value = traced_value(instance, name, compute, self.cached, self.seed)
        if type(value) in CONCRETE_TYPES or is_concrete(value):
            with self.lock:
                stored = table.get(key, _MISSING)
                if stored is not _MISSING:  # another thread stored one first: everyone's
                    return stored
                self._store(instance, key, name, table, value)
        return value

    def seed(self, instance: object, name: str, value: Any) -> None:
        """Store ``value`` as state of ``instance`` given by its constructor (an alternative
        parametrization): kept even if traced, since it lives exactly as long as the instance
        and its leaves; read back as is; kept by `clear`."""
        table = self._tables.get(name) or self.table(name)
        with self.lock:
            owner = self._store(instance, id(instance), name, table, value)
            owner.seeded = owner.seeded | {name}

    def seeded(self, instance: object) -> dict[str, Any]:
        """The values the constructor of ``instance`` set (empty if none)."""
        owner = self._owners.get(id(instance))
        if owner is None or not owner.seeded:
            return {}
        key = id(instance)
        return {name: self._tables[name][key] for name in owner.seeded}

    def cached(self, instance: object) -> dict[str, Any]:
        """A copy of the values held for ``instance``, seeded or computed (empty if none)."""
        owner = self._owners.get(id(instance))
        if owner is None:
            return {}
        key = id(instance)
        tables = self._tables
        return {name: tables[name][key] for name in owner.names if key in tables[name]}

    def clear(self) -> None:
        """Forget every computed value (live instances recompute on their next read); values
        a constructor seeded are instance state and stay."""
        with self.lock:
            for key, owner in list(self._owners.items()):
                for name in owner.names - owner.seeded:
                    self._tables[name].pop(key, None)
                owner.names &= owner.seeded
                if not owner.names and not owner.holders and self._owners.get(key) is owner:
                    del self._owners[key]  # (its instance may have died during this loop)

    def constructed(self, instance: object) -> None:
        """The construction of ``instance`` has ended: from now on an assignment to one of
        its fields drops its seeded values too (hot: every construction, one dict lookup)."""
        owner = self._owners.get(id(instance))
        if owner is not None:
            owner.constructed = True

    def invalidate(self, instance: object) -> None:
        """A field of ``instance`` was assigned: drop its values and those of every
        distribution that holds it, transitively (values seeded during the construction
        that is still running stay: the constructor's own assignments follow them). The
        field may have held a distribution: ``instance`` forgets the children it recorded,
        and records its current ones with its next value."""
        with self.lock:
            self._resolve_pending()
            owner = self._owners.get(id(instance))
            if owner is not None and owner.held is not None:
                for child in owner.held:
                    if child.holders is not None and child.holders.get(owner.key) is owner:
                        del child.holders[owner.key]
                owner.held = None
            self._invalidate(instance, set())

    def _invalidate(self, instance: object, seen: set[int]) -> None:
        key = id(instance)
        owner = self._owners.get(key)
        if owner is None or key in seen:
            return
        seen.add(key)
        drop = owner.names if owner.constructed else owner.names - owner.seeded
        for name in drop:
            self._tables[name].pop(key, None)
        owner.names = owner.names - drop
        if owner.constructed:
            owner.seeded = _NOTHING
        for holder_owner in list((owner.holders or {}).values()):
            holder = holder_owner()
            if holder is not None:
                self._invalidate(holder, seen)

    def resolve_pending(self) -> None:
        """Record the distributions held by every holder whose first values were stored since
        the last call, so that an assignment to one of them reaches its holders (called before
        every field assignment while any is pending: `stabledist._src.fork`)."""
        with self.lock:
            self._resolve_pending()

    def _resolve_pending(self) -> None:
        pending, owners = self.pending, self._owners
        while pending:
            owner = pending.pop()
            instance = owner()
            if instance is not None and owner.held is None and owners.get(owner.key) is owner:
                holds = _holds_of(type(instance))
                if holds is not None:
                    self._record_holder(owner, instance, holds)

    def info(self) -> CacheInfo:
        owners = list(self._owners.values())
        return CacheInfo(sum(1 for o in owners if o.names),
                         sum(len(t) for t in list(self._tables.values())))

    def _store(self, instance: object, key: int, name: str, table: dict[int, Any],
               value: Any) -> _Owner:
        owner = self._owners.get(key)
        if owner is None:
            owner = self._new_owner(instance, key)
        if name not in owner.names:
            owner.names = owner.names | {name}
        table[key] = value
        if owner.held is None and _holds_of(type(instance)) is not None:
            self.pending.append(owner)  # a holder: its children recorded when needed
        return owner

    def _new_owner(self, instance: object, key: int) -> _Owner:
        try:
            owner = _Owner(instance, self._release_callback)
        except TypeError:
            raise TypeError(
                f"{type(instance).__name__} instances cannot be weakly referenced "
                "(a __slots__ without '__weakref__'?), so their lazy values cannot be "
                "cached externally"
            ) from None
        owner.key, owner.names, owner.seeded = key, _NOTHING, _NOTHING
        owner.constructed, owner.holders, owner.held = False, None, None
        self._owners[key] = owner
        return owner

    def _record_holder(self, owner: _Owner, instance: object,
                       holds: Callable[[Any], list[Any]]) -> None:
        """``instance`` (whose owner is ``owner``) got its first value: record it as a
        holder of each distribution it holds (an assignment to a field of one of them then
        drops ``instance``'s values too), making owners for those that have none."""
        owners, key, held = self._owners, owner.key, []
        for child in holds(instance):
            child_key = id(child)
            child_owner = owners.get(child_key)
            if child_owner is None:
                child_owner = self._new_owner(child, child_key)
                child_owner.constructed = True  # constructed before its holder
            holders = child_owner.holders
            if holders is None:  # by key: O(1) when many distributions hold one child
                holders = child_owner.holders = {}
            holders[key] = owner
            held.append(child_owner)
        owner.held = held

    def _release(self, owner: _Owner) -> None:
        """Weak-reference callback: the instance died; drop its values, and its record as a
        holder (no lock: it may run in any thread, at any allocation, and dict operations
        are atomic)."""
        key = owner.key
        if self._owners.get(key) is owner:
            self._owners.pop(key, None)  # (`clear` may have removed it meanwhile)
        tables = self._tables
        for name in owner.names:
            tables[name].pop(key, None)
        for child in owner.held or ():
            holders = child.holders
            if holders is not None and holders.get(key) is owner:
                del holders[key]


def _holds_of(cls: type) -> Callable[[Any], list[Any]] | None:
    """``d -> the distributions d holds``, from the class's spec (None if it holds none)."""
    spec = getattr(cls, SPEC_ATTRIBUTE, None)
    return None if spec is None else spec.holds


CACHE = LazyValueCache()
"""The process-wide cache used by every stable distribution."""


def cache_info() -> CacheInfo:
    """Number of instances with cached values, and number of values, right now."""
    return CACHE.info()


def clear_cache() -> None:
    """Drop every cached lazy value (they are recomputed on next read)."""
    CACHE.clear()


class _LazyPropertyType(type):
    """``isinstance(x, cached_lazy_property)`` also holds for the plain ``property`` a stable
    class holds in its place (`cached_lazy_property.installed`)."""

    def __instancecheck__(cls, instance: Any) -> bool:
        if type(instance) is property:
            return isinstance(getattr(instance.fget, "__stable_lazy__", None), cls)
        return super().__instancecheck__(instance)


class cached_lazy_property(property, _numpyro_lazy_property, Generic[T],  # noqa: N801
                           metaclass=_LazyPropertyType):
    """A numpyro ``lazy_property`` whose value lives in `CACHE`, not in ``__dict__``.

    It subclasses numpyro's descriptor so numpyro code that recognises lazy properties
    keeps treating it as one. It is also a ``property`` over a small reader: a hit goes
    through the C-level property getter (one call, one dict lookup), not a Python
    ``__get__``. A stable class holds ``installed`` in its place: the same reader in an exact
    ``property``, which CPython reads without a C-to-Python call (its attribute reads are
    specialized for exact ``property`` objects only, from 3.12 on); ``isinstance`` against
    this class holds for it, and its getter's ``__stable_lazy__`` is this object. As a data
    descriptor it receives what a constructor assigns under its name
    (``self.covariance_matrix = ...`` in numpyro's ``MultivariateNormal``): that value is
    seeded in the cache as the instance's own, read back exactly, which is what numpyro's
    ``__dict__`` assignment achieves upstream.
    """

    name: str
    wrapped: Callable[[Any], T]
    installed: property

    def __init__(self, wrapped: Callable[[Any], T], name: str | None = None) -> None:
        _numpyro_lazy_property.__init__(self, wrapped)
        self._bind(name or wrapped.__name__)

    def __set_name__(self, owner: type, name: str) -> None:
        if name != self.name:
            self._bind(name)

    def _bind(self, name: str) -> None:
        self.name = name
        read = CACHE.reader(name, self)

        def given(instance: Any, value: Any) -> None:
            CACHE.seed(instance, name, value)

        given.__name__ = name
        read.__qualname__ = f"cached_lazy_property.read[{name}]"
        # the wrapped function's annotations, resolved in its own module through __wrapped__
        # (typing.get_type_hints(S.mean.fget) is numpyro's `jax.Array`, as for numpyro)
        read.__annotations__ = dict(getattr(self.wrapped, "__annotations__", {}))
        read.__wrapped__ = self.wrapped  # type: ignore[attr-defined]
        read.__stable_lazy__ = self  # type: ignore[attr-defined]
        given.__qualname__ = f"cached_lazy_property.given[{name}]"
        doc = getattr(self.wrapped, "__doc__", None)
        property.__init__(self, read, given, None, doc)
        self.installed = property(read, given, None, doc)


def lazy_record(attribute: Any) -> Any:
    """The `cached_lazy_property` behind a stable class's installed ``property`` (its own
    ``wrapped`` is looked up on every miss), or ``attribute`` itself."""
    if type(attribute) is property:
        return getattr(attribute.fget, "__stable_lazy__", attribute)
    return attribute
