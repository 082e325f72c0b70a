"""The pytree protocol: constructor state only, declaration order, key paths, exact round
trips, the same layout in every process, clear errors for malformed input, and stability all
the way down (nested distributions, expand/to_event/mask results, factory results)."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import textwrap

import jax
import jax.numpy as jnp
import numpyro.distributions as nd
import pytest
from helpers import BUILDERS

import stabledist as sd


def nested(d):
    """``d`` and every distribution reachable from it through its attributes."""
    yield d
    for value in vars(d).values():
        for v in value if isinstance(value, list | tuple) else [value]:
            if isinstance(v, nd.Distribution):
                yield from nested(v)


@pytest.fixture(params=[b for _, b in BUILDERS], ids=[i for i, _ in BUILDERS])
def d(request):
    return request.param(sd)


def test_stable_all_the_way_down(d):
    for inner in nested(d):
        assert sd.is_stable(inner), type(inner)


def test_every_attribute_is_a_field(d):
    """Nothing a constructor sets is dropped by flatten (numpyro drops e.g. Levy's support)."""
    for inner in nested(d):
        names = set(type(inner).gather_pytree_data_fields())
        names |= set(type(inner).gather_pytree_aux_fields())
        assert set(vars(inner)) <= names, type(inner)


def test_round_trip_is_exact(d):
    leaves, tree = jax.tree_util.tree_flatten(d)
    e = jax.tree_util.tree_unflatten(tree, leaves)
    for a, b in zip(nested(d), nested(e), strict=True):
        assert type(a) is type(b)
        # numpyro's rule: the rebuilt instance holds the validate_args its constructor was
        # given, else None (the class default no longer applies)
        assert vars(b).keys() == vars(a).keys() | {"_validate_args"}
        assert vars(b)["_validate_args"] is vars(a).get("_validate_args")
        for key, value in vars(a).items():
            if isinstance(value, jax.Array):
                assert vars(b)[key] is value
    assert jax.tree_util.tree_structure(e) == tree
    # the rebuilt instance's numbers are checked against numpyro's in test_numbers.py


def test_key_paths_name_leaves(d):
    """Each distribution names its children (numpyro transforms/constraints inside, which are
    numpyro's own pytrees, keep numpyro's index keys)."""
    for inner in nested(d):
        for path, _ in jax.tree_util.tree_flatten_with_path(inner)[0]:
            assert isinstance(path[0], jax.tree_util.GetAttrKey), path


def test_named_key_paths_examples():
    def keys(d):
        return [jax.tree_util.keystr(p) for p, _ in jax.tree_util.tree_flatten_with_path(d)[0]]

    assert keys(sd.Normal(0.0, 1.0)) == [".loc", ".scale"]
    assert keys(sd.HalfNormal(1.0)) == ["._normal.loc", "._normal.scale", ".scale"]
    assert keys(sd.MultivariateNormal(jnp.zeros(2), scale_tril=jnp.eye(2))) == [
        ".loc", ".scale_tril"
    ]
    mix = sd.MixtureGeneral(
        sd.Categorical(jnp.ones(2) / 2), [sd.Normal(0.0, 1.0), sd.Normal(1.0, 1.0)]
    )
    assert keys(mix) == [
        "._mixing_distribution.probs",
        "._component_distributions[0].loc", "._component_distributions[0].scale",
        "._component_distributions[1].loc", "._component_distributions[1].scale",
    ]


def test_declaration_order():
    assert sd.Normal.gather_pytree_data_fields() == ("loc", "scale")
    assert sd.TwoSidedTruncatedDistribution.gather_pytree_data_fields() == (
        "base_dist", "low", "high", "_support"
    )
    # fields declared along a class hierarchy: base classes first (TransformedDistribution's
    # base_dist and transforms, then LogNormal's loc and scale; ZeroInflatedProbsDistribution's
    # base_dist and gate, then ZeroInflatedPoisson's rate) - the mutation pass's planted
    # most-derived-first walk passed every other test (tools/mutation/ast_mutants.py)
    assert sd.LogNormal.gather_pytree_data_fields() == ("base_dist", "transforms", "loc", "scale")
    assert sd.ZeroInflatedPoisson.gather_pytree_data_fields() == ("base_dist", "gate", "rate")
    paths, _ = jax.tree_util.tree_flatten_with_path(sd.LogNormal(jnp.array(0.5), jnp.array(2.0)))
    assert [jax.tree_util.keystr(p) for p, _ in paths] == [
        ".base_dist.loc", ".base_dist.scale", ".loc", ".scale"]
    # fixed per class: the same tuple object every time (computed once, not per flatten)
    assert sd.Normal.gather_pytree_data_fields() is sd.Normal.gather_pytree_data_fields()


LAYOUT_CHILD = textwrap.dedent(
    """
    import jax, jax.numpy as jnp, sys
    sys.path.insert(0, "tests")
    import stabledist as sd
    from stabledist.testing import catalog
    for name, build in catalog.all_builders():
        d = build(sd)
        paths, tree = jax.tree_util.tree_flatten_with_path(d)
        print(name, tree, [jax.tree_util.keystr(p) for p, _ in paths],
              [str(x.dtype) + str(x.shape) if hasattr(x, "shape") else repr(x) for _, x in paths])
    """
)


def test_leaf_order_identical_across_processes():
    """Two processes with different PYTHONHASHSEED (run side by side) print the same layout of
    every example (numpyro's differ: its field list is a set)."""
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", LAYOUT_CHILD], env=dict(os.environ, PYTHONHASHSEED=seed),
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        )
        for seed in ("0", "1")
    ]
    outputs = set()
    for proc in procs:
        out, err = proc.communicate(timeout=600)
        assert proc.returncode == 0, err
        assert out.count("\n") >= len(BUILDERS)
        outputs.add(re.sub(r" at 0x[0-9a-f]+", "", out))  # function addresses differ, fine
    assert len(outputs) == 1


