"""Drop-in API: every public numpyro name, subclass relations, factories, submodules,
user classes, and the loud failure for classes the fork cannot cover."""

from __future__ import annotations

import importlib
import inspect
import pickle

import jax
import jax.numpy as jnp
import numpyro.distributions as nd
import pytest
from helpers import CLASS_NAMES, FACTORY_NAMES, run_fresh
from numpyro.distributions.util import lazy_property

import stabledist as sd
from stabledist.testing import catalog


def test_every_public_name_is_exported():
    assert set(nd.__all__) <= set(sd.__all__)
    missing = [n for n in nd.__all__ if not hasattr(sd, n)]
    assert not missing
    assert len(CLASS_NAMES) >= 90 and len(FACTORY_NAMES) >= 12  # 0.21: 91+12, 0.22: 101+16


@pytest.mark.parametrize("name", CLASS_NAMES)
def test_class_is_stable_subclass_with_same_constructor(name):
    stable, upstream = getattr(sd, name), getattr(nd, name)
    assert stable is not upstream
    assert issubclass(stable, upstream) and sd.is_stable(stable)
    assert inspect.signature(stable) == inspect.signature(upstream)
    assert stable.__name__ == upstream.__name__
    # the stable hierarchy mirrors numpyro's: stable bases are stable mirrors
    for base in upstream.__bases__:
        if issubclass(base, nd.Distribution):
            assert issubclass(stable, getattr(sd, base.__name__, sd.stable_class(base)))


@pytest.mark.parametrize("name", FACTORY_NAMES)
def test_factory_returns_stable_instances(name):
    assert getattr(sd, name) is not getattr(nd, name)
    assert inspect.signature(getattr(sd, name)) == inspect.signature(getattr(nd, name))
    d = catalog.example(name, sd)
    assert sd.is_stable(d)
    assert type(d) is sd.stable_class(type(catalog.example(name, nd)))


def test_isinstance_both_ways():
    d = sd.LogNormal(0.0, 1.0)
    assert isinstance(d, nd.LogNormal) and isinstance(d, nd.TransformedDistribution)
    assert isinstance(d, sd.TransformedDistribution) and isinstance(d, sd.Distribution)
    assert isinstance(sd.TruncatedNormal(0.0, 1.0, low=0.0), sd.LeftTruncatedDistribution)
    assert isinstance(sd.Categorical(probs=jnp.ones(3) / 3), sd.CategoricalProbs)


def test_non_distribution_names_are_numpyro_objects():
    assert sd.constraints is nd.constraints and sd.transforms is nd.transforms
    assert sd.biject_to is nd.biject_to and sd.kl_divergence is nd.kl_divergence
    assert sd.biject_to(sd.constraints.positive).__class__ is nd.transforms.ExpTransform


@pytest.mark.parametrize(
    "module",
    ["continuous", "discrete", "distribution", "truncated", "mixtures", "conjugate",
     "directional", "censored", "copula", "constraints", "transforms", "kl", "util"],
)
def test_submodules_import_like_numpyro(module):
    stable = importlib.import_module(f"stabledist.{module}")
    upstream = importlib.import_module(f"numpyro.distributions.{module}")
    for attr in dir(upstream):
        if attr.startswith("__"):
            continue
        value = getattr(stable, attr)  # every upstream attribute is reachable
        up = getattr(upstream, attr)
        if inspect.isclass(up) and issubclass(up, nd.Distribution) and up.__module__ == (
            upstream.__name__
        ):
            assert value is sd.stable_class(up)


def test_unknown_names_get_a_clear_error():
    with pytest.raises(AttributeError, match=r"no attribute 'Normel'; did you mean 'Normal'"):
        sd.Normel  # noqa: B018
    with pytest.raises(AttributeError, match=r"no attribute 'Nothing_like_it'$"):
        sd.Nothing_like_it  # noqa: B018
    assert sd.handlers.seed is importlib.import_module("stabledist.handlers").seed


def test_from_import_gives_stable_classes():
    from stabledist.continuous import MultivariateNormal, Normal
    from stabledist.distribution import Distribution, Independent

    assert Normal is sd.Normal and MultivariateNormal is sd.MultivariateNormal
    assert Independent is sd.Independent and Distribution is sd.Distribution
    with pytest.raises(AttributeError, match="no attribute 'nope'"):
        importlib.import_module("stabledist.continuous").nope  # noqa: B018


