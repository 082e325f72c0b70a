"""Which lazy values a trace hoists out of the compiled program, and which it computes inside.

A lazy value of a distribution whose leaves are concrete (a global prior closed over by a
jitted function) can be computed once, eagerly, and enter the trace as a constant: every call
of the compiled function then saves its cost. But an eager evaluation inside a trace compiles
one small XLA program per primitive and shape, which costs more at the first call than the
few instructions it saves per call when the value is elementwise work on the parameters (a
``TruncatedNormal`` normaliser: dozens of primitives, as many extra compiles, for a per-element
computation that the compiled program fuses anyway).

So a value is hoisted only when hoisting can pay: when computing it does more than
elementwise work on its inputs - linear algebra, contractions, loops, sorts, FFTs, or an
intermediate much larger than the parameters and the result (``SineBivariateVonMises``'s
normalising series). Any other value is computed in the trace, exactly as numpyro computes
it there: the same program, so the same bits and the same first-call cost.

The decision looks at the operations of the value's computation, without a compile: those
its first computation in the trace added (`_first_in_trace`: no extra trace), or, when that
computation used values cached before, those of an abstract trace from the leaves alone
(`_decide`: as costly as tracing the user's whole ``log_prob``). It is memoized per class,
property and leaf shapes/dtypes - and, when it cannot depend on the sizes (a linear-algebra
primitive; or no intermediate larger than the leaves or results together), per leaf *ranks*:
a new batch size decides nothing again.

A hoisted value is computed by one compiled program per class, property and tree structure
(`compute_hoisted`), shared by every instance with those leaf shapes: op by op it would
compile one XLA program per operation and shape, several times numpyro's first call for the
``SineBivariateVonMises`` series (the benchmarks page has the figures). On the CPU
the program is compiled with XLA's cheap code generation (`_one_shot_options`): it runs
once. On an accelerator a value of a few distinct operations (at most `EAGER_OPS_MAX`: an
MVN's ``precision_matrix``) is computed op by op (numpyro's eager value bit for bit), a longer
one by the program. A program may round differently from the op-by-op kernels (``Wishart``'s
``variance``: 1-3 units in the last place; on the CPU other Wishart matrices: 1 unit), as
numpyro's own compiled program does.

Only a trace that *stages* operations (``jit``, ``scan``, ``pmap``, ...) needs any of this:
under ``grad``, ``jvp`` or ``vmap`` alone, operations on concrete leaves run eagerly anyway, so
the value is computed as numpyro computes it there - eagerly, numpyro's bits - and cached, as
numpyro caches it (`stages`).
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable
from typing import Any, Literal

import jax
import numpy as np
from jax.core import Tracer

from stabledist._src import jax_private
from stabledist._src.introspect import SPEC_ATTRIBUTE
from stabledist._src.jax_private import (
    Recording,
    constants_used,
    cpu_one_shot_options,
    current_trace,
    drop_recorded,
    recorded_equations,
    stages,
    start_recording,
)

__all__ = ["CONCRETE_TYPES", "EAGER_OPS_MAX", "HEAVY_PRIMITIVES", "LARGE_CONSTANTS",
           "compute_hoisted", "hoisting_mode", "is_concrete", "known_mode", "one_shot_programs",
           "simplified_constants", "stages", "traced_value"]

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

EAGER_OPS_MAX = 8
"""A hoisted value whose computation has at most this many distinct operations (mode
``"eager"``) is computed op by op on an accelerator (numpyro's eager bits; each kernel
compiled once per shape and shared), and on the CPU by a program compiled with
`_one_shot_options` (one cheap compile: the first call of a function reading an MVN's
``precision_matrix`` then costs numpyro's, where op by op it cost more); one with more by one
compiled program everywhere (mode ``"program"``)."""

LARGE_CONSTANTS = 1 << 16
"""Under JAX's simplified constants (`simplified_constants`), a value of at least this many
numbers (leaves or result) is hoisted even when it is elementwise work: closed-over arrays are
then passed to the compiled program, not folded into it, so the value would be computed again
in every call (the benchmarks page has the constants rows)."""

Mode = Literal["trace", "eager", "program"]


@functools.cache
def simplified_constants() -> bool:
    """Whether JAX passes closed-over arrays to compiled programs as arguments instead of
    folding them as constants (``JAX_USE_SIMPLIFIED_JAXPR_CONSTANTS=1``, read by JAX at
    import; off by default through jax 0.12)."""
    return bool(getattr(jax.config, "jax_use_simplified_jaxpr_constants", False))



def _class_memo(instance: Any, kind: str) -> dict[Any, Any]:
    """The memo ``kind`` ("decisions" or "programs") of ``instance``'s class, kept on its spec
    (`stabledist._src.spec.ClassSpec.hoisting`). A class without a spec (a cached lazy
    property on a class that is no stable distribution) memoizes nothing."""
    spec = getattr(type(instance), SPEC_ATTRIBUTE, None)
    return {} if spec is None else spec.hoisting.setdefault(kind, {})


def hoisting_mode(instance: Any, name: str, compute: Callable[[Any], Any],
                  leaves: list[Any], treedef: Any) -> Mode:
    """How a staging trace gets ``compute(instance)`` (the lazy value ``name``) of an
    instance with concrete leaves: ``"trace"`` computes it in the trace, as numpyro does
    (elementwise work); ``"eager"`` hoists it op by op (a short computation off the CPU:
    `EAGER_OPS_MAX`); ``"program"`` hoists it with a compiled program (`compute_hoisted`).
    Memoized per class, name and leaf shapes/dtypes, and per leaf ranks when the decision
    cannot depend on the sizes (`_decide`); a computation that cannot be traced abstractly is
    hoisted op by op."""
    mode = known_mode(instance, name, leaves)
    if mode is None:
        mode, sizeless = _decide(compute, leaves, treedef)
        _remember(instance, name, leaves, mode, sizeless)
    return mode


def known_mode(instance: Any, name: str, leaves: list[Any]) -> Mode | None:
    """The memoized decision for these leaf shapes (or ranks), if one was made."""
    decisions = _class_memo(instance, "decisions")
    if not decisions:
        return None
    shapes, dtypes = _signature(leaves)
    mode = decisions.get(("shapes", name, shapes, dtypes))
    if mode is None:
        mode = decisions.get(("ranks", name, _ranks(shapes), dtypes))
    return mode


def _signature(leaves: list[Any]) -> tuple[tuple, tuple]:
    # the tree structure is left out of the keys: its static fields may hold arrays (no
    # equality), and they do not change which primitives the value needs
    return (tuple(np.shape(x) for x in leaves),
            tuple(getattr(x, "dtype", type(x)) for x in leaves))


def _ranks(shapes: tuple) -> tuple:
    # sizes 1 stay in the ranks key: they broadcast, so they change which shapes meet
    return tuple(tuple(d == 1 for d in s) for s in shapes)


def _remember(instance: Any, name: str, leaves: list[Any], mode: Mode, sizeless: bool) -> None:
    decisions = _class_memo(instance, "decisions")
    shapes, dtypes = _signature(leaves)
    decisions[("shapes", name, shapes, dtypes)] = mode
    if sizeless:
        decisions[("ranks", name, _ranks(shapes), dtypes)] = mode


def _decide(compute: Callable[[Any], Any], leaves: list[Any],
            treedef: Any) -> tuple[Mode, bool]:
    """The mode from an abstract trace of the value from the leaves alone, and whether it
    holds for every size of the same leaf ranks (`_classify`)."""
    def value(*xs: Any) -> Any:
        return compute(jax.tree_util.tree_unflatten(treedef, xs))

    try:
        closed = jax.make_jaxpr(value)(*leaves)
    except Exception:  # not traceable abstractly (Python control flow on values, ...)
        return "eager", False
    jaxpr = closed.jaxpr
    io = max(sum(_size(v.aval) for v in jaxpr.invars),
             sum(_size(v.aval) for v in jaxpr.outvars if hasattr(v, "aval")), 1)
    return _classify(jaxpr.eqns, io)


def _classify(eqns: list[Any], io: int) -> tuple[Mode, bool]:
    """The mode of a computation made of ``eqns`` whose leaves or results (the larger) hold
    ``io`` numbers, and whether it holds for every size of the same leaf ranks: when a
    primitive in `HEAVY_PRIMITIVES` decided, or no intermediate is larger than ``io``:
    elementwise work, stacks and concatenations stay so whatever the sizes. A decision made
    by an intermediate's size (`EXPANSION`) holds for these shapes only, and so does every
    decision under JAX's simplified constants (`simplified_constants`), where elementwise
    work on `LARGE_CONSTANTS` numbers or more is hoisted too. (A value that
    multiplies sizes only in its intermediates and was first decided with sizes of 2 would
    keep being computed in the trace at larger sizes: numpyro's own behaviour, never a
    different number.)"""
    heavy_primitive, peak = _scan(eqns)
    if not heavy_primitive and peak <= EXPANSION * io:
        if not simplified_constants():
            return "trace", peak <= io
        if io < LARGE_CONSTANTS:  # (decided per size: a larger one may be hoisted)
            return "trace", False
    # an eager evaluation compiles one kernel per distinct top-level operation
    ops = {(e.primitive.name, tuple(str(v.aval) for v in e.invars), str(e.params))
           for e in eqns}
    short = len(ops) <= EAGER_OPS_MAX
    return ("eager" if short and not one_shot_programs() else "program"), heavy_primitive


def _scan(eqns: Any) -> tuple[bool, int]:
    """Whether ``eqns`` (with their sub-jaxprs) use a primitive in `HEAVY_PRIMITIVES`, and
    the size of their largest intermediate."""
    heavy, peak = False, 0
    for eqn in eqns:
        heavy = heavy or eqn.primitive.name in HEAVY_PRIMITIVES
        peak = max([peak] + [_size(v.aval) for v in eqn.outvars])
        for param in eqn.params.values():
            for sub in param if isinstance(param, list | tuple) else (param,):
                inner = getattr(sub, "jaxpr", sub)  # ClosedJaxpr -> Jaxpr
                if hasattr(inner, "eqns"):
                    sub_heavy, sub_peak = _scan(inner.eqns)
                    heavy, peak = heavy or sub_heavy, max(peak, sub_peak)
    return heavy, peak


def traced_value(instance: Any, name: str, compute: Callable[[Any], Any],
                 cached: Callable[[Any], dict[str, Any]],
                 seed: Callable[[Any, str, Any], None]) -> Any:
    """The lazy value ``name`` = ``compute(instance)`` first read under a trace: the one call
    the cache makes, which caches what this returns when it holds no tracer.

    With traced leaves, or under ``grad``/``vmap`` alone (`stages`), or on a JAX without what
    hoisting needs: computed where it is read, numpyro's value. Under a staging trace with
    concrete leaves: computed in the trace (elementwise work, as numpyro does) or hoisted, as
    the memoized decision for these leaf shapes says; the first read at new shapes is computed
    in the trace and decided from what that added (`_first_in_trace`), or else from an
    abstract trace (`hoisting_mode`). ``cached(instance)`` gives the values the instance
    holds already, ``seed`` stores one: a hoisting program rebuilds the instance with them."""
    if not jax_private.hoisting_available():
        return compute(instance)
    leaves, treedef = jax.tree_util.tree_flatten(instance)
    if not is_concrete(leaves) or not stages(current_trace()):
        return compute(instance)
    mode = known_mode(instance, name, leaves)
    if mode is None:
        value, mode = _first_in_trace(instance, name, compute, leaves)
        if mode == "trace":
            return value
        if mode is None:
            mode = hoisting_mode(instance, name, compute, leaves, treedef)
    if mode == "trace":
        return compute(instance)
    with jax_private.no_ambient_mesh():
        if mode == "program":
            return compute_hoisted(instance, name, compute, leaves, treedef, cached(instance),
                                   seed)
        with jax.ensure_compile_time_eval():  # "eager": numpyro's eager value, op by op
            return compute(instance)


def _first_in_trace(instance: Any, name: str, compute: Callable[[Any], Any],
                    leaves: list[Any]) -> tuple[Any, Mode | None]:
    """The first read at these shapes: ``(value, mode)``, the value computed in the trace as
    numpyro does and the mode decided from what that added (`_recorded_mode`); ``(None,
    None)`` when that cannot decide (the trace records elsewhere, the computation needs
    concrete values, or it used a value cached before). A value to hoist leaves no equation
    in the trace."""
    recording = start_recording(current_trace())
    if recording is None:
        return None, None
    try:
        value = compute(instance)
    except Exception:  # e.g. Python control flow on values
        return None, None
    eqns = recorded_equations(recording)
    mode = _recorded_mode(instance, name, leaves, recording, eqns, value)
    if mode != "trace" and not any(e.effects for e in eqns):
        # dropped (hoisted, or decided again): what the computation added is dead code, and
        # jit keeps even dead equations in its program
        drop_recorded(recording)
    return value, mode


def _recorded_mode(instance: Any, name: str, leaves: list[Any], recording: Recording,
                   eqns: list[Any], value: Any) -> Mode | None:
    """The mode of ``value`` from its recorded equations, remembered as `hoisting_mode`
    remembers it; ``None`` when the computation used an array other than the instance's
    leaves - a value cached for this or another instance, which a fresh instance would
    recompute."""
    leaf_ids = {id(x) for x in leaves}
    for x in jax.tree_util.tree_leaves(value):  # a cached value returned as it is
        if id(x) not in leaf_ids and isinstance(x, jax.Array) and not isinstance(x, Tracer):
            return None
    for const in constants_used(recording, eqns):  # numpy arrays are code literals
        if id(const) not in leaf_ids and isinstance(const, jax.Array):
            return None
    io = max(sum(_size(x) for x in leaves),
             sum(_size(x) for x in jax.tree_util.tree_leaves(value)), 1)
    mode, sizeless = _classify(eqns, io)
    _remember(instance, name, leaves, mode, sizeless)
    return mode


def _size(aval: Any) -> int:
    shape = np.shape(aval) if not hasattr(aval, "shape") else aval.shape
    return math.prod(shape) if shape else 1


_Program = Callable[[list[Any], dict[str, Any]], Any]


def compute_hoisted(instance: Any, name: str, compute: Callable[[Any], Any],
                    leaves: list[Any], treedef: Any, known: dict[str, Any],
                    seed: Callable[[Any, str, Any], None]) -> Any:
    """``compute(instance)`` as a constant, by a compiled program of the leaves shared per
    class, property and tree structure. ``known`` are the instance's values already in the
    cache (given by its constructor, or read before), passed in and ``seed``ed into the
    rebuilt instance, so the program uses them as ``compute(instance)`` would. Values that
    cannot be compiled (a tree structure with unhashable static fields, a value that is not
    arrays, Python control flow on values) are computed eagerly, op by op."""
    # (property, compute, tree structure) -> its compiled program, or None when the value
    # could not be compiled (then it is computed op by op)
    programs: dict[Any, _Program | None] = _class_memo(instance, "programs")
    known = {k: v for k, v in known.items() if _is_array_tree(v)}
    key = (name, compute, treedef)
    try:
        if key not in programs:
            programs[key] = _program(compute, treedef, seed)
        program = programs[key]
    except TypeError:  # static fields without a hash: no shared program
        program = None
    if program is not None:
        # run (not staged into the caller's trace); not ensure_compile_time_eval, which
        # would also evaluate the program's own constant subexpressions op by op
        with jax_private.eval_context():
            try:
                return program(leaves, known)
            except Exception:  # not compilable: remembered, and computed op by op below
                programs[key] = None
    with jax.ensure_compile_time_eval():
        return compute(instance)


def _program(compute: Callable[[Any], Any], treedef: Any,
             seed: Callable[[Any, str, Any], None]) -> _Program:
    def value(leaves: list[Any], known: dict[str, Any]) -> Any:
        rebuilt = jax.tree_util.tree_unflatten(treedef, leaves)
        for k, v in known.items():
            seed(rebuilt, k, v)
        return compute(rebuilt)

    value.__name__ = value.__qualname__ = f"hoisted_{getattr(compute, '__name__', 'value')}"
    return jax.jit(value, compiler_options=_one_shot_options())


def _one_shot_options() -> dict[str, Any] | None:
    """XLA's cheap code generation for a program that runs once, on the CPU
    (`stabledist._src.jax_private.cpu_one_shot_options`: LLVM without optimization, and no
    fusion emitters where the jaxlib has the option); on an accelerator XLA's defaults. A
    value may round differently from numpyro's compiled program in the last bits, as any
    value hoisted by a program may."""
    return cpu_one_shot_options() if one_shot_programs() else None


@functools.cache
def one_shot_programs() -> bool:
    """Whether hoisting programs get cheap CPU options (JAX's default backend is the CPU),
    and then also compute short values (one cheap compile instead of op by op).
    Asked at the first hoist, not at import: asking initialises JAX's backend."""
    return jax.default_backend() == "cpu"


def _is_array_tree(value: Any) -> bool:
    leaves = jax.tree_util.tree_leaves(value)
    return all(isinstance(x, jax.Array | np.ndarray | np.generic | float | int | bool)
               for x in leaves)


CONCRETE_TYPES = jax_private.concrete_array_types()
"""Types of values that hold no tracer (tested first, inline, on the cache's hot paths)."""


def is_concrete(value: Any) -> bool:
    """Whether ``value`` holds no tracer."""
    if isinstance(value, Tracer):
        return False
    return not any(isinstance(leaf, Tracer) for leaf in jax.tree_util.tree_leaves(value))
