"""The public testing API: strategies, access plans, failure output, and ``check_stable`` on a
user's stable class (passes) and on broken ones (fails, saying why)."""

from __future__ import annotations

import dis
import functools
import os
import re
import subprocess
import sys
from pathlib import Path
from typing import ClassVar

import jax
import jax.numpy as jnp
import numpy as np
import numpyro.distributions as nd
import pytest
from helpers import BUILDERS, CLASS_NAMES
from hypothesis import Phase, given, settings
from hypothesis import strategies as st
from numpyro.distributions import constraints
from numpyro.distributions.util import lazy_property, promote_shapes

import stabledist
from stabledist import testing
from stabledist.testing import (
    StabilityError,
    _compare,
    _registry,
    _strategies,
    _twin,
    check_stable,
)
from stabledist.testing._catalog_entries import entry_of
from stabledist.testing._compare import COVERAGE

# ---------------------------------------------------------------------------------------------
# A user's distribution (module level, so that the hash-seed workers can import it).
# ---------------------------------------------------------------------------------------------


class ShiftedExponential(nd.Distribution):
    """A user's numpyro distribution with a lazy property, made stable below."""

    arg_constraints: ClassVar[dict] = {"rate": constraints.positive, "shift": constraints.real}
    reparametrized_params: ClassVar[list[str]] = ["rate", "shift"]

    def __init__(self, rate, shift=0.0, *, validate_args=None):
        self.rate, self.shift = promote_shapes(rate, shift)
        batch_shape = jax.lax.broadcast_shapes(jnp.shape(rate), jnp.shape(shift))
        super().__init__(batch_shape=batch_shape, validate_args=validate_args)

    @constraints.dependent_property(is_discrete=False, event_dim=0)
    def support(self):
        return constraints.greater_than(self.shift)

    @lazy_property
    def log_rate(self):
        return jnp.log(self.rate)

    def sample(self, key, sample_shape=()):
        shape = tuple(sample_shape) + self.batch_shape
        return self.shift + jax.random.exponential(key, shape) / self.rate

    def log_prob(self, value):
        return self.log_rate - self.rate * (value - self.shift)

    @property
    def mean(self):
        return self.shift + 1.0 / self.rate

    @property
    def variance(self):
        return 1.0 / self.rate**2


StableShiftedExponential = stabledist.make_stable(ShiftedExponential)


@stabledist.make_stable
class Bumpy(nd.Normal):
    """Made stable by decorator: the module attribute is the stable class (pickles)."""

    @lazy_property
    def bump(self):
        return jnp.sin(self.loc) * self.scale


def make_shifted() -> ShiftedExponential:
    return StableShiftedExponential(jnp.array([0.5, 2.0]), jnp.array(1.0), validate_args=True)


def make_bumpy() -> Bumpy:
    return Bumpy(jnp.array([0.0, 1.0, 2.0]), jnp.array(0.5), validate_args=True)


# Broken on purpose -----------------------------------------------------------------------------


@stabledist.make_stable
class HandCached(nd.Normal):
    """Caches by hand in ``__dict__`` (what numpyro's lazy_property does): ``vars()`` and
    the pytree change after ``log_prob``."""

    def log_prob(self, value):
        if "_precision" not in self.__dict__:
            self.__dict__["_precision"] = 1.0 / self.scale**2
        return -0.5 * self.__dict__["_precision"] * (value - self.loc) ** 2


_LEAKED: list[object] = []


@stabledist.make_stable
class Leaky(nd.Normal):
    """Remembers its last ``log_prob`` input in a global: a tracer escapes every trace."""

    def log_prob(self, value):
        _LEAKED.append(value)
        return super().log_prob(value)


_MEMO: dict[int, object] = {}


@stabledist.make_stable
class Memoized(nd.Normal):
    """Memoizes a derived value in a module-level dict, by instance id (issue 42): the dict
    keeps the tracer of every trace that read it."""

    @property
    def precision(self):
        if id(self) not in _MEMO:
            _MEMO[id(self)] = self.scale**-2
        return _MEMO[id(self)]

    @property
    def variance(self):
        return 1.0 / self.precision


def make_memoized() -> Memoized:
    return Memoized(jnp.zeros(2), jnp.ones(2))


def make_hand_cached() -> HandCached:
    return HandCached(jnp.zeros(2), jnp.ones(2))


def make_leaky() -> Leaky:
    return Leaky(jnp.zeros(2), jnp.ones(2))


def make_upstream_mvn() -> nd.MultivariateNormal:
    return nd.MultivariateNormal(jnp.zeros(3), scale_tril=jnp.eye(3))


# Users' classes in each documented style (docs/guides/own-distributions.md), each beside one
# with a planted stability bug. Module level: the hash-seed workers import them.


class NormalPrecision(stabledist.Distribution):
    """Style 1, a subclass of ``stabledist.Distribution``: the guide's class, verbatim."""

    arg_constraints: ClassVar[dict] = {"loc": constraints.real,
                                       "precision": constraints.positive}
    support = constraints.real
    reparametrized_params: ClassVar[list[str]] = ["loc", "precision"]

    def __init__(self, loc=0.0, precision=1.0, *, validate_args=None):
        self.loc, self.precision = promote_shapes(loc, precision)
        batch_shape = jax.lax.broadcast_shapes(jnp.shape(loc), jnp.shape(precision))
        super().__init__(batch_shape=batch_shape, validate_args=validate_args)

    @lazy_property
    def scale(self):
        return jax.lax.rsqrt(self.precision)

    def sample(self, key, sample_shape=()):
        eps = jax.random.normal(key, sample_shape + self.batch_shape)
        return self.loc + eps * self.scale

    def log_prob(self, value):
        return stabledist.Normal(self.loc, self.scale).log_prob(value)


