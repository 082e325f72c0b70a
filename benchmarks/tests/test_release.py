"""Whether the published benchmark numbers still describe the code is a release check
(``make release-check``, benchmarks/release.py), not a test: these tests check the check, on
this repository and on a scratch one, and never fail because the code moved."""

from __future__ import annotations

import subprocess
from pathlib import Path

from benchmarks.publish import NEUTRAL
from benchmarks.release import measured_commit, moved_since, neutral_commits, report

DOC = Path(__file__).resolve().parents[2] / "docs" / "benchmarks.md"
SHA = "0123456789abcdef0123456789abcdef01234567"


def test_the_page_states_its_commit_and_the_check_says_how_far_the_code_moved() -> None:
    """Computed on this repository: a report, whatever it says (a stale page fails `make
    release-check`, not this test)."""
    text = DOC.read_text()
    commit = measured_commit(text)
    assert commit is not None, "docs/benchmarks.md states no measured commit"
    assert f"Measured at commit `{commit}`" in text
    assert "make release-check" in text  # where "how far since" is computed
    moved = moved_since(text)
    assert moved.commit == commit
    assert all(len(sha) == 40 for sha in moved.since)
    assert commit[:12] in report(moved)


def test_release_check_refuses_a_page_older_than_the_code(tmp_path: Path) -> None:
    def git(*args: str) -> str:
        return subprocess.run(["git", *args], cwd=tmp_path, check=True, capture_output=True,
                              text=True).stdout.strip()

    # a scratch repository: a measured commit, then one commit touching benchmarks/ only and
    # one touching stabledist/
    git("init", "-q")
    git("config", "user.email", "t@example.com")
    git("config", "user.name", "t")
    shas = []
    for path in ("stabledist/a.py", "benchmarks/b.py", "stabledist/a.py"):
        (tmp_path / path).parent.mkdir(exist_ok=True)
        with (tmp_path / path).open("a") as f:
            f.write("x = 1\n")
        git("add", "-A")
        git("commit", "-qm", path)
        shas.append(git("rev-parse", "HEAD"))
    measured, bench, core = shas
    page = f"<!-- measured-commit: {measured} -->\n"
    moved = moved_since(page, tmp_path)
    assert moved.since == [core, bench] and moved.problems
    assert "2 commit(s) changed" in report(moved) and "refused" in report(moved)
    # a commit that changes benchmarks/ only may be declared measurement-neutral...
    neutral = page + f"<!-- measurement-neutral: {bench} the report only -->\n"
    assert moved_since(neutral, tmp_path).neutral == [bench]
    assert "1 commit(s) changed" in report(moved_since(neutral, tmp_path))
    # ...never one that changes stabledist/
    wrong = page + f"<!-- measurement-neutral: {core} -->\n"
    assert any("changes stabledist/" in p for p in moved_since(wrong, tmp_path).problems)
    fresh = moved_since(f"<!-- measured-commit: {core} -->\n", tmp_path)
    assert fresh.since == [] and not fresh.problems
    assert "has not moved" in report(fresh)
    assert moved_since("no commit", tmp_path).problems
    (tmp_path / "stabledist" / "a.py").write_text("changed\n")
    assert any("uncommitted" in p for p in moved_since(
        f"<!-- measured-commit: {core} -->\n", tmp_path).problems)


def test_the_commit_comments_are_parsed_strictly_and_dropped_on_publishing() -> None:
    assert measured_commit("Measured at commit `abc`") is None
    assert measured_commit(f"<!-- measured-commit: {SHA} -->") == SHA
    assert neutral_commits(f"<!-- measurement-neutral: {SHA} a new benchmark -->") == {SHA}
    assert neutral_commits(f"<!-- measurement-neutral: {SHA[:12]} -->") == set()
    page = f"a\n<!-- measurement-neutral: {SHA} the report only -->\nb\n"
    assert NEUTRAL.sub("", page) == "a\nb\n"
