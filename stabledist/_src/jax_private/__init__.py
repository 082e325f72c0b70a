"""JAX's private internals: every one stabledist reads or changes, in this group alone.

stabledist must know things JAX has no public API for: whether code runs eagerly or under a
trace, which traces stage operations into a program, what a trace just recorded, how to run a
compiled program from inside a trace. Each such internal is an `Internal` record below: what
it is for, the JAX releases it was checked on, and what stabledist does without it. No other
module of stabledist imports ``jax._src``, and no other reads a field of JAX's private objects
(the equations a trace records, its frame, a program's variables: `equation_view`,
`program_view`, `start_recording`), except the getter of a lazy value, which compares the
``.value`` of the two state objects `top_level_state` hands out inline (a call there would
cost every eager first read; the probe ``fast_top_level`` checks that very comparison).

Each internal is probed once: at import, or at its first use where the probe traces a tiny
function (nothing may be traced at import: it would start JAX's backend before the user has
configured it). One that is missing or changed never breaks
``import stabledist``: it is switched off, the feature that needs it falls back to numpyro's
behaviour (a lazy value computed where it is read and cached only when concrete, nothing
hoisted), and one `JaxInternalsWarning` names what is missing. ``tests/test_jax_private.py``
has one test per internal, which fails with the internal's name when a release changes it.
"""

from __future__ import annotations

import contextlib
import functools
import os
import warnings
from collections.abc import Callable
from typing import Any, NamedTuple

import jax
import jax.extend.core as _jex_core
import numpy as np

from stabledist._src.jax_private.internals import CHECKED, INTERNALS, Internal  # noqa: F401

__all__ = [
    "INTERNALS", "EquationView", "JaxInternalsWarning", "ProgramView", "Recording", "available",
    "concrete_array_types", "constants_used", "current_trace", "drop_recorded",
    "equation_view", "eval_context", "hoisting_available", "in_trace", "is_top_level", "missing",
    "no_ambient_mesh", "probe_all", "program_view", "recorded_equations", "stages",
    "start_recording", "top_level_state", "trace_of", "TURNED_OFF", "warn_unexpected",
]


class JaxInternalsWarning(UserWarning):
    """This JAX release lacks a private internal stabledist uses (a feature fell back)."""


_missing: dict[str, str] = {}
# probed at first use (they trace a small function: nothing may be traced at import), warned then
_LAZY = frozenset({"equation_recording", "equation_fields", "tracer_traces"})


TURNED_OFF = frozenset(filter(None, os.environ.get("STABLEDIST_JAX_INTERNALS_OFF", "")
                               .replace(" ", "").split(",")))
"""Internals turned off by the environment variable ``STABLEDIST_JAX_INTERNALS_OFF``
(comma-separated names of `INTERNALS`, read at import): what a release that lacks them gets,
numpyro's behaviour there. For a JAX release that still has an internal but misbehaves with
it, and for the tests of each fallback."""


def _probe(name: str, probe: Callable[[], Any]) -> Any:
    """``probe()``, or None with ``name`` recorded as missing (never an exception)."""
    try:
        if name in TURNED_OFF:
            raise LookupError("turned off by STABLEDIST_JAX_INTERNALS_OFF")
        return probe()
    except Exception as error:  # a release that moved or changed it: any error means "no"
        _missing[name] = f"{type(error).__name__}: {error}"
        if name in _LAZY and name in _unexpected():
            _warn_missing([name])
        return None


def _trace_state() -> Any:
    from jax._src import core

    ctx = core.trace_ctx
    if not (ctx.is_top_level() and ctx.trace is core.eval_trace):
        raise AssertionError("trace_ctx does not report the eval trace at import")
    return core


def _fast_top_level() -> tuple[Any, Any, Any, Any]:
    core = _core
    if core is None:
        raise AssertionError("needs trace_state")
    state = (core.trace_state_strong_ref, core.eval_trace, core.axis_env_state,
             core.top_axis_env)
    if not (state[0].value is state[1] and state[2].value is state[3]):
        raise AssertionError("the state objects do not hold the eval trace at import")
    return state


def _eval_context() -> Callable[[], Any]:
    from jax._src import core

    with core.eval_context():
        pass
    return core.eval_context


def _ambient_mesh() -> Callable[[], Any]:
    from jax._src import mesh

    empty = mesh.empty_abstract_mesh
    with mesh.use_abstract_mesh(empty):
        pass
    return functools.partial(mesh.use_abstract_mesh, empty)


def _tracer_traces() -> Callable[[Any], Any]:
    from jax._src import core

    def f(x: Any) -> Any:
        trace = current_trace()
        if getattr(x, "_trace", None) is not trace:
            raise AssertionError("a tracer does not know its trace as ._trace")
        with core.set_current_trace(trace):
            return x

    jax.make_jaxpr(f)(1.0)
    return core.set_current_trace


