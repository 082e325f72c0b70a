"""A distribution that leaves ``vmap`` is a batched distribution (issue 24, point 1).

Over every catalog example: the vmapped instance has the mapped axis in front of its batch
shape and the numbers of its elements (``log_prob``, ``sample``, ``mean``/``variance``); inside
``vmap`` it is its element again; numpyro's `promote_batch_shape` agrees where its default rule
is right. The classes `stabledist._src.pytrees.batching` does not derive keep numpyro's behaviour
exactly: the same batch shape, and an error only where numpyro raises too. Then the programs
users run: models with vmapped priors under NUTS, SVI and Predictive against numpyro with the
stacked parameters, contrib ``scan`` with expanded sites against numpyro, stacks and scans of
instances, ``out_axes``, and leaves that are not arrays.
"""

from __future__ import annotations

import gc
import pickle

import jax
import jax.numpy as jnp
import numpy as np
import numpyro
import numpyro.distributions as nd
import pytest
from helpers import compiled_reads
from jax.sharding import PartitionSpec
from numpyro import handlers
from numpyro.contrib.control_flow import scan
from numpyro.distributions.batch_util import promote_batch_shape
from numpyro.infer import MCMC, NUTS, SVI, Predictive, Trace_ELBO
from numpyro.infer.autoguide import AutoNormal

import stabledist as dist
from stabledist._src.pytrees.batching import _holds_blocking
from stabledist._src.records.records import record_of
from stabledist.testing._catalog_entries import CATALOG

N = 2
KEY = jax.random.PRNGKey(0)
# where numpyro's `promote_batch_shape` gives a vmapped class a wrong batch shape (each class's
# catalog record says why: ``promote_wrong``; test_numpyro_promote_wrong_still_needed keeps it)
NUMPYRO_PROMOTE_WRONG = frozenset(n for n, e in CATALOG.items() if e.promote_wrong)


def _vmapped(module, build):
    return jax.vmap(lambda _: build(module))(jnp.arange(N))


def _derived(d) -> bool:
    rule = record_of(type(d)).batch
    has_leaves = any(hasattr(x, "shape") for x in jax.tree.leaves(d))
    return has_leaves and not (rule is not None and rule.keep) and not _holds_blocking(
        vars(d).values())


def _outcome(f):
    try:
        return "ok", f()
    except Exception as e:
        return type(e).__name__, None


def _draw_shape(d, sample_shape):
    """The shape of ``d.sample(KEY, sample_shape)``, traced (nothing compiled); drawn where
    the sampler needs concrete parameters (a multinomial's ``total_count``)."""
    try:
        return jax.eval_shape(lambda e: e.sample(KEY, sample_shape), d).shape
    except (ValueError, jax.errors.ConcretizationTypeError):
        return d.sample(KEY, sample_shape).shape


def test_vmap_output_is_the_batch_of_its_elements(builder):
    d = builder(dist)
    try:
        v = _vmapped(dist, builder)
    except ValueError as e:  # no parameter at all (TruncatedPolyaGamma): nothing to map
        assert "at least one argument containing an array" in str(e)
        return
    batch, event = tuple(d.batch_shape), tuple(d.event_shape)
    if not _derived(d):
        upstream = _vmapped(nd, builder)
        assert v.batch_shape == upstream.batch_shape
        x = _outcome(lambda: d.sample(KEY))[1]
        for method in (lambda e: e.sample(KEY), lambda e: e.log_prob(jnp.stack([x] * N))):
            ours = _outcome(lambda m=method: m(v))
            theirs = _outcome(lambda m=method: m(upstream))
            assert ours[0] == theirs[0] or theirs[0] != "ok", (ours[0], theirs[0])
        return
    assert (v.batch_shape, v.event_shape) == ((N, *batch), event)
    name = type(d).__name__
    if name not in NUMPYRO_PROMOTE_WRONG:
        promoted = _outcome(lambda: promote_batch_shape(_vmapped(nd, builder)).batch_shape)
        assert promoted[0] != "ok" or promoted[1] == v.batch_shape
    inside = []
    jax.vmap(lambda e: inside.append(e.batch_shape) or 0)(v)
    assert inside == [batch]
    assert jax.jit(lambda e: e)(v).batch_shape == v.batch_shape

    # the batch's numbers: compiled, in one program (helpers.compiled_reads), the elements'
    # eager; the shape of a draw is traced only (no sampler compiled at the batch's shapes)
    reads, wanted = [], []
    drawn = _outcome(lambda: d.sample(KEY))
    if drawn[0] == "ok":
        x = np.asarray(drawn[1])
        reads.append(("log_prob", v, np.stack([x] * N)))
        wanted.append(np.stack([np.asarray(d.log_prob(x))] * N))
        assert _draw_shape(v, (3,)) == (3, N, *batch, *event)
    for moment in ("mean", "variance"):
        one = _outcome(lambda m=moment: getattr(d, m))
        if one[0] == "ok":
            reads.append((moment, v))
            wanted.append(np.stack([one[1]] * N))
    for (what, *_), got, want in zip(reads, compiled_reads(*reads), wanted):
        np.testing.assert_allclose(got, want, rtol=1e-5, err_msg=what)


