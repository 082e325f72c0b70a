"""The fresh-process half of the ``scale`` benchmark: memory per live instance, generation-2
collections in round trips and create/drop cycles, and the cache's and hoisting's tables.

Why a fresh process per library: process memory (RSS) and the garbage collector's state
(which generation holds how many objects, when the next full collection is due) depend on
everything a process did before; each library gets the same clean start
(`benchmarks.bench_scale.child_cases` runs `run` once per library).
"""

from __future__ import annotations

import gc
import sys
import time
import tracemalloc
from collections.abc import Callable, Iterator
from contextlib import contextmanager, suppress
from functools import partial
from typing import Any

from benchmarks.bench_memory import rss_mb
from benchmarks.child import library

PART = "scale-child part done:"
"""The line each part ends with on stderr, read by the parent for its progress steps."""
PARTS = {"fresh": "round trips right after the import", "cycles": "gen-2 collections in "
         "round trips and create/drop cycles", "heap": "a full collection over live instances",
         "memory": "memory per live instance", "tables": "the cache's and hoisting's tables"}
"""The parts, in the order they run, and what each measures (the progress lines)."""

ROUND_TRIPS = 8
"""Round trips right after the import (1,000 distributions, eight in a row)."""
STEADY_TRIPS = 40
"""Round trips per size from a full collection on: enough for the collections both libraries
pay at the same rate to show as a rate, not as where one happened to land."""
COLLECTS = 5
"""Full collections timed over each live heap (the median is the measure)."""
CYCLES = 2
"""Create/drop cycles per size."""


class GcWatch:
    """Every collection of the garbage collector while `active`: generation and duration,
    attributed to the `label` set when it ran (collections without a label are dropped)."""

    def __init__(self) -> None:
        self.label: str | None = None
        self.records: dict[str, list[tuple[int, float]]] = {}
        self._t0 = 0.0

    def _callback(self, phase: str, info: dict[str, Any]) -> None:
        if phase == "start":
            self._t0 = time.perf_counter()
        elif self.label is not None:
            ms = (time.perf_counter() - self._t0) * 1e3
            self.records.setdefault(self.label, []).append((info["generation"], ms))

    @contextmanager
    def active(self) -> Iterator[GcWatch]:
        gc.callbacks.append(self._callback)
        try:
            yield self
        finally:
            gc.callbacks.remove(self._callback)

    def summary(self, label: str) -> dict[str, float]:
        """Collections of generation 2 under ``label``: count, total and largest ms; and
        how many collections of any generation."""
        full = [ms for g, ms in self.records.get(label, []) if g == 2]
        return {"gen2": len(full), "gen2_ms": sum(full), "gen2_max_ms": max(full, default=0.0),
                "collections": len(self.records.get(label, []))}

    def during(self, work: Callable[[], Any]) -> dict[str, float]:
        """`summary` of the collections while ``work()`` runs, and its seconds."""
        with self.active():
            self.label, t0 = "during", time.perf_counter()
            try:
                work()
            finally:
                self.label = None
            seconds = time.perf_counter() - t0
        counts = self.summary("during")
        self.records.clear()
        return {**counts, "seconds": seconds}


def _mixed(m: Any, n: int) -> list[Any]:
    """Issue 45's probe: half ``MultivariateNormal`` with ``precision_matrix`` read, half
    ``Normal``."""
    import jax.numpy as jnp
    import numpy as np

    a = np.random.default_rng(0).standard_normal((4, 4)).astype(np.float32)
    cov = jnp.asarray(a @ a.T / 4 + np.eye(4, dtype=np.float32))
    loc, out = jnp.zeros(4), []
    for i in range(n):
        if i % 2 == 0:
            d = m.MultivariateNormal(loc, covariance_matrix=cov)
            d.precision_matrix  # noqa: B018 - the read is the point
        else:
            d = m.Normal(jnp.float32(i), 1.0)
        out.append(d)
    return out


