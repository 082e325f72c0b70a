"""Lazy properties and their reads: `cached_lazy_property`, the descriptor whose value lives in
the cache, `is_lazy`, the one answer to "is this class attribute a lazy property", and where a
first read is computed.

A stable class holds, for each of numpyro's ``lazy_property`` (and each recomputed attribute of
`stabledist._src.records.facts`), the `installed` ``property`` of a `cached_lazy_property`
over the same function: its getter is `getter` (a hit is one dict lookup; a first read is
computed where the reads below decide), its setter gives the cache a value the constructor
assigned.

Reads: where the first read of a lazy value is computed, and what the cache then keeps.

A lazy property's getter (`getter`) is a hit - one subscript of its value table in the cache -
or a first read, computed here:

* **eagerly** (no trace active): computed, stored, returned. The commonest first read, so it
  is inlined in the getter: one test of JAX's trace state, the value, one `store`.
* **under a trace** (`first_read_in_trace`):
  - with traced leaves, under ``grad``/``jvp``/``vmap`` alone (operations on concrete values
    run eagerly there, `jax_private.stages`), or on a JAX without what hoisting needs:
    computed where it is read, as numpyro computes it;
  - under a staging trace (``jit``, ``scan``, ``pmap``, ...) with concrete leaves: computed in
    the trace (elementwise work, numpyro's program) or *hoisted* - computed once, outside
    the trace, entering it as a constant - as `stabledist._src.lazy.hoisting` decides. The
    first read at new leaf shapes is computed in the trace while the trace records what it
    adds (`stabledist._src.lazy.hoisting.decide`, the one decision, which the test oracle also
    asks); a value to hoist (or one decided again from its leaves: it used a value cached
    before) takes those equations back out, so the program has no dead code - unless one of
    them has an effect, and then they all stay. What the decision reads of the
    equations comes from `jax_private.equation_view`; a JAX whose equations read otherwise
    has no hoisting (`jax_private.hoisting_available`).
  A value that holds a tracer is returned without being stored, so no tracer outlives its
  trace; any other value is stored, and the first one stored is every reader's.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Generic, TypeVar

import jax
from jax.core import Tracer
from numpyro.distributions.util import lazy_property as _numpyro_lazy_property

from stabledist._src import jax_private
from stabledist._src.jax_private import current_trace, is_top_level, stages
from stabledist._src.lazy import hoisting
from stabledist._src.lazy.cache import CACHE

__all__ = ["CONCRETE_TYPES", "cached_lazy_property", "first_read_in_trace", "getter",
           "is_concrete", "is_lazy", "lazy_property_of", "value_in_trace"]

CONCRETE_TYPES = jax_private.concrete_array_types()
"""Types of values that hold no tracer (tested first, inline, on the first-read paths)."""

_MISSING: Any = object()


def is_concrete(value: Any) -> bool:
    """Whether ``value`` holds no tracer (may be stored in the cache)."""
    if isinstance(value, Tracer):
        return False
    return not any(isinstance(leaf, Tracer) for leaf in jax.tree_util.tree_leaves(value))


def getter(name: str, prop: Any) -> Callable[[Any], Any]:
    """The getter of the lazy property ``prop`` (a `cached_lazy_property`)
    under ``name``: ``prop.wrapped``, its function, is looked up on each first read (tests
    replace it). A hit is one subscript in a function with two free
    variables: it must not pay for the first read (a ``dict.get`` and a test cost more than
    a hit's whole budget; a first read pays for its ``KeyError`` instead)."""
    values = CACHE.table(name)
    strong, eval_trace, axis, top_axis_env = jax_private.top_level_state()
    store, concrete_types = CACHE.store, CONCRETE_TYPES

    def first_read(instance: Any) -> Any:
        # jax_private's one inline read (see `top_level_state`): a call would cost every read
        if strong.value is not eval_trace or axis.value is not top_axis_env:
            return first_read_in_trace(instance, name, prop.wrapped, values)
        value = prop.wrapped(instance)  # no lock held: it may read other values
        if type(value) not in concrete_types and not is_concrete(value):
            return value  # computed from leaked tracers: never stored
        return store(instance, name, values, value)

    def read(instance: Any) -> Any:
        try:  # a hit: one dict lookup, no call
            return values[id(instance)]
        except KeyError:
            return first_read(instance)

    read.__name__ = name
    return read


def first_read_in_trace(instance: Any, name: str, compute: Callable[[Any], Any],
                        values: dict[int, Any]) -> Any:
    """A first read while a trace may be active (the getter's fast test said so): the
    value where `value_in_trace` puts it, stored unless it holds a tracer."""
    value = values.get(id(instance), _MISSING)
    if value is not _MISSING:  # stored meanwhile (a value read while computing itself)
        return value
    value = compute(instance) if is_top_level() else value_in_trace(instance, name, compute)
    if type(value) in CONCRETE_TYPES or is_concrete(value):
        return CACHE.store(instance, name, values, value)
    return value


def value_in_trace(instance: Any, name: str, compute: Callable[[Any], Any]) -> Any:
    """``compute(instance)``, the lazy value ``name`` read under a trace: in the trace, or
    hoisted (see the module doc)."""
    if not jax_private.hoisting_available():
        return compute(instance)
    leaves, treedef = jax.tree_util.tree_flatten(instance)
    trace = current_trace()
    if not is_concrete(leaves) or not stages(trace):
        return compute(instance)
    decision = hoisting.decide(instance, name, compute, leaves, treedef, trace)
    if decision.mode == "trace":
        return compute(instance) if decision.value is hoisting.NOT_COMPUTED else decision.value
    return hoisting.compute_hoisted(instance, name, compute, decision.mode, leaves, treedef,
                                    CACHE.values_of(instance))


# --- the descriptor --------------------------------------------------------------------------

T = TypeVar("T")


def is_lazy(attribute: Any) -> bool:
    """Whether a class attribute is a lazy property: numpyro's ``lazy_property``
    (`cached_lazy_property` included), or the plain ``property`` a stable class holds in place
    of one (`cached_lazy_property.installed`: its getter carries the descriptor)."""
    if type(attribute) is property:
        return isinstance(getattr(attribute.fget, "__stable_lazy__", None), cached_lazy_property)
    return isinstance(attribute, _numpyro_lazy_property)


def lazy_property_of(attribute: Any) -> Any:
    """The `cached_lazy_property` behind a stable class's installed ``property`` (its own
    ``wrapped`` is looked up on every first read), or ``attribute`` itself."""
    if type(attribute) is property:
        return getattr(attribute.fget, "__stable_lazy__", attribute)
    return attribute


class _LazyPropertyType(type):
    """``isinstance(x, cached_lazy_property)`` also holds for the plain ``property`` a stable
    class holds in its place (`cached_lazy_property.installed`), as users may ask."""

    def __instancecheck__(cls, instance: Any) -> bool:
        if type(instance) is property:
            return type.__instancecheck__(cls, getattr(instance.fget, "__stable_lazy__", None))
        return super().__instancecheck__(instance)


class cached_lazy_property(property, _numpyro_lazy_property, Generic[T],  # noqa: N801
                           metaclass=_LazyPropertyType):
    """A numpyro ``lazy_property`` whose value lives in the cache, not in ``__dict__``.

    It subclasses numpyro's descriptor so numpyro code that recognises lazy properties
    keeps treating it as one. It is also a ``property`` over its getter: a hit goes through
    the C-level property getter (one call, one dict lookup), not a Python ``__get__``. A
    stable class holds ``installed`` in its place: the same getter in an exact ``property``,
    which CPython reads without a C-to-Python call (its attribute reads are specialized for
    exact ``property`` objects only, from 3.12 on). As a data descriptor it receives what a
    constructor assigns under its name (``self.covariance_matrix = ...`` in numpyro's
    ``MultivariateNormal``): the cache is given that value as the instance's own, read back
    exactly, which is what numpyro's ``__dict__`` assignment achieves upstream.
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
        read = getter(name, self)

        def given(instance: Any, value: Any) -> None:
            CACHE.give(instance, name, value)

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
