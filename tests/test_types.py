"""What type checkers see: the generated stubs are current, and pyright and mypy, run on a
user's file (tests/typecheck/user_code.py), see numpyro's signatures through stabledist.

The checkers run in subprocesses on the source tree (`extraPaths` / `MYPYPATH`), as they
would on a user's project with stabledist installed. mypy needs `follow_untyped_imports`
because numpyro ships no py.typed marker (see docs/getting-started.md, "Install").
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import numpyro
import pytest

ROOT = Path(__file__).resolve().parent.parent
USER_FILE = ROOT / "tests" / "typecheck" / "user_code.py"
sys.path.insert(0, str(ROOT / "tools"))
import generate_stubs  # noqa: E402

# starts fresh processes or environments: `make test-integration` (CI), not `make test`
pytestmark = pytest.mark.integration

# line of user_code.py -> what each checker must reveal there (a substring).
PYRIGHT_REVEALS = {
    "stabledist.MultivariateNormal)": 'is "type[MultivariateNormal]"',
    "covariance_matrix=jnp.eye(2)))": 'is "MultivariateNormal"',
    "stabledist.TruncatedNormal)": 'is "(loc: Array',
    "Normal(0.0, 1.0))": 'is "Normal"',
    ".mean)": 'is "Array"',
    "handlers.seed)": 'is "type[seed]"',
    "handlers.trace)": 'is "type[trace]"',
    "check_stable)": 'is "(factory: Any, *, properties: str | Iterable[str]',
    "PROPERTIES)": 'is "dict[str, Property]"',
}
MYPY_REVEALS = {
    "stabledist.MultivariateNormal)": "-> stabledist.continuous.MultivariateNormal",
    "covariance_matrix=jnp.eye(2)))": '"stabledist.continuous.MultivariateNormal"',
    "stabledist.TruncatedNormal)": "def (loc: jax.",
    "Normal(0.0, 1.0))": '"stabledist.continuous.Normal"',
    ".mean)": '"jax._src.basearray.Array"',
    "handlers.seed)": "-> stabledist.handlers.seed",
    "handlers.trace)": "-> numpyro.handlers.trace",
    "check_stable)": "-> stabledist.testing._stable.StabilityReport",
    "PROPERTIES)": "dict[str, stabledist.testing._registry.Property]",
}
EXPECTED_ERRORS = {"scael", "lowe"}


def _line_of(fragment: str) -> int:
    lines = USER_FILE.read_text(encoding="utf-8").splitlines()
    matches = [i for i, line in enumerate(lines, 1) if line.startswith("reveal_type(")
               and line.endswith(fragment)]
    assert len(matches) == 1, f"{fragment!r} must end exactly one reveal_type line"
    return matches[0]


def _error_lines() -> dict[int, str]:
    lines = USER_FILE.read_text(encoding="utf-8").splitlines()
    return {i: line.rpartition("# error: ")[2] for i, line in enumerate(lines, 1)
            if "# error: " in line}


def test_stubs_are_current() -> None:
    header = (ROOT / "stabledist" / "__init__.pyi").read_text(encoding="utf-8").splitlines()[0]
    written_for = re.search(r"from numpyro (\S+) ", header)
    assert written_for, header
    if written_for[1] != numpyro.__version__:
        pytest.skip(f"stubs are generated from numpyro {written_for[1]}, "
                    f"{numpyro.__version__} is installed")
    stale = generate_stubs.stale()
    assert not stale, (f"stubs out of date: {[str(p.relative_to(ROOT)) for p in stale]}; "
                       "run `python tools/generate_stubs.py`")


def _tool(name: str) -> str:
    path = Path(sys.executable).with_name(name)
    if not path.exists():
        found = shutil.which(name)
        assert found, f"{name} is not installed (the `dev` extra installs it)"
        return found
    return str(path)


def _check_output(messages: dict[int, list[str]], reveals: dict[str, str]) -> None:
    for fragment, expected in reveals.items():
        line = _line_of(fragment)
        said = messages.get(line, [])
        assert any(expected in m for m in said), f"line {line}: expected {expected!r}, got {said}"
    errors = {line: text for line, texts in messages.items() for text in texts
              if "error" in text.split(":")[0] or text.startswith("error")}
    assert set(errors) == set(_error_lines()), f"unexpected errors: {errors}"
    for line, word in _error_lines().items():
        assert word in errors[line], f"line {line}: the error must name {word!r}: {errors[line]}"


@pytest.mark.slow
def test_pyright_sees_numpyro_signatures(tmp_path: Path) -> None:
    config = tmp_path / "pyrightconfig.json"
    config.write_text(f'{{"extraPaths": ["{ROOT}"], "reportMissingModuleSource": false}}')
    run = subprocess.run(
        [_tool("pyright"), "--pythonpath", sys.executable, "-p", str(config), str(USER_FILE)],
        capture_output=True, text=True, timeout=600, cwd=tmp_path,
    )
    messages: dict[int, list[str]] = {}
    for match in re.finditer(r"user_code\.py:(\d+):\d+ - (\w+): (.*)", run.stdout):
        messages.setdefault(int(match[1]), []).append(f"{match[2]}: {match[3]}")
    assert messages, run.stdout + run.stderr
    _check_output(messages, PYRIGHT_REVEALS)


@pytest.mark.slow
def test_mypy_sees_numpyro_signatures(tmp_path: Path) -> None:
    env = {**os.environ, "MYPYPATH": str(ROOT)}
    cache = ROOT / ".cache" / "mypy"  # reused across runs: a cold run analyses jax and numpyro
    run = subprocess.run(
        [_tool("mypy"), "--python-executable", sys.executable, "--follow-untyped-imports",
         "--cache-dir", str(cache), "--no-error-summary", str(USER_FILE)],
        capture_output=True, text=True, timeout=600, cwd=tmp_path, env=env,
    )
    messages: dict[int, list[str]] = {}
    for match in re.finditer(r"user_code\.py:(\d+): (\w+): (.*)", run.stdout):
        messages.setdefault(int(match[1]), []).append(f"{match[2]}: {match[3]}")
    assert messages, run.stdout + run.stderr
    _check_output(messages, MYPY_REVEALS)