class SloppyPrecision(stabledist.Distribution):
    """Style 1, planted bug: an attribute the constructor sets outside the field table, which
    every tree_unflatten (jit, vmap, scan) drops."""

    arg_constraints: ClassVar[dict] = {"loc": constraints.real,
                                       "precision": constraints.positive}
    support = constraints.real

    def __init__(self, loc=0.0, precision=1.0, *, validate_args=None):
        self.loc, self.precision = promote_shapes(loc, precision)
        self.log_precision = jnp.log(self.precision)  # the bug: not declared
        batch_shape = jax.lax.broadcast_shapes(jnp.shape(loc), jnp.shape(precision))
        super().__init__(batch_shape=batch_shape, validate_args=validate_args)

    def log_prob(self, value):
        precision, z = jnp.exp(self.log_precision), value - self.loc
        return 0.5 * (self.log_precision - jnp.log(2 * jnp.pi) - precision * z**2)


class MyNormal(stabledist.Normal):
    """Style 2, a subclass of a stable class, with one lazy property of its own."""

    @lazy_property
    def precision(self):
        return self.scale**-2


class Tempered(stabledist.Normal):
    """Style 2, overriding a method through ``super()``, with a parameter of its own."""

    arg_constraints: ClassVar[dict] = {**nd.Normal.arg_constraints,
                                       "temperature": constraints.positive}

    def __init__(self, loc=0.0, scale=1.0, temperature=2.0, *, validate_args=None):
        self.temperature = temperature
        super().__init__(loc, scale, validate_args=validate_args)

    def log_prob(self, value):
        return super().log_prob(value) / self.temperature


class ColdTempered(Tempered):
    """A user's class on a user's class: its twin's base is the twin of ``Tempered``."""

    def log_prob(self, value):
        return super().log_prob(value) * 0.5


class MemoNormal(stabledist.Normal):
    """Style 2, planted bug: ``log_prob`` caches a value by hand in ``__dict__``."""

    @lazy_property
    def precision(self):
        return self.scale**-2

    def log_prob(self, value):
        if "_half_log_precision" not in self.__dict__:
            self.__dict__["_half_log_precision"] = 0.5 * jnp.log(self.precision)
        return super().log_prob(value)


class Rate(nd.Distribution):
    """Style 3, a numpyro class (the guide's ``Upstream``), made stable below."""

    arg_constraints: ClassVar[dict] = {"rate": constraints.positive}
    support = constraints.positive

    def __init__(self, rate, *, validate_args=None):
        self.rate = rate
        super().__init__(jnp.shape(rate), validate_args=validate_args)

    @lazy_property
    def mean(self):
        return 1.0 / self.rate

    def sample(self, key, sample_shape=()):
        return jax.random.exponential(key, sample_shape + self.batch_shape) / self.rate

    def log_prob(self, value):
        return jnp.log(self.rate) - self.rate * value


StableRate = stabledist.make_stable(Rate)
_SEEN: list[object] = []


@stabledist.make_stable
class LeakyRate(Rate):
    """Style 3, planted bug: ``log_prob`` keeps its argument, so a tracer escapes ``jit``."""

    def log_prob(self, value):
        _SEEN.append(value)
        return super().log_prob(value)


class OldStyleNormal(stabledist.Normal):
    """Names its own class (``super(OldStyleNormal, self)``): the twin rebinds the name."""

    def __init__(self, loc=0.0, scale=1.0, *, validate_args=None):
        super(OldStyleNormal, self).__init__(loc, scale, validate_args=validate_args)  # noqa: UP008

    def log_prob(self, value):
        return super(OldStyleNormal, self).log_prob(value) - 1.0  # noqa: UP008


class _Meta(type(stabledist.Distribution)):
    """A metaclass of the user's own: no class on numpyro's base can have it."""


class WithMeta(stabledist.Normal, metaclass=_Meta):
    @lazy_property
    def precision(self):
        return self.scale**-2


class _Halved:
    """A descriptor of a kind the twin builder does not know."""

    def __init__(self, f):
        self.f = f

    def __get__(self, instance, owner=None):
        return self if instance is None else 0.5 * self.f(instance)


class HalvedVariance(stabledist.Normal):
    @_Halved
    def half_variance(self):
        return super().variance


def make_normal_precision() -> NormalPrecision:
    return NormalPrecision(jnp.zeros(3), jnp.array([1.0, 4.0, 0.25]))


def make_sloppy_precision() -> SloppyPrecision:
    return SloppyPrecision(jnp.zeros(2), jnp.array([1.0, 4.0]))


def make_my_normal() -> MyNormal:
    return MyNormal(jnp.zeros(2), jnp.array([0.5, 2.0]))


def make_tempered() -> Tempered:
    return Tempered(jnp.zeros(2), jnp.ones(2), 2.0)


def make_memo_normal() -> MemoNormal:
    return MemoNormal(jnp.zeros(2), jnp.ones(2))


def make_rate() -> Rate:
    return StableRate(jnp.array([1.0, 2.0]))


def make_leaky_rate() -> LeakyRate:
    return LeakyRate(jnp.array([1.0, 2.0]))


