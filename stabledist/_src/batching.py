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
`stabledist._src.pytree`): only an instance whose largest parameter rank disagrees with the
stored batch shape reaches `derive`. A
distribution built from a derived one keeps the shape its constructor read (`settled`). Nothing
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
    "CHILD_OFFSETS", "CONSTRUCTING", "DERIVED_ALIVE", "EVENT", "NOT_DERIVED",
    "STORED_BATCH_SHAPE", "BatchRule",
    "after_unflatten", "batch_rule", "derive", "event_rank", "is_derived", "marked", "merged",
    "restored_batch", "same", "settled", "settled_arguments", "settled_value", "to_event",
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

# The derived instances alive, weakly: empty unless one lives, a test the generated unflatten
# of a parent makes for free (its children can only need `undo` while one lives). Whether an
# instance is derived is its own ``STORED_BATCH_SHAPE`` entry; this set is only that flag.
_DERIVED: weakref.WeakSet[Any] = weakref.WeakSet()
# its set of weak references (CPython's ``WeakSet.data``, not in the stubs)
DERIVED_ALIVE = _DERIVED.data  # pyright: ignore[reportAttributeAccessIssue]

STORED_BATCH_SHAPE = "_numpyro_batch_shape"
"""Where a derived instance keeps the batch shape its aux data had: flatten emits it, so the
treedef of a batched distribution is numpyro's (one tree structure for an element and the
batch, as ``vmap``'s ``in_axes`` prefixes and ``vmap_over`` expect) and every unflatten derives
the shape again from the leaves."""

EVENT = -1
"""Event rank of a parameter that is the instance's event rank (`Delta`'s ``v``)."""

# Parameters numpyro's constructor broadcasts to the batch and event shape: a new axis inside
# their event dimensions (``vmap(..., out_axes=k)`` past the batch) is detected there.
EVENT_SHAPED: dict[str, tuple[str, ...]] = {
    "MultivariateNormal": ("loc",),
    "Dirichlet": ("concentration",),
}

# Parameters whose event rank is not their ``arg_constraints`` entry's.
EVENT_RANKS: dict[str, dict[str, int]] = {
    "Delta": {"v": EVENT},  # the instance's event rank (``event_dim=`` of the constructor)
    "MatrixNormal": {"loc": 2},  # declared ``real_vector``, holds a matrix
    # the marginals' parameters, one per event coordinate
    "GaussianCopulaBeta": {"concentration1": 1, "concentration0": 1},
    "MaskedDistribution": {"_mask": 0},  # a hybrid field, not in ``arg_constraints``
}



@dataclass(frozen=True, eq=False)  # hashed by identity: a key of derive's answers
class BatchRule:
    """Where a class's batch shape can be read: ``arrays`` are ``(leaf index, event rank)``
    (`EVENT` for the instance's), ``children`` ``(leaf index, offset)``."""

    arrays: tuple[tuple[int, int], ...]
    children: tuple[tuple[int, Offset], ...]
    keep: bool = False  # a `NOT_DERIVED` class: only give its children their shapes back
    pure: bool = False  # parameters only (no field may hold a distribution): memoizable
    # parameters whose shape ends in the event shape (`EVENT_SHAPED`, `EVENT` ranks)
    event_shaped: tuple[int, ...] = ()


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
    nested = _NESTED[cls] = tuple(name for name in data if name not in arrays)
    shaped = merged({k: dict.fromkeys(v) for k, v in EVENT_SHAPED.items()}, cls)
    event_shaped = tuple(i for i, rank in ranks if rank == EVENT or data[i] in shaped)
    return BatchRule(tuple(ranks), children, pure=not nested, event_shaped=event_shaped)


# The fields that may hold distributions, of each class that can be derived (`_restored`
# gives their derived children back too).
_NESTED: weakref.WeakKeyDictionary[type, tuple[str, ...]] = weakref.WeakKeyDictionary()


