"""What numpyro's own declarations do not say about its classes: every per-class fact of the
fork of numpyro, as data, in this one module.

Everything else stabledist knows about a class is read from numpyro (``arg_constraints``,
``pytree_data_fields``, ``pytree_aux_fields``, ``lazy_property``, constructor signatures). The
exceptions are `Facts` entries keyed by the numpyro class *object* (resolved here, at import,
from numpyro's modules; a class a numpyro release does not have is left out). `facts_of` merges
the entries of a class's MRO, bases first, so a subclass inherits its bases' facts; a user's
class that merely shares a numpyro class's name matches nothing. Adding a numpyro class's quirk
is one entry in `_ENTRIES`, with its reason.

This is the only module of ``stabledist._src`` that names numpyro classes.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, fields
from types import MappingProxyType
from typing import Any

import numpyro.distributions.distribution as _numpyro_distribution
from numpyro.distributions import constraints

__all__ = ["BLOCKS_HOLDERS", "EVENT", "FACTS", "Facts", "Offset", "StaticPredicate", "facts_of",
           "is_static_bool"]

StaticPredicate = Callable[[Any, Any], bool]
"""``(instance, value) -> True`` when a hybrid field's value is static (goes to aux data)."""

Offset = Callable[[Mapping[str, Any], Any], int]
"""``(parent's state, child) -> how many trailing batch dimensions of the child are not the
parent's``."""

EVENT = -1
"""Event rank of a parameter whose rank is the instance's event rank (`Delta`'s ``v``)."""


@dataclass(frozen=True)
class Facts:
    """One numpyro class's exceptions (every field optional; see `_ENTRIES` for each reason).

    Pytree: ``hybrid`` fields are leaves unless their test says static; ``extra_aux`` are
    attributes a constructor sets that numpyro's tree drops (``list_aux``: list-valued ones,
    frozen to tuples); ``recomputed`` attributes are recomputed from the leaves (lazy values).
    Batch shapes: ``child_offsets`` name nested distributions whose batch shape tells the
    parent's; ``event_ranks`` override ``arg_constraints``; ``event_shaped`` parameters end in
    the event shape; ``keeps_batch`` classes keep the stored shape (not a function of the
    leaves); ``blocks_holders``: a distribution holding one anywhere keeps its shape too;
    ``children_keep_batch``: the constructor promotes its children's leaves, which keep their
    stored shapes. Slicing: ``unsliceable`` says why a class cannot be sliced,
    ``slices_as_base``: a slice is its ``base_dist``'s slice, broadcast to the whole batch;
    ``slice_offsets`` are nested distributions' own trailing batch dimensions,
    ``constructor_arguments`` rebuild arguments numpyro keeps only through shapes,
    ``argument_fields`` map constructor arguments to the attributes that store them.
    """

    hybrid: Mapping[str, StaticPredicate] = field(default_factory=dict)
    extra_aux: tuple[str, ...] = ()
    list_aux: tuple[str, ...] = ()
    recomputed: Mapping[str, Callable[[Any], Any]] = field(default_factory=dict)
    child_offsets: Mapping[str, Offset] = field(default_factory=dict)
    event_ranks: Mapping[str, int] = field(default_factory=dict)
    event_shaped: tuple[str, ...] = ()
    keeps_batch: bool = False
    blocks_holders: bool = False
    children_keep_batch: bool = False
    unsliceable: str | None = None
    slices_as_base: bool = False
    slice_offsets: Mapping[str, Offset] = field(default_factory=dict)
    constructor_arguments: Mapping[str, Callable[[Mapping[str, Any]], Any]] = field(
        default_factory=dict)
    argument_fields: Mapping[str, str] = field(default_factory=dict)

    def merged(self, other: Facts) -> Facts:
        """These facts overridden by ``other``'s (a subclass's): mappings and tuples combined,
        flags and reasons set where ``other`` sets them."""
        changes: dict[str, Any] = {}
        for f in fields(self):
            mine, theirs = getattr(self, f.name), getattr(other, f.name)
            if isinstance(mine, Mapping):
                changes[f.name] = {**mine, **theirs}
            elif isinstance(mine, tuple):
                changes[f.name] = mine + tuple(n for n in theirs if n not in mine)
            else:
                changes[f.name] = theirs or mine
        return Facts(**changes)


def is_static_bool(_: Any, value: Any) -> bool:
    """Hybrid test: a Python ``bool`` is static, anything else is a leaf (as in numpyro)."""
    return isinstance(value, bool)