def make_with_meta() -> WithMeta:
    return WithMeta(jnp.zeros(2), jnp.ones(2))


class MyMVN(stabledist.MultivariateNormal):
    """Style 2 on a class with alternative parametrizations and lazy values of its own."""

    @lazy_property
    def log_det(self):
        return jnp.linalg.slogdet(self.covariance_matrix)[1]


def make_my_mvn() -> MyMVN:
    # through covariance_matrix=: numpyro keeps the given matrix, read back exactly
    return MyMVN(jnp.zeros(3), covariance_matrix=2.0 * jnp.eye(3))


def make_normal_of(n: int) -> stabledist.Normal:
    return stabledist.Normal(jnp.zeros(n), 1.0)


_SHARED = stabledist.Normal(jnp.zeros(2), 1.0)


def make_shared() -> stabledist.Normal:
    return _SHARED


# ---------------------------------------------------------------------------------------------
# The package surface.
# ---------------------------------------------------------------------------------------------


def test_public_names() -> None:
    for name in ("check_stable", "StabilityError", "specs", "distributions", "stacks",
                 "access_plans", "AccessPlan", "DistSpec", "constraint_values", "PROPERTIES"):
        assert getattr(testing, name) is not None, name
    assert testing.check_stable is check_stable
    assert issubclass(StabilityError, AssertionError)


