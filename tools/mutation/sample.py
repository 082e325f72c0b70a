"""A fixed, seeded sample of mutmut's mutants of the core, killed before and after a change.

Issue 44 asks that a change to the tests lose nothing: a fixed sample of mutmut mutants of
``stabledist/_src`` is killed at least as often by the tests after the change as before it.
Running the whole suite once per mutant and side is hours on 2 cores, so each side runs a
selection, the same for both (``selection``), and the comparison is made sound where it can
lose something:

``list``
    Every mutant mutmut 3 makes of the modules ``setup.cfg`` names (``only_mutate``), in
    mutmut's own order and with its names (``stabledist._src.lazy.cache.xǁClassǁmethod__mutmut_3``),
    then ``--size`` of them drawn by ``random.Random(--seed).sample`` from the sorted names:
    ``sample.txt`` (the seed and the draw in its header). Each mutant is mutmut's mutation
    applied to the source file itself (no trampoline), so code that runs at import is mutated.

``run --side before|after``
    Each sampled mutant planted in a tree of one side, and pytest run once on the selection,
    ``-x``, the files in order, under a timeout (a hang counts as killed, as a failure to
    import or collect does). The after side is ``--after`` (default ``HEAD``); the before side
    is ``--before``'s tests and ``stabledist.testing`` on the after side's package, so a mutant
    is the same bug on both sides even where the code moved on since ``--before``. A test of
    ``--before`` that fails on that package with no mutant (its behaviour changed on purpose
    since) is left out of the before side, and listed. The selection:

    1. the files mutmut runs for the core (``setup.cfg``: ``pytest_add_cli_args_test_selection``);
    2. every test file the change touched (``git diff --name-only before after -- tests``),
       whichever side has it;
       of both, the tests of a distribution class only for the classes of
       ``SELECTED_CLASSES`` (ten kinds of class, the covering set of the class-independent
       properties among them), every test of no class;
    3. ``--side after`` only, a mutant killed before that survived the selection: the whole
       non-integration suite of the after side, so a kill the change lost is a kill lost,
       not one the selection missed.

    The after side first runs the test that killed the mutant before, when it is still in the
    suite (the cheap case); results go to ``.cache/mutation/sample-<side>.json`` and a run
    resumes where it stopped.

``report``
    The kill counts of both sides, and every mutant killed before and not after.
"""

from __future__ import annotations

import argparse
import configparser
import json
import os
import random
import re
import shutil
import signal
import subprocess
import sys
import tarfile
import time
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
REPO = HERE.parent.parent
SCRATCH = REPO / ".cache" / "mutation"
SAMPLE = HERE / "sample.txt"
SEED = 44
SIZE = 160
TIMEOUT = 900  # seconds per pytest run; a mutant that hangs the tests counts as killed
PYTEST = ("-m", "pytest", "-x", "-q", "-p", "no:cacheprovider", "-p", "no:randomly",
          "-m", "not integration")
# The tests of a distribution class (a parameter naming one) run for these classes only: a plain
# class, a matrix class, a hybrid field, a holder of children, a factory and its two classes,
# a truncated and a censored one, a user's (the covering set of tests/test_properties.py's
# class-independent properties, and the classes it casts to float64 under a scoped switch).
# The tests of no class all run.
SELECTED_CLASSES = ("Normal", "MultivariateNormal", "MaskedDistribution", "MixtureGeneral",
                    "CategoricalLogits", "CategoricalProbs", "TwoSidedTruncatedDistribution",
                    "IntervalCensoredDistribution", "UserDist", "Categorical")

sys.path.insert(0, str(HERE))
from run import environment  # noqa: E402


def config() -> configparser.SectionProxy:
    parser = configparser.ConfigParser()
    parser.read(HERE / "setup.cfg")
    return parser["mutmut"]


def config_list(key: str) -> list[str]:
    return [line.strip() for line in config()[key].splitlines() if line.strip()]


# --- list: every mutant, and the sample ------------------------------------------------------