def same(parent: Mapping[str, Any], child: Any) -> int:
    """A nested distribution with its parent's batch shape."""
    return 0


def to_event(parent: Mapping[str, Any], child: Any) -> int:
    """`Independent`: the child's last batch dimensions are the parent's event."""
    return len(parent["_event_shape"]) - len(child.event_shape)


def _transformed(parent: Mapping[str, Any], child: Any) -> int:
    """`TransformedDistribution`: batch dimensions of the base distribution that become event
    dimensions (each transform changes the rank by its codomain less domain event rank)."""
    delta = sum(t.codomain.event_dim - t.domain.event_dim for t in parent["transforms"])
    return len(parent["_event_shape"]) - len(child.event_shape) - delta


def _one(parent: Mapping[str, Any], child: Any) -> int:
    return 1


_BASE_SAME = MappingProxyType({"base_dist": same})

# (numpyro module, class name, facts): the reason for each entry is beside it.
_ENTRIES: tuple[tuple[str, str, Facts], ...] = (
    # --- pytree: numpyro writes a custom tree_flatten for these (a numpyro class with its own
    # tree_flatten that is not listed makes the import fail rather than flatten it wrongly) ---
    # mask=True/False is a Python bool, static; an array mask is a leaf
    ("distribution", "MaskedDistribution", Facts(
        hybrid={"_mask": is_static_bool}, child_offsets=_BASE_SAME,
        event_ranks={"_mask": 0})),  # a hybrid field, not in arg_constraints
    # the sparse adjacency matrix (scipy) cannot be a leaf
    ("continuous", "CAR", Facts(
        hybrid={"adj_matrix": lambda d, _: bool(d.__dict__.get("is_sparse", False))})),
    # a list of parameter names numpyro sets but does not declare (found by
    # tests/test_pytree.py's test_every_attribute_is_a_field): static, frozen to a tuple
    ("distribution", "Independent", Facts(
        extra_aux=("reparametrized_params",), list_aux=("reparametrized_params",),
        child_offsets={"base_dist": to_event})),
    # --- attributes a constructor computes and numpyro's tree does not declare as data: lazy
    # values (the constructor's own value is seeded, so the same instance reads it exactly),
    # recomputed from the leaves after a tree_map, never leaves themselves ---
    # numpyro drops Levy's support in a round trip (a jitted Levy has no support)
    ("continuous", "Levy", Facts(
        recomputed={"_support": lambda d: constraints.greater_than(d.loc)})),
    # numpyro 0.21 declares these supports aux data: their bounds are arrays and constraints
    # compare by identity, so no two instances had equal treedefs (no jit cache hit, no scan
    # carry). numpyro 0.22 declares them data fields, which wins (they stay leaves there).
    ("truncated", "DoublyTruncatedPowerLaw", Facts(
        recomputed={"_support": lambda d: constraints.interval(d.low, d.high)})),
    ("truncated", "LowerTruncatedPowerLaw", Facts(
        recomputed={"_support": lambda d: constraints.greater_than(d.low)})),
    # --- batch shapes: nested distributions whose batch shape tells the parent's (a nested
    # distribution not listed says nothing: a mixture's components carry the mixture axis,
    # LKJCholesky's Beta one per matrix entry) ---
    ("truncated", "LeftTruncatedDistribution", Facts(
        child_offsets=_BASE_SAME, children_keep_batch=True)),
    ("truncated", "RightTruncatedDistribution", Facts(
        child_offsets=_BASE_SAME, children_keep_batch=True)),
    ("truncated", "TwoSidedTruncatedDistribution", Facts(
        child_offsets=_BASE_SAME, children_keep_batch=True)),
    # their constructors promote the base distribution's leaves with jax.tree.map to the
    # parent's rank and keep its stored batch shape
    ("truncated", "LeftTruncatedGamma", Facts(children_keep_batch=True)),
    ("truncated", "RightTruncatedGamma", Facts(children_keep_batch=True)),
    ("truncated", "TwoSidedTruncatedGamma", Facts(children_keep_batch=True)),
    ("censored", "LeftCensoredDistribution", Facts(
        child_offsets=_BASE_SAME, children_keep_batch=True)),
    ("censored", "RightCensoredDistribution", Facts(
        child_offsets=_BASE_SAME, children_keep_batch=True)),
    ("discrete", "HurdleProbs", Facts(child_offsets=_BASE_SAME)),
    ("discrete", "ZeroInflatedProbs", Facts(child_offsets=_BASE_SAME)),
    ("directional", "SineSkewed", Facts(child_offsets=_BASE_SAME)),
    ("copula", "GaussianCopula", Facts(child_offsets={"base_dist": to_event})),
    ("distribution", "TransformedDistribution", Facts(
        child_offsets={"base_dist": _transformed},
        argument_fields={"base_distribution": "base_dist"})),
    ("mixtures", "_MixtureBase", Facts(child_offsets={"_mixing_distribution": same})),
    # a mixture's components carry the mixture axis after the batch: not indexed by a slice
    ("mixtures", "MixtureSameFamily", Facts(slice_offsets={"_component_distribution": _one})),
    # --- classes whose batch shape is not a function of the leaves' shapes alone: instances
    # keep the stored shape (numpyro's behaviour), and so do the distributions inside them ---
    # no leaves at all
    ("distribution", "ImproperUniform", Facts(keeps_batch=True)),
    # expands to a batch shape held in aux data (_expanded_sizes, _interstitial_sizes), which a
    # new leading axis would have to be inserted into, with new leaves (numpyro's
    # promote_batch_shape does that for contrib scan, reading the base's stored shape); an
    # instance holding one anywhere (numpyro's HurdlePoisson, ZeroSumNormal, ... build one)
    # keeps its shape too
    # (a slice is its base broadcast to the batch and indexed: an expansion of it would keep
    # the whole batch's shape, so each element inside vmap would claim the whole batch)
    ("distribution", "ExpandedDistribution", Facts(
        keeps_batch=True, blocks_holders=True, slices_as_base=True)),
    # `t` is a time grid, not a batched parameter
    ("continuous", "EulerMaruyama", Facts(
        keeps_batch=True, unsliceable="its batch shape is not carried by its parameters")),
    # parameters read through transforms or value masks that a new leading axis does not reach
    ("continuous", "CirculantNormal", Facts(keeps_batch=True)),
    ("censored", "IntervalCensoredDistribution", Facts(keeps_batch=True)),
    # --- parameters whose event rank is not their arg_constraints entry's ---
    # the instance's event rank (event_dim= of the constructor), which numpyro keeps only as
    # the event shape: a slice rebuilds it from there
    ("distribution", "Delta", Facts(
        event_ranks={"v": EVENT},
        constructor_arguments={"event_dim": lambda state: len(state["_event_shape"])})),
    ("continuous", "MatrixNormal", Facts(event_ranks={"loc": 2})),  # a real_vector holding a matrix
    # the marginals' parameters, one per event coordinate
    ("copula", "GaussianCopulaBeta", Facts(
        event_ranks={"concentration1": 1, "concentration0": 1})),
    # --- parameters the constructor broadcasts to the batch and event shape: a new axis
    # inside their event dimensions (out_axes past the batch) is detected there ---
    ("continuous", "MultivariateNormal", Facts(event_shaped=("loc",))),
    ("continuous", "Dirichlet", Facts(event_shaped=("concentration",))),
)


def _resolve(entries: tuple[tuple[str, str, Facts], ...]) -> dict[type, Facts]:
    """The entries keyed by numpyro class object; a class this numpyro lacks is left out (numpyro
    0.21 has no HurdleProbs), entries of one class combined."""
    found: dict[type, Facts] = {}
    for module_name, name, facts in entries:
        module = importlib.import_module(f"numpyro.distributions.{module_name}")
        cls = vars(module).get(name)
        if isinstance(cls, type) and issubclass(cls, _numpyro_distribution.Distribution):
            found[cls] = found[cls].merged(facts) if cls in found else facts
    return found


FACTS: dict[type, Facts] = _resolve(_ENTRIES)
_NONE = Facts()
BLOCKS_HOLDERS: tuple[type, ...] = tuple(c for c, f in FACTS.items() if f.blocks_holders)
"""The classes whose instances keep the batch shapes of every distribution holding them."""


def facts_of(cls: type) -> Facts:
    """The facts of ``cls``: its numpyro bases' entries merged, bases first (a subclass's own
    entry wins). Matched by class object, never by name."""
    merged = _NONE
    for base in reversed(cls.__mro__):
        facts = FACTS.get(base)
        if facts is not None:
            merged = merged.merged(facts)
    return merged
