"""Batch slicing: ``d[idx]`` indexes a distribution's batch dimensions, as NumPy indexes an
array's leading dimensions, and leaves its event dimensions alone.

TFP and distrax slice batches of distributions; numpyro cannot. A stable class's record knows each
parameter's event rank (`stabledist._src.records`), so a slice is built by the class's own
constructor from its parameters broadcast to the batch shape and indexed, and from its nested
distributions sliced the same way (aligned to the right, as they broadcast against the parent).
A class whose ``__init__`` is a user's (at any depth) is sliced as a copy with its fields
sliced: its constructor may transform what it is given, and is not called again.
The constructor recomputes everything derived (``TruncatedNormal``'s promoted base,
``LowRankMultivariateNormal``'s capacitance), so ``d[i]`` is the distribution of element ``i``
with the numbers ``vmap`` sees. A slice of an `ExpandedDistribution` is its base broadcast to the
batch and indexed. A constructor that forwards ``**kwargs`` gets the fields no argument names
by name. A class whose constructor cannot be called from its fields (a transform with batched
parameters, a user's class whose arguments are named otherwise than the fields they set)
raises a `TypeError` saying so, never a slice rebuilt from defaults. What a class needs beyond
its record (a reason it cannot be sliced, nested distributions' own trailing dimensions,
constructor arguments kept only through shapes) are its `stabledist._src.records.facts`.
"""

from __future__ import annotations

import inspect
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
from numpyro.distributions.transforms import Transform

from stabledist._src.lazy import is_numpyro_class
from stabledist._src.records import EVENT, ClassRecord, is_distribution, record_of

__all__ = ["getitem"]

_Index = tuple[Any, ...]


def getitem(d: Any, index: Any) -> Any:
    """``d[index]``: see the module doc."""
    batch = tuple(d.batch_shape)
    full = _normalize(index, len(batch), type(d).__name__)
    return _slice(d, full, batch)


def _normalize(index: Any, ndim: int, name: str) -> _Index:
    """``index`` as a tuple with one entry per batch dimension (``None`` entries extra)."""
    items = index if isinstance(index, tuple) else (index,)
    for item in items:
        if not _valid_item(item):
            what = "a boolean mask" if _is_bool_array(item) else repr(item)
            raise TypeError(
                f"{name}[...]: {what} cannot index a batch; index with integers, slices (:), "
                "..., None or integer arrays (boolean masks are not supported)")
    ellipses = sum(i is Ellipsis for i in items)
    if ellipses > 1:
        raise IndexError("an index can only have a single ellipsis ('...')")
    used = sum(i is not None and i is not Ellipsis for i in items)
    if used > ndim:
        raise IndexError(f"too many indices for the batch shape of {name}: its batch is "
                         f"{ndim}-dimensional, but {used} were indexed")
    fill = (slice(None),) * (ndim - used)
    if ellipses:
        at = items.index(Ellipsis)
        return (*items[:at], *fill, *items[at + 1:])
    return (*items, *fill)


def _valid_item(i: Any) -> bool:
    if i is None or i is Ellipsis or isinstance(i, slice):
        return True
    if isinstance(i, bool | np.bool_):
        return False
    if isinstance(i, int | np.integer):
        return True
    dtype = getattr(i, "dtype", None)
    return dtype is not None and np.issubdtype(np.dtype(dtype), np.integer)


def _is_bool_array(i: Any) -> bool:
    dtype = getattr(i, "dtype", None)
    return isinstance(i, bool) or (dtype is not None and np.dtype(dtype) == np.bool_)


def _sliced_shape(shape: tuple[int, ...], index: _Index) -> tuple[int, ...]:
    """The shape ``x[index]`` has for ``x`` of ``shape``, and NumPy's IndexError for a static
    index out of range (a traced index follows JAX's rules: no error)."""
    static = tuple(np.zeros(np.shape(i), dtype=np.intp) if isinstance(i, jax.Array) else i
                   for i in index)
    return np.broadcast_to(np.empty((), dtype=bool), shape)[static].shape