def _array_type() -> type:
    from jax._src.array import ArrayImpl

    if not (isinstance(ArrayImpl, type) and issubclass(ArrayImpl, jax.Array)):
        raise AssertionError("ArrayImpl is not the concrete jax.Array type")
    return ArrayImpl


def concrete_array_types() -> frozenset[type]:
    """The exact types of values that hold no tracer, for a ``type(x) in ...`` test: Python
    numbers, NumPy arrays and JAX's concrete array type (where this JAX still has it)."""
    return frozenset({float, int, bool, np.ndarray, *((_array_impl,) if _array_impl else ())})


def _pass_through_traces() -> tuple[type, ...]:
    from jax._src.interpreters import ad, batching

    return ad.JVPTrace, ad.LinearizeTrace, batching.BatchTrace




class _NeverTopLevel:
    """Stands in for a state object: its value is nothing jax holds, so the fast test fails
    and the caller takes its general path."""

    value = object()


def top_level_state() -> tuple[Any, Any, Any, Any]:
    """``(strong, eval_trace, axis, top_axis_env)``: no trace is active exactly when
    ``strong.value is eval_trace and axis.value is top_axis_env`` (jax's own
    ``trace_ctx.is_top_level``, where jax >= 0.8 keeps the state in C config objects). Without
    the internal, pieces that never match: callers then ask `is_top_level`. The getter of a
    lazy value makes that comparison inline, the one read of a JAX internal outside this
    module: a call would cost every eager first read."""
    if _TOP is None:
        return (_NeverTopLevel(), None, _NeverTopLevel(), None)
    return _TOP


def is_top_level() -> bool:
    """Whether no trace is active (False when stabledist cannot tell: callers then compute
    values as numpyro does under a trace, which is also right eagerly)."""
    if _TOP is not None:
        strong, eval_trace, axis, top_axis_env = _TOP
        if strong.value is eval_trace and axis.value is top_axis_env:
            return True
    return _core is not None and _core.trace_ctx.is_top_level()


def current_trace() -> Any:
    """The innermost active trace (jax's eval trace when none), or None when unknown."""
    return _core.trace_ctx.trace if _core is not None else None


def trace_of(x: Any) -> Any:
    """The trace a tracer belongs to (the eval trace for a concrete value); None when unknown."""
    if _set_trace() is None or _core is None:
        return None
    return getattr(x, "_trace", _core.eval_trace)


def in_trace(trace: Any) -> contextlib.AbstractContextManager[Any] | None:
    """Make ``trace`` the current one for a block (None when this JAX cannot)."""
    set_trace = _set_trace()
    return set_trace(trace) if set_trace is not None else None


def stages(trace: Any) -> bool:
    """Whether operations on concrete values under ``trace`` are staged into a program
    (``jit``, ``scan``, ``pmap``, ...) rather than run eagerly (``grad``, ``vmap``). A trace
    this does not know counts as staging: the value is then hoisted or computed in the trace,
    both correct."""
    if _core is None:
        return True
    while trace is not _core.eval_trace:
        if type(trace) not in _PASS_THROUGH:
            return True
        trace = getattr(trace, "parent_trace", None)
        if trace is None:
            return True
    return False


def hoisting_available() -> bool:
    """Whether this JAX has what hoisting needs (else values are computed in the trace): the
    equation fields are probed at the first call (the probe traces), which is inside a trace."""
    return (_core is not None and _eval is not None and _empty_mesh is not None
            and _equations_readable())


def eval_context() -> contextlib.AbstractContextManager[Any]:
    """Run operations eagerly inside a trace (a compiled program is called, not staged);
    only used when `hoisting_available`."""
    assert _eval is not None
    return _eval()


def no_ambient_mesh() -> contextlib.AbstractContextManager[Any]:
    """No ambient mesh while a hoisted value is computed: under ``pmap`` (a manual mesh since
    jax 0.8) the value would carry that mesh in its type and, cached, fail later outside it
    ("Mesh for all inputs should be equal", e.g. ``Predictive`` after parallel chains)."""
    assert _empty_mesh is not None
    return _empty_mesh()


class Recording(NamedTuple):
    """Where a jit-style trace's equation list stood before a value was computed in it."""

    frame: Any
    eqns: int


def start_recording(trace: Any) -> Recording | None:
    """Mark ``trace``'s equation list, so that what a computation right after adds can be
    read back (`recorded_equations`) and taken out (`drop_recorded`); None when the trace
    keeps its equations elsewhere."""
    if not _recording_works():
        return None
    frame = getattr(trace, "frame", None)
    eqns = getattr(frame, "tracing_eqns", None)
    consts = getattr(frame, "constvar_to_val", None)
    if type(eqns) is not list or type(consts) is not dict:
        return None
    return Recording(frame, len(eqns))