def _round_trips(tree: list[Any], rounds: int = ROUND_TRIPS) -> list[float]:
    import jax

    times = []
    for _ in range(rounds):
        t0 = time.perf_counter()
        leaves, treedef = jax.tree_util.tree_flatten(tree)
        jax.tree_util.tree_unflatten(treedef, leaves)
        times.append((time.perf_counter() - t0) * 1e3)
    return times


def fresh_round_trips(m: Any) -> tuple[dict[str, Any], list[Any]]:
    """The probe as a user meets it, first thing after the import: build 1,000, then eight
    round trips. Whether a full collection lands here depends on how much the import left
    pending (informative: see the page). Also returns the tree, for `steady_cycles`."""
    watch, times = GcWatch(), []
    tree = _mixed(m, 1000)
    counts = watch.during(lambda: times.extend(_round_trips(tree)))
    return {**counts, "round_trip_ms": times}, tree


def steady_cycles(m: Any, sizes: list[int], tree: list[Any]) -> dict[str, dict[str, float]]:
    """From a full collection on: `STEADY_TRIPS` round trips of ``tree`` (the probe's 1,000),
    two create/drop cycles of each size (each instance's values read), then as many round
    trips of each larger size; generation-2 collections counted during each."""
    watch, out = GcWatch(), {}
    gc.collect()
    out[f"{STEADY_TRIPS} round trips of {len(tree):,}"] = watch.during(
        lambda: _round_trips(tree, STEADY_TRIPS))
    tree.clear()  # the caller's list: its distributions dropped
    for n in sizes:
        def cycles(n: int = n) -> None:
            for _ in range(CYCLES):
                made = _mixed(m, n)
                del made
        out[f"{CYCLES} create/drop cycles of {n:,}"] = watch.during(cycles)
    for n in (n for n in sizes if n > 1000):
        big = _mixed(m, n)
        gc.collect()
        out[f"{STEADY_TRIPS} round trips of {n:,}"] = watch.during(
            lambda big=big: _round_trips(big, STEADY_TRIPS))
        del big
    return out