def _slice(d: Any, index: _Index, batch: tuple[int, ...]) -> Any:
    """``d`` broadcast to ``batch`` (its own batch shape or a parent's it broadcasts against)
    and indexed by ``index`` (one entry per dimension of ``batch``)."""
    new_batch = _sliced_shape(batch, index)
    cls = type(d)
    record = record_of(cls)
    facts = record.facts
    if facts.unsliceable is not None:
        raise _unsliceable(cls, facts.unsliceable)
    if facts.slices_as_base:  # the base broadcast to the whole batch, then indexed
        base = _effective_batch(d.base_dist)
        if _broadcast_to(base, batch) is None:
            raise _unsliceable(cls, (
                f"its base's parameters have batch shape {base}, which its batch shape "
                f"{batch} does not describe (an expansion made inside vmap keeps the shape it "
                "was expanded to, as numpyro's does); slice "
                "numpyro.contrib.control_flow.scan.promote_batch_shape(d), whose batch shape "
                "has the mapped axes, or expand outside vmap"))
        return _slice(d.base_dist, index, batch)
    state = d.__dict__

    def sliced(name: str) -> Any:
        if name in record.table.data or name in cls.arg_constraints:  # Multinomial's
            return _slice_field(cls, record, state, name, index, batch)  # total_count: aux
        return state[name]

    kwargs = None if _users_constructor(cls) else _constructor_arguments(
        cls, record, state, sliced, new_batch)
    if kwargs is None:  # no constructor of its fields: a copy with the fields sliced
        result = object.__new__(cls)
        result.__dict__ = {**state, **{n: sliced(n) for n in record.table.data if n in state},
                           "_batch_shape": new_batch}
        return result
    try:
        result = cls(**kwargs)
    except (TypeError, ValueError) as e:
        raise _unsliceable(cls, f"its constructor refused the sliced fields ({e})") from e
    if tuple(result.batch_shape) != new_batch:
        raise _unsliceable(cls, f"rebuilt with batch shape {tuple(result.batch_shape)} "
                                f"where {new_batch} was expected")
    return result


def _slice_field(cls: type, record: ClassRecord, state: dict[str, Any], name: str,
                 index: _Index, batch: tuple[int, ...]) -> Any:
    value = state.get(name)
    if is_distribution(value):
        return _slice_child(record, state, name, value, index, batch)
    if isinstance(value, list | tuple) and any(map(is_distribution, value)):
        return type(value)(_slice_child(record, state, name, v, index, batch)
                           if is_distribution(v) else v for v in value)
    if isinstance(value, Transform) or (
            isinstance(value, list) and any(isinstance(v, Transform) for v in value)):
        if any(np.ndim(leaf) > 0 for leaf in jax.tree.leaves(value)):
            raise _unsliceable(cls, "its transforms have array parameters")
        return value
    if not _is_array_like(value) or isinstance(value, bool):
        return value
    rank = record.event_ranks.get(name)
    if rank is None:
        raise _unsliceable(cls, f"the event rank of its field {name!r} is unknown")
    rank = len(state["_event_shape"]) if rank == EVENT else rank
    return _slice_parameter(value, rank, index, batch)


def _slice_child(record: ClassRecord, state: dict[str, Any], name: str, child: Any,
                 index: _Index, batch: tuple[int, ...]) -> Any:
    """A nested distribution broadcasts against the parent's batch (aligned to the right),
    except its ``offset`` trailing batch dimensions, which the parent does not index."""
    facts = record.facts
    offset = {**facts.child_offsets, **facts.slice_offsets}.get(name)
    extra = max(offset(state, child), 0) if offset is not None else 0
    own = _effective_batch(child)
    trailing = own[len(own) - extra:] if extra else ()
    return _slice(child, index + (slice(None),) * extra, batch + trailing)


