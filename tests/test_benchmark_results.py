"""The published benchmark results (docs/benchmarks.md) were measured on the current code.

`python -m benchmarks --publish` writes the commit it measured into the page. This test fails
when ``stabledist/`` or ``benchmarks/`` changed after that commit, i.e. when the page shows
numbers of code that no longer exists. Fix: commit, run ``make bench ARGS="--publish"`` and
commit docs/benchmarks.md and docs/img/.

It also checks the benchmark registry (benchmarks/registry.py): every benchmark is one complete
record there, and the runner and the report name none. Runtime: well under a second (two git
calls, reading a few source files).
"""

from __future__ import annotations

import ast
import dataclasses
import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))  # the benchmarks package is not installed
DOC = ROOT / "docs" / "benchmarks.md"
CODE = ("stabledist", "benchmarks")
FIX = 'regenerate them: commit, then `make bench ARGS="--publish"`, then commit docs/'


def _git(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["git", *args], cwd=ROOT, capture_output=True, text=True,
                          check=False, timeout=60)


def measured_commit(text: str) -> str | None:
    m = re.search(r"<!-- measured-commit: ([0-9a-f]{40}) -->", text)
    return m.group(1) if m else None


def test_the_page_states_the_commit_it_measured() -> None:
    commit = measured_commit(DOC.read_text())
    assert commit is not None, f"docs/benchmarks.md states no measured commit; {FIX}"
    assert f"Measured at commit `{commit}`" in DOC.read_text()


def test_published_results_are_not_older_than_the_code() -> None:
    commit = measured_commit(DOC.read_text())
    assert commit is not None, f"docs/benchmarks.md states no measured commit; {FIX}"
    known = _git("cat-file", "-e", f"{commit}^{{commit}}")
    assert known.returncode == 0, (
        f"the measured commit {commit} is not in this repository (a shallow clone?); {FIX}")
    diff = _git("diff", "--quiet", commit, "HEAD", "--", *CODE)
    changed = _git("diff", "--stat", commit, "HEAD", "--", *CODE).stdout
    assert diff.returncode == 0, (
        f"docs/benchmarks.md shows results of {commit[:12]}, but {'/ and '.join(CODE)}/ "
        f"changed since:\n{changed}\n{FIX}")


def test_measured_commit_parser_rejects_a_page_without_one() -> None:
    assert measured_commit("Measured at commit `abc`") is None
    sha = "0123456789abcdef0123456789abcdef01234567"
    assert measured_commit(f"<!-- measured-commit: {sha} -->") == sha


# --------------------------------------------------------------------------------------------
# the benchmark registry: one record per benchmark, named nowhere else
# --------------------------------------------------------------------------------------------


def _string_literals(path: Path) -> set[str]:
    """Every string constant of a module (f-string pieces included)."""
    return {node.value for node in ast.walk(ast.parse(path.read_text()))
            if isinstance(node, ast.Constant) and isinstance(node.value, str)}


def _top_level_functions(path: Path) -> set[str]:
    return {node.name for node in ast.parse(path.read_text()).body
            if isinstance(node, ast.FunctionDef)}


def test_runner_and_report_name_no_benchmark() -> None:
    """Adding a benchmark touches benchmarks/registry.py only: the generic code walks the
    records and spells out no benchmark name (so it cannot branch on one)."""
    from benchmarks.registry import BENCHMARKS

    for module in ("runner.py", "report.py"):
        named = _string_literals(ROOT / "benchmarks" / module) & set(BENCHMARKS)
        assert not named, f"benchmarks/{module} names {sorted(named)}: move it to the record"


def test_every_registered_benchmark_is_complete() -> None:
    from benchmarks.registry import BENCHMARKS, REGISTRY, Deferred

    assert [b.name for b in REGISTRY] == list(BENCHMARKS), "names must be unique"
    targets = [t for b in REGISTRY for t in b.targets]
    plots = [p for b in REGISTRY for p in b.plots]
    for record in (*REGISTRY, *targets, *plots):
        for f in dataclasses.fields(record):
            value = getattr(record, f.name)
            assert value is not None and value != "", (record, f.name)
            if f.type.startswith("Callable"):
                assert callable(value), (record, f.name)
            if isinstance(value, Deferred):  # resolved without importing jax
                path = ROOT / "benchmarks" / f"{value.module}.py"
                assert value.function in _top_level_functions(path), (record, f.name)
    for key in ("key", "rank"):
        values = [getattr(t, key) for t in targets]
        assert len(set(values)) == len(values), f"target {key}s must be unique: {values}"
    files = [p.file for p in plots]
    assert len(set(files)) == len(files) and all(
        f.startswith("bench-") and f.endswith(".png") for f in files), files