def merged(table: Mapping[str, Mapping[str, Any]], cls: type) -> dict[str, Any]:
    """The entries of a per-class table (keyed by class name) for ``cls``: its bases' first,
    overridden by those of the classes derived from them."""
    found: dict[str, Any] = {}
    for base in reversed(cls.__mro__):
        if base.__module__.startswith("numpyro."):  # not a user's class of the same name
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


def undo(state: dict[str, Any], names: tuple[str, ...] | None = None) -> None:
    """Give the nested distributions this unflatten derived their stored shapes back: a parent
    that keeps its stored shape keeps its children's too (numpyro's state, no new error).
    ``names``: the fields that may hold distributions (default: all). Copies, so a
    distribution given to a hand-called ``tree_unflatten`` is never changed."""
    if not DERIVED_ALIVE:
        return
    for name in state if names is None else names:
        value = state.get(name)
        if isinstance(value, _NumpyroDistribution):
            if STORED_BATCH_SHAPE in value.__dict__:
                state[name] = _restored(value)
        elif type(value) is list and any(is_derived(v) for v in value):
            state[name] = [_restored(v) if is_derived(v) else v for v in value]


def is_derived(value: Any) -> bool:
    # the metaclass test: isinstance against numpyro's classes goes through their metaclass's
    # __instancecheck__ (~0.1 us), and this runs on the elements of every list field
    return isinstance(type(value), _DISTRIBUTION_META) and STORED_BATCH_SHAPE in value.__dict__


_DISTRIBUTION_META = type(_NumpyroDistribution)


def _restored(d: Any) -> Any:
    copy = object.__new__(type(d))
    state = d.__dict__.copy()
    state["_batch_shape"] = state.pop(STORED_BATCH_SHAPE)
    nested = _NESTED.get(type(d))
    if nested:  # its own derived children
        undo(state, nested)
    object.__setattr__(copy, "__dict__", state)  # not Distribution.__setattr__'s bookkeeping
    return copy


def settled(d: Any) -> Any:
    """``d`` as a child of a new distribution: a derived instance is copied with its derived
    batch shape as its stored one, and so are the derived distributions it holds. The
    parent's constructor read that shape (``Independent`` moved its dimensions to the event,
    ``expand`` sized its axes from it), so round trips of the parent must keep it: `undo`
    restores only what an unflatten derived. (A copy: the caller's instance keeps its
    element's tree structure, so the parent holds an equal object, not the same one.)"""
    if not is_derived(d):
        return d
    copy = object.__new__(type(d))
    state = dict(d.__dict__)
    del state[STORED_BATCH_SHAPE]
    for name in _NESTED.get(type(d), ()):
        value = state.get(name)
        if is_derived(value):
            state[name] = settled(value)
        elif type(value) is list and any(map(is_derived, value)):
            state[name] = [settled(v) for v in value]
    object.__setattr__(copy, "__dict__", state)
    return copy


def restored_batch(d: Any) -> None:
    """``d`` was unpickled or copied: if it is a batch out of ``vmap``, it counts as one alive
    (`DERIVED_ALIVE`: constructors given it settle it, parents built from it undo it)."""
    if STORED_BATCH_SHAPE in d.__dict__:
        _DERIVED.add(d)


def settled_arguments(args: tuple[Any, ...], kwargs: dict[str, Any]
                      ) -> tuple[tuple[Any, ...], dict[str, Any]]:
    """A constructor's arguments with every batch out of ``vmap`` among them `settled` (called
    only while one lives). numpyro's censored constructors rebuild their base distribution with
    ``jax.tree.map``, where nothing is derived: given the batch itself, the rebuilt base kept
    its element's stored shape; given the settled copy, it keeps the batch's, as the same
    construction from stacked parameters does."""
    return tuple(map(settled_value, args)), {k: settled_value(v) for k, v in kwargs.items()}


