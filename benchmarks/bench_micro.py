"""Micro-benchmarks: lazy property reads, pytree flatten/unflatten, jitted dispatch."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from functools import partial
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
from numpyro.distributions.util import lazy_property

from benchmarks.common import (
    MODULES,
    is_stable_lazy,
    lazy_names,
    quiet,
    recompute_fn,
    spd,
    unchecked,
)
from benchmarks.config import Profile
from stabledist import make_stable
from stabledist._src.lazy.cache import CACHE
from stabledist.benchmark._lazy_values import _first_read_timer, _fresh
from stabledist.benchmark._measure import (
    TRACKER,
    BenchResult,
    Case,
    host_device_split,
    measure,
    step,
    stmt_timer,
)
from stabledist.testing import catalog

Builder = Callable[[Any], Any]


@dataclass(frozen=True)
class LazyPair:
    """A (class, lazy property) whose value the example's constructor leaves uncomputed."""

    builder_id: str
    cls: str
    prop: str
    build: Builder


def discover_lazy_pairs(limit: int | None = None, per_class: int | None = None
                        ) -> tuple[list[LazyPair], dict[str, str]]:
    """Every (class, lazy property) of the catalog that is really lazy in its example (the
    first example per pair; at most ``limit``, at most ``per_class`` per class), and the
    skipped ones with the reason."""
    pairs: list[LazyPair] = []
    per: dict[str, int] = {}
    skipped: dict[str, str] = {}
    seen: set[tuple[str, str]] = set()
    for builder_id, build in catalog.all_builders():
        if limit is not None and len(pairs) >= limit:
            break
        with unchecked():
            dn, ds = build(MODULES["numpyro"]), build(MODULES["stabledist"])
        cls = type(ds)
        for name in lazy_names(cls):
            key = (cls.__name__, name)
            label = f"{builder_id}:{name}"
            if key in seen or not is_stable_lazy(cls, name):
                continue
            if per_class is not None and per.get(cls.__name__, 0) >= per_class:
                continue
            if name in dn.__dict__ or name in ds.__dict__:
                skipped[label] = "an instance attribute in this example (set by the constructor)"
                continue
            if name in CACHE.values_of(ds):
                skipped[label] = "computed by the constructor in this example"
                continue
            if not name.isidentifier():  # pragma: no cover - numpyro names are identifiers
                skipped[label] = "not an identifier"
                continue
            try:
                with unchecked():
                    jax.block_until_ready(getattr(_fresh(dn), name))
                    jax.block_until_ready(getattr(_fresh(ds), name))
            except Exception as err:
                skipped[label] = f"reading it raises {type(err).__name__}: {err}"[:200]
                continue
            seen.add(key)
            per[cls.__name__] = per.get(cls.__name__, 0) + 1
            pairs.append(LazyPair(builder_id, cls.__name__, name, build))
    return pairs[:limit], skipped


def _bare_getter() -> Any:
    """An instance whose ``value`` is a property with stabledist's hit path and nothing
    else (a subscript of a table keyed by ``id``, a ``KeyError`` for a miss): timed beside
    every hit, it is the floor the hit guard judges against, on this machine's Python."""
    values: dict[int, Any] = {}

    def read(instance: Any) -> Any:
        try:
            return values[id(instance)]
        except KeyError:
            raise AttributeError("value") from None

    bare = type("BareGetter", (), {"value": property(read)})()
    values[id(bare)] = 0.0
    return bare


BARE_GETTER = _bare_getter()


def discovery_weight(profile: Profile) -> int:
    """The progress steps finding the pairs counts for: about twice the time of measuring
    them all (each example's first reads compile its eager operations)."""
    return 2 * (profile.lazy_limit or 85)


def lazy_steps(profile: Profile) -> int:
    """Progress steps: finding the pairs (`discovery_weight`), the trivial first read, the
    first-read row, one per pair."""
    return discovery_weight(profile) + 2 + (profile.lazy_limit or 85)


