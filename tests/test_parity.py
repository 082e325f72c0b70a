"""Drop-in parity with numpyro where a distribution crosses a pytree boundary.

numpyro's ``tree_flatten`` carries ``_validate_args`` only when a constructor was given it, so
after any round trip (an argument or output of ``jit``/``vmap``/``grad``/``scan``, a
``tree_map``) an instance validates exactly when numpyro's would, and a compiled program is
numpyro's own: equal jaxprs for every class, up to the order of the inputs (numpyro's follows
set order). Also here: annotations of the wrapped lazy properties, and assignments to fields.
"""

from __future__ import annotations

import typing
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
import numpyro
import pytest
from helpers import BUILDERS, CLASS_NAMES, nd

import stabledist as sd
from stabledist.testing._compare import valid_value

KEY = jax.random.PRNGKey(0)


def _round_trip(d: Any) -> Any:
    leaves, treedef = jax.tree_util.tree_flatten(d)
    return jax.tree_util.tree_unflatten(treedef, leaves)


def _without_validate_args(d: Any) -> Any:
    """``d`` as if its constructor (and those of the distributions it holds) had not been
    given ``validate_args``: the class default applies."""
    vars(d).pop("_validate_args", None)
    for v in vars(d).values():
        for x in v if isinstance(v, list | tuple) else (v,):
            if isinstance(x, nd.Distribution):
                _without_validate_args(x)
    return d


# --- validation through round trips --------------------------------------------------------


@pytest.mark.parametrize("given", [None, True, False], ids=["default", "True", "False"])
def test_validate_args_after_round_trips_is_numpyros(given: bool | None) -> None:
    kwargs = {} if given is None else {"validate_args": given}
    with numpyro.validation_enabled(True):
        ours, theirs = sd.Normal(0.0, 1.0, **kwargs), nd.Normal(0.0, 1.0, **kwargs)
        assert ours._validate_args is theirs._validate_args
        for transform in (_round_trip, jax.jit(lambda d: d),
                          lambda d: jax.tree_util.tree_map(lambda x: x, d),
                          lambda d: jax.lax.scan(lambda c, _: (c, None), d, length=1)[0]):
            a, b = transform(ours), transform(theirs)
            assert a._validate_args is b._validate_args
            assert vars(a).get("_validate_args", "unset") == vars(b).get("_validate_args")
            # the treedef does not change after the first round trip
            assert jax.tree_util.tree_structure(a) == jax.tree_util.tree_structure(ours)
            assert jax.tree_util.tree_structure(_round_trip(a)) == \
                jax.tree_util.tree_structure(a)


def test_python_and_numpy_parameters_through_transformations() -> None:
    """The issue's programs: numpyro returns, so must we, with numpyro's numbers."""
    programs = {
        "jit Uniform": lambda m: jax.jit(lambda d: d.log_prob(0.5))(m.Uniform(0.0, 1.0)),
        "jit out of support": lambda m: jax.jit(lambda d: d.log_prob(2.0))(m.Uniform(0.0, 1.0)),
        "vmap TruncatedNormal": lambda m: jax.vmap(lambda d: d.log_prob(0.3))(
            jax.tree_util.tree_map(lambda x: jnp.stack([x, x]),
                                   m.TruncatedNormal(0.0, 1.0, low=0.0, high=1.0))),
        "grad Pareto": lambda m: jax.grad(lambda d: d.log_prob(3.0), allow_int=True)(
            m.Pareto(1.0, 2.0)).scale,
        "grad of a fit": lambda m: jax.grad(lambda d: d.log_prob(0.5).sum())(
            m.Uniform(np.float32(0.0), np.array([1.0, 2.0], np.float32))).high,
        "aot Binomial": lambda m: jax.jit(lambda d: d.log_prob(3)).lower(
            m.Binomial(np.int32(10), probs=0.3)).compile()(m.Binomial(np.int32(10), probs=0.3)),
        "jit DiscreteUniform": lambda m: jax.jit(lambda d: d.log_prob(2))(
            m.DiscreteUniform(0, np.int32(4))),
    }
    with numpyro.validation_enabled(True):
        for label, program in programs.items():
            np.testing.assert_array_equal(program(sd), program(nd), err_msg=label)


