"""The stability properties, as functions a test (yours or ours) can call.

Each ``check_<property>`` raises :class:`StabilityError` (an ``AssertionError``) that names
the distribution, prints its parameters by key path and says what differed.
:func:`check_stable` runs them all on a user's factory or hypothesis strategy.

Properties (:data:`PROPERTIES`):

``access_plan``   tree structure, leaf shapes/dtypes and ``vars()`` unchanged by any access plan
``round_trip``    flatten -> unflatten gives the same leaves, ``log_prob`` and ``sample``
``control_flow``  a ``lax.scan`` carry (rebuilt and read in the body), ``while_loop`` state,
                  both branches of ``lax.cond``
``jit``           through ``jit`` as argument and as return value
``vmap``          ``vmap`` over a stacked batch of instances (leaves with a leading axis)
``pmap``          ``pmap`` over a stacked batch, one instance per device
``shard_map``     ``shard_map`` over a stacked batch on a 1-d mesh of all devices
``closure``       an instance closed over by ``jit``, ``vmap``, ``pmap`` and ``grad``, then
                  used eagerly: no leaked tracer, same values
``upstream``      same numbers as upstream numpyro for the same parameters and key
``hash_seed``     same leaf order (key paths, shapes, dtypes) in processes started with other
                  ``PYTHONHASHSEED`` values
``release``       cache entries are released with the instance (create/access/drop cycles)
``threads``       threads reading one shared instance get identical values, each computed once

Traced functions are compiled with ``xla_backend_optimization_level=0``
(:data:`COMPILER_OPTIONS`): these properties are about structure and tracing, and unoptimised
compiles are 2-3x faster. Values computed under a transformation are compared with eager
values with a small tolerance; eager-vs-eager comparisons (round trip, upstream) are exact.
"""

from __future__ import annotations

import atexit
import contextlib
import gc
import os
import pickle
import random
import re
import struct
import subprocess
import sys
import threading
import traceback
import weakref
from collections import defaultdict
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
import numpyro.distributions as nd
from jax.sharding import PartitionSpec

import stabledist
from stabledist.cache import CACHE
from stabledist.testing.strategies import (
    UNSUPPORTED,
    AccessPlan,
    DistSpec,
    lazy_names,
    upstream_class,
    valid_value,
)

__all__ = [
    "COMPILER_OPTIONS",
    "COVERAGE",
    "COVERAGE_KEY",
    "PROPERTIES",
    "Coverage",
    "Reference",
    "StabilityError",
    "StabilityReport",
    "check_access_plan",
    "check_closure",
    "check_control_flow",
    "check_hash_seed",
    "check_jit",
    "check_pmap",
    "check_release",
    "check_round_trip",
    "check_shard_map",
    "check_stable",
    "check_threads",
    "check_upstream",
    "check_vmap",
    "describe",
    "destabilize",
    "layout",
    "reference",
    "stack",
]

PROPERTIES: tuple[str, ...] = (
    "access_plan", "round_trip", "control_flow", "jit", "vmap", "pmap", "shard_map",
    "closure", "upstream", "hash_seed", "release", "threads",
)

COMPILER_OPTIONS: dict[str, Any] = {"xla_backend_optimization_level": 0}

RTOL, ATOL = 2e-5, 1e-5  # traced vs eager (float32 reassociation, fused ops)

TRACED_METHODS: tuple[str, ...] = ("mean", "variance", "log_prob")
"""Methods evaluated inside traced functions besides every lazy property. ``log_prob`` is
the costliest to compile; a fast profile may pass ``traced=("mean", "variance")`` to the
batched checks (``check_jit`` and ``check_closure``'s ``jit`` always evaluate it)."""


class StabilityError(AssertionError):
    """A stability property does not hold for a distribution."""


# ---------------------------------------------------------------------------------------------
# Coverage: which classes each property actually ran on.
# ---------------------------------------------------------------------------------------------


@dataclass
class Coverage:
    """Classes (by name) on which each property ran to completion, and how many examples.

    ``events`` keeps every record in order, so a caller can ask what one test exercised
    (:meth:`since`) and ship it to another process (pytest-xdist workers report to the
    controller through it); :meth:`merge` adds such a list back."""

    classes: dict[str, set[str]] = field(default_factory=lambda: defaultdict(set))
    examples: dict[str, int] = field(default_factory=lambda: defaultdict(int))
    events: list[tuple[str, str]] = field(default_factory=list)
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def record(self, prop: str, d_or_name: Any) -> None:
        name = d_or_name if isinstance(d_or_name, str) else type(d_or_name).__name__
        with self._lock:
            self.classes[prop].add(name)
            self.examples[prop] += 1
            self.events.append((prop, name))

    def since(self, mark: int) -> list[tuple[str, str]]:
        """Records made after ``len(self.events)`` was ``mark``."""
        with self._lock:
            return self.events[mark:]

    def merge(self, events: Iterable[Sequence[str]]) -> None:
        for prop, name in events:
            self.record(prop, name)

    def count(self, prop: str) -> int:
        return len(self.classes.get(prop, ()))

    def table(self) -> str:
        width = max(map(len, PROPERTIES))
        lines = [f"{'property':<{width}}  classes  examples"]
        props = [p for p in PROPERTIES if p in self.classes]
        props += sorted(set(self.classes) - set(PROPERTIES))
        for p in props:
            lines.append(f"{p:<{width}}  {self.count(p):>7}  {self.examples.get(p, 0):>8}")
        return "\n".join(lines)


COVERAGE = Coverage()
"""Process-wide coverage, filled by every check (the test suite reports it at session end)."""

COVERAGE_KEY = "stabledist_coverage"
"""Name under which a test hands its :meth:`Coverage.since` records to the test runner."""


# ---------------------------------------------------------------------------------------------
# Describing and comparing.
# ---------------------------------------------------------------------------------------------


def describe(d: Any) -> str:
    """``ClassName(path=value, ...)`` over the leaves, for failure messages."""
    try:
        pairs = jax.tree_util.tree_flatten_with_path(d)[0]
    except Exception as e:  # pragma: no cover - a broken flatten is reported elsewhere
        return f"{type(d).__name__}(<flatten failed: {e!r}>)"
    parts = []
    for path, leaf in pairs:
        arr = np.asarray(leaf)
        text = np.array2string(arr, precision=4, separator=", ", threshold=12)
        parts.append(f"{jax.tree_util.keystr(path)}={text}:{arr.dtype}")
    return f"{type(d).__name__}({', '.join(parts)})"


