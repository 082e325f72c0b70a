"""Tests for ``stabledist.handlers``: a ``seed`` that keeps no RNG state between calls.

numpyro's ``seed`` is the reference: the first call (and one ``with`` block) must draw
bit-identical values; what differs is that state never outlives a call or a ``with`` block,
so a global seeded model can be traced any number of times without leaking tracers.
Every test that traces runs under ``jax.checking_leaks()`` (``@tracing``); run the file with
``JAX_CHECK_TRACER_LEAKS=1`` to check the eager ones too.
"""

import threading

import jax
import jax.numpy as jnp
import numpy as np
import numpyro
import numpyro.distributions
import numpyro.handlers as nh
import pytest
from jax import random
from numpyro.infer import SVI, TraceEnum_ELBO
from numpyro.infer.autoguide import AutoDelta
from numpyro.infer.inspect import get_dependencies, get_model_relations
from numpyro.primitives import _PYRO_STACK

import stabledist
from stabledist import handlers

# Distributions under test: the stable ones (their draws equal numpyro's).
dist = stabledist  # the handlers must work with stable distributions (numpyro-equal draws)


@pytest.fixture(autouse=True)
def _empty_handler_stack():
    """Every test must leave numpyro's (global) handler stack empty."""
    yield
    assert not _PYRO_STACK


@pytest.fixture
def _leak_check():
    with jax.checking_leaks():
        yield


# Tests that trace (jit, vmap, grad, inspection) run under leak checking. Eager-only tests do
# not need it, and it makes every eager op recompile (~40 ms each), so it is opt-in there;
# JAX_CHECK_TRACER_LEAKS=1 turns it on for all tests.
tracing = pytest.mark.usefixtures("_leak_check")


def model(loc=0.0):
    x = numpyro.sample("x", dist.Normal(loc, 1.0))
    with numpyro.plate("N", 3):
        numpyro.sample("y", dist.Normal(x, 1.0))
    numpyro.sample("z", dist.Exponential(2.0), sample_shape=(2,))
    key = numpyro.prng_key()
    numpyro.deterministic("k", jnp.zeros(2) if key is None else random.uniform(key, (2,)))
    return x


def scalar_model(loc):
    """Reparametrized draw, so d(draw)/d(loc) == 1."""
    return numpyro.sample("x", dist.Normal(loc, 1.0))


def draws(fn, *args, **kwargs):
    """Values of all sites of one run of ``fn`` (subsample indices for plates)."""
    tr = nh.trace(fn).get_trace(*args, **kwargs)
    return {name: site["value"] for name, site in tr.items()}


def assert_same(a, b):
    assert a.keys() == b.keys()
    for name in a:
        np.testing.assert_array_equal(a[name], b[name], err_msg=name)


def assert_differ(a, b, names=("x", "y", "z")):
    assert all(not np.array_equal(a[n], b[n]) for n in names)


def key_data(key):
    is_typed = jnp.issubdtype(key.dtype, jax.dtypes.prng_key)
    return np.asarray(random.key_data(key) if is_typed else key)


SEEDS = {
    "int": 0,
    "int-large": 2**31 + 5,
    "np-0d": np.array(7),
    "jnp-uint32": jnp.uint32(3),
    "legacy-key": random.PRNGKey(11),
    "typed-key": random.key(11),
}


# --- API surface -------------------------------------------------------------------------


def test_reexports_and_subclass():
    assert set(handlers.__all__) == set(nh.__all__) | {"seed"}
    for name in nh.__all__:
        if name != "seed":
            assert getattr(handlers, name) is getattr(nh, name)
    assert handlers.Messenger is nh.Messenger  # non-__all__ names fall through to numpyro
    assert issubclass(handlers.seed, nh.seed)
    assert isinstance(handlers.seed(model, 0), nh.seed)
    with pytest.raises(AttributeError):
        handlers.no_such_handler  # noqa: B018


@pytest.mark.parametrize("rng_seed", list(SEEDS.values()), ids=list(SEEDS))
def test_first_call_matches_numpyro(rng_seed):
    ours = draws(handlers.seed(model, rng_seed), 1.0)
    assert_same(ours, draws(nh.seed(model, rng_seed), 1.0))
    np.testing.assert_array_equal(
        key_data(handlers.seed(model, rng_seed).rng_key), key_data(nh.seed(model, rng_seed).rng_key)
    )


