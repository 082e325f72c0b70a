"""``python -m benchmarks --publish``: write a run's results into docs/benchmarks.md.

The page keeps its hand-written parts (how to run, how it measures); the parts between
``<!-- BEGIN GENERATED: name -->`` and ``<!-- END GENERATED: name -->`` are rewritten from
the run: the "In short" paragraph and the results section, which states the commit measured
(``<!-- measured-commit: <sha> -->``, checked by tests/test_benchmark_results.py). Plots are
copied to docs/img/.
"""

from __future__ import annotations

import re
import shutil
import subprocess
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from benchmarks.environment import ROOT
from benchmarks.registry import REGISTRY
from benchmarks.report import compact_lines
from benchmarks.rows import LABELS, SLOWER_BOUND, fmt_value

DOC = ROOT / "docs" / "benchmarks.md"
IMG = ROOT / "docs" / "img"
CODE_PATHS = ("stabledist", "benchmarks")


def dirty_code() -> list[str]:
    """Uncommitted changes under the measured code paths (``git status --porcelain``)."""
    out = subprocess.run(["git", "status", "--porcelain", "--", *CODE_PATHS], cwd=ROOT,
                         capture_output=True, text=True, check=True)
    return [line for line in out.stdout.splitlines() if line.strip()]


def _replace(text: str, name: str, body: str) -> str:
    pattern = re.compile(rf"(<!-- BEGIN GENERATED: {name} -->\n).*?(<!-- END GENERATED: "
                         rf"{name} -->)", re.S)
    if not pattern.search(text):
        raise ValueError(f"{DOC} has no generated section {name!r}")
    return pattern.sub(lambda m: m.group(1) + body.rstrip() + "\n" + m.group(2), text)


def _rows(payload: dict[str, Any], bench: str) -> list[dict[str, Any]]:
    return [r for r in payload["summary"] if r["benchmark"] == bench]


def _verdict(ratio: float) -> str:
    if ratio >= 1 / SLOWER_BOUND:
        return "saves time"
    if ratio >= SLOWER_BOUND:
        return "neutral"
    return "slower"


def in_short(payload: dict[str, Any]) -> str:
    """The "In short" paragraph, every number from the run."""
    env = payload["environment"]
    commit = (env.get("git_commit") or "unknown")[:12]
    parts = [f"**In short** (commit `{commit}`, {env['cpu_count']} CPU cores, backend "
             f"`{env['backend']}`, profile `{payload['profile']['label']}`):"]
    e2e = _rows(payload, "e2e")
    bench = payload["benchmarks"].get("e2e", {})
    if e2e:
        same = {c["name"]: c["params"].get("same_program") for c in bench.get("cases", [])}
        chains = bench["extra"]["chains"]
        text = (f"end to end (compile + run; NUTS with {chains} chain{'s' * (chains > 1)} "
                f"and SVI) stabledist runs at {min(r['ratio'] for r in e2e):.2f}x-"
                f"{max(r['ratio'] for r in e2e):.2f}x numpyro's speed on {len(e2e)} model "
                "runs (numpyro time / stabledist time; above 1: stabledist faster).")
        identical = [r for r in e2e if same.get(r["case"])]
        other = [r for r in e2e if not same.get(r["case"])]
        if identical:
            text += (f" {len(identical)} of them compile the very same inference program as "
                     "numpyro (global priors whose lazy values both libraries compute once, "
                     "or none read): the compiled work is numpyro's, and their ratios, "
                     f"{min(r['ratio'] for r in identical):.2f}x-"
                     f"{max(r['ratio'] for r in identical):.2f}x, are mostly this "
                     "machine's run-to-run noise: " + ", ".join(
                         f"{r['case']} {r['ratio']:.2f}x" for r in identical) + ".")
        if other:
            text += (" The others run a different program: " + ", ".join(
                f"{r['case']} {r['ratio']:.2f}x ({_verdict(r['ratio'] or 0)})"
                for r in other) + " - a lazy value hoisted out of the sampler, or (the "
                "state-space model) `validate_args` kept through `scan`'s round trips.")
        parts.append(text)
    closure = [r for r in _rows(payload, "closure") if r["case"].endswith("per call")]
    prec = next((r for r in closure if r["case"] == "mvn_precision 1024 per call"), None)
    if prec:
        parts.append(f"Inside `jit`, a concrete global `MultivariateNormal`'s "
                     f"`precision_matrix` costs {prec['ratio']:.0f}x less per call at "
                     "dimension 1024 (computed once instead of in every call).")
    first = [r for r in _rows(payload, "closure") if r["case"].endswith("first call")]
    if first:
        worst = min(first, key=lambda r: r["ratio"])
        parts.append(f"First calls of new jitted closures: {worst['ratio']:.2f}x at worst "
                     f"({worst['case']}).")
    pc = next((r for r in _rows(payload, "pcache") if r["case"].startswith("first call, "
                                                                          "second")), None)
    if pc and pc["numpyro"] and pc["stabledist"]:
        parts.append(f"A second process with another `PYTHONHASHSEED` hits JAX's persistent "
                     f"compilation cache with stabledist ({pc['stabledist']:.2f} s first "
                     f"call against numpyro's {pc['numpyro']:.2f} s, which misses).")
    flat = next((r for r in _rows(payload, "flatten")), None)
    if flat:
        parts.append(f"Pytree round trips are {flat['ratio']:.1f}x faster (geometric mean).")
    lazy = _rows(payload, "lazy")
    miss = next((r for r in lazy if r["case"].startswith("miss: first")), None)
    hit = next((r for r in lazy if r["case"].startswith("hit")), None)
    if miss and hit:
        parts.append(f"Costs, outside `jit`: the first read of a lazy value is "
                     f"{miss['ratio']:.2f}x numpyro's speed (geometric mean; worst "
                     f"{miss['ratio_lo']:.2f}x), a repeated read (cache hit) "
                     f"{fmt_value(hit['stabledist'], 'ns')} against numpyro's "
                     f"{fmt_value(hit['numpyro'], 'ns')} `__dict__` read.")
    targets = payload["targets"]
    failed = [t["target"] for t in targets if t["passed"] is False]
    parts.append(f"Targets: {sum(t['passed'] is True for t in targets)} of {len(targets)} "
                 "pass" + (f"; failing: {', '.join(failed)}." if failed else "."))
    return " ".join(parts) + "\n"


