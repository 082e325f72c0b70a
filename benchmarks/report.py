"""Turn benchmark results into the summary table, target lines, JSON, Markdown and plots.

Aggregates over many cases (every class, every lazy property) are *geometric means* of the
per-case median ratios, shown with the worst case; single-case rows show the median of the
per-repetition ratios with its interquartile range.
"""

from __future__ import annotations

import json
import math
import statistics
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

from benchmarks.timing import BenchResult, Case, geomean, summarize

SLOWER_BOUND = 1 / 1.05  # numpyro/stabledist below this: stabledist >5% slower
HIT_BOUND = 4.0
TARGETS_TEXT = {
    "flatten": "flatten+unflatten at least 5x faster than numpyro",
    "dispatch": "jitted dispatch with a distribution argument within 1.3x of raw arrays",
    "hit": f"cache hit within {HIT_BOUND:.0f}x of a plain attribute read (same run)",
    "precision": "closed-over precision_matrix at dim 1024 at least 10x faster per call",
    "rss": "RSS flat over the churn run (under 20 MB growth)",
    "e2e": "end-to-end inference (NUTS and SVI) at least 1.0x numpyro for every model "
           "(within 5% where both compile the very same program: the rest is noise)",
    "pcache": "second process (other PYTHONHASHSEED) hits JAX's persistent cache",
    "retrace": "no extra trace for distributions built another way or after reads",
    "slower": "no row slower than numpyro by more than 5%",
}
LABELS = {
    "numpyro": "numpyro",
    "stabledist": "stabledist",
    "nocache": "no cache (parameters as jit arguments)",
    "numpyro_preread": "numpyro, lazy values read before jit",
    "plain": "plain attribute read",
    "raw": "raw arrays",
}
"""Variant names in words, for legends and tables."""


# --------------------------------------------------------------------------------------------
# summary rows
# --------------------------------------------------------------------------------------------


def _row(bench: str, case: str, unit: str, **kw: Any) -> dict[str, Any]:
    row = {"benchmark": bench, "case": case, "unit": unit, "numpyro": None, "stabledist": None,
           "nocache": None, "ratio": None, "ratio_lo": None, "ratio_hi": None,
           "spread": "IQR", "nocache_ratio": None, "speed": True, "note": ""}
    row.update(kw)
    return row


def _single(bench: str, case: Case, unit: str, label: str | None = None,
            note: str = "") -> dict[str, Any]:
    r = summarize(case.ratio("numpyro", "stabledist"))
    return _row(
        bench, label or case.name, case.params.get("unit", unit),
        numpyro=case.median("numpyro"), stabledist=case.median("stabledist"),
        nocache=case.median("nocache"), ratio=r.get("median"), ratio_lo=r.get("q1"),
        ratio_hi=r.get("q3"), nocache_ratio=case.ratio_median("nocache", "stabledist"),
        note=note,
    )


def _aggregate(bench: str, cases: Sequence[Case], label: str, unit: str,
               note: str = "", speed: bool = True) -> dict[str, Any]:
    ratios = [(c.ratio_median("numpyro", "stabledist"), c) for c in cases]
    ratios = [(r, c) for r, c in ratios if r is not None]
    worst = min(ratios, key=lambda rc: rc[0]) if ratios else (None, None)
    nocache = [c.ratio_median("nocache", "stabledist") for c in cases]
    return _row(
        bench, f"{label} ({len(cases)} cases)", unit,
        numpyro=geomean([c.median("numpyro") for c in cases]),
        stabledist=geomean([c.median("stabledist") for c in cases]),
        nocache=geomean([c.median("nocache") for c in cases if "nocache" in c.samples]),
        ratio=geomean([r for r, _ in ratios]),
        ratio_lo=worst[0], ratio_hi=max((r for r, _ in ratios), default=None),
        spread="min-max over cases",
        nocache_ratio=geomean([r for r in nocache if r is not None]),
        note=(note + "; " if note else "") + (
            f"slowest vs numpyro: {worst[1].name} {worst[0]:.2f}x" if worst[1] else ""),
        speed=speed,
    )