def subsample_model():
    with numpyro.plate("N", 10, subsample_size=3):
        return numpyro.sample("y", dist.Normal(0.0, 1.0))


@tracing
def test_hide_types_plate_matches_numpyro():
    # The inner seed hides plates, so subsample indices come from the outer seed. One jit for
    # all runs: numpyro's eager subsampling recompiles a scan on every call.
    def nested(mod):
        return mod.seed(mod.seed(subsample_model, 1, hide_types=["plate"]), 2)

    outer_seeded = handlers.seed(subsample_model, 2)
    ours, up, outer_only = jax.jit(
        lambda: [draws(nested(handlers)), draws(nested(nh)), draws(outer_seeded)]
    )()
    assert_same(ours, up)
    np.testing.assert_array_equal(ours["N"], outer_only["N"])


def test_hide_types_prng_key_matches_numpyro():
    ours = draws(handlers.seed(model, 1, hide_types=["prng_key"]))
    assert_same(ours, draws(nh.seed(model, 1, hide_types=["prng_key"])))
    np.testing.assert_array_equal(ours["k"], jnp.zeros(2))


def test_repeated_calls_same_draws():
    seeded = handlers.seed(model, 0)
    first = draws(seeded)
    for _ in range(2):
        assert_same(draws(seeded), first)
    np.testing.assert_array_equal(key_data(seeded.rng_key), key_data(random.key(0)))
    # numpyro 0.22's seed also clones itself per call, so its callable form agrees; the state
    # numpyro still keeps is that of a reused `with` handler (next test, and the jit test).
    up = nh.seed(model, 0)
    assert_same(draws(up), first)
    assert_same(draws(up), first)


def test_context_manager_advances_like_numpyro_and_keeps_its_key_eagerly():
    """Used eagerly, a ``with`` handler advances its key inside the block and keeps it after,
    as numpyro's does: blocks in sequence continue one stream, with numpyro's bits."""
    ours, up = handlers.seed(rng_seed=0), nh.seed(rng_seed=0)
    blocks = {}
    for name, handler in [("ours", ours), ("up", up)]:
        with handler:
            a = draws(model)
            b = draws(model)
            c = numpyro.sample("c", dist.Normal(0.0, 1.0), sample_shape=(3,))
            key_inside = key_data(handler.rng_key)
        with handler:  # the next block continues the key
            again = draws(model)
        blocks[name] = (a, b, c, key_inside, again, key_data(handler.rng_key))
    (a, b, c, key_inside, again, key_after), up_blocks = blocks["ours"], blocks["up"]
    assert_same(a, up_blocks[0])
    assert_same(b, up_blocks[1])
    assert_differ(a, b)
    np.testing.assert_array_equal(c, up_blocks[2])
    np.testing.assert_array_equal(key_inside, up_blocks[3])
    assert_same(again, up_blocks[4])
    assert_differ(again, a)
    assert_differ(again, b)
    np.testing.assert_array_equal(key_after, up_blocks[5])


def test_blocks_in_sequence_draw_anew_as_numpyro():
    """The newcomer's check: a handler re-entered in sequence gives a new draw."""
    def sample():
        return numpyro.sample("x", dist.Normal(0.0, 1.0))

    results = []
    for h in (handlers.seed(rng_seed=0), nh.seed(rng_seed=0)):
        with h:
            a = sample()
        with h:
            c = sample()
        results.append((a, c))
    (a, c), (ua, uc) = results
    assert a != c
    assert (a, c) == (ua, uc)


def test_decorator_form():
    @handlers.seed(rng_seed=3)
    def decorated():
        return numpyro.sample("x", dist.Normal()), numpyro.sample("y", dist.Normal())

    assert isinstance(decorated, handlers.seed)
    assert decorated.__name__ == "decorated"
    expected = nh.seed(decorated.fn, 3)()
    np.testing.assert_array_equal(decorated(), expected)
    np.testing.assert_array_equal(decorated(), expected)
    with pytest.raises(TypeError, match="decorate a single callable"):
        handlers.seed(rng_seed=3)(1, 2)


# --- JAX transformations of a global seeded model ----------------------------------------

