"""The run's environment: set before jax is imported, described after.

:func:`configure` must run before the first ``import jax`` of the process (JAX reads
``JAX_PLATFORMS`` and XLA reads ``XLA_FLAGS`` once, at backend initialization).
"""

from __future__ import annotations

import datetime as _dt
import os
import platform
import re
import subprocess
import sys
from importlib import metadata
from pathlib import Path
from typing import Any

PLATFORMS = {"auto": None, "cpu": "cpu", "gpu": "cuda,cpu", "tpu": "tpu,cpu"}
"""``--device`` -> ``JAX_PLATFORMS`` (None: leave JAX's own choice). The CPU backend stays
available next to an accelerator, as some host-side code asks for it."""

ROOT = Path(__file__).resolve().parent.parent


def configure(device: str, host_devices: int) -> None:
    """Set ``JAX_PLATFORMS`` and the host device count in ``XLA_FLAGS`` (before jax import)."""
    if "jax" in sys.modules:
        raise RuntimeError("benchmarks.environment.configure must run before jax is imported")
    platforms = PLATFORMS[device]
    if platforms is not None:
        os.environ["JAX_PLATFORMS"] = platforms
    flags = re.sub(r"--xla_force_host_platform_device_count=\S+", "",
                   os.environ.get("XLA_FLAGS", "")).split()
    flags.append(f"--xla_force_host_platform_device_count={host_devices}")
    os.environ["XLA_FLAGS"] = " ".join(flags)


def subprocess_env() -> dict[str, str]:
    """This process's environment, with the repository root importable (for
    ``python -m benchmarks.<module>`` children started from any directory)."""
    env = dict(os.environ)
    path = env.get("PYTHONPATH", "")
    env["PYTHONPATH"] = str(ROOT) + (os.pathsep + path if path else "")
    return env


def _version(dist: str) -> str | None:
    try:
        return metadata.version(dist)
    except metadata.PackageNotFoundError:
        return None


def _git_commit() -> str | None:
    """HEAD of the repository (read-only; no index refresh)."""
    try:
        out = subprocess.run(
            ["git", "rev-parse", "HEAD"], cwd=ROOT, capture_output=True, text=True,
            timeout=10, check=False, env={**os.environ, "GIT_OPTIONAL_LOCKS": "0"},
        )
    except (OSError, subprocess.SubprocessError):
        return None
    return out.stdout.strip() or None


def load_average() -> list[float] | None:
    try:
        return [round(x, 2) for x in os.getloadavg()]
    except (OSError, AttributeError):
        return None


def _host_memory_bytes() -> int | None:
    try:
        with open("/proc/meminfo") as f:
            for line in f:
                if line.startswith("MemTotal:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    return None


def device_details(device: Any) -> dict[str, Any]:
    """Kind, memory (``bytes_limit`` where the backend reports it: GPU, TPU) and the
    platform version (CUDA/driver on GPU) of a JAX device."""
    try:
        stats = device.memory_stats() or {}
    except Exception:  # CPU devices may raise or return None
        stats = {}
    try:
        platform_version = device.client.platform_version
    except Exception:
        platform_version = None
    return {"kind": device.device_kind, "platform": device.platform,
            "memory_bytes": stats.get("bytes_limit"),
            "memory_in_use_bytes": stats.get("bytes_in_use"),
            "platform_version": platform_version}


def git_commit() -> str | None:
    """HEAD of the repository (read-only; no index refresh)."""
    return _git_commit()


def describe() -> dict[str, Any]:
    """Versions, backend and hardware of this run (imports jax)."""
    import jax

    devices = jax.devices()
    first = device_details(devices[0])
    try:
        affinity = len(os.sched_getaffinity(0))
    except AttributeError:
        affinity = None
    return {
        "timestamp": _dt.datetime.now(_dt.UTC).isoformat(timespec="seconds"),
        "versions": {
            name: _version(name)
            for name in ("jax", "jaxlib", "numpyro", "stabledist", "numpy", "matplotlib")
        },
        "python": sys.version.split()[0],
        "platform": platform.platform(),
        "machine": platform.machine(),
        "processor": platform.processor() or None,
        "backend": jax.default_backend(),
        "device_kind": devices[0].device_kind,
        "device_memory_bytes": first["memory_bytes"],
        "device_platform_version": first["platform_version"],
        "host_memory_bytes": _host_memory_bytes(),
        "devices": [str(d) for d in devices],
        "device_count": jax.device_count(),
        "local_device_count": jax.local_device_count(),
        "cpu_count": os.cpu_count(),
        "cpu_affinity": affinity,
        "load_average_start": load_average(),
        "env": {k: os.environ.get(k) for k in ("JAX_PLATFORMS", "XLA_FLAGS",
                                               "PYTHONHASHSEED", "OMP_NUM_THREADS")},
        "git_commit": _git_commit(),
        "argv": sys.argv,
    }
