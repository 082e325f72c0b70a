"""tests/conftest.py's check that each distribution class ran on one pytest-xdist worker.

It fails a `--dist loadgroup` run (what `make test` asks for) whose grouping broke; a run with
another --dist (`pytest -n 2` alone is `--dist load`) splits classes because it was asked to,
so it passes with a note that `--dist loadgroup` compiles each class once (issue 42).
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

import conftest
import pytest

ROOT = Path(__file__).resolve().parent.parent
SPLIT = {"Beta": {"gw0", "gw1"}}


def finish(dist: str, monkeypatch: pytest.MonkeyPatch) -> object:
    """The exit status ``pytest_sessionfinish`` leaves after a run that split Beta."""
    monkeypatch.setattr(conftest, "_WORKERS_OF_CLASS", SPLIT)
    options = {"dist": dist}
    session = SimpleNamespace(exitstatus=pytest.ExitCode.OK,
                              config=SimpleNamespace(getoption=lambda n, d=None: options.get(n, d)))
    conftest.pytest_sessionfinish(session, 0)  # type: ignore[arg-type]
    return session.exitstatus


def test_broken_grouping_fails_a_loadgroup_run(monkeypatch: pytest.MonkeyPatch,
                                               capsys: pytest.CaptureFixture[str]) -> None:
    assert finish("loadgroup", monkeypatch) == pytest.ExitCode.TESTS_FAILED
    out = capsys.readouterr().out
    assert "ERROR: tests of one class ran on several pytest-xdist workers" in out


@pytest.mark.parametrize("dist", ["load", "loadscope", "no"])
def test_split_classes_pass_under_another_dist(dist: str, monkeypatch: pytest.MonkeyPatch,
                                               capsys: pytest.CaptureFixture[str]) -> None:
    assert finish(dist, monkeypatch) == pytest.ExitCode.OK
    out = capsys.readouterr().out
    assert "ERROR" not in out and "`--dist loadgroup` runs each class on one worker" in out


@pytest.mark.integration  # starts a pytest run with two workers
def test_n_2_without_loadgroup_exits_0() -> None:
    """``pytest -n 2`` on four tests of one class: xdist's load scheduling sends them to the
    workers in turn, so the class is split; every test passes, so the run exits 0."""
    nodes = [f"tests/test_pytree.py::{test}[Beta]" for test in (
        "test_key_paths_name_leaves", "test_every_attribute_is_a_field",
        "test_same_parameters_same_treedef", "test_round_trip_is_exact")]
    env = {k: v for k, v in os.environ.items() if not k.startswith("PYTEST_")}
    run = subprocess.run([sys.executable, "-m", "pytest", "-n", "2", "-p", "no:cacheprovider",
                          *nodes], capture_output=True, text=True, cwd=ROOT, env=env,
                         timeout=600)
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-3000:]
    assert "4 passed" in run.stdout
    assert "note: tests of one class ran on several pytest-xdist workers" in run.stdout, run.stdout