LAZY_VARIANTS = {
    "numpyro": "numpyro.distributions instance (lazy_property: value stored in __dict__)",
    "stabledist": "stabledist instance (value in the external weak-key cache)",
    "nocache": "the property's own function called on every read (stabledist instance; "
    "lazy values that function reads itself come from the cache)",
    "plain": "plain instance-attribute read (d._batch_shape), hit rows only",
    "getter": "a bare Python property getter doing one subscript by id, as a hit does "
    "(the floor of any value kept out of __dict__), hit rows only",
}

LAZY_NOCACHE = (
    "miss: the wrapped function of the lazy property applied to a fresh copy (compute "
    "only, no cache bookkeeping); hit: the same function called on every read of an "
    "instance, i.e. what a read costs without any cache"
)


class _Trivial(MODULES["numpyro"].Normal):
    """A lazy value that costs nothing to compute: its first read is the cache's own cost."""

    @lazy_property
    def trivial(self) -> float:
        return 1.0


_StableTrivial = make_stable(_Trivial)

TRIVIAL = (
    "first read, trivial value: a lazy property returning a constant (a numpyro `Normal` "
    "subclass and its `make_stable` twin), read once on each of many fresh instances, "
    "interleaved; the difference of medians is what the cache adds to a first read"
)


def _first_read_case(profile: Profile) -> Case:
    """The first read of a trivial lazy value: numpyro's ``__dict__`` store against the
    external cache's bookkeeping."""
    tn, ts = _Trivial(0.0, 1.0), _StableTrivial(0.0, 1.0)
    timers = {"numpyro": _first_read_timer(tn, "trivial"),
              "stabledist": _first_read_timer(ts, "trivial"),
              "nocache": _first_read_timer(ts, "trivial", _Trivial.trivial.wrapped)}
    with quiet():
        samples, loops = measure(timers, profile.reps, profile.rep_ms, 20_000)
    return Case("first read, trivial value", {"kind": "first", "class": "Normal subclass",
                                              "property": "trivial"}, samples, loops)


def bench_lazy(profile: Profile) -> BenchResult:
    """First read (miss) and repeated read (hit) of every lazy property, eagerly; and the
    first read of a trivial value (the cache's own cost)."""
    result = BenchResult(name="lazy", title="Lazy property read, eager (outside jit)",
                         unit="ns/read", variants=LAZY_VARIANTS, nocache=LAZY_NOCACHE)
    step("lazy: finding the lazy properties of every catalog example (first reads "
         "compile the eager ops)", weight=discovery_weight(profile))
    pairs, skipped = discover_lazy_pairs(profile.lazy_limit, profile.lazy_per_class)
    result.extra.update(skipped=skipped, pairs=len(pairs), classes=len({p.cls for p in pairs}),
                        limited_to=profile.lazy_limit, per_class=profile.lazy_per_class)
    TRACKER.resize("lazy", discovery_weight(profile) + 2 + len(pairs))
    step("lazy: first read of a trivial lazy value")
    result.cases.append(_first_read_case(profile))
    result.extra["first_read"] = TRIVIAL
    nd, sd = MODULES["numpyro"], MODULES["stabledist"]
    for i, pair in enumerate(pairs, start=1):
        step(f"lazy {i}/{len(pairs)}: {pair.cls}.{pair.prop}")
        with unchecked():  # fields held as after the checks, as the floors were measured
            tn, ts = pair.build(nd), pair.build(sd)
            hn, hs = pair.build(nd), pair.build(sd)
        recompute = recompute_fn(type(ts), pair.prop)
        miss = {"numpyro": _first_read_timer(tn, pair.prop),
                "stabledist": _first_read_timer(ts, pair.prop),
                "nocache": _first_read_timer(ts, pair.prop, recompute)}
        with quiet():  # at most 20,000 fresh copies per repetition
            samples, loops = measure(miss, profile.reps, profile.rep_ms, 20_000)
        params = {"class": pair.cls, "property": pair.prop, "example": pair.builder_id}
        result.cases.append(Case(f"miss {pair.cls}.{pair.prop}", {**params, "kind": "miss"},
                                 samples, loops))
        jax.block_until_ready((getattr(hn, pair.prop), getattr(hs, pair.prop)))  # read: hits
        hit = {"numpyro": stmt_timer(f"d.{pair.prop}", {"d": hn}),
               "stabledist": stmt_timer(f"d.{pair.prop}", {"d": hs}),
               "nocache": stmt_timer("block(w(d))", {"block": jax.block_until_ready,
                                                     "w": recompute, "d": hs}),
               "plain": stmt_timer("d._batch_shape", {"d": hs}),
               "getter": stmt_timer("d.value", {"d": BARE_GETTER})}
        with quiet():
            samples, loops = measure(hit, profile.reps, profile.rep_ms)
        result.cases.append(Case(f"hit {pair.cls}.{pair.prop}", {**params, "kind": "hit"},
                                 samples, loops))
    return result


