"""Run numpyro's own test suite against stabledist (`make test-upstream`, `make
test-upstream-slice`).

stabledist claims to be a drop-in for ``numpyro.distributions``; numpyro's own tests are the
widest check of that claim we can get for free. They come from the source distribution of the
*installed* numpyro version (the wheel has no tests), downloaded once into
``.cache/upstream/sdist/`` (git-ignored). Each mode gets a work folder
``.cache/upstream/<numpyro-version>/<mode>/`` with copies of the test files:

* ``substituted`` (A): the imports of ``numpyro.distributions`` point at stabledist
  (`rewrite_imports`: ``import numpyro.distributions as dist`` becomes ``import stabledist as
  dist``; ``from numpyro.distributions[.sub] import X`` takes ``X`` from ``stabledist[.sub]``
  only where stabledist has its own object for it, so constraints, transforms and helpers stay
  numpyro's very objects). Each rewrite is listed in the folder's ``SUBSTITUTIONS.txt``.
* ``stable-internals`` (B): the files unchanged, with `stabledist.use_stable_internals` on for
  the whole process (``tools/upstream_plugin.py``): numpyro's constructors build stable classes.
* ``numpyro`` (C): the files unchanged, plain numpyro: the reference counts, and the judge of
  the expected-failures list.

The expected failures are checked in (``tests/upstream/expected_failures.toml``). The rule: a
failure numpyro does not have is never expected. So every entry must list the ``numpyro`` mode,
and when mode C runs in the same invocation an entry whose test passes with numpyro is an
error. A failure in A or B that is not listed fails the run, and so does a listed test that
passes (strict xfail), so the list stays true. Failures in A or B that mode C does not have are
stabledist bugs, printed as such. The one exception, ``[[difference]]`` entries: a test of
numpyro's that asserts the behaviour stabledist exists to change (a lazy value in ``__dict__``,
numpyro's stale batch shape after ``vmap``); it must fail with the quoted assertion in A/B and
pass in C. NumPy's global generator is seeded per test (``upstream_plugin``), so the three
modes give every test the same inputs.

Usage::

    python tools/upstream_tests.py                       # A, B and C over all files (hours)
    python tools/upstream_tests.py --slice               # the CI slice, modes A and B
    python tools/upstream_tests.py --modes numpyro --files test_pickle.py -- -x
"""

from __future__ import annotations

import argparse
import ast
import importlib
import importlib.metadata
import os
import shutil
import subprocess
import sys
import tarfile
import time
import tomllib
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

TOOLS = Path(__file__).resolve().parent
sys.path.insert(0, str(TOOLS))

from upstream_plugin import MODES, Expected, load_expected, read_results  # noqa: E402

ROOT = TOOLS.parent
CACHE = ROOT / ".cache" / "upstream"
EXPECTED = ROOT / "tests" / "upstream" / "expected_failures.toml"

# The test files that exercise numpyro.distributions, looked up in the sdist's test/ folder
# and its subfolders (the mixture tests have moved between releases).
FILES = (
    "test_distributions.py",
    "test_distributions_mixture.py",
    "test_handlers.py",
    "test_pickle.py",
    "test_flows.py",
    "test_gof.py",
    "test_compile.py",
)
SEARCH = ("test", "test/contrib", "test/contrib/distributions")

# The CI slice: of each file named here every K-th test (by zlib.crc32 of the node id, so
# the slice is fixed), all tests of the other file (test_compile). Chosen so that modes A
# and B together take a few minutes on 2 cores (CONTRIBUTING.md, "numpyro's own test suite").
SLICE = {
    "test_distributions.py": 100,
    "test_gof.py": 50,
    "test_flows.py": 8,
    "test_distributions_mixture.py": 6,
    "test_handlers.py": 2,
    "test_pickle.py": 2,
}
SLICE_MODES = ("substituted", "stable-internals")

# XLA's cheaper CPU code generation, as the project's own suite uses (tests/conftest.py):
# numpyro's tests compare values computed in one process, under the same flags, so they check
# the same things; STABLEDIST_TEST_XLA_DEFAULTS=1 keeps XLA's defaults. Two host devices let
# test_compile's parallel-chain test run instead of skipping.
CHEAP_CODEGEN = "--xla_cpu_use_fusion_emitters=false --xla_backend_optimization_level=0"
DEVICES = "--xla_force_host_platform_device_count=2"

OUTCOMES = ("passed", "failed", "skipped", "xfailed", "xpassed", "error")


