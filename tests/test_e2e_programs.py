"""What the end-to-end benchmark rows compile, checked where it decides a verdict.

The benchmarks page explains its end-to-end ratios by what each variant compiles: where both
compile the very same program a difference is the machine's noise, and where stabledist reads
a lazy value as a constant that numpyro recomputes, the saving is real. These tests check the
programs themselves (their jaxprs), so the page's explanation cannot drift from the code.
"""

from __future__ import annotations

from collections import Counter
from typing import Any

import jax
import pytest
from numpyro.infer import Predictive
from numpyro.infer.util import initialize_model

from benchmarks.bench_e2e import build
from benchmarks.common import MODULES


def _operations(jaxpr: Any) -> Counter[tuple[str, tuple[str, ...]]]:
    """Every equation of ``jaxpr`` and of the jaxprs inside it (scan bodies, pjits), as
    (primitive, sorted output types): the program's operations, whatever their order and
    variable names. numpyro orders a distribution's leaves by ``PYTHONHASHSEED`` (its scan
    carries them), stabledist by declaration, so the same program may list a scan's carry
    in another order; nothing else may differ."""
    found: Counter[tuple[str, tuple[str, ...]]] = Counter()
    for eqn in jaxpr.eqns:
        found[(eqn.primitive.name, tuple(sorted(str(v.aval) for v in eqn.outvars)))] += 1
        for param in eqn.params.values():
            for sub in param if isinstance(param, tuple | list) else (param,):
                inner = getattr(sub, "jaxpr", sub)
                if hasattr(inner, "eqns"):
                    found += _operations(inner)
    return found


def _potential_operations(variant: str, model: str) -> Counter[tuple[str, tuple[str, ...]]]:
    fn, data = build(MODULES[variant], model)
    info, potential, _, _ = initialize_model(jax.random.PRNGKey(0), fn, model_args=data,
                                             dynamic_args=False)
    return _operations(jax.make_jaxpr(jax.value_and_grad(potential))(info.z).jaxpr)


@pytest.mark.parametrize("model", ["statespace", "regression"])
def test_samplers_of_both_variants_compile_numpyros_program(model: str) -> None:
    """The state-space model once ran another program (stabledist kept validating its
    ``scan`` sites); since the parity change it is numpyro's own, as for the others: numpyro's
    eager model initialization caches the priors' lazy values too, so both read constants."""
    numpyro, stable = (_potential_operations(v, model) for v in ("numpyro", "stabledist"))
    assert numpyro == stable, (numpyro - stable, stable - numpyro)


def test_jitted_predictive_recomputes_the_precision_in_numpyro_only() -> None:
    """The ``gp_predict`` row's saving: numpyro's traced ``Predictive`` computes
    ``precision_matrix`` (triangular solves of the 500 x 500 kernel) in every call, stabledist's
    reads the cached value as a constant."""
    texts = {}
    for variant in ("numpyro", "stabledist"):
        fn, (draws, inputs) = build(MODULES[variant], "gp_predict")
        predictive = Predictive(fn, draws, return_sites=["f", "y"])
        texts[variant] = str(jax.make_jaxpr(predictive)(jax.random.PRNGKey(0), inputs[0]))
    assert "triangular_solve" in texts["numpyro"]
    assert "triangular_solve" not in texts["stabledist"]