Layout = tuple[Any, tuple[tuple[str, tuple[int, ...], str], ...]]


def layout(d: Any) -> Layout:
    """Tree structure and, per leaf, its key path, shape and dtype."""
    pairs, treedef = jax.tree_util.tree_flatten_with_path(d)
    return treedef, tuple(
        (jax.tree_util.keystr(p), tuple(np.shape(x)), str(jnp.result_type(x))) for p, x in pairs
    )


def _vars_snapshot(d: Any, seen: set[int] | None = None) -> dict[str, Any]:
    """``vars(d)`` as ``name -> id(value)``, nested distributions expanded."""
    seen = set() if seen is None else seen
    seen.add(id(d))
    out: dict[str, Any] = {}
    for k, v in vars(d).items():
        items = v if isinstance(v, list | tuple) else [v]
        if any(isinstance(x, nd.Distribution) and id(x) not in seen for x in items):
            out[k] = [(_vars_snapshot(x, seen) if isinstance(x, nd.Distribution) else id(x))
                      for x in items]
        else:
            out[k] = id(v)
    return out


def _fail(what: str, d: Any, detail: str = "") -> StabilityError:
    msg = f"[{what}] {type(d).__name__}: {detail}\n  distribution: {describe(d)}"
    return StabilityError(msg)


def _array_leaves(tree: Any) -> list[Any]:
    return [x for x in jax.tree_util.tree_leaves(tree) if isinstance(x, jax.Array | np.ndarray
                                                                     | float | int)]


def _assert_close(what: str, d: Any, label: str, got: Any, want: Any, exact: bool) -> None:
    g, w = _array_leaves(got), _array_leaves(want)
    if len(g) != len(w):
        raise _fail(what, d, f"{label}: {len(g)} leaves, expected {len(w)}")
    for a, b in zip(g, w):
        a, b = np.asarray(a), np.asarray(b)
        if a.shape != b.shape:
            raise _fail(what, d, f"{label}: shape {a.shape}, expected {b.shape}")
        if exact or not np.issubdtype(b.dtype, np.inexact):
            ok = np.array_equal(a, b, equal_nan=True)
        else:
            tol = RTOL if b.dtype == np.float32 else 1e-9
            ok = np.allclose(a, b, rtol=tol, atol=ATOL, equal_nan=True)
        if not ok:
            raise _fail(what, d, f"{label} differs:\n    got      {a!r}\n    expected {b!r}")


def _assert_traced_close(what: str, d: Any, label: str, got: Any, want: Any,
                         upstream: Callable[[], Any]) -> None:
    """Values computed under a transformation equal the eager ones, or else equal what
    ``upstream()`` gives: the numpyro twin run through the very same transformation.

    Compiled float32 arithmetic can differ from op-by-op evaluation by more than the
    tolerance where a value is ill-conditioned (a normal truncated 5 standard deviations
    out); when numpyro's own class gives the same numbers the same way, the difference is
    XLA's, not stabledist's."""
    try:
        _assert_close(what, d, label, got, want, exact=False)
    except StabilityError as err:
        try:
            theirs = upstream()
        except Exception:
            raise err from None
        try:
            _assert_close(what, d, label, got, theirs, exact=False)
        except StabilityError:
            raise err from None


class _Once:
    """A thunk evaluated at most once (upstream reruns are costly and often not needed)."""

    def __init__(self, f: Callable[[], Any]) -> None:
        self.f, self.done, self.value = f, False, None

    def __call__(self) -> Any:
        if not self.done:
            self.value, self.done = self.f(), True
        return self.value


def _assert_same_leaves(what: str, d: Any, other: Any, label: str) -> None:
    lay, lay2 = layout(d), layout(other)
    if lay[0] != lay2[0]:
        raise _fail(what, d, f"{label}: tree structure changed:\n    {lay[0]}\n -> {lay2[0]}")
    if lay[1] != lay2[1]:
        raise _fail(what, d, f"{label}: leaves changed:\n    {lay[1]}\n -> {lay2[1]}")
    _assert_close(what, d, f"{label} leaves", jax.tree_util.tree_leaves(other),
                  jax.tree_util.tree_leaves(d), exact=True)


# ---------------------------------------------------------------------------------------------
# Eager reference values.
# ---------------------------------------------------------------------------------------------


@dataclass
class Reference:
    """Eager values of one instance: lazy properties (those that can be read), ``mean``,
    ``variance`` and ``log_prob`` at ``value`` (``None`` when undefined)."""

    names: tuple[str, ...]
    lazies: dict[str, Any]
    methods: tuple[str, ...]
    values: dict[str, Any]
    value: Any


_TRACE_ERRORS = (jax.errors.ConcretizationTypeError, jax.errors.TracerBoolConversionError,
                 jax.errors.TracerArrayConversionError, jax.errors.TracerIntegerConversionError)


def reference(d: Any, key: jax.Array | None = None, value: Any = None) -> Reference:
    """Eager values of ``d``; only array-valued lazy properties that read without error count
    (a property that raises, eagerly, raises upstream too)."""
    key = jax.random.PRNGKey(0) if key is None else key
    names, lazies = [], {}
    for n in lazy_names(d):
        try:
            v = getattr(d, n)
        except Exception:
            continue
        if _array_leaves(v) and all(isinstance(x, jax.Array | np.ndarray | float | int)
                                    for x in jax.tree_util.tree_leaves(v)):
            names.append(n)
            lazies[n] = v
    value = valid_value(d, key) if value is None else value
    methods, values = [], {}
    for m in ("mean", "variance", "log_prob"):
        try:
            v = d.log_prob(value) if m == "log_prob" else getattr(d, m)
        except (*UNSUPPORTED, ValueError, TypeError):
            continue
        if m == "log_prob" and value is None:
            continue
        methods.append(m)
        values[m] = v
    return Reference(tuple(names), lazies, tuple(methods), values, value)


def _read(d: Any, names: tuple[str, ...], methods: tuple[str, ...], value: Any) -> dict[str, Any]:
    out = {n: getattr(d, n) for n in names}
    for m in methods:
        out["@" + m] = d.log_prob(value) if m == "log_prob" else getattr(d, m)
    return out


def _ref_values(ref: Reference) -> dict[str, Any]:
    return {**ref.lazies, **{"@" + m: v for m, v in ref.values.items()}}