# --- the tests, from numpyro's source distribution -------------------------------------------


def numpyro_version() -> str:
    return importlib.metadata.version("numpyro")


def fetch_sdist(version: str) -> Path:
    """numpyro's sdist for ``version`` (the tests are not in the wheel), downloaded once."""
    folder = CACHE / "sdist"
    found = sorted(folder.glob(f"numpyro-{version}.tar.gz"))
    if found:
        return found[0]
    folder.mkdir(parents=True, exist_ok=True)
    subprocess.run([sys.executable, "-m", "pip", "download", "--quiet", "--no-binary", ":all:",
                    "--no-deps", f"numpyro=={version}", "-d", str(folder)], check=True)
    (tarball,) = folder.glob(f"numpyro-{version}.tar.gz")
    return tarball


@dataclass
class Sources:
    """The test files found in the sdist, by path relative to its ``test/`` folder."""

    folder: Path  # the extracted test/ folder
    files: list[str]  # the FILES found, e.g. "test_handlers.py" or "contrib/test_x.py"
    missing: list[str]
    conftest: bool


def extract_tests(tarball: Path, version: str) -> Sources:
    """Unpack the sdist's ``test/`` folder into ``.cache/upstream/<version>/source/``."""
    target = CACHE / version / "source"
    prefix = f"numpyro-{version}/"
    if not (target / "test").is_dir():
        with tarfile.open(tarball) as tar:
            members = [m for m in tar.getmembers()
                       if m.name.startswith(f"{prefix}test/") and (m.isfile() or m.isdir())]
            for member in members:
                member.name = member.name.removeprefix(prefix)
            if hasattr(tarfile, "data_filter"):  # Python >= 3.11.4: refuse unsafe members
                tar.extractall(target, members=members, filter="data")
            else:  # pragma: no cover - the members are plain files and folders under test/
                tar.extractall(target, members=members)
    test = target / "test"
    files, missing = [], []
    for name in FILES:
        where = next((f"{d}/{name}" for d in SEARCH if (target / d / name).is_file()), None)
        if where is None:
            missing.append(name)
        else:
            files.append(where.removeprefix("test/"))
    return Sources(test, files, missing, (test / "conftest.py").is_file())


def pytest_ini(version: str) -> str:
    """numpyro's pytest settings (``filterwarnings = error`` and its exceptions) from the
    sdist's pyproject.toml, without ``addopts`` (``-v --color=yes``: output only)."""
    tarball = fetch_sdist(version)
    with tarfile.open(tarball) as tar:
        member = tar.extractfile(f"numpyro-{version}/pyproject.toml")
        options = tomllib.loads(member.read().decode()) if member else {}
    ini = options.get("tool", {}).get("pytest", {}).get("ini_options", {})
    lines = ["# generated by tools/upstream_tests.py from numpyro's pyproject.toml", "[pytest]"]
    for key, value in ini.items():
        if key == "addopts":
            continue
        values = value if isinstance(value, list) else [value]
        lines.append(f"{key} =")
        lines.extend(f"    {v}" for v in values)
    return "\n".join(lines) + "\n"


# --- mode A: imports of numpyro.distributions rewritten to stabledist ------------------------


def _stable_source(module: str, name: str) -> str | None:
    """The stabledist module to take ``name`` from instead of numpyro's ``module``, or None
    where stabledist has no object of its own for it (numpyro's stays: same identity)."""
    ours_name = "stabledist" + module.removeprefix("numpyro.distributions")
    upstream = importlib.import_module(module)
    try:
        ours = importlib.import_module(ours_name)
    except ImportError:
        return None
    missing = object()
    mine, theirs = getattr(ours, name, missing), getattr(upstream, name, missing)
    return ours_name if mine is not missing and mine is not theirs else None


def _alias(name: str, asname: str | None) -> str:
    return name if asname is None else f"{name} as {asname}"


def _rewrite_import(node: ast.Import) -> list[str] | None:
    """``import numpyro.distributions as dist`` -> ``import stabledist as dist`` (and
    ``import numpyro.distributions.<sub> as m`` where stabledist mirrors the submodule)."""
    kept, new = [], []
    for a in node.names:
        if a.name == "numpyro.distributions" and a.asname:
            new.append(f"import stabledist as {a.asname}")
        elif a.name.startswith("numpyro.distributions.") and a.asname:
            sub = a.name.removeprefix("numpyro.distributions.")
            mirror = sys.modules.get(f"stabledist.{sub}")
            if mirror is not None and mirror is not importlib.import_module(a.name):
                new.append(f"import stabledist.{sub} as {a.asname}")
            else:
                kept.append(_alias(a.name, a.asname))
        else:  # a bare `import numpyro.distributions` cannot be retargeted: numpyro's stays
            kept.append(_alias(a.name, a.asname))
    if not new:
        return None
    return ([f"import {', '.join(kept)}"] if kept else []) + new