# ---- malformed input ----------------------------------------------------------------------


def test_unflatten_wrong_number_of_leaves():
    leaves, tree = jax.tree_util.tree_flatten(sd.Normal(0.0, 1.0))
    with pytest.raises(ValueError, match=r"expected 2 leaves|Too many leaves|Too few leaves"):
        jax.tree_util.tree_unflatten(tree, [*leaves, 1.0])
    with pytest.raises(ValueError, match=r"Normal.tree_unflatten expected 2 children"):
        sd.Normal.tree_unflatten(sd.Normal(0.0, 1.0).tree_flatten()[1], (1.0,))


def test_unflatten_wrong_kind_of_leaves():
    aux = sd.Normal(0.0, 1.0).tree_flatten()[1]
    with pytest.raises(TypeError, match="parameter 'loc' must be an array-like leaf, got str"):
        sd.Normal.tree_unflatten(aux, ("zero", 1.0))
    with pytest.raises(TypeError, match="parameter 'scale' must be an array-like leaf"):
        sd.Normal.tree_unflatten(aux, (0.0, sd.Normal(0.0, 1.0)))


def test_unflatten_malformed_aux():
    children, aux = sd.Normal(0.0, 1.0).tree_flatten()
    with pytest.raises(ValueError, match="malformed aux data"):
        sd.Normal.tree_unflatten(aux[:-1], children)
    with pytest.raises(ValueError, match="malformed aux data"):
        sd.Normal.tree_unflatten((*aux[:-1], ("no_such_field",)), children)
    with pytest.raises(ValueError, match="malformed aux data"):
        sd.Normal.tree_unflatten(None, children)


def test_tree_map_to_any_leaf_kind_works():
    """Mapping leaves to strings (e.g. key-path labels) must not be rejected."""
    d = sd.Normal(jnp.zeros(2), 1.0).to_event(1)
    labels = jax.tree_util.tree_map_with_path(lambda p, _: jax.tree_util.keystr(p), d)
    assert jax.tree_util.tree_leaves(labels) == [".base_dist.loc", ".base_dist.scale"]


def test_placeholder_leaves_from_jax_still_work():
    """JAX unflattens with non-array placeholders (in_axes, dtypes, None): allowed."""
    d = sd.MultivariateNormal(jnp.zeros((3, 2)), scale_tril=jnp.eye(2))
    dtypes = jax.tree.map(lambda x: x.dtype, d)
    assert isinstance(dtypes, sd.MultivariateNormal)
    axes = jax.tree.map(lambda _: 0, d)
    out = jax.vmap(lambda d: d.log_prob(jnp.zeros(2)), in_axes=(axes,))(
        jax.tree.map(lambda x: jnp.stack([x, x]), d)
    )
    assert out.shape == (2, 3)


