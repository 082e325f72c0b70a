"""Batch shapes read from the leaves: a distribution that leaves ``vmap`` is batched.

numpyro keeps ``_batch_shape`` in aux data, so ``jax.vmap(lambda m: Normal(m, 1.0))(means)``
returns a Normal whose leaves have a leading axis of ``len(means)`` and whose batch shape is
still ``()``: every method then broadcasts wrongly or raises (numpyro #2271). Every leaf that
leaves ``vmap`` (``out_axes=0``), a ``lax.scan`` as ``ys`` or a ``tree_map(jnp.stack, ...)``
gained the same leading axes, and the constructor gave the parameters one rank (numpyro's
``promote_shapes``), so the new batch shape can be read from the leaves when their rank
disagrees with the stored batch shape:

* a parameter of event rank ``e`` (its ``arg_constraints`` entry) contributes
  ``shape[:ndim - e]``; a nested distribution contributes its batch shape less the dimensions
  its parent moves to the event (`CHILD_OFFSETS`);
* more dimensions than stored (``k`` more): the leading ``k`` axes, shared by every
  contribution, go in front of the stored batch shape; fewer (inside ``vmap``, or a ``scan``
  over a batched instance): the stored shape loses its leading axes.

The check runs in every unflatten but costs one ``len`` per parameter (generated inline by
`stabledist._src.pytree`); only an instance whose ranks disagree reaches `derive`. Nothing
derived goes into aux data: the treedef stays numpyro's. Leaves without a ``shape`` (Python
numbers, ``in_axes`` specs, placeholders) say nothing. When the contributions disagree (a
``tree_map`` that changed the shapes in another way) the stored shape is kept, as numpyro
does: never a new error.
"""

from __future__ import annotations

import threading
import weakref
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from numpyro.distributions.distribution import Distribution as _NumpyroDistribution
from numpyro.distributions.distribution import ExpandedDistribution

__all__ = [
    "CHILD_OFFSETS", "CONSTRUCTING", "DERIVED_BEFORE", "EVENT", "NOT_DERIVED",
    "STORED_BATCH_SHAPE", "BatchRule",
    "batch_rule", "derive", "event_rank", "merged", "needs_derivation", "same", "to_event",
    "undo",
]

Offset = Callable[[Any, Any], int]
"""``(parent's state, child) -> how many trailing batch dimensions of child are not the
parent's``."""


def same(parent: dict[str, Any], child: Any) -> int:
    return 0


def to_event(parent: dict[str, Any], child: Any) -> int:
    """`Independent`: the child's last batch dimensions are the parent's event."""
    return len(parent["_event_shape"]) - len(child.event_shape)


def _transformed(parent: dict[str, Any], child: Any) -> int:
    """`TransformedDistribution`: batch dimensions of the base distribution that become event
    dimensions (each transform changes the rank by its codomain less domain event rank)."""
    delta = sum(t.codomain.event_dim - t.domain.event_dim for t in parent["transforms"])
    return len(parent["_event_shape"]) - len(child.event_shape) - delta


# Nested distributions whose batch shape tells the parent's, by numpyro class name (a class
# inherits its bases' entries). A nested distribution not listed says nothing (a mixture's
# components carry the mixture axis; `Beta` inside `LKJCholesky` one per matrix entry), and
# neither does anything in a class that is not a numpyro class's subclass.
CHILD_OFFSETS: dict[str, dict[str, Offset]] = {
    # wrappers whose base distribution has their batch shape
    **{name: {"base_dist": same} for name in (
        "MaskedDistribution", "LeftTruncatedDistribution", "RightTruncatedDistribution",
        "TwoSidedTruncatedDistribution", "LeftCensoredDistribution", "RightCensoredDistribution",
        "HurdleProbs", "ZeroInflatedProbs", "SineSkewed")},
    "Independent": {"base_dist": to_event},
    "GaussianCopula": {"base_dist": to_event},
    "TransformedDistribution": {"base_dist": _transformed},
    "_MixtureBase": {"_mixing_distribution": same},
}

