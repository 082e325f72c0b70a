"""``make release-check`` (``python -m benchmarks.release``): are the published benchmark
numbers those of the code as it is?

A check, not a test: a test that failed whenever the code moved after the measured commit
(``<!-- measured-commit: <sha> -->``) would make every core fix pay a benchmark run. This
says how far the code has moved since, and refuses a release (exit status 1) while it has.
"""

from __future__ import annotations

import re
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path

from benchmarks.config import ROOT

DOC = ROOT / "docs" / "benchmarks.md"
CODE = ("stabledist", "benchmarks")
"""The paths whose changes can move the published numbers."""
CODE_DIRS = " or ".join(f"{c}/" for c in CODE)
FIX = 'commit, then `make bench ARGS="--publish"`, then commit docs/benchmarks.md and docs/img'


def measured_commit(text: str) -> str | None:
    """The commit the page states it measured (None when it states none)."""
    m = re.search(r"<!-- measured-commit: ([0-9a-f]{40}) -->", text)
    return m.group(1) if m else None


def neutral_commits(text: str) -> set[str]:
    """Commits the page declares measurement-neutral (`benchmarks.publish.NEUTRAL`)."""
    return set(re.findall(r"<!-- measurement-neutral: ([0-9a-f]{40})\b", text))


@dataclass
class Moved:
    """How far the code has moved since the measured commit."""

    commit: str | None
    since: list[str] = field(default_factory=list)
    """Commits after it that changed ``stabledist/`` or ``benchmarks/``, newest first."""
    neutral: list[str] = field(default_factory=list)
    """Of those, the ones the page declares measurement-neutral."""
    problems: list[str] = field(default_factory=list)
    """Why the page cannot be trusted, in sentences (empty: it describes the code)."""
    diffstat: str = ""


def _git(*args: str, root: Path = ROOT) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["git", *args], cwd=root, capture_output=True, text=True,
                          check=False, timeout=60)


def dirty_code(root: Path = ROOT) -> list[str]:
    """Uncommitted changes under `CODE` (``git status --porcelain``)."""
    out = _git("status", "--porcelain", "--", *CODE, root=root)
    out.check_returncode()
    return [line for line in out.stdout.splitlines() if line.strip()]


def moved_since(text: str, root: Path = ROOT) -> Moved:
    """Compare the page's measured commit with HEAD (git history of `CODE` only)."""
    commit = measured_commit(text)
    moved = Moved(commit)
    if commit is None:
        moved.problems.append("docs/benchmarks.md states no measured commit")
        return moved
    if _git("cat-file", "-e", f"{commit}^{{commit}}", root=root).returncode != 0:
        moved.problems.append(f"the measured commit {commit[:12]} is not in this repository "
                              "(a shallow clone?)")
        return moved
    moved.since = _git("rev-list", f"{commit}..HEAD", "--", *CODE, root=root).stdout.split()
    neutral = neutral_commits(text)
    for sha in (s for s in moved.since if s in neutral):
        if _git("diff", "--stat", f"{sha}^", sha, "--", "stabledist", root=root).stdout:
            moved.problems.append(f"{sha[:12]} is declared measurement-neutral but changes "
                                  "stabledist/")
        else:
            moved.neutral.append(sha)
    if dirty := dirty_code(root):
        moved.problems.append(f"{len(dirty)} uncommitted change(s) under {CODE_DIRS}")
    if stale := [s for s in moved.since if s not in moved.neutral]:
        moved.diffstat = _git("diff", "--stat", commit, "HEAD", "--", *CODE, root=root).stdout
        moved.problems.append(f"{len(stale)} commit(s) changed {CODE_DIRS} after the measured "
                              f"commit {commit[:12]}: " + ", ".join(s[:12] for s in stale))
    return moved


def report(moved: Moved) -> str:
    """What the check prints."""
    if moved.commit is None:
        head = "the page states no measured commit"
    elif not moved.since and not moved.problems:
        head = f"the published numbers measured {moved.commit[:12]}; the code has not moved since"
    else:
        head = (f"the published numbers measured {moved.commit[:12]}; since then "
                f"{len(moved.since)} commit(s) touched {'/, '.join(CODE)}/ "
                f"({len(moved.neutral)} declared measurement-neutral)")
    lines = [head, *moved.problems]
    if moved.diffstat:
        lines.append(moved.diffstat.rstrip())
    if moved.problems:
        lines.append(f"refused: {FIX}")
    return "\n".join(lines)


def main() -> int:
    moved = moved_since(DOC.read_text())
    print(report(moved))
    return 1 if moved.problems else 0


if __name__ == "__main__":
    sys.exit(main())