@pytest.mark.parametrize(
    ("p", "q"),
    [
        (lambda m: m.Normal(0.0, 1.0), lambda m: m.Normal(1.0, 2.0)),
        (lambda m: m.Dirichlet(jnp.ones(3)), lambda m: m.Dirichlet(jnp.arange(1.0, 4.0))),
        (
            lambda m: m.MultivariateNormal(jnp.zeros(2), jnp.eye(2)),
            lambda m: m.MultivariateNormal(jnp.ones(2), 2 * jnp.eye(2)),
        ),
        (lambda m: m.Normal(jnp.zeros(2), 1.0).to_event(1),
         lambda m: m.Normal(jnp.ones(2), 1.0).to_event(1)),
    ],
)
def test_kl_divergence_dispatch_same_numbers(p, q):
    assert jnp.array_equal(sd.kl_divergence(p(sd), q(sd)), nd.kl_divergence(p(nd), q(nd)))
    assert jnp.array_equal(sd.kl_divergence(p(sd), q(nd)), nd.kl_divergence(p(nd), q(nd)))


def test_pickle_round_trip_keeps_class_and_values():
    d = sd.MultivariateNormal(jnp.zeros(2), precision_matrix=2 * jnp.eye(2))
    d.covariance_matrix  # noqa: B018 - a read must not grow the pickle
    e = pickle.loads(pickle.dumps(d))
    assert type(e) is type(d) and vars(e).keys() == vars(d).keys()
    assert jnp.array_equal(e.covariance_matrix, d.covariance_matrix)
    plain = sd.MultivariateNormal(jnp.zeros(2), precision_matrix=2 * jnp.eye(2))
    assert len(pickle.dumps(plain)) == len(pickle.dumps(d))


class UserDist(nd.Distribution):
    """A user's own numpyro distribution with a lazy property."""

    arg_constraints = {"rate": nd.constraints.positive}  # noqa: RUF012 - numpyro's convention
    pytree_data_fields = ("rate", "inner")
    support = nd.constraints.positive
    calls = 0

    def __init__(self, rate, *, validate_args=None):
        self.rate = rate
        self.inner = nd.Exponential(rate)
        super().__init__(jnp.shape(rate), validate_args=validate_args)

    @lazy_property
    def scale(self):
        type(self).calls += 1
        return 1.0 / self.rate

    def sample(self, key, sample_shape=()):
        return self.inner.sample(key, sample_shape)

    def log_prob(self, value):
        return self.inner.log_prob(value)


def test_make_stable_user_class_call_and_decorator():
    Stable = sd.make_stable(UserDist)  # noqa: N806
    assert sd.make_stable(UserDist) is Stable and issubclass(Stable, UserDist)
    d = Stable(jnp.array([1.0, 2.0]))
    assert sd.is_stable(d.inner)  # what it builds inside is adopted too
    before, state = jax.tree_util.tree_structure(d), dict(vars(d))
    assert jnp.array_equal(d.scale, jnp.array([1.0, 0.5])) and d.scale is d.scale
    assert jax.tree_util.tree_structure(d) == before and vars(d).keys() == state.keys()
    paths = [jax.tree_util.keystr(p) for p, _ in jax.tree_util.tree_flatten_with_path(d)[0]]
    assert paths == [".rate", ".inner.rate"]

    @sd.make_stable
    class Decorated(nd.Normal):
        @lazy_property
        def precision(self):
            return self.scale**-2

    e = Decorated(0.0, 2.0)
    assert isinstance(e, nd.Normal) and sd.is_stable(e) and e.precision == 0.25
    assert "precision" not in vars(e)


def test_undeclared_attribute_warns_once_per_class():
    class Sloppy(nd.Normal):
        def __init__(self, loc, scale):
            self.extra = jnp.ones(2)
            super().__init__(loc, scale)

    Stable = sd.make_stable(Sloppy)  # noqa: N806
    with pytest.warns(UserWarning, match=r"\['extra'\].*pytree_data_fields"):
        Stable(0.0, 1.0)
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("error")
        Stable(0.0, 1.0)  # once per class


