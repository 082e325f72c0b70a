"""Hoisting: when a lazy value first read in a trace is worth computing once, outside it, and
how it is computed then.

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

The decision (the *mode*) looks at the operations of the value's computation, without a
compile: those its first computation in the trace added (`mode_from_recording`: no extra
trace), or, when that computation used values cached before, those of an abstract trace from
the leaves alone (`decide_abstractly`: as costly as tracing the user's whole ``log_prob``).
It is memoized per class, property and leaf shapes/dtypes - and, when it cannot depend on the
sizes (a linear-algebra primitive; or no intermediate larger than the leaves or results
together), per leaf *ranks*: a new batch size decides nothing again. Where a first read is
computed, and whether this module is asked at all, is `stabledist._src.lazy.reads`' decision.
What the decision reads of an equation (its primitive, parameters and their sub-jaxprs, input
types, output shapes and effects) comes from `jax_private.equation_view`, and of an abstract
trace from `jax_private.program_view`: equations are JAX's private objects, probed there; a JAX
on which they read otherwise hoists nothing (`jax_private.hoisting_available`).

A hoisted value (`compute_hoisted`) is computed by one compiled program per class and property
(mode ``"program"``; JAX keeps one executable per tree structure and leaf shapes), shared by
every instance with those leaf shapes: op
by op it would compile one XLA program per operation and shape, several times numpyro's first
call for the ``SineBivariateVonMises`` series (the benchmarks page has the figures). On the
CPU the program is compiled with XLA's cheap code generation (`_one_shot_options`): it runs
once. On an accelerator a value of a few distinct operations (at most `OP_BY_OP_MAX`: an
MVN's ``precision_matrix``) is computed op by op (mode ``"op_by_op"``: numpyro's eager value
bit for bit), a longer one by the program. A program may round differently from the op-by-op
kernels (``Wishart``'s ``variance``: 1-3 units in the last place; on the CPU other Wishart
matrices: 1 unit), as numpyro's own compiled program does.

Decisions and programs are this module's own tables, keyed by class.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable
from typing import Any, Literal, NamedTuple

import jax
import numpy as np
from jax.core import Tracer

from stabledist._src import jax_private
from stabledist._src.jax_private import Recording, constants_used, equation_view
from stabledist._src.lazy.cache import CACHE
from stabledist._src.records import is_stable_class

__all__ = ["EXPANSION", "HEAVY_PRIMITIVES", "LARGE_CONSTANTS", "MEMO_MAX", "NOT_COMPUTED",
           "OP_BY_OP_MAX", "Decision", "Mode", "compute_hoisted", "cpu_one_shot_options",
           "decide", "decide_abstractly", "known_mode", "mode_from_recording",
           "one_shot_programs", "simplified_constants"]

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

OP_BY_OP_MAX = 8
"""A hoisted value whose computation has at most this many distinct operations (mode
``"op_by_op"``) is computed op by op on an accelerator (numpyro's eager bits; each kernel
compiled once per shape and shared), and on the CPU by a program compiled with
`_one_shot_options` (one cheap compile: the first call of a function reading an MVN's
``precision_matrix`` then costs numpyro's, where op by op it cost more); one with more by one
compiled program everywhere (mode ``"program"``)."""

LARGE_CONSTANTS = 1 << 16
"""Under JAX's simplified constants (`simplified_constants`), a value of at least this many
numbers (leaves or result) is hoisted even when it is elementwise work: closed-over arrays are
then passed to the compiled program, not folded into it, so the value would be computed again
in every call (the benchmarks page has the constants rows)."""

Mode = Literal["trace", "op_by_op", "program"]
"""Where a staging trace gets a lazy value of concrete leaves: computed in the trace as numpyro
does (``"trace"``), or hoisted: computed op by op (``"op_by_op"``) or by a compiled program
(``"program"``), entering the trace as a constant."""

_Program = Callable[[Any, list[Any], dict[str, Any]], Any]

MEMO_MAX = 256
"""Entries a class's decisions (or failed programs) may hold before they are emptied."""

# per class: (key -> mode), ((property, compute) -> program) and the (property, compute, tree
# structure) that could not be compiled
_decisions: dict[type, dict[Any, Mode]] = {}
_programs: dict[type, dict[Any, _Program]] = {}
_unprogrammable: dict[type, dict[Any, bool]] = {}


@functools.cache
def simplified_constants() -> bool:
    """Whether JAX passes closed-over arrays to compiled programs as arguments instead of
    folding them as constants (``JAX_USE_SIMPLIFIED_JAXPR_CONSTANTS=1``, read by JAX at
    import; off by default through jax 0.12)."""
    return bool(getattr(jax.config, "jax_use_simplified_jaxpr_constants", False))


def _memo(table: dict[type, dict[Any, Any]], cls: type) -> dict[Any, Any]:
    """``cls``'s memo in ``table``; a class that is no stable distribution (a cached lazy
    property on another class) memoizes nothing."""
    if not is_stable_class(cls):
        return {}
    memo = table.get(cls)
    if memo is None:
        memo = table.setdefault(cls, {})
    return memo


# --- deciding --------------------------------------------------------------------------------


def known_mode(cls: type, name: str, leaves: list[Any]) -> Mode | None:
    """The memoized mode of ``name`` for these leaf shapes (or ranks), if one was decided."""
    decisions = _decisions.get(cls)
    if not decisions:
        return None
    shapes, dtypes = _signature(leaves)
    mode = decisions.get(("shapes", name, shapes, dtypes))
    if mode is None:
        mode = decisions.get(("ranks", name, _ranks(shapes), dtypes))
    return mode


class Decision(NamedTuple):
    """Where a first read under a trace is computed (`decide`), and the value the recorded
    computation already gave in the trace (`NOT_COMPUTED` when none did)."""

    mode: Mode
    value: Any


NOT_COMPUTED: Any = object()


def decide(instance: Any, name: str, compute: Callable[[Any], Any], leaves: list[Any],
           treedef: Any, trace: Any = None) -> Decision:
    """The one decision of where ``compute(instance)`` (the lazy value ``name`` of an
    instance with concrete leaves) is computed, in this order: the memoized mode; else, in a
    trace that records (``trace``: the reads' path), the value computed there and the mode
    decided from what it added (`mode_from_recording`; the equations of a value to hoist are
    taken back out unless one has an effect, which must stay in the program); else an
    abstract trace from the leaves (`decide_abstractly`). The test oracle asks with no
    trace: memo, then the abstract trace. On a JAX without what hoisting needs (its equation
    fields included: they are what is decided from) every value is computed in the trace,
    whatever was memoized."""
    if not jax_private.hoisting_available():
        return Decision("trace", NOT_COMPUTED)
    cls = type(instance)
    mode = known_mode(cls, name, leaves)
    if mode is not None:
        return Decision(mode, NOT_COMPUTED)
    recording = None if trace is None else jax_private.start_recording(trace)
    if recording is not None:
        try:
            value = compute(instance)
        except Exception:  # needs concrete values (Python control flow on them)
            value = NOT_COMPUTED
        if value is not NOT_COMPUTED:
            eqns = jax_private.recorded_equations(recording)
            mode = mode_from_recording(cls, name, leaves, recording, eqns, value)
            if mode == "trace":
                return Decision(mode, value)
            if not any(equation_view(e).effectful for e in eqns):
                # hoisted, or decided again: what the computation added is dead code, and
                # jit keeps even dead equations in its program
                jax_private.drop_recorded(recording)
    if mode is None:
        mode = decide_abstractly(cls, name, compute, leaves, treedef)
    return Decision(mode, NOT_COMPUTED)


def decide_abstractly(cls: type, name: str, compute: Callable[[Any], Any], leaves: list[Any],
                      treedef: Any) -> Mode:
    """The mode from an abstract trace of the value from the leaves alone, remembered."""
    mode, sizeless = _abstract_mode(compute, leaves, treedef)
    _remember(cls, name, leaves, mode, sizeless)
    return mode


def _abstract_mode(compute: Callable[[Any], Any], leaves: list[Any],
                   treedef: Any) -> tuple[Mode, bool]:
    """`_classify` of an abstract trace of ``compute`` from the leaves; a computation that
    cannot be traced abstractly (Python control flow on values) is op by op."""
    def value(*xs: Any) -> Any:
        return compute(jax.tree_util.tree_unflatten(treedef, xs))

    try:
        program = jax_private.program_view(jax.make_jaxpr(value)(*leaves))
    except Exception:  # not traceable abstractly
        return "op_by_op", False
    io = max(sum(map(_size, program.in_shapes)), sum(map(_size, program.out_shapes)), 1)
    return _classify(program.equations, io)


def mode_from_recording(cls: type, name: str, leaves: list[Any], recording: Recording,
                        eqns: list[Any], value: Any) -> Mode | None:
    """The mode of ``value`` from the equations its computation added to the trace (``eqns``,
    `recording`), remembered; None when the computation used an array other than the
    instance's leaves - a value cached for this or another instance, which a fresh instance
    would recompute, so the equations do not tell its cost."""
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
    _remember(cls, name, leaves, mode, sizeless)
    return mode


def _signature(leaves: list[Any]) -> tuple[tuple, tuple]:
    # the tree structure is left out of the keys: its static fields may hold arrays (no
    # equality), and they do not change which primitives the value needs
    return (tuple(np.shape(x) for x in leaves),
            tuple(getattr(x, "dtype", type(x)) for x in leaves))


def _ranks(shapes: tuple) -> tuple:
    # sizes 1 stay in the ranks key: they broadcast, so they change which shapes meet
    return tuple(tuple(d == 1 for d in s) for s in shapes)


def _remember(cls: type, name: str, leaves: list[Any], mode: Mode, sizeless: bool) -> None:
    decisions = _bounded(_memo(_decisions, cls))
    shapes, dtypes = _signature(leaves)
    decisions[("shapes", name, shapes, dtypes)] = mode
    if sizeless:
        decisions[("ranks", name, _ranks(shapes), dtypes)] = mode


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
    views = [equation_view(e) for e in eqns]
    heavy_primitive, peak = _scan(views)
    if not heavy_primitive and peak <= EXPANSION * io:
        if not simplified_constants():
            return "trace", peak <= io
        if io < LARGE_CONSTANTS:  # (decided per size: a larger one may be hoisted)
            return "trace", False
    # op by op, an evaluation compiles one kernel per distinct top-level operation
    ops = {(v.name, tuple(map(str, v.in_avals)), str(v.parameters)) for v in views}
    short = len(ops) <= OP_BY_OP_MAX
    return ("op_by_op" if short and not one_shot_programs() else "program"), heavy_primitive


def _scan(views: list[jax_private.EquationView]) -> tuple[bool, int]:
    """Whether the equations of ``views`` (with their sub-jaxprs) use a primitive in
    `HEAVY_PRIMITIVES`, and the size of their largest intermediate."""
    heavy, peak = False, 0
    for view in views:
        heavy = heavy or view.name in HEAVY_PRIMITIVES
        peak = max([peak] + [_size(s) for s in view.out_shapes])
        for inner in view.inner:
            sub_heavy, sub_peak = _scan([equation_view(e) for e in inner])
            heavy, peak = heavy or sub_heavy, max(peak, sub_peak)
    return heavy, peak


def _size(x: Any) -> int:
    """The number of elements of a shape (a tuple) or of an array or number."""
    shape = x if type(x) is tuple else x.shape if hasattr(x, "shape") else np.shape(x)
    return math.prod(shape) if shape else 1


# --- computing -------------------------------------------------------------------------------


def compute_hoisted(instance: Any, name: str, compute: Callable[[Any], Any], mode: Mode,
                    leaves: list[Any], treedef: Any, known: dict[str, Any]) -> Any:
    """``compute(instance)`` as a constant, in ``mode`` (``"op_by_op"`` or ``"program"``),
    outside the current trace and any ambient mesh (a cached value must not carry a pmap's
    mesh in its type, or it fails later outside it). ``known``: the values the instance holds
    already (given by its constructor, or read before), which the program's rebuilt
    instance is given, so it uses them as ``compute(instance)`` would."""
    with jax_private.no_ambient_mesh():
        if mode == "program" and _programmable(type(instance), name, compute, treedef):
            program = _program_for(type(instance), name, compute)
            # run (not staged into the caller's trace); not ensure_compile_time_eval, which
            # would also evaluate the program's constant subexpressions op by op
            with jax_private.eval_context():
                try:
                    return program(treedef, leaves, _arrays_only(known))
                except Exception:  # not compilable: remembered; op by op below
                    _bounded(_memo(_unprogrammable, type(instance)))[
                        (name, compute, treedef)] = True
        with jax.ensure_compile_time_eval():  # numpyro's eager value, op by op
            return compute(instance)


def _programmable(cls: type, name: str, compute: Callable[[Any], Any], treedef: Any) -> bool:
    """Whether this tree structure can be a program's static argument (static fields
    without a hash cannot) and did not fail to compile before."""
    try:
        hash(treedef)
    except TypeError:
        return False
    return (name, compute, treedef) not in _unprogrammable.get(cls, {})


def _program_for(cls: type, name: str, compute: Callable[[Any], Any]) -> _Program:
    """The compiled program of ``name`` shared by ``cls``'s instances: one jitted function
    per class and property, its tree structure a static argument, so that JAX's own bounded
    cache, not this table, holds one executable per leaf shapes."""
    programs = _memo(_programs, cls)
    program = programs.get((name, compute))
    if program is None:
        program = programs[(name, compute)] = _program(compute)
    return program


def _bounded(memo: dict[Any, Any]) -> dict[Any, Any]:
    """``memo``, emptied first when it holds `MEMO_MAX` entries (a decision or a failure per
    leaf shapes: a long-lived process that meets ever new shapes keeps a bounded table)."""
    if len(memo) >= MEMO_MAX:
        memo.clear()
    return memo


def _program(compute: Callable[[Any], Any]) -> _Program:
    def value(treedef: Any, leaves: list[Any], known: dict[str, Any]) -> Any:
        rebuilt = jax.tree_util.tree_unflatten(treedef, leaves)
        for k, v in known.items():
            CACHE.give(rebuilt, k, v)
        return compute(rebuilt)

    value.__name__ = value.__qualname__ = f"hoisted_{getattr(compute, '__name__', 'value')}"
    return jax.jit(value, static_argnums=0, compiler_options=_one_shot_options())


def _one_shot_options() -> dict[str, Any] | None:
    """XLA's cheap code generation for a program that runs once, on the CPU
    (`cpu_one_shot_options`: LLVM without optimization, and no
    fusion emitters where the jaxlib has the option); on an accelerator XLA's defaults. A
    value may round differently from numpyro's compiled program in the last bits, as any
    value hoisted by a program may."""
    return cpu_one_shot_options() if one_shot_programs() else None


_ONE_SHOT_WANTED = {"xla_backend_optimization_level": 0, "xla_cpu_use_fusion_emitters": False}


@functools.cache
def cpu_one_shot_options() -> dict[str, Any]:
    """XLA's cheap CPU code generation for a program that runs once: the options of
    ``{"xla_backend_optimization_level": 0, "xla_cpu_use_fusion_emitters": False}`` this
    jaxlib accepts (jaxlib 0.11 dropped the second: its fusion emitters are the only CPU
    code generation; an unknown option is an error). Probed with a tiny program at the first
    hoisted value, when JAX's backend exists."""
    def probe_compile_option(x):  # named: the one-time probe is recognizable in compile logs
        return x + 1

    accepted = {}
    for option, value in _ONE_SHOT_WANTED.items():
        try:
            jax.jit(probe_compile_option, compiler_options={option: value}).lower(1.0).compile()
        except Exception:  # "No such compile option": this jaxlib does not have it
            continue
        accepted[option] = value
    return accepted


@functools.cache
def one_shot_programs() -> bool:
    """Whether hoisting programs get cheap CPU options (JAX's default backend is the CPU),
    and then also compute short values (one cheap compile instead of op by op).
    Asked at the first hoist, not at import: asking initialises JAX's backend."""
    return jax.default_backend() == "cpu"


def _arrays_only(values: dict[str, Any]) -> dict[str, Any]:
    """The values a program can take as arguments (arrays and numbers, in any pytree)."""
    return {k: v for k, v in values.items() if all(
        isinstance(x, jax.Array | np.ndarray | np.generic | float | int | bool)
        for x in jax.tree_util.tree_leaves(v))}