def recorded_equations(recording: Recording) -> list[Any]:
    """The equations added since `start_recording` (jax keeps weak references to some)."""
    recorded = [e() if callable(e) else e for e in recording.frame.tracing_eqns[recording.eqns:]]
    return [e for e in recorded if e is not None]


def constants_used(recording: Recording, eqns: list[Any]) -> list[Any]:
    """The constant values (arrays closed over, literals) that ``eqns`` read."""
    consts = recording.frame.constvar_to_val
    found = []
    for eqn in eqns:
        for tracer in eqn.in_tracers:
            atom = getattr(tracer, "val", None)
            const = atom.val if isinstance(atom, _jex_core.Literal) else consts.get(atom)
            if const is not None:
                found.append(const)
    return found


def drop_recorded(recording: Recording) -> None:
    """Take the equations added since `start_recording` back out of the trace (jit keeps even
    dead equations in its program; their tracers die with the value computed)."""
    del recording.frame.tracing_eqns[recording.eqns:]


class EquationView(NamedTuple):
    """What hoisting reads of one equation (`equation_view`), in plain Python values."""

    name: str  # the primitive's name
    parameters: dict[str, Any]  # its parameters, as jax holds them (str() of them is a key)
    in_avals: tuple[Any, ...]  # the abstract values of its inputs (str() of them is a key)
    out_shapes: tuple[tuple[int, ...], ...]  # the shapes of its outputs (() for a token)
    effectful: bool  # whether it has an effect (a callback, an ordered effect's token)
    inner: tuple[list[Any], ...]  # the equation lists of the sub-jaxprs among its parameters


def equation_view(eqn: Any) -> EquationView:
    """The fields of one equation, recorded by a trace (`recorded_equations`) or of a
    program (`program_view`), that hoisting's decision reads: only when `hoisting_available`
    (the probe ``equation_fields`` read them all)."""
    inner = []
    for param in eqn.params.values():
        for sub in param if isinstance(param, list | tuple) else (param,):
            sub = getattr(sub, "jaxpr", sub)  # ClosedJaxpr -> Jaxpr (jax 0.12 holds a Jaxpr)
            if hasattr(sub, "eqns"):
                inner.append(sub.eqns)
    return EquationView(eqn.primitive.name, eqn.params, tuple(v.aval for v in eqn.invars),
                        tuple(_shape(v) for v in eqn.outvars), bool(eqn.effects), tuple(inner))


def _shape(var: Any) -> tuple[int, ...]:
    """The shape of a variable's abstract value (() for one without a shape: a token)."""
    return tuple(getattr(getattr(var, "aval", None), "shape", ()))


class ProgramView(NamedTuple):
    """What hoisting reads of a traced program (`program_view`)."""

    equations: list[Any]  # each read with `equation_view`
    in_shapes: tuple[tuple[int, ...], ...]
    out_shapes: tuple[tuple[int, ...], ...]


def program_view(closed: Any) -> ProgramView:
    """The equations and the input and output shapes of ``jax.make_jaxpr(f)(...)``'s result,
    the abstract trace of a value hoisting decides from."""
    jaxpr = closed.jaxpr
    return ProgramView(jaxpr.eqns, tuple(_shape(v) for v in jaxpr.invars),
                       tuple(_shape(v) for v in jaxpr.outvars))


@functools.cache
def _equations_readable() -> bool:
    """The equation fields, probed at their first use (`hoisting_available`, in a trace: a
    probe at import would start JAX's backend); without them nothing is hoisted."""
    return bool(_probe("equation_fields", _equation_fields))


_PROBED_NAMES = ["sin", "dot_general", "scan"]
_PROBED_SHAPES = [((3,),), ((),), ((3,),)]


def _equation_fields() -> bool:
    """Read each equation field hoisting reads, with `equation_view` and `program_view`, on
    a tiny trace of lax primitives (``dot(sin(x), x)`` and a scan, whose parameters hold a
    sub-jaxpr): the program ``jax.make_jaxpr`` gives and, where `start_recording` works, what
    the trace recorded (read while that trace lives: its equations hold its tracers, which
    must not outlive it). It stages nothing into the trace it runs in."""
    def f(x: Any) -> Any:
        recording = start_recording(current_trace())
        y = jax.lax.dot(jax.lax.sin(x), x)
        z = jax.lax.scan(lambda c, _: (jax.lax.mul(c, c), None), x, length=2)[0]
        if recording is not None:
            _check_views([equation_view(e) for e in recorded_equations(recording)])
        return y, z

    program = program_view(jax.make_jaxpr(f)(jax.ShapeDtypeStruct((3,), np.float32)))
    if (program.in_shapes, program.out_shapes) != (((3,),), ((), (3,))):
        raise AssertionError(f"a program's shapes read as {program[1:]}")
    _check_views([equation_view(e) for e in program.equations])
    return True