# ---- stability of derived distributions ---------------------------------------------------


@pytest.mark.parametrize(
    "derive",
    [
        lambda d: d.expand((2, *d.batch_shape)),
        lambda d: d.expand_by((2,)),
        lambda d: d.to_event(),
        lambda d: d.mask(False),
        lambda d: d.mask(jnp.array(True)),
        lambda d: sd.Independent(d, 0),
        lambda d: nd.Independent(d, 0),  # a numpyro wrapper around a stable base
    ],
    ids=["expand", "expand_by", "to_event", "mask-bool", "mask-array", "Independent",
         "numpyro-Independent"],
)
def test_derived_distributions(derive):
    base = sd.MultivariateNormal(jnp.zeros((2, 3)), scale_tril=jnp.eye(3))
    out = derive(base)
    if type(out).__module__.startswith("numpyro"):
        out = sd.stabilize(out)
    for inner in nested(out):
        assert sd.is_stable(inner)
    tree = jax.tree_util.tree_structure(out)
    for inner in nested(out):
        for n in ("covariance_matrix", "precision_matrix", "variance", "mean"):
            getattr(inner, n, None)
    assert jax.tree_util.tree_structure(out) == tree


def test_stabilize_does_not_mutate_user_objects():
    user = nd.Normal(0.0, 1.0)
    wrapped = sd.Independent(user.expand([2]), 1)
    assert type(user) is nd.Normal
    assert sd.is_stable(wrapped.base_dist)
    assert sd.stabilize(5) == 5 and sd.stabilize(wrapped) is wrapped


def test_adopting_a_numpyro_instance_moves_its_cached_lazy_values():
    user = nd.TruncatedNormal(0.0, 1.0, low=-1.0, high=1.0)
    expected = user._log_diff_tail_probs  # numpyro writes it into user.__dict__
    assert "_log_diff_tail_probs" in vars(user)
    ours = sd.stabilize(user)
    assert "_log_diff_tail_probs" not in vars(ours) and "_log_diff_tail_probs" in vars(user)
    assert ours._log_diff_tail_probs is expected
    fields = type(ours).gather_pytree_data_fields() + type(ours).gather_pytree_aux_fields()
    assert set(vars(ours)) <= set(fields)


def test_hybrid_mask_field():
    static = sd.Normal(0.0, 1.0).mask(False)
    dynamic = sd.Normal(0.0, 1.0).mask(jnp.array(False))
    assert jax.tree_util.tree_leaves(static) == [0.0, 1.0]
    assert len(jax.tree_util.tree_leaves(dynamic)) == 3
    for m in (static, dynamic):
        leaves, tree = jax.tree_util.tree_flatten(m)
        back = jax.tree_util.tree_unflatten(tree, leaves)
        assert back._mask is m._mask
        assert back.log_prob(0.5) == m.log_prob(0.5)


def test_same_parameters_same_treedef(builder):
    """Two instances built alike have equal (and equally hashed) treedefs: jit's cache hits,
    scan carries and stacked batches match (numpyro 0.21 kept the power laws' support
    constraint, which compares by identity, in aux data)."""
    a, b = jax.tree_util.tree_structure(builder(sd)), jax.tree_util.tree_structure(builder(sd))
    assert a == b
    assert hash(a) == hash(b)


def test_sparse_car_into_jit_twice():
    """A sparse adjacency matrix is a static (aux) value: a second instance with an equal
    matrix hits jit's cache instead of raising (numpyro compares it with ``==``, which gives a
    sparse matrix, and raises), a different matrix recompiles."""
    build = dict(BUILDERS)["CAR[1]"]
    first, second = build(sd), build(sd)
    assert first.adj_matrix is not second.adj_matrix and first.is_sparse

    @jax.jit
    def log_prob(d):
        return d.log_prob(jnp.zeros(d.event_shape))

    assert jnp.array_equal(log_prob(first), log_prob(second))
    assert log_prob._cache_size() == 1
    other = second.adj_matrix.copy()
    other[0, 1] = other[1, 0] = 1 - other[0, 1]
    changed = sd.CAR(first.loc, first.correlation, first.conditional_precision, other,
                     is_sparse=True)
    log_prob(changed)
    assert log_prob._cache_size() == 2
