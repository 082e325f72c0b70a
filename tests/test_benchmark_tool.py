"""`stabledist.benchmark`, the tool users point at their own distributions and models: its
numbers make sense (a closed-over lazy value that numpyro recomputes in every call and
stabledist computes once), not only run. The guide's examples (docs/guides/benchmark.md, run by
tests/test_docs_examples.py) check a model without lazy values: the same program.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import jax.numpy as jnp
import numpy as np
import numpyro.distributions as nd
import pytest
from numpyro.distributions.util import lazy_property

import stabledist as sd
from stabledist import benchmark

D = 48


def _covariance(d: int = D) -> jnp.ndarray:
    a = np.random.default_rng(0).standard_normal((d, d)).astype(np.float32)
    return jnp.asarray(a @ a.T / d + np.eye(d, dtype=np.float32))


class Smoothed(sd.MultivariateNormal):
    """A user's class with a lazy value of its own, built on another lazy value."""

    @lazy_property
    def precision_diagonal(self) -> jnp.ndarray:
        return jnp.diagonal(jnp.asarray(self.precision_matrix))


def test_a_users_class_shows_numpyros_recomputation_and_stabledists_constant() -> None:
    report = benchmark.distribution(Smoothed, jnp.zeros(D), covariance_matrix=_covariance(),
                                    names=["precision_matrix", "precision_diagonal"], reps=3,
                                    rep_ms=5.0)
    reads = {r.name: r for r in report.reads}
    assert set(reads) == {"precision_matrix", "precision_diagonal"}
    for read in reads.values():  # numpyro computes it in the program, stabledist outside
        assert read.owner == "Smoothed"
        assert read.numpyro_equations and read.numpyro_equations > 0, read
        assert read.stabledist_equations == 0, read
        assert read.verdict().startswith("computed once by stabledist")
    cases = [r["case"] for r in report.rows]
    assert cases == [f"{n}: {s}" for n in ("precision_matrix", "precision_diagonal")
                     for s in ("first read", "cache hit", "per call")]
    per_call = report.row("precision_matrix: per call")
    assert per_call["ratio"] > 1, per_call  # a 48x48 inverse in every call against none
    text = report.table()
    assert "numpyro" in text and "Verdict:" in text and "precision_diagonal" in text


def test_bad_targets_are_named(model_file: Path) -> None:
    from stabledist.benchmark.__main__ import main

    with pytest.raises(TypeError, match="numpyro's class"):
        benchmark.distribution(nd.Normal(0.0, 1.0))
    with pytest.raises(ValueError, match="no lazy value named"):
        benchmark.distribution(sd.Normal(0.0, 1.0), names=["precision_matrix"])
    with pytest.raises(ValueError, match="top level of a file"):
        benchmark.model(lambda: None)
    with pytest.raises(FileNotFoundError, match="no such file"):
        benchmark.model("no/such/file.py:model")
    with pytest.raises(SystemExit, match="has no 'absent'"):
        main([f"{model_file}:absent"])
    with pytest.raises(SystemExit, match="expected a distribution, a model or a function"):
        main([f"{model_file}:D"])


MODELS = '''
import jax.numpy as jnp
import numpy as np
import numpyro

import stabledist as dist

D = 24
A = np.random.default_rng(0).standard_normal((D, D)).astype(np.float32)
PRIOR = dist.MultivariateNormal(jnp.zeros(D), covariance_matrix=A @ A.T / D + np.eye(D))
Y = jnp.ones((5, D))


def with_prior(y=Y):
    mu = numpyro.sample("mu", PRIOR)
    numpyro.factor("smooth", -0.5 * mu @ PRIOR.precision_matrix @ mu)
    with numpyro.plate("n", y.shape[0]):
        numpyro.sample("y", dist.Normal(mu, 1.0).to_event(1), obs=y)


def without_lazy_values(y=Y):
    mu = numpyro.sample("mu", dist.Normal(0.0, 1.0).expand([D]).to_event(1))
    with numpyro.plate("n", y.shape[0]):
        numpyro.sample("y", dist.Normal(mu, 1.0).to_event(1), obs=y)
'''


@pytest.fixture
def model_file(tmp_path: Path) -> Path:
    path = tmp_path / "users_model.py"
    path.write_text(MODELS)
    return path


@pytest.mark.integration
def test_the_command_on_a_users_model_file(model_file: Path, tmp_path: Path) -> None:
    """The model reads a global prior's precision matrix: numpyro's program computes it,
    stabledist's reads a constant."""
    out = tmp_path / "report.json"
    run = subprocess.run([sys.executable, "-m", "stabledist.benchmark",
                          f"{model_file}:with_prior", "--quick", "--processes", "2", "--reps", "2",
                          "--json", str(out)], capture_output=True, text=True, timeout=600,
                         check=False, cwd=tmp_path)
    assert run.returncode == 0, run.stderr
    assert "computed once by stabledist, in every call by numpyro" in run.stdout
    assert "process 4 of 4" in run.stderr  # the progress line
    data = json.loads(out.read_text())
    (read,) = data["reads"]
    assert (read["owner"], read["name"]) == ("MultivariateNormal", "precision_matrix")
    assert read["numpyro_equations"] > 0 and read["stabledist_equations"] == 0
    program = data["cases"][-1]["params"]["equations"]
    assert program["numpyro"] >= program["stabledist"] + read["numpyro_equations"]
    assert data["environment"]["backend"] == "cpu"


@pytest.mark.integration
def test_forked_processes_measure_the_same_program(model_file: Path) -> None:
    """``fork=True``: the processes forked from one per library after its import see the same
    reads and equations as new interpreters, time every phase but the import, and a child
    that fails is reported with its traceback."""
    forked = benchmark.model(f"{model_file}:with_prior", processes=2, reps=1, rep_ms=1.0,
                             fork=True, quiet=True)
    (read,) = forked.reads
    assert (read.name, read.stabledist_equations) == ("precision_matrix", 0)
    assert (read.numpyro_equations or 0) > 0
    assert [c.params["phase"] for c in forked.cases] == [
        "trace_s", "lower_s", "compile_s", "first_jit_s", "call_ns"]
    first_jit = forked.cases[3].samples["numpyro"][0]
    assert first_jit == pytest.approx(sum(c.samples["numpyro"][0] for c in forked.cases[:3]))
    assert all(len(s) == 2 and min(s) > 0 for c in forked.cases for s in c.samples.values())
    fresh = benchmark.model(f"{model_file}:with_prior", processes=2, reps=1, rep_ms=1.0,
                            quiet=True)
    assert fresh.cases[0].params["phase"] == "import_s"
    assert fresh.cases[-1].params["equations"] == forked.cases[-1].params["equations"]
    model_file.write_text(model_file.read_text() + "\ndef broken():\n    raise KeyError('x9')\n")
    with pytest.raises(RuntimeError, match=r"(?s)failed with numpyro.*KeyError: 'x9'"):
        benchmark.model(f"{model_file}:broken", processes=2, fork=True, quiet=True)