def results_section(payload: dict[str, Any], plots: Sequence[str]) -> str:
    env = payload["environment"]
    v = env["versions"]
    la = [b.get("extra", {}).get("load_average_after") for b in payload["benchmarks"].values()]
    la = [x[0] for x in la if x]
    mem = env.get("device_memory_bytes") or env.get("host_memory_bytes")
    lines = [
        f"<!-- measured-commit: {env.get('git_commit')} -->",
        f"Measured at commit `{env.get('git_commit')}` with `{payload['command']}` on "
        f"{env['timestamp']}: {env['cpu_count']} CPUs (affinity {env['cpu_affinity']}), "
        f"{env['platform']}, Python {env['python']}, jax {v['jax']}, jaxlib {v['jaxlib']}, "
        f"numpyro {v['numpyro']}, stabledist {v['stabledist']}; backend `{env['backend']}`, "
        f"device kind `{env['device_kind']}`, {env['device_count']} device(s)"
        + (f", {mem / 2**30:.1f} GiB memory" if mem else "") + ". "
        f"Load average {env['load_average_start']} at the start"
        + (f", {min(la):.1f}-{max(la):.1f} after each benchmark" if la else "")
        + f" (the machine is shared: ratios are interleaved, absolute times inflated). "
        f"Wall time {payload['seconds'] / 60:.1f} min.",
        "",
        "### Summary and targets",
        "",
        "```text",
        *compact_lines(payload),
        "```",
        "",
        "The full table (every class, property, size, phase and repetition, host and device "
        "time per call) is in the run's `report.md` and `results.json`.",
        "",
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
                ph = c["extra"]["phases"].get(variant)
                if not ph:
                    continue
                med = {k: sorted(x)[len(x) // 2] for k, x in ph.items()}
                total = c["summary"][variant]["median"]
                lines.append(f"| {c['params']['model']} | {c['params']['method']} | "
                             f"{LABELS[variant]} | {med['trace'] + med['lower']:.2f} | "
                             f"{med['compile']:.2f} | {med['run']:.2f} | {total:.2f} |")
        lines.append("")
    captions = {p.file: p.caption for b in REGISTRY for p in b.plots}
    if plots:
        lines += ["### Plots", ""]
        for p in plots:
            lines += [f"![{captions.get(p, p)}](img/{p})", ""]
    return "\n".join(lines)


def publish(payload: dict[str, Any], out: Path, plots: Sequence[str]) -> Path:
    """Rewrite the generated sections of docs/benchmarks.md and copy the plots."""
    IMG.mkdir(parents=True, exist_ok=True)
    for p in plots:
        shutil.copyfile(out / p, IMG / p)
    text = DOC.read_text()
    text = _replace(text, "in-short", in_short(payload))
    text = _replace(text, "results", results_section(payload, plots))
    DOC.write_text(text)
    return DOC