def summary_rows(results: Iterable[BenchResult]) -> list[dict[str, Any]]:
    rows: list[dict[str, Any]] = []
    for res in results:
        if res.error:
            rows.append(_row(res.name, "ERROR", "", note=res.error.splitlines()[-1][:120],
                             speed=False))
            continue
        if res.name == "lazy":
            miss = [c for c in res.cases if c.params.get("kind") == "miss"]
            hit = [c for c in res.cases if c.params.get("kind") == "hit"]
            slow = [c for c in miss if (c.ratio_median("numpyro", "stabledist") or 9)
                    < SLOWER_BOUND]
            overhead = summarize([
                statistics.median([a - b for a, b in zip(c.samples["stabledist"],
                                                          c.samples["nocache"])])
                for c in miss]).get("median", math.nan)
            rows.append(_aggregate("lazy", miss, "miss: first read", res.unit,
                                   note=f"{len(slow)} cases >5% slower; cache bookkeeping "
                                   f"per miss (stabledist - no-cache, median) "
                                   f"{fmt_value(overhead, 'ns')}"))
            worst_miss = min(miss, key=lambda c: c.ratio_median("numpyro", "stabledist") or 9,
                             default=None)
            if worst_miss is not None:
                rows.append(_single("lazy", worst_miss, res.unit,
                                    label=f"miss, worst case: {worst_miss.name[5:]}"))
            plain = geomean([c.ratio_median("stabledist", "plain") for c in hit])
            row = _aggregate("lazy", hit, "hit: repeated read", res.unit,
                             note=f"stabledist/plain attribute {plain:.1f}x", speed=False)
            row["note"] += (f"; numpyro's hit is a plain __dict__ read (own {HIT_BOUND:.0f}x "
                            "bound)")
            rows.append(row)
        elif res.name == "flatten":
            rows.append(_aggregate("flatten", [c for c in res.cases
                                               if c.params.get("kind") == "roundtrip"],
                                   "tree_flatten+tree_unflatten", res.unit))
        elif res.name == "dispatch":
            for c in res.cases:
                rows.append(_single("dispatch", c, res.unit, note=(
                    f"stabledist/raw {c.ratio_median('stabledist', 'raw'):.2f}x, "
                    f"numpyro/raw {c.ratio_median('numpyro', 'raw'):.2f}x"
                    + ("" if c.params.get("results_agree", True) else "; RESULTS DIFFER"))))
        elif res.name == "closure":
            for c in res.cases:
                note = _host_device_note(c)
                if not c.params.get("results_agree", True):
                    note += "; RESULTS DIFFER"
                rows.append(_single("closure", c, res.unit, label=f"{c.name} per call",
                                    note=note))
            for c in res.cases:
                first = c.extra.get("first_call_s", {})
                if "numpyro" not in first or "stabledist" not in first:
                    continue
                ph = c.extra.get("first_call_phases", {})
                rows.append(_row(
                    "closure", f"{c.name} first call", "s", numpyro=first["numpyro"],
                    stabledist=first["stabledist"], nocache=first.get("nocache"),
                    ratio=first["numpyro"] / first["stabledist"], spread="one run",
                    note="XLA compiles " + ", ".join(
                        f"{k} {int(v.get('xla_compiles', 0))}" for k, v in ph.items()
                        if k in ("numpyro", "stabledist"))))
        elif res.name == "compile":
            for c in res.cases:
                note = ""
                if c.extra.get("jaxpr_eqns"):
                    note = "jaxpr equations: " + ", ".join(
                        f"{k} {v}" for k, v in c.extra["jaxpr_eqns"].items())
                if c.extra.get("host_device"):
                    note = _host_device_note(c)
                label = {"warm": "warm trace+compile", "cold": "cold trace+compile "
                         "(fresh process)", "run": "compiled call"}.get(
                             c.params.get("kind", ""), f"phase: {c.name}")
                row = _single("compile", c, res.unit, label=label, note=note)
                row["speed"] = c.params.get("kind") != "part"
                rows.append(row)
        elif res.name == "e2e":
            for c in res.cases:
                rows.append(_single("e2e", c, res.unit, note=_phase_note(c)))
        elif res.name == "pcache":
            for c in res.cases:
                kind = c.params.get("kind")
                if kind == "retrace":
                    rows.append(_row("pcache", "extra traces (retraces)", "traces",
                                     numpyro=c.median("numpyro"),
                                     stabledist=c.median("stabledist"), speed=False))
                    continue
                row = _single("pcache", c, res.unit)
                row["speed"] = kind == "second"
                if kind == "second":
                    hits, misses = c.extra["cache_hits"], c.extra["cache_misses"]
                    row["note"] = "persistent-cache hits/misses: " + ", ".join(
                        f"{v} {int(sum(hits[v]))}/{int(sum(misses[v]))}" for v in hits) + (
                        "; numpyro leaf order changed: "
                        f"{c.extra['leaf_order_changed'].get('numpyro')}")
                rows.append(row)
        elif res.name == "memory":
            extra = res.extra
            for c in res.cases:
                row = _row(
                    "memory", c.name, c.params.get("unit", res.unit),
                    numpyro=c.median("numpyro"), stabledist=c.median("stabledist"),
                    speed=False)
                if c.params.get("kind") == "growth":
                    row["note"] = (f"max live cache instances "
                                   f"{extra.get('max_cache_instances')}; after gc "
                                   f"{extra['runs']['stabledist']['after_gc']['cache']}")
                if c.params.get("kind") == "time":
                    row["note"] = "informative only: both children ran at the same time"
                rows.append(row)
    return rows