def _constructor_arguments(cls: type, record: ClassRecord, state: dict[str, Any], sliced: Any,
                           new_batch: tuple[int, ...]) -> dict[str, Any] | None:
    """The constructor's arguments, from the sliced fields and the other attributes; None when
    an argument without default is neither."""
    facts = record.facts
    kwargs: dict[str, Any] = {}
    parameters = _constructor_parameters(cls)
    fields = [next((f for f in (n, f"_{n}", facts.argument_fields.get(n)) if f in state), None)
              for n in parameters]
    if any(f is None and p.default is inspect.Parameter.empty and n != "batch_shape"
           for f, (n, p) in zip(fields, parameters.items())):
        return None
    structural = facts.constructor_arguments
    for field, name in zip(fields, parameters):
        if name == "batch_shape":
            kwargs[name] = new_batch
        elif field is not None:
            kwargs[name] = sliced(field)
        elif name in structural:
            kwargs[name] = structural[name](state)
    unmapped = [n for n in record.table.data if n in state and n not in fields]
    if unmapped and _accepts_keywords(cls):  # a subclass forwarding its base's arguments
        kwargs.update((n, sliced(n)) for n in unmapped)
    elif unmapped and any(f is None and n not in structural and n != "batch_shape"
                          for f, n in zip(fields, parameters)):
        # arguments that match no field beside fields no argument takes (renamed arguments):
        # rebuilt from their defaults, the slice would be wrong (a field the constructor
        # computes from mapped arguments, such as numpyro's `gate` from `gate_logits`, is fine)
        raise _unsliceable(cls, f"its constructor has no argument for its field(s) {unmapped} "
                                "(name its arguments as the fields they set)")
    if _accepts_validate_args(cls):
        kwargs["validate_args"] = state.get("_validate_args")
    return kwargs


def _slice_parameter(value: Any, rank: int, index: _Index, batch: tuple[int, ...]) -> Any:
    shape = np.shape(value)
    event = shape[len(shape) - rank:] if rank else ()
    return jnp.broadcast_to(value, batch + event)[index]


def _broadcast_to(shape: tuple[int, ...], target: tuple[int, ...]) -> tuple[int, ...] | None:
    """``target`` if ``shape`` broadcasts to it (no new dimensions in front count), else None."""
    try:
        return target if np.broadcast_shapes(shape, target) == target else None
    except ValueError:
        return None


def _effective_batch(d: Any) -> tuple[int, ...]:
    """The batch shape ``d``'s parameters have: numpyro's truncated and censored constructors
    promote a base distribution's parameters to the parent's rank and keep its stored shape."""
    shapes = [tuple(d.batch_shape)]
    cls, state = type(d), d.__dict__
    ranks = record_of(cls).event_ranks
    for name in getattr(cls, "arg_constraints", {}):
        value = state.get(name)
        rank = ranks.get(name)
        if rank is None or not _is_array_like(value):
            continue
        rank = len(state["_event_shape"]) if rank == EVENT else rank
        shape = np.shape(value)
        shapes.append(shape[: max(len(shape) - rank, 0)])
    return tuple(np.broadcast_shapes(*shapes))


def _users_constructor(cls: type) -> bool:
    """Whether the ``__init__`` ``cls`` runs is a user's: it may do anything with its
    arguments (shift them, rename them), so called again on its own fields it could build
    another distribution; its slice is a copy with the fields sliced, as ``vmap`` sees them."""
    owner = next(b for b in cls.__mro__ if "__init__" in vars(b))
    return not (is_numpyro_class(owner) or owner.__module__.startswith("stabledist."))


def _constructor_parameters(cls: type) -> dict[str, inspect.Parameter]:
    parameters = dict(inspect.signature(cls.__init__).parameters)
    return {n: p for n, p in parameters.items() if n not in ("self", "validate_args")
            and p.kind not in (p.VAR_POSITIONAL, p.VAR_KEYWORD)}


def _accepts_keywords(cls: type) -> bool:
    """Whether the constructor takes ``**kwargs`` (a subclass forwarding its base's
    arguments): unnamed fields are passed on by name."""
    return any(p.kind is p.VAR_KEYWORD
               for p in inspect.signature(cls.__init__).parameters.values())


def _accepts_validate_args(cls: type) -> bool:
    return "validate_args" in inspect.signature(cls.__init__).parameters


def _is_array_like(value: Any) -> bool:
    return isinstance(value, jax.Array | np.ndarray | np.generic | float | int)


def _unsliceable(cls: type, why: str) -> TypeError:
    return TypeError(f"{cls.__name__} cannot be sliced: {why}")
