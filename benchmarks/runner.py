"""Run the selected benchmarks in order and write results.json, report.md and plots."""

from __future__ import annotations

import sys
import time
import traceback
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import jax

from benchmarks import report
from benchmarks.bench_compiled import bench_closure, bench_compile
from benchmarks.bench_memory import bench_memory
from benchmarks.bench_micro import bench_dispatch, bench_flatten, bench_lazy
from benchmarks.bench_nuts import bench_nuts
from benchmarks.config import BENCHMARKS, Profile
from benchmarks.environment import describe, load_average
from benchmarks.timing import BenchResult, progress

RUNNERS: dict[str, Callable[[Profile], BenchResult]] = {
    "lazy": bench_lazy,
    "flatten": bench_flatten,
    "dispatch": bench_dispatch,
    "closure": bench_closure,
    "compile": bench_compile,
    "nuts": bench_nuts,
    "memory": bench_memory,
}
assert list(RUNNERS) == list(BENCHMARKS)


def run(profile: Profile, only: Sequence[str], out: Path, device: str, command: str) -> int:
    """Run, report, and return the exit status (1 if any benchmark raised)."""
    out.mkdir(parents=True, exist_ok=True)
    env = describe()
    if device not in ("auto", "cpu") and env["backend"] == "cpu":
        print(f"--device {device} requested but JAX's backend is cpu", file=sys.stderr)
        return 2
    progress(f"stabledist benchmarks, profile {profile.name}, backend {env['backend']} "
             f"({env['device_kind']}, {env['device_count']} devices), jax "
             f"{env['versions']['jax']}, numpyro {env['versions']['numpyro']}; "
             f"output {out}")
    t_start = time.perf_counter()
    results: list[BenchResult] = []
    payload: dict[str, Any] = {}
    for name in only:
        progress(f"== {name}: {BENCHMARKS[name]}")
        t0 = time.perf_counter()
        try:
            result = RUNNERS[name](profile)
        except Exception:  # one failure must not lose the others
            result = BenchResult(name=name, title=BENCHMARKS[name], unit="", variants={},
                                 nocache="", error=traceback.format_exc())
            progress(f"!! {name} failed:\n{result.error}")
        result.seconds = time.perf_counter() - t0
        result.extra["load_average_after"] = load_average()  # how busy the machine was
        results.append(result)
        progress(f"== {name} done in {result.seconds:.0f}s")
        payload = _payload(profile, command, env, results, t_start)
        report.write_json(out / "results.json", payload)  # partial results survive a crash
    plots = report.write_plots(out, results)
    payload = _payload(profile, command, env, results, t_start)
    payload["plots"] = plots
    report.write_json(out / "results.json", payload)
    report.write_markdown(out / "report.md", payload, results, plots)
    print()
    print("\n".join(report.table_lines(payload["summary"], markdown=False)))
    print()
    print("\n".join(report.target_lines(payload["targets"])))
    print()
    print(f"wrote {out / 'results.json'}, {out / 'report.md'} and {len(plots)} plots "
          f"({payload['seconds']:.0f}s)")
    return 1 if any(r.error for r in results) else 0


def _payload(profile: Profile, command: str, env: dict[str, Any],
             results: Sequence[BenchResult], t_start: float) -> dict[str, Any]:
    rows = report.summary_rows(results)
    return {
        "schema": 1,
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
