"""What a run of the user's benchmark returns, a `Report`: its rows and cases, the lazy
values it saw read, the environment, and how they read (a verdict table, JSON, a plot).
"""

from __future__ import annotations

import dataclasses
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from stabledist.benchmark._environment import describe, python_build_text
from stabledist.benchmark._measure import SAME_HIGH, SAME_LOW, Case
from stabledist.benchmark._rows import Row, fmt_x, group_table, wrap, write_json

__all__ = ["LazyRead", "Report", "new_report"]

VARIANTS = ("numpyro", "stabledist")
"""The two libraries, in the order of the table's columns."""


@dataclass(frozen=True)
class LazyRead:
    """A lazy value a traced program read, and the equations its computation put into each
    library's program (0: the program reads it as a constant, computed once outside)."""

    owner: str
    """The class whose lazy value it is."""
    name: str
    numpyro_equations: int | None
    stabledist_equations: int | None

    def verdict(self) -> str:
        ours, theirs = self.stabledist_equations, self.numpyro_equations
        if ours is None or theirs is None:
            return "not counted (its computation cannot be traced on its own)"
        if ours < theirs:
            return ("computed once by stabledist, in every call by numpyro" if ours == 0
                    else "fewer equations with stabledist")
        if ours == theirs == 0:
            return "a constant for both (read before the trace)"
        return ("in the program for both: its parameters are traced, or its work is "
                "elementwise, which stabledist leaves in the program as numpyro does")


@dataclass
class Report:
    """The results of one benchmark run: rows (one per measured situation), the measured
    cases with every repetition, the lazy values read under a trace, and the environment
    (versions, backend, device) they were measured in."""

    title: str
    kind: str
    """``"distribution"``, ``"model"`` or ``"function"``."""
    rows: list[Row] = field(default_factory=list)
    cases: list[Case] = field(default_factory=list)
    reads: list[LazyRead] = field(default_factory=list)
    environment: dict[str, Any] = field(default_factory=dict)
    quiet: bool = False
    started: float = field(default_factory=time.perf_counter)

    def add(self, case: Case, row: Row) -> None:
        self.cases.append(case)
        self.rows.append(row)

    def progress(self, message: str) -> None:
        """A progress line on stderr, with the seconds since the run began."""
        if not self.quiet:
            print(f"[{time.perf_counter() - self.started:6.1f}s] {message}", file=sys.stderr,
                  flush=True)

    def row(self, case: str) -> Row:
        """The row of the case named ``case``."""
        if found := [r for r in self.rows if r["case"] == case]:
            return found[0]
        raise KeyError(f"no row {case!r}; rows: {[r['case'] for r in self.rows]}")

    def table(self) -> str:
        """The verdict table a person reads in ten seconds, then the lazy values read."""
        env, v = self.environment, self.environment.get("versions", {})
        lines = [f"{self.title}: backend {env.get('backend')} ({env.get('device_kind')}), jax "
                 f"{v.get('jax')}, numpyro {v.get('numpyro')}, "
                 f"{python_build_text(env.get('python_build'))}", ""]
        lines += group_table(self.rows, lambda group, rows: "", VARIANTS, num=12)
        lines += _reads_lines(self.reads)
        lines += ["", *wrap(LEGEND, 100, ""), "", *wrap(self.verdict(), 100, "  ")]
        return "\n".join(lines)

    def verdict(self) -> str:
        """One sentence per kind of outcome: which rows stabledist wins, loses, ties."""
        text = {"faster": "stabledist faster", "same": "the same", "slower": "stabledist slower",
                "unresolved": "unresolved (too few repetitions)"}
        by: dict[str, list[str]] = {v: [] for v in text}
        for r in self.rows:
            by[r.get("verdict") or "unresolved"].append(f"{r['case']} {fmt_x(r['ratio'])}")
        return "Verdict: " + "; ".join(f"{text[v]}: {', '.join(cases)}"
                                       for v, cases in by.items() if cases) + "."

    def as_dict(self) -> dict[str, Any]:
        return {"title": self.title, "kind": self.kind, "rows": self.rows,
                "cases": [dataclasses.asdict(c) for c in self.cases],
                "reads": [dataclasses.asdict(r) for r in self.reads],
                "environment": self.environment}

    def write_json(self, path: str | Path) -> None:
        write_json(Path(path), self.as_dict())

    def plot(self, path: str | Path) -> None:
        """A bar per row: the ratio numpyro/stabledist with its 95% interval (needs
        matplotlib: ``pip install "stabledist[bench]"``)."""
        try:
            import matplotlib

            matplotlib.use("Agg")
            import matplotlib.pyplot as plt
        except ImportError as e:
            raise ImportError('Report.plot needs matplotlib: pip install "stabledist[bench]"'
                              ) from e
        rows = [r for r in self.rows if r["ratio"]]
        fig, ax = plt.subplots(figsize=(7, 0.45 * len(rows) + 1.2))
        ys = list(range(len(rows)))
        err = [[r["ratio"] - (r["ratio_lo"] or r["ratio"]) for r in rows],
               [(r["ratio_hi"] or r["ratio"]) - r["ratio"] for r in rows]]
        ax.barh(ys, [r["ratio"] for r in rows], xerr=err, color="#1f77b4", capsize=3)
        ax.axvline(1.0, color="black", lw=0.8)
        ax.set_yticks(ys, [r["case"] for r in rows], fontsize=8)
        ax.set_xscale("log")
        ax.invert_yaxis()  # the table's order, top down
        ax.set_xlabel("numpyro time / stabledist time (above 1: stabledist faster)")
        ax.set_title(self.title, fontsize=9)
        fig.tight_layout()
        fig.savefig(path, dpi=110)
        plt.close(fig)

    def __str__(self) -> str:
        return self.table()


def new_report(title: str, kind: str, quiet: bool = False) -> Report:
    """An empty report with this process's environment recorded."""
    return Report(title=title, kind=kind, environment=describe(), quiet=quiet)


LEGEND = ("Times are medians; ratio = numpyro time / stabledist time (above 1: stabledist "
          "faster). A row ends in \"faster\" or \"slower\" when the 95% interval of its "
          f"paired ratios lies wholly above {SAME_HIGH:.2f} or below {SAME_LOW:.2f}, in "
          "nothing when the two are the same, in \"?\" with one repetition.")


def _reads_lines(reads: Sequence[LazyRead]) -> list[str]:
    if not reads:
        return ["", "Lazy values read under the trace: none (nothing to save: the programs "
                "are the same)."]
    width = max(len(f"{r.owner}.{r.name}") for r in reads) + 2
    lines = ["", "Lazy values read under a trace, and the equations each puts in the program:",
             f"  {'value':<{width}}{'numpyro':>9}{'stabledist':>12}"]
    for r in reads:
        theirs, ours = ("-" if n is None else str(n)
                        for n in (r.numpyro_equations, r.stabledist_equations))
        lines.append(f"  {r.owner + '.' + r.name:<{width}}{theirs:>9}{ours:>12}  {r.verdict()}")
    return lines
