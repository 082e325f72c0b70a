"""The benchmark suite runs end to end at tiny sizes, so it cannot rot.

``python -m benchmarks --smoke --strict`` (what CI's smoke step ran; now this module, in ``make
test-bench``) runs every benchmark in a subprocess (the suite sets ``JAX_PLATFORMS``/``XLA_FLAGS``
before importing jax, which this test process already did), must exit 0 (the smoke profile
judges no timing, so only an error, a retrace, growing memory or growing tables fails it) and
must write the JSON, the Markdown report and the plots.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from benchmarks import BENCHMARKS, PROFILES

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def smoke_run(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, str, dict]:
    """The run's folder, its stdout and stderr, and its results.json."""
    out = tmp_path_factory.mktemp("bench")
    # the benchmarks set up JAX themselves and time compilation: no flags or compile cache
    env = {k: v for k, v in os.environ.items()
           if k not in ("JAX_PLATFORMS", "XLA_FLAGS") and not k.startswith(("JAX_COMPIL",
                                                                            "JAX_PERSIST"))}
    env["PYTHONPATH"] = str(ROOT) + os.pathsep + env.get("PYTHONPATH", "")
    proc = subprocess.run(
        [sys.executable, "-m", "benchmarks", "--smoke", "--device", "cpu",
         "--host-devices", "2", "--strict", "--out", str(out)],
        cwd=ROOT, env=env, capture_output=True, text=True, timeout=300, check=False,
    )
    failed = [line for line in proc.stdout.splitlines() if line.startswith("FAIL")]
    assert proc.returncode == 0, "\n".join([*failed, proc.stderr[-4000:]])
    return out, proc.stdout + proc.stderr, json.loads((out / "results.json").read_text())


def test_writes_json_markdown_and_plots(smoke_run: tuple[Path, str, dict]) -> None:
    out, text, _ = smoke_run
    report = (out / "report.md").read_text()
    assert "## Targets" in report and "## Summary" in report
    pngs = sorted(p.name for p in out.glob("bench-*.png"))
    assert {"bench-flatten.png", "bench-precision.png", "bench-rss.png",
            "bench-e2e.png"} <= set(pngs)
    for png in pngs:
        assert (out / png).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert "bars in one panel" not in text  # benchmarks.report.write_plots warns of > 15


def test_json_has_environment_and_every_benchmark(smoke_run: tuple[Path, str, dict]) -> None:
    _, _, data = smoke_run
    env = data["environment"]
    for key in ("backend", "device_kind", "cpu_count", "device_count", "host_memory_bytes",
                "git_commit"):
        assert env[key] is not None, key
    for name in ("jax", "jaxlib", "numpyro"):
        assert env["versions"][name], name
    assert env["backend"] == "cpu"
    # the Python build decides what host-side Python costs (a cache hit): recorded beside
    # the CPU and the device
    build = env["python_build"]
    assert build["version"] == env["python"] and "config_args" in build
    assert isinstance(build["dtrace"], bool) and isinstance(build["shared"], bool)
    assert "JAX_USE_SIMPLIFIED_JAXPR_CONSTANTS" in env["env"]
    assert data["profile"]["name"] == "smoke"
    # every progress line's estimate of the time left, and the CPU time of the run
    assert data["eta_history"] and all(left >= 0 for _, left in data["eta_history"])
    assert data["cpu_seconds"] > 0
    assert set(data["benchmarks"]) == set(BENCHMARKS)
    for name, bench in data["benchmarks"].items():
        assert bench["error"] is None, f"{name}: {bench['error']}"
        assert bench["cases"], name
        for case in bench["cases"]:
            assert case["samples"], (name, case["name"])
            for variant, values in case["samples"].items():
                assert values and all(v >= 0 for v in values), (name, case["name"], variant)
    # raw repetitions, not only summaries, and pairwise ratios
    flat = data["benchmarks"]["flatten"]["cases"][0]
    assert len(flat["samples"]["stabledist"]) == PROFILES["smoke"].reps
    assert "numpyro/stabledist" in flat["ratios"]
    assert {t["target"] for t in data["targets"]} >= {"flatten", "dispatch", "hit", "rss",
                                                      "e2e", "retrace", "slower"}
    # end to end: every run split into phases that add up to its wall time
    for case in data["benchmarks"]["e2e"]["cases"]:
        for variant, phases in case["extra"]["phases"].items():
            for i, total in enumerate(case["samples"][variant]):
                parts = sum(phases[p][i] for p in ("trace", "lower", "compile", "run"))
                assert abs(parts - total) < 0.05 * total + 0.05, (case["name"], variant)
    # retraces counted per call (the smoke profile skips the cross-process cache pairs)
    calls = data["benchmarks"]["pcache"]["extra"]["retraces"]["numpyro"]["calls"]
    assert calls[0]["new_traces"] == 1 and len(calls) == 7
    # host / device split recorded for rows with device work
    assert data["benchmarks"]["dispatch"]["cases"][0]["extra"]["host_device"]["stabledist"]