def test_catalog_needs_no_hypothesis() -> None:
    """``stabledist.testing.catalog`` is importable without hypothesis (lazy re-exports)."""
    code = ("import sys, stabledist.testing.catalog; "
            "print('hypothesis' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True)
    assert out.stdout.strip() == "False"


NO_HYPOTHESIS = """
import sys
class Block:
    def find_spec(self, name, path=None, target=None):
        if name == "hypothesis" or name.startswith("hypothesis."):
            raise ModuleNotFoundError(f"No module named {name!r}", name=name)
sys.meta_path.insert(0, Block())
import jax.numpy as jnp
import stabledist
from stabledist.testing import PROPERTIES, check_jit, check_round_trip, catalog
check_jit(stabledist.Normal(jnp.zeros(2), 1.0))
check_round_trip(stabledist.Normal(jnp.zeros(2), 1.0))
assert "hypothesis" not in sys.modules and len(PROPERTIES) >= 15
try:
    from stabledist.testing import check_stable
except ImportError as e:
    print("ImportError:", e)
"""


def test_checks_work_without_hypothesis() -> None:
    """With hypothesis missing (an import blocker), the checks, the registry and the catalog
    import and run; ``check_stable`` raises an ImportError naming the extra to install."""
    out = subprocess.run([sys.executable, "-c", NO_HYPOTHESIS], capture_output=True, text=True,
                         env={**os.environ, "JAX_PLATFORMS": "cpu"})
    assert out.returncode == 0, out.stderr[-2000:]
    assert "ImportError: stabledist.testing.check_stable needs hypothesis" in out.stdout
    assert 'pip install "stabledist[testing]"' in out.stdout


def test_no_private_constraint_classes() -> None:
    """Constraint values come from numpyro's public API (biject_to, constraint objects and
    their attributes); no module of the testing package names a private constraint class."""
    root = Path(testing.__file__).parent
    hits = [f"{f.name}: {m}" for f in sorted(root.glob("*.py"))
            for m in re.findall(r"constraints\._[A-Za-z]+|\bC\._[A-Za-z]+", f.read_text())]
    assert hits == []


def test_a_property_that_checks_nothing_fails(monkeypatch: pytest.MonkeyPatch) -> None:
    """A registry entry whose runner returns without running its check is not a pass."""
    monkeypatch.setitem(testing.PROPERTIES, "noop",
                        _registry.Property("noop", "runs nothing", lambda x: None))
    with pytest.raises(StabilityError, match=r"\[noop\] ran no check on ShiftedExponential"):
        check_stable(make_shifted, properties=["noop"])


def test_every_class_has_a_draw_mode() -> None:
    """Each public class is drawn generically, with a hint, or from the catalog (with a
    documented reason) - never silently not at all."""
    modes = {name: _strategies.draw_mode(name) for name in CLASS_NAMES if name != "Distribution"}
    assert set(modes.values()) <= {"generic", "hinted", "catalog"}
    for name, mode in modes.items():
        if mode == "catalog":
            assert entry_of(name).catalog_only, name
    drawn = sum(m != "catalog" for m in modes.values())  # most come from arg_constraints
    assert drawn >= 0.9 * len(modes), (drawn, len(modes))


# ---------------------------------------------------------------------------------------------
# Strategies.
# ---------------------------------------------------------------------------------------------


@settings(max_examples=10)
@given(st.data())
def test_constraint_values_satisfy_constraints(data: st.DataObject) -> None:
    c = data.draw(st.sampled_from([
        constraints.real, constraints.positive, constraints.unit_interval, constraints.simplex,
        constraints.ordered_vector, constraints.corr_cholesky, constraints.corr_matrix,
        constraints.positive_definite, constraints.lower_cholesky, constraints.l1_ball,
        constraints.nonnegative_integer, constraints.boolean, constraints.circular,
        constraints.positive_definite_circulant_vector, constraints.greater_than(2.0),
        constraints.less_than(-1.0), constraints.independent(constraints.positive, 1),
    ]))
    batch = data.draw(st.sampled_from([(), (2,), (2, 1)]))
    value = data.draw(st.builds(lambda: None).flatmap(
        lambda _: st.composite(lambda draw: testing.constraint_values(draw, c, batch, 3))()
    ))
    assert value.shape[: len(batch)] == batch
    assert bool(np.all(np.asarray(c(jnp.asarray(value))))), (c, value)


@settings(max_examples=6)
@given(testing.specs(StableShiftedExponential, dtypes=st.just(np.float64)))
def test_float64_specs_build_float64_instances(spec: testing.DistSpec) -> None:
    """float64 parameters stay float64 under jax_enable_x64 (a user class, generic draw)."""
    assert spec.x64 and spec.mode == "generic"
    with spec.x64_context():
        d = spec.build()
        assert isinstance(d, StableShiftedExponential)
        # Python numbers and NumPy arrays as users pass them: float64 as JAX sees them
        assert {str(jnp.result_type(x)) for x in jax.tree_util.tree_leaves(d)} == {"float64"}
        assert d.log_prob(d.sample(jax.random.PRNGKey(0))).dtype == jnp.float64


@settings(max_examples=5)
@given(testing.stacks("MultivariateNormal", 3))
def test_stacks_share_structure(specs_: list[testing.DistSpec]) -> None:
    layouts = {_compare.layout(s.build()) for s in specs_}
    assert len(layouts) == 1


@settings(max_examples=5)
@given(st.data())
def test_access_plans_read_lazy_properties(data: st.DataObject) -> None:
    d = make_bumpy()
    plan = data.draw(testing.access_plans(d, max_steps=20))
    assert [type(s) for s in plan.steps] == [testing.Step] * len(plan.steps)
    outcomes = plan.run(d)
    assert len(outcomes) == len(plan.steps)
    assert "lazy" in {s.kind for s in testing.full_plan(d).steps}


def test_spec_builds_the_same_distribution_upstream() -> None:
    spec = testing.DistSpec("Normal", (("loc", np.zeros(2, np.float32)),
                                          ("scale", np.ones(2, np.float32))))
    ours, theirs = spec.build(), spec.build(nd)
    assert stabledist.is_stable(ours) and not stabledist.is_stable(theirs)
    assert type(theirs) is nd.Normal
    assert repr(spec) == "Normal(loc=[0., 0.]:float32, scale=[1., 1.]:float32)"


# ---------------------------------------------------------------------------------------------
# Failure output: class, parameters and access plan, after shrinking.
# ---------------------------------------------------------------------------------------------


def test_failure_prints_distribution_and_plan() -> None:
    # no explain phase: it re-runs the shrunk example ~100 times (8 of 15 s) to annotate
    # lines, which this test does not read; 300 examples: where the search reaches a plan with
    # log_prob depends on what the process imported before (100 missed it after the
    # benchmarks package), and the first failure ends the search
    @settings(max_examples=300, database=None, derandomize=True,
              phases=[p for p in Phase if p is not Phase.explain])
    @given(st.data())
    def property_on_broken_class(data: st.DataObject) -> None:
        spec = data.draw(testing.specs(HandCached), label="distribution")
        d = spec.build()
        plan = data.draw(testing.access_plans(d), label="access plan")
        testing.check_access_plan(d, plan)

    with pytest.raises(StabilityError) as info:
        property_on_broken_class()
    message = str(info.value)
    notes = "\n".join(getattr(info.value, "__notes__", []))
    assert "[access_plan] HandCached" in message and "vars() changed" in message
    assert "distribution: HandCached(.loc=" in message  # parameters by key path
    assert "_precision" in message
    # hypothesis prints the drawn spec and plan; shrunk to the one step that matters
    assert "Draw 1 (distribution): HandCached(loc=" in notes
    assert "Draw 2 (access plan): AccessPlan(d.log_prob())" in notes


# ---------------------------------------------------------------------------------------------
# check_stable.
# ---------------------------------------------------------------------------------------------


def test_check_stable_passes_on_a_user_class() -> None:
    report = check_stable(make_shifted, cycles=200)
    assert set(report.passed) == set(testing.PROPERTIES) - {"parametrizations"}
    assert report.skipped == {"parametrizations": "ShiftedExponential has fewer than two "
                                                  "alternative parametrizations"}
    assert COVERAGE.count("hash_seed") >= 1


def test_check_stable_passes_on_a_decorated_class_with_a_strategy() -> None:
    report = check_stable(
        testing.specs(Bumpy), max_examples=2, cycles=50,
        properties=[p for p in testing.PROPERTIES if p not in ("pmap", "shard_map")],
    )
    assert report.passed and min(report.passed.values()) >= 1, report


def test_check_stable_catches_hand_caching() -> None:
    with pytest.raises(StabilityError, match=r"(?s)access_plan:.*vars\(\) changed.*_precision"):
        check_stable(make_hand_cached, properties=["access_plan"])


def test_hand_caching_failure_names_the_fix() -> None:
    """The vars() failure says what to write instead, for each kind of class: a stable one
    (lazy_property), a numpyro class stabledist has not made stable (make_stable as well),
    numpyro's own (stabledist's class)."""
    with pytest.raises(StabilityError) as info:
        check_stable(make_hand_cached, properties=["access_plan"])
    assert re.search(r"new attributes: \['_precision'\]\n  fix: compute the value in a "
                     r"`lazy_property` \(numpyro's `numpyro.distributions.util.lazy_property`",
                     str(info.value)), str(info.value)
    assert "make_stable" not in str(info.value).split("fix:")[1]  # it is stable already
    with pytest.raises(StabilityError, match=r"fix: .*`lazy_property`.*; Rate is not stable: "
                                             r"wrap it, `Rate = stabledist.make_stable\(Rate\)`"):
        check_stable(lambda: Rate(jnp.ones(2)), properties=["access_plan"])
    with pytest.raises(StabilityError, match=r"fix: this is numpyro's own MultivariateNormal, "
                                             r".*`stabledist.MultivariateNormal\(\.\.\.\)`"):
        check_stable(make_upstream_mvn, properties=["access_plan"])


def test_leak_report_keeps_what_holds_the_tracer() -> None:
    """JAX names the holder deep in its text ("... is referred to by <module>._MEMO"): the
    report keeps that text whole, and says the holder first."""
    try:
        with pytest.raises(StabilityError) as info:
            check_stable(make_memoized, properties=["jit", "vmap"])
    finally:
        _MEMO.clear()
    message = str(info.value)
    for name in ("jit", "vmap"):
        report = message.split(f"{name}: [{name}]", 1)[1].split("\n\n", 1)[0]
        assert re.search(r"a tracer leaked, held by \S*\b_MEMO; ", report), report
        assert re.search(r"^    <dict \d+> is referred to by \S*\b_MEMO$", report, re.M), report


def test_check_stable_takes_one_property_as_a_string() -> None:
    report = check_stable(make_shifted, properties="round_trip")
    assert set(report.passed) == {"round_trip"} and not report.skipped


def test_check_stable_catches_a_leaked_tracer() -> None:
    with pytest.raises(StabilityError, match=r"(?s)jit:.*[Ll]eak"):
        check_stable(make_leaky, properties=["jit"])
    _LEAKED.clear()


def test_numpyros_side_is_not_run_once_ours_leaked() -> None:
    """Where stabledist's program leaked, the check fails whatever numpyro does, so numpyro's
    program is not run (JAX's report of a leak there walks the whole heap); otherwise both."""
    ran = []

    def theirs():
        ran.append(1)
        return 2

    def leaks():
        raise jax.errors.UnexpectedTracerError("Encountered an unexpected tracer")

    ours, skipped = _compare.attempt_both(leaks, theirs)
    assert isinstance(ours.error, jax.errors.UnexpectedTracerError) and not ran
    assert skipped is _compare.NOT_RUN and not skipped.ok
    ours, both = _compare.attempt_both(lambda: 1, theirs)
    assert (ours.value, both.value, ran) == (1, 2, [1])
    _, after_error = _compare.attempt_both(lambda: 1 / 0, theirs)
    assert after_error.value == 2 and ran == [1, 1]  # a failure that is no leak: numpyro decides


def test_check_stable_fails_on_upstream_numpyro() -> None:
    """A plain numpyro MultivariateNormal: reading ``covariance_matrix`` writes ``__dict__``,
    and its leaf order follows PYTHONHASHSEED (set-ordered fields)."""
    with pytest.raises(StabilityError) as info:
        check_stable(make_upstream_mvn, properties=["access_plan", "hash_seed"])
    message = str(info.value)
    assert "vars() changed" in message and "covariance_matrix" in message
    # whether this process's own (random) hash seed orders the leaves like the workers'
    # seeds 0-2 is chance, so the hash_seed property may or may not fail here
    assert "access_plan:" in message


def test_check_stable_rejects_unknown_properties() -> None:
    with pytest.raises(ValueError, match="unknown properties"):
        check_stable(make_shifted, properties=["jit", "nonsense"])


def test_check_stable_takes_a_factory_not_an_instance() -> None:
    with pytest.raises(TypeError, match=r"takes a factory, not an instance: pass "
                                        r"`lambda: Normal\(\.\.\.\)`"):
        check_stable(stabledist.Normal(0.3, 1.1))
    with pytest.raises(TypeError, match="zero-argument factory or a hypothesis strategy"):
        check_stable(3.0)
    with pytest.raises(TypeError, match=r"it is numpyro's Normal, not a stable one: build it "
                                        r"with stabledist .* `stabledist.stabilize\(\.\.\.\)`"):
        check_stable(nd.Normal(0.3, 1.1))


def test_check_stable_compares_python_float_parameters_as_jax_holds_them() -> None:
    """``0.3`` comes back from ``jit`` as ``float32(0.3)``: not a failure."""
    report = check_stable(lambda: stabledist.Normal(0.3, 1.1),
                          properties=["jit", "vmap", "control_flow", "round_trip"])
    assert set(report.passed) == {"jit", "vmap", "control_flow", "round_trip"}


# ---------------------------------------------------------------------------------------------
# check_stable on users' classes: every documented style passes, a planted bug fails with its
# line, and values are compared with the class's numpyro twin, never with its parent.
# ---------------------------------------------------------------------------------------------

ALWAYS = set(testing.PROPERTIES) - {"parametrizations", "pmap", "shard_map"}
FAILED = re.compile(r"^(\w+): \[\1\] ", re.MULTILINE)  # "name: [name] Class: what"


def _runs_everything(report: testing.StabilityReport, *,
                     left_out: frozenset[str] = frozenset()) -> None:
    """Every property ran but those that need devices, have nothing to do (one
    parametrization) or compare with a missing numpyro twin (``left_out``)."""
    assert set(report.passed) >= ALWAYS - left_out, report
    allowed = {"parametrizations", *left_out} | {p for p, why in report.skipped.items()
                                                 if "device" in why}
    assert set(report.skipped) <= allowed, report


@pytest.mark.parametrize(("make", "compared_with"), [
    (make_normal_precision, "its numpyro twin: NormalPrecision's own body on "
                            "numpyro.distributions.distribution.Distribution"),
    (make_my_normal, "its numpyro twin: MyNormal's own body on "
                     "numpyro.distributions.continuous.Normal"),
    (make_tempered, "its numpyro twin: Tempered's own body on "
                    "numpyro.distributions.continuous.Normal"),
    (make_rate, f"{__name__}.Rate"),
], ids=["Distribution-subclass", "stable-subclass", "stable-subclass-super", "make_stable"])
def test_check_stable_passes_on_each_documented_style(make, compared_with) -> None:
    report = check_stable(make, cycles=200)
    _runs_everything(report)
    assert report.compared_with == {type(make()).__name__: compared_with}
    assert f"compared with {compared_with}" in str(report)


@pytest.mark.parametrize(("make", "failed", "line"), [
    (make_sloppy_precision, {"round_trip"},
     "round_trip: [round_trip] SloppyPrecision: tree_unflatten drops attribute(s) "
     "['log_precision']: they are not pytree fields"),
    (make_memo_normal, {"access_plan", "closure"},  # closed over: its memo keeps a tracer
     "access_plan: [access_plan] MemoNormal: vars() changed after AccessPlan("),
    (make_leaky_rate, {"jit", "vmap", "pmap", "shard_map"},
     "jit: [jit] LeakyRate: values read inside jit: a tracer leaked"),
], ids=["Distribution-subclass", "stable-subclass", "make_stable"])
def test_check_stable_fails_a_planted_bug_in_each_style(make, failed, line) -> None:
    with pytest.raises(StabilityError) as info:
        check_stable(make, cycles=200)
    _SEEN.clear()
    message = str(info.value)
    assert line in message
    if jax.device_count() < 2:
        failed = failed - {"pmap", "shard_map"}
    assert set(FAILED.findall(message)) == failed, message


def test_a_factory_through_an_alternative_parametrization() -> None:
    """The twin gets the values the constructor was given (``covariance_matrix=``), which
    numpyro keeps in ``__dict__`` and stabledist in its cache: read back exactly on both
    sides, not recomputed from ``scale_tril`` on numpyro's (one float32 ulp away)."""
    twin = testing.destabilize(make_my_mvn())
    assert jnp.array_equal(vars(twin)["covariance_matrix"], 2.0 * jnp.eye(3))
    report = check_stable(make_my_mvn, cycles=200)
    _runs_everything(report)
    assert report.passed["parametrizations"] == 1


def test_the_twin_is_the_class_body_on_numpyros_base() -> None:
    """``destabilize`` gives what numpyro computes for the class: its own body (lazy
    properties as numpyro's, ``super()`` and the class's name rebound), not its parent."""
    d = make_my_normal()
    twin = testing.destabilize(d)
    assert type(twin).__bases__ == (nd.Normal,) and not stabledist.is_stable(twin)
    prop = vars(type(twin))["precision"]
    assert isinstance(prop, lazy_property) and not isinstance(prop, stabledist.cached_lazy_property)
    assert jnp.array_equal(twin.precision, d.precision)
    assert "precision" in vars(twin) and "precision" not in vars(d)  # numpyro's caching
    hot, x = make_tempered(), jnp.array([0.5, -1.0])
    want = nd.Normal(0.0, 1.0).log_prob(x) / 2.0
    assert jnp.allclose(testing.destabilize(hot).log_prob(x), want)
    assert jnp.allclose(hot.log_prob(x), want)
    cold = ColdTempered(jnp.zeros(2), jnp.ones(2), 2.0)
    cold_twin = testing.destabilize(cold)
    assert type(cold_twin).__bases__ == (type(testing.destabilize(hot)),)
    assert jnp.allclose(cold_twin.log_prob(x), want * 0.5)
    assert jnp.allclose(cold.log_prob(x), want * 0.5)
    assert type(testing.destabilize(make_rate())) is Rate  # make_stable: the wrapped class
    assert type(testing.destabilize(stabledist.Normal(0.0, 1.0))) is nd.Normal
    old_style = _twin.numpyro_twin(OldStyleNormal)(jnp.zeros(2), 1.0)  # its constructor runs
    assert not stabledist.is_stable(old_style)
    assert jnp.array_equal(old_style.log_prob(x), OldStyleNormal(jnp.zeros(2), 1.0).log_prob(x))
    assert globals()["OldStyleNormal"] is OldStyleNormal  # the module itself is untouched


def test_a_class_without_a_twin_is_checked_without_numpyro() -> None:
    """A class whose body cannot be put on numpyro's base: every stability property runs
    against a fresh instance of its own, and the report says once why numpyro is left out."""
    report = check_stable(make_with_meta, cycles=200)
    _runs_everything(report, left_out=frozenset({"upstream"}))
    assert "no numpyro twin" in report.skipped["upstream"]
    assert report.compared_with["WithMeta"].startswith(
        "a fresh stabledist instance's own values: the numpyro comparisons are left out")
    assert "own metaclass (_Meta)" in report.compared_with["WithMeta"]
    assert str(report).count("are left out") == 1
    twin, why = _twin.twin_or_reason(HalvedVariance)
    assert twin is None
    assert "HalvedVariance.half_variance is a _Halved whose function" in why


def test_check_stable_draws_a_users_class_and_builds_its_twin() -> None:
    """Drawn specs build the numpyro side through the twin's own constructor."""
    props = ["access_plan", "jit", "upstream", "hash_seed"]
    report = check_stable(testing.specs(Tempered), max_examples=2, cycles=50, properties=props)
    assert set(report.passed) == set(props) and min(report.passed.values()) >= 1, report
    assert report.compared_with["Tempered"].startswith("its numpyro twin: Tempered's own body")


# ---------------------------------------------------------------------------------------------
# What check_stable says when it is given the wrong thing: once, with what to do.
# ---------------------------------------------------------------------------------------------


def test_a_factory_that_needs_arguments_is_refused_once() -> None:
    with pytest.raises(TypeError) as info:
        check_stable(make_normal_of)
    message = str(info.value)
    assert "calls the factory without arguments, but make_normal_of requires 'n'" in message
    assert "functools.partial(make_normal_of, n=...)" in message
    assert message.count("requires") == 1
    report = check_stable(functools.partial(make_normal_of, n=2),
                          properties=["round_trip", "hash_seed"])
    assert set(report.passed) == {"round_trip", "hash_seed"}


def test_a_factory_that_returns_one_shared_object_is_refused() -> None:
    with pytest.raises(TypeError, match=r"make_shared\(\) returned the same object on two "
                                        r"calls; .* need a new instance on every call"):
        check_stable(make_shared)
    with pytest.raises(StabilityError, match=r"the instance the factory returned is still alive "
                                             r"after the check dropped it: something else "
                                             r"keeps it"):
        testing.check_release(make_shared, cycles=20)


def test_a_factory_that_raises_or_returns_something_else() -> None:
    with pytest.raises(ValueError, match="invalid scale") as info:
        check_stable(lambda: stabledist.Normal(0.0, -1.0, validate_args=True))
    notes = getattr(info.value, "__notes__", [])
    assert len(notes) == 1 and "raised this before any property ran" in notes[0]
    with pytest.raises(TypeError, match="returned a float, not a distribution"):
        check_stable(lambda: 3.0)


MAIN_SCRIPT = """
import jax.numpy as jnp
import stabledist
from stabledist.testing import StabilityError, check_stable

class MainNormal(stabledist.Normal):
    pass

def make_main_normal():
    return MainNormal(jnp.zeros(2), 1.0)

def make_normal():  # in __main__ too, but its class imports anywhere: the instance is sent
    return stabledist.Normal(jnp.zeros(2), 1.0)

print("normal:", check_stable(make_normal, properties=["hash_seed"]).passed)
try:
    check_stable(make_main_normal, properties=["hash_seed"])
except StabilityError as e:
    print("main:", e)
"""


def test_a_class_defined_in_main_says_what_to_do(tmp_path: Path) -> None:
    script = tmp_path / "script.py"
    script.write_text(MAIN_SCRIPT)
    env = {k: v for k, v in os.environ.items() if k != "XLA_FLAGS"}
    out = subprocess.run([sys.executable, str(script)], capture_output=True, text=True,
                         env={**env, "JAX_PLATFORMS": "cpu"}, timeout=300)
    assert out.returncode == 0, out.stderr[-2000:]
    assert "normal: {'hash_seed': 1}" in out.stdout
    assert ("make_main_normal and MainNormal are defined in __main__ (the script being run), "
            "which the worker processes (fresh Python processes) cannot import: move the "
            "class and its factory into a module") in out.stdout
    assert "Traceback" not in out.stdout


def test_a_numpyro_built_distribution_points_to_stabilize() -> None:
    """numpyro's own MultivariateNormal: numpyro's failures, each a clear line (threads no
    longer crashes comparing arrays), and one note on how to check stabledist's."""
    with pytest.raises(StabilityError) as info:
        check_stable(make_upstream_mvn, properties=["threads", "access_plan"])
    message = str(info.value)
    assert "truth value" not in message and "threads: ValueError" not in message
    assert ("note: make_upstream_mvn() returns numpyro's own MultivariateNormal, which is not "
            "a stable distribution") in message
    assert message.count("stabledist.stabilize(") == 1
    assert "access_plan: [access_plan] MultivariateNormal: vars() changed" in message
    report = check_stable(lambda: nd.Normal(0.0, 1.0), properties=["round_trip"])
    assert report.passed == {"round_trip": 1}  # numpyro passes this one: the note says so
    assert report.notes == ["note: <lambda>() returns numpyro's own Normal, which is not a "
                            "stable distribution, so this checked numpyro's; to check "
                            "stabledist's, build it with stabledist (`stabledist.Normal(...)`) "
                            "or return `stabledist.stabilize(...)` of it"]
    assert str(report).count("stabledist.stabilize(") == 1


def test_failure_names_the_value_and_the_difference() -> None:
    with pytest.raises(StabilityError) as info:
        testing.check_upstream(OffByOne(jnp.zeros(2), jnp.ones(2)),
                               nd.Normal(jnp.zeros(2), jnp.ones(2)), jax.random.PRNGKey(0))
    message = str(info.value)
    assert "variance differs (largest difference 1)" in message
    assert len(message.splitlines()) <= 30
    assert type(info.value).__module__ == "stabledist.testing"
    assert testing.StabilityReport.__module__ == "stabledist.testing"


def test_coverage_counts_classes() -> None:
    cov = _compare.Coverage()
    cov.record("jit", "A")
    cov.record("jit", "A")
    cov.record("jit", make_bumpy())
    assert cov.count("jit") == 2 and cov.examples["jit"] == 3 and cov.count("vmap") == 0
    assert "jit" in cov.table()


def _far_tail_truncated_normals() -> list[object]:
    """Found by the thorough profile: a normal truncated ~4-5 scale units from its mean; in
    float32 its compiled values differ from op-by-op ones by ~4e-4 (relative)."""
    def build(loc: float, scale: float, low: float, high: float) -> object:
        f32 = np.float32
        base = stabledist.Normal(jnp.full(2, loc, f32), jnp.asarray(scale, f32))
        return stabledist.TwoSidedTruncatedDistribution(
            base, low=jnp.full(2, low, f32), high=jnp.full(2, high, f32), validate_args=True
        )

    return [build(0.0, 1.0, 0.0, 1.0)] * 3 + [build(-2.6717, 0.75, 0.1875, 1.1875)]


def test_traced_values_are_numpyros_through_the_same_program() -> None:
    """Far-tail truncated normals through shard_map: compiled float32 arithmetic departs from
    the eager values there, but numpyro's class through the same program gives the same bits,
    which is what the check compares."""
    ds = _far_tail_truncated_normals()
    testing.check_shard_map(ds, jax.random.PRNGKey(0), traced=_compare.TRACED_METHODS)


@stabledist.make_stable
class OffByOne(nd.Normal):
    """Its variance differs from its upstream class's (a stand-in for a stable class whose
    numbers drift from numpyro's)."""

    @property
    def variance(self):
        return super().variance + (1.0 if stabledist.is_stable(self) else 0.0)


def test_traced_values_that_differ_from_numpyros_fail() -> None:
    with pytest.raises(StabilityError, match=r"\[jit\] OffByOne: values read inside jit"):
        testing.check_jit(OffByOne(jnp.zeros(2), jnp.ones(2)))


def test_raising_where_numpyro_returns_fails() -> None:
    """The issue's program: a validated support with Python-float bounds meets traced values
    only where validate_args survives the round trip; numpyro drops the class default."""
    d = stabledist.Uniform(0.0, 1.0, validate_args=True)
    ours = _compare.Outcome(error=TypeError("planted"))
    with pytest.raises(StabilityError, match="stabledist raises TypeError: planted where numpyro "
                                             "returns"):
        _compare.same_outcome("jit", d, "log_prob", ours, _compare.Outcome(0.0))
    assert not _compare.same_outcome("jit", d, "log_prob", ours,
                                     _compare.Outcome(error=TypeError("also")))
    with pytest.raises(StabilityError, match="stabledist returns where numpyro raises"):
        _compare.same_outcome("jit", d, "log_prob", _compare.Outcome(0.0),
                              _compare.Outcome(error=TypeError("numpyro")))


# ---------------------------------------------------------------------------------------------
# The catalog (formerly the unrun script tests/_catalog_selfcheck.py).
# ---------------------------------------------------------------------------------------------

# Globals a builder may load: array helpers only, never a distribution class or numpyro itself,
# so that one builder builds the numpyro instance or the stable one from its module argument.
ALLOWED_GLOBALS = {"V", "_a", "_i", "_cov2", "_cov3", "_corr3", "_ring_adjacency", "_ou_sde",
                   "jnp", "np"}


def test_catalog_covers_every_public_name() -> None:
    classes, factories = testing.catalog.public_names(nd)
    covered, excluded = set(testing.catalog.EXAMPLES), set(testing.catalog.EXCLUDED)
    assert not covered & excluded
    assert covered | excluded == set(classes) | set(factories)
    assert set(testing.catalog.VARIANTS) <= covered
    for bad in ("Distribution", "NoSuchDistribution"):
        with pytest.raises(KeyError, match=bad):
            testing.catalog.example(bad, nd)


def test_catalog_builders_build_through_their_module_argument() -> None:
    """Every builder loads only plain-array helpers as globals, so one builder gives the numpyro
    instance or the stable one with identical parameters (their sample/log_prob agreement and
    validation are checked by tests/test_numbers.py and tests/test_api.py on every builder)."""
    assert len(BUILDERS) > 100
    for ident, builder in BUILDERS:
        loaded = {i.argval for i in dis.get_instructions(builder) if i.opname == "LOAD_GLOBAL"}
        assert loaded <= ALLOWED_GLOBALS, (ident, sorted(loaded - ALLOWED_GLOBALS))


class _Between(stabledist.Distribution):
    """A user's class with a parameter whose constraint depends on another."""

    arg_constraints: ClassVar = {"low": constraints.real, "high": constraints.dependent}
    support = constraints.real

    def __init__(self, low, high, width, validate_args=None) -> None:
        self.low, self.high = low, high  # width: an argument without constraint
        super().__init__(jnp.shape(low), validate_args=validate_args)


@pytest.mark.parametrize("given_", [{"width": 1.0}, {"high": 2.0}], ids=["high", "width"])
def test_specs_name_the_class_and_parameter_they_cannot_draw(given_: dict) -> None:
    """A dependent constraint and no constraint at all get the same kind of error: the class,
    the parameter and the ``params={...}`` to pass, nothing internal."""
    missing = "high" if "width" in given_ else "width"

    @settings(max_examples=1, database=None)
    @given(testing.specs(_Between, params=given_))
    def draw(spec: testing.DistSpec) -> None:
        spec.build()

    with pytest.raises(TypeError) as error:
        draw()
    text = str(error.value)
    assert f"_Between({missing}=...)" in text and f"params={{'{missing}': " in text, text
    assert "hint" not in text, text
