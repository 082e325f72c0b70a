"""Closed-over constants: what a large global distribution costs at a closure's first call,
and the two remedies - the distribution as a ``jit`` argument, and JAX's simplified
constants (``JAX_USE_SIMPLIFIED_JAXPR_CONSTANTS=1``).

Without the flag XLA constant-folds the elementwise work on a closed-over array at compile
time (seconds for a million-element ``TruncatedNormal`` normaliser, in both libraries); with
it nothing is folded and every call computes it again. JAX reads the flag at import, so each
mode runs in a fresh process (forked from a server per mode that imported jax with the flag
set), and its rows are labelled with it.
"""

from __future__ import annotations

import dataclasses
import itertools
import re
from collections import Counter
from dataclasses import dataclass
from typing import Any

from benchmarks import child
from benchmarks.config import Profile
from stabledist.benchmark._measure import BenchResult, Case, step

FLAG = "JAX_USE_SIMPLIFIED_JAXPR_CONSTANTS"
OPTION = "jax_use_simplified_jaxpr_constants"


@dataclass(frozen=True)
class Mode:
    """One fresh process: the flag's value and the variants measured there."""

    flag: str
    label: str
    """The prefix of its cases and rows."""
    variants: tuple[tuple[str, str, str], ...]
    """``(variant, kind, module)``: kind ``closure``, ``eager`` (a closure after one eager
    evaluation, timed with the first call) or ``argument``."""


MODES = {
    "arguments": Mode("0", "as jit arguments", (
        ("stabledist", "argument", "stabledist"),
        ("numpyro", "argument", "numpyro"),
        ("stabledist_closure", "closure", "stabledist"),
        ("stabledist_eager", "eager", "stabledist"),
    )),
    "simplified": Mode("1", "simplified constants", (
        ("stabledist", "closure", "stabledist"),
        ("numpyro", "closure", "numpyro"),
        ("stabledist_eager", "eager", "stabledist"),
    )),
}
"""``arguments``: the flag off, the distribution passed to ``jit`` (numpyro's and
stabledist's), beside the closure and the eager-first closure for reference; ``simplified``:
the flag on, the closures."""

VARIANT_TEXT = {
    "stabledist": "stabledist: the mode's way (a jit argument; with the flag, the closure)",
    "numpyro": "numpyro: the same with numpyro's distribution",
    "stabledist_closure": "stabledist closure, flag off (what the closure benchmark times)",
    "stabledist_eager": "stabledist closure after one eager evaluation of the expression "
    "(timed with the first call: it caches the lazy values as concrete arrays)",
}

PROGRAM_OPS = {
    "transcendental": ("erf", "log", "log-plus-one", "exponential", "exponential-minus-one",
                       "tanh", "logistic", "power", "sqrt", "rsqrt", "cbrt", "sine",
                       "cosine", "atan2"),
    "linear algebra": ("dot", "cholesky", "triangular-solve", "custom-call", "while", "fft",
                       "sort"),
}
"""Operations of the compiled program counted per variant: elementwise transcendental work
(what XLA folds when its operands are constants) and linear algebra or loops (on a GPU,
cuSOLVER calls are custom calls). `program_ops` also counts the executable's parameters:
closed-over arrays become parameters with the flag."""

_OP = re.compile(r"=\s+\S+\s+([a-z][a-z0-9-]*)\(")


def program_ops(text: str) -> dict[str, int]:
    """`PROGRAM_OPS` counted in a compiled program's HLO text (fused computations included:
    each operation is listed once, in its computation), and ``parameters``: those of its
    entry computation, i.e. the executable's arguments."""
    found = Counter(_OP.findall(text))
    counts = {group: sum(found[op] for op in ops) for group, ops in PROGRAM_OPS.items()}
    entry = text[text.find("\nENTRY"):].split("\n}", 1)[0] if "\nENTRY" in text else ""
    counts["parameters"] = sum(op == "parameter" for op in _OP.findall(entry))
    return counts


def measure_mode(mode_name: str, fields: dict[str, Any]) -> dict[str, Any]:
    """Runs in the child: every case of ``profile.constants_cases`` in this process's mode
    (`closure_case` of the closure benchmark, every variant repeated), with the compiled
    programs' operation counts. ``supported`` False: this jax has no such option."""
    import jax

    from benchmarks.bench_compiled import argument_variant, closure_case, closure_variant

    profile = Profile.from_dict(fields)
    mode = MODES[mode_name]
    flag = getattr(jax.config, "values", {}).get(OPTION)
    out: dict[str, Any] = {"mode": mode_name, "flag": flag, "supported": flag is not None,
                           "jax": jax.__version__, "cases": []}
    if flag is None:
        return out
    make = {"closure": closure_variant, "argument": argument_variant,
            "eager": lambda m: closure_variant(m, before="eager")}
    makers = {variant: make[kind](module) for variant, kind, module in mode.variants}
    rotation = itertools.count()
    for family, size in profile.constants_cases:
        case, prepared = closure_case(family, size, makers, profile, rotation,
                                      name=f"{mode.label}: {family} {size}", repeated=tuple(makers))
        case.params.update({"mode": mode_name, "flag": flag})
        case.extra["program_ops"] = {v: program_ops(p.program()) for v, p in prepared.items()}
        out["cases"].append(dataclasses.asdict(case))
    return out


def steps(profile: Profile) -> int:
    return len(MODES)


def bench_constants(profile: Profile) -> BenchResult:
    """Both modes, each in a fresh process; their cases, labelled by mode."""
    result = BenchResult(
        name="constants",
        title="A large global distribution closed over by jit: the distribution as a jit "
        f"argument (flag off), and JAX's simplified constants ({FLAG}=1)",
        unit="ns/call", variants=dict(VARIANT_TEXT),
        nocache="not measured here (the closure benchmark's no-cache variant passes the "
        "parameters as jit arguments: the 'as jit arguments' rows measure the same program)",
        extra={"modes": {name: {"flag": m.flag, "label": m.label,
                                "variants": [v for v, _, _ in m.variants]}
                         for name, m in MODES.items()}},
    )
    # a server per mode, both importing at once: JAX reads the flag at its import
    with child.forked({name: {FLAG: mode.flag} for name, mode in MODES.items()}) as call:
        found_by_mode = {}
        for name, mode in MODES.items():
            step(f"constants: {mode.label} ({FLAG}={mode.flag}) in a fresh process, "
                 f"{len(profile.constants_cases)} case(s)")
            found_by_mode[name] = call(name, "bench_constants", "measure_mode", mode_name=name,
                                       fields=dataclasses.asdict(profile))
    for name, found in found_by_mode.items():
        result.extra["modes"][name].update(flag_read=found["flag"], jax=found["jax"])
        if not found["supported"]:
            result.extra.setdefault("skipped", {})[name] = (
                f"jax {found['jax']} has no {OPTION} option")
            continue
        result.cases += [Case(**c) for c in found["cases"]]
    return result
