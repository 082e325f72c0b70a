"""Run the selected benchmarks in order and write results.json, report.md and plots."""

from __future__ import annotations

import sys
import time
import traceback
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import jax

from benchmarks import report
from benchmarks.config import Profile
from benchmarks.environment import describe, load_average
from benchmarks.registry import BENCHMARKS
from benchmarks.timing import TRACKER, BenchResult, progress

EXIT_OK, EXIT_ERROR, EXIT_SETUP, EXIT_TARGET = 0, 1, 2, 3
"""Exit statuses: a benchmark raised (1), the backend is not the one asked for (2), a
target failed (3, only with ``--strict``; ``--publish`` implies it)."""


def exit_status(errors: Sequence[str], targets: Sequence[dict[str, Any]], strict: bool) -> int:
    """1 when a benchmark raised; else 3 when a target failed and ``strict``; else 0."""
    if errors:
        return EXIT_ERROR
    return EXIT_TARGET if strict and any(t["passed"] is False for t in targets) else EXIT_OK


def run(profile: Profile, only: Sequence[str], out: Path, device: str, command: str,
        strict: bool = False) -> tuple[int, dict[str, Any]]:
    """Run, report, and return ``(exit status, results payload)``."""
    out.mkdir(parents=True, exist_ok=True)
    env = describe()
    if device not in ("auto", "cpu") and env["backend"] == "cpu":
        print(f"--device {device} requested but JAX's backend is cpu", file=sys.stderr)
        return EXIT_SETUP, {}
    TRACKER.set_plan({n: (BENCHMARKS[n].steps(profile), BENCHMARKS[n].seconds(profile))
                      for n in only})
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
        progress(TRACKER.line(f"== {name}: {BENCHMARKS[name].summary}"))
        t0 = time.perf_counter()
        try:
            result = BENCHMARKS[name].run(profile)
        except Exception:  # one failure must not lose the others
            result = BenchResult(name=name, title=BENCHMARKS[name].summary, unit="", variants={},
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
    status = exit_status(errors, payload["targets"], strict)
    print()
    print("\n".join(report.compact_lines(payload)))
    print()
    print("\n".join(report.verdict_lines(payload, status, strict, errors)))
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
        "targets": report.evaluate_targets(results, rows, profile.judge_timing),
        "jax_backend_devices": [str(d) for d in jax.devices()],
    }
