"""Hypothesis property suite: pytree stability and tracer safety of every distribution class.

Every property of the registry (`stabledist.testing.PROPERTIES`) is a test here,
parametrized over every public distribution class (ids are class names);
`test_every_property_has_a_test` keeps the two in step. Instances come from
`stabledist.testing.specs`: drawn from `arg_constraints` (generic), with per-class hints, or
from the catalog for the classes whose catalog record says ``catalog_only``
(`draw_mode` says which). What the suite knows of a class (its float64 casts, numpyro's own
failures under a transformation) is that class's record in
`stabledist.testing._catalog_entries.CATALOG`; the tables here are views of it. A failure prints the
drawn distribution (class and parameters), the access plan where there is one, and what
differed, after shrinking.

The properties that read a class's own values (access plans, round trips, control flow, jit,
vmap, pmap, shard_map, closures, hoisting, parametrizations, tree_map, numpyro's numbers) run
on every class. Those that check the core's own machinery, the same code whatever the class
(hash-seed leaf order, release, threads), run on `INDEPENDENT_OF_CLASS`: one class of each
shape that machinery walks.

Profiles (``tests/conftest.py``): ``ci`` (default) keeps few derandomized examples per class
and a small set of shapes, so compiled functions are reused; float64 is checked by ``make
test-x64`` (the same properties under ``JAX_ENABLE_X64=1``, a representative set of classes
cast to float64) and here by `X64_SWITCH_CLASSES` under a scoped ``jax.enable_x64``;
``thorough`` (``STABLEDIST_HYPOTHESIS_PROFILE=thorough``) draws many more random examples,
float64 everywhere, wider batch shapes (up to 2-d), event sizes 1-4, non-scalar sample shapes,
and reads ``log_prob`` inside every transformation.

Counted, not assumed: each check records the class it ran on (``COVERAGE``); a property test
that never completed its check on its class fails, and the session summary prints the
per-property counts (summed over pytest-xdist workers).
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Callable
from typing import Any

import jax
import numpy as np
import pytest
from helpers import CLASS_NAMES, FACTORY_NAMES, INDEPENDENT_OF_CLASS, UserDist, nd
from hypothesis import assume, given, seed, settings
from hypothesis import strategies as st

import stabledist as sd
from stabledist import testing
from stabledist.testing import _process, _strategies, _transforms, catalog
from stabledist.testing._catalog_entries import CATALOG, entry_of, upstream_failures
from stabledist.testing._compare import COVERAGE, COVERAGE_KEY, TRACED_METHODS
from stabledist.testing._strategies import access_plans, specs, stacks

THOROUGH = os.environ.get("STABLEDIST_HYPOTHESIS_PROFILE", "ci") == "thorough"
TESTED_CLASSES = [name for name in CLASS_NAMES if name not in catalog.EXCLUDED]
"""Every public class with a catalog example: all but the abstract bases of EXCLUDED, which
test_classes_without_example_are_abstract keeps honest (nothing is collected to be skipped)."""


KEY = jax.random.PRNGKey(0)
NDEV = jax.device_count()

def pair(spec: Any) -> tuple[Any, Any]:
    """``spec``'s stabledist and numpyro instances; an example whose arguments numpyro's own
    constructor rejects (stabledist's then raises the same) is not one: hypothesis draws
    another."""
    built = spec.build_pair()
    assume(built is not None)
    assert built is not None
    return built


def traced_reads(prop: str, name: str) -> tuple[str, ...]:
    """The methods read inside the transformation: the profile's, minus the reads the class's
    record lists as failing for numpyro's own class under ``prop`` (``upstream_failures``:
    a JAX or numpyro bug, not a stabledist one; test_upstream_failures_still_fail re-verifies
    each)."""
    failing = {f.method for f in entry_of(name).upstream_failures if f.prop == prop}
    return tuple(m for m in TRACED if m not in failing)


@pytest.mark.parametrize("name", sorted(catalog.EXCLUDED))
def test_classes_without_example_are_abstract(name: str) -> None:
    """A class is left out of the property suite only when there is nothing to check: it is
    public, and numpyro's own class has neither parameters nor a sampler nor a density."""
    assert name in CLASS_NAMES, f"{name} is not a public class: drop its no_example record"
    upstream = getattr(nd, name)
    assert upstream.arg_constraints == {}, f"{name} has parameters: give it a catalog example"
    instance = upstream()
    for method, args in (("sample", (jax.random.PRNGKey(0),)), ("log_prob", (0.0,))):
        with pytest.raises(NotImplementedError):
            getattr(instance, method)(*args)


