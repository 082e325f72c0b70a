"""Fresh processes: ``python -m benchmarks.child MODULE FUNCTION JSON`` prints the JSON of
``benchmarks.MODULE.FUNCTION(**JSON)`` as its last line. A benchmark measures there what the
suite's own process would spoil: process memory, the collector's state, a cold compile, an
option JAX reads at import. `forked` runs such calls in processes forked from a server that
has imported jax, numpyro and stabledist (``python -m benchmarks.child --serve``): as cold,
without paying the import each time. No jax here."""

from __future__ import annotations

import importlib
import json
import subprocess
import sys
import tempfile
import warnings
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from benchmarks.config import ROOT
from stabledist.benchmark._child import fork_server, fork_servers
from stabledist.benchmark._environment import subprocess_env

SERVED = ("jax.numpy", "numpyro.distributions", "stabledist")
"""What a server imports before it forks: none of these starts a JAX backend."""


def spawn(module: str, function: str, /, stderr: Any = subprocess.PIPE,
          **kwargs: Any) -> subprocess.Popen[str]:
    """Start ``benchmarks.<module>.<function>(**kwargs)`` in a fresh process."""
    cmd = [sys.executable, "-m", "benchmarks.child", module, function, json.dumps(kwargs)]
    return subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=stderr, text=True,
                            env=subprocess_env(ROOT))


def result(proc: subprocess.Popen[str], what: str, timeout: float = 3600) -> Any:
    """The JSON a child printed last; its stderr's tail in the error when it failed."""
    out, err = proc.communicate(timeout=timeout)
    if proc.returncode != 0:
        raise RuntimeError(f"{what} (a fresh process) failed:\n{(err or '')[-3000:]}")
    return json.loads(out.strip().splitlines()[-1])


def library(module: str) -> tuple[Any, Callable[[], tuple[int, int]]]:
    """In a child: the distributions of ``module`` ("numpyro" or "stabledist") and its
    cache's ``cache_info`` (numpyro's: none, ``(0, 0)``)."""
    if module == "stabledist":
        import stabledist

        return stabledist, stabledist.cache_info
    import numpyro.distributions

    return numpyro.distributions, lambda: (0, 0)


@contextmanager
def forked(servers: dict[str, dict[str, str]]) -> Iterator[Callable[..., Any]]:
    """``call(server, module, function, **kwargs)``: the JSON result of
    ``benchmarks.module.function(**kwargs)`` in a fresh process forked from ``server``, one
    of ``servers`` (name: its extra environment variables), all started at once."""
    command = [sys.executable, "-m", "benchmarks.child", "--serve"]
    with tempfile.TemporaryDirectory() as tmp, fork_servers(
            {name: (command, {**subprocess_env(ROOT), **env}) for name, env in servers.items()},
            Path(tmp)) as run:
        def call(server: str, module: str, function: str, /, **kwargs: Any) -> Any:
            text = run(server, [module, function, kwargs], f"benchmarks.{module}.{function} "
                       f"(a process forked from the {server} server) failed")
            return json.loads(text.strip().splitlines()[-1])

        yield call


def _call(request: list[Any]) -> None:
    module, function, kwargs = request
    fn = getattr(importlib.import_module(f"benchmarks.{module}"), function)
    print(json.dumps(fn(**kwargs)))


def main(argv: list[str]) -> None:
    warnings.simplefilter("ignore")
    if argv == ["--serve"]:
        for name in SERVED:
            importlib.import_module(name)
        sys.exit(fork_server(_call))
    module, function, kwargs = argv
    _call([module, function, json.loads(kwargs)])


if __name__ == "__main__":
    main(sys.argv[1:])
