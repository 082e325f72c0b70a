"""Mirrors and user classes: the stable class of a numpyro class or a user's (`stable_class`,
`make_stable`), what its registration installs (lazy properties and their precedence, the
export layout), what a construction and `stabilize` finish (children made stable, values moved
to the cache), pickles, and the warnings a user's own class gets at the user's line."""

from __future__ import annotations

import gc
import pickle
import warnings
from typing import Any, ClassVar

import jax
import jax.numpy as jnp
import numpy as np
import numpyro.distributions as nd
import pytest
from helpers import run_fresh
from numpyro.distributions.util import lazy_property

import stabledist as sd
from stabledist._src.lazy.cache import CACHE


@pytest.fixture(autouse=True)
def _fresh_cache() -> None:
    gc.collect()
    sd.clear_cache()


# ---- stable_class and make_stable -----------------------------------------------------------


def test_stable_class_refuses_what_is_not_a_distribution_class() -> None:
    """A class that is no numpyro distribution is refused with a message naming it."""
    with pytest.raises(TypeError) as info:
        sd.stable_class(int)
    assert str(info.value) == "<class 'int'> is not a numpyro Distribution subclass"


def test_a_user_class_with_a_plain_mixin_gets_a_stable_class() -> None:
    """Only the distribution bases of a user's class are mirrored: a plain mixin stays a base
    as it is (mirroring it would refuse it), and its methods work on the stable instance."""

    class Describe:
        def describe(self) -> str:
            return f"normal at {float(self.loc)}"  # type: ignore[attr-defined]

    class Described(Describe, nd.Normal):
        pass

    stable = sd.stable_class(Described)
    d = stable(1.5, 1.0)
    assert isinstance(d, Describe) and isinstance(d, sd.Normal)
    assert d.describe() == "normal at 1.5"


def test_stable_classes_live_in_stabledists_modules_and_users_in_theirs() -> None:
    """A mirror's ``__module__`` is stabledist's module of the same name
    (``numpyro.distributions.continuous.Normal`` -> ``stabledist.continuous``), where pickles
    and reprs find it; the stable class of a user's class keeps the user's module."""
    assert sd.Normal.__module__ == "stabledist.continuous"
    assert sd.MixtureSameFamily.__module__ == "stabledist.mixtures"

    class Mine(nd.Normal):
        pass

    assert sd.stable_class(Mine).__module__ == __name__


def test_stable_classes_carry_their_upstreams_docstring() -> None:
    """Every mirror has its numpyro class's ``__doc__`` (which ``help``, IDEs and the API docs
    read), and the stable class of a user's class the user's docstring."""
    public = [n for n in nd.__all__ if isinstance(getattr(nd, n), type) and n != "Distribution"]
    assert [n for n in public if getattr(sd, n).__doc__ != getattr(nd, n).__doc__] == []
    assert any(getattr(nd, n).__doc__ for n in public)  # (numpyro 0.21's Normal has none)

    class Mine(nd.Normal):
        """A user's normal."""

    assert sd.stable_class(Mine).__doc__ == "A user's normal."


def test_a_numpyro_class_with_unknown_pytree_methods_is_refused_with_advice() -> None:
    """A numpyro class that flattens itself and is not among the hybrid classes stabledist
    knows is refused with a message that says what to report, never flattened wrongly."""

    class Novel(nd.Normal):
        __module__ = "numpyro.distributions.novel"  # as if numpyro had added it

        def tree_flatten(self) -> Any:
            return (self.loc, self.scale), None

        @classmethod
        def tree_unflatten(cls, aux_data: Any, params: Any) -> Any:
            return cls(*params)

    with pytest.raises(TypeError) as info:
        sd.stable_class(Novel)
    assert str(info.value) == (
        f"numpyro.distributions.novel.{Novel.__qualname__} defines its own "
        "tree_flatten/tree_unflatten, which stabledist does not know; please report this "
        "numpyro class (new to stabledist) so that it can be covered")