# ---------------------------------------------------------------------------------------------
# What each profile draws.
# ---------------------------------------------------------------------------------------------

BATCH_SHAPES = _strategies.WIDE_BATCH_SHAPES if THOROUGH else _strategies.CI_BATCH_SHAPES
EVENT_SIZES = st.integers(1, 4) if THOROUGH else st.just(3)  # one size: compiles reused
F32 = st.just(np.float32)
F32_OR_F64 = st.sampled_from([np.float32, np.float64])
# eager properties compile every op afresh for each new dtype and shape: float64 and
# sample shapes other than () only in the thorough profile (jit draws float64 in both)
EAGER_DTYPES = F32_OR_F64 if THOROUGH else F32
# float64 in ci: every float64 path costs a second set of compiles (eager and jitted) per
# class, so `make test-x64` (JAX_ENABLE_X64=1 for the whole process) casts one class per kind
# of parameter handling (scalar, special-function, discrete, matrix, Cholesky, nested, wrapper,
# hybrid-field, extra-field); thorough: all, in every run.
X64_PROCESS = bool(jax.config.read("jax_enable_x64"))
FLOAT64_CLASSES = frozenset(name for name, entry in CATALOG.items() if entry.float64)
"""The classes whose catalog record says ``float64``."""
assert FLOAT64_CLASSES <= set(CLASS_NAMES), sorted(FLOAT64_CLASSES - set(CLASS_NAMES))
X64_SWITCH_CLASSES = frozenset(name for name, entry in CATALOG.items() if entry.x64_switch)
"""The classes whose catalog record says ``x64_switch``: cast to float64 under a scoped
``jax.enable_x64`` in a process that runs without x64 (``make test``). What the switch itself
can break is class-independent (a compiled probe, a cached program or an aux table reused
across the switch): a scalar class, a matrix class and a holder of a child cover it. How each
kind of class handles float64 parameters is checked by ``make test-x64`` (`FLOAT64_CLASSES`,
under x64 for the whole process)."""
SAMPLE_SHAPES = st.sampled_from([(), (2,), (3, 1)]) if THOROUGH else st.just(())


def spec_of(name: str, dtypes: object = F32) -> object:
    """Drawn specs; in ci the catalog example comes first (hypothesis tries the simplest
    choice first): its operations are compiled already by the rest of the suite, and every
    property shares it. The second example is a random draw."""
    drawn = specs(name, batch_shapes=BATCH_SHAPES, event_sizes=EVENT_SIZES, dtypes=dtypes)
    if THOROUGH:
        return drawn
    return st.one_of(_strategies.catalog_specs(name), drawn)


def stack_of(name: str, n: int) -> object:
    drawn = stacks(name, n, batch_shapes=BATCH_SHAPES, event_sizes=EVENT_SIZES)
    if THOROUGH:
        return drawn
    return st.one_of(_strategies.catalog_specs(name).map(lambda s: [s] * n), drawn)


# traced bodies read every lazy property, mean and variance; log_prob too in thorough (it is
# the costliest part to compile; test_jit and test_closure evaluate it in both profiles)
TRACED = TRACED_METHODS if THOROUGH else ("mean", "variance")


def examples(ci: int, thorough: int) -> settings:
    """Per-property example counts: each compiled property compiles once per structure, so
    the ci profile keeps them low - the catalog example (whose operations the rest of the
    suite compiled already) and, for the eager properties, one drawn example (new shapes:
    new compiles); the profile's other settings are inherited."""
    return settings(max_examples=thorough if THOROUGH else ci)


def eager_examples(ci: int, thorough: int) -> Callable[[Any], Any]:
    """`examples`, and in ci one seed for every eager property (access plans, round trip,
    upstream, tree_map): they all draw the same second example of a class, whose new shapes
    cost a compile per operation, paid once instead of once per property."""
    def apply(test: Any) -> Any:
        test = examples(ci, thorough)(test)
        return test if THOROUGH else seed(EAGER_SEED)(test)

    return apply


