"""Shared test set-up: 4 host devices for pmap/shard_map and XLA's cheaper CPU code
generation where the jaxlib has it (both before jax is imported), the fixtures parametrized
over every catalog example and public name, the hypothesis profiles and the coverage report.
Shared data lives in ``helpers.py``."""

from __future__ import annotations

import functools
import gc
import os
import sys
from pathlib import Path

import pytest

# the repository root, so tests can import the (not installed) `benchmarks` package from any
# working directory
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))


def _accepted_xla_flags(flags: list[str]) -> tuple[list[str], list[str]]:
    """``(accepted, rejected)``: XLA aborts the whole process, printing nothing pytest shows,
    on an XLA_FLAGS entry its jaxlib does not know (``--xla_cpu_use_fusion_emitters`` is
    gone from jaxlib 0.11 on), so each flag is tried in a short process of its own first."""
    import subprocess

    probe = "import jax; jax.devices()"
    env = {k: v for k, v in os.environ.items() if k != "XLA_FLAGS"}
    runs = [(flag, subprocess.Popen([sys.executable, "-c", probe], env={**env, "XLA_FLAGS": flag},
                                    stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL))
            for flag in flags]
    accepted = [flag for flag, run in runs if run.wait() == 0]
    return accepted, [flag for flag in flags if flag not in accepted]


# 4 host devices for pmap/shard_map, and XLA's cheaper CPU code generation (no MLIR fusion
# emitters, no LLVM optimization): the suite compiles thousands of programs, most of them one
# eager operation. Every comparison the suite
# makes is between two computations compiled under the same flags (stabledist and numpyro, a
# value and its reference), so "the same program gives the same bits" is tested all the same.
# STABLEDIST_TEST_XLA_DEFAULTS=1 keeps XLA's defaults: CI's test-integration (the real
# workloads), test-oldest (the numbers-vs-numpyro tests) and test-newest's docs pages run that
# way. Only flags the running jaxlib accepts are set (probed once per run, by the controller:
# pytest-xdist workers and the processes tests start inherit the result); the header says which.
_WANTED_FLAGS = ["--xla_force_host_platform_device_count=4"]
if os.environ.get("STABLEDIST_TEST_XLA_DEFAULTS") != "1":
    _WANTED_FLAGS += ["--xla_cpu_use_fusion_emitters=false", "--xla_backend_optimization_level=0"]
if "STABLEDIST_TEST_XLA_REPORT" not in os.environ:
    _accepted, _rejected = _accepted_xla_flags(_WANTED_FLAGS)
    os.environ["XLA_FLAGS"] = " ".join([os.environ.get("XLA_FLAGS", ""), *_accepted]).strip()
    os.environ["STABLEDIST_TEST_XLA_REPORT"] = (
        f"XLA_FLAGS: {os.environ['XLA_FLAGS'] or '(none)'}" + (
            f"; this jaxlib rejects {' '.join(_rejected)}: XLA's defaults there"
            if _rejected else ""))


def pytest_report_header(config: pytest.Config) -> list[str]:
    frozen = ("gc: the heap is frozen at each test's start" if _freezing() else
              "gc: nothing frozen (this JAX has no maybe_find_leaked_tracers): leak checks slower")
    return [os.environ["STABLEDIST_TEST_XLA_REPORT"], frozen]


# glibc gives every thread that allocates its own malloc arena (up to 8 per core); XLA's
# compile and runtime threads then spread freed programs over many arenas that are never
# returned, so a worker's RSS grows with the classes it has seen. Two arenas keep it flat.
# Read at process start: it applies to the pytest-xdist workers and the processes tests start.
os.environ.setdefault("MALLOC_ARENA_MAX", "2")
# JAX's persistent compilation cache, shared by the pytest-xdist workers and the processes the
# tests start (hash-seed workers, scenarios): each eager operation is compiled once per run,
# not once per process (~25 ms each, thousands of them). Reruns reuse it; `make clean` drops
# it. Every entry is keyed by the program, the flags and the jax version.
os.environ.setdefault("JAX_COMPILATION_CACHE_DIR",
                      str(Path(__file__).resolve().parent.parent / ".cache" / "jax"))