def _rebuild(d: Any) -> Any:
    leaves, treedef = jax.tree_util.tree_flatten(d)
    return jax.tree_util.tree_unflatten(treedef, leaves)


def _scalar(values: Any) -> jax.Array:
    """Sum of every finite float entry: one number that depends on all values."""
    total = jnp.zeros((), jnp.result_type(float))
    for x in _array_leaves(values):
        x = jnp.asarray(x)
        if jnp.issubdtype(x.dtype, jnp.inexact):
            total = total + jnp.sum(jnp.where(jnp.isfinite(x), x, 0)).astype(total.dtype)
    return total


# ---------------------------------------------------------------------------------------------
# 1. access plans  2. round trip
# ---------------------------------------------------------------------------------------------


def check_access_plan(d: Any, plan: AccessPlan, key: jax.Array | None = None) -> None:
    """Structure, leaf shapes/dtypes and ``vars()`` (recursively) unchanged by ``plan``."""
    before, state = layout(d), _vars_snapshot(d)
    keys_before = list(vars(d))
    outcomes = plan.run(d, key)
    after = layout(d)
    detail = f"after {plan!r} (outcomes {[o for _, o in outcomes]})"
    if before[0] != after[0]:
        raise _fail("access_plan", d, f"tree structure changed {detail}:\n    {before[0]}\n"
                                      f" -> {after[0]}")
    if before[1] != after[1]:
        raise _fail("access_plan", d, f"leaves changed {detail}:\n    {before[1]}\n"
                                      f" -> {after[1]}")
    if list(vars(d)) != keys_before or _vars_snapshot(d) != state:
        added = sorted(set(vars(d)) - set(keys_before))
        raise _fail("access_plan", d, f"vars() changed {detail}; new attributes: {added}")
    COVERAGE.record("access_plan", d)


def check_round_trip(d: Any, key: jax.Array | None = None) -> None:
    """``tree_unflatten(tree_flatten(d))`` has identical leaves, ``log_prob`` and ``sample``."""
    key = jax.random.PRNGKey(1) if key is None else key
    leaves, treedef = jax.tree_util.tree_flatten(d)
    e = jax.tree_util.tree_unflatten(treedef, leaves)
    if type(e) is not type(d):
        raise _fail("round_trip", d, f"unflatten gave a {type(e).__name__}")
    _assert_same_leaves("round_trip", d, e, "round trip")
    for a, b in zip(leaves, jax.tree_util.tree_leaves(e)):
        if a is not b:
            raise _fail("round_trip", d, "unflatten copied a leaf instead of keeping it")
    try:
        x = d.sample(key)
    except UNSUPPORTED:
        x = None
    if x is not None:
        _assert_close("round_trip", d, "sample", e.sample(key), x, exact=True)
    value = valid_value(d, key)
    if value is not None:
        try:
            want = d.log_prob(value)
        except UNSUPPORTED:
            want = None
        if want is not None:
            _assert_close("round_trip", d, "log_prob", e.log_prob(value), want, exact=True)
    COVERAGE.record("round_trip", d)


# ---------------------------------------------------------------------------------------------
# 3. control flow  4. jit
# ---------------------------------------------------------------------------------------------


def _control_flow(d: Any, names: tuple[str, ...]) -> Any:
    def scan_body(carry: Any, _: Any) -> Any:
        inner = _rebuild(carry)  # rebuilt inside the body from the carried leaves
        return inner, _read(inner, names, (), None)

    d_scan, read_scan = jax.lax.scan(scan_body, d, jnp.arange(2))
    # while_loop state and cond operands: rebuilt and read too, but only the first lazy
    # value (reading all of them in every body would multiply compile time, not coverage)
    few = names[:1]

    def while_body(state: Any) -> Any:
        i, inner, total = state
        inner = _rebuild(inner)
        return i + 1, inner, total + _scalar(_read(inner, few, (), None))

    zero = jnp.zeros((), jnp.result_type(float))
    _, d_while, total = jax.lax.while_loop(lambda s: s[0] < 2, while_body, (0, d, zero))

    def as_is(inner: Any) -> Any:
        return inner, _read(inner, few, (), None)

    def rebuilt(inner: Any) -> Any:
        inner = _rebuild(inner)
        return inner, _read(inner, few, (), None)

    # both branches traced and compiled; a data-dependent predicate, and the swapped cond
    # makes each branch the one that runs in one of the two
    pred = _scalar(jax.tree_util.tree_leaves(d)) > 0
    d_cond, read_cond = jax.lax.cond(pred, as_is, rebuilt, d)
    d_cond2, read_cond2 = jax.lax.cond(pred, rebuilt, as_is, d)
    return d_scan, read_scan, d_while, total, d_cond, read_cond, d_cond2, read_cond2


_control_flow_jit = jax.jit(_control_flow, static_argnames=("names",),
                            compiler_options=COMPILER_OPTIONS)


def check_control_flow(d: Any, ref: Reference | None = None) -> None:
    """``d`` as a ``scan`` carry, ``while_loop`` state and ``cond`` operand (through each
    branch), rebuilt and its lazy values read inside each body; what comes out equals what
    went in, and the values read equal the eager ones."""
    ref = reference(d) if ref is None else ref
    with jax.checking_leaks():
        out = _control_flow_jit(d, names=ref.names)
    d_scan, read_scan, d_while, total, d_cond, read_cond, d_cond2, read_cond2 = out
    want = dict(ref.lazies)
    for label, dd in (("scan carry", d_scan), ("while_loop state", d_while),
                      ("cond operand", d_cond), ("cond operand (branches swapped)", d_cond2)):
        _assert_same_leaves("control_flow", d, dd, label)
    theirs = _Once(lambda: _control_flow_jit(destabilize(d), names=ref.names))
    for i in range(2):
        _assert_traced_close("control_flow", d, f"values read in scan step {i}",
                             jax.tree_util.tree_map(lambda x, i=i: x[i], read_scan), want,
                             lambda i=i: jax.tree_util.tree_map(lambda x: x[i], theirs()[1]))
    few = {n: want[n] for n in ref.names[:1]}
    for label, got, at in (("cond", read_cond, 5), ("cond (branches swapped)", read_cond2, 7)):
        _assert_traced_close("control_flow", d, f"values read in {label}", got, few,
                             lambda at=at: theirs()[at])
    expected_total = 2 * _scalar(few)
    if not np.allclose(total, expected_total, rtol=1e-4, atol=1e-3):
        raise _fail("control_flow", d, f"while_loop read {total}, expected {expected_total}")
    COVERAGE.record("control_flow", d)


