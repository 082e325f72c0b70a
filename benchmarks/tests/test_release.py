"""Whether the published benchmark numbers still describe the code is a release check
(``make release-check``, benchmarks/release.py), not a test: these tests check the check, on
this repository and on a scratch one, and never fail because the code moved."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))  # the benchmarks package is not installed
DOC = ROOT / "docs" / "benchmarks.md"


def test_the_page_states_the_commit_it_measured() -> None:
    from benchmarks.release import measured_commit

    commit = measured_commit(DOC.read_text())
    assert commit is not None, "docs/benchmarks.md states no measured commit"
    assert f"Measured at commit `{commit}`" in DOC.read_text()
    assert "make release-check" in DOC.read_text()  # where "how far since" is computed


def test_release_check_says_how_far_the_code_moved_and_never_fails_make_test() -> None:
    """Computed on this repository: a report, whatever it says (a stale page fails `make
    release-check`, not this test)."""
    from benchmarks.release import moved_since, report

    moved = moved_since(DOC.read_text())
    assert moved.commit is not None
    assert all(len(sha) == 40 for sha in moved.since)
    assert moved.commit[:12] in report(moved)


def _repo(tmp_path: Path) -> tuple[Path, list[str]]:
    """A scratch repository: a measured commit, then one commit touching benchmarks/ only
    and one touching stabledist/; their shas, oldest first."""
    def git(*args: str) -> str:
        return subprocess.run(["git", *args], cwd=tmp_path, check=True, capture_output=True,
                              text=True).stdout.strip()

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
    return tmp_path, shas


def test_release_check_refuses_a_page_older_than_the_code(tmp_path: Path) -> None:
    from benchmarks.release import moved_since, report

    root, (measured, bench, core) = _repo(tmp_path)
    page = f"<!-- measured-commit: {measured} -->\n"
    moved = moved_since(page, root)
    assert moved.since == [core, bench] and moved.problems
    assert "2 commit(s) changed" in report(moved) and "refused" in report(moved)
    # a commit that changes benchmarks/ only may be declared measurement-neutral...
    neutral = page + f"<!-- measurement-neutral: {bench} the report only -->\n"
    assert moved_since(neutral, root).neutral == [bench]
    assert "1 commit(s) changed" in report(moved_since(neutral, root))
    # ...never one that changes stabledist/
    wrong = page + f"<!-- measurement-neutral: {core} -->\n"
    assert any("changes stabledist/" in p for p in moved_since(wrong, root).problems)
    fresh = moved_since(f"<!-- measured-commit: {core} -->\n", root)
    assert fresh.since == [] and not fresh.problems
    assert "has not moved" in report(fresh)
    assert moved_since("no commit", root).problems
    (root / "stabledist" / "a.py").write_text("changed\n")
    assert any("uncommitted" in p for p in moved_since(
        f"<!-- measured-commit: {core} -->\n", root).problems)


def test_measured_commit_parser_rejects_a_page_without_one() -> None:
    from benchmarks.release import measured_commit, neutral_commits

    assert measured_commit("Measured at commit `abc`") is None
    sha = "0123456789abcdef0123456789abcdef01234567"
    assert measured_commit(f"<!-- measured-commit: {sha} -->") == sha
    assert neutral_commits(f"<!-- measurement-neutral: {sha} a new benchmark -->") == {sha}
    assert neutral_commits(f"<!-- measurement-neutral: {sha[:12]} -->") == set()


def test_publishing_drops_the_measurement_neutral_lines() -> None:
    from benchmarks.publish import NEUTRAL

    sha = "0123456789abcdef0123456789abcdef01234567"
    page = f"a\n<!-- measurement-neutral: {sha} the report only -->\nb\n"
    assert NEUTRAL.sub("", page) == "a\nb\n"