def _rewrite_from(node: ast.ImportFrom) -> list[str] | None:
    """``from numpyro import distributions as d`` and ``from numpyro.distributions[.sub]
    import X``: each name from stabledist where it has its own object."""
    module = node.module or ""
    if node.level or not (module == "numpyro" or module == "numpyro.distributions"
                          or module.startswith("numpyro.distributions.")):
        return None
    kept: list[str] = []
    moved: dict[str, list[str]] = {}
    extra: list[str] = []
    for a in node.names:
        if module == "numpyro":
            if a.name == "distributions":
                extra.append(f"import stabledist as {a.asname or 'distributions'}")
            else:
                kept.append(_alias(a.name, a.asname))
            continue
        source = None if a.name == "*" else _stable_source(module, a.name)
        if source is None:
            kept.append(_alias(a.name, a.asname))
        else:
            moved.setdefault(source, []).append(_alias(a.name, a.asname))
    if not moved and not extra:
        return None
    statements = [f"from {module} import {', '.join(kept)}"] if kept else []
    statements += [f"from {m} import {', '.join(names)}" for m, names in moved.items()]
    return statements + extra


def rewrite_imports(source: str, filename: str) -> tuple[str, list[str]]:
    """Mode A's substitution. Returns the new source and one log line per rewrite. A rewritten
    statement keeps its first line (several statements joined by ``;``) and the lines it
    spanned stay as blank lines, so line numbers match the original file in tracebacks."""
    tree = ast.parse(source, filename)
    lines = source.splitlines(keepends=True)
    edits: list[tuple[int, int, str]] = []
    log: list[str] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            statements = _rewrite_import(node)
        elif isinstance(node, ast.ImportFrom):
            statements = _rewrite_from(node)
        else:
            continue
        if statements is None:
            continue
        first, last = node.lineno - 1, (node.end_lineno or node.lineno) - 1
        indent = lines[first][: node.col_offset]
        tail = lines[last][node.end_col_offset or 0:].strip()
        if indent.strip() or (tail and not tail.startswith("#")):
            raise ValueError(f"{filename}:{node.lineno}: an import shares its line with other "
                             "code; rewrite_imports only handles whole-line imports")
        new = indent + "; ".join(statements) + "\n"
        edits.append((first, last, new + "\n" * (last - first)))
        old = " ".join(line.strip() for line in lines[first : last + 1])
        log.append(f"{filename}:{node.lineno}: {old}\n    -> {new.strip()}")
    for first, last, new in sorted(edits, reverse=True):
        lines[first : last + 1] = [new]
    return "".join(lines), sorted(log, key=lambda s: int(s.split(":")[1]))


# --- running a mode --------------------------------------------------------------------------


def prepare(mode: str, version: str, sources: Sources) -> Path:
    """A fresh work folder for ``mode``: every found test file (all of them, since test_gof
    imports test_distributions), numpyro's conftest.py if the sdist has one, a pytest.ini."""
    work = CACHE / version / mode
    if work.exists():
        shutil.rmtree(work)
    work.mkdir(parents=True)
    log: list[str] = []
    copies = [*sources.files, *(["conftest.py"] if sources.conftest else [])]
    for rel in copies:
        text = (sources.folder / rel).read_text(encoding="utf-8")
        if mode == "substituted":
            text, changes = rewrite_imports(text, rel)
            log += changes
        (work / rel).parent.mkdir(parents=True, exist_ok=True)
        (work / rel).write_text(text, encoding="utf-8")
    (work / "pytest.ini").write_text(pytest_ini(version), encoding="utf-8")
    if mode == "substituted":
        (work / "SUBSTITUTIONS.txt").write_text("\n".join(log) + "\n", encoding="utf-8")
    return work