def _jit_probe(d: Any, value: Any, names: tuple[str, ...], methods: tuple[str, ...]) -> Any:
    return d, _read(d, names, methods, value)


_jit_probe_jit = jax.jit(_jit_probe, static_argnames=("names", "methods"),
                         compiler_options=COMPILER_OPTIONS)


def _unflatten(treedef: Any, leaves: Any) -> Any:
    return jax.tree_util.tree_unflatten(treedef, leaves)


_unflatten_jit = jax.jit(_unflatten, static_argnums=0, compiler_options=COMPILER_OPTIONS)


def check_jit(d: Any, ref: Reference | None = None) -> None:
    """``d`` into ``jit`` as an argument (read inside) and out as a return value (also one
    built inside from leaves); values equal the eager ones."""
    ref = reference(d) if ref is None else ref
    with jax.checking_leaks():
        d_out, got = _jit_probe_jit(d, ref.value, names=ref.names, methods=ref.methods)
        leaves, treedef = jax.tree_util.tree_flatten(d)
        built = _unflatten_jit(treedef, leaves)
    _assert_same_leaves("jit", d, d_out, "returned argument")
    _assert_same_leaves("jit", d, built, "instance built inside jit")
    theirs = _Once(lambda: _jit_probe_jit(destabilize(d), ref.value, names=ref.names,
                                          methods=ref.methods)[1])
    _assert_traced_close("jit", d, "values read inside jit", got, _ref_values(ref), theirs)
    _assert_close("jit", d, "values read from the returned instance",
                  _read(d_out, ref.names, ref.methods, ref.value), _ref_values(ref), exact=False)
    COVERAGE.record("jit", d)


# ---------------------------------------------------------------------------------------------
# 5. vmap  6. pmap  7. shard_map
# ---------------------------------------------------------------------------------------------


def stack(ds: Sequence[Any]) -> Any:
    """One instance whose leaves are the instances' leaves stacked on a new leading axis."""
    # compared with ==, not hashed into a set: numpyro 0.21 keeps a constraint in aux data
    # (the power laws' ``_support``), whose hash is its identity while it compares equal
    first, *rest = (jax.tree_util.tree_structure(d) for d in ds)
    for other in rest:
        if other != first:
            raise ValueError(f"cannot stack instances of different structures: {first} and "
                             f"{other}")
    return jax.tree_util.tree_map(_stack_leaves, *ds)


def _stack_leaves(*xs: Any) -> jax.Array:
    # on the host: jnp.stack would compile a concatenate for every new combination
    dtype = jnp.asarray(xs[0]).dtype
    return jnp.asarray(np.stack([np.asarray(x, dtype=dtype) for x in xs]))


def _common_reference(ds: Sequence[Any], key: jax.Array | None,
                      traced: Sequence[str] = TRACED_METHODS) -> tuple[list[Reference],
                                                                       tuple[str, ...],
                                                                       tuple[str, ...]]:
    refs = [reference(d, key) for d in ds]
    names = tuple(n for n in refs[0].names if all(n in r.names for r in refs))
    methods = tuple(m for m in refs[0].methods
                    if m in traced and all(m in r.methods for r in refs))
    if any(r.value is None for r in refs) or any(
        np.shape(r.value) != np.shape(refs[0].value) for r in refs
    ):
        methods = tuple(m for m in methods if m != "log_prob")
    return refs, names, methods


def _values_of(ref: Reference, names: tuple[str, ...], methods: tuple[str, ...]) -> dict:
    vals = _ref_values(ref)
    return {k: vals[k] for k in (*names, *("@" + m for m in methods))}


def _stacked_values(refs: Sequence[Reference]) -> Any:
    return stack([r.value if r.value is not None else jnp.zeros(()) for r in refs])


def _leak_checked(run: Callable[..., Any], names: tuple[str, ...],
                  methods: tuple[str, ...]) -> Callable[[Any, Any], Any]:
    """``run(stacked instances, stacked values, names, methods)`` under ``checking_leaks``."""

    def probe(batched: Any, values: Any) -> Any:
        with jax.checking_leaks():
            return run(batched, values, names, methods)

    return probe


def _check_batched(what: str, ds: Sequence[Any], out_d: Any, got: Any, refs: Sequence[Reference],
                   names: tuple[str, ...], methods: tuple[str, ...],
                   probe: Callable[[Any, Any], Any]) -> None:
    """Instances and values coming out of ``probe(stacked instances, stacked values)``;
    ``probe`` is rerun on the numpyro twins only if a value differs from the eager one."""
    theirs = _Once(lambda: probe(stack([destabilize(d) for d in ds]), _stacked_values(refs))[1])
    for i, (d, r) in enumerate(zip(ds, refs)):
        d_i = jax.tree_util.tree_map(lambda x, i=i: x[i], out_d)
        _assert_same_leaves(what, d, d_i, f"instance {i} coming out")
        got_i = jax.tree_util.tree_map(lambda x, i=i: x[i], got)
        _assert_traced_close(what, d, f"values of instance {i}", got_i,
                             _values_of(r, names, methods),
                             lambda i=i: jax.tree_util.tree_map(lambda x: x[i], theirs()))


_vmap_probe_jit = jax.jit(jax.vmap(_jit_probe, in_axes=(0, 0, None, None)), static_argnums=(2, 3),
                          compiler_options=COMPILER_OPTIONS)


def check_vmap(ds: Sequence[Any], key: jax.Array | None = None,
               traced: Sequence[str] = TRACED_METHODS) -> None:
    """``vmap`` over the stack of ``ds`` (same structure) reads each instance's values."""
    refs, names, methods = _common_reference(ds, key, traced)
    batched = stack(ds)
    probe = _leak_checked(_vmap_probe_jit, names, methods)
    out_d, got = probe(batched, _stacked_values(refs))
    _check_batched("vmap", ds, out_d, got, refs, names, methods, probe)
    COVERAGE.record("vmap", ds[0])


_pmap_probe = jax.pmap(_jit_probe, in_axes=(0, 0, None, None), static_broadcasted_argnums=(2, 3))


