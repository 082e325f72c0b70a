"""One class, one pytree: whatever parametrization a constructor was given, a stable
instance's leaves are numpyro's declared data fields, and a value the constructor was given
is the same instance's value exactly, never a leaf.

Every test compares with numpyro built alike: same leaves (count and shapes), the same
numbers before and after round trips and ``tree_map`` updates (numpyro recomputes derived
values from the leaves after a round trip; so does stabledist).
"""

from __future__ import annotations

import copy
import pickle
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
import numpyro.distributions as nd
import pytest
from helpers import BUILDERS

import stabledist as sd
from stabledist._src.lazy.cache import CACHE
from stabledist._src.lazy.introspect import lazy_names
from stabledist.testing._catalog_entries import CATALOG
from stabledist.testing._class_entry import Builder

COV = jnp.array([[2.0, 0.5, 0.2], [0.5, 1.5, 0.3], [0.2, 0.3, 1.0]], dtype=jnp.float32)
LOC = jnp.array([0.5, -1.0, 2.0], dtype=jnp.float32)

# Every keyword alternative numpyro offers for the classes that have more than one, with equal
# batch and event shapes, so all of a class's alternatives must share one treedef: each class's
# catalog record (``alternatives``).
ALTERNATIVES: dict[str, dict[str, Builder]] = {
    name: dict(entry.alternatives) for name, entry in CATALOG.items() if entry.alternatives}
CASES = [(cls, how) for cls, alts in ALTERNATIVES.items() for how in alts]


def shapes(d: Any) -> list[tuple[int, ...]]:
    return sorted(jnp.shape(x) for x in jax.tree_util.tree_leaves(d))


def lazy_values(d: Any) -> dict[str, Any]:
    """Every lazy value of ``d`` that numpyro can compute (some raise by design)."""
    out = {}
    for name in lazy_names(d):
        try:
            out[name] = getattr(d, name)
        except (NotImplementedError, ValueError):
            continue
    return out


def assert_same_values(ours: dict[str, Any], theirs: dict[str, Any]) -> None:
    assert ours.keys() == theirs.keys()
    for name in ours:
        for a, b in zip(jax.tree_util.tree_leaves(ours[name]),
                        jax.tree_util.tree_leaves(theirs[name]), strict=True):
            np.testing.assert_array_equal(np.asarray(a), np.asarray(b), err_msg=name)


@pytest.mark.parametrize("cls", sorted(ALTERNATIVES))
def test_one_treedef_per_class(cls):
    """Every alternative constructor gives one tree structure (numpyro also gives one)."""
    ours = {how: build(sd) for how, build in ALTERNATIVES[cls].items()}
    theirs = {how: build(nd) for how, build in ALTERNATIVES[cls].items()}
    trees = {how: jax.tree_util.tree_structure(d) for how, d in ours.items()}
    assert len(set(trees.values())) == 1, trees
    for how, d in ours.items():
        assert shapes(d) == shapes(theirs[how]), how
        lazy_values(d)  # reading lazy values changes nothing
        assert jax.tree_util.tree_structure(d) == trees[how]


@pytest.mark.parametrize(("cls", "how"), CASES)
def test_given_value_is_exact_and_round_trip_recomputes(cls, how):
    """The instance reads what its constructor was given (as numpyro's does); an instance
    rebuilt from the leaves recomputes it from them (as numpyro's round trip does)."""
    ours, theirs = ALTERNATIVES[cls][how](sd), ALTERNATIVES[cls][how](nd)
    assert list(ours.get_args()) == list(theirs.get_args())  # before reads grow numpyro's
    assert_same_values(lazy_values(ours), lazy_values(theirs))
    ours_back = jax.tree_util.tree_unflatten(*reversed(jax.tree_util.tree_flatten(ours)))
    theirs_back = jax.tree_util.tree_unflatten(*reversed(jax.tree_util.tree_flatten(theirs)))
    assert not CACHE.given(ours_back)
    assert_same_values(lazy_values(ours_back), lazy_values(theirs_back))


def test_get_args_does_not_grow_with_reads():
    ours = sd.MultivariateNormal(LOC, covariance_matrix=COV)
    theirs = nd.MultivariateNormal(LOC, covariance_matrix=COV)
    assert list(ours.get_args()) == list(theirs.get_args())
    ours.precision_matrix, theirs.precision_matrix  # noqa: B018
    assert "precision_matrix" in theirs.get_args()  # numpyro's answer grows with reads
    assert "precision_matrix" not in ours.get_args()


@pytest.mark.parametrize(("cls", "how"), CASES)
def test_copies_and_pickles_carry_given_values(cls, how):
    d = ALTERNATIVES[cls][how](sd)
    given = CACHE.given(d)
    for other in (copy.copy(d), copy.deepcopy(d), pickle.loads(pickle.dumps(d))):
        assert jax.tree_util.tree_structure(other) == jax.tree_util.tree_structure(d)
        assert_same_values(CACHE.given(other), given)
        assert_same_values(lazy_values(other), lazy_values(d))


@pytest.mark.parametrize(("cls", "how"), CASES)
def test_tree_map_update_recomputes_from_leaves(cls, how):
    """An optimizer step (a ``tree_map``) makes a new instance whose lazy values come from the
    new leaves, as in numpyro (a leaf holding the old covariance would disagree)."""

    def step(x):
        return x * 1.25 if jnp.issubdtype(jnp.result_type(x), jnp.floating) else x

    ours = jax.tree_util.tree_map(step, ALTERNATIVES[cls][how](sd))
    theirs = jax.tree_util.tree_map(step, ALTERNATIVES[cls][how](nd))
    assert_same_values(lazy_values(ours), lazy_values(theirs))


@pytest.mark.parametrize(("name", "builder"), BUILDERS, ids=[i for i, _ in BUILDERS])
def test_numpyro_leaves(name, builder):
    """A stable instance has numpyro's leaves: same count and shapes (the order is ours)."""
    assert shapes(builder(sd)) == shapes(builder(nd)), name


def test_levy_support_is_derived_and_survives_round_trips():
    ours, theirs = sd.Levy(1.0, 2.0), nd.Levy(1.0, 2.0)
    assert len(jax.tree_util.tree_leaves(ours)) == len(jax.tree_util.tree_leaves(theirs)) == 2
    back = jax.jit(lambda d: d)(ours)
    assert float(back.support.lower_bound) == 1.0
    moved = jax.tree_util.tree_map(lambda x: x + 1.0, ours)
    assert float(moved.support.lower_bound) == 2.0
    theirs_back = jax.jit(lambda d: d)(theirs)
    assert theirs_back.support is None  # numpyro's round trip loses it


def test_clear_cache_keeps_given_values():
    """A value the constructor was given is instance state: `clear_cache` drops computed values
    only (found by the mutation pass: nothing else failed when clear dropped given values)."""
    d = sd.MultivariateNormal(LOC, covariance_matrix=COV)
    d.precision_matrix  # noqa: B018 - a computed value
    sd.clear_cache()
    assert set(CACHE.values_of(d)) == {"covariance_matrix"}
    assert d.covariance_matrix is COV
