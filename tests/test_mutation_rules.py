"""The rules of `make test-mutation` (tools/mutation/run.py): its baseline, the mutants' tests
passing without any mutant, runs every test some mutant is judged by, in one pytest process
per test file."""

from __future__ import annotations

import sys
from pathlib import Path

MUTATION = Path(__file__).resolve().parents[1] / "tools" / "mutation"
sys.path.insert(0, str(MUTATION))

from ast_mutants import MUTANTS, AstMutant  # noqa: E402
from run import baseline_selections  # noqa: E402


def _mutant(*tests: str) -> AstMutant:
    return AstMutant("stabledist/_src/cache.py", "f", "x", None, "label", tests)


def test_baseline_merges_selections_by_file_exactly() -> None:
    merged = baseline_selections([
        _mutant("tests/a.py", "-k", "one"), _mutant("tests/b.py", "-k", "two"),
        _mutant("tests/a.py", "-k", "three or four"), _mutant("tests/a.py", "-k", "one"),
        _mutant("tests/c.py", "-k", "five"), _mutant("tests/c.py"),
        _mutant("tests/c.py", "-k", "six"),
    ])
    assert merged == [("tests/a.py", "-k", "(one) or (three or four)"),
                      ("tests/b.py", "-k", "(two)"), ("tests/c.py",)]


def test_baseline_covers_every_mutants_tests() -> None:
    merged = {s[0]: s[2] if len(s) == 3 else None for s in baseline_selections(MUTANTS)}
    assert len(merged) == len(baseline_selections(MUTANTS))  # one process per file
    for m in MUTANTS:
        file, *k = m.tests
        assert file in merged, m.label
        assert merged[file] is None or f"({k[1]})" in merged[file], m.label