def full_collections(m: Any, sizes: list[int]) -> dict[str, float]:
    """The median ms of a full collection (``gc.collect()``) over a live heap of ``n``
    instances (issue 45's mix), per size: the floor both libraries' collections share."""
    out = {}
    for n in sizes:
        live = _mixed(m, n)
        gc.collect()
        times = []
        for _ in range(COLLECTS):
            t0 = time.perf_counter()
            gc.collect()
            times.append((time.perf_counter() - t0) * 1e3)
        out[f"{n:,}"] = sorted(times)[len(times) // 2]
        del live
    return out


def _mvn_with_values(m: Any, n: int) -> list[Any]:
    """``n`` live ``MultivariateNormal`` (dim 4, from ``scale_tril``), two lazy values
    read: ``covariance_matrix`` and ``precision_matrix``."""
    import jax.numpy as jnp
    import numpy as np

    a = np.random.default_rng(1).standard_normal((4, 4)).astype(np.float32)
    tril = jnp.asarray(np.linalg.cholesky(a @ a.T / 4 + np.eye(4, dtype=np.float32)))
    loc, out = jnp.zeros(4), []
    for _ in range(n):  # argument checks off: the same in both, and seconds at this size
        d = m.MultivariateNormal(loc, scale_tril=tril, validate_args=False)
        d.covariance_matrix  # noqa: B018
        d.precision_matrix  # noqa: B018
        out.append(d)
    return out


TRACED = 1000
"""Instances per tracemalloc measure: its count is exact at any size, and it slows every
allocation several-fold."""


def memory(m: Any, n: int, info: Callable[[], Any]) -> dict[str, Any]:
    """Per live instance: RSS and gc-tracked objects (the first ``n`` of the process), and
    tracemalloc twice (`TRACED` instances); after each drop, what tracemalloc still holds."""
    _mvn_with_values(m, 100)  # eager kernels compiled, allocator warm
    gc.collect()
    rss0 = rss_mb()
    live = _mvn_with_values(m, n)
    gc.collect()
    rss_per = (rss_mb() - rss0) * 2**20 / n
    objects = len(gc.get_objects())
    del live
    gc.collect()
    objects_per = (objects - len(gc.get_objects())) / n
    rss_after = rss_mb() - rss0
    traced, kept, k = [], [], min(n, TRACED)
    for _ in range(2):
        tracemalloc.start()
        base = tracemalloc.get_traced_memory()[0]
        live = _mvn_with_values(m, k)
        gc.collect()
        traced.append((tracemalloc.get_traced_memory()[0] - base) / k)
        del live
        gc.collect()
        kept.append((tracemalloc.get_traced_memory()[0] - base) / k)
        tracemalloc.stop()
    return {"n": n, "traced_n": k, "rss_per": rss_per, "rss_after_drop_mb": rss_after,
            "traced_per": traced, "kept": kept, "objects_per": objects_per,
            "cache_after_drop": list(info())}


def internal_tables() -> dict[str, int]:
    """Entries in stabledist's own tables (the one place this benchmark reads internals):
    the cache's, hoisting's and batching's."""
    from stabledist._src.lazy import hoisting
    from stabledist._src.lazy.cache import CACHE
    from stabledist._src.pytrees import batching

    memos = (hoisting._decisions, hoisting._programs, hoisting._unprogrammable)
    return {"owners": len(CACHE._owners), "values": sum(map(len, CACHE._tables.values())),
            "value_tables": len(CACHE._tables), "holders": len(CACHE._holding),
            "hoisting_entries": sum(len(m) for table in memos for m in table.values()),
            "batch_shape_entries": sum(map(len, batching._derived_shapes.values()))}


def tables(shapes: int, classes: int | None) -> dict[str, Any]:
    """The tables after many short-lived instances (what the other measures left), after
    ``shapes`` distinct batch sizes traced (half, then all), and after the catalog's lazy
    values were read on ``classes`` examples."""
    import jax
    import jax.numpy as jnp

    import stabledist as sd
    from stabledist._src.lazy.introspect import lazy_names
    from stabledist.testing import catalog

    out: dict[str, Any] = {"after_instances": internal_tables()}

    def trace(batch: int) -> None:
        d = sd.TruncatedNormal(jnp.zeros(batch), 1.0, low=-1.0, high=2.0)
        e = sd.MultivariateNormal(jnp.zeros((batch, 2)), jnp.eye(2))
        jax.jit(lambda x: d.log_prob(x) + (e.precision_matrix @ x[:2]).sum()).trace(
            jnp.zeros(batch))

    half = max(shapes // 2, 1)
    for batch in range(2, half + 2):
        trace(batch)
    out["after_half_shapes"] = {"shapes": half, **internal_tables()}
    for batch in range(half + 2, shapes + 2):
        trace(batch)
    out["after_shapes"] = {"shapes": shapes, **internal_tables()}
    examples = catalog.all_builders()[:classes]
    for _, build in examples:
        d = build(sd)
        for name in lazy_names(type(d)):
            with suppress(Exception):  # a value undefined for this example: skipped
                getattr(d, name)
        del d
    gc.collect()
    out["after_classes"] = {"classes": len(examples), **internal_tables()}
    return out


def run(module: str, args: dict[str, Any]) -> dict[str, Any]:
    t0 = time.perf_counter()
    m, info = library(module)
    seconds = {"import": time.perf_counter() - t0}
    out: dict[str, Any] = {"module": module, "seconds_per_part": seconds}

    def part(name: str, work: Callable[[], Any]) -> Any:
        t = time.perf_counter()
        value = work()
        seconds[name] = time.perf_counter() - t
        print(f"{PART} {name}", file=sys.stderr, flush=True)  # the parent's progress
        return value

    out["fresh"], tree = part("fresh", lambda: fresh_round_trips(m))
    out["cycles"] = part("cycles", partial(steady_cycles, m, args["cycles"], tree))
    out["cache_after_cycles"] = list(info())
    out["heap"] = part("heap", partial(full_collections, m, args["cycles"]))
    out["memory"] = part("memory", lambda: memory(m, args["memory"], info))
    if module == "stabledist":
        out["tables"] = part("tables", lambda: tables(args["shapes"], args["classes"]))
    out["seconds"] = time.perf_counter() - t0
    return out