EAGER_SEED = 20261123

RELEASE_CYCLES = 200
"""Create/access/drop cycles per example. Each cycle's instance is dropped before the next one is
built, so CPython gives the next one the same memory and ``id`` from the first cycles on
(measured: 297-299 reuses in 300 cycles for every class of `INDEPENDENT_OF_CLASS`): a value
served to a new instance under a dead one's ``id`` fails at once, one entry left behind fails
the exact count at the end, and 200 cycles watch three instances (every 97th) for being kept
alive. More cycles repeat the same paths (10 000 did, per class)."""


@pytest.fixture(scope="session", autouse=True)
def hash_seed_workers() -> object:
    """Start the PYTHONHASHSEED workers now: their start-up overlaps the first tests. Once
    per session: a pytest-xdist worker runs one class's tests from several modules in turn,
    and a module-scoped fixture would restart them (three JAX processes) at every class."""
    _process.start_hash_seed_workers()
    yield
    _process.stop_hash_seed_workers()


@pytest.fixture(autouse=True)
def counted(request: pytest.FixtureRequest) -> object:
    """Counted, not assumed: a property test whose examples never ran the check to completion
    on its class fails (at teardown), so no property can pass on zero classes. What the test
    exercised travels in ``user_properties`` to ``tests/conftest.py``, which sums it over the
    session (and over pytest-xdist workers) and prints the per-property table."""
    mark = len(COVERAGE.events)
    yield
    events = COVERAGE.since(mark)
    request.node.user_properties.append((COVERAGE_KEY, events))
    prop = request.node.originalname.removeprefix("test_")
    params = request.node.callspec.params if hasattr(request.node, "callspec") else {}
    if prop not in testing.PROPERTIES or _failed(request.node):
        return
    if "name" in params:
        assert (prop, params["name"]) in events, f"{prop} ran no example to completion on " \
                                                 f"{params['name']}"
    if "kind" in params:  # a factory's class is the one it chose
        assert any(p == prop for p, _ in events), f"{prop} ran no example on {params['kind']}"


def _failed(item: pytest.Item) -> bool:
    report = getattr(item, "stabledist_call_report", None)
    return report is None or not report.passed


# ---------------------------------------------------------------------------------------------
# The properties.
# ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize("name", TESTED_CLASSES)
@eager_examples(ci=2, thorough=60)
@given(data=st.data())
def test_access_plan(name: str, data: st.DataObject) -> None:
    spec = data.draw(spec_of(name, EAGER_DTYPES), label="distribution")
    with spec.x64_context():
        d, upstream = pair(spec)
        plan = data.draw(access_plans(d, sample_shapes=SAMPLE_SHAPES), label="access plan")
        testing.check_access_plan(d, plan, KEY, upstream)


@pytest.mark.parametrize("name", TESTED_CLASSES)
@eager_examples(ci=2, thorough=40)
@given(data=st.data())
def test_round_trip(name: str, data: st.DataObject) -> None:
    spec = data.draw(spec_of(name, EAGER_DTYPES), label="distribution")
    with spec.x64_context():
        d, upstream = pair(spec)
        testing.check_round_trip(d, KEY, upstream)


@pytest.mark.parametrize("name", TESTED_CLASSES)
@examples(ci=1, thorough=20)
@given(data=st.data())
def test_control_flow(name: str, data: st.DataObject) -> None:
    spec = data.draw(spec_of(name), label="distribution")
    d, upstream = pair(spec)
    testing.check_control_flow(d, upstream=upstream)


@pytest.mark.parametrize("name", TESTED_CLASSES)
@examples(ci=1, thorough=30)
@given(data=st.data())
def test_jit(name: str, data: st.DataObject) -> None:
    """Also under jax_enable_x64 with float64 parameters: drawn float64 specs, and the catalog
    example cast to float64 (every class in thorough; in ci FLOAT64_CLASSES under ``make
    test-x64``, X64_SWITCH_CLASSES under a scoped switch otherwise)."""
    spec = data.draw(spec_of(name, F32_OR_F64), label="distribution")
    cast = THOROUGH or name in (FLOAT64_CLASSES if X64_PROCESS else X64_SWITCH_CLASSES)
    for x64 in sorted({spec.x64, cast}):
        variant = dataclasses.replace(spec, x64=x64) if spec.catalog_id else spec
        if variant.x64 != x64:
            continue
        with variant.x64_context():
            d, upstream = pair(variant)
            testing.check_jit(d, upstream=upstream)
            if x64:
                COVERAGE.record("jit[float64]", d)


