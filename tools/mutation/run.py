"""Mutation testing of stabledist's core: would the tests notice a realistic bug?

Coverage says which lines ran, not whether a test would fail if they were wrong. Two parts:

``full`` (``make test-mutation-full``): mutmut 3 (configured by ``tools/mutation/setup.cfg``)
mutates every function of the core modules named there and runs the tests that exercise
each one. It works in a scratch copy, ``.cache/mutation/work`` (the working tree's
``stabledist/``, ``tests/`` and ``pyproject.toml``), so the checkout is never touched.

``fast`` (``make test-mutation``, CI): the hand-planted mutants of ``ast_mutants.py``, bugs
mutmut's operators cannot express (a statement dropped, an order reversed, one function
passed for another), each an AST edit located by function name, run against the tests that
should catch it.

Either exits 1 if a mutant survives that ``survivors.toml`` does not explain (with its
reason), 2 if it cannot run (a stale AST locator, tests failing without any mutant).
"""

from __future__ import annotations

import argparse
import concurrent.futures
import contextlib
import json
import os
import queue
import re
import shutil
import signal
import subprocess
import sys
import time
import tomllib
from collections import Counter
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from ast_mutants import MUTANTS, AstMutant, StaleLocatorError  # noqa: E402

REPO = HERE.parent.parent
SCRATCH = REPO / ".cache" / "mutation"
SURVIVORS = HERE / "survivors.toml"
PYTEST = ("-m", "pytest", "-x", "-q", "-p", "no:cacheprovider")
TIMEOUT = 900  # seconds per pytest run of an AST mutant; a hang counts as caught


class RunError(Exception):
    """The run cannot go as asked (a stale locator, a kill its test does not confirm)."""


def environment(extra_path: Path | None = None) -> dict[str, str]:
    """The settings tests/conftest.py would make, made before any import: mutmut's fork
    server imports jax before conftest runs, and jax reads its cache settings at import."""
    env = dict(os.environ)
    env.setdefault("JAX_COMPILATION_CACHE_DIR", str(REPO / ".cache" / "jax"))
    env.setdefault("JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS", "0")
    env.setdefault("JAX_PERSISTENT_CACHE_MIN_ENTRY_SIZE_BYTES", "-1")
    env.setdefault("MALLOC_ARENA_MAX", "2")
    env["PYTHONDONTWRITEBYTECODE"] = "1"  # a mutant copy must never leave stale bytecode
    if extra_path is not None:  # ahead of the editable install's finder
        env["PYTHONPATH"] = os.pathsep.join(filter(None, (str(extra_path),
                                                          env.get("PYTHONPATH"))))
    return env


def lay_out(dest: Path, extra: Sequence[Path] = (), keep: Sequence[str] = ()) -> None:
    """A fresh copy of the working tree's package, tests (and the ``benchmarks`` package
    test_cache.py imports) and ``extra`` files in ``dest``; the entries of ``dest`` named in
    ``keep`` survive."""
    dest.mkdir(parents=True, exist_ok=True)
    for entry in dest.iterdir():
        if entry.name in keep:
            continue
        if entry.is_dir():
            shutil.rmtree(entry)
        else:
            entry.unlink()
    ignore = shutil.ignore_patterns("__pycache__", "*.pyc", ".hypothesis")
    for name in ("stabledist", "tests", "benchmarks"):
        shutil.copytree(REPO / name, dest / name, ignore=ignore)
    shutil.copy2(REPO / "pyproject.toml", dest / "pyproject.toml")
    for path in extra:
        shutil.copy2(path, dest / path.name)


def explained() -> dict[str, str]:
    """Mutant name (mutmut's) or label (an AST mutant's) -> why its survival is fine."""
    data = tomllib.loads(SURVIVORS.read_text())
    table = {**data.get("mutmut", {}), **data.get("ast", {})}
    empty = [k for k, v in table.items() if not str(v).strip()]
    if empty:
        raise RunError(f"survivors.toml entries without a reason: {empty}")
    return table


def verdict(survived: Sequence[str]) -> int:
    """1 if a survivor is not explained in survivors.toml, else 0 (printing both kinds)."""
    reasons = explained()
    unexplained = [s for s in survived if s not in reasons]
    for s in survived:
        print(f"  survived: {s}" + ("" if s in unexplained else f"  (explained: {reasons[s]})"))
    if unexplained:
        print(f"\n{len(unexplained)} unexplained survivor(s): kill each with a test in its "
              f"topic's file (tests/test_cache.py, test_pytree.py, test_mirrors.py, ...) or "
              f"explain it in {SURVIVORS.relative_to(REPO)}")
        return 1
    return 0


# --- fast: the AST mutants ------------------------------------------------------------------


def run_pytest(cwd: Path, args: Sequence[str]) -> tuple[int | None, str]:
    """``(exit code, output)`` of one pytest run in ``cwd`` importing its own stabledist;
    exit code None on timeout. Its own process group, so an interrupt stops all of it."""
    proc = subprocess.Popen([sys.executable, *PYTEST, *args], cwd=cwd, env=environment(cwd),
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                            start_new_session=True)
    _RUNNING.add(proc)
    try:
        output, _ = proc.communicate(timeout=TIMEOUT)
        return proc.returncode, output
    except subprocess.TimeoutExpired:
        _stop(proc)
        return None, proc.communicate()[0]
    except BaseException:
        _stop(proc)
        raise
    finally:
        _RUNNING.discard(proc)


