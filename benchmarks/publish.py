"""``python -m benchmarks --publish``: write a run's results into docs/benchmarks.md.

The parts between ``<!-- BEGIN GENERATED: name -->`` and ``<!-- END GENERATED: name -->``
are rewritten from the run (the "In short" table, the results with the commit measured, which
``make release-check`` compares with the code); the plots go to docs/img/.
"""

from __future__ import annotations

import re
import shutil
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

from benchmarks.config import ROOT
from benchmarks.registry import REGISTRY, phase_medians
from benchmarks.release import DOC
from benchmarks.report import compact_lines, judged_rows
from stabledist.benchmark._environment import python_build_text
from stabledist.benchmark._measure import SAME_HIGH as FASTER_ABOVE
from stabledist.benchmark._measure import SAME_LOW as SLOWER_BELOW
from stabledist.benchmark._rows import LABELS, fmt_value
from stabledist.benchmark._rows import fmt_x as _x

IMG = ROOT / "docs" / "img"


def _replace(text: str, name: str, body: str) -> str:
    pattern = re.compile(rf"(<!-- BEGIN GENERATED: {name} -->\n).*?(<!-- END GENERATED: "
                         rf"{name} -->)", re.S)
    if not pattern.search(text):
        raise ValueError(f"{DOC} has no generated section {name!r}")
    return pattern.sub(lambda m: m.group(1) + body.rstrip() + "\n" + m.group(2), text)


def _rows(payload: dict[str, Any], bench: str, ratio: bool = False) -> list[dict[str, Any]]:
    """``bench``'s summary rows (``ratio``: only those with a ratio)."""
    return [r for r in payload["summary"]
            if r["benchmark"] == bench and not (ratio and r["ratio"] is None)]


def _first(payload: dict[str, Any], bench: str, case: str,
           ratio: bool = False) -> dict[str, Any] | None:
    """``bench``'s first row whose case starts with ``case`` (``ratio``: of those with one)."""
    return next((r for r in _rows(payload, bench, ratio) if r["case"].startswith(case)), None)


def _word(low: float, high: float) -> str:
    """The verdict on a range of ratios (numpyro / stabledist), by the rows' thresholds."""
    if low > FASTER_ABOVE:
        return "**faster**"
    if high < SLOWER_BELOW:
        return "**costs**"
    if low >= SLOWER_BELOW and high <= FASTER_ABOVE:
        return f"same (within {100 * (1 - SLOWER_BELOW):.0f}%)"
    return "mixed"


def _verdicts(rows: Sequence[dict[str, Any]]) -> str:
    """The verdict on rows judged by their 95% intervals (`stabledist.benchmark`): the counts
    of faster / same / slower / unresolved rows, in words."""
    _, counts = judged_rows(rows)
    if counts["slower"]:
        return f"**{counts['slower']} slower**"
    if counts["faster"] and not counts["same"] and not counts["unresolved"]:
        return "**faster**"
    return ", ".join(f"{n} {k}" for k, n in counts.items() if n) + " (95% intervals)"


def _span(rows: Sequence[dict[str, Any]]) -> str:
    """The range of the rows' ratios."""
    lo, hi = min(r["ratio"] for r in rows), max(r["ratio"] for r in rows)
    return _x(lo) if f"{lo:.2f}" == f"{hi:.2f}" else f"{_x(lo)} to {_x(hi)}"


def _n(count: int, noun: str) -> str:
    return f"{count} {noun}" + ("" if count == 1 else "es" if noun.endswith("s") else "s")


def _vs(row: dict[str, Any], unit: str = "") -> str:
    unit = unit or row["unit"]
    return f"{fmt_value(row['stabledist'], unit)} vs {fmt_value(row['numpyro'], unit)}"


