"""A user's own class hierarchies resolve every attribute as Python does: generated chains.

hypothesis builds a chain of one to four classes on a base (a plain class, a lazy-heavy one, a
factory's class, a holder, ``Distribution`` itself), each level overriding a random subset of
the attributes users override with a *marked* implementation (its value says which levels ran).
The same plan is built twice from the same code, on numpyro's classes and on stabledist's: each
attribute must resolve to the same function (the same code object: the same level's body, or
numpyro's own method), and give numpyro's value, eagerly and through JAX's transformations, a
pytree round trip, a pickle, a slice and ``jax.export``.
"""

from __future__ import annotations

import inspect
import math
import pickle
import sys
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, ClassVar

import jax
import jax.numpy as jnp
import numpy as np
import numpyro.distributions as nd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from numpyro.distributions import constraints
from numpyro.distributions.util import lazy_property

import stabledist as sd

METHODS = ("sample", "log_prob", "cdf", "icdf", "entropy", "enumerate_support")
PROPERTIES = ("mean", "variance", "tag")  # ``tag``: a plain property of the user's own
OVERRIDABLE = (*METHODS, *PROPERTIES, "lazy", "__init__", "tree_flatten")


def _root(module: Any) -> type:
    """A user's class on ``module.Distribution``: the whole parametrisation written by hand."""

    class Located(module.Distribution):
        arg_constraints: ClassVar = {"loc": constraints.real}
        support = constraints.real

        def __init__(self, loc: Any, validate_args: bool | None = None) -> None:
            self.loc = loc
            super().__init__(jnp.shape(loc), validate_args=validate_args)

        def sample(self, key: Any, sample_shape: tuple[int, ...] = ()) -> Any:
            shape = sample_shape + self.batch_shape
            return self.loc + jax.random.normal(key, shape)

        def log_prob(self, value: Any) -> Any:
            return -0.5 * (value - self.loc) ** 2

        @property
        def mean(self) -> Any:
            return self.loc

        @lazy_property
        def lazy(self) -> Any:  # a lazy value of the user's base
            return jnp.exp(self.loc)

    return Located


@dataclass(frozen=True)
class Base:
    """A base to build chains on: its class on a module, an instance's arguments, a value in
    the support, and the first parameter (an ``__init__`` override shifts it when it is one)."""

    name: str
    cls: Callable[[Any], type]
    args: Callable[[Any], tuple[Any, ...]]
    value: Any
    lazy: str  # the lazy property a level overrides: the base's own where it has one
    params: tuple[str, ...]  # array parameters a marked lazy value is computed from
    shifts_first: bool = True


BASES = (
    Base("Normal", lambda m: m.Normal, lambda m: (jnp.array([0.3, -0.2]), jnp.array([1.0, 2.0])),
         jnp.array(0.5), "lazy", ("loc", "scale")),
    Base("MultivariateNormal", lambda m: m.MultivariateNormal,
         lambda m: (jnp.array([[0.0, 1.0], [0.5, -1.0]]),
                    jnp.array([[2.0, 0.3], [0.3, 1.0]])),
         jnp.array([0.1, 0.2]), "covariance_matrix", ("loc", "scale_tril")),
    Base("TruncatedNormal's class",
         lambda m: type(m.TruncatedNormal(0.0, 1.0, low=-1.0, high=1.0)),
         lambda m: (m.Normal(jnp.array([0.1, -0.1]), 1.0), -1.0, jnp.array([1.0, 2.0])),
         jnp.array(0.25), "_log_diff_tail_probs", ("low", "high"), shifts_first=False),
    Base("MixtureSameFamily", lambda m: m.MixtureSameFamily,
         lambda m: (m.Categorical(jnp.array([[0.2, 0.8], [0.5, 0.5]])),
                    m.Normal(jnp.array([[0.0, 1.0], [-1.0, 2.0]]), 1.0)),
         jnp.array(0.3), "lazy", (), shifts_first=False),
    Base("Distribution", _root, lambda m: (jnp.array([0.4, -0.6]),), jnp.array(0.2), "lazy",
         ("loc",)),
)