SEEDED = handlers.seed(scalar_model, random.key(5))


@tracing
def test_jit_vmap_grad_of_global_seeded_model():
    eager = SEEDED(0.0)
    np.testing.assert_array_equal(eager, nh.seed(scalar_model, random.key(5))(0.0))
    jitted = jax.jit(SEEDED)
    np.testing.assert_allclose(jitted(0.0), eager)
    # Retrace (new shape), vmap and grad of the same object: each call starts from its key.
    np.testing.assert_allclose(jitted(jnp.zeros(2)), SEEDED(jnp.zeros(2)))
    np.testing.assert_allclose(jax.vmap(SEEDED)(jnp.arange(3.0)), eager + jnp.arange(3.0))
    np.testing.assert_allclose(jax.grad(SEEDED)(2.0), 1.0)
    np.testing.assert_array_equal(SEEDED(0.0), eager)


@tracing
def test_global_with_handler_under_jit():
    """Inside ``jit`` a block's advanced key is a tracer: the handler keeps the key it had, so
    every traced call draws the same values and no tracer leaks; eagerly it advances."""
    ours = handlers.seed(rng_seed=0)

    def f(loc):
        with ours:
            return scalar_model(loc), scalar_model(loc)

    first = jax.jit(f)(0.0)
    np.testing.assert_array_equal(key_data(ours.rng_key), key_data(random.key(0)))
    np.testing.assert_allclose(jax.jit(f)(jnp.zeros(1)), jnp.stack(first)[:, None])  # retrace
    np.testing.assert_array_equal(key_data(ours.rng_key), key_data(random.key(0)))
    np.testing.assert_allclose(f(0.0), first)  # eagerly: the same draws, then the key advances
    assert not np.array_equal(key_data(ours.rng_key), key_data(random.key(0)))
    assert not np.allclose(jnp.stack(f(0.0)), jnp.stack(first))

    def g(up):
        with up:
            return scalar_model(0.0)

    assert_numpyro_keeps_the_traced_key(lambda up: jax.jit(lambda: g(up))())


@tracing
def test_seed_from_traced_keys():
    typed, legacy = random.split(random.key(0), 3), random.split(random.PRNGKey(0), 3)

    def run(rng_seed):
        return handlers.seed(scalar_model, rng_seed)(0.0)

    got = jax.jit(lambda t, lg, i: (jax.vmap(run)(t), jax.vmap(run)(lg), run(t[1]), run(i)))(
        typed, legacy, jnp.int32(4)
    )
    expected = (
        jnp.stack([nh.seed(scalar_model, k)(0.0) for k in typed]),
        jnp.stack([nh.seed(scalar_model, k)(0.0) for k in legacy]),
        nh.seed(scalar_model, typed[1])(0.0),
        nh.seed(scalar_model, 4)(0.0),
    )
    for g, e in zip(got, expected, strict=True):
        np.testing.assert_allclose(g, e, rtol=1e-6)


# --- the user scenarios (copied logic of ../shared/scenarios s0 and s1) -------------------


def relations_model():
    m = numpyro.sample("m", dist.Normal(0, 1))
    numpyro.sample("sd", dist.LogNormal(m, 1))
    return numpyro.sample("t", dist.TruncatedNormal(m, 1.0, low=0.0, high=3.0))


RELATIONS_SEEDED = handlers.seed(relations_model, random.key(0))


@tracing
def test_model_relations_then_jit():
    rel = get_model_relations(RELATIONS_SEEDED)
    deps = get_dependencies(RELATIONS_SEEDED)
    assert rel["sample_sample"] == {"m": [], "sd": ["m"], "t": ["m"]}
    assert set(deps["prior_dependencies"]["t"]) == {"m", "t"}
    jitted = jax.jit(lambda: RELATIONS_SEEDED())()
    np.testing.assert_allclose(RELATIONS_SEEDED(), jitted, rtol=1e-6)


def autoguide_model():
    a = numpyro.sample("a", dist.Normal(0, 1))
    numpyro.sample("b", dist.Normal(0, 1))
    numpyro.deterministic("test", a)


