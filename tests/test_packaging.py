"""The package a user installs works: `python -m build` makes a wheel and an sdist, and the
wheel, installed into a fresh venv outside the repository, runs a small model.

This catches what the editable install of the test suite hides: a module or data file missing
from the wheel (the stubs, py.typed), an import-time dependency not declared in pyproject.toml
(hypothesis is only in the `testing` extra), a wrong Python requirement.
"""

from __future__ import annotations

import re
import subprocess
import sys
import tarfile
import textwrap
import tomllib
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
    # The benchmark tool comes with the wheel: a new user's own class, from its file.
    (tmp_path / "users_class.py").write_text(USERS_CLASS)
    bench = subprocess.run([str(python), "-m", "stabledist.benchmark", "users_class.py:PRIOR",
                            "--reps", "2"], capture_output=True, text=True, timeout=600,
                           cwd=tmp_path)
    assert bench.returncode == 0, bench.stdout + bench.stderr
    assert "Smoothed.precision_diagonal" in bench.stdout, bench.stdout
    assert "computed once by stabledist, in every call by numpyro" in bench.stdout


USERS_CLASS = textwrap.dedent(
    """
    import jax.numpy as jnp
    from numpyro.distributions.util import lazy_property
    import stabledist as dist

    class Smoothed(dist.MultivariateNormal):
        @lazy_property
        def precision_diagonal(self):
            return jnp.diagonal(self.precision_matrix)

    PRIOR = Smoothed(jnp.zeros(8), jnp.eye(8) * 2.0)
    """
)


def _extras() -> dict[str, list[str]]:
    with open(ROOT / "pyproject.toml", "rb") as f:
        return tomllib.load(f)["project"]["optional-dependencies"]


def _brings(extra: str) -> set[str]:
    """The distributions ``pip install "stabledist[extra]"`` adds, self-references followed."""
    names: set[str] = set()
    for requirement in _extras()[extra]:
        name = re.match(r"[A-Za-z0-9_.-]+", requirement)[0]  # type: ignore[index]
        if name == "stabledist":
            for inner in re.search(r"\[(.*?)\]", requirement)[1].split(","):  # type: ignore[index]
                names |= _brings(inner.strip())
        else:
            names.add(name.lower())
    return names


def test_extras_bring_what_the_docs_say() -> None:
    """The README and the guides name extras; each exists and brings what they promise."""
    assert "flatbuffers" in _brings("export")  # Exported.serialize() imports it
    assert {"orbax-checkpoint", "optax"} <= _brings("checkpoints")  # the checkpoint example
    assert "hypothesis" in _brings("testing")  # check_stable and the strategies
    user_facing = _brings("testing") | _brings("export") | _brings("checkpoints")
    assert _brings("all") == user_facing
    assert "flatbuffers" in _brings("test")  # tests/test_export.py serializes

    pages = [ROOT / "README.md", ROOT / "CONTRIBUTING.md", *sorted((ROOT / "docs").rglob("*.md"))]
    for page in pages:
        text = page.read_text(encoding="utf-8")
        for match in re.finditer(r"(?:stabledist|\.)\[([\w,-]+)\]", text):
            for extra in match[1].split(","):
                where = page.relative_to(ROOT)
                assert extra in _extras(), f"{where} names a missing extra {extra!r}"