def _host_device_note(case: Case) -> str:
    """Host (until the call returns) and device (until synchronised) medians per call."""
    hd = case.extra.get("host_device", {})
    parts = [f"{k} {fmt_value(v['host_ns'], 'ns')}+{fmt_value(v['device_ns'], 'ns')}"
             for k, v in hd.items() if k in ("numpyro", "stabledist")]
    return ("host+device per call: " + ", ".join(parts)) if parts else ""


def phase_medians(case: Case, variant: str) -> dict[str, float]:
    ph = case.extra.get("phases", {}).get(variant, {})
    return {k: statistics.median(v) for k, v in ph.items() if v}


def _phase_note(case: Case) -> str:
    """trace/compile/run seconds of both variants, and whether results agree."""
    parts = []
    for v in ("numpyro", "stabledist"):
        m = phase_medians(case, v)
        if m:
            parts.append(f"{v} trace {m['trace'] + m['lower']:.2f} + compile "
                         f"{m['compile']:.2f} + run {m['run']:.2f} s")
    summ = case.extra.get("summary", {})
    same = summ.get("numpyro") == summ.get("stabledist")
    program = {True: "the same inference program as numpyro's",
               False: "a different inference program"}.get(case.params.get("same_program"))
    return "; ".join(([program] if program else []) + parts) + (
        "" if same else "; results differ in the 4th decimal")


# --------------------------------------------------------------------------------------------
# targets
# --------------------------------------------------------------------------------------------


def _target(key: str, value: str, passed: bool | None, detail: str = "") -> dict[str, Any]:
    return {"target": key, "criterion": TARGETS_TEXT[key], "value": value, "passed": passed,
            "detail": detail}


