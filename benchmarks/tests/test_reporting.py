"""The benchmark's own machinery: the registry (every benchmark one complete record, named
nowhere else), the verdict table, the plots, the page, the command line, the runner and its
progress, the constants benchmark and the eager guards. In ``make test-bench``, not ``make
test``; seconds (the smoke run is in test_smoke.py).
"""

from __future__ import annotations

import ast
import dataclasses
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from benchmarks.config import PROFILES
from benchmarks.registry import BENCHMARKS, MAX_BARS, REGISTRY, Benchmark, bar_counts
from stabledist.benchmark._measure import BenchResult, Case
from stabledist.benchmark._rows import make_row

ROOT = Path(__file__).resolve().parents[2]
DOC = ROOT / "docs" / "benchmarks.md"
PAIR = {"numpyro": "", "stabledist": ""}


def test_every_benchmark_is_one_complete_record_named_nowhere_else() -> None:
    """Adding a benchmark touches benchmarks/registry.py only: the generic code walks the
    records and spells out no benchmark name (so it cannot branch on one)."""
    from benchmarks.registry import Deferred

    for module in ("runner.py", "report.py"):
        tree = ast.parse((ROOT / "benchmarks" / module).read_text())
        named = set(BENCHMARKS) & {node.value for node in ast.walk(tree)
                                   if isinstance(node, ast.Constant)}  # f-string pieces too
        assert not named, f"benchmarks/{module} names {sorted(named)}: move it to the record"
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
                module = ast.parse((ROOT / "benchmarks" / f"{value.module}.py").read_text())
                assert value.function in {node.name for node in module.body
                                          if isinstance(node, ast.FunctionDef)}, (record, f.name)
    for key in ("key", "rank"):
        values = [getattr(t, key) for t in targets]
        assert len(set(values)) == len(values), f"target {key}s must be unique: {values}"
    files = [p.file for p in plots]
    assert len(set(files)) == len(files) and all(
        f.startswith("bench-") and f.endswith(".png") for f in files), files


def _row(bench: str, case: str, unit: str, sd: float | None, np_: float | None,
         nc: float | None = None, speed: bool = True, verdict: str | None = None) -> dict:
    """A summary row; ``verdict`` given: a judged row with that verdict."""
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
    for start, end in (("miss: first read", "0.79x"), ("mvn_precision 16 per call", "4.68x faster"),
                       ("mvn_precision 16 first call", "0.87x slower"), ("gp NUTS", "1.02x"),
                       ("gp SVI", "0.97x ?")):
        assert any(x.startswith(f"  {start}") and x.endswith(end) for x in lines), start
    verdict = " ".join(verdict_lines(payload, 0, False, []))
    assert "1 of 2 judged targets pass; failing: a" in verdict
    assert ("Of 5 judged timed rows (95% interval of the paired ratio), stabledist is faster "
            "in 2, the same in 1, slower in 1, unresolved in 1 (one repetition)") in verdict
    assert "Exit status 0 (failed targets fail the run only with --strict)" in verdict


def _flatten_result(classes: int) -> BenchResult:
    return BenchResult("flatten", "t", "ns/round trip", PAIR, "", [
        Case(f"Class{i}", {"kind": "roundtrip"},
             {"numpyro": [(2 + 18 * i / classes) * 1e3] * 3, "stabledist": [1e3] * 3})
        for i in range(classes)])


def _e2e_result(models: int) -> BenchResult:
    phases = {key: [0.3] for key in ("trace", "lower", "compile", "run", "xla_compiles")}
    return BenchResult("e2e", "t", "s", PAIR, "", [
        Case(f"m{m} {method}", {"model": f"m{m}", "method": method},
             {"numpyro": [1.2], "stabledist": [1.1]},
             extra={"phases": {"numpyro": phases, "stabledist": phases}})
        for m in range(models) for method in ("NUTS", "SVI")])