def settled_value(value: Any) -> Any:
    """`settled` for a distribution, or for each one of a list or tuple of them (``value``
    itself when nothing in it is derived)."""
    if type(value) in (list, tuple):
        return type(value)(map(settled, value)) if any(map(is_derived, value)) else value
    return settled(value)


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
    """Set ``d``'s batch shape from its leaves (see the module doc); returns ``d``. Called
    when the first parameter's rank disagrees with the stored batch shape (or a nested
    distribution was derived): the whole check is here."""
    if CONSTRUCTING.depth:
        return d
    state = d.__dict__
    stored = tuple(state["_batch_shape"])
    key = None
    if rule.pure:  # parameters only: the answer is a function of their shapes
        key = (rule, stored, tuple(state["_event_shape"]),
               *[s if type(s := getattr(children[i], "shape", None)) is tuple else None
                 for i, _ in rule.arrays])
        batch = _SHAPES.get(key, _UNKNOWN)
    else:
        batch = _UNKNOWN
    if batch is _UNKNOWN:
        batch = None
        if not _holds_expanded(children):
            try:
                batch = _derived_shape(stored, _contributions(state, rule, children))
            except Exception:
                batch = None
        if (batch is not None and len(batch) > len(stored)
                and not _event_dimensions_kept(d, rule, children)):
            batch = None  # no batch shape describes it: numpyro's stored one, no new error
        if key is not None:
            if len(_SHAPES) >= _SHAPES_SIZE:
                _SHAPES.clear()
            _SHAPES[key] = batch
    if batch is None or batch == stored:
        undo(state)
        return d
    _DERIVED.add(d)
    state.setdefault(STORED_BATCH_SHAPE, stored)
    state["_batch_shape"] = batch
    return d


# derive's answers for classes with parameters only, keyed by the rule, the stored shapes and the
# parameters' shapes (a vmapped function returns the same shapes on every call): bounded
_SHAPES: dict[tuple, tuple | None] = {}
_SHAPES_SIZE = 4096
_UNKNOWN = object()


def after_unflatten(d: Any, rule: BatchRule, children: Any, nested: tuple[str, ...]) -> Any:
    """What the generated unflatten of `stabledist._src.pytree` does after building ``d``,
    for the classes it generates no code for (the same tests, in the same order)."""
    if CONSTRUCTING.depth:
        return d
    state = d.__dict__
    if rule.arrays and not rule.keep:
        n, event = len(state["_batch_shape"]), len(state["_event_shape"])
        ranks = [_rank(children[i]) - (event if rank == EVENT else rank)
                 for i, rank in rule.arrays]
        if max(ranks) != n:  # one above the stored rank (new axes), or all below it
            return derive(d, rule, children)
    elif not DERIVED_ALIVE:
        return d
    elif not rule.keep and marked(*(children[i] for i, _ in rule.children)):
        return derive(d, rule, children)
    if nested and DERIVED_ALIVE:
        undo(state, nested)
    return d


def _rank(value: Any) -> int:
    shape = getattr(value, "shape", ())
    return len(shape) if type(shape) is tuple else 0


def marked(*values: Any) -> bool:
    """Was any of these nested values (distributions or lists of them) derived? Free while
    no derived instance lives."""
    if not DERIVED_ALIVE:
        return False
    for value in values:
        if is_derived(value) or (type(value) is list and any(map(is_derived, value))):
            return True
    return False


def _event_dimensions_kept(d: Any, rule: BatchRule, children: Any) -> bool:
    """Are the new axes batch axes? A parameter that has the event shape (a
    `MultivariateNormal`'s mean, a `Dirichlet`'s concentration, `Delta`'s value; or sizes 1
    that broadcast to it) must still end in it. ``vmap(..., out_axes=k)`` with ``k`` past the
    batch dimensions, and ``jax.jacfwd`` / ``jax.hessian`` of a function returning a
    distribution (their leaves end in the input's shape), put axes inside the event, which no
    batch shape describes: the stored shape is kept there, as numpyro keeps it. Other
    parameters say nothing: their event dimensions need not be the event's (a state-space
    model's transition matrix, a copula's scalar concentration)."""
    event = tuple(d.__dict__["_event_shape"])
    for i in rule.event_shaped:
        shape = getattr(children[i], "shape", None)
        if type(shape) is tuple and event and len(shape) >= len(event):
            if not _broadcasts(shape[len(shape) - len(event):], event):
                return False
    return True


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
