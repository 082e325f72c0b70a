"""Run the selected benchmarks in order and write results.json, report.md and plots.

Each benchmark's results are written as soon as it finishes, so a run stopped midway (a
device lease ending, ``timeout``, Ctrl-C, ``--deadline``) keeps what it measured.
"""

from __future__ import annotations

import resource
import signal
import sys
import time
import traceback
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from functools import partial
from pathlib import Path
from typing import Any

from benchmarks import report
from benchmarks.config import Profile, accelerator_note
from benchmarks.registry import BENCHMARKS
from stabledist.benchmark._environment import describe, load_average, python_build_text
from stabledist.benchmark._measure import (
    LIVE,
    TRACKER,
    BenchResult,
    Stopped,
    eta_error,
    progress,
    run_clock,
)
from stabledist.benchmark._rows import write_json

EXIT_OK, EXIT_ERROR, EXIT_SETUP, EXIT_TARGET = 0, 1, 2, 3
"""Exit statuses: a benchmark raised (1), the backend is not the one asked for (2), a
target failed (3, only with ``--strict``; ``--publish`` implies it). A run stopped by a
signal exits with 128 + the signal's number, after writing what it measured."""


def exit_status(errors: Sequence[str], targets: Sequence[dict[str, Any]], strict: bool) -> int:
    if errors:
        return EXIT_ERROR
    return EXIT_TARGET if strict and any(t["passed"] is False for t in targets) else EXIT_OK


class _Signals:
    """SIGTERM and SIGINT raise `Stopped` while a benchmark runs; between benchmarks (while
    files are written) they are only remembered, and the run stops after the write."""

    def __init__(self) -> None:
        self.armed = False
        self.pending: int | None = None

    def handle(self, signum: int, frame: Any) -> None:
        self.pending = signum
        if self.armed:
            self.armed = False
            raise Stopped(f"stopped by signal {signal.Signals(signum).name}", signum)

    @contextmanager
    def installed(self) -> Iterator[_Signals]:
        before = {s: signal.signal(s, self.handle) for s in (signal.SIGTERM, signal.SIGINT)}
        try:
            yield self
        finally:
            for s, handler in before.items():
                signal.signal(s, handler)


def _run_one(name: str, profile: Profile, signals: _Signals) -> BenchResult:
    """One benchmark; a stop keeps the cases it had finished (`LIVE`, ``extra["stopped"]``),
    an exception becomes the result's error, so that one failure does not lose the others."""
    TRACKER.begin(name)
    progress(TRACKER.line(f"== {name}: {BENCHMARKS[name].summary}"))
    LIVE.pop(name, None)
    t0 = time.perf_counter()
    blank = partial(BenchResult, name, BENCHMARKS[name].summary, "", {}, "")
    try:
        signals.armed = True
        result = BENCHMARKS[name].run(profile)
    except Stopped as stop:
        result = LIVE.get(name) or blank()
        result.extra["stopped"] = f"{stop.reason}, after {len(result.cases)} case(s)"
        progress(f"!! {name} {result.extra['stopped']}")
    except Exception:
        result = blank(error=traceback.format_exc())
        progress(f"!! {name} failed:\n{result.error}")
    finally:
        signals.armed = False
    TRACKER.end()
    result.seconds = time.perf_counter() - t0
    result.extra["load_average_after"] = load_average()  # how busy the machine was
    progress(TRACKER.line(f"== {name} done in {result.seconds:.0f}s"))
    return result


def _skip_reason(name: str, deadline_s: float | None) -> str | None:
    """Why ``name`` does not start: it would end after the deadline (its planned time,
    scaled by how fast the finished steps went)."""
    now, need = run_clock(), TRACKER.remaining(name)
    if deadline_s is None or now + need <= deadline_s:
        return None
    return (f"not started at {now / 60:.1f} min: planned ~{need / 60:.1f} min, past the "
            f"{deadline_s / 60:.1f}-minute deadline")


def _header(profile: Profile, only: Sequence[str], env: dict[str, Any], out: Path,
            deadline_s: float | None) -> str:
    mem = env.get("device_memory_bytes")
    note = accelerator_note(profile)
    left = [n for n in profile.left_out if n not in only]
    return (f"stabledist benchmarks, profile {profile.label}: {', '.join(only)}; backend "
            f"{env['backend']} ({env['device_kind']}, {env['device_count']} device(s)"
            + (f", {mem / 2**30:.1f} GiB" if mem else "") + f"), jax "
            f"{env['versions']['jax']}, numpyro {env['versions']['numpyro']}, "
            f"{python_build_text(env.get('python_build'))}; output {out}"
            + (f"\n{note}" if note else "")
            + (f"\nleft out by the profile (no target of their own): {', '.join(left)}; "
               "--only NAME or --full runs them" if left else "")
            + (f"\ndeadline {deadline_s / 60:.1f} min: a benchmark that would end later is "
               "skipped, a running one stops at its next step after it" if deadline_s else ""))


