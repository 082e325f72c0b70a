"""The rules of `make test-mutation` (tools/mutation/run.py): a kill counts only when the test
that made it passes without any mutant; those tests rerun by node id, split over the jobs, and a
mutant killed otherwise (a timeout, a crash) by its whole selection."""

from __future__ import annotations

import sys
from pathlib import Path

MUTATION = Path(__file__).resolve().parents[1] / "tools" / "mutation"
sys.path.insert(0, str(MUTATION))

from ast_mutants import MUTANTS, AstMutant  # noqa: E402
from run import first_failure, kill_confirmations  # noqa: E402


def _mutant(*tests: str) -> AstMutant:
    return AstMutant("stabledist/_src/lazy/cache.py", "f", "x", None, "label", tests)


def test_kills_are_confirmed_by_the_tests_that_made_them() -> None:
    a, b, c = _mutant("tests/a.py"), _mutant("tests/b.py", "-k", "two"), _mutant("tests/c.py")
    killed = [(a, "tests/a.py::test_one[Normal-x]"), (b, "tests/b.py::test_two (error)"),
              (c, "timed out after 900 s"), (a, "tests/a.py::test_one[Normal-x]"),
              (b, "pytest exit 3: ['INTERNALERROR']"), (c, "tests/a.py::test_three")]
    assert kill_confirmations(killed, 2) == [
        ("tests/a.py::test_one[Normal-x]", "tests/b.py::test_two"),
        ("tests/a.py::test_three",),
        ("tests/c.py",), ("tests/b.py", "-k", "two"),
    ]
    assert kill_confirmations(killed[:1], 2) == [("tests/a.py::test_one[Normal-x]",)]


def test_what_first_failure_names_is_confirmed_by_node_id() -> None:
    output = "..F\nFAILED tests/test_cache.py::test_x[Gamma] - AssertionError: no\n1 failed\n"
    failure = first_failure(1, output)
    assert kill_confirmations([(MUTANTS[0], failure)], 2) == [
        ("tests/test_cache.py::test_x[Gamma]",)]