def test_subclassing_stabledist_distribution_is_stable():
    class Mine(sd.Normal):
        @lazy_property
        def twice(self):
            return 2 * self.loc

    d = Mine(1.0, 1.0)
    assert d.twice == 2.0 and "twice" not in vars(d)
    assert isinstance(Mine.__dict__["twice"], sd.cached_lazy_property)


def test_plain_override_of_lazy_property_keeps_precedence():
    """A subclass replacing an upstream lazy property by a plain property must win over the
    cached property the stable base generated for that name."""

    class Up(nd.Normal):
        @lazy_property
        def thing(self):
            return 1.0

    class Down(Up):
        @property
        def thing(self):
            return 2.0

    assert sd.make_stable(Up)(0.0, 1.0).thing == 1.0
    assert sd.make_stable(Down)(0.0, 1.0).thing == 2.0


def test_new_numpyro_class_with_custom_tree_flatten_fails_loudly():
    """A numpyro class the fork does not know that writes its own tree_flatten (as numpyro
    does for hybrid fields) fails at mirroring, rather than being flattened wrongly. User
    classes with their own methods are accepted: tests/test_own_pytrees.py."""

    class NewInNumpyro(nd.Normal):
        def tree_flatten(self):
            return (self.loc,), None

    NewInNumpyro.__module__ = "numpyro.distributions.continuous"
    with pytest.raises(TypeError, match="defines its own tree_flatten, which stabledist does not"):
        sd.stable_class(NewInNumpyro)


def test_make_stable_rejects_non_distributions():
    with pytest.raises(TypeError, match="numpyro Distribution subclass"):
        sd.make_stable(int)  # type: ignore[arg-type]


def test_hybrid_fields_for_user_class():
    class Flagged(nd.Normal):
        pytree_data_fields = ("flag",)
        pytree_aux_fields = ("flag",)

        def __init__(self, loc, scale, flag):
            self.flag = flag
            super().__init__(loc, scale)

    with pytest.raises(TypeError, match="both pytree data and aux"):
        sd.make_stable(Flagged)
    Stable = sd.make_stable(Flagged, hybrid={"flag": lambda d, v: isinstance(v, bool)})  # noqa: N806
    static, dynamic = Stable(0.0, 1.0, True), Stable(0.0, 1.0, jnp.array(True))
    assert len(jax.tree_util.tree_leaves(static)) == 2
    assert len(jax.tree_util.tree_leaves(dynamic)) == 3
    for d in (static, dynamic):
        leaves, tree = jax.tree_util.tree_flatten(d)
        assert jax.tree_util.tree_unflatten(tree, leaves).flag is d.flag


def test_a_numpyro_style_subclass_warns_no_more_than_numpyro():
    """numpyro's own test_handlers_with_string_valued_distribution (run with warnings as
    errors): a subclass of `stabledist.Distribution` setting undeclared attributes, or a
    numpyro subclass converted by stable internals, behaves as numpyro's: no warning."""
    import warnings

    class Strings(sd.Distribution):
        support = nd.constraints.real

        def __init__(self, probs):
            self.probs, self.values = probs, ["a", "b"]
            super().__init__(batch_shape=())

    class Upstream(nd.Distribution):
        support = nd.constraints.real

        def __init__(self, probs):
            self.probs, self.values = probs, ["a", "b"]
            super().__init__(batch_shape=())

    with warnings.catch_warnings():
        warnings.simplefilter("error")
        Strings(jnp.ones(2))
        with sd.stable_internals():
            assert sd.is_stable(Upstream(jnp.ones(2)))


def test_jax_export_works_whatever_was_imported_first():
    """Before jax 0.8, ``import jax`` does not import ``jax.export``: stabledist imports it to
    register its classes, so a script that imports stabledist and only later ``jax.export``
    can serialize distributions too (a fresh process: this one has imported it already)."""
    pytest.importorskip("flatbuffers", reason="jax.export serialization needs flatbuffers")
    printed = run_fresh("""
        import stabledist as sd
        import jax, jax.numpy as jnp
        import jax.export

        d = sd.Normal(jnp.zeros(2), 1.0)
        exported = jax.export.export(jax.jit(lambda d: d.log_prob(jnp.ones(2))))(d)
        loaded = jax.export.deserialize(exported.serialize())
        assert (loaded.call(d) == d.log_prob(jnp.ones(2))).all()
        print("ok")
    """)
    assert printed.strip() == "ok"
