"""Mutation pass over stabledist's core: would the tests notice a realistic bug?

Coverage says which lines ran, not whether any test would fail if they were wrong. Each
mutant below plants one realistic bug in ``stabledist/cache.py``, ``hoisting.py``, ``pytree.py``
or ``fork.py`` as an exact text replacement. The pass applies each mutant on its own in a
temporary ``git worktree`` of HEAD (so the checkout you work in is never touched, and the pass
tests what is committed), runs the core tests (``-x -q -n 1``), and reports the first test that
failed, or NOTHING CAUGHT: a gap in the tests. A mutant whose ``old`` text no longer occurs
exactly once in its file is stale: the pass stops and says so (update the mutant to the
current code), it never skips it silently.

Usage (from the repository root, with the project's virtualenv)::

    .venv/bin/python tools/mutation_pass.py              # every mutant (30-60 min)
    .venv/bin/python tools/mutation_pass.py --only seed  # mutants whose label contains "seed"
    .venv/bin/python tools/mutation_pass.py --list       # the mutants and their anchors

An unmutated baseline run comes first (``--no-baseline`` skips it): if the tests fail without
any mutant, every mutant would look caught. Exit status: 0 every mutant caught, 1 some
mutant not caught, 2 the pass could not run (a stale anchor, a failing baseline, git errors).
"""

from __future__ import annotations

import argparse
import contextlib
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from types import FrameType

REPO = Path(__file__).resolve().parent.parent
JAX_CACHE = REPO / ".cache" / "jax"  # the persistent compilation cache `make test` fills

CORE_TESTS = (
    "tests/test_cache.py", "tests/test_pytree.py", "tests/test_api.py",
    "tests/test_parametrizations.py", "tests/test_own_pytrees.py", "tests/test_internals.py",
)
# run after the core tests, for mutants of hoisting.py only (a separate pytest run: a -k
# given with the core files would deselect most of them)
HOISTING_TESTS = ("tests/test_properties.py", "-k", "hoisting")
PYTEST = ("-m", "pytest", "-x", "-q", "-n", "1", "-p", "no:cacheprovider")
TIMEOUT = 3600  # seconds per pytest run; a hang counts as caught (CI would time out)
NOTHING = "NOTHING CAUGHT"


@dataclass(frozen=True)
class Mutant:
    """One planted bug: ``old`` (which must occur exactly once in ``path``) becomes ``new``."""

    path: str
    old: str
    new: str
    label: str

    @property
    def tests(self) -> tuple[tuple[str, ...], ...]:
        """The pytest runs that may catch it, in order (the first failure ends the search)."""
        if self.path.endswith("hoisting.py"):
            return CORE_TESTS, HOISTING_TESTS
        return (CORE_TESTS,)


CACHE, HOISTING, PYTREE, FORK = (f"stabledist/{m}.py" for m in ("cache", "hoisting", "pytree",
                                                                 "fork"))