def _flatten_examples(limit: int | None) -> tuple[list[tuple[str, str, Builder]], dict]:
    """The first example of every distribution class whose round trip works in both."""
    out: list[tuple[str, str, Builder]] = []
    skipped: dict[str, str] = {}
    seen: set[str] = set()
    for builder_id, build in catalog.all_builders():
        if limit is not None and len(out) >= limit:
            break
        with unchecked():
            ds, dn = build(MODULES["stabledist"]), build(MODULES["numpyro"])
        cls = type(ds).__name__
        if cls in seen:
            continue
        try:
            for d in (dn, ds):
                leaves, treedef = jax.tree_util.tree_flatten(d)
                jax.tree_util.tree_unflatten(treedef, leaves)
        except Exception as err:
            skipped[builder_id] = f"round trip raises {type(err).__name__}: {err}"[:200]
            continue
        seen.add(cls)
        out.append((builder_id, cls, build))
    return out, skipped


_ROUND_TRIP = "leaves, treedef = flatten(d); unflatten(treedef, leaves)"


def bench_flatten(profile: Profile) -> BenchResult:
    """``jax.tree_util.tree_flatten`` then ``tree_unflatten`` of every distribution class."""
    result = BenchResult(
        name="flatten", unit="ns/round trip",
        title="tree_flatten + tree_unflatten (jax.tree_util) of every distribution class",
        variants={"numpyro": "numpyro.distributions instance",
                  "stabledist": "stabledist instance"},
        nocache="not applicable: no lazy value is involved (fresh instances, nothing read)")
    examples, skipped = _flatten_examples(profile.flatten_limit)
    result.extra["skipped"] = skipped
    TRACKER.resize("flatten", len(examples))
    tu = jax.tree_util
    ns = {"flatten": tu.tree_flatten, "unflatten": tu.tree_unflatten}
    for i, (builder_id, cls, build) in enumerate(examples, start=1):
        step(f"flatten {i}/{len(examples)}: {cls}")
        with unchecked():
            dn, ds = build(MODULES["numpyro"]), build(MODULES["stabledist"])
        fns = {"numpyro": stmt_timer(_ROUND_TRIP, {**ns, "d": dn}),
               "stabledist": stmt_timer(_ROUND_TRIP, {**ns, "d": ds})}
        samples, loops = measure(fns, profile.reps, profile.rep_ms)
        params = {"class": cls, "example": builder_id, "leaves": len(tu.tree_leaves(ds)),
                  "numpyro_leaves": len(tu.tree_leaves(dn))}
        result.cases.append(Case(cls, {**params, "kind": "roundtrip"}, samples, loops))
    return result


def _dispatch_case(name: str) -> tuple[Callable[[Any, tuple], Any], tuple]:
    """``(build(module, params), params)`` for a dispatch case."""
    a = jnp.asarray
    if name == "Normal":
        return lambda m, p: m.Normal(*p), (a([0.0, 1.0, -2.0]), a([1.0, 0.5, 2.0]))
    if name == "MultivariateNormal":
        tril = a(np.linalg.cholesky(spd(8, seed=1)))
        return (lambda m, p: m.MultivariateNormal(p[0], scale_tril=p[1]),
                (a(np.linspace(-1, 1, 8, dtype=np.float32)), tril))
    if name == "TruncatedNormal":
        return (lambda m, p: m.TruncatedNormal(p[0], p[1], low=p[2], high=p[3]),
                (a([0.0, 1.0, -0.5]), a([1.0, 0.5, 2.0]), a([-1.0, 0.0, -2.0]),
                 a([1.5, 2.0, 1.0])))
    if name == "MixtureSameFamily":
        tril = a(np.linalg.cholesky(spd(2, seed=2)))
        return (lambda m, p: m.MixtureSameFamily(m.CategoricalLogits(p[0]),
                                                 m.MultivariateNormal(p[1], scale_tril=p[2])),
                (a([0.0, 1.0, -0.5]), a([[0.0, 0.0], [1.0, 2.0], [-1.0, 0.5]]), tril))
    raise KeyError(f"unknown dispatch case {name!r}")


