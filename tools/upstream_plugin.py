"""pytest plugin for ``tools/upstream_tests.py``: numpyro's own tests, run against stabledist.

Loaded with ``-p upstream_plugin`` (``tools/`` on ``PYTHONPATH``) into the pytest run of one
mode, in the controller and in every pytest-xdist worker. It lives in ``tools/``, not as a
``conftest.py``, so the project's own suite (``tests/``) never loads it. It does four things:

* ``--upstream-mode=stable-internals``: turns on `stabledist.use_stable_internals` for the
  whole process before any test runs (numpyro's unchanged test files then build stable
  distributions through numpyro's own constructors). The other modes never import stabledist
  here, so the ``numpyro`` reference run is plain numpyro.
* ``--upstream-slice=FILE:K`` (repeatable): keeps every K-th test of FILE only, chosen by
  ``zlib.crc32`` of the node id (not ``hash``, which is salted per process), so the CI slice
  is the same on every machine and in every pytest-xdist worker.
* ``--upstream-expected=TOML``: marks the tests of the checked-in expected-failures list
  (``tests/upstream/expected_failures.toml``) that apply to this mode as ``xfail``
  (non-strict here; the runner treats an ``xpassed`` as a failure).
* ``--upstream-results=TSV``: writes one line per test (node id, outcome, seconds, first line
  of the error), in the controller only, for the runner to count and compare across modes.
"""

from __future__ import annotations

import re
import tomllib
import zlib
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

import pytest

MODES = ("substituted", "stable-internals", "numpyro")
# worst first: a test's outcome is the worst of its setup, call and teardown reports
OUTCOME_ORDER = ("error", "failed", "xpassed", "xfailed", "skipped", "passed")


@dataclass(frozen=True)
class Expected:
    """One entry of the expected-failures list."""

    test: str  # a node id, or a pattern where `*` matches any text (nothing else is special)
    modes: tuple[str, ...]
    reason: str
    flaky: bool = False  # numpyro's test itself passes or fails by chance: a pass is no news
    # a deliberate difference ([[difference]]): the failure's message must contain this text
    message: str | None = None

    def matches(self, nodeid: str) -> bool:
        if "*" not in self.test:
            return nodeid == self.test
        pattern = ".*".join(re.escape(part) for part in self.test.split("*"))
        return re.fullmatch(pattern, nodeid) is not None


def load_expected(path: Path) -> list[Expected]:
    """Read and check the list. Every entry must name the ``numpyro`` mode: an expected
    failure is only allowed for a test that fails with numpyro itself."""
    data = tomllib.loads(path.read_text(encoding="utf-8"))
    entries: list[Expected] = []
    for i, raw in enumerate(data.get("failure", [])):
        where = f"{path}: [[failure]] #{i + 1}"
        unknown = set(raw) - {"test", "modes", "reason", "flaky"}
        if unknown:
            raise ValueError(f"{where}: unknown keys {sorted(unknown)}")
        test, modes, reason = raw.get("test"), raw.get("modes"), raw.get("reason")
        if not isinstance(test, str) or not test:
            raise ValueError(f"{where}: `test` must be a node id or pattern")
        if not isinstance(reason, str) or not reason.strip():
            raise ValueError(f"{where} ({test}): `reason` must say why")
        if not isinstance(modes, list) or not modes or not set(modes) <= set(MODES):
            raise ValueError(f"{where} ({test}): `modes` must be a non-empty subset of {MODES}")
        if "numpyro" not in modes:
            raise ValueError(f"{where} ({test}): a failure numpyro does not have is never "
                             f"expected; `modes` must include \"numpyro\"")
        flaky = raw.get("flaky", False)
        if not isinstance(flaky, bool):
            raise ValueError(f"{where} ({test}): `flaky` must be true or false")
        entries.append(Expected(test, tuple(modes), reason.strip(), flaky))
    for i, raw in enumerate(data.get("difference", [])):
        where = f"{path}: [[difference]] #{i + 1}"
        unknown = set(raw) - {"test", "modes", "reason", "message"}
        if unknown:
            raise ValueError(f"{where}: unknown keys {sorted(unknown)}")
        test, modes, reason, message = (raw.get(k) for k in ("test", "modes", "reason",
                                                               "message"))
        if not isinstance(test, str) or "*" in test or "::" not in test:
            raise ValueError(f"{where}: `test` must be one node id")
        if not isinstance(reason, str) or not reason.strip():
            raise ValueError(f"{where} ({test}): `reason` must say why")
        if not isinstance(message, str) or not message.strip():
            raise ValueError(f"{where} ({test}): `message` must quote the assertion that fails")
        if (not isinstance(modes, list) or not modes or "numpyro" in modes
                or not set(modes) <= set(MODES)):
            raise ValueError(f"{where} ({test}): `modes` must be a non-empty subset of "
                             f"{MODES[:2]}: a difference is where numpyro passes")
        entries.append(Expected(test, tuple(modes), reason.strip(), message=message))
    return entries


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("upstream", "numpyro's tests against stabledist")
    group.addoption("--upstream-mode", choices=MODES, default="numpyro")
    group.addoption("--upstream-expected", default=None, help="expected-failures TOML")
    group.addoption("--upstream-results", default=None, help="TSV of outcomes to write")
    group.addoption("--upstream-slice", action="append", default=[], metavar="FILE:K",
                    help="keep every K-th test of FILE (by crc32 of the node id); repeatable")