CLOSURE_TEXT = {
    "mvn_precision": ("`jit` closing over a concrete global `MultivariateNormal`: "
                      "`precision_matrix @ x`", "dim"),
    "sbvm_logp": ("`jit` closing over a global `SineBivariateVonMises`: `log_prob` "
                  "(its `norm_const`)", "batch"),
    "truncnormal_logp": ("`jit` closing over a global two-sided `TruncatedNormal`: "
                         "`log_prob` (XLA constant-folds numpyro's recomputation)", "batch"),
}

SIMPLIFIED_TEXT = {
    **CLOSURE_TEXT,
    "truncnormal_logp": ("`jit` closing over a global two-sided `TruncatedNormal`: "
                         "`log_prob` (nothing folded: both compute the normaliser in every "
                         "call)", "batch"),
}
"""`CLOSURE_TEXT` for closures compiled with JAX's simplified constants."""


VerdictRow = tuple[str, str, str, str]
"""``(verdict, where, ratio, stabledist vs numpyro)``: one row of the "In short" table."""


def _ranged(rows: Sequence[dict[str, Any]], where: str, vs: str) -> VerdictRow:
    """The row of timings compared by their ratios' range (`_word`, `_span`)."""
    ratios = [r["ratio"] for r in rows]
    return _word(min(ratios), max(ratios)), where, _span(rows), vs


def _closure_verdicts(payload: dict[str, Any], bench: str = "closure", prefix: str = "",
                      where_prefix: str = "",
                      texts: dict[str, tuple[str, str]] = CLOSURE_TEXT) -> Iterator[VerdictRow]:
    """One row per closure family: the range of its per-call ratios over sizes, and the
    numbers at size 1,024 (or the largest). ``prefix``: the cases' mode label (the
    constants benchmark), ``where_prefix`` what the row says about it."""
    cases = {c["name"]: c for c in payload["benchmarks"].get(bench, {}).get("cases", [])}
    per_call = [r for r in _rows(payload, bench, ratio=True) if r["case"].endswith(" per call")]
    for family, (where, size_word) in texts.items():
        rows = sorted(((cases[r["case"].removesuffix(" per call")]["params"]["size"], r)
                       for r in per_call if r["case"].startswith(prefix + family + " ")),
                      key=lambda sr: sr[0])
        if not rows:
            continue
        shown = next((sr for sr in rows if sr[0] == 1024), rows[-1])
        sizes = f"{size_word} {rows[0][0]:,}" + (f"-{rows[-1][0]:,}" if len(rows) > 1 else "")
        yield _ranged([r for _, r in rows], f"{where_prefix}{where}, per call ({sizes})",
                      f"{_vs(shown[1])} per call at {size_word} {shown[0]:,}")


def _host_side_verdicts(payload: dict[str, Any]) -> Iterator[VerdictRow]:
    """Dispatch, flatten and the persistent cache."""
    if dispatch := _rows(payload, "dispatch", ratio=True):
        yield _ranged(dispatch, "a jitted function taking a distribution, per call "
                      f"({_n(len(dispatch), 'class')})",
                      f"{_vs(dispatch[0])} ({dispatch[0]['case']})")
    if flat := _first(payload, "flatten", "", ratio=True):
        yield _ranged([flat], "pytree flatten + unflatten "
                      f"({flat['case'].split('(')[-1].rstrip(')')}, geometric mean)", _vs(flat))
    if pc := _first(payload, "pcache", "first call, second", ratio=True):
        yield _ranged([pc], "first call in a second process (another `PYTHONHASHSEED`): "
                      "JAX's persistent compilation cache", _vs(pc) + " (numpyro misses the cache)")


def _compile_verdicts(payload: dict[str, Any]) -> Iterator[VerdictRow]:
    """End to end, and the first calls of new closures: rows judged by their intervals."""
    if e2e := _rows(payload, "e2e", ratio=True):
        same = {c["name"]: c["params"].get("same_program")
                for c in payload["benchmarks"]["e2e"].get("cases", [])}
        identical = sum(bool(same.get(r["case"])) for r in e2e)
        yield (_verdicts(e2e), "end to end, compile + run: NUTS, SVI and a jitted `Predictive` "
               f"({_n(len(e2e), 'model run')})", _span(e2e),
               (f"{identical} of {len(e2e)} compile the very same program as numpyro: "
                "their spread is run-to-run noise") if identical
               else "each variant compiles its own program")
    if first := [r for r in _rows(payload, "closure", ratio=True)
                 if r["case"].endswith(" first call")]:
        worst = min(first, key=lambda r: r["ratio"])
        yield (_verdicts(first), "first call of a new jitted closure "
               f"(trace + compile + run, {_n(len(first), 'case')})", _span(first),
               f"worst: {worst['case'].removesuffix(' first call')}, {_vs(worst)}")


