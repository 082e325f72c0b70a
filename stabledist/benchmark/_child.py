"""One fresh process of a program benchmark, run as a script (``python _child.py LIBRARY
JOB OUT``): the user's program (named by the pickled job) with one library, timed; or, as
``python _child.py --serve LIBRARY``, a process that imports jax and the library once and
forks a fresh process per job (`serve`). With numpyro, ``import stabledist`` gives numpyro's
modules, so the file written once runs as numpyro would run it; nothing of stabledist is
imported (the standard library, jax and numpyro only at module level). The JSON result:
import, trace, lower, compile and call times, the program's equations, and each lazy value
read under the trace with the equations it added.
"""

from __future__ import annotations

import functools
import importlib
import importlib.util
import json
import os
import pickle
import sys
import time
import traceback
import types
import warnings
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

_START = time.perf_counter()


def _numpyro_as_stabledist() -> None:
    """``import stabledist`` gives numpyro's distributions, handlers and submodules; what
    stabledist adds reads as numpyro would have it (`make_stable` returns its class,
    ``cached_lazy_property`` is ``lazy_property``): a file written for stabledist runs."""
    import numpyro.distributions as nd
    import numpyro.handlers
    from numpyro.distributions.util import lazy_property

    def identity(cls: Any) -> Any:
        return cls

    shim = types.ModuleType("stabledist", "numpyro.distributions, as stabledist's program "
                            "sees it in the numpyro process of a benchmark")
    shim.__path__ = []  # a package: ``import stabledist.handlers`` finds sys.modules' entry
    shim.__getattr__ = lambda name: getattr(nd, name)
    vars(shim).update(handlers=numpyro.handlers, make_stable=identity, stabilize=identity,
                      stable_class=identity, cached_lazy_property=lazy_property,
                      is_stable=lambda cls: False)
    sys.modules.update({"stabledist": shim, "stabledist.handlers": numpyro.handlers})
    for name, value in vars(nd).items():
        if isinstance(value, types.ModuleType) and value.__name__.startswith(nd.__name__):
            sys.modules[f"stabledist.{name}"] = value


def split_spec(spec: str) -> tuple[str, str]:
    """``(where, name)`` of ``path/to/file.py:name`` or ``package.module:name``; the file
    must exist."""
    where, colon, name = spec.rpartition(":")
    if not colon or not where or not name:
        raise ValueError(f"{spec!r}: expected path/to/file.py:name or module:name")
    if where.endswith(".py") and not Path(where).is_file():
        raise FileNotFoundError(f"{where}: no such file")
    return where, name