def _level(parent: type, level: int, names: frozenset[str], base: Base) -> type:
    """One level of a user's chain: each attribute in ``names`` overridden, marked 10**level
    (a method adds its mark to ``super()``'s; a lazy property returns a value of its own)."""
    mark = 10.0**level
    body: dict[str, Any] = {}
    if "sample" in names:
        def sample(self: Any, key: Any, sample_shape: tuple[int, ...] = ()) -> Any:
            return super(cls, self).sample(key, sample_shape) + mark
        body["sample"] = sample
    for name in {"log_prob", "cdf", "icdf"} & names:
        body[name] = _marked_method(name, mark, lambda: cls)
    if "entropy" in names:
        body["entropy"] = lambda self: super(cls, self).entropy() + mark
    if "enumerate_support" in names:
        body["enumerate_support"] = lambda self, expand=True: (
            super(cls, self).enumerate_support(expand) + mark)
    for name in {"mean", "variance"} & names:
        body[name] = property(_marked_getter(name, mark, lambda: cls))
    if "tag" in names:
        body["tag"] = property(lambda self: mark)
    if "lazy" in names:
        body[base.lazy] = lazy_property(_lazy_value(base, mark))
    if "__init__" in names:
        def __init__(self: Any, *args: Any, **kwargs: Any) -> None:  # noqa: N807
            if base.shifts_first:
                args = (args[0] + mark, *args[1:])
            super(cls, self).__init__(*args, **kwargs)
        body["__init__"] = __init__
    if "tree_flatten" in names:
        def tree_flatten(self: Any) -> Any:
            return super(cls, self).tree_flatten()
        body["tree_flatten"] = tree_flatten
    name = f"Level{level}Of{parent.__name__}"
    cls = type(parent)(name, (parent,), {"__module__": __name__, **body})
    return cls


def _marked_method(name: str, mark: float, owner: Callable[[], type]) -> Any:
    def method(self: Any, value: Any) -> Any:
        return getattr(super(owner(), self), name)(value) + mark
    return method


def _marked_getter(name: str, mark: float, owner: Callable[[], type]) -> Any:
    def getter(self: Any) -> Any:
        return getattr(super(owner(), self), name) + mark
    return getter


def _lazy_value(base: Base, mark: float) -> Any:
    def value(self: Any) -> Any:  # no super(): numpyro's lazy_property would store the parent's
        return sum(jnp.asarray(getattr(self, p)) for p in base.params) + mark  # elementwise
    value.__name__ = base.lazy
    return value


_KEEP: list[type] = []  # classes a pickle finds by name (this module's globals)


def chain(module: Any, base: Base, plan: tuple[frozenset[str], ...]) -> type:
    """The user's chain of ``plan`` on ``module``'s ``base``, each class importable by name."""
    cls = base.cls(module)
    for level, names in enumerate(plan, 1):
        cls = _level(cls, level, names, base)
        cls.__qualname__ = cls.__name__ = (
            f"Chain{len(_KEEP)}{'Np' if module is nd else 'Sd'}Level{level}")
        setattr(sys.modules[__name__], cls.__name__, cls)
        _KEEP.append(cls)
    return cls


def resolved(cls: type, name: str) -> Any:
    """The code object ``name`` runs on ``cls``: a method's, a property's getter's, a lazy
    property's function (numpyro's or stabledist's form), a wrapper's wrapped function."""
    attr = inspect.getattr_static(cls, name, None)
    for held in ("fget", "wrapped", "__func__"):
        attr = getattr(attr, held, attr)
    attr = inspect.unwrap(attr, stop=lambda f: not hasattr(f, "__wrapped__"))
    return getattr(attr, "__code__", attr)


_STABLEDIST = str(sd.__file__).rpartition("/")[0]


def _file(code: Any) -> str:
    return getattr(code, "co_filename", "")


def outcome(call: Callable[[], Any]) -> Any:
    """A call's value (as NumPy, for comparison) or its exception's type."""
    try:
        return jax.tree.map(np.asarray, call())
    except Exception as e:
        return type(e)


def same(ours: Any, theirs: Any) -> bool:
    if isinstance(theirs, type) or isinstance(ours, type):
        return ours is theirs
    return all(np.allclose(a, b, rtol=1e-5, atol=1e-5, equal_nan=True)
               for a, b in zip(jax.tree.leaves(ours), jax.tree.leaves(theirs), strict=True))


def calls(base: Base) -> dict[str, Callable[[Any], Any]]:
    value, key = base.value, jax.random.key(3)
    return {
        "sample": lambda d: d.sample(key, (2,)),
        "log_prob": lambda d: d.log_prob(value),
        "cdf": lambda d: d.cdf(value),
        "icdf": lambda d: d.icdf(jnp.asarray(0.3)),
        "entropy": lambda d: d.entropy(),
        "enumerate_support": lambda d: d.enumerate_support(),
        "mean": lambda d: d.mean,
        "variance": lambda d: d.variance,
        "tag": lambda d: d.tag,
        "lazy": lambda d: getattr(d, base.lazy),
    }


