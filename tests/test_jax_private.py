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
import pytest

from stabledist._src import jax_private

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
        "Adapt stabledist/_src/jax_private.py to this release."
    )


def test_no_other_module_imports_jax_private_names() -> None:
    """``jax._src`` appears in one module of stabledist: the one that lists each internal."""
    importers = []
    for path in sorted(PACKAGE.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            names = ([a.name for a in node.names] if isinstance(node, ast.Import)
                     else [node.module or ""] if isinstance(node, ast.ImportFrom) else [])
            if any(n == "jax._src" or n.startswith("jax._src.") for n in names):
                importers.append(path.relative_to(PACKAGE.parent).as_posix())
        if "jax._src" in path.read_text() and path.name != "jax_private.py":
            importers.append(f"{path.relative_to(PACKAGE.parent).as_posix()} (text)")
    assert sorted(set(importers)) == ["stabledist/_src/jax_private.py"], importers


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
_NO_HOISTING = {"trace_state", "eval_context", "ambient_mesh"}


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