@tracing
def test_vmap_svi_init_blocked_autodelta():
    guide = AutoDelta(handlers.block(handlers.seed(autoguide_model, rng_seed=0), hide=["b"]))
    svi = SVI(autoguide_model, guide, numpyro.optim.Adam(0.01), loss=TraceEnum_ELBO())
    keys = random.split(random.PRNGKey(0), 3)
    states = jax.vmap(svi.init)(keys)
    params = jax.vmap(svi.get_params)(states)
    assert set(params) == {"a_auto_loc"}
    assert params["a_auto_loc"].shape == (3,)
    # The guide's model is seeded with 0 and the innermost seed wins (as in numpyro), so every
    # key gives the same initial value.
    np.testing.assert_array_equal(params["a_auto_loc"], jnp.full(3, params["a_auto_loc"][0]))


# --- composition with other handlers -----------------------------------------------------


COMPOSITIONS = {
    "seed(substitute)": lambda h, s: h.seed(h.substitute(model, {"x": 2.0}), s),
    "substitute(seed)": lambda h, s: h.substitute(h.seed(model, s), {"x": 2.0}),
    "seed(condition)": lambda h, s: h.seed(h.condition(model, {"z": jnp.ones(2)}), s),
    "condition(seed)": lambda h, s: h.condition(h.seed(model, s), {"z": jnp.ones(2)}),
    "block(seed)": lambda h, s: h.block(h.seed(model, s), hide=["x"]),
    "seed(block)": lambda h, s: h.seed(h.block(model, hide=["y"]), s),
    "seed(trace)": lambda h, s: h.seed(h.trace(model), s),
    "scale(seed)": lambda h, s: h.scale(h.seed(model, s), 2.0),
}


@pytest.mark.parametrize("name", list(COMPOSITIONS))
def test_composition_matches_numpyro(name):
    ours = COMPOSITIONS[name](handlers, 4)
    first = draws(ours)
    assert_same(first, draws(COMPOSITIONS[name](nh, 4)))
    assert_same(draws(ours), first)


@tracing
def test_composed_objects_trace_repeatedly():
    # seed(trace) is left out: numpyro's trace handler itself keeps the traced values.
    composed = {n: w(handlers, 4) for n, w in COMPOSITIONS.items() if n != "seed(trace)"}
    jitted = jax.jit(lambda: {n: draws(c) for n, c in composed.items()})()
    for c in composed.values():
        inner = c
        while not isinstance(inner, handlers.seed):
            inner = inner.fn
        np.testing.assert_array_equal(key_data(inner.rng_key), key_data(random.key(4)))
    # Eager draws after tracing match the traced ones (two cases: eager runs are slow here).
    for name in ["substitute(seed)", "seed(block)"]:
        after = draws(composed[name])
        for site in after:
            np.testing.assert_allclose(jitted[name][site], after[site], rtol=1e-6)


def test_trace_of_seeded_is_stable():
    traced = handlers.trace(handlers.seed(model, 0))
    t1 = traced.get_trace()
    t2 = traced.get_trace()
    assert_same({k: v["value"] for k, v in t1.items()}, {k: v["value"] for k, v in t2.items()})


# --- nesting, recursion, threads, exceptions ----------------------------------------------


def test_nested_seeds_match_numpyro():
    # Innermost seed wins for the sites it covers.
    ours = draws(handlers.seed(handlers.seed(model, 1), 2))
    assert_same(ours, draws(handlers.seed(model, 1)))
    assert_same(ours, draws(nh.seed(nh.seed(model, 1), 2)))

    def outer(mod):
        inner = mod.seed(lambda: numpyro.sample("i", dist.Normal()), 7)

        def fn():
            a = numpyro.sample("a", dist.Normal())
            i1, i2 = inner(), inner()
            b = numpyro.sample("b", dist.Normal())
            return jnp.stack([a, i1, i2, b])

        return fn

    ours = handlers.seed(outer(handlers), 0)()
    np.testing.assert_array_equal(ours, nh.seed(outer(nh), 0)())
    assert ours[1] == ours[2]
    # The inner call consumed no outer keys: `b` is the outer seed's second draw.
    with handlers.seed(rng_seed=0):
        a = numpyro.sample("a", dist.Normal())
        b = numpyro.sample("b", dist.Normal())
    np.testing.assert_array_equal(ours[jnp.array([0, 3])], jnp.stack([a, b]))