def test_constants_rows_are_separated_by_mode(smoke_run: tuple[Path, str, dict]) -> None:
    """The simplified-constants flag is set in a fresh process per mode, read back there,
    and every case and row names its mode."""
    _, _, data = smoke_run
    bench = data["benchmarks"]["constants"]
    modes = bench["extra"]["modes"]
    assert {m["flag"] for m in modes.values()} == {"0", "1"}
    if bench["extra"].get("skipped"):  # a jax without the option: no case, said why
        assert not bench["cases"]
        return
    assert {m["flag"]: m["flag_read"] for m in modes.values()} == {"0": False, "1": True}
    labels = {m["label"] for m in modes.values()}
    for case in bench["cases"]:
        label = case["name"].split(": ")[0]
        assert label in labels and case["params"]["flag"] == (label == "simplified constants")
        assert case["extra"]["program_ops"]["stabledist"]["parameters"] >= 1
    rows = [r for r in data["summary"] if r["benchmark"] == "constants"]
    assert rows and all(r["case"].split(": ")[0] in labels for r in rows)


VALUE = re.compile(r"^(-|[+-]?\d[\d,]*(\.\d+)?)$")  # a bare number: its unit is the group's
MARK = re.compile(r" (faster|slower|\?)$")  # a judged row's verdict ("same": no mark)


def test_prints_verdict_table_whole_target_lines_and_progress(
        smoke_run: tuple[Path, str, dict]) -> None:
    _, text, data = smoke_run
    lines = text.splitlines()
    start = lines.index(next(x for x in lines if x.startswith("stabledist vs numpyro:")))
    end = lines.index(next(x for x in lines if x.startswith("details: ")))
    summary = lines[start:end + 1]  # stdout; the progress lines (stderr) follow it
    too_wide = [line for line in summary[:-1] if len(line) > 100]  # not the path line
    assert not too_wide, too_wide
    # the verdict table: a heading per group naming its unit, rows of bare numbers
    head = next(i for i, x in enumerate(summary) if x.split()[1:] == [
        "stabledist", "numpyro", "no-cache", "ratio"])
    table = summary[head + 2:summary.index("", head)]
    headings = [x for x in table if not x.startswith(" ")]
    assert len(headings) >= len(BENCHMARKS), headings
    rows = [MARK.sub("", x).split()[-4:] for x in table if x.startswith(" ")
            and re.search(r"(-|\dx)( (faster|slower|\?))?$", x)]  # a long name wraps above
    assert len(rows) == len(data["summary"]), table
    marks = [m.group(1) for x in table if (m := MARK.search(x))]
    judged = [r for r in data["summary"] if r["judged"] and r["ratio"] is not None]
    assert len(marks) == sum(r["verdict"] != "same" for r in judged), (marks, judged)
    # every row states its verdict and whether the "slower" target judges it
    for r in data["summary"]:
        assert r["verdict"] in (None, "faster", "same", "slower", "unresolved"), r
        if r["case"].endswith(" cases)"):  # an aggregate: not judged
            assert not r["judged"], r
    for cells in rows:
        assert all(VALUE.match(c) for c in cells[:3]), cells
        assert cells[3] == "-" or cells[3].endswith("x"), cells
    # every target's whole line (wrapped, never cut), then the verdict
    joined = " ".join(x.strip() for x in summary)
    for t in data["targets"]:
        assert f"{t['criterion']}: {t['value']}" in joined, t
    assert any(line.startswith(("PASS", "FAIL", "N/A")) for line in summary)
    assert not any(line.endswith("~") for line in summary)
    assert "Verdict: " in joined and "Exit status 0" in joined
    # smoke judges no timing: timing targets N/A, the others pass under --strict
    assert all(t["passed"] is not False for t in data["targets"]), data["targets"]
    assert {t["target"] for t in data["targets"] if t["passed"] is True} >= {
        "rss", "retrace", "scale_gc", "scale_tables"}
    # progress lines on stderr: overall "k of n" and a time estimate
    progress = re.compile(r"\] \d+ of \d+, ~\d+(\.\d)? (s|min) left")
    steps = [line for line in lines if progress.search(line)]
    assert len(steps) >= 8, lines[:20]


def test_published_sections_render_from_a_run(smoke_run: tuple[Path, str, dict]) -> None:
    from benchmarks.publish import in_short, results_section

    _, _, data = smoke_run
    short = in_short(data)
    assert "| verdict | where | ratio | stabledist vs numpyro |" in short
    assert "**faster**" in short and "**costs**" in short
    page = short + results_section(data, data["plots"])
    assert "\\|" not in page and "~\n" not in page