def test_make_stable_rejects_what_is_not_a_numpyro_class_and_hybrids_on_stable_ones() -> None:
    """``make_stable`` refuses anything but a numpyro distribution class, and hybrid fields for
    a class that is stable already (ours, or a numpyro class whose mirror exists), with advice;
    the numpyro class is never changed."""
    for bad in (int, 3.0, nd.Normal(0.0, 1.0)):
        with pytest.raises(TypeError, match="make_stable expects a numpyro Distribution "
                                             "subclass, got"):
            sd.make_stable(bad)  # type: ignore[type-var]
    hybrid = {"loc": lambda d, v: isinstance(v, float)}
    for already in (sd.Normal, nd.Normal):  # ours, and a numpyro class that has its mirror
        with pytest.raises(TypeError) as info:
            sd.make_stable(already, hybrid=hybrid)
        assert str(info.value) == ("Normal is already stable; declare hybrid fields as the "
                                   "class attribute pytree_hybrid_fields instead")
    assert not hasattr(nd.Normal, "pytree_hybrid_fields")


def test_upstream_class_is_the_mirrored_class() -> None:
    """``upstream_class``: numpyro's class for its mirror, the user's class for
    ``make_stable``'s, the class itself when it is not stable, numpyro's ``Distribution`` for
    stabledist's base, and numpyro's class for a user's subclass of a mirror."""
    from stabledist._src.construction.base import Distribution
    from stabledist._src.construction.mirrors import upstream_class

    class Mine(nd.Normal):
        pass

    assert upstream_class(sd.Normal) is nd.Normal
    assert upstream_class(sd.TruncatedNormal(0.0, 1.0, low=0.0).__class__) is \
        nd.LeftTruncatedDistribution
    assert upstream_class(sd.make_stable(Mine)) is Mine
    assert upstream_class(nd.Normal) is nd.Normal
    assert upstream_class(int) is int
    assert upstream_class(Distribution) is nd.Distribution

    class Derived(sd.Normal):  # a subclass of a stable class mirrors numpyro's class
        pass

    assert upstream_class(Derived) is nd.Normal


def test_import_leaves_user_classes_defined_before_it_alone() -> None:
    """``import stabledist`` mirrors none of a user's classes defined before it (one that needs
    ``hybrid=`` would make the import raise): in a fresh process, the user's module first, as
    in a script that imports stabledist late."""
    printed = run_fresh("""
        import numpyro.distributions as nd

        class Flagged(nd.Normal):  # a field both data and aux: stabledist needs `hybrid=`
            pytree_data_fields = pytree_aux_fields = ("flag",)
            flag = True

        import stabledist as sd

        stable = sd.make_stable(Flagged, hybrid={"flag": lambda d, v: isinstance(v, bool)})
        assert stable(0.0, 1.0).flag is True
        print("ok")
    """)
    assert printed.strip() == "ok"


def test_factories_live_in_stabledist_and_pickle_by_name() -> None:
    """The wrapped factories are ``stabledist``'s by ``__module__``: pickle (which
    ``multiprocessing`` and ``cloudpickle`` use to send a factory) finds them by module and
    name."""
    for name in ("TruncatedNormal", "TruncatedCauchy", "TruncatedDistribution"):
        factory = getattr(sd, name)
        assert factory.__module__ == "stabledist", name
        assert pickle.loads(pickle.dumps(factory)) is factory, name


# ---- registration: lazy properties, their precedence, the export layout ---------------------


def test_a_derived_attribute_reads_the_value_its_constructor_gave() -> None:
    """A recomputed attribute (``Levy``'s support) is installed under the attribute's name, so
    the value the constructor assigned is given to the cache under that name and read back,
    numpyro's object, not computed again."""
    d = sd.Levy(0.0, 1.0)
    support = d.support
    assert CACHE.values_of(d) == {"_support": support}  # numpyro's object, from the constructor


