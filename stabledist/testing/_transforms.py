"""The transformation checks: an instance through a pytree round trip, control flow (`scan`,
`while_loop`, `cond`), `jit`, `vmap`, `pmap`, `shard_map`, closed over by transformations, read
for the first time inside one (`check_hoisting`), and built through each of its class's
alternative parametrizations (`check_parametrizations`). Hypothesis-free.

Traced functions are compiled with `xla_backend_optimization_level=0` (`COMPILER_OPTIONS`): these
properties are about structure and tracing, and unoptimised compiles are 2-3x faster. Values
computed under a transformation are compared with eager values with a small tolerance;
eager-vs-eager comparisons (round trip) are exact.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Sequence
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
from jax.core import Tracer
from jax.sharding import PartitionSpec

from stabledist.cache import CACHE
from stabledist.hoisting import hoisting_mode
from stabledist.introspect import class_attribute, upstream_class
from stabledist.known_classes import NOT_PARAMETRIZATIONS
from stabledist.testing._compare import (
    COMPILER_OPTIONS,
    COVERAGE,
    TRACED_METHODS,
    UNSUPPORTED,
    Reference,
    StabilityError,
    _assert_close,
    _assert_same_leaves,
    _assert_traced_close,
    _fail,
    _Once,
    _read,
    _rebuild,
    _ref_values,
    _scalar,
    destabilize,
    layout,
    reference,
    stack,
    valid_value,
)

__all__ = [
    "HOISTING_TRANSFORMS",
    "check_closure",
    "check_hoisting",
    "check_parametrizations",
    "check_control_flow",
    "check_jit",
    "check_pmap",
    "check_round_trip",
    "check_shard_map",
    "check_vmap",
    "parametrizations",
]


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
        if any(isinstance(x, Tracer) for x in jax.tree_util.tree_leaves(cached)):
            raise _fail("closure", d, f"the cache holds a tracer for {name!r}")
    for name, v in vars(d).items():
        if any(isinstance(x, Tracer) for x in jax.tree_util.tree_leaves(v)):
            raise _fail("closure", d, f"attribute {name!r} holds a tracer")
    _assert_close("closure", d, "eager values after the transformations",
                  _read(d, names, methods, value), want, exact=True)
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
        prop = class_attribute(type(d), n)
        compute = getattr(prop, "wrapped", None)
        if compute is not None and hoisting_mode(d, n, compute, leaves, treedef) == "program":
            out.add(n)
    return out


def check_hoisting(make: Callable[[], Any], upstream: Callable[[], Any] | None = None,
                   transforms: Sequence[str] = HOISTING_TRANSFORMS) -> None:
    """A *fresh* instance (from ``make``) whose lazy values are first read inside each of
    ``transforms`` gives numpyro's values: bit for bit numpyro's *eager* value for every
    value it cached under ``grad``/``vmap`` (computed eagerly, as numpyro does), numpyro's
    eager value up to compiled-kernel rounding for a value a staging transformation hoisted
    with a compiled program (`stabledist.hoisting`; on an accelerator short values are
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
        hoisted = set(CACHE.cached(d)) - set(CACHE.seeded(d))
        traced = tuple(n for n in names if n not in hoisted and n not in CACHE.seeded(d))
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


# ---------------------------------------------------------------------------------------------
# Alternative parametrizations.
# ---------------------------------------------------------------------------------------------


def parametrizations(cls: type) -> tuple[str, ...]:
    """The constructor keywords of ``cls`` that are alternative parametrizations: optional
    (``None`` default) parameters with an ``arg_constraints`` entry, less the ones
    `stabledist.known_classes.NOT_PARAMETRIZATIONS` lists (optional, but not an alternative).
    Empty when there are fewer than two."""
    base = upstream_class(cls)
    constraints = getattr(base, "arg_constraints", {})
    try:
        params = inspect.signature(base.__init__).parameters.values()
    except (TypeError, ValueError):  # pragma: no cover - a C-implemented __init__
        return ()
    skip = NOT_PARAMETRIZATIONS.get(base.__name__, {})
    names = tuple(p.name for p in params
                  if p.default is None and p.name in constraints and p.name not in skip)
    return names if len(names) > 1 else ()


def _parametrization_flow(ds: Any, first: Any, other: Any, names: tuple[str, ...]) -> Any:
    """Read every stacked instance in a ``scan``; choose between two with ``cond``."""
    _, read = jax.lax.scan(lambda c, x: (c, {n: getattr(x, n) for n in names}), 0, ds)
    pred = _scalar(jax.tree_util.tree_leaves(first)) > 0
    chosen = jax.lax.cond(pred, lambda a, b: a, lambda a, b: b, first, other)
    return read, chosen


_parametrization_flow_jit = jax.jit(_parametrization_flow, static_argnames=("names",),
                                    compiler_options=COMPILER_OPTIONS)


def check_parametrizations(d: Any, kwargs: dict[str, Any] | None = None) -> None:
    """Every alternative constructor keyword of ``d``'s class (`parametrizations`) gives one
    tree structure with the same leaf shapes and dtypes, so instances built through different
    ones stack, ``scan`` and pass through ``cond`` together, with their own values.

    The other instances are built with ``kwargs`` (default: read from ``d``'s attributes)
    and, for each alternative, its value as ``d`` reads it (``MultivariateNormal``'s
    ``precision_matrix`` from an instance built with ``scale_tril``).
    """
    cls = type(d)
    alternatives = parametrizations(cls)
    if not alternatives:
        raise ValueError(f"{cls.__name__} has no alternative parametrizations")
    if kwargs is None:
        kwargs = {}
        for p in list(inspect.signature(cls.__init__).parameters.values())[1:]:
            if p.name in alternatives or p.kind in (p.VAR_POSITIONAL, p.VAR_KEYWORD):
                continue
            if p.name in vars(d) or hasattr(d, p.name):
                kwargs[p.name] = getattr(d, p.name)
            elif p.default is inspect.Parameter.empty:
                raise ValueError(f"cannot recover {cls.__name__}'s argument {p.name!r} from "
                                 "the instance: pass kwargs=")
    base = {k: v for k, v in kwargs.items() if k not in alternatives}
    built: dict[str, Any] = {}
    for alt in alternatives:
        try:
            value = getattr(d, alt)
        except UNSUPPORTED:
            continue
        built[alt] = cls(**base, **{alt: value})
    if len(built) < 2:
        raise _fail("parametrizations", d, f"fewer than two of {alternatives} could be built")
    (first_alt, first), *others = built.items()
    for alt, other in others:
        _assert_same_leaves_layout(d, first, other, f"{cls.__name__}({first_alt}=...) vs "
                                                    f"{cls.__name__}({alt}=...)")
    ds = list(built.values())
    want = [_eager_lazies(x) for x in ds]
    names = tuple(sorted(set.intersection(*(set(w) for w in want))))
    with jax.checking_leaks():
        read, chosen = _parametrization_flow_jit(stack(ds), first, ds[1], names=names)
    for i, (alt, w) in enumerate(zip(built, want)):
        got = jax.tree_util.tree_map(lambda x, i=i: x[i], read)
        _assert_close("parametrizations", d, f"values read in scan from {alt}=", got,
                      {n: w[n] for n in names}, exact=False)
    pred = bool(_scalar(jax.tree_util.tree_leaves(first)) > 0)
    _assert_same_leaves("parametrizations", first if pred else ds[1], chosen, "cond result")
    COVERAGE.record("parametrizations", d)


def _assert_same_leaves_layout(d: Any, a: Any, b: Any, label: str) -> None:
    la, lb = layout(a), layout(b)
    if la[0] != lb[0]:
        raise _fail("parametrizations", d, f"{label}: tree structures differ:\n    {la[0]}\n"
                                           f" vs {lb[0]}")
    if la[1] != lb[1]:
        raise _fail("parametrizations", d, f"{label}: leaves differ:\n    {la[1]}\n"
                                           f" vs {lb[1]}")