# --- compiled programs are numpyro's ---------------------------------------------------------


def _leaf_orders(ours: Any, theirs: Any) -> list[list[int]]:
    """For each of numpyro's leaves, the position of the same object among ours; one list
    per way of matching an object that is a leaf more than once (a parameter shared with a
    nested distribution, as ``DirichletMultinomial``'s ``concentration``)."""
    mine = [id(x) for x in jax.tree_util.tree_leaves(ours)]
    theirs_ids = [id(x) for x in jax.tree_util.tree_leaves(theirs)]
    assert sorted(mine) == sorted(theirs_ids), "the stable copy does not share numpyro's leaves"
    orders: list[list[int]] = [[]]
    for x in theirs_ids:
        at = [j for j, y in enumerate(mine) if y == x]
        orders = [[*order, j] for order in orders for j in at if j not in order]
    return orders[:24]


def _jaxprs(theirs: Any, method: str, arg: Any) -> tuple[str, list[str]] | None:
    """The jaxpr of ``method`` of numpyro's instance's stable copy, and numpyro's (one per
    way of matching shared leaves), as functions of the stable copy's leaves (numpyro's
    program takes them in its own order); ``None`` where numpyro's instance cannot be
    unflattened."""
    ours = sd.stabilize(theirs)
    leaves, treedef = jax.tree_util.tree_flatten(ours)
    their_treedef = jax.tree_util.tree_structure(theirs)

    def call(d: Any) -> Any:
        return d.sample(arg) if method == "sample" else d.log_prob(arg)

    def mine(*xs: Any) -> Any:
        return call(jax.tree_util.tree_unflatten(treedef, xs))

    def upstream(order: list[int]) -> Any:
        return lambda *xs: call(jax.tree_util.tree_unflatten(their_treedef,
                                                             [xs[i] for i in order]))

    try:
        expected = [str(jax.make_jaxpr(upstream(o))(*leaves)) for o in _leaf_orders(ours, theirs)]
    except Exception:  # numpyro's own unflatten fails (the hurdle classes)
        return None
    return str(jax.make_jaxpr(mine)(*leaves)), expected


@pytest.mark.parametrize("validate", ["given", "default"])
@pytest.mark.parametrize(("name", "build"), BUILDERS, ids=[i for i, _ in BUILDERS])
def test_compiled_program_is_numpyros(name: str, build: Any, validate: str) -> None:
    """``log_prob`` and ``sample`` of an instance passed to ``jit``: numpyro's jaxpr, with
    the catalog's ``validate_args=True`` and with the class default (numpyro 0.22: on)."""
    theirs = build(nd)
    if validate == "default":
        theirs = _without_validate_args(theirs)
    checked = 0
    value = valid_value(theirs, KEY)
    for method, arg in (("log_prob", value), ("sample", KEY)):
        if arg is None:
            continue
        try:
            got = _jaxprs(theirs, method, arg)
        except (NotImplementedError, ImportError):  # not defined for the class
            continue
        if got is not None:
            assert got[0] in got[1], f"{name}.{method}: the compiled program differs"
            checked += 1
    if not checked:  # only where numpyro's own unflatten fails (the hurdle classes)
        with pytest.raises(Exception):  # noqa: B017 - whatever numpyro raises
            _round_trip(theirs)


# --- annotations -----------------------------------------------------------------------------


PYTREE_PROTOCOL = {"tree_flatten", "tree_unflatten"}  # stabledist's own, by design


@pytest.mark.parametrize("name", CLASS_NAMES)
def test_wrapped_lazy_properties_keep_numpyros_annotations(name: str) -> None:
    """numpyro's test_output_is_array reads ``typing.get_type_hints`` of properties."""
    ours, theirs = getattr(sd, name), getattr(nd, name)
    for attr in sorted(set(dir(theirs)) - PYTREE_PROTOCOL):
        a, b = getattr(ours, attr, None), getattr(theirs, attr, None)
        fa, fb = (getattr(x, "fget", getattr(x, "wrapped", x)) for x in (a, b))
        if not callable(fb) or not getattr(fb, "__annotations__", None):
            continue
        assert _hints(fa) == _hints(fb), f"{name}.{attr}"


