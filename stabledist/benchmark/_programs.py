"""A user's program (a numpyro model, or a function they jit), written once against
``stabledist as dist``, run in fresh processes (`stabledist.benchmark._child`) with numpyro's
classes and with stabledist's, alternating; the i-th process of each library form a pair, so a
row's interval is over pairs of fresh processes, as a user's first ``jit`` pays it.
"""

from __future__ import annotations

import json
import os
import pickle
import statistics
import subprocess
import sys
import tempfile
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from stabledist.benchmark._child import fork_servers, split_spec
from stabledist.benchmark._environment import PLATFORMS, subprocess_env
from stabledist.benchmark._measure import Case, rounds
from stabledist.benchmark._report import LazyRead, Report, new_report
from stabledist.benchmark._rows import single

__all__ = ["function", "model", "spec_of"]

LIBRARIES = ("numpyro", "stabledist")
CHILD = Path(__file__).with_name("_child.py")

PHASES = {
    "import_s": ("fresh process", "import (with the program's file)", "s"),
    "trace_s": ("fresh process", "first trace", "s"),
    "lower_s": ("fresh process", "lower", "s"),
    "compile_s": ("fresh process", "compile", "s"),
    "first_jit_s": ("fresh process", "first jit: trace + lower + compile", "s"),
    "call_ns": ("compiled program", "per call", "ns/call"),
}
"""What a process measures: (group of rows, row, unit) per field of its result; the first
jit, what a user's first call pays, is the sum of its three phases (hoisting moves work from
the compile into the trace, so a phase alone can favour either library)."""


def model(target: str | Callable[..., Any], *args: Any, predictive: int | None = None,
          eager_init: bool = False, processes: int = 6, reps: int = 5, rep_ms: float = 20.0,
          device: str = "auto", fork: bool = False, quiet: bool = False,
          **kwargs: Any) -> Report:
    """Benchmark a numpyro model with numpyro's classes and with stabledist's.

    ``target`` is ``"path/to/file.py:model"``, ``"package.module:model"``, or the model
    function itself (defined in a file: each process imports that file anew). The model is
    called as ``model(*args, **kwargs)`` (they must pickle); its log density at a point a
    seeded run drew is jitted, and with ``predictive=N`` a jitted ``Predictive`` of ``N``
    samples too. The point is drawn inside ``jit`` (as parallel chains' initialisation
    does), or eagerly with ``eager_init`` (as single-chain MCMC's does: numpyro then keeps
    the lazy values of a global prior that the model read, and its compiled calls reuse
    them). ``processes`` fresh processes per library, alternating; in each, ``reps``
    repetitions of calls of about ``rep_ms`` ms. ``device``: ``"auto"``, ``"cpu"``,
    ``"gpu"`` or ``"tpu"`` (the processes' ``JAX_PLATFORMS``). With ``fork`` (POSIX), each
    process is forked from one per library that has imported jax and the library: its
    first trace is as fresh, its import is not measured (no import row), and each process
    starts 2-3 s sooner."""
    options = {"predictive": predictive, "eager_init": eager_init}
    return _run("model", target, args, kwargs, options, processes, reps, rep_ms, device, fork,
                quiet)


def function(target: str | Callable[..., Any], *args: Any, processes: int = 6, reps: int = 5,
             rep_ms: float = 20.0, device: str = "auto", fork: bool = False,
             quiet: bool = False, **kwargs: Any) -> Report:
    """Benchmark a function the user jits, ``jax.jit(f)(*args)`` (``kwargs`` are bound, not
    traced), with numpyro's classes and with stabledist's; as `model` otherwise."""
    return _run("function", target, args, kwargs, {}, processes, reps, rep_ms, device, fork, quiet)


def spec_of(target: str | Callable[..., Any]) -> str:
    """``file.py:name`` or ``module:name`` for a callable (a file the processes import)."""
    if isinstance(target, str):
        where, name = split_spec(target)
        return f"{Path(where).resolve()}:{name}" if where.endswith(".py") else target
    module = sys.modules.get(getattr(target, "__module__", ""), None)
    file = getattr(module, "__file__", None)
    qualname = getattr(target, "__qualname__", "")
    if file is None or "<locals>" in qualname:
        raise ValueError(f"{qualname or target!r} is not defined at the top level of a file: "
                         "the fresh processes import the program, so write it in a .py file "
                         "and pass 'file.py:name'")
    if module is not None and module.__name__ != "__main__" and module.__spec__ is not None:
        return f"{module.__name__}:{qualname}"
    return f"{Path(file).resolve()}:{qualname}"


