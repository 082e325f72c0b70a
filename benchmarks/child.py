"""Fresh processes: ``python -m benchmarks.child MODULE FUNCTION JSON`` prints the JSON of
``benchmarks.MODULE.FUNCTION(**JSON)`` as its last line. A benchmark measures there what the
suite's own process would spoil: process memory, the collector's state, a cold compile, an
option JAX reads at import. No jax here."""

from __future__ import annotations

import importlib
import json
import subprocess
import sys
import warnings
from collections.abc import Callable
from typing import Any

from benchmarks.config import ROOT
from stabledist.benchmark._environment import subprocess_env


def spawn(module: str, function: str, /, env: dict[str, str] | None = None,
          stderr: Any = subprocess.PIPE, **kwargs: Any) -> subprocess.Popen[str]:
    """Start ``benchmarks.<module>.<function>(**kwargs)`` in a fresh process (``env``: extra
    variables over `subprocess_env`)."""
    cmd = [sys.executable, "-m", "benchmarks.child", module, function, json.dumps(kwargs)]
    return subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=stderr, text=True,
                            env={**subprocess_env(ROOT), **(env or {})})


def result(proc: subprocess.Popen[str], what: str, timeout: float = 3600) -> Any:
    """The JSON a child printed last; its stderr's tail in the error when it failed."""
    out, err = proc.communicate(timeout=timeout)
    if proc.returncode != 0:
        raise RuntimeError(f"{what} (a fresh process) failed:\n{(err or '')[-3000:]}")
    return json.loads(out.strip().splitlines()[-1])


def run(module: str, function: str, /, env: dict[str, str] | None = None,
        timeout: float = 3600, **kwargs: Any) -> Any:
    """`spawn`, then its `result`."""
    return result(spawn(module, function, env, **kwargs), f"{module}.{function}", timeout)


def library(module: str) -> tuple[Any, Callable[[], tuple[int, int]]]:
    """In a child: the distributions of ``module`` ("numpyro" or "stabledist") and its
    cache's ``cache_info`` (numpyro's: none, ``(0, 0)``)."""
    if module == "stabledist":
        import stabledist

        return stabledist, stabledist.cache_info
    import numpyro.distributions

    return numpyro.distributions, lambda: (0, 0)


def main(argv: list[str]) -> None:
    module, function, kwargs = argv
    warnings.simplefilter("ignore")
    fn = getattr(importlib.import_module(f"benchmarks.{module}"), function)
    print(json.dumps(fn(**json.loads(kwargs))))


if __name__ == "__main__":
    main(sys.argv[1:])