@pytest.mark.parametrize("name", sorted(NUMPYRO_PROMOTE_WRONG))
def test_numpyro_promote_wrong_still_needed(name):
    """Every ``promote_wrong`` record still holds: numpyro's `promote_batch_shape` of its
    vmapped example is not the batch of its elements (stabledist's); once numpyro's rule
    gets it right, this fails and the entry must go (the comparison then runs for it)."""
    build = CATALOG[name].example
    assert build is not None and type(build(nd)).__name__ == name  # the name the test reads
    right = (N, *build(nd).batch_shape)
    assert _vmapped(dist, build).batch_shape == right
    assert promote_batch_shape(_vmapped(nd, build)).batch_shape != right


@pytest.mark.parametrize("module", [nd, dist], ids=["numpyro", "stabledist"])
def test_numpyro_keeps_the_stale_shape(module):
    """The contrast the feature exists for: numpyro's vmapped Normal claims batch shape ()."""
    v = jax.vmap(lambda m: module.Normal(m, 1.0))(jnp.arange(3.0))
    assert v.batch_shape == ((3,) if module is dist else ())


def test_nested_vmap_under_jit_and_out_axes():
    f = jax.jit(jax.vmap(jax.vmap(lambda m: dist.Normal(m, jnp.ones(4)))))
    assert f(jnp.ones((2, 3))).batch_shape == (2, 3, 4)
    # the mapped axis inside the batch: numpyro's broadcasting rule gives the right shape
    g = jax.vmap(lambda m: dist.Normal(m * jnp.ones(4), 1.0), out_axes=1)(jnp.ones(3))
    assert (g.loc.shape, g.scale.shape, g.batch_shape) == ((4, 3), (1, 3), (4, 3))
    np.testing.assert_array_equal(g.log_prob(jnp.zeros((4, 3))),
                                  nd.Normal(g.loc, g.scale).log_prob(jnp.zeros((4, 3))))


def test_stacks_and_scans_of_instances_are_batched():
    parts = [dist.MultivariateNormal(jnp.full(3, float(i)), jnp.eye(3)) for i in range(4)]
    stacked = jax.tree.map(lambda *xs: jnp.stack(xs), *parts)
    assert (stacked.batch_shape, stacked.event_shape) == ((4,), (3,))
    _, ys = jax.lax.scan(lambda c, m: (c, dist.Normal(m, 1.0)), 0.0, jnp.arange(5.0))
    assert ys.batch_shape == (5,)
    # and a batched instance as scan's xs is its elements inside the body
    _, lp = jax.lax.scan(lambda c, e: (c, e.log_prob(jnp.zeros(3))), 0.0, stacked)
    np.testing.assert_allclose(lp, stacked.log_prob(jnp.zeros(3)), rtol=1e-6)


def test_leaves_that_are_not_arrays_never_change_the_shape():
    d = dist.Normal(jnp.zeros(3), 1.0)
    for leaf in (0, None, "x", PartitionSpec("batch"), object()):
        assert jax.tree.map(lambda _, v=leaf: v, d).batch_shape == (3,)
    # in_axes specs built from an instance map it as usual
    batched = dist.Normal(jnp.zeros((5, 3)), jnp.ones((5, 3)))
    spec = jax.tree.map(lambda _: 0, batched)
    assert spec.batch_shape == (5, 3)
    assert jax.vmap(lambda e: e.log_prob(0.0), in_axes=(spec,))(batched).shape == (5, 3)