def assert_numpyro_keeps_the_traced_key(program):
    """numpyro's seed handler keeps the key it advanced inside ``jit`` (a tracer) and its next
    draw raises JAX's UnexpectedTracerError (numpyro issue 1651). Checked on the handler
    itself, with JAX's leak check off for numpyro's run: the check's report walks
    ``gc.get_referrers`` over the whole heap for each tracer in the chain (4-19 s per report in
    a pytest worker, for a fact the handler's state shows directly)."""
    up = nh.seed(rng_seed=0)
    with jax.check_tracer_leaks(False):
        try:
            program(up)
        except jax.errors.UnexpectedTracerError:  # the leaked key used again in the program
            pass
        assert isinstance(up.rng_key, jax.core.Tracer), "numpyro's handler no longer leaks"
        with pytest.raises(jax.errors.UnexpectedTracerError), up:
            numpyro.sample("next", numpyro.distributions.Normal())


def nested_blocks(handler, module=dist, inner=None):
    """Draws of ``a``, then ``b``, ``b2`` in an inner block of ``handler`` (run by ``inner``,
    e.g. ``jax.jit``), then ``c``, ``d`` back in the outer block."""
    def inner_block():
        with handler:
            return (numpyro.sample("b", module.Normal()), numpyro.sample("b2", module.Normal()))

    with handler:
        a = numpyro.sample("a", module.Normal())
        b, b2 = (inner or (lambda f: f))(inner_block)()
        c = numpyro.sample("c", module.Normal())
        d = numpyro.sample("d", module.Normal())
    return [float(x) for x in (a, b, b2, c, d)]


def test_nested_with_same_handler_continues_like_numpyro():
    """A block inside a block of the same object continues its key as numpyro does: every
    draw distinct, numpyro's bits; the outermost block leaves no state behind."""
    handler, up = handlers.seed(rng_seed=0), nh.seed(rng_seed=0)
    ours = nested_blocks(handler)
    assert ours == nested_blocks(up, numpyro.distributions)
    assert len(set(ours)) == len(ours)
    np.testing.assert_array_equal(key_data(handler.rng_key), key_data(up.rng_key))
    second = nested_blocks(handler)  # the next outermost block continues, as numpyro's
    assert second == nested_blocks(up, numpyro.distributions)
    assert not set(second) & set(ours)
    # A call of a seeded object inside its own `with` block starts from the given key (the
    # documented restart semantics of calls).
    seeded = handlers.seed(scalar_model, 0)
    with seeded:
        first = scalar_model(0.0)
        assert seeded(0.0) == first


@tracing
@pytest.mark.parametrize("inner", ["jit", "jit-in-jit"])
def test_nested_with_same_handler_inside_jit_leaks_nothing(inner):
    """The inner block inside ``jit``, the outer outside (or inside another ``jit``): its
    traced key must not outlive the trace, and still no draw repeats an earlier one. numpyro
    keeps the traced key and leaks it."""
    handler = handlers.seed(rng_seed=0)
    eager = nested_blocks(handlers.seed(rng_seed=0))
    if inner == "jit":
        got = nested_blocks(handler, inner=jax.jit)
    else:
        got = jax.jit(lambda: jnp.stack(
            [jnp.asarray(x) for x in nested_blocks_traced(handler)]))().tolist()
    assert got[:3] == pytest.approx(eager[:3])  # a and the inner block: numpyro's draws
    assert len(set(got)) == len(got)
    if inner == "jit":  # the outer block ran eagerly: the handler keeps its concrete key
        assert not isinstance(handler.rng_key, jax.core.Tracer)
        assert not np.array_equal(key_data(handler.rng_key), key_data(random.key(0)))
    else:  # both inside jit: the handler keeps the key it had
        np.testing.assert_array_equal(key_data(handler.rng_key), key_data(random.key(0)))
    if inner == "jit":
        assert_numpyro_keeps_the_traced_key(
            lambda up: nested_blocks(up, numpyro.distributions, inner=jax.jit))


