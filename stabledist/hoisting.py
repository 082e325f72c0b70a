"""Which lazy values a trace hoists out of the compiled program, and which it computes inside.

A lazy value of a distribution whose leaves are concrete (a global prior closed over by a
jitted function) can be computed once, eagerly, and enter the trace as a constant: every call
of the compiled function then saves its cost. But an eager evaluation inside a trace compiles
one small XLA program per primitive and shape, which costs more at the first call than the
few instructions it saves per call when the value is elementwise work on the parameters (a
``TruncatedNormal`` normaliser: ~40 primitives, ~40 extra compiles for a per-element
computation that the compiled program fuses anyway).

So a value is hoisted only when hoisting can pay: when computing it does more than
elementwise work on its inputs - linear algebra, contractions, loops, sorts, FFTs, or an
intermediate much larger than the parameters and the result (``SineBivariateVonMises``'s
normalising series). Any other value is computed in the trace, exactly as numpyro computes
it there: the same program, so the same bits and the same first-call cost.

The decision looks at the jaxpr of the value's computation (one abstract trace, no compile),
memoized per class, property and leaf shapes/dtypes.
"""

from __future__ import annotations

import math
import weakref
from collections.abc import Callable
from typing import Any

import jax
import numpy as np

__all__ = ["HEAVY_PRIMITIVES", "worth_hoisting"]

HEAVY_PRIMITIVES = frozenset({
    # linear algebra (more than linear work in the size of its operands)
    "cholesky", "triangular_solve", "lu", "lu_pivots_to_permutation", "qr", "householder_product",
    "eigh", "eig", "svd", "schur", "hessenberg", "tridiagonal", "tridiagonal_solve",
    "custom_linear_solve", "dot_general", "conv_general_dilated", "fft",
    # loops and scans: their work is not bounded by the size of their operands
    "while", "scan", "cumsum", "cumprod", "cumlogsumexp", "cummax", "cummin",
    "sort", "top_k",
})
"""Primitives whose work is more than elementwise in their operands: a lazy value computed
with one of them is hoisted."""

EXPANSION = 4
"""An intermediate more than this many times larger than both the inputs and the result
(a series evaluated on a grid) makes a value worth hoisting."""

_DECISIONS: weakref.WeakKeyDictionary[type, dict[Any, bool]] = weakref.WeakKeyDictionary()


def worth_hoisting(instance: Any, name: str, compute: Callable[[Any], Any],
                   leaves: list[Any], treedef: Any) -> bool:
    """Whether ``compute(instance)`` (the lazy value ``name``) does more than elementwise
    work on ``instance``'s leaves. Memoized per class, name and leaf shapes/dtypes; a
    computation that cannot be traced abstractly is hoisted (computed eagerly, as before
    any trace)."""
    cls = type(instance)
    # the tree structure is left out of the key: its static fields may hold arrays (no
    # equality), and they do not change which primitives the value needs
    key = (name, tuple((np.shape(x), getattr(x, "dtype", type(x))) for x in leaves))
    decisions = _DECISIONS.get(cls)
    if decisions is None:
        decisions = _DECISIONS.setdefault(cls, {})
    decision = decisions.get(key)
    if decision is None:
        decision = decisions[key] = _decide(compute, leaves, treedef)
    return decision


def _decide(compute: Callable[[Any], Any], leaves: list[Any], treedef: Any) -> bool:
    def value(*xs: Any) -> Any:
        return compute(jax.tree_util.tree_unflatten(treedef, xs))

    try:
        closed = jax.make_jaxpr(value)(*leaves)
    except Exception:  # not traceable abstractly (Python control flow on values, ...)
        return True
    jaxpr = closed.jaxpr
    bound = EXPANSION * max(
        sum(_size(v.aval) for v in jaxpr.invars),
        sum(_size(v.aval) for v in jaxpr.outvars if hasattr(v, "aval")),
        1,
    )
    return _heavy(jaxpr, bound)


def _heavy(jaxpr: Any, bound: int) -> bool:
    for eqn in jaxpr.eqns:
        if eqn.primitive.name in HEAVY_PRIMITIVES:
            return True
        if any(_size(v.aval) > bound for v in eqn.outvars):
            return True
        for param in eqn.params.values():
            for sub in param if isinstance(param, list | tuple) else (param,):
                inner = getattr(sub, "jaxpr", sub)  # ClosedJaxpr -> Jaxpr
                if hasattr(inner, "eqns") and _heavy(inner, bound):
                    return True
    return False


def _size(aval: Any) -> int:
    shape = getattr(aval, "shape", ())
    return math.prod(shape) if shape else 1
