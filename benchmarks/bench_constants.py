"""Closed-over constants: what a large global distribution costs at a closure's first call,
and what the two remedies change - the distribution as a ``jit`` argument, and JAX's
simplified constants (``JAX_USE_SIMPLIFIED_JAXPR_CONSTANTS=1``).

Without the flag, JAX embeds a closed-over array in the compiled program as a constant, and
XLA constant-folds the elementwise work done on it at compile time: a ``TruncatedNormal``'s
normaliser (``log_ndtr`` of its bounds, then a ``logsumexp``) over a million elements takes
seconds to fold, in numpyro and stabledist alike (stabledist computes elementwise lazy values
in the trace, as numpyro does: `stabledist._src.lazy.hoisting`), and the program then runs fast.
With the flag, closed-over non-scalar arrays become arguments of the executable: nothing is
folded, the first call is fast, and every call computes the normaliser again - as it does
when the distribution is a ``jit`` argument. Evaluating the expression once eagerly before
``jit`` caches the lazy values as concrete arrays, which the program then reads.

The flag is read when jax is imported (the default of its lowering's
``hoist_constants_as_args``, and its array module's registration of arrays as literals:
``jax.config.update`` after ``import jax`` reads back True but changes no program) and is part
of the jit cache key, so it cannot be switched within a process: each mode runs in a fresh process
(``python -m benchmarks.bench_constants --mode ...``) with the variable set explicitly, and
the rows of the two modes are separate, each labelled with its mode.
"""

from __future__ import annotations

import argparse
import dataclasses
import itertools
import json
import re
import subprocess
import sys
from collections import Counter
from dataclasses import dataclass
from typing import Any

from benchmarks.config import Profile
from benchmarks.environment import subprocess_env
from benchmarks.timing import BenchResult, Case, step

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
    entry = text[text.find("\nENTRY"):] if "\nENTRY" in text else ""
    entry = entry.split("\n}", 1)[0]
    counts["parameters"] = sum(op == "parameter" for op in _OP.findall(entry))
    return counts


def _makers(mode: Mode) -> dict[str, Any]:
    from benchmarks.bench_compiled import argument_variant, closure_variant

    make = {"closure": lambda m: closure_variant(m), "argument": argument_variant,
            "eager": lambda m: closure_variant(m, before="eager")}
    return {variant: make[kind](module) for variant, kind, module in mode.variants}


def measure_mode(mode_name: str, profile: Profile) -> dict[str, Any]:
    """Runs in the child: every case of ``profile.constants_cases`` in this process's mode
    (`closure_case` of the closure benchmark, every variant repeated), with the compiled
    programs' operation counts. ``supported`` False: this jax has no such option."""
    import jax

    from benchmarks.bench_compiled import closure_case

    flag = getattr(jax.config, "values", {}).get(OPTION)
    mode = MODES[mode_name]
    out: dict[str, Any] = {"mode": mode_name, "flag": flag, "supported": flag is not None,
                           "jax": jax.__version__, "cases": []}
    if flag is None:
        return out
    makers = _makers(mode)
    rotation = itertools.count()
    for family, size in profile.constants_cases:
        case, prepared = closure_case(family, size, makers, profile, rotation,
                                      name=f"{mode.label}: {family} {size}",
                                      repeated=tuple(makers))
        case.params.update({"mode": mode_name, "flag": flag})
        case.extra["program_ops"] = {v: program_ops(p.program()) for v, p in prepared.items()}
        out["cases"].append(dataclasses.asdict(case))
    return out


def _spawn(mode_name: str, profile: Profile) -> dict[str, Any]:
    env = subprocess_env()
    env[FLAG] = MODES[mode_name].flag  # explicitly, whatever this process was given
    cmd = [sys.executable, "-m", "benchmarks.bench_constants", "--mode", mode_name,
           "--profile-json", json.dumps(dataclasses.asdict(profile))]
    proc = subprocess.run(cmd, capture_output=True, text=True, env=env, check=False,
                          timeout=1800)
    if proc.returncode != 0:
        raise RuntimeError(f"constants child ({mode_name}) failed:\n{proc.stderr[-3000:]}")
    return json.loads(proc.stdout.strip().splitlines()[-1])


def steps(profile: Profile) -> int:
    return len(MODES)


def bench_constants(profile: Profile) -> BenchResult:
    """Both modes, each in a fresh process; their cases, labelled by mode."""
    result = BenchResult(
        name="constants",
        title="A large global distribution closed over by jit: the distribution as a jit "
        f"argument (flag off), and JAX's simplified constants ({FLAG}=1)",
        unit="ns/call",
        variants=dict(VARIANT_TEXT),
        nocache="not measured here (the closure benchmark's no-cache variant passes the "
        "parameters as jit arguments: the 'as jit arguments' rows measure the same program)",
        extra={"modes": {name: {"flag": m.flag, "label": m.label,
                                "variants": [v for v, _, _ in m.variants]}
                         for name, m in MODES.items()}},
    )
    for name, mode in MODES.items():
        step(f"constants: {mode.label} ({FLAG}={mode.flag}) in a fresh process, "
             f"{len(profile.constants_cases)} case(s)")
        found = _spawn(name, profile)
        result.extra["modes"][name].update(flag_read=found["flag"], jax=found["jax"])
        if not found["supported"]:
            result.extra.setdefault("skipped", {})[name] = (
                f"jax {found['jax']} has no {OPTION} option")
            continue
        result.cases += [Case(**c) for c in found["cases"]]
    return result


def _main() -> None:
    parser = argparse.ArgumentParser(description="one mode of the constants benchmark (the "
                                     "suite runs it in a fresh process)")
    parser.add_argument("--mode", choices=tuple(MODES), required=True)
    parser.add_argument("--profile-json", required=True)
    ns = parser.parse_args()
    fields = json.loads(ns.profile_json)
    profile = Profile(**{k: tuple(tuple(x) if isinstance(x, list) else x for x in v)
                         if isinstance(v, list) else v for k, v in fields.items()})
    import warnings

    warnings.simplefilter("ignore")
    print(json.dumps(measure_mode(ns.mode, profile)))


if __name__ == "__main__":
    _main()