def test_expanded_distributions_keep_numpyros_shape():
    """Not derived (the docs list it): numpyro's `promote_batch_shape` does it with new
    leaves, as contrib ``scan`` calls it, and gets the base's stored shape."""
    v = jax.vmap(lambda m: dist.Normal(m, 1.0).expand((3,)))(jnp.arange(4.0))
    upstream = jax.vmap(lambda m: nd.Normal(m, 1.0).expand((3,)))(jnp.arange(4.0))
    assert (v.batch_shape, v.base_dist.batch_shape) == (upstream.batch_shape,
                                                        upstream.base_dist.batch_shape)
    assert promote_batch_shape(v).batch_shape == promote_batch_shape(upstream).batch_shape


def _scan_model(module):
    def model(y=None):
        def step(c, yt):
            x = numpyro.sample("x", module.Normal(c, 1.0).expand([3]).to_event(1))
            numpyro.sample("m", module.Normal(0.0, 1.0).expand([2]).mask(True).to_event(1))
            z = numpyro.sample("z", module.Normal(x.sum(), 1.0), obs=yt)
            return x.mean(), z
        return scan(step, 0.0, y, length=4)
    return model


def test_contrib_scan_is_numpyros():
    """contrib ``scan`` stacks the sites' distributions and calls `promote_batch_shape`:
    derived shapes must not be promoted twice."""
    traces = [handlers.trace(handlers.seed(_scan_model(m), 0)).get_trace(y=jnp.ones(4))
              for m in (nd, dist)]
    for name in ("x", "m", "z"):
        a, b = (t[name] for t in traces)
        assert (a["fn"].batch_shape, a["fn"].event_shape) == (b["fn"].batch_shape,
                                                             b["fn"].event_shape)
        np.testing.assert_array_equal(a["fn"].log_prob(a["value"]), b["fn"].log_prob(b["value"]))


def _prior(module, mus):
    if module is dist:
        return jax.vmap(lambda m: dist.Normal(m, 2.0))(mus)  # a batched prior out of vmap
    return nd.Normal(mus, jnp.full(mus.shape, 2.0))  # numpyro: the stacked parameters


def _model(module):
    def model(y=None):
        mus = jnp.linspace(-1.0, 1.0, 3)
        with numpyro.plate("k", 3):
            theta = numpyro.sample("theta", _prior(module, mus))
        numpyro.deterministic("total", theta.sum())
        with numpyro.plate("n", 5):
            numpyro.sample("y", nd.Normal(theta.sum(), 1.0), obs=y)
    return model


def test_vmapped_prior_gives_numpyros_numbers_in_inference():
    y = jnp.linspace(0.0, 2.0, 5)
    out = {}
    for module in (nd, dist):
        mcmc = MCMC(NUTS(_model(module)), num_warmup=30, num_samples=30, progress_bar=False)
        mcmc.run(jax.random.PRNGKey(1), y=y)
        guide = AutoNormal(_model(module))
        svi = SVI(_model(module), guide, numpyro.optim.Adam(0.05), Trace_ELBO())
        result = svi.run(jax.random.PRNGKey(2), 20, y=y, progress_bar=False)
        pred = Predictive(_model(module), mcmc.get_samples())(jax.random.PRNGKey(3))
        out[module.__name__] = (mcmc.get_samples()["theta"], result.losses, pred["y"])
    for a, b in zip(*out.values()):
        np.testing.assert_array_equal(a, b)


def test_unflatten_of_a_class_without_rule_is_unchanged():
    """The rule is per class; `ImproperUniform` has none and keeps its given shape."""
    d = dist.ImproperUniform(nd.constraints.real, (2,), (3,))
    assert jax.tree.map(lambda x: x, d).batch_shape == (2,)
    assert not any(hasattr(x, "shape") for x in jax.tree.leaves(d))


def _shapes_all_the_way_down(d) -> list:
    found = [(type(d).__name__, tuple(d.batch_shape), tuple(d.event_shape))]
    for value in vars(d).values():
        values = value if isinstance(value, list | tuple) else [value]
        for v in values:
            if isinstance(v, nd.Distribution):
                found += _shapes_all_the_way_down(v)
    return found