plans = st.lists(st.frozensets(st.sampled_from(OVERRIDABLE), max_size=5),
                 min_size=1, max_size=4).map(tuple)


@pytest.mark.parametrize("base", BASES, ids=[b.name for b in BASES])
@settings(max_examples=6, deadline=None)
@given(plan=plans)
def test_a_users_chain_resolves_and_computes_as_on_numpyro(base: Base, plan: Any) -> None:
    theirs_cls, ours_cls = chain(nd, base, plan), chain(sd, base, plan)
    lazy = base.lazy if "lazy" in set().union(*plan) or base.lazy != "lazy" else None
    for name in (*METHODS, *PROPERTIES, "__init__", "tree_flatten", *([lazy] if lazy else [])):
        ours, theirs = resolved(ours_cls, name), resolved(theirs_cls, name)
        # the user's code, or numpyro's, runs where it runs on numpyro; stabledist's own
        # methods (the pytree's) only where numpyro's chain runs numpyro's
        assert ours is theirs or (_file(theirs) != __file__ and _file(ours).startswith(
            _STABLEDIST)), f"{ours_cls.__qualname__}.{name} runs {ours}, numpyro's {theirs}"
    theirs, ours = theirs_cls(*base.args(nd)), ours_cls(*base.args(sd))
    each = calls(base)
    wanted = {n: outcome(lambda c=c: c(theirs)) for n, c in each.items()
              if n != "lazy" or lazy}
    for name, expected in wanted.items():
        got = outcome(lambda c=each[name]: c(ours))
        assert same(got, expected), f"{name}: stabledist {got}, numpyro {expected}"
    _check_transformed(ours, {n: wanted[n] for n in ("log_prob", "sample", "mean")}, base)


def _check_transformed(d: Any, wanted: dict[str, Any], base: Base) -> None:
    """numpyro's eager values, from stabledist's instance through JAX and back."""
    cls_calls = calls(base)
    log_prob, sample = cls_calls["log_prob"], cls_calls["sample"]
    value = base.value
    if not isinstance(wanted["log_prob"], type):
        expected = wanted["log_prob"]
        assert same(jax.jit(log_prob)(d), expected)
        assert same(jax.jit(lambda x: d.log_prob(x))(value), expected)  # closed over
        assert same(jax.tree.unflatten(*reversed(jax.tree.flatten(d))).log_prob(value),
                    expected)
        assert same(pickle.loads(pickle.dumps(d)).log_prob(value), expected)
        _, (final, _) = jax.lax.scan(lambda c, _: (c, (log_prob(c), 0)), d, None, length=2)
        assert same(final[-1], expected)
        if d.batch_shape:
            assert same(d[1].log_prob(value), np.asarray(expected)[1]), (d, d.batch_shape)
        exported = jax.export.export(jax.jit(log_prob))(d)
        assert same(exported.call(d), expected)
        grad = jax.grad(lambda x: jnp.sum(d.log_prob(x)))(jnp.asarray(value, float))
        assert np.all(np.isfinite(grad)) or not math.isfinite(float(np.sum(expected)))
    if not isinstance(wanted["sample"], type):
        assert same(jax.jit(sample)(d), wanted["sample"])
    if not isinstance(wanted["mean"], type):
        assert same(jax.vmap(lambda i: d.mean)(jnp.arange(2))[0], wanted["mean"])


def _static(cls: type, name: str) -> Any:
    """What ``cls`` resolves ``name`` to, a lazy property as the function it computes with."""
    attr = inspect.getattr_static(cls, name)
    return getattr(getattr(attr, "fget", None), "__wrapped__", None) or getattr(
        attr, "wrapped", attr)


@pytest.mark.parametrize("base", BASES, ids=[b.name for b in BASES])
def test_nothing_is_installed_over_a_users_attribute_at_any_depth(base: Base) -> None:
    """Every attribute a user's class defines, at the top of a chain of three, is what the
    chain's last class resolves: stabledist installs only what it owns."""
    leaf = chain(sd, base, (frozenset(OVERRIDABLE), frozenset(), frozenset()))
    top = leaf.__mro__[2]
    for name in vars(top):
        if name.startswith("__") and name != "__init__":
            continue
        assert _static(leaf, name) is _static(top, name), name


