"""The transformation checks: an instance through a pytree round trip, control flow (`scan`,
`while_loop`, `cond`), `jit`, `vmap`, `pmap` and `shard_map`, passed to the transformation as
an argument (the instance closed over is `_closed_over`'s, its alternative parametrizations
`_parametrizations`'s). Hypothesis-free.

Every check runs the very same program on numpyro's instance with the same parameters (its
``upstream`` argument; by default the numpyro twin of the stable instance) and compares
outcomes (`same_outcome`): where numpyro returns, stabledist returns the same numbers; where
numpyro raises, stabledist raises the same exception type. Eager values are compared bit for
bit. Compiled values are compared to rounding (`RTOL`): an instance passed in gives numpyro's
very jaxpr (``tests/test_parity.py`` compares them), but its inputs in another order, and XLA
may round a program differently when only the order of its parameters differs - numpyro's own
``jit(lambda d, v: (d, d.log_prob(v), d.log_prob(x)))`` of a ``GaussianCopulaBeta`` gives
``-0.07742774`` or ``-0.07742798`` depending on ``PYTHONHASHSEED``, which orders its leaves.
Values for ``log_prob`` are passed as users write them (Python numbers, NumPy arrays), closed
over by the traced function, and as traced arguments.

Traced functions are compiled with `xla_backend_optimization_level=0` (`COMPILER_OPTIONS`): these
properties are about structure and tracing, and unoptimised compiles are 2-3x faster. The ``jit``,
``vmap`` and ``pmap`` programs take and return distributions as their leaves in field-name
order (`_same_program`), so a stable instance's program and its numpyro twin's are one program:
with JAX's persistent compilation cache set up, the second is read from it, not compiled again.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
import numpyro.distributions as nd
from jax.sharding import PartitionSpec
from jax.tree_util import FlattenedIndexKey, GetAttrKey, SequenceKey

from stabledist._src.lazy import lazy_names
from stabledist.testing._compare import (
    COMPILER_OPTIONS,
    COVERAGE,
    TRACED_METHODS,
    Outcome,
    Reference,
    _assert_close,
    _assert_same_leaves,
    _fail,
    _read,
    _rebuild,
    _scalar,
    attempt,
    attempt_both,
    destabilize,
    reference,
    same_outcome,
    stack,
    valid_value,
)
from stabledist.testing._spec import user_value

__all__ = [
    "check_control_flow",
    "check_jit",
    "check_pmap",
    "check_round_trip",
    "check_shard_map",
    "check_vmap",
]


# ---------------------------------------------------------------------------------------------
# One program for a stable instance and its numpyro twin.
# ---------------------------------------------------------------------------------------------


def _leaf_names(d: Any) -> list[str]:
    """A name for each leaf of ``d`` (``.base_dist.loc``), the same for a stable instance and its
    numpyro twin: numpyro's own classes flatten without key paths, in the order of a set, so
    their leaves are named by the field at each index (a nested pytree that is not a
    distribution, such as a transform, keeps JAX's path below it)."""
    names = []
    for path, _ in jax.tree_util.tree_flatten_with_path(d)[0]:
        obj, parts = d, []
        for i, k in enumerate(path):
            if isinstance(obj, nd.Distribution) and isinstance(k, GetAttrKey | FlattenedIndexKey):
                fields = type(obj).gather_pytree_data_fields()
                name = k.name if isinstance(k, GetAttrKey) else (
                    fields[k.key] if k.key < len(fields) else f"#{k.key}")
                parts.append(f".{name}")
                obj = vars(obj).get(name)
            elif isinstance(obj, list | tuple) and isinstance(k, SequenceKey):
                parts.append(f"[{k.idx}]")
                obj = obj[k.idx]
            else:
                parts.append(jax.tree_util.keystr(path[i:]))
                break
        names.append("".join(parts))
    return names


def _field_order(d: Any) -> tuple[int, ...]:
    """Flattened positions of ``d``'s leaves sorted by name (flatten order if names repeat)."""
    names = _leaf_names(d)
    if len(set(names)) < len(names):
        return tuple(range(len(names)))
    return tuple(sorted(range(len(names)), key=names.__getitem__))


class _Fields(tuple):
    """A distribution's leaves in field-name order, as a program's argument or result."""


jax.tree_util.register_pytree_node(_Fields, lambda f: (tuple(f), None),
                                   lambda _, children: _Fields(children))


def _is_distribution(x: Any) -> bool:
    return isinstance(x, nd.Distribution)


def _pack(tree: Any, record: list[tuple[Any, tuple[int, ...]]]) -> Any:
    """``tree`` with each distribution replaced by its `_Fields`; ``record`` gets each one's
    tree structure and field order, in tree order."""

    def one(x: Any) -> Any:
        if not _is_distribution(x):
            return x
        leaves, treedef = jax.tree_util.tree_flatten(x)
        order = _field_order(x)
        record.append((treedef, order))
        return _Fields(leaves[i] for i in order)

    return jax.tree_util.tree_map(one, tree, is_leaf=_is_distribution)


def _unpack(tree: Any, record: list[tuple[Any, tuple[int, ...]]]) -> Any:
    """The inverse of `_pack`, with its ``record``."""
    pending = iter(record)

    def one(x: Any) -> Any:
        if not isinstance(x, _Fields):
            return x
        treedef, order = next(pending)
        leaves: list[Any] = [None] * len(order)
        for position, i in enumerate(order):
            leaves[i] = x[position]
        return jax.tree_util.tree_unflatten(treedef, leaves)

    return jax.tree_util.tree_map(one, tree, is_leaf=lambda x: isinstance(x, _Fields))


def _same_program(transform: Callable[[Callable[..., Any]], Any], body: Callable[..., Any],
                  *args: Any) -> Any:
    """``transform(body)(*args)``, every distribution among the arguments and in the result
    passed as its leaves in field-name order: a stable instance's program is numpyro's up to
    the order of its inputs (``tests/test_parity.py``), so the two are one program, compiled
    once where JAX's persistent compilation cache is set up. An instance crosses the boundary
    as it does through ``transform`` itself: flattened outside, unflattened inside from the
    traced leaves, and the result's the other way round. ``transform`` is ``jax.jit`` or
    ``jax.pmap`` with its options; the program is lowered, compiled and called."""
    record_in: list[tuple[Any, tuple[int, ...]]] = []
    record_out: list[tuple[Any, tuple[int, ...]]] = []
    packed = _pack(args, record_in)

    def program(*fields: Any) -> Any:
        record_out.clear()
        return _pack(body(*_unpack(fields, record_in)), record_out)

    compiled = transform(program).lower(*packed).compile()
    return _unpack(compiled(*packed), record_out)


def _jit(f: Callable[..., Any]) -> Any:
    return jax.jit(f, compiler_options=COMPILER_OPTIONS)



def check_round_trip(d: Any, key: jax.Array | None = None, upstream: Any | None = None) -> None:
    """Check that ``d`` survives a ``tree_flatten`` / ``tree_unflatten`` round trip.

    ``tree_unflatten(tree_flatten(d))`` has identical leaves, and its ``log_prob`` and
    ``sample`` are those of numpyro's instance after numpyro's own round trip."""
    key = jax.random.PRNGKey(1) if key is None else key
    upstream = destabilize(d) if upstream is None else upstream
    leaves, treedef = jax.tree_util.tree_flatten(d)
    e = jax.tree_util.tree_unflatten(treedef, leaves)
    if type(e) is not type(d):
        raise _fail("round_trip", d, f"unflatten gave a {type(e).__name__}")
    _assert_same_leaves("round_trip", d, e, "round trip")
    dropped = sorted(set(vars(d)) - set(vars(e)) - set(lazy_names(d)))
    if dropped:  # what numpyro's unflatten drops too, silently: the classic own-class mistake
        raise _fail("round_trip", d, f"tree_unflatten drops attribute(s) {dropped}: they are "
                    "not pytree fields, so jit, vmap, scan, ... lose them; declare them in "
                    "arg_constraints or pytree_data_fields (arrays, distributions) or "
                    "pytree_aux_fields (static values)")
    for a, b in zip(leaves, jax.tree_util.tree_leaves(e)):
        if a is not b:
            raise _fail("round_trip", d, "unflatten copied a leaf instead of keeping it")
    theirs = attempt(lambda: _rebuild(upstream))
    if same_outcome("round_trip", d, "tree_unflatten", Outcome(e), theirs):
        twin = theirs.value if theirs.ok else upstream
        value = user_value(valid_value(upstream, key))
        reads = {"sample": lambda x: x.sample(key), "log_prob": lambda x: x.log_prob(value)}
        for label, read in reads.items():
            if label == "log_prob" and value is None:
                continue
            ours, want = attempt(lambda r=read: r(e)), attempt(lambda r=read: r(twin))
            if same_outcome("round_trip", d, f"{label} after a round trip", ours, want):
                _assert_close("round_trip", d, f"{label} after a round trip", ours.value,
                              want.value, exact=True)
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




# not `_same_program`: the instance itself is the carry, state and operand under test, and
# those primitives take its leaves in its own flatten order
_control_flow_jit = jax.jit(_control_flow, static_argnames=("names",),
                            compiler_options=COMPILER_OPTIONS)


def check_control_flow(d: Any, ref: Reference | None = None,
                       upstream: Any | None = None) -> None:
    """Check ``d`` through ``scan``, ``while_loop`` and ``cond``.

    ``d`` as a ``scan`` carry, ``while_loop`` state and ``cond`` operand (through each
    branch), rebuilt and its lazy values read inside each body; what comes out equals what
    went in, and the values read are those of numpyro's instance through the same program,
    bit for bit."""
    ref = reference(d) if ref is None else ref
    upstream = destabilize(d) if upstream is None else upstream

    def run(x: Any) -> Any:
        with jax.checking_leaks():
            return _control_flow_jit(x, names=ref.names)

    ours, theirs = attempt_both(lambda: run(d), lambda: run(upstream))
    if same_outcome("control_flow", d, "scan/while_loop/cond program", ours, theirs):
        d_scan, read_scan, d_while, total, d_cond, read_cond, d_cond2, read_cond2 = ours.value
        for label, dd in (("scan carry", d_scan), ("while_loop state", d_while),
                          ("cond operand", d_cond),
                          ("cond operand (branches swapped)", d_cond2)):
            _assert_same_leaves("control_flow", d, dd, label)
        if theirs.ok:
            want = theirs.value
            for label, got, at in (("values read in scan", read_scan, 1),
                                   ("values read in while_loop", total, 3),
                                   ("values read in cond", read_cond, 5),
                                   ("values read in cond (branches swapped)", read_cond2, 7)):
                _assert_close("control_flow", d, label, got, want[at], exact=False)
    COVERAGE.record("control_flow", d)


def _jit_probe(d: Any, value: Any, names: tuple[str, ...], methods: tuple[str, ...]) -> Any:
    return d, _read(d, names, methods, value)


def _unflatten(treedef: Any, leaves: Any) -> Any:
    return jax.tree_util.tree_unflatten(treedef, leaves)


_unflatten_jit = jax.jit(_unflatten, static_argnums=0, compiler_options=COMPILER_OPTIONS)


def check_jit(d: Any, ref: Reference | None = None, upstream: Any | None = None) -> None:
    """Check ``d`` passed into ``jit`` as an argument and out as a return value.

    ``d`` into ``jit`` as an argument (its lazy values, ``mean``, ``variance`` and
    ``log_prob`` of a value written as a user writes it read inside) and out as a return
    value (also one built inside from leaves): numpyro's values through the same program, bit
    for bit, and the instances coming out have ``d``'s leaves."""
    ref = reference(d) if ref is None else ref
    upstream = destabilize(d) if upstream is None else upstream
    host = user_value(ref.value)  # closed over, as in `jit(lambda d: d.log_prob(0.5))`
    by_user = ("log_prob",) if "log_prob" in ref.methods else ()

    def probe(y: Any, value: Any) -> Any:
        y, got = _jit_probe(y, value, ref.names, ref.methods)  # a traced value
        return y, (got, _read(y, (), by_user, host))

    def run(x: Any) -> Any:
        with jax.checking_leaks():
            out, got = _same_program(_jit, probe, x, ref.value)
        return out, got, _read(out, ref.names, ref.methods, host)

    ours, theirs = attempt_both(lambda: run(d), lambda: run(upstream))
    if same_outcome("jit", d, "values read inside jit", ours, theirs):
        d_out, got, after = ours.value
        _assert_same_leaves("jit", d, d_out, "returned argument")
        with jax.checking_leaks():
            leaves, treedef = jax.tree_util.tree_flatten(d)
            built = _unflatten_jit(treedef, leaves)
        _assert_same_leaves("jit", d, built, "instance built inside jit")
        if theirs.ok:
            _assert_close("jit", d, "values read inside jit", got, theirs.value[1], exact=False)
            _assert_close("jit", d, "values read from the returned instance", after,
                          theirs.value[2], exact=True)
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


def _stacked_values(refs: Sequence[Reference]) -> Any:
    return stack([r.value if r.value is not None else jnp.zeros(()) for r in refs])


def _leak_checked(transform: Callable[[Callable[..., Any]], Any], names: tuple[str, ...],
                  methods: tuple[str, ...]) -> Callable[[Any, Any], Any]:
    """``(stacked instances, stacked values) -> (instances, values read)`` through
    ``transform`` of `_jit_probe`, under ``checking_leaks``."""

    def body(batched: Any, values: Any) -> Any:
        return _jit_probe(batched, values, names, methods)

    def probe(batched: Any, values: Any) -> Any:
        with jax.checking_leaks():
            return _same_program(transform, body, batched, values)

    return probe


def _check_batched(what: str, ds: Sequence[Any], upstreams: Sequence[Any] | None,
                   refs: Sequence[Reference], probe: Callable[[Any, Any], Any]) -> None:
    """``probe(stacked instances, stacked values)`` on ``ds`` and on numpyro's instances
    (``upstreams``, default the twins of ``ds``): the same outcome, the same values bit for
    bit, and each instance coming out has the leaves of the one that went in."""
    twins = [destabilize(d) for d in ds] if upstreams is None else list(upstreams)
    values = _stacked_values(refs)
    ours, theirs = attempt_both(lambda: probe(stack(ds), values),
                                lambda: probe(stack(twins), values))
    if same_outcome(what, ds[0], f"values read inside {what}", ours, theirs):
        out_d, got = ours.value
        for i, d in enumerate(ds):
            d_i = jax.tree_util.tree_map(lambda x, i=i: x[i], out_d)
            _assert_same_leaves(what, d, d_i, f"instance {i} coming out")
        if theirs.ok:
            _assert_close(what, ds[0], f"values read inside {what}", got, theirs.value[1],
                          exact=False)


def _vmap_jit(f: Callable[..., Any]) -> Any:
    return _jit(jax.vmap(f))


def check_vmap(ds: Sequence[Any], key: jax.Array | None = None,
               traced: Sequence[str] = TRACED_METHODS,
               upstreams: Sequence[Any] | None = None) -> None:
    """Check ``vmap`` over the stack of ``ds`` against numpyro's instances.

    ``vmap`` over the stack of ``ds`` (same structure) reads each instance's values: those
    of numpyro's instances (``upstreams``) through the same program."""
    refs, names, methods = _common_reference(ds, key, traced)
    _check_batched("vmap", ds, upstreams, refs, _leak_checked(_vmap_jit, names, methods))
    COVERAGE.record("vmap", ds[0])




def check_pmap(ds: Sequence[Any], key: jax.Array | None = None,
               traced: Sequence[str] = TRACED_METHODS,
               upstreams: Sequence[Any] | None = None) -> None:
    """``pmap`` over the stack of ``len(ds) == jax.device_count()`` instances."""
    _require_devices(len(ds))
    refs, names, methods = _common_reference(ds, key, traced)
    _check_batched("pmap", ds, upstreams, refs, _leak_checked(jax.pmap, names, methods))
    COVERAGE.record("pmap", ds[0])


def _require_devices(n: int) -> None:
    if jax.device_count() != n:
        raise ValueError(
            f"need one instance per device: got {n} instances and {jax.device_count()} devices "
            "(set XLA_FLAGS=--xla_force_host_platform_device_count=N before importing jax)"
        )


_shard_map_cache: dict[int, Callable[..., Any]] = {}


def _shard_map_fn(n: int) -> Callable[..., Any]:
    """`_jit_probe` of each device's instance inside ``shard_map`` on a 1-d mesh of ``n``
    devices, jitted. Not `_same_program`: ``shard_map`` takes the instance's leaves in its own
    flatten order, so a stable instance and its numpyro twin give two programs anyway."""
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
                    traced: Sequence[str] = TRACED_METHODS,
                    upstreams: Sequence[Any] | None = None) -> None:
    """``shard_map`` over the stack of one instance per device, on a 1-d mesh."""
    _require_devices(len(ds))
    refs, names, methods = _common_reference(ds, key, traced)
    mesh = _shard_map_fn(len(ds))

    def probe(batched: Any, values: Any) -> Any:
        with jax.checking_leaks():
            return mesh(batched, values, names, methods)

    _check_batched("shard_map", ds, upstreams, refs, probe)
    COVERAGE.record("shard_map", ds[0])
