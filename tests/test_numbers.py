"""Same numbers as numpyro: for every example, the same parameters and PRNG key give
bit-identical samples, log_prob, mean, variance, cdf, icdf and entropy (where numpyro defines
them; where numpyro raises, stabledist raises the same error) - also after a flatten/unflatten
round trip, compared with numpyro's own round trip (both recompute a value the constructor
was given, such as ``covariance_matrix=``, from the leaves)."""

from __future__ import annotations

import jax
import numpy as np
import numpyro.distributions as nd
import pytest
from helpers import BUILDERS

import stabledist as sd
from stabledist.testing import catalog

KEY = jax.random.PRNGKey(42)
# One draw per example, like the property suite (tests/test_properties.py samples with
# sample_shape=() in its ci profile): every sampler and log_prob operation then compiles once
# per class for both files (a sampler such as Gamma's or Dirichlet's costs ~1 s to compile per
# shape). Non-scalar sample shapes: test_same_numbers_with_sample_shape, and the thorough
# profile's access plans.
SAMPLE_SHAPE = ()


def outcome(fn):
    """``("ok", value)`` or ``("raises", exception type)``."""
    try:
        return "ok", fn()
    except Exception as e:
        return "raises", type(e)


def assert_same(ours, theirs, what):
    assert ours[0] == theirs[0], f"{what}: stabledist {ours}, numpyro {theirs}"
    if ours[0] == "raises":
        assert ours[1] is theirs[1], what
        return
    a, b = ours[1], theirs[1]
    assert jax.tree_util.tree_structure(a) == jax.tree_util.tree_structure(b), what
    for x, y in zip(jax.tree_util.tree_leaves(a), jax.tree_util.tree_leaves(b), strict=True):
        # compared on the host: jnp.array_equal would compile five operations per shape
        x, y = np.asarray(x), np.asarray(y)
        assert x.dtype == y.dtype and x.shape == y.shape, what
        assert np.array_equal(x, y, equal_nan=True), f"{what}: {x} != {y}"


@pytest.mark.parametrize("build", [pytest.param(b, id=i)
                                   for i, b in BUILDERS])
def test_same_numbers_as_numpyro(build, request):
    ours, theirs = build(sd), build(nd)
    assert sd.is_stable(ours) and not sd.is_stable(theirs)
    name = request.node.callspec.id.split("[")[0]
    rebuilt = jax.tree_util.tree_unflatten(*reversed(jax.tree_util.tree_flatten(ours)))
    theirs_rebuilt = outcome(
        lambda: jax.tree_util.tree_unflatten(*reversed(jax.tree_util.tree_flatten(theirs))))
    # numpyro's own round trip breaks some classes (Levy loses its support; the hurdle
    # classes cannot be unflattened): there ours must give the original instance's numbers
    theirs_rebuilt = theirs_rebuilt[1] if theirs_rebuilt[0] == "ok" else theirs

    def after_round_trip(fn):
        expected = outcome(lambda: fn(theirs_rebuilt))
        return outcome(lambda: fn(theirs)) if expected[0] == "raises" else expected

    pairs = (("sd", ours), ("nd", theirs), ("rebuilt", rebuilt))
    samples = {m: outcome(lambda d=d: d.sample(KEY, SAMPLE_SHAPE)) for m, d in pairs}
    assert_same(samples["sd"], samples["nd"], "sample")
    assert_same(samples["rebuilt"], after_round_trip(lambda d: d.sample(KEY, SAMPLE_SHAPE)),
                "sample after flatten/unflatten")
    if name in catalog.LOG_PROB_VALUES:
        value = catalog.LOG_PROB_VALUES[name]()
    elif samples["nd"][0] == "ok":
        value = samples["nd"][1]
    else:
        pytest.fail(f"{name}: no sample and no LOG_PROB_VALUES entry")  # the catalog has both
    checks = {
        "log_prob": lambda d: d.log_prob(value),
        "mean": lambda d: d.mean,
        "variance": lambda d: d.variance,
        "cdf": lambda d: d.cdf(value),
        "icdf": lambda d: d.icdf(np.full(d.batch_shape, 0.3, np.float32)),
        "entropy": lambda d: d.entropy(),
        "enumerate_support": lambda d: d.enumerate_support(),
    }
    for what, fn in checks.items():
        expected = outcome(lambda fn=fn: fn(theirs))
        assert_same(outcome(lambda fn=fn: fn(ours)), expected, what)
        assert_same(outcome(lambda fn=fn: fn(rebuilt)), after_round_trip(fn),
                    f"{what} after unflatten")


def test_same_numbers_under_jit():
    """Compiled: a stable instance passed into jit gives numpyro's numbers."""
    for build in (catalog.EXAMPLES["MultivariateNormal"], catalog.EXAMPLES["TruncatedNormal"],
                  catalog.EXAMPLES["Wishart"], catalog.EXAMPLES["MixtureGeneral"]):

        def f(d, key):
            x = d.sample(key)
            return x, d.log_prob(x)

        ours, theirs = jax.jit(f)(build(sd), KEY), jax.jit(f)(build(nd), KEY)
        assert_same(("ok", ours), ("ok", theirs), "jit")


@pytest.mark.parametrize("name", ["MultivariateNormal", "TruncatedNormal", "Wishart",
                                  "LowRankMultivariateNormal", "MixtureGeneral"])
def test_same_numbers_with_sample_shape(name):
    """Samples of shape (2, 3) + batch + event, and their log_prob, as numpyro's: classes whose
    sample reads lazy values (a Cholesky factor, tail probabilities, the mixing weights)."""
    build = catalog.EXAMPLES[name]
    ours, theirs = build(sd), build(nd)
    x, y = outcome(lambda: ours.sample(KEY, (2, 3))), outcome(lambda: theirs.sample(KEY, (2, 3)))
    assert x[0] == "ok" and x[1].shape[:2] == (2, 3), x
    assert_same(x, y, "sample")
    assert_same(outcome(lambda: ours.log_prob(x[1])), outcome(lambda: theirs.log_prob(y[1])),
                "log_prob")