os.environ.setdefault("JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS", "0")
os.environ.setdefault("JAX_PERSISTENT_CACHE_MIN_ENTRY_SIZE_BYTES", "-1")

from helpers import BUILDERS, EXAMPLE_NAMES, INDEPENDENT_OF_CLASS, class_group, worker_group  # noqa: E402


@pytest.fixture(params=[pytest.param(b, id=i) for i, b in BUILDERS])
def builder(request: pytest.FixtureRequest):
    """Each example builder, called with a distributions module."""
    return request.param


@pytest.fixture(params=EXAMPLE_NAMES, ids=EXAMPLE_NAMES)
def name(request: pytest.FixtureRequest) -> str:
    return request.param


# --- one worker per class: `make test` runs pytest-xdist with --dist loadgroup -----------------
# Every test of one distribution class (its parameter id names the class: helpers.class_group)
# runs on one worker, after each other, so the class's operations are compiled once for all of
# them (test_api, test_numbers, test_pytree, the property suite, ...). xdist's own loadgroup
# reads `xdist_group` marks through a node-id suffix that pytest >= 9.2 no longer lets it
# write (pytest-dev/pytest-xdist#1386): grouping silently stopped, every class ran on both
# workers and its programs were released and reloaded at nearly every test. So the grouping
# is xdist's scope scheduler with the class as the scope, and the module for tests of no
# class (helpers.worker_group; largest groups first, xdist's
# default order). `pytest_sessionfinish` fails a `--dist loadgroup` run if a class ever ran on
# two workers; under another --dist (`-n 2` alone is `load`) splitting classes is what was
# asked for, so it only notes that `--dist loadgroup` compiles each class once.


def pytest_xdist_make_scheduler(config: pytest.Config, log: object) -> object:
    if config.getvalue("dist") != "loadgroup":
        return None
    from xdist.scheduler import LoadScopeScheduling

    class ByDistributionClass(LoadScopeScheduling):
        def _split_scope(self, nodeid: str) -> str:
            return worker_group(nodeid)

    return ByDistributionClass(config, log)


_WORKERS_OF_CLASS: dict[str, set[str]] = {}


# STABLEDIST_COVERING_ONLY="tests/a.py tests/b.py": in those modules a test of one distribution
# class runs only for the covering set (helpers.INDEPENDENT_OF_CLASS), where the code under
# test is the same for every class: `make check`'s property suite, and on the newest stack the
# pytree, slicing and batching features (the comparisons with numpyro run every class there).
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    modules = set(os.environ.get("STABLEDIST_COVERING_ONLY", "").split())
    if not modules:
        return
    covered = set(INDEPENDENT_OF_CLASS)
    kept, dropped = [], []
    for item in items:
        group = class_group(item.nodeid)
        outside = item.nodeid.split("::")[0] in modules and group not in (None, *covered)
        (dropped if outside else kept).append(item)
    if dropped:
        config.hook.pytest_deselected(items=dropped)
        items[:] = kept


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    split = {g: sorted(w) for g, w in _WORKERS_OF_CLASS.items() if len(w) > 1}
    if not split:
        return
    shown = dict(sorted(split.items())[:5])
    if session.config.getoption("dist", None) != "loadgroup":
        print(f"\nnote: tests of one class ran on several pytest-xdist workers, each compiling "
              f"its programs; `--dist loadgroup` runs each class on one worker: {shown}")
        return
    session.exitstatus = pytest.ExitCode.TESTS_FAILED
    print(f"\nERROR: tests of one class ran on several pytest-xdist workers (grouping is "
          f"broken, each class compiles several times): {shown}")


# --- hypothesis profiles (property suite: tests/test_properties.py) -------------------------
# ``ci`` (default): few examples per class and property, so the whole run fits the CI budget;
# derandomized, so every run draws the same examples: CI is reproducible and a red run is a
# change's doing, never a lucky draw.
# ``thorough``: STABLEDIST_HYPOTHESIS_PROFILE=thorough, for nightly / pre-release runs:
# random, many more examples; new failures it finds are saved in the example database.
# deadline=None: the first call of every example compiles (seconds), later ones take
# microseconds, so a per-example deadline would only measure XLA compile times.
# The example database lives in .hypothesis/ (git-ignored, never committed).
from hypothesis import HealthCheck as _HealthCheck  # noqa: E402
from hypothesis import settings as _settings  # noqa: E402