def evaluate_targets(results: Sequence[BenchResult],
                     rows: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    by = {r.name: r for r in results if not r.error}
    out: list[dict[str, Any]] = []
    if "flatten" in by:
        cases = [c for c in by["flatten"].cases if c.params.get("kind") == "roundtrip"]
        ratios = {c.name: c.ratio_median("numpyro", "stabledist") for c in cases}
        g = geomean(list(ratios.values()))
        below = sorted((r, n) for n, r in ratios.items() if r < 5)
        out.append(_target(
            "flatten", f"geomean {g:.2f}x over {len(ratios)} classes", g >= 5,
            f"{len(below)} classes below 5x" + (
                f" (slowest: {', '.join(f'{n} {r:.2f}x' for r, n in below[:5])})"
                if below else "")))
    if "dispatch" in by:
        worst = max(((c.ratio_median("stabledist", "raw"), c.name)
                     for c in by["dispatch"].cases), default=(math.nan, ""))
        out.append(_target("dispatch", f"worst stabledist/raw {worst[0]:.2f}x ({worst[1]})",
                           worst[0] <= 1.3, ", ".join(
                               f"{c.name} {c.ratio_median('stabledist', 'raw'):.2f}x"
                               for c in by["dispatch"].cases)))
    if "lazy" in by:
        hit = [c for c in by["lazy"].cases if c.params.get("kind") == "hit"]
        ratios = [(c.ratio_median("stabledist", "plain"), c.name) for c in hit]
        g = geomean([r for r, _ in ratios])
        worst = max(ratios, default=(math.nan, ""))
        np_plain = geomean([c.ratio_median("numpyro", "plain") for c in hit])
        out.append(_target("hit", f"geomean stabledist/plain {g:.1f}x over {len(hit)} "
                           "properties", g <= HIT_BOUND,
                           f"worst {worst[1]} {worst[0]:.1f}x; numpyro hit/plain "
                           f"{np_plain:.2f}x"))
    if "closure" in by:
        case = by["closure"].case("mvn_precision 1024")
        if case is None:
            out.append(_target("precision", "dim 1024 not measured in this profile", None))
        else:
            r = summarize(case.ratio("numpyro", "stabledist"))
            out.append(_target("precision", f"{r['median']:.1f}x (IQR {r['q1']:.1f}-"
                               f"{r['q3']:.1f})", r["median"] >= 10,
                               f"numpyro {case.median('numpyro') / 1e6:.2f} ms/call, "
                               f"stabledist {case.median('stabledist') / 1e6:.3f} ms/call"))
    if "memory" in by:
        case = by["memory"].case("rss growth")
        if case is not None:
            g = case.median("stabledist")
            out.append(_target("rss", f"stabledist {g:+.1f} MB", g < 20,
                               f"numpyro {case.median('numpyro'):+.1f} MB over the same churn; "
                               f"{by['memory'].extra['runs']['stabledist']['cycles']} cycles"))
    if "e2e" in by:
        cases = [(c.ratio_median("numpyro", "stabledist"), c.name,
                  bool(c.params.get("same_program"))) for c in by["e2e"].cases]
        cases = [(r, n, same) for r, n, same in cases if r is not None]
        failed = [(r, n) for r, n, same in cases
                  if r < 1.0 and not (same and r >= SLOWER_BOUND)]
        worst = min(cases, default=(math.nan, "", False))
        out.append(_target(
            "e2e", f"worst {worst[1]} {worst[0]:.2f}x"
            + (" (the same program as numpyro's)" if worst[2] else ""), not failed,
            ", ".join(f"{n} {r:.2f}x" + ("" if same else " (another program)")
                      for r, n, same in cases)))
    if "pcache" in by:
        case = by["pcache"].case("first call, second process (cache warm)")
        if case is not None:
            hits, misses = case.extra["cache_hits"], case.extra["cache_misses"]
            ok = (sum(hits["stabledist"]) > 0 and sum(misses["stabledist"]) == 0
                  and sum(misses["numpyro"]) > 0)
            saved = (case.median("numpyro") or math.nan) - (case.median("stabledist")
                                                             or math.nan)
            out.append(_target(
                "pcache", f"stabledist {int(sum(hits['stabledist']))} hit(s), "
                f"{int(sum(misses['stabledist']))} miss(es); numpyro "
                f"{int(sum(misses['numpyro']))} miss(es)", ok,
                f"first call in the second process {case.median('numpyro'):.2f} s numpyro, "
                f"{case.median('stabledist'):.2f} s stabledist: {saved:.2f} s saved"))
        rt = by["pcache"].extra.get("retraces")
        if rt:
            out.append(_target(
                "retrace", f"stabledist {rt['stabledist']['extra_traces']} extra, numpyro "
                f"{rt['numpyro']['extra_traces']} extra", rt["stabledist"]["extra_traces"] == 0,
                "; ".join(f"{c['call']}: +{c['new_traces']}"
                          for c in rt["stabledist"]["calls"] if c["new_traces"])))
    speed_rows = [r for r in rows if r["speed"] and r["ratio"] is not None]
    if speed_rows:
        slow = [r for r in speed_rows if r["ratio"] < SLOWER_BOUND]
        worst = min(speed_rows, key=lambda r: r["ratio"])
        out.append(_target(
            "slower", f"worst row {worst['benchmark']} / {worst['case']}: "
            f"{worst['ratio']:.2f}x", not slow,
            (f"{len(slow)} of {len(speed_rows)} rows slower by >5%: " + "; ".join(
                f"{r['benchmark']}/{r['case']} {r['ratio']:.2f}x" for r in slow))
            if slow else f"all {len(speed_rows)} rows within 5% or faster"))
    return out


# --------------------------------------------------------------------------------------------
# text
# --------------------------------------------------------------------------------------------


def fmt_value(value: float | None, unit: str) -> str:
    """A human number in the row's unit (ns values shown as ns/us/ms/s)."""
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "-"
    if unit.startswith("ns"):
        for scale, suffix in ((1e9, "s"), (1e6, "ms"), (1e3, "us")):
            if abs(value) >= scale:
                return f"{value / scale:.3g} {suffix}"
        return f"{value:.0f} ns"
    if unit == "s":
        return f"{value:.3g} s"
    if unit == "MB":
        return f"{value:+.1f} MB"
    if unit == "traces":
        return f"{value:.0f}"
    if unit == "us/cycle":
        return f"{value:.0f} us"
    return f"{value:.3g} {unit}"


def fmt_ratio(row: dict[str, Any]) -> str:
    if row["ratio"] is None:
        return "-"
    lo, hi = row["ratio_lo"], row["ratio_hi"]
    spread = f" [{lo:.2f}-{hi:.2f}]" if lo is not None and hi is not None else ""
    return f"{row['ratio']:.2f}x{spread}"


def table_lines(rows: Sequence[dict[str, Any]], markdown: bool) -> list[str]:
    head = ["benchmark", "case", "numpyro", "stabledist", "no-cache", "numpyro/stabledist",
            "no-cache/stabledist", "note"]
    body = []
    for r in rows:
        nc = r["nocache_ratio"]
        body.append([r["benchmark"], r["case"], fmt_value(r["numpyro"], r["unit"]),
                     fmt_value(r["stabledist"], r["unit"]), fmt_value(r["nocache"], r["unit"]),
                     fmt_ratio(r), "-" if nc is None or math.isnan(nc) else f"{nc:.2f}x",
                     r["note"]])
    if markdown:
        lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
        lines += ["| " + " | ".join(c.replace("|", "/") for c in row) + " |" for row in body]
        return lines
    widths = [max(len(h), *(len(row[i]) for row in body)) if body else len(h)
              for i, h in enumerate(head[:-1])]
    fmt = "  ".join(f"{{:<{w}}}" for w in widths) + "  {}"
    return [fmt.format(*head), fmt.format(*("-" * w for w in widths), "-" * 4)] + [
        fmt.format(*row) for row in body]


WIDTH = 100


def _clip(text: str, width: int) -> str:
    return text if len(text) <= width else text[: width - 1] + "~"


def compact_lines(payload: dict[str, Any]) -> list[str]:
    """The terminal summary: one line of at most ``WIDTH`` characters per summary row and
    per target (notes, spreads and every case are in report.md)."""
    head = f"{'benchmark':<9} {'case':<47} {'numpyro':>10} {'stabledist':>10} {'ratio':>7}"
    lines = ["ratio = numpyro time / stabledist time (above 1: stabledist faster); "
             "* = >5% slower", head, "-" * len(head)]
    for r in payload["summary"]:
        ratio = "-" if r["ratio"] is None else f"{r['ratio']:.2f}x"
        slow = r["speed"] and r["ratio"] is not None and r["ratio"] < SLOWER_BOUND
        unit = r["unit"]
        lines.append(_clip(
            f"{r['benchmark']:<9} {_clip(r['case'], 47):<47} "
            f"{fmt_value(r['numpyro'], unit):>10} {fmt_value(r['stabledist'], unit):>10} "
            f"{ratio:>7}{' *' if slow else ''}", WIDTH))
    lines.append("")
    for t in payload["targets"]:
        status = {True: "PASS", False: "FAIL", None: "N/A "}[t["passed"]]
        lines.append(_clip(f"{status}  {t['criterion']}: {t['value']}", WIDTH))
    return lines


def target_lines(targets: Sequence[dict[str, Any]]) -> list[str]:
    lines = []
    for t in targets:
        status = {True: "PASS", False: "FAIL", None: "N/A "}[t["passed"]]
        lines.append(f"{status}  {t['criterion']}: {t['value']}"
                     + (f"  ({t['detail']})" if t["detail"] else ""))
    return lines


# --------------------------------------------------------------------------------------------
# files
# --------------------------------------------------------------------------------------------


def write_json(path: Path, payload: dict[str, Any]) -> None:
    def default(obj: Any) -> Any:
        if hasattr(obj, "tolist"):
            return obj.tolist()
        if isinstance(obj, float | int):
            return obj
        return str(obj)

    path.write_text(json.dumps(payload, indent=1, default=default, allow_nan=True))


def _case_table(res: BenchResult) -> list[str]:
    variants = list(res.variants)
    extra_variants = sorted({v for c in res.cases for v in c.samples} - set(variants))
    variants += extra_variants
    head = ["case", *variants, "numpyro/stabledist (IQR)", "no-cache/stabledist"]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for c in res.cases:
        unit = c.params.get("unit", res.unit)
        cells = [c.name]
        for v in variants:
            s = summarize(c.samples.get(v, []))
            cells.append(fmt_value(s.get("median"), unit) if s.get("n") else "-")
        r = summarize(c.ratio("numpyro", "stabledist"))
        cells.append(f"{r['median']:.2f}x ({r['q1']:.2f}-{r['q3']:.2f})" if r.get("n") else "-")
        nc = c.ratio_median("nocache", "stabledist")
        cells.append(f"{nc:.2f}x" if nc else "-")
        lines.append("| " + " | ".join(cells) + " |")
    return lines


def write_markdown(path: Path, payload: dict[str, Any], results: Sequence[BenchResult],
                   plots: Sequence[str]) -> None:
    env = payload["environment"]
    v = env["versions"]
    lines = [
        "# stabledist vs numpyro: benchmark report",
        "",
        f"- command: `{payload['command']}` (profile `{payload['profile']['label']}`)",
        f"- when: {env['timestamp']}, load average at start {env['load_average_start']}, "
        f"at end {payload.get('load_average_end')}",
        f"- jax {v['jax']}, jaxlib {v['jaxlib']}, numpyro {v['numpyro']}, stabledist "
        f"{v['stabledist']}, Python {env['python']}",
        f"- backend `{env['backend']}`, device kind `{env['device_kind']}`, "
        f"{env['device_count']} device(s), {env['cpu_count']} CPUs "
        f"(affinity {env['cpu_affinity']}), {env['platform']}",
        f"- total wall time {payload['seconds']:.0f} s",
        "",
        "Ratios are numpyro/stabledist (above 1: stabledist faster), median of the per-"
        "repetition ratios; aggregates are geometric means over cases with the min-max range.",
        "",
        "## Targets",
        "",
        *[f"- {line}" for line in target_lines(payload["targets"])],
        "",
        "## Summary",
        "",
        *table_lines(payload["summary"], markdown=True),
        "",
    ]
    if plots:
        lines += ["## Plots", ""] + [f"![{p}]({p})" for p in plots] + [""]
    for res in results:
        lines += [f"## {res.name}: {res.title}", ""]
        if res.error:
            lines += ["```", res.error, "```", ""]
            continue
        lines += [f"Unit: {res.unit}. {res.seconds:.0f} s.", "", "Variants:", ""]
        lines += [f"- `{k}`: {t}" for k, t in res.variants.items()]
        lines += ["", f"No-cache here: {res.nocache}", ""]
        lines += [*_case_table(res), ""]
        hd = [c for c in res.cases if c.extra.get("host_device")]
        if hd:
            lines += ["Host and device time per call (median ns over single synchronised "
                      "calls: host = until the call returns, device = from then until "
                      "`block_until_ready` returns):", "",
                      "| case | " + " | ".join(f"{LABELS.get(v, v)} host / device"
                                               for v in hd[0].extra["host_device"]) + " |",
                      "|" + "---|" * (1 + len(hd[0].extra["host_device"]))]
            for c in hd:
                lines.append(f"| {c.name} | " + " | ".join(
                    f"{fmt_value(x['host_ns'], 'ns')} / {fmt_value(x['device_ns'], 'ns')}"
                    for x in c.extra["host_device"].values()) + " |")
            lines.append("")
        if res.name == "closure":
            lines += ["First call of each new closure (s; trace + lower + compile + run, "
                      "XLA compiles):", "",
                      "| case | " + " | ".join(LABELS[v] for v in LABELS
                                               if v in res.cases[0].extra["first_call_s"])
                      + " |", "|" + "---|" * (1 + len(res.cases[0].extra["first_call_s"]))]
            for c in res.cases:
                fc, ph = c.extra["first_call_s"], c.extra.get("first_call_phases", {})
                lines.append(f"| {c.name} | " + " | ".join(
                    f"{fc[v]:.2f} ({int(ph.get(v, {}).get('xla_compiles', 0))})"
                    for v in LABELS if v in fc) + " |")
            lines.append("")
        if res.name == "e2e":
            lines += ["Phases (median s over repetitions; trace includes lowering):", "",
                      "| case | variant | trace | compile | run | total | XLA compiles |",
                      "|---|---|---|---|---|---|---|"]
            for c in res.cases:
                for v in res.variants:
                    m = phase_medians(c, v)
                    if m:
                        lines.append(f"| {c.name} | {v} | {m['trace'] + m['lower']:.2f} | "
                                     f"{m['compile']:.2f} | {m['run']:.2f} | "
                                     f"{c.median(v):.2f} | {m['xla_compiles']:.0f} |")
            lines += ["", "Models:", ""]
            seen_models: set[str] = set()
            for c in res.cases:
                if c.params["model"] not in seen_models:
                    seen_models.add(c.params["model"])
                    lines.append(f"- `{c.params['model']}`: {c.params['what']}")
            lines.append("")
        if res.name == "pcache" and res.extra.get("retraces"):
            lines += [f"Persistent cache: {res.extra['function']}; first process "
                      f"PYTHONHASHSEED={res.extra['seeds'][0]}, second "
                      f"{res.extra['seeds'][1]}, fresh cache directory per variant.", "",
                      f"Retraces ({res.extra['retrace_calls']}):", "",
                      "| call | numpyro new traces | stabledist new traces |",
                      "|---|---|---|"]
            rt = res.extra["retraces"]
            for a, b in zip(rt["numpyro"]["calls"], rt["stabledist"]["calls"]):
                lines.append(f"| {a['call']} | {a['new_traces']} | {b['new_traces']} |")
            lines.append("")
        if res.name == "flatten" and res.extra.get("breakdown"):
            lines += ["Breakdown (median ns; `floor` = a minimal registered node with the "
                      "same leaves, i.e. JAX's own cost):", ""]
            for b in res.extra["breakdown"]:
                lines.append(f"- {b['class']}: " + ", ".join(
                    f"{k} {val:.0f}" for k, val in b["median_ns"].items()))
            lines.append("")
        if res.extra.get("skipped"):
            lines += [f"Skipped ({len(res.extra['skipped'])}):", ""]
            lines += [f"- {k}: {why}" for k, why in sorted(res.extra["skipped"].items())]
            lines.append("")
    path.write_text("\n".join(lines) + "\n")


# --------------------------------------------------------------------------------------------
# plots
# --------------------------------------------------------------------------------------------

COLORS = {"numpyro": "#d62728", "stabledist": "#1f77b4", "nocache": "#7f7f7f",
          "numpyro_preread": "#ff9896"}


def write_plots(outdir: Path, results: Sequence[BenchResult]) -> list[str]:
    """One PNG per headline result; returns the file names written."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    by = {r.name: r for r in results if not r.error}
    written: list[str] = []

    def save(fig: Any, name: str) -> None:
        fig.tight_layout()
        fig.savefig(outdir / name, dpi=110)
        plt.close(fig)
        written.append(name)

    if "flatten" in by:
        cases = [c for c in by["flatten"].cases if c.params.get("kind") == "roundtrip"]
        data = sorted((c.ratio_median("numpyro", "stabledist") or 0, c) for c in cases)
        fig, ax = plt.subplots(figsize=(7, 1.2 + 0.16 * len(data)))
        ys = range(len(data))
        ax.barh(list(ys), [r for r, _ in data], color=COLORS["stabledist"])
        ax.set_yticks(list(ys), [c.name for _, c in data], fontsize=7)
        ax.set_ylim(-0.7, len(data) - 0.3)
        ax.axvline(5, color="k", ls="--", lw=1, label="target: 5x faster")
        ax.axvline(1, color=COLORS["numpyro"], lw=1, label="as fast as numpyro")
        ax.set_xlabel("numpyro / stabledist time (flatten + unflatten), higher is better")
        ax.set_title("Pytree round trip speed-up per class")
        ax.legend(loc="lower right")
        save(fig, "bench-flatten.png")

    if "closure" in by:
        titles = {
            "mvn_precision": ("bench-precision.png", "dimension n",
                              "jit(lambda x: d.precision_matrix @ x), d a global MVN"),
            "truncnormal_logp": ("bench-truncnormal.png", "batch size B",
                                 "jit(lambda x: d.log_prob(x)), d a global TruncatedNormal"),
            "sbvm_logp": ("bench-sbvm.png", "observations B",
                          "jit(lambda x: d.log_prob(x)), d a global SineBivariateVonMises"),
        }
        for family, (name, xlabel, title) in titles.items():
            cases = [c for c in by["closure"].cases if c.params["family"] == family]
            if not cases:
                continue
            fig, (ax, ax2) = plt.subplots(1, 2, figsize=(11, 4.4))
            sizes = [c.params["size"] for c in cases]
            for variant, color in COLORS.items():
                stats = [summarize(c.samples.get(variant, [])) for c in cases]
                if not all(s.get("n") for s in stats):
                    continue
                style = "--" if variant == "numpyro_preread" else "-"
                med = [s["median"] / 1e3 for s in stats]
                err = [[(s["median"] - s["q1"]) / 1e3 for s in stats],
                       [(s["q3"] - s["median"]) / 1e3 for s in stats]]
                ax.errorbar(sizes, med, yerr=err, marker="o", ms=4, capsize=2, color=color,
                            label=LABELS[variant], ls=style)
                first = [c.extra.get("first_call_s", {}).get(variant) for c in cases]
                if all(f is not None for f in first):
                    ax2.plot(sizes, first, marker="o", ms=4, color=color,
                             label=LABELS[variant], ls=style)
            for a in (ax, ax2):
                a.set_xscale("log")
                a.set_yscale("log")
                a.set_xlabel(xlabel)
                a.grid(True, which="both", alpha=0.3)
                a.legend(fontsize=8)
            ax.set_ylabel("time per call (us), median and IQR")
            ax.set_title(title, fontsize=9)
            ax2.set_ylabel("first call: trace + compile + run (s)")
            ax2.set_title("first call of a new jitted closure (once per distribution)",
                          fontsize=9)
            save(fig, name)

    if "e2e" in by and by["e2e"].cases:
        cases = by["e2e"].cases
        fig, ax = plt.subplots(figsize=(8, 1.4 + 0.55 * len(cases)))
        colors = {"trace": "#9467bd", "compile": "#8c564b", "run": "#2ca02c"}
        ys, labels = [], []
        for i, c in enumerate(cases):
            for j, variant in enumerate(("numpyro", "stabledist")):
                m = phase_medians(c, variant)
                if not m:
                    continue
                y = i * 2.6 + j
                left = 0.0
                for phase, value in (("trace", m["trace"] + m["lower"]),
                                     ("compile", m["compile"]), ("run", m["run"])):
                    ax.barh(y, value, left=left, color=colors[phase],
                            label=phase if (i, j) == (0, 0) else None,
                            hatch="//" if variant == "numpyro" else None, edgecolor="white")
                    left += value
                ys.append(y)
                labels.append(f"{c.name}, {variant}")
        ax.set_yticks(ys, labels, fontsize=8)
        ax.invert_yaxis()
        ax.set_xlabel("seconds (median over repetitions): trace (incl. lowering), XLA "
                      "compile, run")
        ax.set_title("End-to-end inference, per phase (hatched: numpyro)", fontsize=10)
        ax.legend(fontsize=8, loc="lower right")
        ax.grid(True, axis="x", alpha=0.3)
        save(fig, "bench-e2e.png")

    if "memory" in by:
        runs = by["memory"].extra["runs"]
        fig, (ax, ax2) = plt.subplots(1, 2, figsize=(11, 4.2))
        for module, run in runs.items():
            trace = run["trace"]
            base = trace[0]["rss_mb"]
            ax.plot([p["cycle"] for p in trace], [p["rss_mb"] - base for p in trace],
                    color=COLORS[module], lw=3.5 if module == "numpyro" else 1.5,
                    alpha=0.6 if module == "numpyro" else 1.0, marker="o", ms=2,
                    label=f"{LABELS[module]} (RSS at start {base:.0f} MB)")
        ax.axhline(20, color="k", ls="--", lw=1, label="target: less than 20 MB growth")
        ax.set_ylim(min(-1.0, ax.get_ylim()[0]), 25)
        ax.set_xlabel("create / read / drop cycle")
        ax.set_ylabel("process RSS growth since the start (MB)")
        ax.set_title("Process memory over the churn run (fresh process each)", fontsize=9)
        ax.legend(fontsize=8, loc="upper left")
        ax.grid(True, alpha=0.3)
        trace = runs["stabledist"]["trace"]
        ax2.plot([p["cycle"] for p in trace], [p["cache_instances"] for p in trace],
                 color=COLORS["stabledist"], marker="o", ms=2,
                 label="stabledist: instances with cached values")
        ax2.plot([p["cycle"] for p in trace], [p["cache_values"] for p in trace],
                 color="#17becf", ls="--", label="stabledist: cached values")
        ax2.set_ylim(bottom=-0.5, top=max(10, *(p["cache_values"] for p in trace)) * 1.2)
        ax2.set_xlabel("create / read / drop cycle")
        ax2.set_ylabel("live cache entries")
        ax2.set_title("stabledist's cache between cycles (dropped instances leave nothing)",
                      fontsize=9)
        ax2.legend(fontsize=8, loc="upper left")
        ax2.grid(True, alpha=0.3)
        save(fig, "bench-rss.png")
    return written