def check_pmap(ds: Sequence[Any], key: jax.Array | None = None,
               traced: Sequence[str] = TRACED_METHODS) -> None:
    """``pmap`` over the stack of ``len(ds) == jax.device_count()`` instances."""
    _require_devices(len(ds))
    refs, names, methods = _common_reference(ds, key, traced)
    probe = _leak_checked(_pmap_probe, names, methods)
    out_d, got = probe(stack(ds), _stacked_values(refs))
    _check_batched("pmap", ds, out_d, got, refs, names, methods, probe)
    COVERAGE.record("pmap", ds[0])


def _require_devices(n: int) -> None:
    if jax.device_count() != n:
        raise ValueError(
            f"need one instance per device: got {n} instances and {jax.device_count()} devices "
            "(set XLA_FLAGS=--xla_force_host_platform_device_count=N before importing jax)"
        )


_shard_map_cache: dict[int, Callable[..., Any]] = {}


def _shard_map_fn(n: int) -> Callable[..., Any]:
    fn = _shard_map_cache.get(n)
    if fn is None:
        mesh = jax.sharding.Mesh(np.array(jax.devices()[:n]), ("i",))

        def per_shard(d: Any, value: Any, names: tuple[str, ...],
                      methods: tuple[str, ...]) -> Any:
            def body(d_block: Any, v_block: Any) -> Any:
                inner = jax.tree_util.tree_map(lambda x: x[0], d_block)
                out = _jit_probe(inner, v_block[0], names, methods)
                return jax.tree_util.tree_map(lambda x: jnp.asarray(x)[None], out)

            spec = PartitionSpec("i")
            return jax.shard_map(body, mesh=mesh, in_specs=(spec, spec), out_specs=spec)(
                d, value
            )

        fn = jax.jit(per_shard, static_argnums=(2, 3), compiler_options=COMPILER_OPTIONS)
        _shard_map_cache[n] = fn
    return fn


def check_shard_map(ds: Sequence[Any], key: jax.Array | None = None,
               traced: Sequence[str] = TRACED_METHODS) -> None:
    """``shard_map`` over the stack of one instance per device, on a 1-d mesh."""
    _require_devices(len(ds))
    refs, names, methods = _common_reference(ds, key, traced)
    probe = _leak_checked(_shard_map_fn(len(ds)), names, methods)
    out_d, got = probe(stack(ds), _stacked_values(refs))
    _check_batched("shard_map", ds, out_d, got, refs, names, methods, probe)
    COVERAGE.record("shard_map", ds[0])


# ---------------------------------------------------------------------------------------------
# 8. closure
# ---------------------------------------------------------------------------------------------


def check_closure(d: Any, ref: Reference | None = None,
                  traced: Sequence[str] = TRACED_METHODS) -> None:
    """``d`` closed over (not passed) by ``jit``, ``vmap``, ``pmap`` and ``grad``; no tracer
    leaks, nothing cached for ``d`` holds a tracer, and eager reads afterwards give the same
    values as before."""
    ref = reference(d) if ref is None else ref
    names, methods, value = ref.names, ref.methods, ref.value
    want = _ref_values(ref)

    light = tuple(m for m in methods if m in traced)

    def f(s: jax.Array, methods: tuple[str, ...] = methods) -> jax.Array:
        return s * _scalar(_read(d, names, methods, value))

    def f_light(s: jax.Array) -> jax.Array:
        return f(s, light)

    def transformed(s: jax.Array) -> Any:
        # vmap and grad of the closure, traced inside one jit (one compile, not op-by-op);
        # they read the lazy values and the ``traced`` methods (log_prob only in thorough
        # runs: it is the costliest part to trace, and is read twice already)
        return (_read(d, names, methods, value), f(s), jax.vmap(f_light)(jnp.stack([s, s])),
                jax.grad(f_light)(s))

    with jax.checking_leaks():
        inside_jit, jit_total, vmap_total, grad_total = jax.jit(
            transformed, compiler_options=COMPILER_OPTIONS
        )(jnp.ones(()))
        pmap_total = jax.pmap(f_light)(jnp.ones(jax.local_device_count()))
    _assert_close("closure", d, "values read inside jit", inside_jit, want, exact=False)
    expected = np.asarray(_scalar(want))
    light_expected = np.asarray(_scalar({k: v for k, v in want.items()
                                         if not k.startswith("@") or k[1:] in light}))
    for label, got, exp in (("jit", jit_total, expected), ("vmap", vmap_total, light_expected),
                            ("pmap", pmap_total, light_expected),
                            ("grad", grad_total, light_expected)):
        if not np.allclose(np.asarray(got), exp, rtol=1e-4, atol=1e-3):
            raise _fail("closure", d, f"{label} of the closure gave {got}, expected {exp}")
    for name, cached in CACHE.cached(d).items():
        if any(isinstance(x, jax.core.Tracer) for x in jax.tree_util.tree_leaves(cached)):
            raise _fail("closure", d, f"the cache holds a tracer for {name!r}")
    for name, v in vars(d).items():
        if any(isinstance(x, jax.core.Tracer) for x in jax.tree_util.tree_leaves(v)):
            raise _fail("closure", d, f"attribute {name!r} holds a tracer")
    _assert_close("closure", d, "eager values after the transformations",
                  _read(d, names, methods, value), want, exact=True)
    COVERAGE.record("closure", d)


# ---------------------------------------------------------------------------------------------
# 9. upstream
# ---------------------------------------------------------------------------------------------


def destabilize(value: Any) -> Any:
    """The upstream (numpyro or user) twin of a stable distribution: same ``__dict__``, its
    upstream class, nested distributions converted too. Other values unchanged."""
    if isinstance(value, nd.Distribution):
        cls = upstream_class(type(value))
        twin = cls.__new__(cls)
        twin.__dict__.update({k: destabilize(v) for k, v in vars(value).items()})
        return twin
    if type(value) in (list, tuple):
        return type(value)(destabilize(v) for v in value)
    return value


def _outcome(f: Callable[[], Any]) -> tuple[str, Any]:
    try:
        return "ok", f()
    except Exception as e:
        return "error", type(e).__name__