MUTANTS: tuple[Mutant, ...] = (
    # ---- cache.py ----------------------------------------------------------------------------
    Mutant(
        CACHE,
        "                    value = compute_hoisted(instance, name, compute, leaves, treedef,\n"
        "                                            self.cached(instance), self.seed)\n",
        "                    value = jax.tree_util.tree_map(lambda v: v * 2, compute_hoisted(\n"
        "                        instance, name, compute, leaves, treedef, self.cached(instance),\n"
        "                        self.seed))\n",
        "cache: a value hoisted by a compiled program (mode \"program\") is doubled",
    ),
    Mutant(
        CACHE,
        "            owner = self._store(instance, id(instance), name, table, value)\n"
        "            owner.seeded = owner.seeded | {name}\n",
        "            self._store(instance, id(instance), name, table, value)\n",
        "cache: seed() stores the value but does not record it as given (owner.seeded)",
    ),
    Mutant(
        CACHE,
        "        for name in owner.names:\n"
        "            tables[name].pop(key, None)\n",
        "",
        "cache: _release forgets a dead instance but leaves its values in the tables "
        "(a new instance reusing the id hits them)",
    ),
    Mutant(
        CACHE,
        "            if type(value) in _CONCRETE_TYPES or _is_concrete(value):\n"
        "                self._store(instance, key, name, table, value)\n",
        "            self._store(instance, key, name, table, value)\n",
        "cache: get_or_compute stores every value, also one computed from tracers in the trace",
    ),
    Mutant(
        CACHE,
        "                for name in owner.names - owner.seeded:\n",
        "                for name in owner.names:\n",
        "cache: clear() also drops the values a constructor seeded",
    ),
    Mutant(
        CACHE,
        "                for name in owner.names - owner.seeded:\n"
        "                    self._tables[name].pop(key, None)\n",
        "",
        "cache: clear() updates its bookkeeping but leaves computed values in the tables "
        "(a hit after clear_cache returns the stale value)",
    ),
    # ---- hoisting.py -------------------------------------------------------------------------
    Mutant(
        HOISTING,
        "        if type(trace).__name__ not in _PASS_THROUGH:\n",
        "        if type(trace).__name__ in _PASS_THROUGH:\n",
        "hoisting: stages() inverts its test (grad/vmap traces count as staging)",
    ),
    Mutant(
        HOISTING,
        '    return "eager" if len(ops) <= EAGER_OPS_MAX else "program"\n',
        '    return "eager" if len(ops) > EAGER_OPS_MAX else "program"\n',
        "hoisting: the EAGER_OPS_MAX threshold is inverted (long values op by op, short "
        "ones by a compiled program)",
    ),
    # ---- pytree.py ---------------------------------------------------------------------------
    Mutant(
        PYTREE,
        "        f\"        return ({''.join(g + ', ' for g in get)}), \"\n",
        "        f\"        return ({''.join(g + ', ' for g in reversed(get))}), \"\n",
        "pytree: the generated flatten returns the leaves in reverse order",
    ),
    Mutant(
        PYTREE,
        "        f\"    if va is not UNSET: state[{_VALIDATE!r}] = va\",\n",
        "",
        "pytree: the generated unflatten drops _validate_args",
    ),
    Mutant(
        PYTREE,
        "        data=tuple(data),\n",
        "        data=tuple(reversed(data)),\n",
        "pytree: field_table returns the data fields in reverse order",
    ),
    Mutant(
        PYTREE,
        "    for base in reversed(cls.__mro__):\n"
        "        if not (isinstance(base, type) and issubclass(base, _NumpyroDistribution)):\n",
        "    for base in cls.__mro__:\n"
        "        if not (isinstance(base, type) and issubclass(base, _NumpyroDistribution)):\n",
        "pytree: field_table walks the MRO most-derived first (a subclass's fields before "
        "its bases')",
    ),
    Mutant(
        PYTREE,
        "    registered = ClassPytree(table, flatten, unflatten, checked_unflatten)\n",
        "    registered = ClassPytree(table, flatten, unflatten, unflatten)\n",
        "pytree: tree_unflatten called by hand skips the leaf-kind check (no clear error for "
        "a string or distribution as a parameter)",
    ),
    # ---- fork.py -----------------------------------------------------------------------------
    Mutant(
        FORK,
        "    for name in state.keys() & info.lazy:\n"
        "        CACHE.seed(d, name, state.pop(name))\n",
        "",
        "fork: _settle leaves lazy values stored in __dict__ there (no seeding)",
    ),
    Mutant(
        FORK,
        "            _adopt_children(instance)\n",
        "",
        "fork: a new instance's nested numpyro distributions are not adopted",
    ),
    Mutant(
        FORK,
        "    for name, compute in derived.items():\n"
        "        setattr(cls, name, cached_lazy_property(compute, name))\n",
        "",
        "fork: DERIVED_ATTRIBUTES are left out of the field table but not installed as lazy "
        "properties",
    ),
    Mutant(
        FORK,
        "        return (self.__dict__, seeded) if seeded else self.__dict__\n",
        "        return self.__dict__\n",
        "fork: copies and pickles drop the values the constructor was given (__getstate__)",
    ),
    Mutant(
        FORK,
        "            or param in seeded\n",
        "",
        "fork: get_args ignores the values the constructor was given",
    ),
)


class PassError(Exception):
    """The pass cannot run as asked (stale anchors, a failing baseline, git trouble)."""