def mutants_of(path: str, code: str) -> list[tuple[str, str]]:
    """``(mutmut name, mutated source of the whole file)`` for every mutant mutmut makes of
    ``code``: mutations inside a top-level function or a method of a top-level class, numbered
    per function in mutmut's order (``mutmut.mutation.file_mutation``)."""
    import libcst as cst
    from mutmut.mutation.file_mutation import (
        create_mutations,
        deep_replace,
        group_by_top_level_node,
    )
    from mutmut.mutation.trampoline_templates import mangle_function_name

    module_name = path.removesuffix(".py").replace("/", ".")
    cwd = Path.cwd()
    os.chdir(HERE)  # mutmut reads its configuration (setup.cfg) from the working directory
    try:
        module, mutations, _, _ = create_mutations(path, code)
    finally:
        os.chdir(cwd)
    by_function = group_by_top_level_node(mutations)
    out: list[tuple[str, str]] = []

    def add(function: cst.FunctionDef, class_name: str | None) -> None:
        mangled = mangle_function_name(name=function.name.value, class_name=class_name)
        for i, mutation in enumerate(by_function.get(function, ()), 1):
            mutated = deep_replace(function, mutation.original_node, mutation.mutated_node)
            source = module.deep_replace(function, mutated)
            assert isinstance(source, cst.Module)
            out.append((f"{module_name}.{mangled}__mutmut_{i}", source.code))

    for statement in module.body:
        if isinstance(statement, cst.FunctionDef):
            add(statement, None)
        elif isinstance(statement, cst.ClassDef) and isinstance(statement.body, cst.IndentedBlock):
            for method in statement.body.body:
                if isinstance(method, cst.FunctionDef):
                    add(method, statement.name.value)
    return out


def all_mutants(root: Path = REPO, names: Sequence[str] = ()) -> dict[str, tuple[str, str]]:
    """mutmut name -> (file, mutated source), over setup.cfg's ``only_mutate`` files (those
    that make one of ``names``, if given)."""
    table: dict[str, tuple[str, str]] = {}
    for path in config_list("only_mutate"):
        module = path.removesuffix(".py").replace("/", ".") + "."
        if names and not any(n.startswith(module) for n in names):
            continue
        for name, source in mutants_of(path, (root / path).read_text()):
            table[name] = (path, source)
    return table


def draw(names: Sequence[str], seed: int, size: int) -> list[str]:
    return sorted(random.Random(seed).sample(sorted(names), size))


def write_sample(seed: int, size: int) -> None:
    table = all_mutants()
    chosen = draw(list(table), seed, size)
    commit = git("rev-parse", "--short", "HEAD")
    header = [
        f"# {size} of the {len(table)} mutants mutmut 3 makes of tools/mutation/setup.cfg's",
        f"# only_mutate files at {commit} (stabledist/_src unchanged since), drawn by",
        f"# random.Random({seed}).sample(sorted(names), {size}), listed sorted.",
        f"# Regenerate: python tools/mutation/sample.py list --seed {seed} --size {size}",
        f"# seed={seed} size={size} population={len(table)}",
    ]
    SAMPLE.write_text("\n".join([*header, *chosen]) + "\n")
    print(f"{SAMPLE.relative_to(REPO)}: {size} of {len(table)} mutants")


def read_sample() -> list[str]:
    return [line.strip() for line in SAMPLE.read_text().splitlines()
            if line.strip() and not line.startswith("#")]


# --- run: one side ---------------------------------------------------------------------------


def git(*args: str) -> str:
    return subprocess.run(["git", *args], cwd=REPO, text=True, capture_output=True,
                          check=True).stdout.strip()


def export(rev: str, dest: Path) -> None:
    """``stabledist``, ``tests``, ``benchmarks``, ``tools`` (test_types imports the stub
    generator) and ``pyproject.toml`` of ``rev`` in ``dest``."""
    if dest.exists():
        shutil.rmtree(dest)
    dest.mkdir(parents=True)
    _extract(rev, ("stabledist", "tests", "benchmarks", "tools", "pyproject.toml"), dest)