def check_upstream(d: Any, upstream: Any | None = None, key: jax.Array | None = None) -> None:
    """Every lazy value, ``mean``, ``variance``, ``entropy``, ``sample``, ``log_prob`` and
    ``cdf`` of ``d`` equal (exactly) upstream's for the same parameters and key."""
    key = jax.random.PRNGKey(2) if key is None else key
    upstream = destabilize(d) if upstream is None else upstream
    value = valid_value(upstream, key)
    probes: dict[str, Callable[[Any], Any]] = {
        "sample": lambda x: x.sample(key),
        "mean": lambda x: x.mean,
        "variance": lambda x: x.variance,
        "entropy": lambda x: x.entropy(),
    }
    if value is not None:
        probes["log_prob"] = lambda x: x.log_prob(value)
        probes["cdf"] = lambda x: x.cdf(value)
    for n in lazy_names(upstream):
        probes[f".{n}"] = lambda x, n=n: getattr(x, n)
    for label, probe in probes.items():
        ours, theirs = _outcome(lambda p=probe: p(d)), _outcome(lambda p=probe: p(upstream))
        if ours[0] != theirs[0] or (ours[0] == "error" and ours[1] != theirs[1]):
            raise _fail("upstream", d, f"{label}: {ours} but upstream {theirs}")
        if ours[0] == "ok":
            if isinstance(theirs[1], nd.Distribution):
                _assert_close("upstream", d, label, jax.tree_util.tree_leaves(ours[1]),
                              jax.tree_util.tree_leaves(theirs[1]), exact=True)
            else:
                _assert_close("upstream", d, label, ours[1], theirs[1], exact=True)
    COVERAGE.record("upstream", d)


# ---------------------------------------------------------------------------------------------
# 10. hash seed
# ---------------------------------------------------------------------------------------------

HASH_SEEDS: tuple[int, ...] = (0, 1, 2)
_ADDRESS = re.compile(r" at 0x[0-9a-f]+|0x[0-9a-f]{6,}")


def _portable_layout(d: Any) -> tuple[str, tuple[tuple[str, tuple[int, ...], str], ...]]:
    treedef, leaves = layout(d)
    return _ADDRESS.sub("", str(treedef)), leaves


class _Worker:
    """A Python process with a fixed ``PYTHONHASHSEED`` that builds or unpickles a
    distribution and reports its layout; started once, reused for every request."""

    def __init__(self, seed: int) -> None:
        env = dict(os.environ)
        env["PYTHONHASHSEED"] = str(seed)
        env["PYTHONPATH"] = os.pathsep.join(p for p in sys.path if p)
        env.setdefault("JAX_PLATFORMS", "cpu")
        env.pop("XLA_FLAGS", None)
        self.seed = seed
        self.proc = subprocess.Popen(
            [sys.executable, "-c", "from stabledist.testing.check import _worker_main; "
                                   "_worker_main()"],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, env=env,
        )
        self.lock = threading.Lock()

    def ask(self, request: bytes) -> Any:
        with self.lock:
            assert self.proc.stdin is not None and self.proc.stdout is not None
            self.proc.stdin.write(struct.pack("<Q", len(request)) + request)
            self.proc.stdin.flush()
            head = self.proc.stdout.read(8)
            if len(head) < 8:
                raise RuntimeError(f"hash-seed worker {self.seed} died")
            (size,) = struct.unpack("<Q", head)
            return pickle.loads(self.proc.stdout.read(size))

    def close(self) -> None:
        """End of input makes the worker return; kill it if it does not within 10 s."""
        with contextlib.suppress(Exception):
            assert self.proc.stdin is not None
            self.proc.stdin.close()
        try:
            self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        if self.proc.stdout is not None:
            self.proc.stdout.close()


_workers: dict[int, _Worker] = {}
_workers_lock = threading.Lock()
_atexit_registered = False


def start_hash_seed_workers(seeds: Iterable[int] = HASH_SEEDS) -> None:
    """Start the worker processes now (they take a second or two to import JAX), so that a
    test session can overlap that with other work. They are stopped at interpreter exit."""
    global _atexit_registered
    with _workers_lock:
        if not _atexit_registered:
            atexit.register(stop_hash_seed_workers)
            _atexit_registered = True
        for s in seeds:
            if s not in _workers or _workers[s].proc.poll() is not None:
                _workers[s] = _Worker(s)


def stop_hash_seed_workers() -> None:
    with _workers_lock:
        for w in _workers.values():
            w.close()
        _workers.clear()


def _worker_main() -> None:  # pragma: no cover - runs in the worker process
    stdin, stdout = sys.stdin.buffer, sys.stdout.buffer
    while True:
        head = stdin.read(8)
        if len(head) < 8:
            return
        (size,) = struct.unpack("<Q", head)
        try:
            kind, payload = pickle.loads(stdin.read(size))
            context = payload.x64_context() if kind == "spec" else contextlib.nullcontext()
            with context:
                if kind == "spec":
                    d = payload.build()
                elif kind == "factory":
                    d = payload()
                else:
                    d = payload
                answer = ("ok", _portable_layout(d))
        except Exception:
            answer = ("error", traceback.format_exc())
        blob = pickle.dumps(answer)
        stdout.write(struct.pack("<Q", len(blob)) + blob)
        stdout.flush()


def _transportable(subject: Any, d: Any) -> tuple[str, Any] | None:
    """What to send to a worker: a spec (rebuilt there), a factory, or the pickled instance."""
    for kind, payload in (("spec", subject if isinstance(subject, DistSpec) else None),
                          ("factory", subject if callable(subject) else None), ("instance", d)):
        if payload is None:
            continue
        try:
            blob = pickle.dumps((kind, payload))
            pickle.loads(blob)
        except Exception:
            continue
        return kind, blob
    return None


def check_hash_seed(d: Any, subject: Any = None, seeds: Sequence[int] = HASH_SEEDS) -> None:
    """Leaf order (key paths, shapes, dtypes) and tree structure of ``d`` are the same in
    processes started with each of ``seeds`` as ``PYTHONHASHSEED``.

    ``subject`` is how the workers get the distribution: a :class:`DistSpec` or a factory
    importable by reference (then the worker constructs it) or, by default, ``d`` pickled.
    """
    sent = _transportable(subject, d)
    if sent is None:
        raise _fail("hash_seed", d, "cannot send the distribution to another process: neither "
                                    "it nor its factory pickles (define the factory or class "
                                    "at module level)")
    kind, blob = sent
    start_hash_seed_workers(seeds)
    ours = _portable_layout(d)
    answers = {s: _workers[s].ask(blob) for s in seeds}
    for s, (status, theirs) in answers.items():
        if status != "ok":
            raise _fail("hash_seed", d, f"worker with PYTHONHASHSEED={s} failed ({kind}):\n"
                                        f"{theirs}")
        if theirs[1] != ours[1]:
            raise _fail("hash_seed", d, f"leaf order differs with PYTHONHASHSEED={s}:\n"
                                        f"    here  {ours[1]}\n    there {theirs[1]}")
        if theirs[0] != ours[0]:
            raise _fail("hash_seed", d, f"tree structure differs with PYTHONHASHSEED={s}:\n"
                                        f"    here  {ours[0]}\n    there {theirs[0]}")
    COVERAGE.record("hash_seed", d)