def _constants_result(problems: int) -> BenchResult:
    ops = {"transcendental": 13, "linear algebra": 0, "parameters": 12}
    res = BenchResult("constants", "t", "ns/call", {}, "")
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


def test_bar_plots_have_at_most_15_bars_per_panel() -> None:
    """The page's plots stay readable: a result with ~100 cases is summarized."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    assert MAX_BARS == 15
    draw = {p.file: p.draw for b in BENCHMARKS.values() for p in b.plots}
    for file, res in (("bench-flatten.png", _flatten_result(100)),
                      ("bench-flatten.png", _flatten_result(9)),
                      ("bench-e2e.png", _e2e_result(5)), ("bench-e2e.png", _e2e_result(12))):
        fig = draw[file](res)
        assert fig is not None, file
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


def test_the_command_line_picks_the_profile_deadline_and_strictness() -> None:
    """--device gpu/tpu runs the accelerator profile with a deadline and says what it
    changes; --e2e-reps overrides a profile and says so; --publish implies --strict."""
    from benchmarks.__main__ import parse_args, profile_of
    from benchmarks.config import ACCELERATOR_CHANGES, DEADLINE_MIN, accelerator_note

    gpu = parse_args(["--device", "gpu", "--out", "x"])
    assert profile_of(gpu) is PROFILES["accelerator"] and gpu.deadline == DEADLINE_MIN
    assert parse_args(["--device", "tpu", "--out", "x"]).profile == "accelerator"
    cpu = parse_args(["--out", "x"])
    assert cpu.profile == "default" and profile_of(cpu) is PROFILES["default"]
    assert cpu.deadline == 0 and cpu.strict is False
    # the default profile leaves out the benchmark with no target of its own; --only names it
    assert cpu.only == [n for n in BENCHMARKS if n != "constants"]
    assert parse_args(["--full", "--out", "x"]).only == list(BENCHMARKS)
    assert parse_args(["--publish", "--out", "x"]).only == list(BENCHMARKS)
    assert parse_args(["--only", "constants", "--out", "x"]).only == ["constants"]
    whole = parse_args(["--device", "gpu", "--default", "--deadline", "0", "--out", "x"])
    assert whole.profile == "default" and whole.deadline == 0
    assert parse_args(["--device", "gpu", "--quick", "--out", "x"]).profile == "quick"
    accelerator, default = PROFILES["accelerator"], PROFILES["default"]
    for field, value in ACCELERATOR_CHANGES.items():
        assert getattr(accelerator, field) == value != getattr(default, field), field
    note = accelerator_note(accelerator)
    assert "10-minute" in note and "e2e_reps 5 -> 2" in note and "with regression, angles" in note
    assert "NUTS and SVI" in note
    assert accelerator_note(default) == ""
    ns = parse_args(["--only", "lazy,flatten", "--quick", "--out", "x"])
    assert ns.only == ["lazy", "flatten"] and ns.profile == "quick" and ns.out == "x"
    profile = profile_of(parse_args(["--e2e-reps", "10", "--quick", "--out", "x"]))
    assert profile.e2e_reps == 10 and profile.label == "quick, e2e_reps=10"
    assert profile.as_dict()["label"] == profile.label and PROFILES["quick"].label == "quick"
    assert profile.e2e_models == PROFILES["quick"].e2e_models
    assert parse_args(["--strict", "--out", "x"]).strict is True
    assert parse_args(["--publish", "--out", "x"]).strict is True
    assert parse_args(["--publish", "--no-strict", "--out", "x"]).strict is False
    for bad in (["--deadline", "-1"], ["--only", "nonsense"], ["--e2e-reps", "0"]):
        with pytest.raises(SystemExit):
            parse_args(bad)


def test_exit_status_is_0_unless_strict_and_a_target_failed() -> None:
    """And the smoke profile (``--smoke --strict`` in the tests) judges no timing target."""
    from benchmarks.runner import EXIT_ERROR, EXIT_OK, EXIT_TARGET, exit_status

    assert (EXIT_OK, EXIT_ERROR, EXIT_TARGET) == (0, 1, 3)
    failed = [{"passed": True}, {"passed": False}, {"passed": None}]
    passed = [{"passed": True}, {"passed": None}]
    assert exit_status([], failed, strict=False) == EXIT_OK
    assert exit_status([], failed, strict=True) == EXIT_TARGET
    assert exit_status([], passed, strict=True) == EXIT_OK
    assert exit_status(["lazy"], passed, strict=False) == EXIT_ERROR
    assert not PROFILES["smoke"].judge_timing
    assert all(p.judge_timing for n, p in PROFILES.items() if n != "smoke")
    untimed = {t.key for b in REGISTRY for t in b.targets if not t.timing}
    assert untimed == {"rss", "retrace", "pcache", "scale_gc", "scale_tables"}


def _fake_record(name: str, run: Callable[[Any], BenchResult], seconds: float) -> Benchmark:
    from stabledist.benchmark._rows import single

    return Benchmark(name=name, summary=f"{name} summary", heading=name, run=run,
                     steps=lambda p: 1, seconds=lambda p: seconds,
                     rows=lambda res: [single(res.name, c, res.unit) for c in res.cases])


def _fake_result(name: str, cases: int) -> BenchResult:
    return BenchResult(name, "t", "s", PAIR, "", [
        Case(f"case {i}", {}, {"numpyro": [1.0, 1.1], "stabledist": [1.0, 1.0]})
        for i in range(cases)])


def test_a_stopped_run_keeps_its_cases_and_a_deadline_skips_what_would_end_after_it(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """results.json and report.md are rewritten after every benchmark; a stop (deadline,
    SIGTERM) keeps the cases the running benchmark finished and starts no other."""
    from benchmarks import runner
    from stabledist.benchmark._measure import TRACKER, Stopped, run_clock

    def second(profile: object) -> BenchResult:
        written = json.loads((tmp_path / "results.json").read_text())
        assert list(written["benchmarks"]) == ["fake_a"]  # the first one, already on disk
        _fake_result("fake_b", 1)  # registered as the live result, then the stop
        raise Stopped("deadline passed before step: next")

    for name, run, seconds in (("fake_a", lambda p: _fake_result("fake_a", 2), 1.0),
                               ("fake_b", second, 1.0),
                               ("fake_c", lambda p: _fake_result("fake_c", 1), 10_000.0)):
        monkeypatch.setitem(BENCHMARKS, name, _fake_record(name, run, seconds))
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
    # fake_c is planned to take 10,000 s: past a deadline 600 s away, so never started
    _, payload = runner.run(PROFILES["smoke"], ["fake_a", "fake_c"], tmp_path, "cpu", "t",
                            deadline_s=run_clock() + 600)
    assert list(payload["benchmarks"]) == ["fake_a"]
    assert "past the" in payload["skipped"]["fake_c"]
    assert TRACKER.deadline is not None
    runner.run(PROFILES["smoke"], ["fake_a"], tmp_path, "cpu", "t")
    assert TRACKER.deadline is None  # a run without a deadline clears the last one


def test_progress_tracker_counts_steps_estimates_and_scores_its_estimates() -> None:
    """The run says how good its time-left estimates were (`eta_error`): lines before 60 s
    and those with under 30 s left do not count."""
    from stabledist.benchmark._measure import SPEED_PRIOR_S, Tracker, eta_error

    t = Tracker(heartbeat=1e9)
    t.set_plan({"a": (2, 10.0), "b": (3, 30.0)})
    assert t.counts() == (0, 5) and t.eta() == 40.0
    t.begin("a")
    t.step("a1")
    t.step("a2")
    t.end()
    t.begin("b", steps=4)  # the real count, once known
    assert t.counts() == (2, 6) and "2 of 6" in t.line("x")
    t.step("b1-b2", weight=2)  # a long step counts for two of the plan
    assert t.counts() == (4, 6)
    lines = len(t.history)
    t.line("y")  # each progress line records its estimate of the time left
    assert len(t.history) == lines + 1 and t.history[-1][1] >= 0
    # a step running past its plan slows the estimate before it ends
    slow = Tracker(heartbeat=1e9)
    slow.set_plan({"a": (10, 100.0)})
    slow.begin("a")
    slow.step("a1", weight=5)  # planned 50 s
    slow.step_t0 -= 150.0  # running for 150 s: three times its plan
    speed = (150.0 + SPEED_PRIOR_S) / (50.0 + SPEED_PRIOR_S)  # shrunk toward the plan
    assert speed > 1.5
    assert slow.eta() == pytest.approx((50.0 + 150.0 / 4 / speed) * speed, rel=0.01)
    history = [(10.0, 500.0), (60.0, 130.0), (100.0, 100.0), (150.0, 40.0), (190.0, 50.0)]
    err = eta_error(history, end=200.0)
    assert err is not None and err["lines"] == 3
    assert err["worst"] == pytest.approx(0.2) and err["at"] == 150.0  # 40 s for 50 s
    assert eta_error([(10.0, 5.0)], end=200.0) is None


def test_host_device_table_looks_each_cell_up_by_its_variant() -> None:
    """Cases record their variants in the order they ran, which rotates: a column must not
    take its values from another variant."""
    from benchmarks.report import host_device_table

    def split(ns: float) -> dict:
        return {"host_ns": ns, "device_ns": ns / 10}

    cases = [Case("a", extra={"host_device": {"numpyro": split(1e6), "stabledist": split(1e3)}}),
             Case("b", extra={"host_device": {"stabledist": split(2e3), "numpyro": split(2e6)}})]
    lines = host_device_table(cases)
    assert "numpyro host / device | stabledist host / device" in lines[2]
    assert lines[4] == "| a | 1 ms / 100 us | 1 us / 100 ns |"
    assert lines[5] == "| b | 2 ms / 200 us | 2 us / 200 ns |"


def test_e2e_rows_start_from_cleared_jax_caches(monkeypatch: pytest.MonkeyPatch) -> None:
    """jax keeps every compiled program until ``clear_caches``; without clearing, ~140 NUTS runs
    in one process (``--e2e-reps 10``) exhausted the process's memory maps and crashed. Each
    row clears them before its untimed warm-up, so a run's size is bounded by one row."""
    import jax

    from benchmarks import bench_e2e

    events: list[str] = []
    monkeypatch.setattr(jax, "clear_caches", lambda: events.append("clear"))

    def fake_run(variant: str, model: str, method: str, profile: object,
                 **kw: object) -> dict:
        events.append(f"{model} {method} {variant}{' warm-up' if kw else ''}")
        phases = dict.fromkeys(("trace", "lower", "compile", "run", "xla_compiles"), 0.0)
        return {"seconds": 1.0, "phases": phases, "summary": {}}

    monkeypatch.setattr(bench_e2e, "run_once", fake_run)
    profile = dataclasses.replace(PROFILES["quick"], e2e_models=("tiny", "gp"),
                                  e2e_methods=("SVI",), e2e_reps=2)
    result = bench_e2e.bench_e2e(profile)
    assert [c.name for c in result.cases] == ["tiny SVI", "gp SVI"]
    rows = "".join("|" if e == "clear" else "." for e in events)
    assert rows == "|......|......", events  # per row: clear, 2 warm-ups, 2 x 2 timed runs