# Classes whose batch shape is not a function of the leaves' shapes alone: their instances keep
# the stored shape (numpyro's behaviour). `ImproperUniform` has no leaves. `ExpandedDistribution`
# expands to a batch shape held in aux data (``_expanded_sizes``, ``_interstitial_sizes``),
# which a new leading axis would have to be inserted into, with new leaves: numpyro's
# `promote_batch_shape` does that for contrib ``scan``, and it reads the base distribution's
# stored batch shape. The distributions inside any of these keep their stored shapes (`undo`).
# `EulerMaruyama`'s ``t`` is a time grid, not a batched parameter. `CirculantNormal` and
# `IntervalCensoredDistribution` read parameters through transforms or value masks that a new
# leading axis does not reach. An instance holding an `ExpandedDistribution` anywhere below it
# (numpyro's `HurdlePoisson`, `ZeroSumNormal`, ... build one) keeps its shape too.
NOT_DERIVED: frozenset[str] = frozenset({
    "ExpandedDistribution", "ImproperUniform", "EulerMaruyama", "CirculantNormal",
    "IntervalCensoredDistribution",
})

class _Constructing(threading.local):
    """How many stable constructors run in this thread. numpyro's constructors reshape
    parameters with ``jax.tree.map`` and rely on the stored shapes (the truncated and censored
    classes promote their base distribution's leaves to the parent's rank and keep its batch
    shape): inside a constructor nothing is derived, as in numpyro."""

    depth = 0


CONSTRUCTING = _Constructing()

# The instances an unflatten derived, with the batch shape they had stored (weakly: an entry
# lives as long as its instance).
_BEFORE: weakref.WeakKeyDictionary[Any, tuple] = weakref.WeakKeyDictionary()
# its dict of weak references (CPython's ``WeakKeyDictionary.data``, not in the stubs): empty
# unless a derived instance lives, a test the generated unflatten makes for free
DERIVED_BEFORE = _BEFORE.data  # pyright: ignore[reportAttributeAccessIssue]

STORED_BATCH_SHAPE = "_numpyro_batch_shape"
"""Where a derived instance keeps the batch shape its aux data had: flatten emits it, so the
treedef of a batched distribution is numpyro's (one tree structure for an element and the
batch, as ``vmap``'s ``in_axes`` prefixes and ``vmap_over`` expect) and every unflatten derives
the shape again from the leaves."""

EVENT = -1
"""Event rank of a parameter that is the instance's event rank (`Delta`'s ``v``)."""

# Parameters whose event rank is not their ``arg_constraints`` entry's.
EVENT_RANKS: dict[str, dict[str, int]] = {
    "Delta": {"v": EVENT},  # the instance's event rank (``event_dim=`` of the constructor)
    "MatrixNormal": {"loc": 2},  # declared ``real_vector``, holds a matrix
    # the marginals' parameters, one per event coordinate
    "GaussianCopulaBeta": {"concentration1": 1, "concentration0": 1},
    "MaskedDistribution": {"_mask": 0},  # a hybrid field, not in ``arg_constraints``
}



@dataclass(frozen=True)
class BatchRule:
    """Where a class's batch shape can be read: ``arrays`` are ``(leaf index, event rank)``
    (`EVENT` for the instance's), ``children`` ``(leaf index, offset)``."""

    arrays: tuple[tuple[int, int], ...]
    children: tuple[tuple[int, Offset], ...]
    keep: bool = False  # a `NOT_DERIVED` class: only give its children their shapes back


def batch_rule(cls: type, data: tuple[str, ...], arrays: frozenset[str],
               numpyro_names: tuple[str, ...]) -> BatchRule | None:
    """The `BatchRule` of a class with data fields ``data`` (``arrays``: the parameters),
    or None when nothing in its leaves tells the batch shape. ``numpyro_names``: the names of
    the numpyro classes it derives from, most derived first."""
    if NOT_DERIVED.intersection(numpyro_names):
        return BatchRule((), (), keep=True)
    ranks = []
    for i, name in enumerate(data):
        rank = event_rank(cls, name) if name in arrays else None
        if rank is not None:
            ranks.append((i, rank))
    offsets = merged(CHILD_OFFSETS, cls)
    children = tuple((i, offsets[name]) for i, name in enumerate(data) if name in offsets)
    if not ranks and not children:
        return None
    return BatchRule(tuple(ranks), children)