# ---------------------------------------------------------------------------------------------
# 11. release  12. threads
# ---------------------------------------------------------------------------------------------


def _read_all(d: Any, names: Sequence[str]) -> dict[str, Any]:
    """Read every lazy property; what each gave: its value or the exception it raised."""
    values: dict[str, Any] = {}
    for n in names:
        try:
            values[n] = getattr(d, n)
        except Exception as e:
            values[n] = _Raised(e)
    return values


class _Raised:
    """A lazy property that raised (numpyro's own errors, e.g. a low-rank precision). Keeps
    the exception's type and arguments only: its traceback would keep the reader's frames,
    and the instances in them, alive."""

    def __init__(self, error: Exception) -> None:
        self.type, self.args = type(error), error.args

    def __call__(self, instance: Any) -> Any:
        raise self.type(*self.args)


def check_release(factory: Callable[[], Any], cycles: int = 10_000,
                  rebuild: bool = True) -> None:
    """``cycles`` create/access/drop cycles leave nothing in the cache.

    The first instance comes from ``factory``; with ``rebuild`` the others are rebuilt from
    its leaves by ``tree_unflatten`` (what every jit/vmap/scan boundary does, and much
    cheaper than a validating constructor), else each comes from ``factory``. Every cycle
    reads all lazy properties; no new instance may find values already cached (its ``id`` is
    often a dead one's); at the end (after ``gc.collect()``) the cache must hold exactly what
    it held before, and every instance must be dead.

    The cache's bookkeeping is under test, not the arithmetic: the first instance computes its
    values for real, and during the other cycles every read that computes (a cache miss, as
    on each new instance) takes the whole miss path but returns that value, so 10 000 cycles
    cost milliseconds per lazy property instead of 10 000 evaluations.
    """
    # Only this window's objects may be collected: young generations are emptied first, and
    # automatic collection is off until the end, so garbage of earlier code (promoted to the
    # oldest generation) cannot be freed in between and make the counts differ.
    gc.collect(1)
    enabled = gc.isenabled()
    gc.disable()
    try:
        return _release_window(factory, cycles, rebuild)
    finally:
        if enabled:
            gc.enable()


def _release_window(factory: Callable[[], Any], cycles: int, rebuild: bool) -> None:
    before = CACHE.info()
    first = factory()
    names = lazy_names(first)
    leaves, treedef = jax.tree_util.tree_flatten(first)
    refs: list[weakref.ref[Any]] = []
    values = _read_all(first, names)
    refs.append(weakref.ref(first))
    peak = CACHE.info()
    name = type(first).__name__
    stubs = _stub_computations(type(first), values)
    del first
    try:
        for i in range(cycles - 1):
            d = jax.tree_util.tree_unflatten(treedef, leaves) if rebuild else factory()
            if CACHE.cached(d):  # a dead instance's values under a reused id: served stale
                raise StabilityError(f"[release] {name}: a new instance (cycle {i + 1}) "
                                     f"already has cached values {sorted(CACHE.cached(d))}")
            _read_all(d, names)
            if i % 97 == 0:
                refs.append(weakref.ref(d))
            del d
    finally:
        for desc, original in stubs:
            desc.wrapped = original
    gc.collect(1)
    after = CACHE.info()
    alive = sum(r() is not None for r in refs)
    if after != before or alive:
        raise StabilityError(
            f"[release] {name}: after {cycles} create/access/drop cycles the cache holds "
            f"{after} (before: {before}, with one live instance: {peak}); {alive} sampled "
            "instances are still alive"
        )
    COVERAGE.record("release", name)


def _stub_computations(cls: type, values: dict[str, Any]) -> list[tuple[Any, Any]]:
    """Make each lazy property of ``cls`` compute (or raise) what it did for the first
    instance; returns ``(descriptor, original)`` pairs to restore."""
    stubs: list[tuple[Any, Any]] = []
    for n, v in values.items():
        desc = _descriptor(cls, n)
        if desc is None or any(desc is p for p, _ in stubs):
            continue
        stubs.append((desc, desc.wrapped))
        desc.wrapped = v if isinstance(v, _Raised) else (lambda instance, _v=v: _v)
    return stubs