def _import_file(name: str, path: Path) -> types.ModuleType:
    spec = importlib.util.spec_from_file_location(name, path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


def load(spec: str) -> Any:
    """The object ``spec`` (`split_spec`) names (a dotted ``name`` walks attributes); the
    file is imported as a module named after it, its folder first on ``sys.path`` (as
    ``python file.py`` would have it)."""
    where, name = split_spec(spec)
    if where.endswith(".py"):
        path = Path(where).resolve()
        sys.path.insert(0, str(path.parent))
        module = _import_file(path.stem, path)
    else:
        module = importlib.import_module(where)
    obj: Any = module
    for part in name.split("."):
        if not hasattr(obj, part):
            raise AttributeError(f"{where} has no {name!r}")
        obj = getattr(obj, part)
    return obj


class _Reads:
    """The lazy values read under a trace, with the equations each read put in the program
    (0: it entered as a constant). A read is only noted while the program is traced (its
    instance as shapes and dtypes); its equations are counted afterwards (`as_list`), so the
    timed trace holds none of this bookkeeping."""

    def __init__(self) -> None:
        self.found: dict[tuple[str, str], list[int]] = {}
        self.pending: list[tuple[tuple[str, str], Callable[[Any], Any], Any, Any]] = []
        self.counting = False  # reads made by the counting itself are not the program's

    def record(self, instance: Any, name: str, compute: Callable[[Any], Any], value: Any,
               only_traced: bool = False) -> None:
        """A read that gave ``value``: one that holds a tracer was computed in the program
        (its equations are counted later, by tracing ``compute`` alone on an instance of the
        same shapes); one that does not entered it as a constant (recorded unless
        ``only_traced``: numpyro's reads outside a trace)."""
        import jax
        from jax.core import Tracer

        if self.counting:
            return
        key = (type(instance).__qualname__, name)
        if not any(isinstance(x, Tracer) for x in jax.tree_util.tree_leaves(value)):
            if not only_traced:
                self.found.setdefault(key, []).append(0)
            return
        leaves, treedef = jax.tree_util.tree_flatten(instance)
        try:
            shapes = [jax.ShapeDtypeStruct(a.shape, a.dtype, weak_type=a.weak_type)
                      for a in map(jax.typeof, leaves)]
        except TypeError:  # a leaf that is no array: its equations stay unknown
            shapes = None
        self.pending.append((key, compute, treedef, shapes))

    def clear(self) -> None:
        self.found.clear()
        self.pending.clear()

    def as_list(self) -> list[list[Any]]:
        """``[owner, name, equations (None: unknown)]`` per lazy value read."""
        import jax

        self.counting = True
        try:
            for key, compute, treedef, shapes in self.pending:
                try:
                    jaxpr = jax.make_jaxpr(
                        lambda *leaves, c=compute, t=treedef: c(t.unflatten(leaves))
                    )(*shapes).jaxpr
                    equations = _measure_module().count_equations(jaxpr)
                except Exception:  # a value that cannot be re-derived on its own: unknown
                    equations = -1
                self.found.setdefault(key, []).append(equations)
        finally:
            self.pending.clear()
            self.counting = False
        return [[owner, name, sum(eqns) if min(eqns) >= 0 else None]
                for (owner, name), eqns in sorted(self.found.items())]


@functools.cache
def _measure_module() -> Any:
    """`stabledist.benchmark._measure` loaded from its file, without the package: the
    numpyro process must not import stabledist, and the loops are the ones the suite uses."""
    return _import_file("_stabledist_benchmark_measure", Path(__file__).with_name("_measure.py"))


def _time_program(fn: Callable[..., Any], args: tuple, reps: int, rep_ms: float,
                  reads: _Reads) -> dict[str, Any]:
    """Trace, lower, compile and call ``jax.jit(fn)(*args)``; the reads seen while tracing."""
    import jax

    measure = _measure_module()
    reads.clear()
    seconds, traced, compiled = measure.staged(jax.jit(fn), *args)
    calls = measure.call_timer(lambda: compiled(*args))
    loops = measure.calibrate(calls, rep_ms * 1e6, 100_000)
    return {"trace_s": seconds["trace"], "lower_s": seconds["lower"],
            "compile_s": seconds["compile"], "call_ns": [calls(loops) / loops for _ in range(reps)],
            "equations": measure.count_equations(traced.jaxpr.jaxpr), "reads": reads.as_list()}


def _log_density(model: Callable[..., Any], args: tuple, kwargs: dict, eager_init: bool
                 ) -> tuple[Callable[[Any], Any], Any]:
    """The model's log density as a function of its latent values, and a point a seeded run
    drew inside ``jit`` (as parallel chains' or a jitted init does: numpyro caches nothing)
    or, with ``eager_init``, eagerly (as single-chain MCMC's does: numpyro caches the lazy
    values of objects that outlive the run, a global prior's, before the first call)."""
    import jax
    from numpyro import handlers
    from numpyro.infer.util import log_density

    def draw(key: Any) -> dict[str, Any]:
        trace = handlers.trace(handlers.seed(model, key)).get_trace(*args, **kwargs)
        return {name: site["value"] for name, site in trace.items()
                if site["type"] == "sample" and not site["is_observed"]}

    key = jax.random.PRNGKey(0)
    params = draw(key) if eager_init else jax.jit(draw)(key)
    return (lambda p: log_density(model, args, kwargs, p)[0]), params


def prepare(library: str) -> _Reads:
    """The process made ``library``'s (`_numpyro_as_stabledist`), its lazy values' reads
    under a trace noted in the returned `_Reads`: numpyro's ``lazy_property.__get__`` or
    stabledist's first read in a trace, wrapped."""
    reads = _Reads()
    if library == "numpyro":
        _numpyro_as_stabledist()
        from numpyro.distributions.util import lazy_property

        get = lazy_property.__get__

        def watched_get(self: Any, instance: Any, owner: Any = None) -> Any:
            value = get(self, instance, owner)
            if instance is not None:
                reads.record(instance, self.wrapped.__name__, self.wrapped, value, only_traced=True)
            return value

        lazy_property.__get__ = watched_get  # type: ignore[method-assign]
        return reads
    from stabledist._src.lazy import reads as lazy_reads

    first_read = lazy_reads.first_read_in_trace

    def watched_first_read(instance: Any, name: str, compute: Any, values: Any) -> Any:
        value = first_read(instance, name, compute, values)
        reads.record(instance, name, compute, value)
        return value

    lazy_reads.first_read_in_trace = watched_first_read
    return reads


def run(library: str, job: dict[str, Any], reads: _Reads) -> dict[str, Any]:
    target = load(job["spec"])
    leaked = sorted(m for m in sys.modules if m.startswith("stabledist._src"))
    if library == "numpyro" and leaked:
        raise ImportError(f"{job['spec']} imports stabledist's own modules ({leaked[0]}, ...), "
                          "which numpyro's process cannot replace with numpyro's: import "
                          "stabledist (or its distribution modules) only")
    out: dict[str, Any] = {"import_s": time.perf_counter() - _START}
    args, kwargs = job["args"], job["kwargs"]
    reps, rep_ms = job["reps"], job["rep_ms"]
    if job["kind"] == "function":
        out["program"] = _time_program(lambda *a: target(*a, **kwargs), args, reps, rep_ms, reads)
        return out
    density, params = _log_density(target, args, kwargs, job.get("eager_init", False))
    out["program"] = _time_program(density, (params,), reps, rep_ms, reads)
    if job.get("predictive"):
        import jax
        from numpyro.infer import Predictive

        predictive = Predictive(target, num_samples=job["predictive"])
        out["predictive"] = _time_program(lambda key: predictive(key, *args, **kwargs),
                                          (jax.random.PRNGKey(1),), reps, rep_ms, reads)
    return out


def _job(library: str, job_file: str, out_file: str, reads: _Reads) -> None:
    """Run the pickled job in ``job_file`` with ``library``; its JSON result to ``out_file``."""
    job = pickle.loads(Path(job_file).read_bytes())
    for folder in job.get("path", []):
        sys.path.insert(0, folder)
    Path(out_file).write_text(json.dumps(run(library, job, reads)))


def serve(library: str) -> int:
    """Import jax, the library and what every job imports (numpyro's handlers and inference
    utilities, the timing loops), then `fork_server` over requests ``[job, out]`` (no
    backend started, nothing traced or compiled: each child as fresh as a new process)."""
    reads = prepare(library)
    import jax.numpy  # noqa: F401 - imported once here, as every job's program does
    import numpyro.infer.util  # noqa: F401

    _measure_module()
    return fork_server(lambda request: _job(library, request[0], request[1], reads))


def fork_server(handle: Callable[[Any], None]) -> int:
    """Say ``ready``, then per line of stdin (``[request, log]`` as JSON) fork a child that
    calls ``handle(request)``, its stdout and stderr in the file ``log``, and answer its exit
    status (`fork_servers` is the other end). What the server imported, the children have;
    nothing else has run in them."""
    global _START
    print("ready", flush=True)
    for line in sys.stdin:
        request, log_file = json.loads(line)
        with warnings.catch_warnings():  # Python 3.12+: numpy's BLAS thread is not forked
            warnings.simplefilter("ignore", DeprecationWarning)
            pid = os.fork()
        if pid == 0:  # pragma: no cover - the child ends in os._exit (coverage never sees it)
            status = 1
            try:
                log = os.open(log_file, os.O_WRONLY | os.O_CREAT | os.O_TRUNC)
                os.dup2(log, 1)
                os.dup2(log, 2)
                _START = time.perf_counter()
                handle(request)
                status = 0
            except BaseException:
                traceback.print_exc()
            finally:
                sys.stdout.flush()
                sys.stderr.flush()
                os._exit(status)
        print(os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1]), flush=True)
    return 0