_COMMON = {
    "deadline": None,
    "suppress_health_check": [_HealthCheck.too_slow, _HealthCheck.data_too_large],
    "print_blob": True,
}
_settings.register_profile("ci", max_examples=3, derandomize=True, **_COMMON)
_settings.register_profile("thorough", max_examples=50, **_COMMON)
_settings.load_profile(os.environ.get("STABLEDIST_HYPOTHESIS_PROFILE", "ci"))


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo):
    """Keep the call-phase report on the item: the property suite's counting fixture only
    demands coverage from tests whose call passed (a failure is already reported)."""
    report = yield
    if report.when == "call":
        item.stabledist_call_report = report
    return report


_EXERCISED: list = []


def pytest_runtest_logreport(report: pytest.TestReport) -> None:
    """Collect what each property test exercised, and which worker ran each class; runs in
    the controller under xdist too."""
    worker = getattr(getattr(report, "node", None), "gateway", None)
    group = class_group(report.nodeid)
    if worker is not None and group is not None:
        _WORKERS_OF_CLASS.setdefault(group, set()).add(worker.id)
    if report.when == "teardown":
        from stabledist.testing._compare import COVERAGE_KEY

        for key, events in report.user_properties:
            if key == COVERAGE_KEY:
                _EXERCISED.extend(events)


def pytest_terminal_summary(terminalreporter, exitstatus, config):
    """Per-property count of distribution classes the property suite exercised."""
    if not _EXERCISED:
        return
    from stabledist.testing import PROPERTIES
    from stabledist.testing._compare import Coverage

    coverage = Coverage()
    coverage.merge(_EXERCISED)
    terminalreporter.section("stability properties: classes exercised")
    terminalreporter.write_line(coverage.table(order=tuple(PROPERTIES)))


# --- memory: lowered modules are dropped, compiled programs kept ---------------------------
# JAX caches, beside every compiled program, the MLIR module it was lowered from (its
# `_pjit_lower` and `_cached_lowering_to_hlo` caches): ~1.4 MB each, even for one eager
# operation, against a few kB for the executable (measured with jax 0.10.2: 300 eager
# additions at new shapes hold 420 MB; dropping those two caches frees all of it, and the next
# call of each runs its compiled program at once, 0.06 ms, nothing traced or compiled again).
# So above LOWERING_BUDGET the lowered modules are dropped and the heap trimmed; only a worker
# still above RSS_BUDGET afterwards drops its compiled programs as well (`jax.clear_caches`:
# everything is then traced, lowered and compiled again, or loaded from the persistent
# compilation cache). Until 2026-11-28 every release was a `clear_caches`, 17-20 per worker
# over a run, each making the worker trace and lower again what it had compiled before
# (test_batched's vmap test alone: 4233 programs lowered with those releases, 2390 without).
# Measured in one process, CPU time (user + system) on a loaded machine, empty persistent
# cache: that test 79-85 s -> 48-51 s, peak RSS 1.56 -> 1.41 GB; the property suite and
# test_numbers for 8 classes (328 tests) 239 s -> 193 s, peak 1.54 -> 1.53 GB.
# A worker above the budget after a release stays above it (its compiled programs, JAX's and
# numpy's buffers), so the next release waits until it has grown by RELEASE_STEP since: a
# release after every test, each `malloc_trim` walking the whole heap, took 6% of a clean
# clone's CPU time (py-spy).
LOWERING_BUDGET = 0.8 * 2**30  # bytes
RSS_BUDGET = 1.4 * 2**30  # bytes; a worker's peak is this plus one test's growth
RELEASE_STEP = 0.2 * 2**30  # bytes