class BareNode:
    """A pytree node that holds its children and nothing else: what JAX's dispatch costs
    per node of a distribution whatever the library's own flatten does."""

    __slots__ = ("children",)

    def __init__(self, children: tuple[Any, ...]) -> None:
        self.children = children


jax.tree_util.register_pytree_node(BareNode, lambda n: (n.children, None),
                                   lambda _, children: BareNode(tuple(children)))


def bare_nodes(tree: Any) -> tuple[Any, Any]:
    """``tree``'s leaves in `BareNode`s of its very shape (every node, containers too, one
    `BareNode`), and ``tree``'s treedef to rebuild it from them."""
    leaves, treedef = jax.tree_util.tree_flatten(tree)
    rest = iter(leaves)

    def build(node: Any) -> Any:
        if node.num_nodes == 1 and node.num_leaves == 1:
            return next(rest)
        return BareNode(tuple(build(child) for child in node.children()))

    return build(treedef), treedef


def bench_dispatch(profile: Profile) -> BenchResult:
    """Per-call time of ``jit(lambda d, x: d.log_prob(x))(d, x).block_until_ready()``."""
    result = BenchResult(
        name="dispatch", unit="ns/call",
        title="Dispatch of a jitted log_prob taking a distribution vs taking raw arrays",
        variants={
            "numpyro": "jit(lambda d, x: d.log_prob(x)) with a numpyro distribution",
            "stabledist": "the same with a stabledist distribution",
            "raw": "jit(lambda params, x: Dist(*params).log_prob(x)) with the parameter arrays",
            "nodes": "the stabledist distribution's leaves in bare pytree nodes of its shape, "
            "rebuilt inside: JAX's own cost per node, the floor of any library"},
        nocache="not applicable: nothing lazy is read outside the compiled function")
    nd = MODULES["numpyro"]
    for name in profile.dispatch_cases:
        step(f"dispatch: {name}")
        build, params = _dispatch_case(name)
        dn, ds = build(nd, params), build(MODULES["stabledist"], params)
        x = ds.sample(jax.random.PRNGKey(0))
        f_n = jax.jit(lambda d, x: d.log_prob(x))
        f_s = jax.jit(lambda d, x: d.log_prob(x))
        f_r = jax.jit(lambda p, x, build=build: build(nd, p).log_prob(x))
        nodes, treedef = bare_nodes(ds)
        f_b = jax.jit(lambda t, x, treedef=treedef: jax.tree_util.tree_unflatten(
            treedef, jax.tree_util.tree_leaves(t)).log_prob(x))
        calls = {"numpyro": (f_n, dn), "stabledist": (f_s, ds), "raw": (f_r, params),
                 "nodes": (f_b, nodes)}
        outs = [np.asarray(f(d, x)) for f, d in calls.values()]
        agree = all(np.allclose(outs[0], o, rtol=1e-5, atol=1e-5) for o in outs[1:])
        fns = {v: stmt_timer("f(d, x).block_until_ready()", {"f": f, "d": d, "x": x})
               for v, (f, d) in calls.items()}
        samples, loops = measure(fns, profile.reps, profile.rep_ms)
        split = {v: host_device_split(partial(f, d, x), loops[v]) for v, (f, d) in calls.items()}
        result.cases.append(Case(name, {"class": type(ds).__name__, "results_agree": agree,
                                        "leaves": treedef.num_leaves,
                                        "nodes": treedef.num_nodes - treedef.num_leaves,
                                        "raw_arrays": len(params)}, samples, loops,
                                 extra={"host_device": split}))
    return result
