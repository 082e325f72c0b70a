"""Reads: where the first read of a lazy value is computed, and what the cache then keeps.

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
    the trace, entering it as a constant - as `stabledist._src.hoisting` decides. The first
    read at new leaf shapes is computed in the trace while the trace records what it adds
    (`stabledist._src.hoisting.decide`, the one decision, which the test oracle also asks);
    a value to hoist takes those equations back out, so the program has no dead code.
  A value that holds a tracer is returned without being stored, so no tracer outlives its
  trace; any other value is stored, and the first one stored is every reader's.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import jax
from jax.core import Tracer

from stabledist._src import hoisting, jax_private
from stabledist._src.cache import CACHE
from stabledist._src.jax_private import current_trace, is_top_level, stages

__all__ = ["CONCRETE_TYPES", "first_read_in_trace", "getter", "is_concrete",
           "value_in_trace"]

CONCRETE_TYPES = jax_private.concrete_array_types()
"""Types of values that hold no tracer (tested first, inline, on the first-read paths)."""

_MISSING: Any = object()


def is_concrete(value: Any) -> bool:
    """Whether ``value`` holds no tracer (may be stored in the cache)."""
    if isinstance(value, Tracer):
        return False
    return not any(isinstance(leaf, Tracer) for leaf in jax.tree_util.tree_leaves(value))


def getter(name: str, prop: Any) -> Callable[[Any], Any]:
    """The getter of the lazy property ``prop`` (a `stabledist._src.lazy.cached_lazy_property`)
    under ``name``: ``prop.wrapped``, its function, is looked up on each first read (tests
    replace it). A hit is one subscript in a function with two free
    variables: it must not pay for the first read (a ``dict.get`` and a test cost more than
    a hit's whole budget; a first read pays for its ``KeyError`` instead)."""
    values = CACHE.table(name)
    strong, eval_trace, axis, top_axis_env = jax_private.top_level_state()
    store, concrete_types = CACHE.store, CONCRETE_TYPES

    def first_read(instance: Any) -> Any:
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