_RUNNING: set[subprocess.Popen[str]] = set()
"""The pytest runs in progress, in every thread of `_in_parallel`: an interrupt or SIGTERM
reaches only the main thread, which stops them (each is in its own session)."""


def _stop(proc: subprocess.Popen[str]) -> None:
    for sig in (signal.SIGTERM, signal.SIGKILL):
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, sig)
        try:
            proc.wait(timeout=10)
            return
        except subprocess.TimeoutExpired:
            continue


_FAILURE = re.compile(r"^(FAILED|ERROR) (.+?)(?: - |$)")


def first_failure(rc: int | None, output: str) -> str | None:
    """The first failing test of a run, None if it passed."""
    if rc == 0:
        return None
    if rc is None:
        return f"timed out after {TIMEOUT} s"
    if rc == 5:
        raise RunError(f"pytest collected no tests:\n{output[-2000:]}")
    for line in output.splitlines():
        if match := _FAILURE.match(line):
            kind, test = match.groups()
            return test if kind == "FAILED" else f"{test} (error)"
    return f"pytest exit {rc}: {output.strip().splitlines()[-1:]}"


@contextlib.contextmanager
def planted(tree: Path, mutant: AstMutant) -> Iterator[None]:
    """``mutant`` applied to its file in the copy ``tree``, restored afterwards."""
    file = tree / mutant.path
    original = file.read_text()
    file.write_text(mutant.apply(original))
    try:
        yield
    finally:
        file.write_text(original)


def _in_parallel(trees: Sequence[Path], jobs: Sequence[Any],
                 run: Callable[[Path, Any], Any]) -> Iterator[tuple[Any, Any]]:
    """``(job, run(tree, job))`` for each job, as they finish: one job per tree at a time,
    so each pytest process (one core: no xdist here) has its own copy to plant a mutant in."""
    free: queue.SimpleQueue[Path] = queue.SimpleQueue()
    for tree in trees:
        free.put(tree)

    def one(job: Any) -> Any:
        tree = free.get()
        try:
            return run(tree, job)
        finally:
            free.put(tree)

    with concurrent.futures.ThreadPoolExecutor(len(trees)) as pool:
        futures = {pool.submit(one, job): job for job in jobs}
        try:
            for future in concurrent.futures.as_completed(futures):
                yield futures[future], future.result()
        except BaseException:  # an unconfirmed kill, an interrupt, SIGTERM: stop the others
            pool.shutdown(wait=False, cancel_futures=True)
            for proc in list(_RUNNING):
                _stop(proc)
            raise


_NODE_ID = re.compile(r"^(tests/[^\s:]+\.py::\S+?)(?: \(error\))?$")
"""A test `first_failure` named (a setup error carries `` (error)``)."""


def kill_confirmations(killed: Sequence[tuple[AstMutant, str]],
                       jobs: int) -> list[tuple[str, ...]]:
    """The pytest selections that rerun, without any mutant, what killed each mutant: the
    failing tests by node id, split over ``jobs`` processes; a mutant killed otherwise (a
    timeout, a crash) by its whole selection. A kill counts only if that passes: else the test
    fails for another reason than the mutant."""
    named = sorted({m.group(1) for _, f in killed if (m := _NODE_ID.match(f))})
    whole = list(dict.fromkeys(mutant.tests for mutant, f in killed if not _NODE_ID.match(f)))
    return [*(tuple(named[i::jobs]) for i in range(jobs) if named[i::jobs]), *whole]


def _confirm_kills(trees: Sequence[Path], killed: Sequence[tuple[AstMutant, str]]) -> None:
    """The tests that killed the mutants pass without any mutant (`kill_confirmations`):
    after the mutants, so only the tests that decided something run twice (a baseline of every
    mutant's tests first took 31 s of CI's step)."""
    start = time.monotonic()
    selections = kill_confirmations(killed, len(trees))
    for args, (rc, output) in _in_parallel(trees, selections, run_pytest):
        if rc != 0:
            raise RunError(f"tests that killed a mutant fail without any mutant "
                           f"({' '.join(args)}): the kills prove nothing\n{output[-3000:]}")
    print(f"the {len(killed)} kills confirmed: their tests pass without any mutant "
          f"({time.monotonic() - start:.0f} s)", flush=True)


def _run_mutant(tree: Path, mutant: AstMutant) -> tuple[str | None, float]:
    t0 = time.monotonic()
    with planted(tree, mutant):
        failure = first_failure(*run_pytest(tree, mutant.tests))
    return failure, time.monotonic() - t0