def environment() -> dict[str, str]:
    """The runs' environment: the plugin importable, XLA flags (before jax starts), CI=true
    (numpyro's tests skip a few slow cases under CI: the counts do not depend on where the
    run happens), two malloc arenas and a compilation cache (as the project's suite)."""
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(TOOLS), env.get("PYTHONPATH")]))
    flags = [env.get("XLA_FLAGS", ""), DEVICES]
    if env.get("STABLEDIST_TEST_XLA_DEFAULTS") != "1":
        flags.append(CHEAP_CODEGEN)
    env["XLA_FLAGS"] = " ".join(f for f in flags if f)
    env["CI"] = "true"
    env.setdefault("MALLOC_ARENA_MAX", "2")
    # JAX's persistent compilation cache: the modes compile the same programs, so the second
    # and third mode (and reruns) load most of them instead of compiling (keyed by program,
    # flags and jax version: never a stale entry).
    env.setdefault("JAX_COMPILATION_CACHE_DIR", str(CACHE / "jax"))
    env.setdefault("JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS", "0")
    env.setdefault("JAX_PERSISTENT_CACHE_MIN_ENTRY_SIZE_BYTES", "-1")
    return env


@dataclass
class Run:
    mode: str
    results: dict[str, tuple[str, float, str]]
    seconds: float
    returncode: int

    def count(self) -> Counter[str]:
        return Counter(outcome for outcome, _, _ in self.results.values())

    def with_outcome(self, *outcomes: str) -> dict[str, str]:
        return {n: m for n, (o, _, m) in sorted(self.results.items()) if o in outcomes}


def run_mode(mode: str, work: Path, files: list[str], workers: int, every: dict[str, int],
             expected: Path, pytest_args: list[str]) -> Run:
    """One pytest run (``every``: file -> keep every K-th test of it)."""
    results = work / "results.tsv"
    results.unlink(missing_ok=True)
    command = [sys.executable, "-m", "pytest", "-c", "pytest.ini", "--rootdir", ".",
               "-p", "upstream_plugin", "-p", "no:cacheprovider", "-q", "--tb=short", "-rfE",
               "--continue-on-collection-errors",
               f"--upstream-mode={mode}", f"--upstream-expected={expected}",
               f"--upstream-results={results}"]
    if workers > 0:
        command += ["-n", str(workers)]
    command += [f"--upstream-slice={f}:{every[f]}" for f in files if every.get(f, 1) > 1]
    command += [*files, *pytest_args]
    print(f"\n=== mode {mode}: {' '.join(command[1:])}\n    (in {work})", flush=True)
    start = time.monotonic()
    code = subprocess.run(command, cwd=work, env=environment()).returncode
    seconds = time.monotonic() - start
    if not results.exists():
        raise SystemExit(f"mode {mode}: pytest wrote no results (exit code {code})")
    return Run(mode, read_results(results), seconds, code)


# --- verdict ---------------------------------------------------------------------------------


@dataclass
class Verdict:
    problems: list[str] = field(default_factory=list)  # fail the target
    notes: list[str] = field(default_factory=list)


def judge(runs: dict[str, Run], entries: list[Expected], full_files: list[str]) -> Verdict:
    """Apply the rules to the runs (see the module docstring)."""
    verdict = Verdict()
    reference = runs.get("numpyro")
    for mode in ("substituted", "stable-internals"):
        if mode not in runs:
            continue
        for nodeid, message in runs[mode].with_outcome("failed", "error").items():
            if reference is None:
                where = "mode numpyro not run"
            elif reference.results.get(nodeid, ("",))[0] in ("failed", "error", "xfailed"):
                where = "fails with numpyro too: list it with the reason"
            else:
                where = "STABLEDIST ONLY: numpyro passes"
            verdict.problems.append(f"[{mode}] unexpected failure ({where}): {nodeid}\n"
                                    f"      {message}")
    for entry in entries:  # deliberate differences: fail as documented, numpyro passes
        if entry.message is None:
            continue
        for mode, run in runs.items():
            outcome, _, message = run.results.get(entry.test, ("", 0.0, ""))
            if mode == "numpyro":
                if outcome in ("failed", "error", "xfailed"):
                    verdict.problems.append(f"[numpyro] a listed difference fails with numpyro "
                                            f"too (list it as a failure): {entry.test}")
            elif outcome == "xfailed" and entry.message not in message:
                verdict.problems.append(
                    f"[{mode}] fails otherwise than the documented difference: {entry.test}\n"
                    f"      expected {entry.message!r}, got: {message}")
    for mode, run in runs.items():
        for nodeid in run.with_outcome("xpassed"):
            listed = [e for e in entries if mode in e.modes and e.matches(nodeid)]
            if not listed or all(e.flaky for e in listed):
                continue  # numpyro's own (non-strict) xfail marks, or a test that fails by
                # chance (flaky entries): counted, not judged
            why = ("passes with numpyro: not allowed in the list" if mode == "numpyro"
                   else "an expected failure passes now: update the list")
            verdict.problems.append(f"[{mode}] {why}: {nodeid}")
    if reference is not None:
        for nodeid, message in reference.with_outcome("failed", "error").items():
            verdict.notes.append(f"[numpyro] fails with numpyro, not listed: {nodeid}\n"
                                 f"      {message}")
    ran = {n for run in runs.values() for n in run.results}
    for entry in entries:
        in_full_file = entry.test.split("::", 1)[0] in full_files
        if in_full_file and not any(entry.matches(n) for n in ran):
            verdict.notes.append(f"expected-failure entry matches no test that ran: {entry.test}")
    return verdict