@pytest.mark.parametrize("name", TESTED_CLASSES)
@examples(ci=1, thorough=20)
@given(data=st.data())
def test_vmap(name: str, data: st.DataObject) -> None:
    specs_ = data.draw(stack_of(name, 2), label="stacked distributions")
    ours, theirs = zip(*(pair(s) for s in specs_))
    testing.check_vmap(ours, KEY, traced=traced_reads("vmap", name), upstreams=theirs)


@pytest.mark.parametrize("name", TESTED_CLASSES)
@examples(ci=1, thorough=10)
@given(data=st.data())
def test_pmap(name: str, data: st.DataObject) -> None:
    specs_ = data.draw(stack_of(name, NDEV), label="stacked distributions")
    ours, theirs = zip(*(pair(s) for s in specs_))
    testing.check_pmap(ours, KEY, traced=traced_reads("pmap", name), upstreams=theirs)


@pytest.mark.parametrize("name", TESTED_CLASSES)
@examples(ci=1, thorough=10)
@given(data=st.data())
def test_shard_map(name: str, data: st.DataObject) -> None:
    specs_ = data.draw(stack_of(name, NDEV), label="stacked distributions")
    ours, theirs = zip(*(pair(s) for s in specs_))
    testing.check_shard_map(ours, KEY, traced=traced_reads("shard_map", name), upstreams=theirs)


@pytest.mark.parametrize("name", TESTED_CLASSES)
@examples(ci=1, thorough=10)
@given(data=st.data())
def test_closure(name: str, data: st.DataObject) -> None:
    spec = data.draw(spec_of(name), label="distribution")
    d, upstream = pair(spec)
    testing.check_closure(d, traced=traced_reads("closure", name), upstream=upstream)


@pytest.mark.parametrize("name", TESTED_CLASSES)
@eager_examples(ci=2, thorough=40)
@given(data=st.data())
def test_upstream(name: str, data: st.DataObject) -> None:
    spec = data.draw(spec_of(name, EAGER_DTYPES), label="distribution")
    with spec.x64_context():
        d, upstream = pair(spec)
        testing.check_upstream(d, upstream, KEY)


# ---------------------------------------------------------------------------------------------
# Properties of the core's machinery, the same code for every class: on a covering set.
# ---------------------------------------------------------------------------------------------

def independent_spec(kind: str) -> Any:
    """The drawn specs of one `INDEPENDENT_OF_CLASS` entry: a factory from the catalog (its
    arguments are not one class's), the user's class drawn from its ``arg_constraints``."""
    if kind == "UserDist":
        return specs(UserDist, batch_shapes=BATCH_SHAPES, event_sizes=EVENT_SIZES)
    if kind in FACTORY_NAMES:
        return _strategies.catalog_specs(kind)
    return spec_of(kind)


def independent_of_class(test: Any) -> Any:
    """Parametrize ``test`` over `INDEPENDENT_OF_CLASS` (``kind``), two examples each in ci."""
    return pytest.mark.parametrize("kind", list(INDEPENDENT_OF_CLASS))(
        examples(ci=2, thorough=20)(given(data=st.data())(test)))


@independent_of_class
def test_hash_seed(kind: str, data: st.DataObject) -> None:
    spec = data.draw(independent_spec(kind), label="distribution")
    testing.check_hash_seed(pair(spec)[0], spec)


@independent_of_class
def test_release(kind: str, data: st.DataObject) -> None:
    spec = data.draw(independent_spec(kind), label="distribution")
    pair(spec)
    testing.check_release(spec.build, RELEASE_CYCLES)


@independent_of_class
def test_threads(kind: str, data: st.DataObject) -> None:
    spec = data.draw(independent_spec(kind), label="distribution")
    pair(spec)
    testing.check_threads(spec.build, n_threads=4, upstream=lambda: spec.build(nd))


