"""The public testing API: strategies, access plans, failure output, and ``check_stable`` on a
user's stable class (passes) and on broken ones (fails, saying why)."""

from __future__ import annotations

import dis
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
    check_stable,
)
from stabledist.testing._compare import COVERAGE
from stabledist.testing._hints import CATALOG_ONLY

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


def make_hand_cached() -> HandCached:
    return HandCached(jnp.zeros(2), jnp.ones(2))


def make_leaky() -> Leaky:
    return Leaky(jnp.zeros(2), jnp.ones(2))


def make_upstream_mvn() -> nd.MultivariateNormal:
    return nd.MultivariateNormal(jnp.zeros(3), scale_tril=jnp.eye(3))


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
            assert CATALOG_ONLY[name], name
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
    # lines, which this test does not read
    @settings(max_examples=100, database=None, derandomize=True,
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


def test_check_stable_catches_a_leaked_tracer() -> None:
    with pytest.raises(StabilityError, match=r"(?s)jit:.*[Ll]eak"):
        check_stable(make_leaky, properties=["jit"])
    _LEAKED.clear()


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


def test_check_stable_compares_python_float_parameters_as_jax_holds_them() -> None:
    """``0.3`` comes back from ``jit`` as ``float32(0.3)``: not a failure."""
    report = check_stable(lambda: stabledist.Normal(0.3, 1.1),
                          properties=["jit", "vmap", "control_flow", "round_trip"])
    assert set(report.passed) == {"jit", "vmap", "control_flow", "round_trip"}


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