def check_threads(factory: Callable[[], Any], n_threads: int = 4) -> None:
    """``n_threads`` threads read every lazy property of one fresh shared instance, in
    different orders, at the same time: all see identical values (the very same objects for
    cached ones) and each value is computed at most once."""
    d = factory()
    names = lazy_names(d)
    counts: dict[str, int] = defaultdict(int)
    counts_lock = threading.Lock()
    patched: list[tuple[Any, Callable[..., Any]]] = []
    target = id(d)
    for n in names:
        desc = _descriptor(type(d), n)
        if desc is None or any(desc is p for p, _ in patched):
            continue
        original = desc.wrapped

        def counting(instance: Any, _f: Callable[..., Any] = original, _n: str = n) -> Any:
            value = _f(instance)
            if id(instance) == target:
                with counts_lock:
                    counts[_n] += 1
            return value

        patched.append((desc, original))
        desc.wrapped = counting
    barrier = threading.Barrier(n_threads)
    results: list[dict[str, Any]] = [{} for _ in range(n_threads)]
    errors: list[BaseException] = []

    def reader(i: int) -> None:
        order = list(names)
        random.Random(i).shuffle(order)
        try:
            barrier.wait(timeout=30)
            for n in order:
                try:
                    results[i][n] = ("ok", getattr(d, n))
                except Exception as e:
                    results[i][n] = ("error", type(e).__name__)
        except BaseException as e:
            errors.append(e)

    try:
        threads = [threading.Thread(target=reader, args=(i,)) for i in range(n_threads)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
    finally:
        for desc, original in patched:
            desc.wrapped = original
    if errors:
        raise errors[0]
    cached = CACHE.cached(d) if stabledist.is_stable(d) else {}
    for n in names:
        outcomes = [r[n] for r in results]
        first = outcomes[0]
        for other in outcomes[1:]:
            if other[0] != first[0]:
                raise _fail("threads", d, f"{n}: threads disagree: {first[0]} vs {other[0]}")
            if first[0] == "ok" and other[1] is not first[1]:
                if n in cached or not stabledist.is_stable(d):
                    raise _fail("threads", d, f"{n}: threads got different objects")
                _assert_close("threads", d, n, other[1], first[1], exact=True)
        if first[0] == "ok" and counts[n] > 1:
            raise _fail("threads", d, f"{n} was computed {counts[n]} times by {n_threads} "
                                      "threads (at most once expected)")
    COVERAGE.record("threads", d)


def _descriptor(cls: type, name: str) -> Any:
    for base in cls.__mro__:
        attr = vars(base).get(name)
        if attr is not None:
            return attr if hasattr(attr, "wrapped") else None
    return None


# ---------------------------------------------------------------------------------------------
# check_stable
# ---------------------------------------------------------------------------------------------


@dataclass
class StabilityReport:
    """What :func:`check_stable` ran: property -> number of examples it passed, and the
    properties it could not run with the reason."""

    passed: dict[str, int] = field(default_factory=dict)
    skipped: dict[str, str] = field(default_factory=dict)

    def __str__(self) -> str:
        lines = [f"  {p}: passed on {n} example(s)" for p, n in self.passed.items()]
        lines += [f"  {p}: not run ({why})" for p, why in self.skipped.items()]
        return "stability report\n" + "\n".join(lines)


def check_stable(
    factory: Any,
    *,
    properties: Iterable[str] = PROPERTIES,
    max_examples: int = 5,
    cycles: int = 1_000,
    n_threads: int = 4,
    plan_steps: int = 12,
    key: jax.Array | None = None,
) -> StabilityReport:
    """Run the stability properties on a user's distribution; raise ``AssertionError`` with
    every failing property's message, return a :class:`StabilityReport` otherwise.

    ``factory`` is either a zero-argument callable returning an instance (each call a new
    instance with the same parameters), or a hypothesis strategy of instances or of
    :class:`~stabledist.testing.strategies.DistSpec` (then each property runs on up to
    ``max_examples`` drawn examples and failures are shrunk). Access plans are drawn with
    hypothesis in both cases. ``hash_seed`` needs the factory (or the instance) to pickle by
    reference: define it at module level. ``pmap``/``shard_map`` need several devices;
    with one device they are reported as skipped.
    """
    from hypothesis import HealthCheck, given, settings
    from hypothesis import strategies as st

    from stabledist.testing.strategies import access_plans, full_plan

    props = tuple(properties)
    unknown = set(props) - set(PROPERTIES)
    if unknown:
        raise ValueError(f"unknown properties {sorted(unknown)}; choose from {PROPERTIES}")
    key = jax.random.PRNGKey(0) if key is None else key
    report = StabilityReport()
    failures: list[str] = []
    is_strategy = isinstance(factory, st.SearchStrategy)
    ndev = jax.device_count()

    def as_instance(x: Any) -> tuple[Any, Any]:
        if isinstance(x, DistSpec):
            return x.build(), x
        return x, None

    def run_one(prop: str, subject: Any, d: Any, make: Callable[[], Any]) -> None:
        if prop == "access_plan":
            check_access_plan(make(), full_plan(d), key)
            for plan in random_plans(d):
                check_access_plan(make(), plan, key)
        elif prop == "round_trip":
            check_round_trip(d, key)
        elif prop == "control_flow":
            check_control_flow(d)
        elif prop == "jit":
            check_jit(d)
        elif prop == "vmap":
            check_vmap([make(), make()], key)
        elif prop == "pmap":
            check_pmap([make() for _ in range(ndev)], key)
        elif prop == "shard_map":
            check_shard_map([make() for _ in range(ndev)], key)
        elif prop == "closure":
            check_closure(make())
        elif prop == "upstream":
            if isinstance(subject, DistSpec):
                check_upstream(d, subject.build(nd), key)
            else:
                check_upstream(d, destabilize(make()), key)
        elif prop == "hash_seed":
            check_hash_seed(d, subject)
        elif prop == "release":
            check_release(make, cycles)
        elif prop == "threads":
            check_threads(make, n_threads)

    def random_plans(d: Any) -> list[AccessPlan]:
        found: list[AccessPlan] = []

        @settings(max_examples=max_examples, database=None, deadline=None,
                  suppress_health_check=list(HealthCheck))
        @given(access_plans(d, max_steps=plan_steps))
        def pick(plan: AccessPlan) -> None:
            found.append(plan)

        pick()
        return found

    def _run_strategy(prop: str) -> int:
        examples = [0]

        @settings(max_examples=max_examples, database=None, deadline=None,
                  suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
        @given(factory, st.data())
        def run(drawn: Any, data: Any) -> None:
            d, subject = as_instance(drawn)

            def make() -> Any:
                return drawn.build() if isinstance(drawn, DistSpec) else _copy(d)

            if prop == "access_plan":
                check_access_plan(make(), full_plan(d), key)
                plan = data.draw(access_plans(d, max_steps=plan_steps), label="plan")
                check_access_plan(make(), plan, key)
            else:
                run_one(prop, subject, d, make)
            examples[0] += 1

        run()
        return examples[0]

    for prop in props:
        if prop in ("pmap", "shard_map") and ndev < 2:
            report.skipped[prop] = f"{ndev} device; set XLA_FLAGS=" \
                                   "--xla_force_host_platform_device_count=4"
            continue
        try:
            if is_strategy:
                report.passed[prop] = _run_strategy(prop)
            else:
                d = factory()
                run_one(prop, factory, d, factory)
                report.passed[prop] = 1
        except AssertionError as e:
            failures.append(f"{prop}: {e}")
        except Exception as e:
            failures.append(f"{prop}: {type(e).__name__}: {e}")
    if failures:
        raise StabilityError(
            f"{len(failures)} stability propert{'y' if len(failures) == 1 else 'ies'} failed:"
            "\n\n" + "\n\n".join(failures)
        )
    return report


def _copy(d: Any) -> Any:
    """A new instance with the same leaves (what crossing a jit boundary produces)."""
    return _rebuild(d)

