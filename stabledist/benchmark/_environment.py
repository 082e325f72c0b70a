"""The run's environment: chosen before JAX's backends start (`configure`: JAX reads it once),
described with the results (`describe`), so that a result says where it was measured.
"""

from __future__ import annotations

import datetime as _dt
import os
import platform
import re
import subprocess
import sys
import sysconfig
from collections.abc import Callable
from importlib import metadata
from pathlib import Path
from typing import Any

PLATFORMS = {"auto": None, "cpu": "cpu", "gpu": "cuda,cpu", "tpu": "tpu,cpu"}
"""``--device`` -> ``JAX_PLATFORMS`` (None: leave JAX's own choice). The CPU backend stays
available next to an accelerator, as some host-side code asks for it."""


def configure(device: str, host_devices: int | None = None) -> None:
    """Choose JAX's platforms and the host (CPU) device count before JAX's backends start
    (at the first array or device query): ``JAX_PLATFORMS`` and ``XLA_FLAGS`` for child
    processes, JAX's options for this one. The caller checks `jax.default_backend`."""
    platforms = PLATFORMS[device]
    if platforms is not None:
        os.environ["JAX_PLATFORMS"] = platforms
    if host_devices is not None:
        flags = re.sub(r"--xla_force_host_platform_device_count=\S+", "",
                       os.environ.get("XLA_FLAGS", "")).split()
        flags.append(f"--xla_force_host_platform_device_count={host_devices}")
        os.environ["XLA_FLAGS"] = " ".join(flags)
    if "jax" in sys.modules:
        import jax

        if platforms is not None:
            jax.config.update("jax_platforms", platforms)
        if host_devices is not None and "jax_num_cpu_devices" in jax.config.values:
            jax.config.update("jax_num_cpu_devices", host_devices)


def subprocess_env(*importable: Path | str) -> dict[str, str]:
    """This process's environment for a child process, with the folders ``importable`` first
    on its ``PYTHONPATH``. Children allocate device memory on demand unless the caller chose
    otherwise: on a GPU this process already holds JAX's preallocated 75% of it."""
    env = dict(os.environ)
    path = env.get("PYTHONPATH", "")
    env["PYTHONPATH"] = os.pathsep.join([*map(str, importable), *([path] if path else [])])
    env.setdefault("XLA_PYTHON_CLIENT_PREALLOCATE", "false")
    return env


def python_build() -> dict[str, Any]:
    """How this Python was built: a cache hit is a Python call, whose cost depends on the
    build more than on the machine (``--with-dtrace``, as Debian's and Ubuntu's system
    Pythons are built, makes every Python-level call dearer)."""
    args = sysconfig.get_config_var("CONFIG_ARGS") or ""
    dtrace = sysconfig.get_config_var("WITH_DTRACE")
    return {"version": platform.python_version(),
            "implementation": platform.python_implementation(),
            "build": " ".join(platform.python_build()), "compiler": platform.python_compiler(),
            "executable": sys.executable, "config_args": args,
            "dtrace": bool(dtrace) if dtrace is not None else "--with-dtrace" in args,
            "shared": bool(sysconfig.get_config_var("Py_ENABLE_SHARED")),
            "optimizations": "--enable-optimizations" in args, "lto": "--with-lto" in args}


def python_build_text(build: dict[str, Any] | None) -> str:
    """``Python 3.11.7 (CPython, shared libpython, no dtrace, no PGO/LTO; GCC 12.2.0)``."""
    if not build:
        return "Python (build not recorded)"
    pgo = [name for name, key in (("PGO", "optimizations"), ("LTO", "lto")) if build[key]]
    return (f"Python {build['version']} ({build['implementation']}, "
            f"{'shared' if build['shared'] else 'static'} libpython, "
            f"{'--with-dtrace' if build['dtrace'] else 'no dtrace'}, "
            f"{'+'.join(pgo) if pgo else 'no PGO/LTO'}; {build['compiler']})")


def _or_none(get: Callable[..., Any], *args: Any) -> Any:
    """``get(*args)``, or None where it raises (what this platform, backend or install lacks)."""
    try:
        return get(*args)
    except Exception:
        return None


def git_commit() -> str | None:
    """HEAD of the git repository holding the working directory, where a user runs their
    model from (read-only, no index refresh); None outside one."""
    return _or_none(lambda: subprocess.run(
        ["git", "rev-parse", "HEAD"], cwd=os.getcwd(), capture_output=True, text=True,
        timeout=10, check=False, env={**os.environ, "GIT_OPTIONAL_LOCKS": "0"}
    ).stdout.strip() or None)


def load_average() -> list[float] | None:
    return _or_none(lambda: [round(x, 2) for x in os.getloadavg()])


ENV_RECORDED = ("JAX_PLATFORMS", "XLA_FLAGS", "PYTHONHASHSEED", "OMP_NUM_THREADS",
                "JAX_USE_SIMPLIFIED_JAXPR_CONSTANTS", "JAX_ENABLE_X64",
                "XLA_PYTHON_CLIENT_PREALLOCATE", "XLA_PYTHON_CLIENT_MEM_FRACTION",
                "XLA_CLIENT_MEM_FRACTION")
"""Environment variables that change what the benchmark measures, recorded with the run."""

CONFIG_RECORDED = ("jax_use_simplified_jaxpr_constants", "jax_enable_x64",
                   "jax_cpu_enable_async_dispatch")
"""JAX options that change what the benchmark measures (None: unknown to this jax)."""


def describe() -> dict[str, Any]:
    """Versions, backend and hardware of this run (imports jax)."""
    import jax

    devices = jax.devices()
    options = getattr(jax.config, "values", {})  # jax.config.read refuses some options
    return {
        "timestamp": _dt.datetime.now(_dt.UTC).isoformat(timespec="seconds"),
        "versions": {name: _or_none(metadata.version, name) for name in
                     ("jax", "jaxlib", "numpyro", "stabledist", "numpy", "matplotlib")},
        "python": sys.version.split()[0], "python_build": python_build(),
        "platform": platform.platform(), "machine": platform.machine(),
        "processor": platform.processor() or None,
        "backend": jax.default_backend(), "device_kind": devices[0].device_kind,
        # the memory where the backend reports it (GPU, TPU); CUDA/driver version on GPU
        "device_memory_bytes": _or_none(
            lambda: (devices[0].memory_stats() or {}).get("bytes_limit")),
        "device_platform_version": _or_none(lambda: devices[0].client.platform_version),
        "host_memory_bytes": _or_none(
            lambda: os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")),
        "devices": [str(d) for d in devices],
        "device_count": jax.device_count(), "local_device_count": jax.local_device_count(),
        "cpu_count": os.cpu_count(),
        "cpu_affinity": _or_none(lambda: len(os.sched_getaffinity(0))),
        "load_average_start": load_average(),
        "env": {k: os.environ.get(k) for k in ENV_RECORDED},
        "jax_config": {name: options.get(name) for name in CONFIG_RECORDED},
        "git_commit": git_commit(), "argv": sys.argv,
    }
