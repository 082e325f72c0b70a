"""Rows: what a measured case becomes in a report, and how rows read as a table (no jax).

The user's tool (`stabledist.benchmark`) and the project's suite (``benchmarks/``) both
report through these, so a row reads the same wherever it was measured.
"""

from __future__ import annotations

import json
import math
import statistics
import textwrap
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from stabledist.benchmark._measure import Case, geomean, paired_ratio_interval


@dataclass(frozen=True)
class Verdict:
    """What a target found in one run."""

    value: str
    passed: bool | None  # None: not measured in this profile ("N/A")
    detail: str = ""


Row = dict[str, Any]
"""One summary row (a line of the summary table, an entry of ``summary`` in results.json)."""

UNJUDGED = frozenset({"lazy"})
"""Benchmarks whose single-case rows "no row slower" does not judge (targets of their own)."""

LABELS = {"numpyro": "numpyro", "stabledist": "stabledist",
          "nocache": "no cache (parameters as jit arguments)",
          "numpyro_preread": "numpyro, lazy values read before jit",
          "stabledist_closure": "stabledist closure (simplified constants off)",
          "stabledist_eager": "stabledist, one eager evaluation before jit",
          "plain": "plain attribute read", "raw": "raw arrays"}
"""Variant names in words, for legends and tables."""


def make_row(bench: str, case: str, unit: str, **kw: Any) -> Row:
    """A row with every field; ``verdict`` None and ``judged`` False unless given (a row
    without a paired interval, e.g. an aggregate or a count, is judged by no row rule)."""
    return {"benchmark": bench, "case": case, "unit": unit, "numpyro": None, "stabledist": None,
            "nocache": None, "ratio": None, "ratio_lo": None, "ratio_hi": None, "spread": "",
            "nocache_ratio": None, "speed": True, "note": "", "verdict": None, "judged": False,
            **kw}


def interval_fields(numpyro: Sequence[float], stabledist: Sequence[float]) -> dict[str, Any]:
    """``ratio``, ``ratio_lo``, ``ratio_hi``, ``spread`` and ``verdict`` of a row from paired
    repetitions: the geometric mean of the per-repetition ratios numpyro/stabledist and its
    95% t-interval (`paired_ratio_interval`). One side missing: no ratio, "unresolved"."""
    if not numpyro or not stabledist:
        return {"ratio": None, "ratio_lo": None, "ratio_hi": None, "spread": "not measured",
                "verdict": "unresolved"}
    iv = paired_ratio_interval(numpyro, stabledist)
    n = iv["n"]
    spread = (f"95% CI (t, {n} reps)" if n >= 2 else "one run: unresolved" if n == 1 else "no run")
    return {"ratio": iv["ratio"], "ratio_lo": iv["lo"], "ratio_hi": iv["hi"],
            "spread": spread, "verdict": iv["verdict"]}


def _judged(bench: str, judged: bool | None) -> bool:
    return bench not in UNJUDGED if judged is None else judged


def single(bench: str, case: Case, unit: str, label: str | None = None,
           note: str = "", judged: bool | None = None) -> Row:
    """One case: medians per variant; the paired ratio numpyro/stabledist with its 95%
    interval and verdict. ``judged`` (default: unless the benchmark is in `UNJUDGED`):
    whether the global "no row slower" target counts it."""
    return make_row(bench, label or case.name, case.params.get("unit", unit),
                    numpyro=case.median("numpyro"), stabledist=case.median("stabledist"),
                    nocache=case.median("nocache"),
                    nocache_ratio=case.ratio_median("nocache", "stabledist"),
                    note=note, judged=_judged(bench, judged),
                    **interval_fields(case.samples.get("numpyro", []),
                                      case.samples.get("stabledist", [])))


def _runs(value: float | Sequence[float] | None) -> list[float]:
    if value is None:
        return []
    return [float(value)] if isinstance(value, int | float) else [float(v) for v in value]


def first_call_row(bench: str, case: str, first: Mapping[str, float | Sequence[float]],
                   note: str = "", judged: bool | None = None) -> Row:
    """A first-call row (seconds) from ``first``: variant -> one run, or the runs of repeated
    first calls in interleaved order (the i-th of each variant in the same round). Paired as
    in `single`; one run each is "unresolved"."""
    runs = {v: _runs(first.get(v)) for v in ("numpyro", "stabledist", "nocache")}
    np_, sd = runs["numpyro"], runs["stabledist"]
    paired = interval_fields(np_, sd) if len(np_) == len(sd) else interval_fields([], [])
    med = {v: statistics.median(r) if r else None for v, r in runs.items()}
    nc, s = med["nocache"], med["stabledist"]
    return make_row(bench, case, "s", **med, nocache_ratio=None if nc is None or s is None
                    else nc / s, note=note, judged=_judged(bench, judged), **paired)