def test_a_user_override_of_a_lazy_property_keeps_its_precedence() -> None:
    """A user's subclass that overrides numpyro's lazy property with a plain property gets its
    own, not the cached property the stable base installed for that name."""

    class FixedCovariance(nd.MultivariateNormal):
        @property
        def covariance_matrix(self) -> Any:
            return 7.0 * jnp.eye(2)  # not scale_tril's product: the user's own

    stable = sd.stable_class(FixedCovariance)
    upstream = FixedCovariance(jnp.zeros(2), scale_tril=jnp.eye(2))
    d = stable(jnp.zeros(2), scale_tril=jnp.eye(2))
    assert np.array_equal(upstream.covariance_matrix, 7.0 * jnp.eye(2))
    assert np.array_equal(d.covariance_matrix, 7.0 * jnp.eye(2))


def test_a_user_override_below_another_override_keeps_its_precedence() -> None:
    """An override of an override wins too, also when the parent's stable class was made first
    (the attribute a stable class restores over a lazy one is recorded as restored, so its
    subclass's stable class resolves past it)."""

    class FixedCovariance(nd.MultivariateNormal):
        @property
        def covariance_matrix(self) -> Any:
            return 7.0 * jnp.eye(2)

    class Smaller(FixedCovariance):
        @property
        def covariance_matrix(self) -> Any:
            return 5.0 * jnp.eye(2)

    sd.stable_class(FixedCovariance)  # the parent's stable class first, as a program may
    for cls in (Smaller, sd.stable_class(Smaller)):
        d = cls(jnp.zeros(2), scale_tril=jnp.eye(2))
        assert np.array_equal(d.covariance_matrix, 5.0 * jnp.eye(2)), cls


def test_export_writes_a_field_layout_for_stable_classes_and_a_value_for_own_flatten() -> None:
    """``jax.export`` serializes a stable class with its field layout (what makes a changed
    layout fail clearly) and a class with its own ``tree_flatten`` by its own aux data (a field
    table does not describe it); both deserialize and run."""
    import jax.export  # a submodule to import before jax 0.8

    class Own(nd.Normal):
        def tree_flatten(self) -> Any:
            return (self.loc, self.scale), ("own", self.batch_shape)

        @classmethod
        def tree_unflatten(cls, aux_data: Any, params: Any) -> Any:
            d = cls.__new__(cls)
            d.__dict__.update(loc=params[0], scale=params[1],
                              _batch_shape=tuple(aux_data[1]), _event_shape=())
            return d

    for d, written in ((sd.Normal(jnp.zeros(2), 1.0), b'"_batch_shape","_event_shape"'),
                       (sd.make_stable(Own)(jnp.zeros(2), 1.0), b'"own"')):
        exported = jax.export.export(jax.jit(lambda d: d.log_prob(jnp.ones(2))))(d)
        blob = bytes(exported.serialize())
        assert written in blob, type(d).__name__
        np.testing.assert_array_equal(jax.export.deserialize(bytearray(blob)).call(d),
                                      d.log_prob(jnp.ones(2)))


# ---- construction and stabilize --------------------------------------------------------------


def test_stabilize_converts_lists_and_tuples_of_numpyro_distributions() -> None:
    """``stabilize`` converts the numpyro distributions in a list or tuple (same container
    type, same numbers), keeps stable ones and other values as they are, and returns a
    container holding no numpyro distribution itself."""
    parts = [nd.Normal(0.0, 1.0), nd.Exponential(2.0)]
    for container in (list, tuple):
        stable = sd.stabilize(container(parts))
        assert type(stable) is container
        assert [type(d) for d in stable] == [sd.Normal, sd.Exponential]
        assert [float(d.log_prob(0.5)) for d in stable] == [float(d.log_prob(0.5)) for d in parts]
    mixed = [sd.Normal(0.0, 1.0), 3.0]
    assert all(a is b for a, b in zip(sd.stabilize(mixed), mixed, strict=True))
    numbers = [1.0, 2.0]
    assert sd.stabilize(numbers) is numbers


