"""The package a user installs works: `python -m build` makes a wheel and an sdist, and the
wheel, installed into a fresh venv outside the repository, runs a small model.

This catches what the editable install of the test suite hides: a module or data file missing
from the wheel (the stubs, py.typed), an import-time dependency not declared in pyproject.toml
(hypothesis is only in the `testing` extra), a wrong Python requirement.
"""

from __future__ import annotations

import subprocess
import sys
import tarfile
import textwrap
import venv
import zipfile
from pathlib import Path

import pytest

# starts fresh processes or environments: `make test-integration` (CI), not `make test`
pytestmark = pytest.mark.integration

ROOT = Path(__file__).resolve().parent.parent

MODEL = textwrap.dedent(
    """
    import pathlib, sys
    import jax, jax.numpy as jnp, numpyro
    from numpyro.infer import MCMC, NUTS
    import stabledist as dist
    from stabledist.continuous import Normal

    assert "site-packages" in dist.__file__, dist.__file__  # the wheel, not the checkout
    here = pathlib.Path(dist.__file__).parent
    assert (here / "py.typed").exists() and (here / "__init__.pyi").exists()
    assert (here / "continuous.pyi").exists() and (here / "testing" / "__init__.pyi").exists()

    def model(y):
        mu = numpyro.sample("mu", Normal(0.0, 1.0))
        numpyro.sample("y", dist.MultivariateNormal(mu * jnp.ones(2), jnp.eye(2)), obs=y)

    mcmc = MCMC(NUTS(model), num_warmup=50, num_samples=50, progress_bar=False)
    mcmc.run(jax.random.key(0), jnp.array([[0.5, 1.0]]))
    assert mcmc.get_samples()["mu"].shape == (50,)
    from stabledist.testing import catalog  # works without hypothesis
    try:
        from stabledist.testing import check_stable
    except ImportError as error:
        print("IMPORT-ERROR:", error)
    else:
        sys.exit("stabledist.testing.check_stable imported without hypothesis")
    print("OK")
    """
)


@pytest.fixture(scope="module")
def dist_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("dist")
    # --no-isolation: the build backend (setuptools, in the `dev` extra) is already installed;
    # an isolated build would download it into a new venv on every run.
    build = subprocess.run(
        [sys.executable, "-m", "build", "--no-isolation", "--outdir", str(out), str(ROOT)],
        capture_output=True, text=True, timeout=600,
    )
    assert build.returncode == 0, build.stdout + build.stderr
    return out


@pytest.mark.slow
def test_sdist_and_wheel_contents(dist_dir: Path) -> None:
    (wheel,) = dist_dir.glob("stabledist-*.whl")
    (sdist,) = dist_dir.glob("stabledist-*.tar.gz")
    names = set(zipfile.ZipFile(wheel).namelist())
    for required in ("stabledist/py.typed", "stabledist/__init__.pyi", "stabledist/continuous.pyi",
                     "stabledist/testing/__init__.pyi", "stabledist/handlers.py"):
        assert required in names, required
    assert any(n.endswith(".dist-info/licenses/LICENSE") for n in names), sorted(names)
    assert not any(n.startswith(("tests/", "benchmarks/", "docs/")) for n in names)
    with tarfile.open(sdist) as tar:
        members = {Path(m).relative_to(Path(m).parts[0]).as_posix() for m in tar.getnames()
                   if len(Path(m).parts) > 1}
    assert {"LICENSE", "README.md", "pyproject.toml", "stabledist/__init__.pyi"} <= members


@pytest.mark.slow
def test_wheel_runs_a_model_in_a_fresh_venv(dist_dir: Path, tmp_path: Path) -> None:
    (wheel,) = dist_dir.glob("stabledist-*.whl")
    env_dir = tmp_path / "venv"
    venv.create(env_dir, with_pip=True)
    python = env_dir / "bin" / "python"
    subprocess.run([str(python), "-m", "pip", "install", "--quiet", str(wheel)],
                   check=True, capture_output=True, timeout=900)
    run = subprocess.run([str(python), "-c", MODEL], capture_output=True, text=True,
                         timeout=600, cwd=tmp_path)
    assert run.returncode == 0, run.stdout + run.stderr
    assert run.stdout.strip().endswith("OK"), run.stdout
    # Without the `testing` extra, the error says how to get hypothesis.
    assert "stabledist[testing]" in run.stdout, run.stdout