def test_construction_gives_numpyros_shapes_all_the_way_down(builder):
    """numpyro's truncated and censored constructors promote a base distribution's parameters
    with ``jax.tree.map`` and keep its stored batch shape: nothing is derived inside a
    constructor, so every nested distribution has numpyro's shapes (and a round trip too)."""
    ours, theirs = builder(dist), builder(nd)
    assert _shapes_all_the_way_down(ours) == _shapes_all_the_way_down(theirs)
    assert _shapes_all_the_way_down(jax.tree.map(lambda x: x, ours)) == \
        _shapes_all_the_way_down(theirs)


def test_every_method_of_a_vmapped_distribution_is_the_stacked_ones():
    """entropy, cdf, icdf, to_event, expand, mask: as the distribution built from the stacked
    parameters (which numpyro builds directly)."""
    locs, scales = jnp.linspace(-1.0, 1.0, 4), jnp.linspace(0.5, 2.0, 4)
    v = jax.vmap(dist.Normal)(locs, scales)
    ref = nd.Normal(locs, scales)
    x = jnp.linspace(-2.0, 2.0, 4)
    np.testing.assert_array_equal(v.entropy(), ref.entropy())
    np.testing.assert_array_equal(v.cdf(x), ref.cdf(x))
    np.testing.assert_array_equal(v.icdf(jnp.full(4, 0.3)), ref.icdf(jnp.full(4, 0.3)))
    assert (v.to_event(1).batch_shape, v.to_event(1).event_shape) == ((), (4,))
    np.testing.assert_array_equal(v.to_event(1).log_prob(x), ref.to_event(1).log_prob(x))
    np.testing.assert_array_equal(v.expand((2, 4)).sample(KEY), ref.expand((2, 4)).sample(KEY))
    mask = jnp.array([True, False, True, False])
    np.testing.assert_array_equal(v.mask(mask).log_prob(x), ref.mask(mask).log_prob(x))
    np.testing.assert_array_equal(v.sample(KEY, (3,)), ref.sample(KEY, (3,)))


@pytest.mark.parametrize("element", ["Normal", "LogNormal", "StudentT"])
@pytest.mark.parametrize("build", [
    lambda m, v: v.to_event(1),
    lambda m, v: v.expand((2, 3)),
    lambda m, v: v.mask(jnp.array([True, False, True])),
    lambda m, v: m.MixtureSameFamily(m.Categorical(jnp.array([0.2, 0.3, 0.5])), v),
    lambda m, v: m.TransformedDistribution(v, m.transforms.ExpTransform()),
    lambda m, v: m.LeftCensoredDistribution(v, jnp.array([True, False, True])),
    lambda m, v: m.RightCensoredDistribution(v, jnp.array([[False, True, False]] * 2)),
    lambda m, v: m.IntervalCensoredDistribution(v, jnp.array([True, False, False]),
                                                jnp.array([False, False, True])),
], ids=["to_event", "expand", "mask", "mixture", "transformed", "left_censored",
        "right_censored_broadcast", "interval_censored"])
def test_a_distribution_built_from_a_vmapped_one_keeps_its_shapes(build, element):
    """A constructor reads its child's batch shape (``to_event`` moves it to the event,
    ``expand`` sizes its axes from it; the censored classes rebuild it with ``jax.tree.map``):
    what it built, and its round trips, keep the vmapped child's shape, and those of the
    distributions the child holds (LogNormal's Normal, StudentT's Chi2), also for a pickled
    copy of the vmapped distribution (with the batch itself no longer alive); the numbers are
    numpyro's for the same construction from stacked parameters (to float32 rounding)."""
    locs = jnp.linspace(-1.0, 1.0, 3)

    def make(module, m):
        return (module.StudentT(3.0, m, 1.0) if element == "StudentT"
                else getattr(module, element)(m, 1.0))

    vmapped = jax.vmap(lambda m: make(dist, m))(locs)
    ours = build(dist, vmapped)
    theirs = build(nd, make(nd, locs))
    pickled = pickle.dumps(vmapped)
    del vmapped
    gc.collect()
    from_pickle = build(dist, pickle.loads(pickled))
    x = jnp.linspace(1.5, 3.0, 3)  # in every support (exp of a LogNormal: above 1)
    for d in (ours, jax.jit(lambda d: d)(ours), jax.tree.map(lambda a: a, ours),
              from_pickle, jax.jit(lambda d: d)(from_pickle)):
        assert _shapes_all_the_way_down(d) == _shapes_all_the_way_down(theirs)
        # to the last bit but for StudentT, whose vmapped df is an array where numpyro's
        # stacked one is a Python float (a 1-ulp difference in log_prob)
        np.testing.assert_allclose(d.log_prob(x), theirs.log_prob(x), rtol=1e-6)
        np.testing.assert_allclose(d.sample(KEY, (2,)), theirs.sample(KEY, (2,)), rtol=1e-6)


