"""Run the selected benchmarks in order and write results.json, report.md and plots."""

from __future__ import annotations

import sys
import time
import traceback
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import jax

from benchmarks import bench_e2e, bench_pcache, report
from benchmarks.bench_compiled import bench_closure, bench_compile
from benchmarks.bench_e2e import bench_e2e as run_e2e
from benchmarks.bench_memory import bench_memory
from benchmarks.bench_micro import bench_dispatch, bench_flatten, bench_lazy
from benchmarks.bench_pcache import bench_pcache as run_pcache
from benchmarks.config import BENCHMARKS, PLANNED_SECONDS, PROFILES, Profile
from benchmarks.environment import describe, load_average
from benchmarks.timing import TRACKER, BenchResult, progress

RUNNERS: dict[str, Callable[[Profile], BenchResult]] = {
    "lazy": bench_lazy,
    "flatten": bench_flatten,
    "dispatch": bench_dispatch,
    "closure": bench_closure,
    "compile": bench_compile,
    "e2e": run_e2e,
    "pcache": run_pcache,
    "memory": bench_memory,
}
assert list(RUNNERS) == list(BENCHMARKS)

EXIT_OK, EXIT_ERROR, EXIT_SETUP, EXIT_TARGET = 0, 1, 2, 3
"""Exit statuses: a benchmark raised (1), the backend is not the one asked for (2), a
target failed (3, unless ``--no-strict``)."""


def planned_steps(name: str, profile: Profile) -> int:
    """How many progress steps benchmark ``name`` will take (an estimate where it depends
    on what the catalog holds; corrected when the benchmark knows)."""
    p = profile
    if name == "lazy":
        return 1 + (p.lazy_limit or 85)
    if name == "flatten":
        return (p.flatten_limit or 100) + 4
    if name == "dispatch":
        return len(p.dispatch_cases)
    if name == "closure":
        return len(p.mvn_dims) + len(p.tn_batches) + len(p.sbvm_batches)
    if name == "compile":
        return 2 + 3 * p.cold_reps
    if name == "e2e":
        return bench_e2e.steps(p)
    if name == "pcache":
        return bench_pcache.steps(p)
    return 1


def run(profile: Profile, only: Sequence[str], out: Path, device: str, command: str,
        strict: bool = True) -> tuple[int, dict[str, Any]]:
    """Run, report, and return ``(exit status, results payload)``."""
    out.mkdir(parents=True, exist_ok=True)
    env = describe()
    if device not in ("auto", "cpu") and env["backend"] == "cpu":
        print(f"--device {device} requested but JAX's backend is cpu", file=sys.stderr)
        return EXIT_SETUP, {}
    planned = dict(PLANNED_SECONDS.get(profile.name, PLANNED_SECONDS["default"]))
    if profile.name in PROFILES and "e2e" in planned:  # --e2e-reps
        planned["e2e"] *= profile.e2e_reps / PROFILES[profile.name].e2e_reps
    TRACKER.set_plan({n: (planned_steps(n, profile), planned.get(n, 30.0)) for n in only})
    TRACKER.start_heartbeat()
    mem = env.get("device_memory_bytes")
    progress(f"stabledist benchmarks, profile {profile.label}: {', '.join(only)}; backend "
             f"{env['backend']} ({env['device_kind']}, {env['device_count']} device(s)"
             + (f", {mem / 2**30:.1f} GiB" if mem else "") + f"), jax "
             f"{env['versions']['jax']}, numpyro {env['versions']['numpyro']}; output {out}")
    t_start = time.perf_counter()
    results: list[BenchResult] = []
    payload: dict[str, Any] = {}
    for name in only:
        TRACKER.begin(name)
        progress(TRACKER.line(f"== {name}: {BENCHMARKS[name]}"))
        t0 = time.perf_counter()
        try:
            result = RUNNERS[name](profile)
        except Exception:  # one failure must not lose the others
            result = BenchResult(name=name, title=BENCHMARKS[name], unit="", variants={},
                                 nocache="", error=traceback.format_exc())
            progress(f"!! {name} failed:\n{result.error}")
        TRACKER.end()
        result.seconds = time.perf_counter() - t0
        result.extra["load_average_after"] = load_average()  # how busy the machine was
        results.append(result)
        progress(TRACKER.line(f"== {name} done in {result.seconds:.0f}s"))
        payload = _payload(profile, command, env, results, t_start)
        report.write_json(out / "results.json", payload)  # partial results survive a crash
    plots = report.write_plots(out, results)
    payload = _payload(profile, command, env, results, t_start)
    payload["plots"] = plots
    report.write_json(out / "results.json", payload)
    report.write_markdown(out / "report.md", payload, results, plots)
    errors = [r.name for r in results if r.error]
    failed = [t for t in payload["targets"] if t["passed"] is False]
    status = EXIT_ERROR if errors else EXIT_TARGET if failed and strict else EXIT_OK
    print()
    print("\n".join(report.compact_lines(payload)))
    print()
    verdict = (f"{len(errors)} benchmark(s) raised: {', '.join(errors)}" if errors else
               f"{len(failed)} target(s) failed" if failed else "all targets passed")
    print(f"{verdict}; exit status {status}"
          + (" (--no-strict: failed targets do not fail the run)" if failed and not strict
             and not errors else ""))
    print(f"details: {out / 'report.md'} (results.json, {len(plots)} plots; "
          f"{payload['seconds']:.0f} s)")
    return status, payload


def _payload(profile: Profile, command: str, env: dict[str, Any],
             results: Sequence[BenchResult], t_start: float) -> dict[str, Any]:
    rows = report.summary_rows(results)
    return {
        "schema": 2,
        "command": command,
        "profile": profile.as_dict(),
        "environment": env,
        "load_average_end": load_average(),
        "seconds": time.perf_counter() - t_start,
        "benchmarks": {r.name: r.as_dict() for r in results},
        "summary": rows,
        "targets": report.evaluate_targets(results, rows),
        "jax_backend_devices": [str(d) for d in jax.devices()],
    }
