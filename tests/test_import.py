"""Importing stabledist leaves JAX's set-up to the user, as importing numpyro does.

A multi-host script imports at the top and calls ``jax.distributed.initialize`` in ``main``;
a user chooses platforms, device counts or memory fractions after the imports. All of that
must be done before JAX's backend starts, so ``import stabledist`` (and each public module)
creates no array, compiles nothing and reads no device list. Each check runs in a fresh
process, side by side with numpyro's import.
"""

from __future__ import annotations

import json
import socket
import subprocess
import sys
import textwrap

import pytest

# The imports a user's script starts with, then the set-up that needs a backend not started.
_SCRIPT = """
import json, sys
import jax
from jax._src import xla_bridge  # the test's own look at JAX's state (not stabledist's)

compiles = []
jax.monitoring.register_event_duration_secs_listener(
    lambda event, duration, **kw: compiles.append(event) if "compile" in event else None)
for module in sys.argv[1].split(","):
    __import__(module)
started = xla_bridge.backends_are_initialized()
jax.config.update("jax_platforms", "cpu")
jax.config.update("jax_num_cpu_devices", 2)
jax.distributed.initialize(coordinator_address=f"localhost:{sys.argv[2]}", num_processes=1,
                           process_id=0)
print(json.dumps({"started_by_import": started, "compiles": compiles,
                  "devices": len(jax.devices()), "backend": jax.default_backend()}))
jax.distributed.shutdown()
"""

STABLEDIST = ("stabledist,stabledist.handlers,stabledist.testing,stabledist.continuous,"
              "stabledist.truncated,stabledist.fork")


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("localhost", 0))
        return s.getsockname()[1]


def _run(modules: str) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-c", textwrap.dedent(_SCRIPT), modules, str(_free_port())],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        env=_clean_environment())


def _clean_environment() -> dict[str, str]:
    import os

    # the suite's XLA_FLAGS force 4 host devices: the user's script starts from JAX's defaults
    return {k: v for k, v in os.environ.items() if k not in ("XLA_FLAGS", "JAX_PLATFORMS")}


@pytest.fixture(scope="module")
def outcomes() -> dict[str, dict]:
    runs = {"stabledist": _run(STABLEDIST), "numpyro": _run("numpyro,numpyro.distributions")}
    found = {}
    for name, run in runs.items():
        out, err = run.communicate(timeout=240)
        assert run.returncode == 0, f"{name}: {err[-2000:]}"
        found[name] = json.loads(out.strip().splitlines()[-1])
    return found


def test_import_starts_no_backend_and_compiles_nothing(outcomes: dict[str, dict]) -> None:
    assert outcomes["numpyro"]["started_by_import"] is False  # the reference
    assert outcomes["stabledist"]["started_by_import"] is False
    assert outcomes["stabledist"]["compiles"] == []


def test_platform_devices_and_distributed_take_effect_after_import(
        outcomes: dict[str, dict]) -> None:
    """The multi-host order users write: imports at the top, then the platform, the number of
    CPU devices and ``jax.distributed.initialize``."""
    assert outcomes["stabledist"]["devices"] == outcomes["numpyro"]["devices"] == 2
    assert outcomes["stabledist"]["backend"] == "cpu"