def test_axes_inside_the_event_keep_numpyros_shape():
    """A mapped axis inside a vector's event dimensions (``out_axes`` past the batch, the
    leaves of ``jacfwd`` / ``hessian``) describes no distribution: the stored batch shape is
    kept, as numpyro keeps it, never an error. Inside the batch dimensions it is the batch
    shape of the moved leaves."""
    def build(m):
        return dist.MultivariateNormal(m, scale_tril=jnp.eye(3))
    for axis in (1, -1):
        inside = jax.vmap(build, out_axes=axis)(jnp.ones((4, 3)))
        assert (inside.batch_shape, inside.loc.shape) == ((), (3, 4))
    x = jnp.ones(3)
    for module in (dist, nd):
        jac = jax.jacfwd(lambda t, m=module: m.MultivariateNormal(
            t[0] * jnp.ones(3), scale_tril=jnp.eye(3) * t[1]))(jnp.array([1.0, 2.0]))
        assert (jac.batch_shape, jac.event_shape) == ((), (3,))
        hess = jax.hessian(lambda d: d.log_prob(x))(
            module.MultivariateNormal(jnp.zeros(3), scale_tril=jnp.eye(3)))
        assert hess.batch_shape == ()
        dirichlet = jax.jacfwd(lambda t, m=module: m.Dirichlet(t[0] * jnp.ones(3) + t[1]))(
            jnp.array([1.0, 2.0]))
        assert dirichlet.batch_shape == ()
    g = jax.vmap(lambda m: dist.MultivariateNormal(m, scale_tril=jnp.eye(3)), out_axes=1)(
        jnp.ones((4, 2, 3)))
    assert (g.batch_shape, g.event_shape) == ((2, 4), (3,))
    ref = nd.MultivariateNormal(g.loc, scale_tril=g.scale_tril)
    np.testing.assert_array_equal(g.log_prob(jnp.zeros(3)), ref.log_prob(jnp.zeros(3)))


def test_a_distribution_as_a_leaf_is_no_error():
    """``tree_map`` may put anything in a leaf, a distribution too (``jax.hessian`` with
    respect to a distribution does): numpyro returns, so does stabledist."""
    n = dist.Normal(jnp.zeros(3), 1.0)
    nested = jax.tree.map(lambda _: n, n)
    assert nested.loc is n and nested.batch_shape == (3,)
    hess = jax.hessian(lambda d: d.log_prob(jnp.ones(3)).sum())(n)
    assert isinstance(hess.loc, dist.Normal)


def test_in_axes_past_zero_gives_each_element_its_shape():
    """``in_axes=1`` over a batched distribution: inside, each element's batch shape is the
    stored one without that axis (and the numbers are the element's)."""
    d = dist.Normal(jnp.arange(6.0).reshape(2, 3), jnp.ones((2, 3)))
    seen = []

    def body(e):
        seen.append(e.batch_shape)
        return e.sample(KEY)

    out = jax.vmap(body, in_axes=1)(d)
    assert seen == [(2,)]
    assert out.shape == (3, 2)
    np.testing.assert_array_equal(
        out, jax.vmap(lambda m: nd.Normal(m, 1.0).sample(KEY), in_axes=1)(d.loc))