def _eager_verdicts(payload: dict[str, Any]) -> Iterator[VerdictRow]:
    """The costs outside ``jit`` (the lazy benchmark) and memory."""
    trivial = _first(payload, "lazy", "first read, trivial")
    if trivial and trivial["stabledist"] is not None:
        yield ("**costs**", "outside `jit`: first read of a trivial lazy value (the cache's "
               "own cost)", f"+{trivial['stabledist'] - trivial['numpyro']:.0f} ns",
               _vs(trivial))
    if miss := _first(payload, "lazy", "miss: first", ratio=True):
        yield (_word(miss["ratio"], miss["ratio"]), "outside `jit`: first read of a lazy value "
               f"({miss['case'].split('(')[-1].rstrip(')')}, geometric mean)",
               f"{_x(miss['ratio'])} (worst {_x(miss['ratio_lo'])})",
               _vs(miss) + " (the cache's bookkeeping)")
    if hit := _first(payload, "lazy", "hit", ratio=True):
        yield _ranged([hit], "outside `jit`: repeated read of a lazy value (cache hit)",
                      _vs(hit) + " (numpyro: a plain `__dict__` read)")
    rss = _first(payload, "memory", "rss growth")
    if rss and rss["stabledist"] is not None:
        cycles = payload["benchmarks"]["memory"].get("extra", {}).get("runs", {}).get(
            "stabledist", {}).get("cycles")
        yield ("flat" if rss["stabledist"] < 20 else "**grows**",
               "process memory over create / read / drop cycles"
               + (f" ({cycles:,})" if cycles else ""), "-", f"RSS growth {_vs(rss, 'MB')}")


def verdict_rows(payload: dict[str, Any]) -> list[VerdictRow]:
    """``(verdict, where, ratio, stabledist vs numpyro)`` per headline result of the run:
    what is faster, what costs, by how much."""
    return [*_closure_verdicts(payload), *_host_side_verdicts(payload), *_compile_verdicts(payload),
            *_closure_verdicts(payload, "constants", "simplified constants: ",
                               "with `JAX_USE_SIMPLIFIED_JAXPR_CONSTANTS=1`, ", SIMPLIFIED_TEXT),
            *_eager_verdicts(payload)]


def in_short(payload: dict[str, Any]) -> str:
    """The opening of the page: where it was measured, the verdict table, the targets; every
    number from the run."""
    env, v = payload["environment"], payload["environment"]["versions"]
    commit = (env.get("git_commit") or "unknown")[:12]
    lines = [f"**In short**, measured at commit `{commit}` on {env['cpu_count']} CPU cores "
             f"(backend `{env['backend']}`, jax {v['jax']}, numpyro {v['numpyro']}; profile "
             f"`{payload['profile']['label']}`; details under [Results](#results-on-this-"
             "machine-class)). Ratio = numpyro time / stabledist time: above 1, stabledist "
             "is faster.", "",
             "| verdict | where | ratio | stabledist vs numpyro |", "|---|---|---|---|"]
    lines += ["| " + " | ".join(cells) + " |" for cells in verdict_rows(payload)]
    targets = payload["targets"]
    failed = [t["target"] for t in targets if t["passed"] is False]
    lines += ["", f"Targets: {sum(t['passed'] is True for t in targets)} of {len(targets)} "
              "pass" + (f"; failing: {', '.join(failed)}." if failed else ".")
              + " The per-call gains inside `jit` are what numpyro also gets when a lazy value "
              "is read once before `jit`; where it cannot, see [When numpyro gets the same "
              "gain](#when-numpyro-gets-the-same-gain)."]
    return "\n".join(lines) + "\n"