def _check_views(views: list[EquationView]) -> None:
    """That the views of the probe's equations say what they are (else AssertionError)."""
    if ([v.name for v in views] != _PROBED_NAMES
            or [v.out_shapes for v in views] != _PROBED_SHAPES
            or [str(a) for a in views[1].in_avals] != ["float32[3]"] * 2
            or any(v.effectful or not isinstance(v.parameters, dict) for v in views)
            or [len(v.inner) for v in views] != [0, 0, 1]
            or [equation_view(e).name for e in views[2].inner[0]] != ["mul"]):
        raise AssertionError(f"equations read as {views}")


@functools.cache
def _set_trace() -> Callable[[Any], Any] | None:
    """``jax._src.core.set_current_trace``, probed at its first use (the probe traces); without
    ``trace_state`` it cannot work, and that internal's warning said so already."""
    if _core is None:
        _missing.setdefault("tracer_traces", "needs trace_state, which is missing")
        return None
    return _probe("tracer_traces", _tracer_traces)


@functools.cache
def _recording_works() -> bool:
    """The equation-recording internals, probed at their first use (inside a trace, where JAX's
    backend exists already: a probe at import would start it)."""
    return bool(_probe("equation_recording", _equation_recording))


def _equation_recording() -> bool:
    with jax.ensure_compile_time_eval():  # probed inside a user's trace: nothing staged there
        # a transfer, not an eager op: the probe compiles no program
        constant = jax.device_put(np.arange(3.0, dtype=jax.dtypes.canonicalize_dtype(float)))
    found: list[bool] = []

    def f(x: Any) -> Any:
        frame: Any = getattr(current_trace(), "frame", None)
        recording = Recording(frame, len(frame.tracing_eqns))
        _ = x * constant  # one equation, reading one closed-over constant
        eqns = recorded_equations(recording)
        found.append(len(eqns) == 1 and any(c is constant for c in constants_used(recording, eqns)))
        drop_recorded(recording)
        return x

    jax.make_jaxpr(f)(jax.ShapeDtypeStruct((3,), constant.dtype))
    if found != [True]:
        raise AssertionError("a trace's frame does not record equations as expected")
    return True


def missing() -> dict[str, str]:
    """The internals this JAX lacks, each with the error its probe met."""
    return dict(_missing)


def available(name: str) -> bool:
    """Whether the internal ``name`` (a key of `INTERNALS`) works with this JAX."""
    return name not in _missing


def _unexpected() -> list[str]:
    """The missing internals this JAX release should have (those that matter here)."""
    return [n for n in _missing if _JAX_VERSION >= INTERNALS[n].since or n in TURNED_OFF]


_JAX_VERSION = tuple(int(p) for p in jax.__version__.split(".")[:3] if p.isdigit())


def probe_all() -> dict[str, str]:
    """Probe the internals that are probed at first use too; `missing` after that."""
    _recording_works()
    _equations_readable()
    _set_trace()
    return missing()


def _warn_missing(names: list[str], stacklevel: int = 3) -> None:
    lines = [f"{INTERNALS[n].uses} ({INTERNALS[n].purpose}): {INTERNALS[n].fallback}"
             for n in names]
    warnings.warn(
        f"stabledist: jax {jax.__version__} lacks or changed JAX internals stabledist uses "
        f"(checked on {CHECKED}), so it falls back to numpyro's behaviour there:\n- "
        + "\n- ".join(lines) + "\nPlease report this with your jax version.",
        JaxInternalsWarning, stacklevel=stacklevel)


# the probes, in dependence order (each one's functions are defined above)
_core: Any = None
_core = _probe("trace_state", _trace_state)
_TOP = _probe("fast_top_level", _fast_top_level)
_eval = _probe("eval_context", _eval_context)
_empty_mesh = _probe("ambient_mesh", _ambient_mesh)
_PASS_THROUGH: tuple[type, ...] = _probe("pass_through_traces", _pass_through_traces) or ()
_array_impl: type | None = _probe("array_type", _array_type)


def warn_unexpected(names: list[str] | None = None) -> None:
    """One `JaxInternalsWarning` for the internals (``names``, else all probed so far) this
    release should have and lacks."""
    unexpected = [n for n in _unexpected() if names is None or n in names]
    if unexpected:
        _warn_missing(unexpected, stacklevel=4)


warn_unexpected()
