"""JAX's private internals (`stabledist._src.jax_private`): one test per internal that fails,
naming it, when a JAX release changes it; each fallback gives numpyro's numbers with one
warning; and no other module of stabledist reaches into ``jax._src``."""

from __future__ import annotations

import ast
import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np
import numpyro.distributions as nd
import pytest

import stabledist as sd
from stabledist._src import jax_private
from stabledist._src.lazy import hoisting

PACKAGE = Path(__file__).resolve().parent.parent / "stabledist"


@pytest.mark.parametrize("name", sorted(jax_private.INTERNALS))
def test_internal_works_with_this_jax(name: str) -> None:
    """Fails when a JAX release moved or changed an internal: the message names it, says what
    stabledist now does without it, and where to look."""
    internal = jax_private.INTERNALS[name]
    missing = jax_private.probe_all()
    if jax_private._JAX_VERSION < internal.since:  # an older supported release lacks it
        assert name in missing, f"{internal.uses} exists before jax {internal.since}: update"
        return
    assert name not in missing, (
        f"JAX internal {internal.uses!r} ({internal.purpose}) is missing or changed in jax "
        f"{jax.__version__}: {missing[name]}. stabledist falls back: {internal.fallback}. "
        "Adapt stabledist/_src/jax_private/ to this release."
    )