def aggregate(bench: str, cases: Sequence[Case], label: str, unit: str,
              note: str = "", speed: bool = True) -> Row:
    """Many cases: geometric means of the per-case median ratios, with the min-max range.
    Not judged by the global "no row slower" target (no interval; such benchmarks have
    targets of their own), so no ``verdict``."""
    ratios = [(r, c) for c in cases if (r := c.ratio_median("numpyro", "stabledist")) is not None]
    worst = min(ratios, key=lambda rc: rc[0]) if ratios else (None, None)
    return make_row(
        bench, f"{label} ({len(cases)} cases)", unit,
        numpyro=geomean([c.median("numpyro") for c in cases]),
        stabledist=geomean([c.median("stabledist") for c in cases]),
        nocache=geomean([c.median("nocache") for c in cases if "nocache" in c.samples]),
        ratio=geomean([r for r, _ in ratios]),
        ratio_lo=worst[0], ratio_hi=max((r for r, _ in ratios), default=None),
        spread="min-max over cases",
        nocache_ratio=geomean([c.ratio_median("nocache", "stabledist") for c in cases]),
        note=(note + "; " if note else "") + (
            f"slowest vs numpyro: {worst[1].name} {worst[0]:.2f}x" if worst[1] else ""),
        speed=speed, judged=False,
    )


def fmt_interval(r: Row, unresolved: str = " (unresolved)") -> str:
    """A row's ratio with its 95% interval, ``1.23x [1.10-1.37]``."""
    lo, hi = r.get("ratio_lo"), r.get("ratio_hi")
    return (f"{r['ratio']:.2f}x [{lo:.2f}-{hi:.2f}]" if lo is not None and hi is not None
            else f"{r['ratio']:.2f}x{unresolved}")


def worst_of(rows: Sequence[Row]) -> tuple[Row, list[Row], bool]:
    """The row whose 95% interval reaches least high (none has one: the lowest ratio), the
    rows judged slower, and whether any row has an interval."""
    resolved = [r for r in rows if r.get("ratio_hi") is not None]
    worst = (min(resolved, key=lambda r: r["ratio_hi"]) if resolved
             else min(rows, key=lambda r: r["ratio"]))
    return worst, [r for r in rows if r.get("verdict") == "slower"], bool(resolved)


def host_device_note(case: Case) -> str:
    """Host (until the call returns) and device (until synchronised) medians per call."""
    hd = case.extra.get("host_device", {})
    parts = [f"{k} {fmt_value(v['host_ns'], 'ns')}+{fmt_value(v['device_ns'], 'ns')}"
             for k, v in hd.items() if k in ("numpyro", "stabledist")]
    return ("host+device per call: " + ", ".join(parts)) if parts else ""


def fmt_value(value: float | None, unit: str) -> str:
    """A human number in the row's unit (ns values shown as ns/us/ms/s)."""
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "-"
    if unit.startswith("ns"):
        for scale, suffix in ((1e9, "s"), (1e6, "ms"), (1e3, "us")):
            if abs(value) >= scale:
                return f"{value / scale:.3g} {suffix}"
        return f"{value:.0f} ns"
    formats = {"s": "{:.3g} s", "MB": "{:+.1f} MB", "traces": "{:.0f}", "us/cycle": "{:.0f} us"}
    return formats[unit].format(value) if unit in formats else f"{value:.3g} {unit}"


WIDTH = 100
"""Terminal lines at most this wide (longer text wraps; nothing is cut)."""

_TIME_UNITS = {"s": 1.0, "ms": 1e-3, "us": 1e-6, "µs": 1e-6, "ns": 1e-9}
_SCALES = (("s", 1.0), ("ms", 1e-3), ("µs", 1e-6), ("ns", 1e-9))
_VARIANTS = ("stabledist", "numpyro", "nocache")
_HEADS = {"nocache": "no-cache"}


def _is_nan(value: float | None) -> bool:
    return value is None or (isinstance(value, float) and math.isnan(value))


def _number(value: float | None) -> str:
    """Three significant digits, never an exponent (a thousands separator instead)."""
    if value is None or math.isnan(value):
        return "-"
    value = float(f"{value:.3g}")
    if value == 0:
        return "0"
    if abs(value) >= 100:
        return f"{value:,.0f}"
    return f"{value:.{2 - math.floor(math.log10(abs(value)))}f}"