def test_a_stabilized_instance_moves_numpyros_lazy_values_to_the_cache_without_a_warning() -> None:
    """``stabilize`` copies a numpyro instance's ``__dict__``, where numpyro caches the values
    read: they move to the cache, and an instance that sets every field gets no warning about
    undeclared attributes."""

    class Reading(nd.Normal):
        def __init__(self, loc: Any, scale: Any) -> None:
            super().__init__(loc, scale, validate_args=True)  # every field set

        @lazy_property
        def precision(self) -> Any:
            return self.scale**-2

    stable = sd.make_stable(Reading)
    upstream = Reading(0.0, 2.0)
    assert float(upstream.precision) == 0.25 and "precision" in vars(upstream)
    with warnings.catch_warnings(record=True) as record:
        warnings.simplefilter("always")
        d = sd.stabilize(upstream)
    assert type(d) is stable
    assert [str(w.message) for w in record] == []
    assert "precision" not in vars(d)
    assert float(d.precision) == 0.25


def test_a_list_of_numpyro_distributions_given_to_a_constructor_is_adopted() -> None:
    """A constructor given numpyro distributions, alone or in a list, holds stable copies
    (lazy values in the cache, stable pytrees) with numpyro's numbers."""
    components = [nd.Normal(0.0, 1.0), nd.Normal(3.0, 2.0)]
    mixture = sd.MixtureGeneral(nd.Categorical(jnp.array([0.3, 0.7])), components)
    assert type(mixture.mixing_distribution) is sd.CategoricalProbs
    assert [type(c) for c in mixture.component_distributions] == [sd.Normal, sd.Normal]
    upstream = nd.MixtureGeneral(nd.Categorical(jnp.array([0.3, 0.7])), components)
    assert float(mixture.log_prob(1.0)) == float(upstream.log_prob(1.0))


def test_a_constructor_promoting_a_base_after_building_another_keeps_the_stored_shape() -> None:
    """A constructor that builds another distribution and then promotes its base's leaves with
    ``jax.tree.map`` (numpyro's censored idiom) leaves the base numpyro's batch shape: what its
    own tree map derived gets the stored shape back when the outer construction ends."""
    from numpyro.distributions.util import promote_shapes

    class Promoting(nd.Distribution):
        arg_constraints: ClassVar[dict[str, Any]] = {}
        pytree_data_fields = ("side", "base")

        def __init__(self, base: Any, bound: Any) -> None:
            self.side = type(base)(0.0, 1.0)  # a construction inside the constructor
            shape = jnp.shape(bound)
            self.base = jax.tree.map(lambda p: promote_shapes(p, shape=shape)[0], base)
            super().__init__(batch_shape=shape)

    for module, cls in ((nd, Promoting), (sd, sd.make_stable(Promoting))):
        d = cls(module.Normal(0.0, 1.0), jnp.zeros(3))
        assert d.base.batch_shape == (), module.__name__
        assert d.base.loc.shape == (1,)


def test_to_event_and_indexing_reach_numpyros_arguments() -> None:
    """The base class's ``to_event`` passes its argument on (only that many batch dimensions
    move), and ``d[idx]`` slices the batch."""
    d = sd.Normal(jnp.arange(6.0).reshape(2, 3), 1.0)
    assert (d.to_event(1).batch_shape, d.to_event(1).event_shape) == ((2,), (3,))
    assert d[1].batch_shape == (3,)
    np.testing.assert_array_equal(d[1, 2:].loc, jnp.array([5.0]))


# ---- pickles --------------------------------------------------------------------------------


class SubclassedNormal(sd.Normal):
    """A user's subclass of a stable class (module level, so pickle finds it by name)."""


def test_a_subclass_of_a_stable_class_pickles_by_name() -> None:
    """A class that mirrors no class (a user's subclass of a stable one) pickles the usual
    way, by its name, not through the mirror lookup."""
    from stabledist._src.construction.base import _from_source

    d = SubclassedNormal(1.0, 2.0)
    back = pickle.loads(pickle.dumps(d))
    assert type(back) is SubclassedNormal and float(back.loc) == 1.0
    assert d.__reduce_ex__(pickle.HIGHEST_PROTOCOL)[0] is not _from_source