def _run(kind: str, target: Any, args: tuple, kwargs: dict, options: dict[str, Any],
         processes: int, reps: int, rep_ms: float, device: str, fork: bool,
         quiet: bool) -> Report:
    if device not in PLATFORMS:
        raise ValueError(f"device {device!r}: choose from {list(PLATFORMS)}")
    if processes < 2:
        raise ValueError("processes must be at least 2: an interval needs two pairs")
    if fork and not hasattr(os, "fork"):
        raise ValueError("fork=True needs os.fork (POSIX): leave it off on this platform")
    spec = spec_of(target)
    report = new_report(f"{kind} {spec.rpartition(':')[2]}", kind=kind, quiet=quiet)
    job = {"spec": spec, "kind": kind, "args": args, "kwargs": kwargs, "reps": reps,
           "rep_ms": rep_ms, "path": [str(Path.cwd())], **options}
    results: dict[str, list[dict[str, Any]]] = {lib: [] for lib in LIBRARIES}
    with tempfile.TemporaryDirectory() as tmp, _processes(Path(tmp), device, fork) as start:
        job_file = Path(tmp) / "job.pickle"
        job_file.write_bytes(pickle.dumps(job))
        for k, (_, lib) in enumerate(rounds(LIBRARIES, processes), start=1):
            report.progress(f"process {k} of {2 * processes}: {spec} with {lib}")
            results[lib].append(start(lib, job_file))
    _rows(report, results, "program", "", imports=not fork)
    if options.get("predictive"):
        _rows(report, results, "predictive", f"Predictive({options['predictive']}) ")
    report.reads = _reads(results)
    report.environment["child_backend"] = device
    return report


@contextmanager
def _processes(tmp: Path, device: str, fork: bool
               ) -> Iterator[Callable[[str, Path], dict[str, Any]]]:
    """``start(library, job file)``: the job's result from a fresh process, a new interpreter
    or with ``fork`` a child of one server per library (`fork_servers`)."""
    env = subprocess_env()
    if PLATFORMS[device] is not None:
        env["JAX_PLATFORMS"] = PLATFORMS[device]
    command = [sys.executable, str(CHILD)]
    servers = {lib: ([*command, "--serve", lib], env) for lib in LIBRARIES} if fork else {}
    with fork_servers(servers, tmp) as forked:
        def start(library: str, job_file: Path) -> dict[str, Any]:
            out = tmp / f"{library}.json"
            failed = f"the program failed with {library} (a fresh process)"
            if fork:
                forked(library, [str(job_file), str(out)], failed)
            else:
                run = subprocess.run([*command, library, str(job_file), str(out)], env=env,
                                     capture_output=True, text=True, check=False)
                if run.returncode != 0:
                    raise RuntimeError(f"{failed}:\n{run.stderr[-4000:]}")
            return json.loads(out.read_text())

        yield start


def _rows(report: Report, results: dict[str, list[dict[str, Any]]], part: str, prefix: str,
          imports: bool = False) -> None:
    """One row per phase (the import only with ``imports``): the i-th process of each
    library paired."""
    for key, (group, label, unit) in PHASES.items():
        if key == "import_s" and not imports:
            continue
        samples = {lib: [_value(r, part, key) for r in runs] for lib, runs in results.items()}
        case = Case(prefix + label, {"phase": key, "part": part}, samples)
        report.add(case, single(group, case, unit, judged=True))
    equations = {lib: runs[0][part]["equations"] for lib, runs in results.items()}
    report.cases[-1].params["equations"] = equations


def _value(result: dict[str, Any], part: str, key: str) -> float:
    if key == "import_s":
        return result["import_s"]
    if key == "first_jit_s":
        return sum(result[part][k] for k in ("trace_s", "lower_s", "compile_s"))
    value = result[part][key]
    return statistics.median(value) if isinstance(value, list) else value


def _reads(results: dict[str, list[dict[str, Any]]]) -> list[LazyRead]:
    """The lazy values the first process of each library saw read under a trace, with the
    equations all their reads there put in the program, merged by name."""
    found: dict[tuple[str, str], dict[str, int | None]] = {}
    for lib, runs in results.items():
        for part in ("program", "predictive"):
            for owner, name, equations in runs[0].get(part, {}).get("reads", []):
                entry = found.setdefault((owner, name), {})
                entry[lib] = None if equations is None else (entry.get(lib) or 0) + equations
    # a value one library never computed under the trace was a hit there: a constant
    return [LazyRead(owner, name, e.get("numpyro", 0), e.get("stabledist", 0))
            for (owner, name), e in sorted(found.items())]