def test_parameters_of_other_ranks_are_read_too():
    """numpyro does not promote every parameter to one rank: a state-space model's transition
    matrix is never batched, a copula's concentrations may be scalars. The batch comes from
    whichever parameters carry it, with no error."""
    transition, tril = jnp.eye(2) * 0.9, jnp.broadcast_to(jnp.eye(2), (4, 2, 2))
    v = jax.vmap(lambda s: dist.GaussianStateSpace(3, transition, scale_tril=tril * s))(
        jnp.arange(1.0, 6.0))
    assert (v.batch_shape, v.event_shape) == ((5, 4), (3, 2))
    corr = jnp.array([[1.0, 0.3], [0.3, 1.0]])
    x = jnp.array([0.3, 0.6])
    ks = jnp.arange(1.0, 4.0)
    for make in (lambda m, k: m.GaussianCopulaBeta(jnp.array([2.0, 2.5]) * k, 3.0, corr),
                 lambda m, k: m.GaussianCopulaBeta(2.0, jnp.array([3.0, 2.0]) * k, corr)):
        g = jax.vmap(lambda k, make=make: make(dist, k))(ks)
        assert g.batch_shape == (3,)
        elements = jnp.stack([make(nd, k).log_prob(x) for k in ks])
        np.testing.assert_allclose(g.log_prob(x), elements, rtol=1e-5)


def test_stabilize_gives_the_batch_shape_of_the_stacked_parameters():
    """A numpyro distribution out of ``vmap`` (a guide's posterior too) converted by
    `stabilize` has the batch shape numpyro gives the same distribution built from the stacked
    parameters, as inside ``stable_internals``; an identity function keeps it."""
    locs = jnp.arange(4.0)
    converted = dist.stabilize(jax.vmap(lambda m: nd.Normal(m, 1.0))(locs))
    with dist.stable_internals():
        inside = jax.vmap(lambda m: nd.Normal(m, 1.0))(locs)
    for d in (converted, inside):
        assert d.batch_shape == nd.Normal(locs, 1.0).batch_shape == (4,)
        assert jax.jit(lambda d: d)(d).batch_shape == (4,)
        assert d[1].loc == 1.0
    # nested: a vmapped Independent, and numpyro's own truncated construction (its base keeps
    # numpyro's stored shape)
    nested = dist.stabilize(jax.vmap(lambda m: nd.Normal(m * jnp.ones(2), 1.0).to_event(1))(locs))
    assert (nested.batch_shape, nested.event_shape) == ((4,), (2,))
    built = nd.TruncatedNormal(0.0, 1.0, low=jnp.zeros(3))
    truncated = dist.stabilize(built)
    assert _shapes_all_the_way_down(truncated) == _shapes_all_the_way_down(built)
    assert _shapes_all_the_way_down(jax.jit(lambda d: d)(truncated)) == \
        _shapes_all_the_way_down(built)


def test_stabilize_converts_any_pytree_of_distributions():
    """Dicts and nested containers are converted too; a value without numpyro distributions
    comes back as it is."""
    posteriors = {"a": nd.Normal(0.0, 1.0), "b": [nd.Gamma(2.0, 1.0), 3]}
    converted = dist.stabilize(posteriors)
    assert dist.is_stable(converted["a"]) and dist.is_stable(converted["b"][0])
    assert converted["b"][1] == 3
    plain = {"a": 1, "b": dist.Normal(0.0, 1.0)}
    assert dist.stabilize(plain) is plain


def test_stabilize_of_a_vmapped_autoguide_posterior():
    """``jax.vmap(guide.get_posterior)`` over a stack of parameters (numpyro's classes) converts
    to the batch numpyro builds from the stacked parameters."""
    from numpyro.infer.autoguide import AutoDiagonalNormal, AutoMultivariateNormal

    def model():
        numpyro.sample("x", nd.Normal(jnp.zeros(2), 1.0).to_event(1))

    for make, params in (
            (AutoDiagonalNormal, {"auto_loc": jnp.arange(6.0).reshape(3, 2),
                                  "auto_scale": jnp.ones((3, 2))}),
            (AutoMultivariateNormal, {"auto_loc": jnp.arange(6.0).reshape(3, 2),
                                      "auto_scale_tril": jnp.broadcast_to(jnp.eye(2), (3, 2, 2))})):
        guide = make(model)
        with handlers.seed(rng_seed=0):
            guide()
        posterior = dist.stabilize(jax.vmap(guide.get_posterior)(params))
        stacked = guide.get_posterior(params)
        assert (posterior.batch_shape, posterior.event_shape) == \
            (stacked.batch_shape, stacked.event_shape)
        assert posterior.batch_shape[:1] == (3,)
        np.testing.assert_array_equal(posterior.mean, stacked.mean)
        np.testing.assert_array_equal(posterior.sample(KEY), stacked.sample(KEY))
        assert jax.jit(lambda d: d)(posterior).batch_shape == posterior.batch_shape