def fmt_x(ratio: float | None) -> str:
    """A ratio: two decimals below 10x (1.01x vs 0.99x matters), three digits above."""
    if ratio is None or math.isnan(ratio):
        return "-"
    return f"{ratio:.2f}x" if ratio < 10 else f"{ratio:.3g}x"


def column_scale(rows: Sequence[Row]) -> tuple[str, float]:
    """The group's display unit and the factor from its rows' unit to it: rows of one
    benchmark and one unit share it, so a column never mixes units. Times: the largest of
    s/ms/µs/ns in which the smallest value is at least 0.5."""
    unit = rows[0]["unit"]
    base, _, per = unit.partition("/")
    seconds = _TIME_UNITS.get(base.strip())
    if seconds is None:
        return unit, 1.0
    values = [abs(r[v]) * seconds for r in rows for v in _VARIANTS if not _is_nan(r[v])]
    low = min((v for v in values if v > 0), default=1.0)
    name, scale = next(((n, f) for n, f in _SCALES if low / f >= 0.5), _SCALES[-1])
    return (f"{name} per {per.strip()}" if per else name), seconds / scale


def _cell(value: float | None, unit: str, factor: float) -> str:
    if value is None or math.isnan(value):
        return "-"
    if unit == "MB":
        return f"{value:+.1f}"
    if unit == "traces":
        return f"{value:.0f}"
    return _number(value * factor)


def row_groups(rows: Sequence[Row]) -> list[tuple[str, str, list[Row]]]:
    """``(benchmark, unit, rows)`` per benchmark and unit, in order of first appearance."""
    groups: dict[tuple[str, str], list[Row]] = {}
    for r in rows:
        groups.setdefault((r["benchmark"], r["unit"]), []).append(r)
    return [(b, u, g) for (b, u), g in groups.items()]


def wrap(text: str, width: int, indent: str) -> list[str]:
    return textwrap.wrap(text, width, subsequent_indent=indent, break_on_hyphens=False,
                         break_long_words=True) or [""]


MARKS = {"faster": "faster", "slower": "slower", "unresolved": "?"}
"""A judged row's trailing mark in the verdict table by its verdict ("same": none)."""
MARK_WIDTH = 1 + max(map(len, MARKS.values()))


def mark(r: Row) -> str:
    """`MARKS` of a judged row's verdict, with its leading space; "" otherwise."""
    verdict = r.get("verdict") or "unresolved"
    return f" {MARKS[verdict]}" if r.get("judged") and verdict in MARKS else ""


def group_table(rows: Sequence[Row], heading: Callable[[str, Sequence[Row]], str],
                variants: Sequence[str] = _VARIANTS, num: int = 10) -> list[str]:
    """Rows grouped per benchmark and unit under a heading line (``heading(benchmark, rows)``)
    naming the unit of the group's time columns; ratio = numpyro / stabledist, then the mark."""
    groups = row_groups(rows)
    cases = [len(r["case"]) + 2 for _, _, g in groups for r in g]
    cols = len(variants) + 1
    case_w = min(max([28, *cases]), WIDTH - cols * num - MARK_WIDTH)
    head = [_HEADS.get(v, v) for v in variants] + ["ratio"]
    lines = [f"{'case':<{case_w}}" + "".join(f"{h:>{num}}" for h in head),
             "-" * (case_w + cols * num)]
    for bench, unit, group in groups:
        what = heading(bench, group)
        label, factor = column_scale(group) if unit else ("", 1.0)
        label = "" if what.startswith("ERROR") else label
        lines.append((f"{bench}: {what}" if what else bench) + (f"  [{label}]" if label else ""))
        for r in group:
            cells = [_cell(r[v], unit, factor) for v in variants] + [fmt_x(r["ratio"])]
            name = wrap(r["case"], case_w - 2, "    ")
            lines += [f"  {n}" for n in name[:-1]]
            lines.append(f"  {name[-1]:<{case_w - 2}}" + "".join(f"{c:>{num}}" for c in cells)
                         + mark(r))
    return lines


def write_json(path: Path, payload: dict[str, Any]) -> None:
    def default(obj: Any) -> Any:  # json's own types never come here
        return obj.tolist() if hasattr(obj, "tolist") else str(obj)

    path.write_text(json.dumps(payload, indent=1, default=default, allow_nan=True))