def _extract(rev: str, paths: Sequence[str], dest: Path) -> None:
    archive = dest / "rev.tar"
    with archive.open("wb") as out:
        subprocess.run(["git", "archive", rev, *paths], cwd=REPO, stdout=out, check=True)
    with tarfile.open(archive) as tar:
        tar.extractall(dest, filter="data")
    archive.unlink()


def export_side(side: str, before: str, after: str, dest: Path) -> None:
    """The tree ``side`` runs in ``dest``: ``after`` as it is, or ``before``'s tests, benchmarks
    and ``stabledist.testing`` (the tests' own library) on ``after``'s package."""
    export(before if side == "before" else after, dest)
    if side == "after":
        return
    testing, kept = dest / "stabledist" / "testing", dest / "testing-of-before"
    testing.rename(kept)
    shutil.rmtree(dest / "stabledist")
    _extract(after, ("stabledist",), dest)
    shutil.rmtree(testing)
    kept.rename(testing)


def touched(before: str, after: str) -> list[str]:
    """Test files the change between the two revisions touched (added, changed or removed)."""
    names = git("diff", "--name-only", before, after, "--", "tests").splitlines()
    return sorted(n for n in names if re.fullmatch(r"tests/test_\w+\.py", n))


def selection(tree: Path, files: Sequence[str]) -> list[str]:
    """Node ids of ``files`` (those that exist in ``tree``), in order, less the tests of a
    distribution class outside `SELECTED_CLASSES` (tests/helpers.py's ``class_group``: the
    class a test's parameter names)."""
    present = [f for f in files if (tree / f).exists()]
    out = subprocess.run([sys.executable, "-m", "pytest", "--collect-only", "-q",
                          "-p", "no:cacheprovider", "-m", "not integration", *present],
                         cwd=tree, env=environment(tree), text=True, capture_output=True)
    ids = [line for line in out.stdout.splitlines() if line.startswith("tests/")]
    if out.returncode != 0 or not ids:
        raise SystemExit(f"collection failed in {tree}:\n{out.stdout[-3000:]}{out.stderr[-2000:]}")
    groups = subprocess.run([sys.executable, "-c", "import sys; sys.path.insert(0, 'tests'); "
                             "from helpers import _GROUP_NAMES; print(' '.join(_GROUP_NAMES))"],
                            cwd=tree, env=environment(tree), text=True, capture_output=True,
                            check=True).stdout.split()
    keep = []
    for node in ids:
        _, bracket, params = node.partition("[")
        word = re.split(r"[\[\]\-@]", params, maxsplit=1)[0] if bracket else ""
        if word not in groups or word in SELECTED_CLASSES:
            keep.append(node)
    return keep


_FAILURE = re.compile(r"^(FAILED|ERROR) (\S+)")
_NOT_FOUND = re.compile(r"^ERROR: not found: \S+", re.MULTILINE)


def run_pytest(tree: Path, args: Sequence[str], timeout: int) -> tuple[str, str]:
    """``("passed" | "killed" | "timeout" | "missing", the first failing test or why)``;
    ``"missing"``: pytest found no such node id (exit 4, "not found"), so no test ran."""
    proc = subprocess.Popen([sys.executable, *PYTEST, *args], cwd=tree, env=environment(tree),
                            text=True,
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                            start_new_session=True)
    try:
        output, _ = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        for sig in (signal.SIGTERM, signal.SIGKILL):
            try:
                os.killpg(proc.pid, sig)
                proc.wait(timeout=10)
                break
            except (ProcessLookupError, subprocess.TimeoutExpired):
                continue
        proc.communicate()
        return "timeout", f"timed out after {timeout} s"
    if proc.returncode == 0:
        return "passed", ""
    if proc.returncode == 5:
        return "passed", "no tests collected"
    if proc.returncode == 4 and (missing := _NOT_FOUND.search(output)):
        return "missing", missing[0]  # a node id this tree lacks: no test ran, nothing killed
    for line in output.splitlines():
        if match := _FAILURE.match(line):
            return "killed", match[2]
    return "killed", f"pytest exit {proc.returncode}: {output.strip().splitlines()[-1:]}"


