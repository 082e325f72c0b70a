"""Batch shapes read from the leaves: a distribution that leaves ``vmap`` is batched.

numpyro keeps ``_batch_shape`` in aux data, so ``jax.vmap(lambda m: Normal(m, 1.0))(means)``
returns a Normal whose leaves have a leading axis of ``len(means)`` and whose batch shape is
still ``()``: every method then broadcasts wrongly or raises (numpyro #2271). Every leaf that
leaves ``vmap`` (``out_axes=0``), a ``lax.scan`` as ``ys`` or a ``tree_map(jnp.stack, ...)``
gained the same leading axes, and the constructor gave the parameters one rank (numpyro's
``promote_shapes``), so the new batch shape can be read from the leaves when their rank
disagrees with the stored one. The `stabledist._src.records.records.BatchRule` of the class's record
says where (TFP's ``parameter_properties`` in spirit):

* a parameter of event rank ``e`` contributes ``shape[:ndim - e]``; a nested distribution
  contributes its batch shape less the dimensions its parent moves to the event (its offset);
* more dimensions than stored (``k`` more): the leading ``k`` axes, shared by every
  contribution, go in front of the stored batch shape; fewer (inside ``vmap``, or a ``scan``
  over a batched instance): the stored shape loses its leading axes.

Every unflatten runs the check, generated from the class's `BatchRule` into its unflatten
(`stabledist._src.pytrees.pytree`): one ``len`` per parameter, so only an instance whose largest
parameter rank disagrees with the stored batch shape (or whose nested distribution was
derived) reaches `derive`. A derived instance keeps the stored shape under `STORED_BATCH_SHAPE`:
flatten emits it as aux data, so the treedef stays numpyro's. Leaves without a ``shape`` say
nothing; contributions that disagree (a ``tree_map`` that changed shapes another way) keep the
stored shape, as numpyro does: never a new error.

What a constructor builds keeps numpyro's shapes, decided by the instance alone: a
distribution given to a constructor is `settled` first (its derived shape becomes its stored
one: the constructor read it), and a nested distribution the constructor's own ``jax.tree.map``
derived (numpyro's truncated and censored classes promote their base's leaves to the parent's
rank and keep its stored shape) gets its stored shape back (`restored`).
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from numpyro.distributions.distribution import Distribution as _NumpyroDistribution

from stabledist._src.records import (
    BLOCKS_HOLDERS,
    EVENT,
    BatchRule,
    descendants,
    holding_fields,
    is_distribution,
    record_of,
    replace_held,
)

__all__ = ["STORED_BATCH_SHAPE", "derive", "is_derived", "restore_children", "restored",
           "settled", "settled_arguments", "settled_value"]

STORED_BATCH_SHAPE = "_numpyro_batch_shape"
"""Where a derived instance keeps the batch shape its aux data had (see the module doc)."""

_SHAPES_PER_CLASS = 256  # derive's memo per class (a vmapped function returns one shape)
_UNKNOWN = object()


def is_derived(value: Any) -> bool:
    """Whether ``value`` is a distribution whose batch shape was read from its leaves. (By its
    metaclass: ``isinstance`` against numpyro's classes goes through their metaclass's
    ``__instancecheck__``, and this runs on the elements of list fields.)"""
    return is_distribution(value) and STORED_BATCH_SHAPE in value.__dict__


_derived_shapes: dict[type, dict[Any, Any]] = {}  # per class: leaf shapes -> batch shape


def derive(d: Any, children: Any) -> Any:
    """Set ``d``'s batch shape from its leaves ``children`` (see the module doc), in place;
    returns ``d``."""
    rule = record_of(type(d)).batch
    assert rule is not None
    state = d.__dict__
    stored = tuple(state["_batch_shape"])
    key = None
    shapes: dict[Any, Any] = {}
    batch: Any = _UNKNOWN
    if rule.pure:  # parameters only: the answer is a function of their shapes
        key = (stored, tuple(state["_event_shape"]),
               *[s if type(s := getattr(children[i], "shape", None)) is tuple else None
                 for i, _ in rule.arrays])
        shapes = _derived_shapes.setdefault(type(d), {})
        batch = shapes.get(key, _UNKNOWN)
    if batch is _UNKNOWN:
        batch = _derived_batch(d, rule, children, stored)
        if key is not None:
            if len(shapes) >= _SHAPES_PER_CLASS:
                shapes.clear()
            shapes[key] = batch
    if batch is None or batch == stored:
        restore_children(state, holding_fields(d))
        return d
    state.setdefault(STORED_BATCH_SHAPE, stored)
    state["_batch_shape"] = batch
    return d


def _derived_batch(d: Any, rule: BatchRule, children: Any, stored: tuple) -> tuple | None:
    """The batch shape the leaves tell, or None (the stored one is kept)."""
    if _holds_blocking(children):
        return None
    try:
        batch = _derived_shape(stored, _contributions(d.__dict__, rule, children))
    except Exception:  # leaves a tree_map made into anything: numpyro's shape, no new error
        return None
    if batch is not None and len(batch) > len(stored) and not _event_kept(d, rule, children):
        return None  # no batch shape describes it: numpyro's stored one, no new error
    return batch


def _contributions(state: dict[str, Any], rule: BatchRule, children: Any) -> list[tuple]:
    found = []
    event_rank = len(state["_event_shape"])
    for i, rank in rule.arrays:
        shape = getattr(children[i], "shape", None)
        if type(shape) is tuple:
            rank = event_rank if rank == EVENT else rank
            if len(shape) >= rank:
                found.append(shape[: len(shape) - rank])
    for i, offset in rule.children:
        child = children[i]
        if isinstance(child, _NumpyroDistribution):
            batch = tuple(child.batch_shape)
            found.append(batch[: max(len(batch) - max(offset(state, child), 0), 0)])
    return found


def _holds_blocking(values: Any) -> bool:
    """Does any distribution among ``values``, or held by one anywhere below, keep its holders'
    shapes (`stabledist._src.records.facts.Facts.blocks_holders`: an `ExpandedDistribution`)?"""
    for value in values:
        if is_distribution(value) and (isinstance(value, BLOCKS_HOLDERS) or any(
                isinstance(v, BLOCKS_HOLDERS) for v in descendants(value))):
            return True
    return False


def _event_kept(d: Any, rule: BatchRule, children: Any) -> bool:
    """Are the new axes batch axes? A parameter that has the event shape (a
    `MultivariateNormal`'s mean, a `Dirichlet`'s concentration, `Delta`'s value; or sizes 1
    that broadcast to it) must still end in it. ``vmap(..., out_axes=k)`` with ``k`` past the
    batch dimensions, and ``jax.jacfwd`` / ``jax.hessian`` of a function returning a
    distribution (their leaves end in the input's shape), put axes inside the event, which no
    batch shape describes. Other parameters say nothing: their event dimensions need not be
    the event's (a state-space model's transition matrix, a copula's scalar concentration)."""
    event = tuple(d.__dict__["_event_shape"])
    for i in rule.event_shaped:
        shape = getattr(children[i], "shape", None)
        if type(shape) is tuple and event and len(shape) >= len(event):
            if not _broadcasts(shape[len(shape) - len(event):], event):
                return False
    return True


def _derived_shape(stored: tuple, contributions: list[tuple]) -> tuple | None:
    if not contributions:
        return None
    n = len(stored)
    most = max(map(len, contributions))
    if most > n:  # new leading axes
        k = most - n
        lead = next(c[:k] for c in contributions if len(c) == most)
        if all(c[:k] == lead and _broadcasts(c[k:], stored) for c in contributions):
            return lead + stored
        return _broadcast(contributions)  # axes placed elsewhere (out_axes=1): numpyro's rule
    if most < n:  # axes taken away: the leading ones (in_axes=0), else those that fit
        batch = stored[n - most:]
        if all(_broadcasts(c, batch) for c in contributions):
            return batch
        batch = _broadcast(contributions)
        if batch is not None and len(batch) == most and _within(batch, stored):
            return batch
    return None


def _within(shape: tuple, stored: tuple) -> bool:
    """Is ``shape`` ``stored`` with some axes deleted (``vmap`` with ``in_axes`` past 0)?"""
    sizes = iter(stored)
    return all(any(size == s for s in sizes) for size in shape)


def _broadcasts(shape: tuple, target: tuple) -> bool:
    """Does ``shape`` broadcast to ``target`` (right-aligned, no new dimensions)?"""
    if len(shape) > len(target):
        return False
    return all(a == b or a == 1 for a, b in zip(reversed(shape), reversed(target)))


def _broadcast(shapes: list[tuple]) -> tuple | None:
    result: list[Any] = []
    for shape in shapes:
        for i, size in enumerate(reversed(shape)):
            if i == len(result):
                result.insert(0, size)
            elif result[-1 - i] == 1:
                result[-1 - i] = size
            elif size not in (1, result[-1 - i]):
                return None
    return tuple(result)


# --- what constructors get and give ----------------------------------------------------------


def restore_children(state: dict[str, Any], names: Iterable[str]) -> None:
    """Give the derived distributions held in the fields ``names`` of ``state`` their stored
    shapes back, as copies (a distribution given to a hand-called ``tree_unflatten`` is never
    changed): their parent keeps its shape, so they keep theirs."""
    replace_held(state, names, restored)


def restored(d: Any) -> Any:
    """``d`` with its stored batch shape back (a copy) if it is derived, else ``d``: what a
    constructor that ran with `settled` arguments holds derived now, its own ``jax.tree.map``
    derived (numpyro's truncated and censored classes promote their base's leaves and keep
    its stored shape), so it gets numpyro's shape, as in numpyro, where nothing is derived."""
    if not is_derived(d):
        return d
    state = d.__dict__.copy()
    state["_batch_shape"] = state.pop(STORED_BATCH_SHAPE)
    restore_children(state, holding_fields(d))  # its own derived children
    return _with_state(d, state)


def settled(d: Any) -> Any:
    """``d`` as a child of a new distribution: a derived instance is copied with its derived
    batch shape as its stored one, and so are the derived distributions it holds. The
    parent's constructor read that shape (``Independent`` moved its dimensions to the event,
    ``expand`` sized its axes from it), so round trips of the parent must keep it. (A copy:
    the caller's instance keeps its element's tree structure.)"""
    if not is_derived(d):
        return d
    state = dict(d.__dict__)
    del state[STORED_BATCH_SHAPE]
    replace_held(state, holding_fields(d), settled)
    return _with_state(d, state)


def _with_state(d: Any, state: dict[str, Any]) -> Any:
    """A new instance of ``d``'s class with ``state`` (no constructor, no bookkeeping)."""
    copy = object.__new__(type(d))
    object.__setattr__(copy, "__dict__", state)
    return copy


def settled_value(value: Any) -> Any:
    """`settled` for a distribution, or for each one of a list or tuple of them (``value``
    itself when nothing in it is derived)."""
    if type(value) in (list, tuple):
        return type(value)(map(settled, value)) if any(map(is_derived, value)) else value
    return settled(value)


def settled_arguments(args: tuple[Any, ...], kwargs: dict[str, Any]
                      ) -> tuple[tuple[Any, ...], dict[str, Any]]:
    """A constructor's arguments with every derived distribution among them `settled` (the same
    objects when none is). numpyro's censored constructors rebuild their base distribution
    with ``jax.tree.map``: given the batch itself, the rebuilt base kept its element's stored
    shape; given the settled copy, it keeps the batch's, as the same construction from
    stacked parameters does."""
    if any(map(_holds_derived, args)):
        args = tuple(map(settled_value, args))
    if kwargs and any(map(_holds_derived, kwargs.values())):
        kwargs = {k: settled_value(v) for k, v in kwargs.items()}
    return args, kwargs


def _holds_derived(value: Any) -> bool:
    if type(value) in (list, tuple):
        return any(map(is_derived, value))
    return is_derived(value)