def git(*args: str, cwd: Path = REPO) -> str:
    out = subprocess.run(["git", *args], cwd=cwd, capture_output=True, text=True)
    if out.returncode:
        raise PassError(f"git {' '.join(args)} failed: {out.stderr.strip()}")
    return out.stdout


def stale_anchors(mutants: Sequence[Mutant]) -> list[str]:
    """One message per mutant whose ``old`` does not occur exactly once in its file at HEAD
    (or that changes nothing)."""
    texts: dict[str, str] = {}
    problems = []
    for m in mutants:
        if m.path not in texts:
            texts[m.path] = git("show", f"HEAD:{m.path}")
        count = texts[m.path].count(m.old)
        if count != 1:
            problems.append(f"STALE ANCHOR ({count} occurrences, need 1) in {m.path}: "
                            f"{m.label}\n    old text: {m.old!r}")
        elif m.old == m.new:
            problems.append(f"NO-OP MUTANT in {m.path}: {m.label}")
    return problems


@contextlib.contextmanager
def worktree() -> Iterator[Path]:
    """A detached worktree of HEAD in a temporary directory, removed on exit (also on error
    or interrupt)."""
    tmp = Path(tempfile.mkdtemp(prefix="stabledist-mutation-"))
    path = tmp / "head"
    try:
        git("worktree", "add", "--detach", "--quiet", str(path), "HEAD")
        yield path
    finally:
        subprocess.run(["git", "worktree", "remove", "--force", str(path)], cwd=REPO,
                       capture_output=True)
        shutil.rmtree(tmp, ignore_errors=True)
        subprocess.run(["git", "worktree", "prune"], cwd=REPO, capture_output=True)


@contextlib.contextmanager
def planted(tree: Path, mutant: Mutant) -> Iterator[None]:
    """``mutant`` applied in ``tree``; the file is restored afterwards and checked clean."""
    file = tree / mutant.path
    original = file.read_text()
    if original.count(mutant.old) != 1:  # checked at HEAD already; the worktree is HEAD
        raise PassError(f"stale anchor in the worktree: {mutant.label}")
    file.write_text(original.replace(mutant.old, mutant.new))
    try:
        yield
    finally:
        file.write_text(original)
    if git("status", "--porcelain", "--untracked-files=no", cwd=tree):
        raise PassError(f"the worktree is not clean after restoring {mutant.path}")


def environment(tree: Path) -> dict[str, str]:
    env = dict(os.environ)
    # the worktree's stabledist, not the editable install's (which points at the checkout)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, (str(tree), env.get("PYTHONPATH"))))
    env["JAX_COMPILATION_CACHE_DIR"] = str(JAX_CACHE)
    # a restored file may keep the mutant's size and mtime second: no stale bytecode
    env["PYTHONDONTWRITEBYTECODE"] = "1"
    return env


def check_imports_worktree(tree: Path) -> None:
    out = subprocess.run(
        [sys.executable, "-c", "import stabledist; print(stabledist.__file__)"],
        cwd=tree, env=environment(tree), capture_output=True, text=True,
    )
    where = out.stdout.strip()
    if out.returncode or not Path(where).resolve().is_relative_to(tree.resolve()):
        raise PassError(f"the worktree's tests would not import its own stabledist "
                        f"(got {where or out.stderr.strip()!r})")


def run_pytest(tree: Path, args: Sequence[str]) -> tuple[int | None, str]:
    """``(exit code, output)`` of one pytest run in ``tree``; exit code None on timeout. The
    run gets its own process group, so an interrupt stops it and its xdist worker."""
    proc = subprocess.Popen([sys.executable, *PYTEST, *args], cwd=tree, env=environment(tree),
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                            start_new_session=True)
    try:
        output, _ = proc.communicate(timeout=TIMEOUT)
        return proc.returncode, output
    except subprocess.TimeoutExpired:
        stop(proc)
        return None, proc.communicate()[0]
    except BaseException:
        stop(proc)
        raise