def nested_blocks_traced(handler):
    """`nested_blocks` traced inside ``jit`` with its inner block in a ``jit`` of its own."""
    def inner_block():
        with handler:
            return (numpyro.sample("b", dist.Normal()), numpyro.sample("b2", dist.Normal()))

    with handler:
        a = numpyro.sample("a", dist.Normal())
        b, b2 = jax.jit(inner_block)()
        c = numpyro.sample("c", dist.Normal())
        d = numpyro.sample("d", dist.Normal())
    return a, b, b2, c, d


def rec(n):
    x = numpyro.sample(f"x{n}", dist.Normal())
    return [x] + (REC_SEEDED(n - 1) if n > 0 else [])


REC_SEEDED = handlers.seed(rec, 0)


@tracing
def test_recursive_call_of_same_object():
    out = REC_SEEDED(3)
    # Each call starts from the given key (as numpyro's callable form does).
    assert all(x == out[0] for x in out)
    np.testing.assert_array_equal(jnp.stack(jax.jit(lambda: REC_SEEDED(3))()), jnp.stack(out))
    np.testing.assert_array_equal(key_data(REC_SEEDED.rng_key), key_data(random.key(0)))


def test_call_from_another_thread():
    seeded = handlers.seed(model, 0)
    expected = draws(seeded)
    result = {}
    thread = threading.Thread(target=lambda: result.update(draws(seeded)))
    thread.start()
    thread.join()
    assert_same(result, expected)
    assert_same(draws(seeded), expected)


@tracing
def test_exceptions_leave_no_state():
    def failing():
        numpyro.sample("x", dist.Normal())
        raise RuntimeError("boom")

    seeded = handlers.seed(failing, 0)
    for _ in range(2):
        with pytest.raises(RuntimeError, match="boom"):
            seeded()
        assert not _PYRO_STACK
    handler, up = handlers.seed(rng_seed=0), nh.seed(rng_seed=0)
    for h in (handler, up):
        with pytest.raises(RuntimeError, match="boom"), h:
            failing()
        assert not _PYRO_STACK
    np.testing.assert_array_equal(key_data(handler.rng_key), key_data(up.rng_key))
    with pytest.raises(RuntimeError, match="boom"):
        jax.jit(seeded)()
    assert not _PYRO_STACK
    np.testing.assert_array_equal(key_data(seeded.rng_key), key_data(random.key(0)))


# --- rng_seed validation -----------------------------------------------------------------


BAD_SEEDS = {
    "float": 1.5,
    "str": "0",
    "list": [0, 1],
    "np-float": np.float64(1.0),
    "jnp-float": jnp.array(1.0),
    "int-vector": jnp.zeros(3, jnp.int32),
    "int32-pair": jnp.zeros(2, jnp.int32),  # looks like a legacy key but has the wrong dtype
    "legacy-batch": random.split(random.PRNGKey(0), 2),
    "typed-batch": random.split(random.key(0), 2),
}


@pytest.mark.parametrize("bad", list(BAD_SEEDS.values()), ids=list(BAD_SEEDS))
def test_invalid_rng_seed(bad):
    with pytest.raises(TypeError, match="rng_seed must be"):
        handlers.seed(model, bad)
    with pytest.raises(TypeError):  # numpyro rejects these too
        nh.seed(model, bad)


def test_batch_of_keys_error_says_vmap():
    with pytest.raises(TypeError, match="vmap"):
        handlers.seed(model, random.split(random.key(0), 2))


def test_none_seed_is_a_no_op_like_numpyro():
    seeded = handlers.seed(model, None)
    assert seeded.rng_key is None
    values = {"x": 1.0, "N": jnp.arange(3), "y": jnp.zeros(3), "z": jnp.ones(2)}
    ours = draws(handlers.substitute(seeded, values))
    assert_same(ours, draws(nh.substitute(nh.seed(model, None), values)))
    np.testing.assert_array_equal(ours["k"], jnp.zeros(2))  # no key for prng_key()
    with pytest.raises(Exception) as ours_err:
        seeded()
    with pytest.raises(Exception) as up_err:
        nh.seed(model, None)()
    assert ours_err.type is up_err.type
    with handlers.seed(rng_seed=None):
        assert numpyro.prng_key() is None


def test_numpy_integer_seed_accepted():
    # numpyro rejects numpy integer scalars (np.int64); they are plainly meant as ints.
    assert_same(draws(handlers.seed(model, np.int64(3))), draws(nh.seed(model, 3)))