def test_state_without_given_values_is_numpyros_dict_and_unpickled_instances_are_constructed(
) -> None:
    """The state of an instance without given values is its ``__dict__``, as numpyro's (not a
    pair); an unpickled instance counts as constructed, so an assignment drops its given
    values, stale now."""
    plain = sd.Normal(0.0, 1.0)
    assert plain.__getstate__() is vars(plain)
    d = sd.MultivariateNormal(jnp.zeros(2), covariance_matrix=2.0 * jnp.eye(2))
    assert "covariance_matrix" in CACHE.given(d)
    back = pickle.loads(pickle.dumps(d))
    back.scale_tril = 3.0 * jnp.eye(2)
    np.testing.assert_allclose(back.covariance_matrix, 9.0 * jnp.eye(2))


# ---- warnings about a user's own classes ----------------------------------------------------


def _one_warning(record: Any) -> warnings.WarningMessage:
    ours = [w for w in record if "stabledist" in str(w.message) or "pytree" in str(w.message)]
    assert len(ours) == 1, [str(w.message) for w in record]
    return ours[0]


def test_undeclared_attribute_warning_names_the_fix_and_points_at_the_caller() -> None:
    """A ``make_stable`` class that sets an attribute outside its field table gets one
    `UserWarning` that says where to declare it, at the line that built the instance."""

    class Sloppy(nd.Normal):
        def __init__(self, loc: Any, scale: Any) -> None:
            self.extra = jnp.ones(2)
            super().__init__(loc, scale)

    stable = sd.make_stable(Sloppy)
    with warnings.catch_warnings(record=True) as record:
        warnings.simplefilter("always")
        stable(0.0, 1.0)
    w = _one_warning(record)
    assert w.category is UserWarning
    assert str(w.message) == (
        "test_undeclared_attribute_warning_names_the_fix_and_points_at_the_caller.<locals>."
        "Sloppy sets attribute(s) ['extra'] that are not pytree fields, so tree_unflatten (jit, "
        "vmap, scan, ...) drops them; declare them in pytree_data_fields (arrays, "
        "distributions) or pytree_aux_fields (static values)")
    assert w.filename == __file__


def test_own_flatten_warnings_name_the_fix_and_point_at_the_caller() -> None:
    """A user's own ``tree_flatten`` that returns a lazy value as a leaf, or a set inside a
    tuple of aux data, gets a warning that says what to return instead, at the user's line
    however many of JAX's frames lead there (`jax.tree.flatten` adds one)."""

    class Leaky(nd.Normal):
        @lazy_property
        def precision(self) -> Any:
            return self.scale**-2

        def tree_flatten(self) -> Any:
            return (self.loc, self.scale, self.precision), None

        @classmethod
        def tree_unflatten(cls, aux_data: Any, params: Any) -> Any:
            return cls(params[0], params[1])

    class Unordered(nd.Normal):
        def tree_flatten(self) -> Any:
            return (self.loc, self.scale), ("kept", frozenset({"loc", "scale"}))

        @classmethod
        def tree_unflatten(cls, aux_data: Any, params: Any) -> Any:
            return cls(*params)

    for cls, flatten, message in [
        (Leaky, jax.tree_util.tree_flatten,
         "Leaky.tree_flatten returns the lazy value(s) ['precision'] as leaves: they are "
         "derived from other leaves, so a tree_map would let them disagree; return the "
         "parametrization only (stabledist keeps lazy values in its cache)"),
        (Unordered, jax.tree.flatten,
         "Unordered.tree_flatten returns a frozenset: its order follows "
         "PYTHONHASHSEED, so the pytree differs between processes; return a tuple "
         "in a fixed order (gather_pytree_data_fields() is ordered on stable "
         "classes)"),
    ]:
        d = sd.make_stable(cls)(0.0, 2.0)
        with warnings.catch_warnings(record=True) as record:
            warnings.simplefilter("always")
            flatten(d)  # through one frame of JAX's Python or two: the warning skips them
        w = _one_warning(record)
        assert w.category is UserWarning
        assert str(w.message).endswith(message), str(w.message)
        assert w.filename == __file__
