"""Users' own pytree code keeps working: a distribution class that writes its own
``tree_flatten`` / ``tree_unflatten`` (numpyro allows it; numpyro's CAR and MaskedDistribution do
it) is accepted by `stabledist.make_stable` and as a subclass of a stable class. Its flatten is
the user's (its order is the user's, so it is deterministic), its lazy values live in the
external cache, and what can be checked is: a lazy value returned as a leaf, or a set in the
returned structure, warns once per class."""

from __future__ import annotations

import pickle
import warnings

import jax
import jax.numpy as jnp
import numpy as np
import numpyro.distributions as nd
import pytest
from numpyro.distributions import constraints
from numpyro.distributions.util import lazy_property

import stabledist as sd
from stabledist._src.lazy.cache import CACHE


class ScaledNormal(nd.Distribution):
    """numpyro's documented pattern: ``super().tree_flatten()`` then a change of one field
    (here a Python ``bool`` flag that must be static)."""

    arg_constraints = {"loc": constraints.real, "scale": constraints.positive}  # noqa: RUF012
    pytree_data_fields = ("loc", "scale", "flag")
    pytree_aux_fields = ("flag",)
    support = constraints.real

    def __init__(self, loc, scale, flag=False, *, validate_args=None):
        self.loc, self.scale, self.flag = loc, scale, flag
        super().__init__(jnp.shape(loc), validate_args=validate_args)

    @lazy_property
    def precision(self):
        return self.scale**-2

    def log_prob(self, value):
        return -0.5 * (value - self.loc) ** 2 * self.precision - jnp.log(self.scale)

    def sample(self, key, sample_shape=()):
        shape = sample_shape + self.batch_shape
        return self.loc + self.scale * jax.random.normal(key, shape)

    def tree_flatten(self):
        data, aux = super().tree_flatten()
        names = type(self).gather_pytree_data_fields()
        data, aux = list(data), list(aux)
        data[names.index("flag")] = None  # flag is static
        return tuple(data), tuple(aux)

    @classmethod
    def tree_unflatten(cls, aux_data, params):
        d = super().tree_unflatten(aux_data, params)
        d.flag = aux_data[cls.gather_pytree_aux_fields().index("flag")]
        return d


class ByConstructor(nd.Distribution):
    """The other documented pattern (numpyro.contrib.tfp): flatten to the parameters, unflatten
    by calling the constructor."""

    arg_constraints = {"rate": constraints.positive}  # noqa: RUF012
    support = constraints.positive

    def __init__(self, rate, *, validate_args=None):
        self.rate = rate
        super().__init__(jnp.shape(rate), validate_args=validate_args)

    @lazy_property
    def mean_(self):
        return 1.0 / self.rate

    def log_prob(self, value):
        return jnp.log(self.rate) - self.rate * value

    def tree_flatten(self):
        return (self.rate,), None

    @classmethod
    def tree_unflatten(cls, aux_data, params):
        return cls(*params)


@pytest.mark.parametrize("cls", [ScaledNormal, ByConstructor])
def test_own_methods_are_used_and_lazy_values_are_external(cls):
    stable = sd.make_stable(cls)
    args = (jnp.array([0.5, 1.0]), jnp.array([1.0, 2.0])) if cls is ScaledNormal else (
        jnp.array([0.5, 2.0]),)
    ours, theirs = stable(*args), cls(*args)
    tree = jax.tree_util.tree_structure(ours)
    assert len(jax.tree_util.tree_leaves(ours)) == len(jax.tree_util.tree_leaves(theirs))
    lazy = "precision" if cls is ScaledNormal else "mean_"
    value = getattr(ours, lazy)
    np.testing.assert_array_equal(value, getattr(theirs, lazy))
    assert lazy not in vars(ours) and lazy in CACHE.values_of(ours)
    assert jax.tree_util.tree_structure(ours) == tree  # reading changed nothing
    x = jnp.array([0.3, 0.7])
    got = jax.jit(lambda d: d.log_prob(x))(ours)
    np.testing.assert_array_equal(got, jax.jit(lambda d: d.log_prob(x))(theirs))
    back = jax.jit(lambda d: d)(ours)
    assert type(back) is stable and jax.tree_util.tree_structure(back) == tree
    np.testing.assert_array_equal(getattr(back, lazy), value)
    np.testing.assert_array_equal(pickle.loads(pickle.dumps(ours)).log_prob(x), ours.log_prob(x))


def test_super_tree_flatten_inside_own_flatten_is_ordered():
    """``gather_pytree_data_fields`` of a stable class is a tuple in declaration order, so a
    user's flatten built on it (or on ``super().tree_flatten()``) is the same in every
    process; numpyro's is a ``set`` turned into a tuple."""
    stable = sd.make_stable(ScaledNormal)
    assert stable.gather_pytree_data_fields() == ("loc", "scale", "flag")
    static = stable(0.0, 1.0, True)
    leaves, tree = jax.tree_util.tree_flatten(static)
    assert leaves == [0.0, 1.0]
    assert jax.tree_util.tree_unflatten(tree, leaves).flag is True


def test_subclass_of_stable_class_with_own_flatten():
    class Shifted(sd.Normal):
        def tree_flatten(self):
            (loc, scale), aux = (self.loc, self.scale), self.batch_shape
            return (loc, scale), aux

        @classmethod
        def tree_unflatten(cls, aux_data, params):
            return cls(*params)

    d = Shifted(jnp.zeros(2), 1.0)
    d.variance  # noqa: B018 - a lazy read changes nothing
    assert jax.tree_util.tree_leaves(d)[0] is d.loc
    back = jax.jit(lambda d: d)(d)
    assert type(back) is Shifted
    np.testing.assert_array_equal(back.log_prob(0.5), d.log_prob(0.5))


def test_flatten_returning_a_lazy_value_warns():
    class Leaky(nd.Normal):
        @lazy_property
        def precision(self):
            return self.scale**-2

        def tree_flatten(self):
            return (self.loc, self.scale, self.precision), None

        @classmethod
        def tree_unflatten(cls, aux_data, params):
            return cls(params[0], params[1])

    stable = sd.make_stable(Leaky)
    with pytest.warns(UserWarning, match=r"returns the lazy value\(s\) \['precision'\] as leaves"):
        jax.tree_util.tree_flatten(stable(0.0, 2.0))
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        jax.tree_util.tree_flatten(stable(0.0, 2.0))  # once per class


def test_flatten_returning_a_set_warns():
    class Unordered(nd.Normal):
        def tree_flatten(self):
            return (self.loc, self.scale), frozenset({"loc", "scale"})

        @classmethod
        def tree_unflatten(cls, aux_data, params):
            return cls(*params)

    with pytest.warns(UserWarning, match="returns a frozenset: its order follows PYTHONHASHSEED"):
        jax.tree_util.tree_flatten(sd.make_stable(Unordered)(0.0, 1.0))