def table(runs: dict[str, Run]) -> str:
    head = ["mode", *OUTCOMES, "wall"]
    rows = [head, ["---"] * len(head)]
    for mode, run in runs.items():
        counts = run.count()
        minutes, seconds = divmod(round(run.seconds), 60)
        rows.append([mode, *(str(counts[o]) for o in OUTCOMES), f"{minutes}m{seconds:02d}s"])
    return "\n".join("| " + " | ".join(row) + " |" for row in rows)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--modes", default=None,
                        help=f"comma-separated, of {','.join(MODES)} (default: all; --slice: "
                             f"{','.join(SLICE_MODES)})")
    parser.add_argument("--files", nargs="+", default=None, help="test files (default: all)")
    parser.add_argument("--slice", action="store_true",
                        help="the CI slice: " + ", ".join(f"1/{k} of {f}" for f, k in SLICE.items())
                        + ", all of the other files")
    parser.add_argument("--every", type=int, default=1,
                        help="keep every K-th test (by crc32 of the node id) of every file run")
    parser.add_argument("-n", "--workers", type=int, default=2, help="pytest-xdist workers")
    parser.add_argument("--expected", type=Path, default=EXPECTED)
    parser.add_argument("pytest_args", nargs="*", help="after --: passed on to pytest")
    args = parser.parse_args(argv)

    modes = (args.modes.split(",") if args.modes
             else list(SLICE_MODES if args.slice else MODES))
    if not set(modes) <= set(MODES):
        parser.error(f"--modes: unknown {sorted(set(modes) - set(MODES))}")
    entries = load_expected(args.expected)  # fail early on a malformed list

    version = numpyro_version()
    sources = extract_tests(fetch_sdist(version), version)
    print(f"numpyro {version}: test files {', '.join(sources.files)}"
          + (f"; not in the sdist: {', '.join(sources.missing)}" if sources.missing else "")
          + ("" if sources.conftest else "; no test/conftest.py in the sdist"))
    files = sources.files
    if args.files:
        by_name = {f.rsplit("/", 1)[-1]: f for f in files}
        unknown = [f for f in args.files if f.rsplit("/", 1)[-1] not in by_name]
        if unknown:
            parser.error(f"--files: not in numpyro {version}'s sdist: {unknown}")
        files = [by_name[f.rsplit("/", 1)[-1]] for f in args.files]
    every = {f: max(args.every, SLICE.get(f.rsplit("/", 1)[-1], 1) if args.slice else 1)
             for f in files}

    runs: dict[str, Run] = {}
    for mode in modes:
        work = prepare(mode, version, sources)
        runs[mode] = run_mode(mode, work, files, args.workers, every, args.expected.resolve(),
                              args.pytest_args)

    full_files = [] if args.pytest_args else [f for f in files if every[f] == 1]
    verdict = judge(runs, entries, full_files)
    sliced = ", ".join(f"1/{k} of {f}" for f, k in every.items() if k > 1)
    print(f"\n=== numpyro's own tests against stabledist (numpyro {version}"
          f"{f'; slice: {sliced}' if sliced else ''})")
    for note in verdict.notes:
        print(f"note: {note}")
    for problem in verdict.problems:
        print(f"FAIL: {problem}")
    print()
    print(table(runs))
    if any(run.returncode not in (0, 1) for run in runs.values()):
        bad = {m: r.returncode for m, r in runs.items() if r.returncode not in (0, 1)}
        print(f"pytest did not finish normally: exit codes {bad}")
        return 2
    return 1 if verdict.problems else 0


if __name__ == "__main__":
    sys.exit(main())