def fast(only: str | None, confirm: bool, jobs: int) -> int:
    """The AST mutants, ``jobs`` at a time (each pytest run is one process on one core), then
    the confirmation of their kills (`_confirm_kills`)."""
    mutants = [m for m in MUTANTS if not only or only.lower() in m.label.lower()]
    if not mutants:
        raise RunError(f"no AST mutant label contains {only!r}")
    for m in mutants:  # every locator still finds its one node, before any test runs
        m.apply((REPO / m.path).read_text())
    trees = [SCRATCH / f"ast-{i}" for i in range(max(1, min(jobs, len(mutants))))]
    for tree in trees:
        lay_out(tree)
    start = time.monotonic()
    survived, killed = [], []
    for i, (m, (failure, took)) in enumerate(_in_parallel(trees, mutants, _run_mutant), 1):
        if failure is None:
            survived.append(m.label)
        else:
            killed.append((m, failure))
        print(f"[{i}/{len(mutants)}] {m.label}\n    -> {failure or 'SURVIVED'} ({took:.0f} s)",
              flush=True)
    if confirm and killed:
        _confirm_kills(trees, killed)
    print(f"\n{len(killed)}/{len(mutants)} AST mutants killed, "
          f"{(time.monotonic() - start) / 60:.1f} min ({len(trees)} at a time)")
    return verdict(survived)


# --- full: mutmut ---------------------------------------------------------------------------

_STATUS = re.compile(r"^\s+(\S+): (.+)$")


def mutmut(work: Path, *args: str) -> subprocess.CompletedProcess[str]:
    """One mutmut command in ``work`` (mutmut is installed beside this Python)."""
    exe = Path(sys.executable).with_name("mutmut")
    return subprocess.run([str(exe), *args], cwd=work, env=environment(), text=True,
                          capture_output=True)


def full(names: Sequence[str], jobs: int, fresh: bool) -> int:
    """mutmut over ``names`` (all the core when empty). mutmut's record (``mutants/``) is
    kept between runs unless ``fresh``: mutmut forgets the results of every function whose
    source changed, so a run without names resumes where the last one stopped, and names
    given are always run again."""
    work = SCRATCH / "work"
    lay_out(work, [HERE / "setup.cfg", HERE / "preload.txt", HERE / "mutation_import_time.py"],
            keep=() if fresh else ("mutants",))
    commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=REPO, text=True,
                            capture_output=True).stdout.strip()
    dirty = subprocess.run(["git", "status", "--porcelain", "--untracked-files=no"], cwd=REPO,
                           text=True, capture_output=True).stdout.strip()
    start = time.monotonic()
    log = SCRATCH / "mutmut.log"
    with log.open("w") as out:  # mutmut's progress line is long; kept out of the terminal
        rc = subprocess.run([str(Path(sys.executable).with_name("mutmut")), "run",
                             "--max-children", str(jobs), *names],
                            cwd=work, env=environment(), stdout=out, stderr=subprocess.STDOUT)
    minutes = (time.monotonic() - start) / 60
    if rc.returncode:
        raise RunError(f"mutmut run failed (exit {rc.returncode}); see {log}")
    statuses: dict[str, str] = {}
    for line in mutmut(work, "results", "--all", "true").stdout.splitlines():
        if match := _STATUS.match(line):
            statuses[match[1]] = match[2]
    counts = Counter(statuses.values())
    summary = {"commit": commit + ("+uncommitted changes" if dirty else ""),
               "minutes": round(minutes, 1), "mutants": len(statuses), **counts}
    (SCRATCH / "summary.json").write_text(json.dumps(summary, indent=1) + "\n")
    print(json.dumps(summary))
    survived = sorted(n for n, s in statuses.items() if s in ("survived", "no tests"))
    return verdict(survived)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = parser.add_subparsers(dest="part", required=True)
    p_fast = sub.add_parser("fast", help="the hand-planted AST mutants (CI)")
    p_fast.add_argument("--only", metavar="LABEL_SUBSTRING")
    p_fast.add_argument("--no-confirm", action="store_true",
                        help="do not rerun the killing tests without the mutants")
    p_fast.add_argument("--jobs", type=int, default=os.cpu_count() or 1,
                        help="mutants run at a time, each its own pytest process and copy "
                             "(default: one per core)")
    p_fast.add_argument("--list", action="store_true", help="list and check, run nothing")
    p_full = sub.add_parser("full", help="mutmut over the core modules")
    p_full.add_argument("names", nargs="*", help="mutmut mutant names or globs "
                        "(e.g. 'stabledist._src.lazy.cache.*'); default all")
    p_full.add_argument("--jobs", type=int, default=2)
    p_full.add_argument("--fresh", action="store_true",
                        help="forget the results of earlier runs")
    args = parser.parse_args(argv)
    if args.part == "full":
        return full(args.names, args.jobs, args.fresh)
    if args.list:
        for m in MUTANTS:
            m.apply((REPO / m.path).read_text())
            print(f"[{m.path}] {m.label}")
        return 0
    return fast(args.only, not args.no_confirm, args.jobs)


if __name__ == "__main__":
    signal.signal(signal.SIGTERM, lambda signum, frame: sys.exit(130))
    try:
        sys.exit(main())
    except (RunError, StaleLocatorError) as e:
        print(f"mutation: {e}", file=sys.stderr)
        sys.exit(2)