def stop(proc: subprocess.Popen[str]) -> None:
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
    """The first failing test id of a run (``None``: the run passed)."""
    if rc == 0:
        return None
    if rc is None:
        return f"timed out after {TIMEOUT} s"
    if rc == 5:
        raise PassError(f"pytest collected no tests:\n{tail(output)}")
    for line in output.splitlines():
        match = _FAILURE.match(line)
        if match:
            kind, test = match.groups()
            return test if kind == "FAILED" else f"{test} (error)"
    return f"pytest exit {rc}, no FAILED/ERROR line: {tail(output, 1)}"


def tail(output: str, lines: int = 30) -> str:
    return "\n".join(output.strip().splitlines()[-lines:])


def caught_by(tree: Path, runs: Sequence[Sequence[str]]) -> str:
    for args in runs:
        failure = first_failure(*run_pytest(tree, args))
        if failure is not None:
            return failure
    return NOTHING


def baseline(tree: Path, mutants: Sequence[Mutant]) -> None:
    """The selected mutants' test runs pass without any mutant."""
    runs = dict.fromkeys(run for m in mutants for run in m.tests)
    for args in runs:
        start = time.monotonic()
        rc, output = run_pytest(tree, args)
        print(f"baseline {' '.join(args)}: exit {rc} ({time.monotonic() - start:.0f} s)",
              flush=True)
        if rc != 0:
            raise PassError(f"the tests fail without any mutant:\n{tail(output)}")


def cell(text: str) -> str:
    return text.replace("|", "\\|")


def table(results: Sequence[tuple[Mutant, str]]) -> str:
    rows = ["| planted bug | first test that failed |", "| --- | --- |"]
    rows += [f"| {cell(m.label)} | {cell(f if f == NOTHING else f'`{f}`')} |"
             for m, f in results]
    return "\n".join(rows)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--only", metavar="LABEL_SUBSTRING",
                        help="run only the mutants whose label contains this (case-insensitive)")
    parser.add_argument("--list", action="store_true",
                        help="list the mutants and check their anchors, run nothing")
    parser.add_argument("--no-baseline", action="store_true",
                        help="skip the unmutated run of the tests")
    args = parser.parse_args(argv)

    mutants = [m for m in MUTANTS if not args.only or args.only.lower() in m.label.lower()]
    if not mutants:
        print(f"no mutant label contains {args.only!r}", file=sys.stderr)
        return 2
    labels = [m.label for m in MUTANTS]
    if len(set(labels)) != len(labels):
        print("duplicate mutant labels", file=sys.stderr)
        return 2
    problems = stale_anchors(mutants)
    if args.list:
        for i, m in enumerate(mutants, 1):
            print(f"{i:2}. [{m.path}] {m.label}")
    if problems:
        print("\n".join(problems), file=sys.stderr)
        return 2
    if args.list:
        return 0

    head = git("rev-parse", "--short", "HEAD").strip()
    print(f"mutation pass: {len(mutants)} mutant(s) of HEAD {head}", flush=True)
    start = time.monotonic()
    results: list[tuple[Mutant, str]] = []
    with worktree() as tree:
        check_imports_worktree(tree)
        if not args.no_baseline:
            baseline(tree, mutants)
        for i, m in enumerate(mutants, 1):
            t0 = time.monotonic()
            with planted(tree, m):
                failure = caught_by(tree, m.tests)
            results.append((m, failure))
            print(f"[{i}/{len(mutants)}] {m.label}\n    -> {failure} "
                  f"({time.monotonic() - t0:.0f} s)", flush=True)
    print(f"\n{table(results)}\n")
    missed = sum(f == NOTHING for _, f in results)
    print(f"{len(results) - missed}/{len(results)} caught, HEAD {head}, "
          f"{(time.monotonic() - start) / 60:.1f} min")
    return 1 if missed else 0


def _interrupt(signum: int, frame: FrameType | None) -> None:
    raise KeyboardInterrupt(f"signal {signum}")


if __name__ == "__main__":
    signal.signal(signal.SIGTERM, _interrupt)  # `kill` cleans up like Ctrl-C
    try:
        sys.exit(main())
    except PassError as e:
        print(f"mutation pass: {e}", file=sys.stderr)
        sys.exit(2)
    except KeyboardInterrupt:
        print("mutation pass: interrupted (the worktree was removed)", file=sys.stderr)
        sys.exit(130)
