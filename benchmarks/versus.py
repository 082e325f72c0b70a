"""``python -m benchmarks.versus REV``: stabledist before and after a change, in one run.

Why: a refactor of the core must leave it as fast as it was, and the benchmark compares
stabledist with numpyro, not with itself. This runs the benchmarks (``--only``, default the
rows a core change can move: lazy, flatten, dispatch, compile) on the working tree and on a
clean checkout of ``REV`` (a ``git worktree``, removed afterwards), in fresh processes, in
rounds of alternating order (ABBA...), each tree with its own harness (the measuring code
must be the same in both: check ``git diff REV -- benchmarks/``). Per summary row it prints
stabledist's median before and after, and the ratio before/after (above 1: faster after) with
the 95% t-interval over the rounds, both raw and divided by numpyro's ratio in the same
process (numpyro is the same code on both sides, so that cancels the load of the moment).
"""

from __future__ import annotations

import argparse
import json
import math
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

from benchmarks.environment import ROOT
from benchmarks.timing import paired_ratio_interval

DEFAULT_ONLY = "lazy,flatten,dispatch,compile"


def _run(tree: Path, only: str, extra: list[str], out: Path) -> dict[tuple[str, str], Any]:
    """One fresh benchmark process in ``tree``: its summary rows by (benchmark, case)."""
    cmd = [sys.executable, "-m", "benchmarks", "--only", only, "--no-strict", "--out", str(out),
           *extra]
    done = subprocess.run(cmd, cwd=tree, capture_output=True, text=True)
    if done.returncode != 0:
        raise SystemExit(f"{' '.join(cmd)} in {tree} failed:\n{done.stderr[-3000:]}")
    rows = json.loads((out / "results.json").read_text())["summary"]
    return {(r["benchmark"], r["case"]): r for r in rows}


def _interval(before: list[float], after: list[float]) -> str:
    iv = paired_ratio_interval(before, after)
    if iv["ratio"] is None:
        return "-"
    if iv["lo"] is None:
        return f"{iv['ratio']:.3f}x"
    return f"{iv['ratio']:.3f}x [{iv['lo']:.3f}-{iv['hi']:.3f}]"


def compare(runs: dict[str, list[dict[tuple[str, str], Any]]]) -> list[str]:
    """The table: per row present in every run, stabledist before/after and the ratios."""
    keys = [k for k in runs["after"][0] if all(k in r for side in runs.values() for r in side)]
    lines = [f"{'row':46s} {'before':>10s} {'after':>10s}  {'before/after':22s} "
             "over numpyro's"]
    for key in keys:
        sd = {s: [r[key]["stabledist"] for r in rs] for s, rs in runs.items()}
        npy = {s: [r[key]["numpyro"] for r in rs] for s, rs in runs.items()}
        if not all(v is not None and v > 0 and math.isfinite(v)
                   for s in sd for v in (*sd[s], *npy[s])):
            continue
        # stabledist's before/after divided by numpyro's before/after in the same rounds
        normed_before = [b / n for b, n in zip(sd["before"], npy["before"])]
        normed_after = [a / n for a, n in zip(sd["after"], npy["after"])]
        unit = runs["after"][0][key]["unit"]
        lines.append(f"{(key[0] + ' / ' + key[1])[:46]:46s} "
                     f"{statistics.median(sd['before']):10.4g} "
                     f"{statistics.median(sd['after']):10.4g}  "
                     f"{_interval(sd['before'], sd['after']):22s} "
                     f"{_interval(normed_before, normed_after)}  [{unit}]")
    return lines


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.versus", description=__doc__)
    parser.add_argument("rev", help="the revision before the change (a commit, a branch)")
    parser.add_argument("--rounds", type=int, default=4,
                        help="fresh-process pairs per tree (default 4; t(0.975, 3) = 3.18)")
    parser.add_argument("--only", default=DEFAULT_ONLY, help=f"default: {DEFAULT_ONLY}")
    parser.epilog = "after --: options for python -m benchmarks (default --quick)"
    argv = list(sys.argv[1:] if argv is None else argv)
    cut = argv.index("--") if "--" in argv else len(argv)
    ns = parser.parse_args(argv[:cut])
    extra = argv[cut + 1:] or ["--quick"]
    with tempfile.TemporaryDirectory(prefix="stabledist-versus-") as tmp:
        before_tree = Path(tmp) / "before"
        subprocess.run(["git", "worktree", "add", "--detach", str(before_tree), ns.rev],
                       cwd=ROOT, check=True, capture_output=True)
        try:
            trees = {"before": before_tree, "after": ROOT}
            runs: dict[str, list[dict[tuple[str, str], Any]]] = {"before": [], "after": []}
            for i in range(ns.rounds):
                order = ("before", "after") if i % 2 == 0 else ("after", "before")
                for side in order:
                    out = Path(tmp) / f"{side}-{i}"
                    runs[side].append(_run(trees[side], ns.only, extra, out))
                    print(f"round {i + 1}/{ns.rounds}: {side} done", file=sys.stderr)
        finally:
            subprocess.run(["git", "worktree", "remove", "--force", str(before_tree)],
                           cwd=ROOT, check=False, capture_output=True)
    print(f"stabledist at {ns.rev} (before) and the working tree (after), {ns.rounds} "
          f"rounds of fresh processes, python -m benchmarks --only {ns.only} {' '.join(extra)}")
    print("\n".join(compare(runs)))


if __name__ == "__main__":
    main()