def _hints(f: Any) -> Any:
    try:
        return typing.get_type_hints(f)
    except NameError as e:  # numpyro's own annotations name undefined types here and there
        return type(e)


# --- assignments -----------------------------------------------------------------------------


def test_assigning_a_field_drops_the_values_that_depend_on_it() -> None:
    d = sd.MultivariateNormal(jnp.zeros(2), covariance_matrix=2 * jnp.eye(2))
    assert float(d.covariance_matrix[0, 0]) == 2.0
    assert d.precision_matrix[0, 0] == pytest.approx(0.5)
    d.scale_tril = 3 * jnp.eye(2)
    assert float(d.covariance_matrix[0, 0]) == 9.0
    assert d.precision_matrix[0, 0] == pytest.approx(1 / 9)
    assert "covariance_matrix" not in d.get_args()  # no longer the given parametrization


@pytest.mark.parametrize("built", ["constructed", "unflattened"])
def test_assigning_a_nested_field_drops_the_holders_values(built: str) -> None:
    want = nd.TruncatedNormal(0.5, 1.0, low=0.0, high=1.0).log_prob(0.5)
    d = sd.TruncatedNormal(0.0, 1.0, low=0.0, high=1.0)
    if built == "unflattened":
        d = _round_trip(d)
    stale = d.log_prob(0.5)  # caches the normalizer
    d.base_dist.loc = jnp.asarray(0.5)
    assert d.log_prob(0.5) != stale
    np.testing.assert_array_equal(d.log_prob(0.5), want)
    # numpyro serves the stale normalizer there
    theirs = nd.TruncatedNormal(0.0, 1.0, low=0.0, high=1.0)
    theirs.log_prob(0.5)
    theirs.base_dist.loc = jnp.asarray(0.5)
    assert theirs.log_prob(0.5) != want


# --- mixing with numpyro's internals ---------------------------------------------------------


def _posterior_and_update(dist: Any) -> tuple[Any, Any]:
    """A fitted AutoMultivariateNormal's posterior (built by numpyro's own code) and a scan
    body that builds the next posterior with ``dist``."""
    from numpyro.infer.autoguide import AutoMultivariateNormal

    def model() -> None:
        numpyro.sample("x", dist.Normal(jnp.zeros(2), 1.0).to_event(1))

    guide = AutoMultivariateNormal(model)
    params = {"auto_loc": jnp.array([0.5, -0.5]), "auto_scale_tril": jnp.eye(2)}
    with numpyro.handlers.seed(rng_seed=0):
        guide()

    def step(posterior: Any, _: Any) -> tuple[Any, Any]:
        nxt = dist.MultivariateNormal(0.9 * posterior.loc, scale_tril=posterior.scale_tril)
        return nxt, nxt.mean

    return guide.get_posterior(params), step


def test_scan_over_a_numpyro_built_posterior_and_its_remedies() -> None:
    """The error a user meets when numpyro's internals build numpyro's classes and their own
    code builds stabledist's, and the two remedies the README shows."""
    posterior, step = _posterior_and_update(nd)
    expected = jax.lax.scan(step, posterior, length=3)[1]  # numpyro alone works

    posterior, step = _posterior_and_update(sd)
    assert not sd.is_stable(posterior)
    with pytest.raises(TypeError, match="carry input and carry output must have the same "
                                        "pytree structure"):
        jax.lax.scan(step, posterior, length=3)
    got = jax.lax.scan(step, sd.stabilize(posterior), length=3)[1]
    np.testing.assert_array_equal(got, expected)
    with sd.stable_internals():
        posterior, step = _posterior_and_update(sd)
    assert sd.is_stable(posterior)
    np.testing.assert_array_equal(jax.lax.scan(step, posterior, length=3)[1], expected)
