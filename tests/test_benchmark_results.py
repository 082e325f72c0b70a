"""The published benchmark results (docs/benchmarks.md) were measured on the current code.

`python -m benchmarks --publish` writes the commit it measured into the page. This test fails
when ``stabledist/`` or ``benchmarks/`` changed after that commit, i.e. when the page shows
numbers of code that no longer exists. Fix: commit, run ``make bench ARGS="--publish"`` and
commit docs/benchmarks.md and docs/img/. Runtime: well under a second (two git calls).
"""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
DOC = ROOT / "docs" / "benchmarks.md"
CODE = ("stabledist", "benchmarks")
FIX = 'regenerate them: commit, then `make bench ARGS="--publish"`, then commit docs/'


def _git(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["git", *args], cwd=ROOT, capture_output=True, text=True,
                          check=False, timeout=60)


def measured_commit(text: str) -> str | None:
    m = re.search(r"<!-- measured-commit: ([0-9a-f]{40}) -->", text)
    return m.group(1) if m else None


def test_the_page_states_the_commit_it_measured() -> None:
    commit = measured_commit(DOC.read_text())
    assert commit is not None, f"docs/benchmarks.md states no measured commit; {FIX}"
    assert f"Measured at commit `{commit}`" in DOC.read_text()


def test_published_results_are_not_older_than_the_code() -> None:
    commit = measured_commit(DOC.read_text())
    assert commit is not None, f"docs/benchmarks.md states no measured commit; {FIX}"
    known = _git("cat-file", "-e", f"{commit}^{{commit}}")
    assert known.returncode == 0, (
        f"the measured commit {commit} is not in this repository (a shallow clone?); {FIX}")
    diff = _git("diff", "--quiet", commit, "HEAD", "--", *CODE)
    changed = _git("diff", "--stat", commit, "HEAD", "--", *CODE).stdout
    assert diff.returncode == 0, (
        f"docs/benchmarks.md shows results of {commit[:12]}, but {'/ and '.join(CODE)}/ "
        f"changed since:\n{changed}\n{FIX}")


def test_measured_commit_parser_rejects_a_page_without_one() -> None:
    assert measured_commit("Measured at commit `abc`") is None
    sha = "0123456789abcdef0123456789abcdef01234567"
    assert measured_commit(f"<!-- measured-commit: {sha} -->") == sha