def results_section(payload: dict[str, Any], plots: Sequence[str]) -> str:
    env, v = payload["environment"], payload["environment"]["versions"]
    la = [b.get("extra", {}).get("load_average_after") for b in payload["benchmarks"].values()]
    la = [x[0] for x in la if x]
    mem = env.get("device_memory_bytes") or env.get("host_memory_bytes")
    lines = [
        f"<!-- measured-commit: {env.get('git_commit')} -->",
        f"Measured at commit `{env.get('git_commit')}` with `{payload['command']}` on "
        f"{env['timestamp']}: {env['cpu_count']} CPUs (affinity {env['cpu_affinity']}), "
        f"{env['platform']}, {python_build_text(env.get('python_build'))}, jax {v['jax']}, "
        f"jaxlib {v['jaxlib']}, numpyro {v['numpyro']}, stabledist {v['stabledist']}; "
        f"backend `{env['backend']}`, device kind `{env['device_kind']}`, "
        f"{env['device_count']} device(s)" + (f", {mem / 2**30:.1f} GiB memory" if mem else "")
        + f". Load average {env['load_average_start']} at the start"
        + (f", {min(la):.1f}-{max(la):.1f} after each benchmark" if la else "")
        + f" (the machine is shared: ratios are interleaved, absolute times inflated). "
        f"Wall time {payload['seconds'] / 60:.1f} min"
        + (f" ({payload['cpu_seconds'] / 60:.1f} min of CPU)" if payload.get("cpu_seconds")
           else "") + ". How far the code has moved since this commit: `make release-check`.",
        "", "### Summary and targets", "", "```text", *compact_lines(payload), "```", "",
        "The full table (every class, property, size, phase and repetition, host and device "
        "time per call) is in the run's `report.md` and `results.json`.", "",
    ]
    e2e = payload["benchmarks"].get("e2e")
    if e2e and e2e.get("cases"):
        lines += ["### End to end, per phase", "",
                  "Median seconds; trace includes lowering; compile counts every XLA compile, "
                  "also the small per-primitive programs of eager evaluation.", "",
                  "| model | method | variant | trace | compile | run | total |",
                  "|---|---|---|---|---|---|---|"]
        for c in e2e["cases"]:
            for variant in ("numpyro", "stabledist"):
                if m := phase_medians(c["extra"]["phases"], variant):
                    lines.append(f"| {c['params']['model']} | {c['params']['method']} | "
                                 f"{LABELS[variant]} | {m['trace']:.2f} | {m['compile']:.2f} | "
                                 f"{m['run']:.2f} | {c['summary'][variant]['median']:.2f} |")
        lines.append("")
    captions = {p.file: p.caption for b in REGISTRY for p in b.plots}
    if plots:
        lines += ["### Plots", ""]
        for p in plots:
            lines += [f"![{captions.get(p, p)}](img/{p})", ""]
    return "\n".join(lines)


NEUTRAL = re.compile(r"<!-- measurement-neutral: [0-9a-f]{40}\b[^\n]*-->\n")
"""A line of the page naming a commit that changed ``benchmarks/`` without changing what the
published rows measure (``make release-check`` accepts such commits after the measured
one). A new measurement supersedes them: publishing removes them."""


def publish(payload: dict[str, Any], out: Path, plots: Sequence[str]) -> Path:
    """Write the run into the page and docs/img/ (see above), dropping the `NEUTRAL` lines."""
    IMG.mkdir(parents=True, exist_ok=True)
    for p in plots:
        shutil.copyfile(out / p, IMG / p)
    text = NEUTRAL.sub("", DOC.read_text())
    text = _replace(text, "in-short", in_short(payload))
    text = _replace(text, "results", results_section(payload, plots))
    DOC.write_text(text)
    return DOC
