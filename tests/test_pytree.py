"""The pytree protocol: constructor state only, declaration order, key paths, exact round
trips, the same layout in every process, clear errors for malformed input, stability all the
way down (nested distributions, expand/to_event/mask results, factory results), the field
table, hybrid statics, the generated functions and their batch check."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import textwrap

import jax
import jax.numpy as jnp
import numpy as np
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
    """Aux data of the wrong length, naming fields the class does not have as absent, or no
    tuple at all: a clear error that shows the aux data it was given."""
    children, aux = sd.Normal(0.0, 1.0).tree_flatten()
    for bad in (aux[:-1], (*aux[:-1], ("no_such_field",)), None):
        with pytest.raises(ValueError) as info:
            sd.Normal.tree_unflatten(bad, children)
        assert f"malformed aux data {bad!r}: expected a tuple" in str(info.value)


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


# ---- the generated functions, the field table, hybrid statics -----------------------------


def _unset(d, name):
    del d.__dict__[name]  # the class attribute answers now, as for a field never set
    return d


def test_the_tree_flatten_method_is_what_jax_registered():
    """numpyro's ``d.tree_flatten()`` (the Python flatten a user class's
    ``super().tree_flatten()`` calls) gives JAX's own leaves and aux data: on the fast path,
    with list aux (frozen to a tuple), with hybrid statics, with an unset field (the general
    flatten) and for a batch derived from the leaves (aux keeps numpyro's stored shape); and
    ``tree_unflatten`` rebuilds an instance of the same batch shape and tree structure."""
    car_adj = np.array([[0.0, 1.0], [1.0, 0.0]])
    batched = jax.vmap(lambda m: sd.Normal(m, 1.0))(jnp.ones((4, 3)))
    cases = {
        "Normal": sd.Normal(jnp.zeros(3), 1.0),
        "MultivariateNormal": sd.MultivariateNormal(jnp.zeros(2), jnp.eye(2)),
        "Independent": sd.Normal(jnp.zeros((2, 3)), 1.0).to_event(1),
        "CAR (hybrid)": sd.CAR(jnp.zeros(2), 0.5, 1.0, car_adj),
        "vmapped Normal": batched,
        "Independent, a field unset (the general flatten)": _unset(
            sd.Normal(jnp.zeros((2, 3)), 1.0).to_event(1), "has_enumerate_support"),
        "vmapped CAR (hybrid, derived)": jax.vmap(
            lambda m: sd.CAR(m, 0.5, 1.0, car_adj))(jnp.zeros((4, 2))),
    }
    for label, d in cases.items():
        children, aux = d.tree_flatten()
        assert aux == jax.tree_util.tree_structure(d).node_data()[1], label
        hash(aux)  # aux data must be hashable: list aux frozen
        mine, jaxs = jax.tree_util.tree_leaves(children), jax.tree_util.tree_leaves(d)
        assert len(mine) == len(jaxs) and all(a is b for a, b in zip(mine, jaxs)), label
        rebuilt = type(d).tree_unflatten(aux, children)
        assert rebuilt.batch_shape == d.batch_shape, label
        assert jax.tree_util.tree_structure(rebuilt) == jax.tree_util.tree_structure(d), label
    assert batched.batch_shape == (4, 3)
    assert batched.tree_flatten()[1][0] == (3,)  # numpyro's stored shape in aux
    unset = cases["Independent, a field unset (the general flatten)"]
    aux = unset.tree_flatten()[1]
    assert aux[-1] == ("has_enumerate_support",) and ["loc", "scale"] != aux[4] == (
        "loc", "scale")  # the list field frozen
    assert jax.tree_util.tree_map(lambda x: x, unset).reparametrized_params == ["loc", "scale"]
    car = cases["vmapped CAR (hybrid, derived)"]
    assert car.batch_shape == (4,) and car.tree_flatten()[1][:2] == ((), (2,))


def test_a_list_field_in_aux_data_is_a_list_again_after_a_round_trip():
    """Aux data holds a list field frozen to a tuple (hashable); the rebuilt instance gets
    numpyro's list back (``Independent.reparametrized_params``)."""
    d = sd.Normal(jnp.zeros(3), 1.0).to_event(1)
    theirs = nd.Normal(jnp.zeros(3), 1.0).to_event(1)
    assert type(theirs.reparametrized_params) is list
    for back in (jax.tree.map(lambda x: x, d), jax.jit(lambda d: d)(d)):
        assert type(back.reparametrized_params) is list
        assert back.reparametrized_params == theirs.reparametrized_params


def test_generated_pytree_code_is_readable_in_tracebacks():
    """The generated flatten/unflatten's source is kept in ``linecache`` (whole lines), so
    tracebacks and debuggers show it."""
    import linecache

    from stabledist._src.pytrees.pytree import pytree_of

    code = pytree_of(sd.Normal).flatten.__code__
    assert code.co_filename.startswith("<stabledist._src.pytrees.pytree ")
    lines = linecache.getlines(code.co_filename)
    assert lines[code.co_firstlineno - 1] == "def flatten(d):\n"
    assert all(line.endswith("\n") for line in lines)


class _Mixin:
    """Not a distribution: numpyro ignores its field declarations."""

    pytree_data_fields = ("junk",)
    pytree_aux_fields = ("more_junk",)


def test_the_field_table_follows_numpyros_rules_and_stabledists_facts():
    """``field_table``: a field declared both data and aux needs ``hybrid=`` (the error says
    so) unless the class flattens itself (then it is in both); ``_validate_args`` comes last; a
    hybrid name must be a data field; a plain mixin's declarations are ignored; the facts'
    ``extra_data`` wins over an aux declaration, a ``recomputed`` name is neither data nor aux,
    and ``list_aux`` is kept."""
    from stabledist._src.construction.describe import field_table

    class Both(nd.Normal):
        pytree_data_fields = ("flag",)
        pytree_aux_fields = ("_validate_args", "flag")

    with pytest.raises(TypeError) as info:
        field_table(Both)
    assert str(info.value).endswith(
        "Both declares ['flag'] as both pytree data and aux fields; stabledist needs to know "
        "when such a field is static: pass hybrid={name: test} to stabledist.make_stable, or "
        "declare pytree_hybrid_fields")
    own = field_table(Both, own_flatten=True)  # a user's own flatten decides: in both
    assert "flag" in own.data and "flag" in own.aux
    assert own.aux[-1] == "_validate_args"  # last, whatever a class declared first

    with pytest.raises(TypeError, match=r"Both: hybrid field 'nope' is not a data field"):
        field_table(Both, hybrid={"flag": lambda d, v: True, "nope": lambda d, v: True})

    class Mixed(_Mixin, nd.Normal):
        pass

    table = field_table(Mixed)
    assert set(table.data) == set(nd.Normal.gather_pytree_data_fields())
    assert "junk" not in table.data and "more_junk" not in table.aux

    class AuxFlag(nd.Normal):
        pytree_aux_fields = ("flag",)

    data_word = field_table(AuxFlag, extra_data=("flag",))  # stabledist's word wins
    assert "flag" in data_word.data and "flag" not in data_word.aux
    derived_word = field_table(AuxFlag, recomputed=("flag",))
    assert "flag" not in derived_word.data and "flag" not in derived_word.aux
    derived = field_table(nd.Normal, recomputed=("scale",))
    assert "scale" not in derived.data and "scale" not in derived.aux
    assert field_table(nd.Independent, list_aux=("reparametrized_params",)).list_aux == \
        frozenset({"reparametrized_params"})


def test_static_values_compare_by_content_and_hash_by_signature():
    """Aux data of a hybrid field (a NumPy or SciPy adjacency matrix) makes equal treedefs for
    equal contents and different ones otherwise (type, dtype, shape or contents); its hash
    reads the signature alone."""
    import scipy.sparse

    from stabledist._src.pytrees.pytree import StaticValue

    a = np.arange(4.0).reshape(2, 2)
    same, other = StaticValue(a.copy()), StaticValue(a + 1)
    sv = StaticValue(a)
    assert sv == sv and sv == same and hash(sv) == hash(same)
    assert sv != other and hash(sv) == hash(other)  # same signature, other contents
    assert sv != StaticValue(a.astype(np.float32))  # dtype
    assert sv != StaticValue(a.reshape(4))  # shape
    assert hash(sv) != hash(StaticValue(a.reshape(4)))
    assert sv != StaticValue(a.tolist())  # type
    a32 = a.astype(np.float32)
    assert StaticValue(a32) != StaticValue(jnp.asarray(a32))  # type alone (same contents)
    assert sv.__eq__(a) is NotImplemented and sv != 5
    assert "ndarray" in repr(sv) and "(2, 2)" in repr(sv)
    s1, s2 = scipy.sparse.csr_matrix(a), scipy.sparse.csr_matrix(a)
    s3 = scipy.sparse.csr_matrix(a + 1)
    assert StaticValue(s1) == StaticValue(s2) and StaticValue(s1) != StaticValue(s3)
    assert hash(StaticValue(s1)) == hash(StaticValue(s2))


# ---- the batch check of the generated unflatten -------------------------------------------


def test_a_vmapped_holder_of_distributions_reads_its_batch_from_its_children():
    """A class whose leaves are all in nested distributions (``Independent``) reads its batch
    shape from a derived child after ``vmap``: numpyro's numbers for the stacked batch."""
    means = jnp.arange(15.0).reshape(5, 3)
    independent = jax.vmap(lambda m: sd.Normal(m, 1.0).to_event(1))(means)
    assert independent.batch_shape == (5,) and independent.event_shape == (3,)
    stacked = nd.Normal(means, 1.0).to_event(1)
    x = jnp.ones((5, 3))
    assert np.array_equal(independent.log_prob(x), stacked.log_prob(x))


def test_an_eager_round_trip_never_asks_for_a_derivation(monkeypatch):
    """The batch check counts each parameter's event rank right (an event-shaped parameter,
    `Delta`'s ``v``; one with an event rank of its own, ``scale_tril``): an eager round trip
    of any catalog example never reads its batch shape from the leaves (`batching.derive`'s
    slow path, whose answer is the same). The censored classes are the exception by design:
    numpyro gives their base its parent's rank."""
    from stabledist._src.pytrees import batching
    from stabledist.testing import catalog

    asked: list[str] = []
    contributions = batching._contributions

    def counting(state, rule, children):
        asked.append(type(children).__name__)
        return contributions(state, rule, children)

    by_design = {"IntervalCensoredDistribution", "LeftCensoredDistribution",
                 "RightCensoredDistribution"}
    slow = []
    monkeypatch.setattr(batching, "_derived_shapes", {})  # derive's memo would answer
    monkeypatch.setattr(batching, "_contributions", counting)
    for name, build in sorted(catalog.all_builders()):
        d = build(sd)
        before = len(asked)
        leaves, treedef = jax.tree_util.tree_flatten(d)
        jax.tree_util.tree_unflatten(treedef, leaves)
        if len(asked) > before and type(d).__name__ not in by_design:
            slow.append(name)
    assert slow == []


def test_a_rebuilt_holder_leaves_its_childrens_fields_inline():
    """Unflattening a ``TruncatedNormal`` asks its children for a derived batch shape without
    asking for their ``__dict__`` (CPython builds a dict object for an instance whose fields
    sit inline when it is asked): a rebuilt holder and its rebuilt children are one gc-tracked
    object each, as numpyro's, and a round trip of thousands pays no dict per child."""
    import gc

    d = sd.TruncatedNormal(0.0, 1.0, low=-1.0, high=2.0)
    leaves, treedef = jax.tree_util.tree_flatten(d)
    rebuilt = jax.tree_util.tree_unflatten(treedef, leaves)
    for child in (rebuilt, rebuilt.base_dist, rebuilt._support):  # a built dict is a referent
        assert not any(type(o) is dict for o in gc.get_referents(child)), type(child)
    assert rebuilt.base_dist.loc == 0.0 and jax.tree_util.tree_structure(rebuilt) == treedef


def test_a_distribution_in_a_leaf_is_no_error():
    """``tree_map`` may put anything in a leaf (``jax.hessian`` with respect to a distribution
    puts distributions there): the batch check's fallback for a leaf whose shape is no
    sequence keeps the stored shape."""
    n = sd.Normal(jnp.zeros(3), 1.0)
    nested = jax.tree.map(lambda _: n, n)
    assert nested.loc is n and nested.batch_shape == (3,)
