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
from typing import TYPE_CHECKING

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))  # the benchmarks package is not installed
DOC = ROOT / "docs" / "benchmarks.md"

if TYPE_CHECKING:
    from benchmarks.timing import BenchResult
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


# --------------------------------------------------------------------------------------------
# what a user reads: the terminal's verdict table, the plots, the page
# --------------------------------------------------------------------------------------------


def _row(bench: str, case: str, unit: str, sd: float | None, np_: float | None,
         nc: float | None = None, speed: bool = True) -> dict:
    from benchmarks.rows import make_row

    return make_row(bench, case, unit, stabledist=sd, numpyro=np_, nocache=nc,
                    ratio=np_ / sd if sd and np_ else None, speed=speed)


def test_verdict_table_has_one_unit_per_column_and_whole_target_lines() -> None:
    from benchmarks.report import WIDTH, compact_lines, row_groups, verdict_lines

    rows = [_row("lazy", "miss: first read (85 cases)", "ns/read", 63_800, 50_300, 48_000),
            _row("lazy", "hit: repeated read (85 cases)", "ns/read", 98, 28, speed=False),
            _row("closure", "mvn_precision 16 per call", "ns/call", 5_260, 24_600),
            _row("closure", "mvn_precision 2048 per call", "ns/call", 405_000, 136e6),
            _row("closure", "mvn_precision 16 first call", "s", 0.047, 0.0409),
            _row("e2e", "gp NUTS", "s", 2.58, 2.62),
            _row("memory", "rss growth", "MB", 0.3, 0.5, speed=False)]
    long = "a criterion long enough to need more than one line of the terminal " * 2
    payload = {"summary": rows, "targets": [
        {"target": "a", "criterion": long, "value": "worst 0.81x", "passed": False,
         "detail": "why"},
        {"target": "b", "criterion": "short", "value": "1.2x", "passed": True, "detail": ""}]}
    lines = compact_lines(payload)
    assert all(len(line) <= WIDTH for line in lines), [x for x in lines if len(x) > WIDTH]
    assert f"{long}: worst 0.81x (why)" in " ".join(x.strip() for x in lines)
    # one heading per benchmark and unit; the rows under it carry bare numbers
    assert [(b, u) for b, u, _ in row_groups(rows)] == [
        ("lazy", "ns/read"), ("closure", "ns/call"), ("closure", "s"), ("e2e", "s"),
        ("memory", "MB")]
    headings = [x for x in lines if x.startswith(("lazy:", "closure:", "e2e:", "memory:"))]
    assert [h.rsplit("[", 1)[-1] for h in headings] == [
        "ns per read]", "µs per call]", "ms]", "s]", "MB]"], headings
    table = "\n".join(lines)
    assert "136,000,000" not in table and "136,000" in table  # µs, like 5.26 in that column
    for unit in (" us", " ms", " ns", " µs", " s "):
        assert not any(unit in x for x in lines if x.startswith("  ")), unit
    assert any(x.startswith("  miss: first read") and x.endswith("0.79x *") for x in lines)
    verdict = " ".join(verdict_lines(payload, 0, False, []))
    assert "1 of 2 judged targets pass; failing: a" in verdict
    assert "Exit status 0 (failed targets fail the run only with --strict)" in verdict


def test_smoke_profile_judges_no_timing_target() -> None:
    from benchmarks.config import PROFILES
    from benchmarks.registry import REGISTRY

    assert not PROFILES["smoke"].judge_timing
    assert all(p.judge_timing for n, p in PROFILES.items() if n != "smoke")
    untimed = {t.key for b in REGISTRY for t in b.targets if not t.timing}
    assert untimed == {"rss", "retrace", "pcache"}


def _flatten_result(classes: int) -> BenchResult:
    from benchmarks.timing import BenchResult, Case

    res = BenchResult("flatten", "t", "ns/round trip", {"numpyro": "", "stabledist": ""}, "")
    for i in range(classes):
        ratio = 2 + 18 * i / classes
        res.cases.append(Case(f"Class{i}", {"kind": "roundtrip"},
                              {"numpyro": [ratio * 1e3] * 3, "stabledist": [1e3] * 3}))
    return res


def _e2e_result(models: int) -> BenchResult:
    from benchmarks.timing import BenchResult, Case

    res = BenchResult("e2e", "t", "s", {"numpyro": "", "stabledist": ""}, "")
    phases = {key: [0.3] for key in ("trace", "lower", "compile", "run", "xla_compiles")}
    for m in range(models):
        for method in ("NUTS", "SVI"):
            res.cases.append(Case(f"m{m} {method}", {"model": f"m{m}", "method": method},
                                  {"numpyro": [1.2], "stabledist": [1.1]},
                                  extra={"phases": {"numpyro": phases,
                                                    "stabledist": phases}}))
    return res


def test_bar_plots_have_at_most_15_bars_per_panel() -> None:
    """The page's plots stay readable: a result with ~100 cases is summarized."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from benchmarks.registry import BENCHMARKS, MAX_BARS, bar_counts

    assert MAX_BARS == 15
    draw = {p.file: p.draw for b in BENCHMARKS.values() for p in b.plots}
    for file, res in (("bench-flatten.png", _flatten_result(100)),
                      ("bench-flatten.png", _flatten_result(9)),
                      ("bench-e2e.png", _e2e_result(5)), ("bench-e2e.png", _e2e_result(12))):
        fig = draw[file](res)
        counts = bar_counts(fig)
        plt.close(fig)
        assert counts and max(counts) <= MAX_BARS, (file, len(res.cases), counts)
        assert sum(counts) >= min(len(res.cases), MAX_BARS), (file, counts)


def test_the_page_opens_with_a_verdict_and_says_when_numpyro_gains_alike() -> None:
    text = DOC.read_text()
    assert "\\|" not in text, "a literal \\| renders as such inside a table's code span"
    assert text.index("<!-- BEGIN GENERATED: in-short -->") < text.index("## Run it")
    section = text.split("### When numpyro gets the same gain", 1)[1].split("\n## ", 1)[0]
    for needed in ("before `jit`", "pmap", "inside models", "`vmap` over instances"):
        assert needed in section, needed
