"""The checks of an instance closed over by a transformation, its lazy values first read
there: closed over (not passed) by ``jit``, ``vmap``, ``pmap`` and ``grad`` (`check_closure`),
and a fresh instance's lazy values read for the first time inside ``jit``, ``vmap``, ``grad``,
``scan``, ``pmap`` or ``shard_map`` (`check_hoisting`). Hypothesis-free.

Its leaves are then concrete inside the transformation, so stabledist may hoist a lazy value
out of the program (`stabledist._src.lazy.hoisting`) and cache it, where numpyro computes it in the
trace: a user's global prior is read this way, and what the cache keeps must be numpyro's
value and never a tracer. Each check runs the same programs on numpyro's instance with the same
parameters (by default the numpyro twin) and compares outcomes (`same_outcome`); values are
compared bit for bit where both compute them the same way, and to rounding (`RTOL`) where a
value comes out of a compiled program. Traced functions are compiled with
`xla_backend_optimization_level=0` (`COMPILER_OPTIONS`).
"""

from __future__ import annotations

import copy
from collections.abc import Callable, Sequence
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
from jax.core import Tracer
from jax.sharding import PartitionSpec

from stabledist._src.lazy import CACHE, class_attribute, decide, lazy_property_of
from stabledist.testing._compare import (
    COMPILER_OPTIONS,
    COVERAGE,
    TRACED_METHODS,
    Reference,
    StabilityError,
    _assert_close,
    _fail,
    _read,
    _scalar,
    attempt,
    attempt_both,
    destabilize,
    reference,
    same_outcome,
)
from stabledist.testing._spec import user_value

__all__ = ["HOISTING_TRANSFORMS", "check_closure", "check_hoisting"]


# ---------------------------------------------------------------------------------------------
# Closure.
# ---------------------------------------------------------------------------------------------


def check_closure(d: Any, ref: Reference | None = None,
                  traced: Sequence[str] = TRACED_METHODS, upstream: Any | None = None) -> None:
    """Check ``d`` closed over (not passed) by ``jit``, ``vmap``, ``pmap`` and ``grad``.

    ``d`` closed over (not passed) by ``jit``, ``vmap``, ``pmap`` and ``grad``: numpyro's
    values through the same programs (to rounding: stabledist may hoist a lazy value out of
    them), no tracer leaks, nothing cached for ``d`` holds a tracer, and eager reads afterwards
    give the same values as before."""
    # ``d`` closed over before anything read it (a global prior's first read is in the
    # trace; a value a user's class keeps on itself by hand is then a tracer there, which
    # must not stay): the eager reference is read from a copy
    copied = copy.copy(d)
    ref = reference(copied) if ref is None else ref
    upstream = destabilize(copied) if upstream is None else upstream
    names, methods, value = ref.names, ref.methods, user_value(ref.value)
    light = tuple(m for m in methods if m in traced)
    before = attempt(lambda: _read(copied, names, methods, value))

    def run(x: Any) -> Any:
        def f(s: jax.Array, methods: tuple[str, ...] = methods) -> jax.Array:
            return s * _scalar(_read(x, names, methods, value))

        def f_light(s: jax.Array) -> jax.Array:
            return f(s, light)

        def transformed(s: jax.Array) -> Any:
            # vmap and grad of the closure, traced inside one jit (one compile, not op by
            # op); they read the lazy values and the ``traced`` methods (log_prob only in
            # thorough runs: it is the costliest part to trace, and is read twice already)
            return (_read(x, names, methods, value), f(s), jax.vmap(f_light)(jnp.stack([s, s])),
                    jax.grad(f_light)(s))

        with jax.checking_leaks():
            out = jax.jit(transformed, compiler_options=COMPILER_OPTIONS)(jnp.ones(()))
            return (*out, jax.pmap(f_light)(jnp.ones(jax.local_device_count())))

    ours, theirs = attempt_both(lambda: run(d), lambda: run(upstream))
    if same_outcome("closure", d, "values of the closure under jit, vmap, grad and pmap",
                    ours, theirs) and theirs.ok:
        for label, got, want in zip(("values read inside jit", "jit of the closure",
                                     "vmap of the closure", "grad of the closure",
                                     "pmap of the closure"), ours.value, theirs.value):
            _assert_close("closure", d, label, got, want, exact=False)
    for name, cached in CACHE.values_of(d).items():
        if any(isinstance(x, Tracer) for x in jax.tree_util.tree_leaves(cached)):
            raise _fail("closure", d, f"the cache holds a tracer for {name!r}")
    for name, v in vars(d).items():
        if any(isinstance(x, Tracer) for x in jax.tree_util.tree_leaves(v)):
            raise _fail("closure", d, f"attribute {name!r} holds a tracer")
    after = attempt(lambda: _read(d, names, methods, value))
    if same_outcome("closure", d, "eager values after the transformations", after, before):
        # to rounding: a value first read in the trace may be hoisted (a compiled program)
        _assert_close("closure", d, "eager values after the transformations", after.value,
                      before.value, exact=False)
    COVERAGE.record("closure", d)


# ---------------------------------------------------------------------------------------------
# Hoisting: lazy values first read inside a transformation.
# ---------------------------------------------------------------------------------------------

HOISTING_TRANSFORMS: tuple[str, ...] = ("jit", "vmap", "grad", "scan", "pmap", "shard_map")


