"""The benchmark's own machinery: the registry (every benchmark one complete record, named
nowhere else), the verdict table, the plots, the page, the runner, the constants benchmark and
the eager guards. In ``make test-bench``, not ``make test``; seconds (the smoke run is in
test_smoke.py).
"""

from __future__ import annotations

import ast
import dataclasses
import sys
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))  # the benchmarks package is not installed
DOC = ROOT / "docs" / "benchmarks.md"

if TYPE_CHECKING:
    from stabledist.benchmark._measure import BenchResult


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
         nc: float | None = None, speed: bool = True, verdict: str | None = None) -> dict:
    """A summary row; ``verdict`` given: a judged row with that verdict."""
    from stabledist.benchmark._rows import make_row

    return make_row(bench, case, unit, stabledist=sd, numpyro=np_, nocache=nc,
                    ratio=np_ / sd if sd and np_ else None, speed=speed, verdict=verdict,
                    judged=verdict is not None)


def test_verdict_table_has_one_unit_per_column_and_whole_target_lines() -> None:
    from benchmarks.report import WIDTH, compact_lines, verdict_lines
    from stabledist.benchmark._rows import row_groups

    rows = [_row("lazy", "miss: first read (85 cases)", "ns/read", 63_800, 50_300, 48_000),
            _row("lazy", "hit: repeated read (85 cases)", "ns/read", 98, 28, speed=False),
            _row("closure", "mvn_precision 16 per call", "ns/call", 5_260, 24_600,
                 verdict="faster"),
            _row("closure", "mvn_precision 2048 per call", "ns/call", 405_000, 136e6,
                 verdict="faster"),
            _row("closure", "mvn_precision 16 first call", "s", 0.047, 0.0409,
                 verdict="slower"),
            _row("e2e", "gp NUTS", "s", 2.58, 2.62, verdict="same"),
            _row("e2e", "gp SVI", "s", 2.58, 2.50, verdict="unresolved"),
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
    # a judged row ends in its verdict (none when the same); an unjudged row in nothing
    assert any(x.startswith("  miss: first read") and x.endswith("0.79x") for x in lines)
    assert any(x.startswith("  mvn_precision 16 per call") and x.endswith("4.68x faster")
               for x in lines)
    assert any(x.startswith("  mvn_precision 16 first call") and x.endswith("0.87x slower")
               for x in lines)
    assert any(x.startswith("  gp NUTS") and x.endswith("1.02x") for x in lines)
    assert any(x.startswith("  gp SVI") and x.endswith("0.97x ?") for x in lines)
    verdict = " ".join(verdict_lines(payload, 0, False, []))
    assert "1 of 2 judged targets pass; failing: a" in verdict
    assert ("Of 5 judged timed rows (95% interval of the paired ratio), stabledist is faster "
            "in 2, the same in 1, slower in 1, unresolved in 1 (one repetition)") in verdict
    assert "Exit status 0 (failed targets fail the run only with --strict)" in verdict


def test_smoke_profile_judges_no_timing_target() -> None:
    from benchmarks.config import PROFILES
    from benchmarks.registry import REGISTRY

    assert not PROFILES["smoke"].judge_timing
    assert all(p.judge_timing for n, p in PROFILES.items() if n != "smoke")
    untimed = {t.key for b in REGISTRY for t in b.targets if not t.timing}
    assert untimed == {"rss", "retrace", "pcache", "scale_gc", "scale_tables"}


def _flatten_result(classes: int) -> BenchResult:
    from stabledist.benchmark._measure import BenchResult, Case

    res = BenchResult("flatten", "t", "ns/round trip", {"numpyro": "", "stabledist": ""}, "")
    for i in range(classes):
        ratio = 2 + 18 * i / classes
        res.cases.append(Case(f"Class{i}", {"kind": "roundtrip"},
                              {"numpyro": [ratio * 1e3] * 3, "stabledist": [1e3] * 3}))
    return res


def _e2e_result(models: int) -> BenchResult:
    from stabledist.benchmark._measure import BenchResult, Case

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

# --------------------------------------------------------------------------------------------
# a run that fits a device lease: the accelerator profile, the deadline, results kept
# --------------------------------------------------------------------------------------------


def test_gpu_runs_the_accelerator_profile_with_a_deadline_and_says_so() -> None:
    from benchmarks.__main__ import parse_args, profile_of
    from benchmarks.config import (
        ACCELERATOR_CHANGES,
        DEADLINE_MIN,
        PROFILES,
        accelerator_note,
    )

    gpu = parse_args(["--device", "gpu", "--out", "x"])
    assert profile_of(gpu) is PROFILES["accelerator"] and gpu.deadline == DEADLINE_MIN
    assert parse_args(["--device", "tpu", "--out", "x"]).profile == "accelerator"
    cpu = parse_args(["--out", "x"])
    assert cpu.profile == "default" and cpu.deadline == 0
    whole = parse_args(["--device", "gpu", "--default", "--deadline", "0", "--out", "x"])
    assert whole.profile == "default" and whole.deadline == 0
    assert parse_args(["--device", "gpu", "--quick", "--out", "x"]).profile == "quick"
    accelerator, default = PROFILES["accelerator"], PROFILES["default"]
    for field, value in ACCELERATOR_CHANGES.items():
        assert getattr(accelerator, field) == value != getattr(default, field), field
    note = accelerator_note(accelerator)
    assert "10-minute" in note and "e2e_reps 3 -> 2" in note and "with angles" in note
    assert "NUTS and SVI" in note
    assert accelerator_note(default) == ""
    with pytest.raises(SystemExit):
        parse_args(["--deadline", "-1"])


def _fake_record(name: str, run: object, seconds: float = 1.0) -> object:
    from benchmarks.registry import Benchmark
    from stabledist.benchmark._rows import single

    return Benchmark(name=name, summary=f"{name} summary", heading=name, run=run,
                     steps=lambda p: 1, seconds=lambda p: seconds,
                     rows=lambda res: [single(res.name, c, res.unit) for c in res.cases])


def _fake_result(name: str, cases: int) -> BenchResult:
    from stabledist.benchmark._measure import BenchResult, Case

    res = BenchResult(name, "t", "s", {"numpyro": "", "stabledist": ""}, "")
    for i in range(cases):
        res.cases.append(Case(f"case {i}", {}, {"numpyro": [1.0, 1.1], "stabledist": [1.0, 1.0]}))
    return res


def test_each_benchmark_is_written_when_it_ends_and_a_stopped_run_keeps_its_cases(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """results.json and report.md are rewritten after every benchmark; a stop (deadline,
    SIGTERM) keeps the cases the running benchmark finished and starts no other."""
    import json

    from benchmarks import runner
    from benchmarks.config import PROFILES
    from benchmarks.registry import BENCHMARKS
    from stabledist.benchmark._measure import Stopped

    def second(profile: object) -> None:
        written = json.loads((tmp_path / "results.json").read_text())
        assert list(written["benchmarks"]) == ["fake_a"]  # the first one, already on disk
        _fake_result("fake_b", 1)  # registered as the live result, then the stop
        raise Stopped("deadline passed before step: next")

    for name, run in (("fake_a", lambda p: _fake_result("fake_a", 2)), ("fake_b", second),
                      ("fake_c", lambda p: _fake_result("fake_c", 1))):
        monkeypatch.setitem(BENCHMARKS, name, _fake_record(name, run))
    status, payload = runner.run(PROFILES["smoke"], ["fake_a", "fake_b", "fake_c"], tmp_path,
                                 "cpu", "test")
    assert status == 0
    written = json.loads((tmp_path / "results.json").read_text())
    assert [len(b["cases"]) for b in written["benchmarks"].values()] == [2, 1]
    assert written["benchmarks"]["fake_b"]["extra"]["stopped"].endswith("after 1 case(s)")
    assert written["skipped"] == {"fake_c": "not started: the run was stopped"}
    report = (tmp_path / "report.md").read_text()
    assert "Stopped: deadline passed" in report and "fake_c (not started" in report
    assert [r["case"] for r in payload["summary"]] == ["case 0", "case 1", "case 0"]


def test_a_deadline_skips_a_benchmark_planned_to_end_after_it(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from benchmarks import runner
    from benchmarks.config import PROFILES
    from benchmarks.registry import BENCHMARKS
    from stabledist.benchmark._measure import TRACKER, run_clock

    monkeypatch.setitem(BENCHMARKS, "fake_a", _fake_record(
        "fake_a", lambda p: _fake_result("fake_a", 1), seconds=1.0))
    monkeypatch.setitem(BENCHMARKS, "fake_b", _fake_record(
        "fake_b", lambda p: _fake_result("fake_b", 1), seconds=10_000.0))
    _, payload = runner.run(PROFILES["smoke"], ["fake_a", "fake_b"], tmp_path, "cpu", "t",
                            deadline_s=run_clock() + 600)
    assert list(payload["benchmarks"]) == ["fake_a"]
    assert "past the" in payload["skipped"]["fake_b"]
    assert TRACKER.deadline is not None
    runner.run(PROFILES["smoke"], ["fake_a"], tmp_path, "cpu", "t")
    assert TRACKER.deadline is None  # a run without a deadline clears the last one


def test_host_device_table_looks_each_cell_up_by_its_variant() -> None:
    """Cases record their variants in the order they ran, which rotates: a column must not
    take its values from another variant."""
    from benchmarks.report import host_device_table
    from stabledist.benchmark._measure import Case

    def split(ns: float) -> dict:
        return {"host_ns": ns, "device_ns": ns / 10}

    cases = [Case("a", extra={"host_device": {"numpyro": split(1e6), "stabledist": split(1e3)}}),
             Case("b", extra={"host_device": {"stabledist": split(2e3), "numpyro": split(2e6)}})]
    lines = host_device_table(cases)
    assert "numpyro host / device | stabledist host / device" in lines[2]
    assert lines[4] == "| a | 1 ms / 100 us | 1 us / 100 ns |"
    assert lines[5] == "| b | 2 ms / 200 us | 2 us / 200 ns |"


# --------------------------------------------------------------------------------------------
# the constants benchmark: modes, rows, the compiled programs' operations
# --------------------------------------------------------------------------------------------


def _constants_result(problems: int) -> BenchResult:
    from stabledist.benchmark._measure import BenchResult, Case

    res = BenchResult("constants", "t", "ns/call", {}, "")
    ops = {"transcendental": 13, "linear algebra": 0, "parameters": 12}
    for i in range(problems):
        for mode, variants in (("as jit arguments", ("stabledist", "numpyro",
                                                     "stabledist_closure", "stabledist_eager")),
                               ("simplified constants", ("stabledist", "numpyro",
                                                         "stabledist_eager"))):
            samples = {v: [1e4 * (j + 1), 1.1e4 * (j + 1)] for j, v in enumerate(variants)}
            res.cases.append(Case(
                f"{mode}: truncnormal_logp {10 ** i}", {"family": "truncnormal_logp"},
                samples, extra={"first_call_s": {v: 0.5 for v in variants},
                                "first_call_reps": {v: [0.5, 0.4] for v in variants},
                                "program_ops": {v: ops for v in variants}}))
    return res


def test_constants_rows_are_labelled_by_mode_and_judged() -> None:
    from benchmarks.registry import BENCHMARKS

    rows = BENCHMARKS["constants"].rows(_constants_result(2))
    assert [r["case"] for r in rows[:2]] == ["as jit arguments: truncnormal_logp 1 per call",
                                             "simplified constants: truncnormal_logp 1 per call"]
    assert len(rows) == 8 and all(r["judged"] for r in rows)
    assert sum(r["case"].endswith("first call") for r in rows) == 4
    arguments = rows[0]["note"]
    assert "stabledist closure (simplified constants off) 31.5 us" in arguments
    assert "13 transcendental op(s), 12 argument(s)" in arguments
    details = "\n".join(BENCHMARKS["constants"].details(_constants_result(1)))
    assert details.count("| as jit arguments: truncnormal_logp 1 |") == 4


def test_constants_plot_has_at_most_15_bars_per_panel() -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from benchmarks.registry import BENCHMARKS, MAX_BARS, bar_counts

    (plot,) = BENCHMARKS["constants"].plots
    for problems in (1, 3, 5):
        fig = plot.draw(_constants_result(problems))
        counts = bar_counts(fig)
        plt.close(fig)
        assert max(counts) <= MAX_BARS and sum(counts) == 2 * 5 * problems, counts


def test_program_ops_counts_the_entry_arguments_and_the_folded_work() -> None:
    from benchmarks.bench_constants import MODES, program_ops

    hlo = """HloModule m

%fused (p0: f32[4], p1: f32[4]) -> f32[4] {
  %p0 = f32[4]{0} parameter(0)
  %p1 = f32[4]{0} parameter(1)
  %e = f32[4]{0} erf(f32[4]{0} %p0)
  %l = f32[4]{0} log(f32[4]{0} %p1)
  ROOT %m = f32[4]{0} multiply(f32[4]{0} %e, f32[4]{0} %l)
}

ENTRY %main (Arg_0: f32[4], x: f32[4]) -> f32[4] {
  %Arg_0 = f32[4]{0} parameter(0)
  %x = f32[4]{0} parameter(1)
  ROOT %f = f32[4]{0} fusion(f32[4]{0} %Arg_0, f32[4]{0} %x), kind=kLoop, calls=%fused
}
"""
    assert program_ops(hlo) == {"transcendental": 2, "linear algebra": 0, "parameters": 2}
    assert {m.flag for m in MODES.values()} == {"0", "1"}
    assert len({m.label for m in MODES.values()}) == len(MODES)


# --------------------------------------------------------------------------------------------
# the eager rows: regression guards against the published floor (issue 45)
# --------------------------------------------------------------------------------------------


def _lazy_result(ratio: float) -> BenchResult:
    """A lazy result whose every case runs at numpyro/stabledist ``ratio``, with a little
    scatter over four repetitions."""
    from stabledist.benchmark._measure import BenchResult, Case

    res = BenchResult("lazy", "t", "ns/read", {"numpyro": "", "stabledist": ""}, "")
    base = [100.0, 102.0, 98.0, 101.0]
    noise = [1.0, 1.01, 0.99, 1.005]
    for kind, name in (("first", "first"), ("miss", "miss:A.b"), ("miss", "miss:C.d"),
                       ("hit", "hit:A.b")):
        samples = {"numpyro": base, "stabledist": [b / ratio * e for b, e in zip(base, noise)],
                   "nocache": base, "plain": [b / 3 for b in base]}
        res.cases.append(Case(name, {"kind": kind}, samples))
    return res


def test_eager_rows_are_guards_failing_only_below_the_published_floor() -> None:
    from benchmarks.registry import BENCHMARKS, FLOORS

    targets = {t.key: t for t in BENCHMARKS["lazy"].targets}
    assert set(targets) == set(FLOORS) == {"first_read", "miss", "hit"}
    for key, target in targets.items():
        assert target.criterion.startswith("regression guard") and str(FLOORS[key].ratio) in \
            target.criterion
        at_floor = target.check(_lazy_result(FLOORS[key].ratio))
        assert at_floor is not None and at_floor.passed is True, (key, at_floor)
        assert "published at" in at_floor.detail
        within = target.check(_lazy_result(FLOORS[key].ratio * 0.96))  # the floor's 5%
        assert within is not None and within.passed is True, (key, within)
        below = target.check(_lazy_result(FLOORS[key].ratio * 0.9))
        assert below is not None and below.passed is False, (key, below)
        assert "[" in below.value  # the run's interval
    rows = BENCHMARKS["lazy"].rows(_lazy_result(0.5))
    assert all("guard" in r["note"] for r in rows if not r["case"].startswith("miss, worst"))


def test_eta_error_is_the_worst_estimate_after_the_first_minute() -> None:
    """The run says how good its time-left estimates were: lines before 60 s and those
    with under 30 s left do not count."""
    from stabledist.benchmark._measure import eta_error

    history = [(10.0, 500.0), (60.0, 130.0), (100.0, 100.0), (150.0, 40.0), (190.0, 50.0)]
    err = eta_error(history, end=200.0)
    assert err is not None and err["lines"] == 3
    assert err["worst"] == pytest.approx(0.2) and err["at"] == 150.0  # 40 s for 50 s
    assert eta_error([(10.0, 5.0)], end=200.0) is None