def test_no_other_module_imports_jax_private_names() -> None:
    """``jax._src`` appears in one group of stabledist: the one that lists each internal."""
    importers = []
    for path in sorted(PACKAGE.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            names = ([a.name for a in node.names] if isinstance(node, ast.Import)
                     else [node.module or ""] if isinstance(node, ast.ImportFrom) else [])
            if any(n == "jax._src" or n.startswith("jax._src.") for n in names):
                importers.append(path.relative_to(PACKAGE.parent).as_posix())
        if "jax._src" in path.read_text() and path.parent.name != "jax_private":
            importers.append(f"{path.relative_to(PACKAGE.parent).as_posix()} (text)")
    assert {Path(p).parent.name for p in importers} == {"jax_private"}, importers


def test_first_read_in_a_fresh_process_stages_nothing_extra() -> None:
    """The internals probed at first use (inside the user's trace) add no equation to it."""
    script = """
        import jax, jax.numpy as jnp
        import stabledist as sd
        prior = sd.MultivariateNormal(jnp.zeros(3), covariance_matrix=2.0 * jnp.eye(3))
        jaxpr = jax.make_jaxpr(lambda x: prior.precision_matrix @ x)(jnp.ones(3))
        print([e.primitive.name for e in jaxpr.eqns])
    """
    out = subprocess.run([sys.executable, "-c", textwrap.dedent(script)], capture_output=True,
                         text=True, timeout=300, check=True).stdout
    assert out.split() == ["['dot_general']"], out


# A real program, run with each internal turned off: numpyro's numbers, one warning.
_PROGRAM = """
import json, warnings
with warnings.catch_warnings(record=True) as caught:
    warnings.simplefilter("always")
    import jax, jax.numpy as jnp
    import numpyro, numpyro.distributions as nd
    import stabledist as sd
    from stabledist import handlers
    from stabledist._src.jax_private import JaxInternalsWarning

    def program(m):
        prior = m.MultivariateNormal(jnp.zeros(3), covariance_matrix=2.0 * jnp.eye(3))
        trunc = m.TruncatedNormal(0.5, 2.0, low=0.0, high=3.0)
        x = jnp.linspace(0.1, 1.0, 3)
        energy = jax.jit(lambda x: prior.log_prob(x) + trunc.log_prob(x).sum())
        grads = jax.grad(lambda x: trunc.log_prob(x).sum())(x)
        batched = jax.vmap(lambda v: prior.log_prob(v))(jnp.stack([x, 2 * x]))
        steps = jax.lax.scan(lambda c, _: (c + prior.precision_matrix @ c, None), x,
                             length=2)[0]
        return [energy(x), energy(2 * x), grads, batched, steps]

    ours, theirs = program(sd), program(nd)
    h = handlers.seed(rng_seed=0)
    draws = []
    for _ in range(2):
        with h:
            draws.append(float(numpyro.sample("x", sd.Normal())))
    traced = jax.jit(lambda: handlers.seed(lambda: numpyro.sample("x", sd.Normal()), 1)())()
    nested = jax.jit(lambda k: jnp.stack([handlers.seed(lambda: numpyro.sample(
        "y", sd.Normal()), k)() for _ in range(2)]))(jax.random.key(2))
    prior = sd.MultivariateNormal(jnp.zeros(3), covariance_matrix=2.0 * jnp.eye(3))
    eqns = len(jax.make_jaxpr(lambda x: prior.precision_matrix @ x)(jnp.ones(3)).eqns)
ours_warnings = [str(w.message) for w in caught if issubclass(w.category, JaxInternalsWarning)]
print(json.dumps({
    "close": [bool(jnp.allclose(a, b, rtol=1e-5, atol=1e-6)) for a, b in zip(ours, theirs)],
    "warnings": ours_warnings, "draws": draws, "eqns": eqns,
    "traced": bool(jnp.isfinite(traced)), "nested": bool(nested[0] == nested[1]),
}))
"""

# the internals without which nothing is hoisted (a closed-over precision matrix is then
# computed in the trace: numpyro's program)
_NO_HOISTING = {"trace_state", "eval_context", "ambient_mesh", "equation_fields"}


def test_each_fallback_gives_numpyros_numbers_with_one_warning() -> None:
    """With each internal turned off (as a JAX release without it would leave stabledist):
    ``import stabledist`` works, one warning names the internal, a program of jit, grad, vmap,
    scan and seed handlers gives numpyro's numbers, and hoisting is off exactly where the
    internal is one it needs. The processes run side by side."""
    runs = {name: subprocess.Popen(
        [sys.executable, "-c", _PROGRAM], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
        text=True, env={**os.environ, "STABLEDIST_JAX_INTERNALS_OFF": name})
        for name in sorted(jax_private.INTERNALS)}
    for name, run in runs.items():
        out, err = run.communicate(timeout=300)
        assert run.returncode == 0, f"{name} turned off: {err[-3000:]}"
        result = json.loads(out.strip().splitlines()[-1])
        assert all(result["close"]), (name, result["close"])
        assert len(result["warnings"]) == 1, (name, result["warnings"])
        assert jax_private.INTERNALS[name].uses in result["warnings"][0]
        assert result["draws"][0] != result["draws"][1], name  # blocks in sequence continue
        assert result["traced"] and result["nested"], name
        assert (result["eqns"] > 1) == (name in _NO_HOISTING), (name, result["eqns"])


def test_the_eager_test_reads_jaxs_own_state_on_supported_releases() -> None:
    """From jax 0.8 on, the fast eager test of every first read compares jax's own state
    objects by identity; a release that moves them fails here, before users pay for it (every
    first read would ask jax's two Python properties). Either way the test agrees with jax's."""
    from jax._src import core

    strong, eval_trace, axis, top_axis_env = jax_private.top_level_state()
    if jax.__version_info__ >= (0, 8):
        assert strong is core.trace_state_strong_ref and eval_trace is core.eval_trace
        assert axis is core.axis_env_state and top_axis_env is core.top_axis_env
    else:  # jax 0.7 (with numpyro 0.21) keeps it elsewhere: always the general path
        assert isinstance(strong, jax_private._NeverTopLevel)
    seen: list[tuple[bool, bool]] = []

    def probe(x: jax.Array) -> jax.Array:
        seen.append((jax_private.is_top_level(), core.trace_ctx.is_top_level()))
        return x

    probe(jnp.ones(()))
    jax.jit(probe)(jnp.ones(()))
    jax.vmap(probe)(jnp.ones(2))
    assert seen == [(True, True), (False, False), (False, False)]


# --- the equation fields hoisting reads (jax_private.equation_view, program_view) ------------

# attributes of JAX's private objects (equations, a trace's frame, tracers, programs) that only
# jax_private may read
_PRIVATE_FIELDS = {"primitive", "params", "invars", "outvars", "effects", "eqns", "jaxpr",
                   "aval", "in_tracers", "tracing_eqns", "constvar_to_val", "frame", "_trace",
                   "parent_trace"}


def test_no_other_core_module_reads_jaxs_private_fields() -> None:
    """An equation's, a frame's or a program's fields are read in jax_private alone, where
    the probe ``equation_fields`` (or ``equation_recording``) checks each of them: a release
    that renames one turns hoisting off instead of failing a user's first read."""
    readers = []
    for path in sorted((PACKAGE / "_src").rglob("*.py")):
        if path.parent.name == "jax_private":
            continue
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.Attribute) and node.attr in _PRIVATE_FIELDS:
                readers.append(f"{path.relative_to(PACKAGE.parent)}:{node.lineno} .{node.attr}")
    assert readers == [], readers


def _sample(x: jax.Array) -> tuple[jax.Array, jax.Array]:
    """Heavy, elementwise, a sub-jaxpr and an effect: every field hoisting reads."""
    y = jax.lax.dot(jax.lax.sin(x), x)
    z = jax.lax.scan(lambda c, _: (jax.lax.cumsum(c * c), None), x, length=2)[0]
    jax.debug.callback(lambda: None)
    return y, z


_SAMPLE_NAMES = ["sin", "dot_general", "scan", "debug_callback"]