def _lowering_caches() -> list:
    """The caches of lowered modules this JAX has (names differ by release: jax 0.7's
    `_pjit_lower_cached` is 0.10's `_pjit_lower`); empty where JAX moved them, and then every
    release is a `clear_caches` (slower, never wrong)."""
    from jax._src import pjit
    from jax._src.interpreters import pxla

    found = [getattr(m, n, None) for m, n in ((pjit, "_pjit_lower"), (pjit, "_pjit_lower_cached"),
                                              (pxla, "_cached_lowering_to_hlo"))]
    return [c for c in found if callable(getattr(c, "cache_clear", None))]


def _rss() -> int:
    """Current resident set size in bytes; 0 where /proc is missing (no budget then - unlike
    benchmarks.bench_memory.rss_mb, which falls back to the *peak* and would release forever)."""
    try:
        with open("/proc/self/statm") as f:
            return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
    except (OSError, ValueError, IndexError):  # pragma: no cover - not Linux
        return 0


def _trim_heap() -> None:
    import ctypes

    try:
        ctypes.CDLL("libc.so.6").malloc_trim(0)
    except (OSError, AttributeError):  # pragma: no cover - not glibc
        pass


def _release_programs() -> None:
    import jax

    jax.clear_caches()
    _collect_frozen()
    _trim_heap()


@pytest.fixture(scope="session")
def _caches_of_lowered_modules() -> list:
    return _lowering_caches()


_NEXT_RELEASE = [LOWERING_BUDGET]  # the RSS that makes the next release (RELEASE_STEP)


@pytest.fixture(autouse=True)
def _bounded_program_memory(_caches_of_lowered_modules: list):
    yield
    rss = _rss()
    if rss <= _NEXT_RELEASE[0]:
        return
    if _caches_of_lowered_modules:
        for cache in _caches_of_lowered_modules:
            cache.cache_clear()
        _trim_heap()
        rss = _rss()
    if rss > RSS_BUDGET:
        _release_programs()
        rss = _rss()
    _NEXT_RELEASE[0] = min(max(LOWERING_BUDGET, rss + RELEASE_STEP), RSS_BUDGET)


# --- garbage collection: what a test starts with is frozen --------------------------------
# Under `jax.checking_leaks()` JAX runs a full `gc.collect()` after every trace that is still
# referenced when it ends (nearly all: a trace and its tracers form a cycle), to tell a leaked
# tracer from cyclic garbage: thousands per test module, each walking the whole heap (the
# imported modules, the collected tests, JAX's caches). py-spy on the property suite of 8
# classes, one process: 32% of its samples were in that `gc.collect()`. Freezing the heap a
# test starts with (`gc.freeze()`, after collecting it) takes those objects out of every later
# collection, so each one walks only what the test made (about a third of the suite's time).
# A leak is still found (the referrers JAX looks for are the test's own tracers, made after
# the freeze), and its report still names the holder: `_unfreeze_on_leak`. Cyclic garbage
# among frozen objects is freed where the programs are (`_release_programs`, above).


def _unfreeze_on_leak() -> bool:
    """JAX's leak report walks `gc.get_referrers` up from each leaked tracer to what holds it,
    and frozen objects are invisible to that walk: the usual holder (a module's global, numpyro
    issue 1651) is frozen, and jax 0.10 then raises an IndexError in place of the leak
    (tests/test_testing_api.py's leak report test). So JAX's search for leaked tracers unfreezes
    the heap when it finds one, before the report is written. ``False`` where this JAX has no
    such search: then nothing is frozen (slower, never wrong). Installed once: `_freezing`."""
    from jax._src import core

    find = getattr(core, "maybe_find_leaked_tracers", None)
    if find is None:
        return False

    def find_and_unfreeze(trace: object) -> list:
        tracers = find(trace)
        if tracers:
            gc.unfreeze()
        return tracers

    core.maybe_find_leaked_tracers = find_and_unfreeze
    return True


@functools.cache
def _freezing() -> bool:
    """Whether tests start from a frozen heap: `_unfreeze_on_leak`, installed once."""
    return _unfreeze_on_leak()


@pytest.hookimpl(tryfirst=True)
def pytest_runtest_setup(item: pytest.Item) -> None:
    if _freezing():
        gc.collect()
        gc.freeze()


def _collect_frozen() -> None:
    gc.unfreeze()
    gc.collect()