HLO = """HloModule m

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


def test_constants_rows_are_labelled_by_mode_and_judged_and_count_program_ops() -> None:
    """Ops: the entry's arguments and the work folded into the program's fusions."""
    from benchmarks.bench_constants import MODES, program_ops

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
    assert program_ops(HLO) == {"transcendental": 2, "linear algebra": 0, "parameters": 2}
    assert {m.flag for m in MODES.values()} == {"0", "1"}
    assert len({m.label for m in MODES.values()}) == len(MODES)


def _lazy_result(ratio: float) -> BenchResult:
    """A lazy result whose every case runs at numpyro/stabledist ``ratio``, with a little
    scatter over four repetitions."""
    base = [100.0, 102.0, 98.0, 101.0]
    noise = [1.0, 1.01, 0.99, 1.005]
    samples = {"numpyro": base, "stabledist": [b / ratio * e for b, e in zip(base, noise)],
               "nocache": base, "plain": [b / 3 for b in base], "getter": base}
    return BenchResult("lazy", "t", "ns/read", PAIR, "", [
        Case(name, {"kind": kind}, samples) for kind, name in (
            ("first", "first"), ("miss", "miss:A.b"), ("miss", "miss:C.d"), ("hit", "hit:A.b"))])


def test_eager_rows_are_guards_failing_only_below_their_floor() -> None:
    """Regression guards: the first reads against the published floor (issue 45), the hit
    against a bare getter timed beside it (its reference variant)."""
    from benchmarks.registry import FLOORS

    targets = {t.key: t for t in BENCHMARKS["lazy"].targets}
    assert set(targets) == set(FLOORS) == {"first_read", "miss", "hit"}
    assert FLOORS["hit"].reference == "getter"
    for key, target in targets.items():
        floor = FLOORS[key]
        assert target.criterion.startswith("regression guard") and str(floor.ratio) in \
            target.criterion
        at_floor = target.check(_lazy_result(floor.ratio))
        assert at_floor is not None and at_floor.passed is True, (key, at_floor)
        assert floor.source in at_floor.detail
        within = target.check(_lazy_result(floor.ratio * (1 - 0.8 * floor.spread)))
        assert within is not None and within.passed is True, (key, within)
        below = target.check(_lazy_result(floor.ratio * (1 - floor.spread) * 0.94))
        assert below is not None and below.passed is False, (key, below)
        assert "[" in below.value  # the run's interval
    rows = BENCHMARKS["lazy"].rows(_lazy_result(0.5))
    assert all("guard" in r["note"] for r in rows if not r["case"].startswith("miss, worst"))


def test_dispatch_target_judges_the_call_against_bare_nodes_not_raw_arrays() -> None:
    """JAX's own cost per pytree node is the floor: 1.4x raw arrays passes when the bare
    nodes of the same shape cost nearly as much, 1.3x over the bare nodes fails."""
    import jax

    from benchmarks.bench_micro import BareNode, bare_nodes
    from benchmarks.common import MODULES

    tn = MODULES["stabledist"].TruncatedNormal(0.0, 1.0, low=-1.0, high=2.0)
    nodes, treedef = bare_nodes(tn)
    assert treedef.num_nodes - treedef.num_leaves == 3 and isinstance(nodes, BareNode)
    assert all(a is b for a, b in zip(jax.tree_util.tree_leaves(nodes),
                                     jax.tree_util.tree_leaves(tn), strict=True))
    target = BENCHMARKS["dispatch"].targets[0]

    def run(stabledist: float) -> Any:
        times = {"numpyro": [90.0] * 3, "raw": [25.0] * 3, "nodes": [30.0] * 3,
                 "stabledist": [stabledist] * 3}
        return target.check(BenchResult("dispatch", "t", "ns/call", PAIR, "", [
            Case("TruncatedNormal", {"nodes": 3}, times)]))

    assert run(35.0).passed is True and "raw arrays 1.40x" in run(35.0).detail
    assert run(39.0).passed is False
    # a program whose time swings between repetitions: judged by the interval, not a median
    swinging = {"numpyro": [90.0] * 4, "raw": [25.0] * 4, "nodes": [30.0, 30.0, 60.0, 30.0],
                "stabledist": [39.0, 39.0, 40.0, 39.0]}
    verdict = target.check(BenchResult("dispatch", "t", "ns/call", PAIR, "", [
        Case("TruncatedNormal", {"nodes": 3}, swinging)]))
    assert verdict.passed is True and "[" in verdict.value