def _check_sample_views(eqns: list) -> None:
    views = [jax_private.equation_view(e) for e in eqns]
    assert [v.name for v in views] == _SAMPLE_NAMES
    assert [v.out_shapes for v in views] == [((3,),), ((),), ((3,),), ()]
    assert [str(a) for a in views[1].in_avals] == ["float32[3]", "float32[3]"]
    assert "dimension_numbers" in views[1].parameters and views[2].parameters["length"] == 2
    assert [v.effectful for v in views] == [False, False, False, True]
    assert [len(v.inner) for v in views] == [0, 0, 1, 0]
    inner = [jax_private.equation_view(e) for e in views[2].inner[0]]
    assert [v.name for v in inner] == ["mul", "cumsum"]
    assert inner[1].out_shapes == ((3,),)


def test_equation_view_of_recorded_equations() -> None:
    """What a trace recorded reads as what hoisting's decision needs: the primitive's name
    (`HEAVY_PRIMITIVES`), parameters and sub-jaxprs (a scan's body is searched too), input
    types (the op-by-op count), output shapes (the largest intermediate), effects (effectful
    equations are never taken back out)."""
    checked: list[bool] = []

    def f(x: jax.Array) -> tuple[jax.Array, jax.Array]:
        recording = jax_private.start_recording(jax_private.current_trace())
        assert recording is not None
        out = _sample(x)
        # read while the trace lives: the equations hold its tracers
        _check_sample_views(jax_private.recorded_equations(recording))
        checked.append(True)
        return out

    with jax.check_tracer_leaks():
        jax.make_jaxpr(f)(jax.ShapeDtypeStruct((3,), np.float32))
    assert checked == [True]


def test_equation_view_and_program_view_of_an_abstract_trace() -> None:
    """An abstract trace (`hoisting.decide_abstractly`) reads the same way, and its program
    gives the input and output shapes the decision compares intermediates with."""
    program = jax_private.program_view(
        jax.make_jaxpr(_sample)(jax.ShapeDtypeStruct((3,), np.float32)))
    assert program.in_shapes == ((3,),) and program.out_shapes == ((), (3,))
    _check_sample_views(program.equations)
    scalar = jax_private.program_view(jax.make_jaxpr(lambda a, b: (a * b, 2.0))(
        jnp.ones((2, 3)), 1.0))
    assert scalar.in_shapes == ((2, 3), ()) and scalar.out_shapes == ((2, 3), ())


class _Renamed:
    """An equation as a future JAX might give it: ``.effects`` under another name."""

    def __init__(self, eqn: object) -> None:
        self._eqn = eqn

    def __getattr__(self, name: str) -> object:
        if name == "effects":
            raise AttributeError(f"{type(self._eqn).__name__!r} object has no attribute 'effects'")
        return getattr(self._eqn, name)


def _programs() -> list[jax.Array]:
    """A program whose values, read from closed-over priors, are hoisted where JAX allows."""
    out = []
    for m in (sd, nd):
        prior = m.MultivariateNormal(jnp.zeros(3), covariance_matrix=2.0 * jnp.eye(3))
        x = jnp.linspace(0.1, 1.0, 3)
        out.append(jax.jit(lambda x, p=prior: p.log_prob(x) + (p.precision_matrix @ x).sum())(x))
    return out


@pytest.fixture
def changed_equation_fields(monkeypatch: pytest.MonkeyPatch):
    """The probe ``equation_fields`` run again on equations that lack ``.effects``."""
    real = jax_private.equation_view
    monkeypatch.setattr(jax_private, "equation_view", lambda eqn: real(_Renamed(eqn)))
    jax_private._equations_readable.cache_clear()
    try:
        yield
    finally:
        monkeypatch.undo()
        jax_private._equations_readable.cache_clear()
        jax_private._missing.pop("equation_fields", None)
        assert jax_private.hoisting_available()


@pytest.mark.usefixtures("changed_equation_fields")
def test_a_changed_equation_field_turns_hoisting_off() -> None:
    """A JAX whose equations lack a field hoisting reads: the first read under a trace
    probes them, warns once, and computes the value in the trace as numpyro does (its
    numbers, no exception); `missing` says what the probe met."""
    with pytest.warns(jax_private.JaxInternalsWarning, match="equation") as caught:
        ours, theirs = _programs()
        prior = sd.MultivariateNormal(jnp.zeros(3), covariance_matrix=2.0 * jnp.eye(3))
        jaxpr = jax.make_jaxpr(lambda x: prior.precision_matrix @ x)(jnp.ones(3))
    assert len([w for w in caught if w.category is jax_private.JaxInternalsWarning]) == 1
    assert not jax_private.hoisting_available()
    assert "AttributeError" in jax_private.missing()["equation_fields"]
    assert len(jaxpr.eqns) > 1  # not hoisted: computed in the trace
    np.testing.assert_allclose(ours, theirs, rtol=1e-6)
    # the test oracle's question gets the same answer, whatever was memoized before
    compute = nd.MultivariateNormal.precision_matrix.wrapped
    leaves, treedef = jax.tree_util.tree_flatten(prior)
    assert hoisting.decide(prior, "precision_matrix", compute, leaves, treedef).mode == "trace"
