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
import sysconfig
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
    ``python -m benchmarks.<module>`` children started from any directory).

    On a GPU this process already holds JAX's preallocated 75% of the device memory, and two
    children may run at once (the memory churn): a child that preallocated 75% as well could
    not start. Children allocate on demand (``XLA_PYTHON_CLIENT_PREALLOCATE=false``) unless
    the caller chose otherwise; the variable means nothing to the CPU backend."""
    env = dict(os.environ)
    path = env.get("PYTHONPATH", "")
    env["PYTHONPATH"] = str(ROOT) + (os.pathsep + path if path else "")
    env.setdefault("XLA_PYTHON_CLIENT_PREALLOCATE", "false")
    return env


def python_build() -> dict[str, Any]:
    """How this Python was built. A cache hit is a Python call, and its cost depends on the
    build more than on the machine: Debian's and Ubuntu's system Pythons are built
    ``--with-dtrace``, whose probes make every Python-level call dearer (a hit cost 324 ns on
    the H200 machine's Ubuntu Python, 105 ns on this project's pyenv build)."""
    args = sysconfig.get_config_var("CONFIG_ARGS") or ""
    dtrace = sysconfig.get_config_var("WITH_DTRACE")
    return {
        "version": platform.python_version(),
        "implementation": platform.python_implementation(),
        "build": " ".join(platform.python_build()),
        "compiler": platform.python_compiler(),
        "executable": sys.executable,
        "config_args": args,
        "dtrace": bool(dtrace) if dtrace is not None else "--with-dtrace" in args,
        "shared": bool(sysconfig.get_config_var("Py_ENABLE_SHARED")),
        "optimizations": "--enable-optimizations" in args,
        "lto": "--with-lto" in args,
    }


def python_build_text(build: dict[str, Any] | None) -> str:
    """``Python 3.11.7 (CPython, shared libpython, no dtrace, no PGO/LTO; GCC 12.2.0)``."""
    if not build:
        return "Python (build not recorded)"
    pgo = [name for name, key in (("PGO", "optimizations"), ("LTO", "lto")) if build[key]]
    return (f"Python {build['version']} ({build['implementation']}, "
            f"{'shared' if build['shared'] else 'static'} libpython, "
            f"{'--with-dtrace' if build['dtrace'] else 'no dtrace'}, "
            f"{'+'.join(pgo) if pgo else 'no PGO/LTO'}; {build['compiler']})")


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


ENV_RECORDED = ("JAX_PLATFORMS", "XLA_FLAGS", "PYTHONHASHSEED", "OMP_NUM_THREADS",
                "JAX_USE_SIMPLIFIED_JAXPR_CONSTANTS", "JAX_ENABLE_X64",
                "XLA_PYTHON_CLIENT_PREALLOCATE", "XLA_PYTHON_CLIENT_MEM_FRACTION",
                "XLA_CLIENT_MEM_FRACTION")
"""Environment variables that change what the benchmark measures, recorded with the run."""

CONFIG_RECORDED = ("jax_use_simplified_jaxpr_constants", "jax_enable_x64",
                   "jax_cpu_enable_async_dispatch")
"""JAX options that change what the benchmark measures (None: unknown to this jax)."""


def _config(jax: Any, name: str) -> Any:
    """The option's value (``jax.config.read`` refuses options that have a context manager)."""
    return getattr(jax.config, "values", {}).get(name)


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
        "python_build": python_build(),
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
        "env": {k: os.environ.get(k) for k in ENV_RECORDED},
        "jax_config": {name: _config(jax, name) for name in CONFIG_RECORDED},
        "git_commit": _git_commit(),
        "argv": sys.argv,
    }