def _sampled(after: str, only: Sequence[str]) -> tuple[list[str], dict[str, tuple[str, str]]]:
    """The sampled mutant names (``only``: those containing one of these) and mutmut's table
    of them; refuses a checkout whose core is not ``after``'s (the mutants are made of it)."""
    mutated_files = config_list("only_mutate")
    if git("diff", "--name-only", after, "--", *mutated_files):
        raise SystemExit(f"{' '.join(mutated_files)} differ between the checkout and {after}: "
                         f"the mutants are made of the checkout's")
    names = [n for n in read_sample() if not only or any(o in n for o in only)]
    table = all_mutants(names=names)
    missing = [n for n in names if n not in table]
    if missing:
        raise SystemExit(f"mutants of sample.txt no longer made: {missing[:5]}")
    return names, table


def _run_jobs(jobs: int, todo: list[str], one: Any) -> None:
    """``one(job, name)`` for every name, each job (a scratch tree) running one at a time."""
    queue = list(todo)
    with ThreadPoolExecutor(jobs) as pool:
        busy: dict[int, Any] = {}
        while queue or busy:
            for job in range(jobs):
                if job not in busy and queue:
                    busy[job] = pool.submit(one, job, queue.pop(0))
            for job, future in list(busy.items()):
                if future.done():
                    future.result()
                    del busy[job]
            time.sleep(0.2)


def _recorded(side: str, names: Sequence[str]
              ) -> tuple[Path, dict[str, dict[str, Any]], dict[str, dict[str, Any]]]:
    """This side's results file and what it holds (a run resumes), and the before side's
    results (the after side needs every mutant's)."""
    results_path = SCRATCH / f"sample-{side}.json"
    results = json.loads(results_path.read_text()) if results_path.exists() else {}
    earlier = (json.loads((SCRATCH / "sample-before.json").read_text())
               if side == "after" and (SCRATCH / "sample-before.json").exists() else {})
    if side == "after" and any(n not in earlier for n in names):
        raise SystemExit("run --side before first (every mutant of the sample)")
    return results_path, results, earlier


def _passing(side: str, tree: Path, args: list[str], timeout: int) -> list[str]:
    """``args`` less, on the before side, the tests that fail with no mutant planted (listed);
    the rest must pass."""
    if side == "before":
        out = subprocess.run([sys.executable, *(a for a in PYTEST if a != "-x"), *args],
                             cwd=tree, env=environment(tree), text=True, capture_output=True,
                             timeout=timeout * 4).stdout
        failing = {m[2] for line in out.splitlines() if (m := _FAILURE.match(line))}
        for node in sorted(failing):
            print(f"left out of the before side (fails with no mutant): {node}", flush=True)
        args = [a for a in args if a not in failing]
    baseline = run_pytest(tree, args, timeout * 4)
    if baseline[0] != "passed":
        raise SystemExit(f"the selection fails without a mutant on {side}: {baseline}")
    return args