def pytest_configure(config: pytest.Config) -> None:
    if config.getoption("upstream_mode") == "stable-internals":
        import numpyro.distributions as nd

        import stabledist

        stabledist.use_stable_internals()
        if not stabledist.is_stable(nd.Normal(0.0, 1.0)):  # pragma: no cover - a broken switch
            raise pytest.UsageError("use_stable_internals() did not take effect")
    config.pluginmanager.register(_Upstream(config), "upstream-run")


def in_slice(nodeid: str, every: int) -> bool:
    """The fixed, deterministic slice: the node id's CRC-32 is divisible by ``every``."""
    return every <= 1 or zlib.crc32(nodeid.encode()) % every == 0


class _Upstream:
    """The per-run hooks (a registered object, so the hooks can keep the config)."""

    def __init__(self, config: pytest.Config) -> None:
        self.config = config
        self.is_worker = hasattr(config, "workerinput")
        self.outcomes: dict[str, tuple[str, float, str]] = {}
        path = config.getoption("upstream_expected")
        mode: str = config.getoption("upstream_mode")
        self.expected = [e for e in load_expected(Path(path)) if mode in e.modes] if path else []

    def pytest_collection_modifyitems(self, items: list[pytest.Item]) -> None:
        config = self.config
        every = {f"{name}::": int(k) for name, k in
                 (spec.rsplit(":", 1) for spec in config.getoption("upstream_slice"))}
        if every:
            keep, dropped = [], []
            for item in items:
                k = every.get(item.nodeid.split("::", 1)[0] + "::", 1)
                (keep if in_slice(item.nodeid, k) else dropped).append(item)
            if dropped:
                config.hook.pytest_deselected(items=dropped)
                items[:] = keep
        for item in items:
            entry = self.entry(item.nodeid)
            if entry is not None:
                item.add_marker(pytest.mark.xfail(reason=entry.reason, strict=False))

    @pytest.hookimpl(tryfirst=True)
    def pytest_runtest_setup(self, item: pytest.Item) -> None:
        """numpyro's tests draw inputs from NumPy's global generator, which nothing seeds: a
        test's inputs then depend on the tests that ran before it in the same worker. Seeded
        per test from its node id, every mode gives each test the same inputs, so an outcome
        that differs between modes is the library's, not chance's."""
        import numpy as np

        np.random.seed(zlib.crc32(item.nodeid.encode()))

    def entry(self, nodeid: str) -> Expected | None:
        return next((e for e in self.expected if e.matches(nodeid)), None)

    def pytest_collectreport(self, report: pytest.CollectReport) -> None:
        """A file that fails to import (``--continue-on-collection-errors``) is one ``error``
        under the file's node id, or ``xfailed`` where the list expects it. pytest-xdist
        forwards only the reports that did not pass to the controller."""
        if self.is_worker or not report.failed:
            return
        outcome = "error" if self.entry(report.nodeid) is None else "xfailed"
        self.outcomes[report.nodeid] = (outcome, 0.0, _message(report))

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        """Fold the setup/call/teardown reports of each test into its worst outcome. Under
        pytest-xdist this runs in the controller for every worker's reports."""
        if self.is_worker:
            return
        config = self.config
        category = config.hook.pytest_report_teststatus(report=report, config=config)[0]
        if category == "failed" and report.when != "call":
            category = "error"
        if category not in OUTCOME_ORDER:  # "" for a passed setup or teardown
            category = "passed"
        old = self.outcomes.get(report.nodeid)
        if old is None:
            worst, seconds, message = category, 0.0, ""
        else:
            worst, seconds, message = old
            worst = min(worst, category, key=OUTCOME_ORDER.index)
        if category != "passed" and (worst == category and not message):
            message = _message(report)
        self.outcomes[report.nodeid] = (worst, seconds + report.duration, message)

    def pytest_sessionfinish(self, session: pytest.Session) -> None:
        if self.is_worker:
            return
        for entry in self.expected:  # a file expected not to import, whose tests ran
            if "::" not in entry.test and any(n.startswith(f"{entry.test}::")
                                              for n in self.outcomes):
                self.outcomes[entry.test] = ("xpassed", 0.0, "the file was collected")
        if any(outcome == "xpassed" and self.entry(nodeid)  # not numpyro's own xfail marks
               for nodeid, (outcome, _, _) in self.outcomes.items()):
            session.exitstatus = pytest.ExitCode.TESTS_FAILED  # the list must stay true
        path = self.config.getoption("upstream_results")
        if path:
            write_results(Path(path), self.outcomes.items())


def _message(report: pytest.TestReport | pytest.CollectReport) -> str:
    """The first line of what went wrong (or of the skip reason), tabs removed."""
    longrepr = report.longrepr
    if isinstance(longrepr, tuple):  # a skip: (path, line, reason)
        text = str(longrepr[2])
    else:
        crash = getattr(longrepr, "reprcrash", None)
        text = crash.message if crash is not None else str(longrepr or "")
    line = next((ln.strip() for ln in text.splitlines() if ln.strip()), "")
    return " ".join(line.split("\t"))[:300]


def write_results(path: Path, rows: Iterable[tuple[str, tuple[str, float, str]]]) -> None:
    lines = [f"{nodeid}\t{outcome}\t{seconds:.3f}\t{message}"
             for nodeid, (outcome, seconds, message) in sorted(rows)]
    path.write_text("".join(line + "\n" for line in lines), encoding="utf-8")


def read_results(path: Path) -> dict[str, tuple[str, float, str]]:
    """The runner's side of `write_results`."""
    results: dict[str, tuple[str, float, str]] = {}
    for line in path.read_text(encoding="utf-8").splitlines():
        nodeid, outcome, seconds, message = line.split("\t", 3)
        results[nodeid] = (outcome, float(seconds), message)
    return results