def test_independent_of_class_covers_its_kinds() -> None:
    """The covering set has what its entries say: a hybrid field (a leaf or static), a list
    of children, a factory, a user's stable class."""
    assert set(INDEPENDENT_OF_CLASS) - {"UserDist"} <= set(CLASS_NAMES) | set(FACTORY_NAMES)
    base = sd.Normal(np.zeros(2, np.float32), 1.0)
    assert [len(jax.tree_util.tree_leaves(sd.MaskedDistribution(base, mask)))
            for mask in (np.array([True, False]), False)] == [3, 2]
    assert isinstance(catalog.example("MixtureGeneral", sd).component_distributions, list)
    assert "Categorical" in FACTORY_NAMES and sd.is_stable(UserDist(1.0))


@pytest.mark.parametrize("name", TESTED_CLASSES)
@examples(ci=1, thorough=10)
@given(data=st.data())
def test_hoisting(name: str, data: st.DataObject) -> None:
    """Fresh instances whose lazy values are first read inside jit, vmap, grad, scan, pmap and
    shard_map give numpyro's eager values, bit for bit."""
    spec = data.draw(spec_of(name), label="distribution")
    pair(spec)
    testing.check_hoisting(spec.build, lambda: spec.build(nd))


PARAMETRIZED = [n for n in CLASS_NAMES if testing.parametrizations(getattr(sd, n))]


@pytest.mark.parametrize("name", [pytest.param(n, id=n) for n in PARAMETRIZED])
@examples(ci=1, thorough=10)
@given(data=st.data())
def test_parametrizations(name: str, data: st.DataObject) -> None:
    spec = data.draw(specs(name, batch_shapes=BATCH_SHAPES, event_sizes=EVENT_SIZES),
                     label="distribution")
    d, _ = pair(spec)
    testing.check_parametrizations(d, None if spec.catalog_id else spec.kwargs())


def test_parametrized_classes_are_the_documented_ones() -> None:
    """The derivation (optional constrained keywords, less each record's
    ``not_parametrizations``) finds exactly the classes whose catalog records list alternative
    constructors (``parametrizations``), with their keywords."""
    assert {n: testing.parametrizations(getattr(sd, n)) for n in PARAMETRIZED} == {
        n: e.parametrizations for n, e in CATALOG.items() if e.parametrizations}


@pytest.mark.parametrize("name", TESTED_CLASSES)
@eager_examples(ci=1, thorough=20)
@given(data=st.data())
def test_tree_map(name: str, data: st.DataObject) -> None:
    """After a tree_map update, every lazy value agrees with numpyro's class rebuilt from the
    same leaves."""
    spec = data.draw(spec_of(name, EAGER_DTYPES), label="distribution")
    with spec.x64_context():
        testing.check_tree_map(*pair(spec))


def test_every_property_has_a_test() -> None:
    """A property added to the registry without a test here would never run in CI."""
    missing = [p for p in testing.PROPERTIES if f"test_{p}" not in globals()]
    assert not missing, f"properties without a test in {__file__}: {missing}"
    assert len(testing.PROPERTIES) >= 15


def _upstream_shard_map_read(d: object, method: str) -> object:
    ds = [d] * NDEV
    return _transforms._shard_map_fn(NDEV)(testing.stack(ds), testing.stack([0.0] * NDEV), (),
                                           (method,))


UPSTREAM_READERS = {"shard_map": _upstream_shard_map_read}
"""property -> how it reads one method of numpyro's instance under its transformation."""


@pytest.mark.parametrize(("prop", "name", "method"), [
    (failure.prop, name, failure.method) for name, failure in upstream_failures()])
def test_upstream_failures_still_fail(prop: str, name: str, method: str) -> None:
    """Every ``upstream_failures`` entry of a catalog record still fails for numpyro's own
    class; when a JAX/numpyro release fixes it, this fails and the entry must go (the read
    is then checked)."""
    failure, = (f for f in entry_of(name).upstream_failures if (f.prop, f.method) == (prop, method))
    d = dict(catalog.all_builders())[name](nd)
    assert type(d).__module__.startswith("numpyro."), type(d)
    with pytest.raises(Exception, match=failure.match) as info:
        UPSTREAM_READERS[prop](d, method)
    print(f"{prop} {name}.{method} upstream: {type(info.value).__name__}: {info.value}"[:300])