def _eager_lazies(d: Any) -> dict[str, Any]:
    """The array-valued lazy values of ``d`` that read eagerly without error."""
    return reference(d, value=jnp.zeros(())).lazies


def _first_read(transform: str, d: Any, names: tuple[str, ...]) -> dict[str, Any]:
    """``d``'s lazy values, read for the first time inside ``transform`` (``d`` is closed
    over: its leaves are concrete); what the transformed function returns, unbatched."""

    def read(s: jax.Array) -> tuple[jax.Array, dict[str, Any]]:
        return s, {n: getattr(d, n) for n in names}

    ndev = jax.device_count()
    with jax.checking_leaks():
        if transform == "jit":
            return jax.jit(read, compiler_options=COMPILER_OPTIONS)(jnp.zeros(()))[1]
        if transform == "vmap":
            out = jax.vmap(read)(jnp.zeros(2))[1]
        elif transform == "grad":
            return jax.grad(lambda s: (s, read(s)[1]), has_aux=True)(jnp.zeros(()))[1]
        elif transform == "scan":
            out = jax.lax.scan(lambda c, s: (c, read(s)[1]), 0, jnp.zeros(1))[1]
        elif transform == "pmap":
            out = jax.pmap(read)(jnp.zeros(ndev))[1]
        elif transform == "shard_map":
            mesh = jax.sharding.Mesh(np.array(jax.devices()), ("i",))
            body = jax.shard_map(lambda s: jax.tree_util.tree_map(
                lambda x: jnp.asarray(x)[None], read(s[0])[1]), mesh=mesh,
                in_specs=PartitionSpec("i"), out_specs=PartitionSpec("i"))
            out = jax.jit(body, compiler_options=COMPILER_OPTIONS)(jnp.zeros(ndev))
        else:
            raise ValueError(f"unknown transformation {transform!r}; choose from "
                             f"{HOISTING_TRANSFORMS}")
    return jax.tree_util.tree_map(lambda x: x[0], out)


def _compiled_hoists(d: Any, names: set[str]) -> set[str]:
    """Which of ``d``'s lazy values ``names`` a staging trace hoists with a compiled program."""
    leaves, treedef = jax.tree_util.tree_flatten(d)
    out = set()
    for n in names:
        prop = lazy_property_of(class_attribute(type(d), n))
        compute = getattr(prop, "wrapped", None)
        if compute is not None and decide(d, n, compute, leaves, treedef).mode == "program":
            out.add(n)
    return out


def check_hoisting(make: Callable[[], Any], upstream: Callable[[], Any] | None = None,
                   transforms: Sequence[str] = HOISTING_TRANSFORMS) -> None:
    """Check that lazy values first read inside a transformation are numpyro's.

    A *fresh* instance (from ``make``) whose lazy values are first read inside each of
    ``transforms`` gives numpyro's values: bit for bit numpyro's *eager* value for every
    value it cached under ``grad``/``vmap`` (computed eagerly, as numpyro does), numpyro's
    eager value up to compiled-kernel rounding for a value a staging transformation hoisted
    with a compiled program (`stabledist._src.lazy.hoisting`; on an accelerator short values are
    hoisted op by op: bit for bit), and,
    inside ``jit``, numpyro's value read inside ``jit`` for every other one (computed in the
    trace, the same program as numpyro's; under the other transformations those are
    compared with the eager values by `check_vmap`, `check_pmap`, ...).

    The instance is closed over, so its leaves are concrete inside the transformation.
    ``upstream`` builds the numpyro instance with the same parameters (default: the numpyro
    twin of a ``make()``). Each transformation gets its own fresh instances, so no eager
    read has filled the cache before.
    """
    build_twin = upstream if upstream is not None else (lambda: destabilize(make()))
    want = _eager_lazies(build_twin())
    names = tuple(sorted(want))
    d = None
    for transform in transforms:
        if transform in ("pmap", "shard_map") and jax.device_count() < 2:
            continue
        d = make()
        got = _first_read(transform, d, names)
        hoisted = set(CACHE.values_of(d)) - set(CACHE.given(d))
        traced = tuple(n for n in names if n not in hoisted and n not in CACHE.given(d))
        expected = {n: want[n] for n in names if n not in traced}
        if transform != "jit":  # computed in the trace: check_vmap, check_pmap, ... compare
            names_checked = tuple(n for n in names if n not in traced)  # those with eager ones
        else:  # the same program as numpyro's: the same bits
            names_checked = names
            if traced:
                expected.update(_first_read(transform, build_twin(), traced))
        # under grad/vmap alone nothing is hoisted: cached values are computed eagerly
        compiled = set() if transform in ("grad", "vmap") else _compiled_hoists(d, hoisted)
        label = (f"lazy values first read inside {transform} (cached: {sorted(hoisted)}, "
                 f"of which by a compiled program: {sorted(compiled)}; computed in the "
                 f"trace: {list(traced)})")
        _assert_close("hoisting", d, label,
                      {n: got[n] for n in names_checked if n not in compiled},
                      {n: expected[n] for n in names_checked if n not in compiled}, exact=True)
        _assert_close("hoisting", d, label, {n: got[n] for n in sorted(compiled)},
                      {n: expected[n] for n in sorted(compiled)}, exact=False)
    if d is None:
        raise StabilityError("[hoisting] no transformation ran")
    COVERAGE.record("hoisting", d)