def merged(table: Mapping[str, Mapping[str, Any]], cls: type) -> dict[str, Any]:
    """The entries of a per-class table (keyed by class name) for ``cls``: its bases' first,
    overridden by those of the classes derived from them."""
    found: dict[str, Any] = {}
    for base in reversed(cls.__mro__):
        found.update(table.get(base.__name__, {}))
    return found


def event_rank(cls: type, name: str) -> int | None:
    """The event rank of parameter ``name`` (`EVENT`: the instance's): `EVENT_RANKS`, else the
    first ``arg_constraints`` in the MRO that has it (None for a dependent constraint without
    one: it says nothing)."""
    overrides = merged(EVENT_RANKS, cls)
    if name in overrides:
        return overrides[name]
    for base in cls.__mro__:
        found: Mapping[str, Any] = vars(base).get("arg_constraints", {})
        if isinstance(found, Mapping) and name in found:
            constraint = found[name]
            try:
                return int(constraint.event_dim)
            except NotImplementedError:
                return None
    return None


def needs_derivation(state: dict[str, Any], rule: BatchRule, children: Any) -> bool:
    """The check `stabledist._src.pytree` generates inline, for the classes it does not
    generate code for: does any rank disagree with the stored batch shape?"""
    if rule.keep:
        if not CONSTRUCTING.depth:
            undo(state)
        return False
    if not rule.arrays:  # nested distributions only: one of them was derived, if any
        return bool(DERIVED_BEFORE) and not CONSTRUCTING.depth
    most = -1
    for i, rank in rule.arrays:  # as the generated check: the largest parameter rank
        shape = getattr(children[i], "shape", None)
        if type(shape) is tuple:
            most = max(most, len(shape) - (len(state["_event_shape"]) if rank == EVENT else rank))
    return most >= 0 and most != len(state["_batch_shape"])


def undo(state: dict[str, Any]) -> None:
    """Give the nested distributions this unflatten derived their stored shapes back: a parent
    that keeps its stored shape keeps its children's too (numpyro's state, no new error).
    Copies, so a distribution given to a hand-called ``tree_unflatten`` is never changed."""
    if not _BEFORE:
        return
    for name, value in state.items():
        if isinstance(value, _NumpyroDistribution) and value in _BEFORE:
            state[name] = _restored(value)
        elif type(value) is list and any(v in _BEFORE for v in value
                                         if isinstance(v, _NumpyroDistribution)):
            state[name] = [_restored(v) if isinstance(v, _NumpyroDistribution)
                           and v in _BEFORE else v for v in value]


def _restored(d: Any) -> Any:
    copy = object.__new__(type(d))
    state = dict(d.__dict__)
    state["_batch_shape"] = state.pop(STORED_BATCH_SHAPE, _BEFORE[d])
    undo(state)
    object.__setattr__(copy, "__dict__", state)  # not Distribution.__setattr__'s bookkeeping
    return copy


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



def derive(d: Any, rule: BatchRule, children: Any) -> Any:
    """Set ``d``'s batch shape from its leaves (see the module doc); returns ``d``."""
    if CONSTRUCTING.depth:
        return d
    state = d.__dict__
    stored = tuple(state["_batch_shape"])
    batch = None
    if not _holds_expanded(children):
        try:
            batch = _derived_shape(stored, _contributions(state, rule, children))
        except Exception:
            batch = None
    if batch is None or batch == stored:
        undo(state)
        return d
    _BEFORE[d] = stored
    state.setdefault(STORED_BATCH_SHAPE, stored)
    state["_batch_shape"] = batch
    return d


def _holds_expanded(values: Any) -> bool:
    for value in values:
        if isinstance(value, _NumpyroDistribution):
            if isinstance(value, ExpandedDistribution) or _holds_expanded(
                    v for v in value.__dict__.values() if isinstance(v, _NumpyroDistribution)):
                return True
    return False


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
    if most < n:  # leading axes taken away
        batch = stored[n - most:]
        if all(_broadcasts(c, batch) for c in contributions):
            return batch
    return None


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
