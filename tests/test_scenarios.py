"""The user-reported scenarios in ../shared/scenarios/ pass with stabledist, with
JAX_CHECK_TRACER_LEAKS=1, each in its own process (so in `make test-integration`, with the
other tests that start fresh processes)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

# fresh processes: `make test-integration` (CI), as every test that starts one
pytestmark = pytest.mark.integration

SCENARIOS = Path(__file__).resolve().parents[2] / "shared" / "scenarios"
NAMES = sorted(p.name for p in SCENARIOS.glob("s[0-9]*.py"))

if not NAMES:  # a checkout without ../shared: nothing to run, and CI must not get here
    if os.environ.get("CI"):
        raise RuntimeError(f"CI expects the shared scenarios at {SCENARIOS}")
    pytest.skip(f"no scenarios at {SCENARIOS} (outside the project workspace)",
                allow_module_level=True)


def run_scenario(name: str) -> subprocess.CompletedProcess[str]:
    """One scenario in its own process (pytest-xdist spreads them over the cores)."""
    env = dict(os.environ, JAX_CHECK_TRACER_LEAKS="1")
    env.pop("XLA_FLAGS", None)  # the scenarios choose their own device count
    return subprocess.run([sys.executable, name, "stabledist"], cwd=SCENARIOS, env=env,
                          text=True, capture_output=True, timeout=600, check=False)


def test_all_scenarios_found() -> None:
    assert len(NAMES) >= 6, NAMES


@pytest.mark.parametrize("name", NAMES)
def test_scenario_passes(name: str) -> None:
    result = run_scenario(name)
    lines = [line for line in result.stdout.splitlines() if line.startswith(("PASS", "FAIL"))]
    assert result.returncode == 0, result.stdout + result.stderr[-3000:]
    assert lines and all(line.startswith("PASS") for line in lines), result.stdout