def run(profile: Profile, only: Sequence[str], out: Path, device: str, command: str,
        strict: bool = False, deadline_s: float | None = None) -> tuple[int, dict[str, Any]]:
    """Run, report, and return ``(exit status, results payload)``."""
    out.mkdir(parents=True, exist_ok=True)
    env = describe()
    if device not in ("auto", "cpu") and env["backend"] == "cpu":
        print(f"--device {device} requested but JAX's backend is cpu", file=sys.stderr)
        return EXIT_SETUP, {}
    TRACKER.set_plan({n: (BENCHMARKS[n].steps(profile), BENCHMARKS[n].seconds(profile))
                      for n in only})
    TRACKER.history.clear()
    TRACKER.deadline = (None if deadline_s is None
                        else time.perf_counter() - run_clock() + deadline_s)
    TRACKER.start_heartbeat()
    progress(_header(profile, only, env, out, deadline_s))
    results: list[BenchResult] = []
    skipped: dict[str, str] = {}
    plots: list[str] = []
    signals = _Signals()
    payload: dict[str, Any] = {}
    with signals.installed():
        for name in only:
            stopped = signals.pending or any("stopped" in r.extra for r in results)
            reason = ("not started: the run was stopped" if stopped
                      else _skip_reason(name, deadline_s))
            if reason:
                skipped[name] = reason
                TRACKER.begin(name)  # its steps count as done: the estimate drops them
                TRACKER.end()
                progress(TRACKER.line(f"-- {name} skipped: {reason}"))
                continue
            results.append(_run_one(name, profile, signals))
            plots += report.write_plots(out, results[-1:])
            payload = _write(out, profile, command, env, results, plots, skipped)
        payload = _write(out, profile, command, env, results, plots, skipped)
    return _finish(payload, results, plots, out, strict, signals.pending), payload


def _write(out: Path, profile: Profile, command: str, env: dict[str, Any],
           results: Sequence[BenchResult], plots: Sequence[str],
           skipped: dict[str, str]) -> dict[str, Any]:
    """results.json and report.md of what has run so far."""
    rows = report.summary_rows(results)
    payload = {"schema": 2, "command": command, "profile": profile.as_dict(),
               "profile_note": accelerator_note(profile), "environment": env,
               "load_average_end": load_average(), "seconds": run_clock(),
               "benchmarks": {r.name: r.as_dict() for r in results}, "summary": rows,
               "targets": report.evaluate_targets(results, rows, profile.judge_timing),
               "jax_backend_devices": env["devices"],
               "eta_history": list(TRACKER.history), "plots": list(plots),
               "skipped": dict(skipped)}
    write_json(out / "results.json", payload)
    report.write_markdown(out / "report.md", payload, results, plots)
    return payload


def _finish(payload: dict[str, Any], results: Sequence[BenchResult], plots: Sequence[str],
            out: Path, strict: bool, signum: int | None) -> int:
    """Print the verdict table, the targets and the verdict; the exit status."""
    errors = [r.name for r in results if r.error]
    status = (exit_status(errors, payload["targets"], strict) if signum is None
              else 128 + signum)
    payload["eta_error"] = eta_error(payload["eta_history"], run_clock())
    print("\n".join(["", *report.compact_lines(payload), "",
                     *report.verdict_lines(payload, status, strict, errors)]))
    payload["cpu_seconds"] = cpu_seconds()
    if err := payload["eta_error"]:
        # two lines: the summary keeps to 100 columns (a run over 90 s prints this one)
        print(f"The time-left estimates from the first minute on were within "
              f"{100 * err['worst']:.0f}% of the truth\n(worst at {err['at']:.0f} s: "
              f"~{err['estimate']:.0f} s left, {err['truth']:.0f} s in fact).")
    write_json(out / "results.json", payload)
    print(f"details: {out / 'report.md'} (results.json, {len(plots)} plots; "
          f"{payload['seconds']:.0f} s wall, {payload['cpu_seconds']:.0f} s of CPU)")
    return status


def cpu_seconds() -> float:
    """CPU time of this process and the children it waited for (user + system): what the run
    itself cost, where the wall time on a busy machine says how loaded it was."""
    own, kids = (resource.getrusage(w) for w in (resource.RUSAGE_SELF, resource.RUSAGE_CHILDREN))
    return own.ru_utime + own.ru_stime + kids.ru_utime + kids.ru_stime