@contextmanager
def fork_servers(commands: dict[str, tuple[list[str], dict[str, str]]], logs: Path
                 ) -> Iterator[Callable[[str, Any, str], str]]:
    """The parent's end of `fork_server`: one server per name, from its command line and
    environment, all started at once and ready before the first job, so that no job runs
    beside an import; leaving the block ends them. It yields ``run(name, request, failed)``,
    which forks a fresh child of server ``name`` for ``request`` and returns what the child
    printed; a child that fails raises a RuntimeError, ``failed`` and the output's tail."""
    import subprocess

    servers = {name: subprocess.Popen(
        command, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, env=env,
        stderr=(logs / f"{name}.server.log").open("w"))
        for name, (command, env) in commands.items()}

    def run(name: str, request: Any, failed: str) -> str:
        log = logs / f"{name}.log"
        print(json.dumps([request, str(log)]), file=servers[name].stdin, flush=True)
        status = servers[name].stdout.readline().strip()  # type: ignore[union-attr]
        text = log.read_text() if log.exists() else ""
        if status != "0":  # "": the server itself died
            raise RuntimeError(f"{failed}:\n{text[-4000:]}")
        return text

    try:
        for name, server in servers.items():
            if server.stdout.readline().strip() != "ready":  # type: ignore[union-attr]
                server.wait()
                raise RuntimeError(f"the process serving {name} failed to start:\n"
                                   + (logs / f"{name}.server.log").read_text()[-4000:])
        yield run
    finally:
        for server in servers.values():
            server.stdin.close()  # type: ignore[union-attr]
            server.wait()


def main(argv: list[str]) -> int:
    del sys.path[0]  # this file's folder: its modules are not top-level modules
    if argv[0] == "--serve":
        return serve(argv[1])
    library, job_file, out_file = argv
    _job(library, job_file, out_file, prepare(library))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
