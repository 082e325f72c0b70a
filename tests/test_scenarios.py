"""The user-reported scenarios in ../shared/scenarios/ pass with stabledist, with
JAX_CHECK_TRACER_LEAKS=1, each in its own process (two at a time)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

SCENARIOS = Path(__file__).resolve().parents[2] / "shared" / "scenarios"
NAMES = sorted(p.name for p in SCENARIOS.glob("s[0-9]*.py"))

if not NAMES:  # a checkout without ../shared: nothing to run, and CI must not get here
    if os.environ.get("CI"):
        raise RuntimeError(f"CI expects the shared scenarios at {SCENARIOS}")
    pytest.skip(f"no scenarios at {SCENARIOS} (outside the project workspace)",
                allow_module_level=True)


@pytest.fixture(scope="module")
def results() -> dict[str, subprocess.CompletedProcess[str]]:
    """Run every scenario, two at a time (this machine class has 2 cores)."""
    env = dict(os.environ, JAX_CHECK_TRACER_LEAKS="1")
    env.pop("XLA_FLAGS", None)  # the scenarios choose their own device count
    out: dict[str, subprocess.CompletedProcess[str]] = {}
    pending = list(NAMES)
    while pending:
        batch, pending = pending[:2], pending[2:]
        procs = {
            name: subprocess.Popen(
                [sys.executable, name, "stabledist"], cwd=SCENARIOS, env=env, text=True,
                stdout=subprocess.PIPE, stderr=subprocess.PIPE,
            )
            for name in batch
        }
        for name, proc in procs.items():
            stdout, stderr = proc.communicate(timeout=600)
            out[name] = subprocess.CompletedProcess(proc.args, proc.returncode, stdout, stderr)
    return out


def test_all_scenarios_found():
    assert len(NAMES) >= 6, NAMES


@pytest.mark.parametrize("name", NAMES)
def test_scenario_passes(name, results):
    result = results[name]
    lines = [line for line in result.stdout.splitlines() if line.startswith(("PASS", "FAIL"))]
    assert result.returncode == 0, result.stdout + result.stderr[-3000:]
    assert lines and all(line.startswith("PASS") for line in lines), result.stdout