def test_make_stable_keeps_a_users_numpyro_hierarchy() -> None:
    """``make_stable`` of a user's numpyro class two levels down runs the override of the
    level between, as the numpyro class does."""
    class Shifted(nd.Normal):
        def log_prob(self, value: Any) -> Any:
            return super().log_prob(value) + 100.0

    class Child(Shifted):
        pass

    stable = sd.make_stable(Child)
    assert stable(0.0, 1.0).log_prob(0.5) == Child(0.0, 1.0).log_prob(0.5)
    assert inspect.unwrap(stable.log_prob) is Shifted.log_prob


@pytest.fixture
def wrapping_every_class(monkeypatch: pytest.MonkeyPatch) -> None:
    """The registration as it was when a user's class got a wrapper of the first method up
    its MRO that was not one already (numpyro's, two levels down): a planted regression."""
    from stabledist._src.construction import describe

    original = describe.explaining

    def explaining(cls: type, name: str, source: type) -> Any:
        return original(cls, name, cls.__mro__[1])

    monkeypatch.setattr(describe, "explaining", explaining)


def _users_chain() -> type:
    class Shifted(sd.Normal):
        def sample(self, key: Any, sample_shape: tuple[int, ...] = ()) -> Any:
            return super().sample(key, sample_shape) + 100.0

    class Child(Shifted):
        pass

    return Child


@pytest.mark.usefixtures("wrapping_every_class")
def test_check_stable_fails_a_class_that_runs_other_code_than_its_twin() -> None:
    """The twin is the user's whole chain on numpyro's classes, from what the class statements
    wrote (not what stabledist set), so a method stabledist resolved otherwise fails, naming
    the attribute and both functions."""
    from stabledist.testing import StabilityError, check_stable

    child = _users_chain()
    assert not same(child(0.0, 1.0).sample(jax.random.key(0)),
                    child.__mro__[1](0.0, 1.0).sample(jax.random.key(0)))  # the planted bug
    with pytest.raises(StabilityError) as failure:
        check_stable(lambda: child(0.0, 1.0), properties="upstream")
    text = str(failure.value)
    assert "Child.sample runs Normal.sample" in text, text
    assert "its numpyro twin's runs _users_chain.<locals>.Shifted.sample" in text, text


def test_a_chains_twin_runs_each_levels_code() -> None:
    from stabledist.testing._twin import RESOLVED, numpyro_twin, resolved_code

    child = _users_chain()
    twin = numpyro_twin(child)
    assert twin.__mro__[1].__qualname__.endswith("Shifted") and nd.Normal in twin.__mro__
    assert all(resolved_code(child, n) is resolved_code(twin, n) for n in RESOLVED)
    assert resolved_code(twin, "sample") is child.__mro__[1].__dict__["sample"].__code__


@pytest.mark.usefixtures("wrapping_every_class")
def test_a_base_raising_where_the_override_never_ran_is_no_parity() -> None:
    """Both sides raising ``NotImplementedError`` is parity only for the same reason: where
    the class defines the method and a base's raised in its place, the check fails."""
    from stabledist.testing._twin import skipped_override

    class Base(sd.Distribution):
        def log_prob(self, value: Any) -> Any:
            raise NotImplementedError  # its own reason: the override ran

        def sample(self, key: Any, sample_shape: tuple[int, ...] = ()) -> Any:
            return jnp.zeros(sample_shape)

    class Child(Base):
        pass

    with pytest.raises(NotImplementedError) as error:
        Child().sample(jax.random.key(0))  # the planted bug: numpyro's base method ran
    assert "Child defines sample" in str(skipped_override(Child, error.value))
    with pytest.raises(NotImplementedError) as error:
        Child().log_prob(0.0)
    assert skipped_override(Child, error.value) is None


class _Memoizing(sd.Normal):
    """Keeps a derived value on ``self`` by hand, the first time ``log_prob`` runs."""

    def log_prob(self, value: Any) -> Any:
        memo = self.__dict__.get("_memo")
        if memo is None:
            memo = self.__dict__["_memo"] = 2.0 * jnp.log(self.scale)
        return super().log_prob(value) + memo


class _MemoizingChild(_Memoizing):
    pass


def test_check_stable_catches_a_chains_memo_of_a_tracer_and_names_its_holder() -> None:
    """Closed over by ``jit`` before anything read it (a global prior), a subclass of a class
    that memoizes on ``self`` keeps a tracer there: the closure property says so, naming the
    attribute and the class."""
    from stabledist.testing import StabilityError, check_stable

    with pytest.raises(StabilityError) as failure:
        check_stable(lambda: _MemoizingChild(jnp.zeros(2), jnp.ones(2)), properties="closure")
    assert "a tracer leaked, held by the attribute '_memo' of a _MemoizingChild" in str(
        failure.value)