def run_side(side: str, before: str, after: str, jobs: int, timeout: int,
             only: Sequence[str]) -> None:
    rev = before if side == "before" else after
    names, table = _sampled(after, only)
    files = list(dict.fromkeys([*config_list("pytest_add_cli_args_test_selection"),
                                *touched(before, after)]))
    results_path, results, earlier = _recorded(side, names)
    trees = [SCRATCH / f"sample-{side}-{job}" for job in range(jobs)]
    for tree in trees:
        export_side(side, before, after, tree)
    args = _passing(side, trees[0], selection(trees[0], files), timeout)
    extra: dict[tuple[str, ...], list[str]] = {}  # files run before -> arguments of the rest
    print(f"{side} = {rev} ({git('rev-parse', '--short', rev)}): {len(names)} mutants, "
          f"selection {' '.join(files)} ({len(args)} pytest arguments)", flush=True)
    # a mutant that survived a smaller selection (files touched since) runs the rest of it
    todo = [n for n in names if n not in results or (
        results[n]["status"] == "passed" and results[n]["stage"] == "selection"
        and set(files) - set(results[n].get("files", files)))]
    start = time.monotonic()

    def one(job: int, name: str) -> None:
        tree = trees[job]
        path, source = table[name]
        original = (tree / path).read_text()
        (tree / path).write_text(source)
        t0 = time.monotonic()
        try:
            status, why, stage = "passed", "", "the test that killed it before"
            killer = earlier.get(name, {}).get("by", "")
            if side == "after" and "::" in killer:
                status, why = run_pytest(tree, [killer], timeout)
                if status == "missing":  # renamed or merged since: the selection decides
                    status = "passed"
            if status == "passed":
                stage = "selection"
                ran = tuple(results.get(name, {}).get("files", ()))
                if ran:
                    rest = [f for f in files if f not in ran]
                    if ran not in extra:
                        extra[ran] = selection(tree, rest)
                    status, why = run_pytest(tree, extra[ran], timeout)
                else:
                    status, why = run_pytest(tree, args, timeout)
                # node ids collected without the mutant, gone with it: it broke collection
                status = "killed" if status == "missing" else status
            if (status == "passed" and side == "after"
                    and earlier.get(name, {}).get("status") != "passed"):
                stage = "whole suite"
                status, why = run_pytest(tree, ["tests"], timeout * 4)
        finally:
            (tree / path).write_text(original)
        results[name] = {"status": status, "by": why, "stage": stage, "files": files,
                         "seconds": f"{time.monotonic() - t0:.0f}"}
        results_path.write_text(json.dumps(results, indent=1, sort_keys=True) + "\n")
        done = sum(1 for n in names if n in results)
        print(f"[{done}/{len(names)}] {name}: {status} {why} ({stage}, "
              f"{time.monotonic() - t0:.0f} s)", flush=True)

    _run_jobs(jobs, todo, one)
    print(f"{side}: {len(todo)} mutants in {(time.monotonic() - start) / 60:.1f} min")


def report() -> int:
    names = read_sample()
    sides = {}
    for side in ("before", "after"):
        path = SCRATCH / f"sample-{side}.json"
        sides[side] = json.loads(path.read_text()) if path.exists() else {}
    for side, results in sides.items():
        ran = [n for n in names if n in results]
        killed = [n for n in ran if results[n]["status"] != "passed"]
        timeouts = sum(1 for n in ran if results[n]["status"] == "timeout")
        print(f"{side}: {len(killed)} of {len(ran)} killed ({timeouts} by a timeout)"
              + ("" if len(ran) == len(names) else f", {len(names) - len(ran)} not run"))
    lost = [n for n in names if sides["before"].get(n, {}).get("status", "passed") != "passed"
            and sides["after"].get(n, {}).get("status") == "passed"]
    for n in lost:
        print(f"  killed before, not after: {n} (before: {sides['before'][n]['by']})")
    return 1 if lost else 0


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = parser.add_subparsers(dest="command", required=True)
    p_list = sub.add_parser("list", help="draw the sample into sample.txt")
    p_list.add_argument("--seed", type=int, default=SEED)
    p_list.add_argument("--size", type=int, default=SIZE)
    p_run = sub.add_parser("run", help="run the sample on one side")
    p_run.add_argument("--side", choices=("before", "after"), required=True)
    p_run.add_argument("--before", required=True,
                       help="the revision whose tests are the 'before' side")
    p_run.add_argument("--after", default="HEAD")
    p_run.add_argument("--jobs", type=int, default=2)
    p_run.add_argument("--timeout", type=int, default=TIMEOUT)
    p_run.add_argument("--only", nargs="*", default=(), help="mutant name substrings")
    sub.add_parser("report", help="the kill counts of both sides")
    args = parser.parse_args(argv)
    if args.command == "list":
        write_sample(args.seed, args.size)
        return 0
    if args.command == "run":
        run_side(args.side, args.before, args.after, args.jobs, args.timeout, args.only)
        return 0
    return report()


if __name__ == "__main__":
    signal.signal(signal.SIGTERM, lambda signum, frame: sys.exit(130))
    sys.exit(main())
