"""`distribution`: a distribution's lazy values timed with stabledist and with numpyro. The
jitted function closing over a fresh instance is a global prior's use: numpyro computes the
value in every call, stabledist once, outside. numpyro's instance is stabledist's twin
(`stabledist.testing.destabilize`): a user's subclass is compared with its own body on numpyro.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from typing import Any

import jax
import jax.numpy as jnp

from stabledist._src.lazy import CACHE, lazy_names
from stabledist.benchmark._measure import (
    Case,
    Timed,
    call_timer,
    count_equations,
    measure,
    no_gc,
    stmt_timer,
)
from stabledist.benchmark._report import LazyRead, Report, new_report
from stabledist.benchmark._rows import single

__all__ = ["distribution"]

SITUATIONS = {
    "first read": ("eager reads", "ns/read"),
    "cache hit": ("eager reads", "ns/read"),
    "per call, closed over": ("a jitted function closing over a fresh instance", "ns/call"),
}
"""The situations measured per lazy value: the group of rows each is shown in, its unit."""


def distribution(target: Any, *args: Any, names: Sequence[str] | None = None,
                 reps: int = 10, rep_ms: float = 20.0, **kwargs: Any) -> Report:
    """Time the lazy values of one distribution with stabledist and with numpyro.

    ``target`` is a stabledist distribution (or an instance of a user's subclass of one), or
    such a class, built as ``target(*args, **kwargs)``. ``names`` picks lazy values (default:
    every lazy property of the class). Each situation (first read, cache hit, per call of a
    jitted function closing over a fresh instance) is measured in ``reps`` interleaved
    repetitions of about ``rep_ms`` milliseconds per library; a row's ratio is numpyro's time
    over stabledist's with the 95% interval of the paired repetitions."""
    from stabledist.testing import destabilize

    d = _instance(target, args, kwargs)
    chosen = list(names) if names is not None else list(lazy_names(d))
    if unknown := sorted(set(chosen) - set(lazy_names(d))):
        raise ValueError(f"{type(d).__qualname__} has no lazy value named {unknown}; its lazy "
                         f"values are {list(lazy_names(d))}")
    owner, twin = type(d).__qualname__, destabilize(d)
    report = new_report(f"lazy values of {owner}", kind="distribution")
    for name in chosen:
        report.progress(f"{owner}.{name}")
        for situation, case in _cases(d, twin, name, reps, rep_ms):
            group, unit = SITUATIONS[situation]
            report.add(case, single(group, case, unit, label=case.name, judged=True))
        equations = report.cases[-1].params["equations"]
        report.reads.append(LazyRead(owner, name, equations["numpyro"], equations["stabledist"]))
    return report


def _instance(target: Any, args: tuple, kwargs: dict) -> Any:
    import numpyro.distributions as nd

    import stabledist

    d = target(*args, **kwargs) if isinstance(target, type) else target
    if not isinstance(d, nd.Distribution):
        raise TypeError(f"stabledist.benchmark.distribution times a distribution, not "
                        f"{type(d).__qualname__}")
    if not stabledist.is_stable(type(d)):
        raise TypeError(f"{type(d).__qualname__} is numpyro's class: pass stabledist's "
                        f"(stabledist.{type(d).__name__}), your subclass of it, or "
                        "stabledist.make_stable(YourClass); numpyro's is measured beside it")
    if not isinstance(target, type) and (args or kwargs):
        raise TypeError("arguments are for a class; an instance is measured as it is")
    return d


def _fresh(template: Any) -> Any:
    """A new instance with ``template``'s state and nothing read (numpyro: ``__dict__``
    copied; stabledist: also the values its constructor gave the cache)."""
    cls: Any = type(template)
    copy = cls.__new__(cls)
    copy.__dict__.update(template.__dict__)
    for name, value in CACHE.given(template).items():
        CACHE.give(copy, name, value)
    return copy


def _first_read_timer(template: Any, name: str,
                      compute: Callable[[Any], Any] | None = None) -> Timed:
    """The first read of ``name`` on ``number`` fresh copies of ``template``; with
    ``compute`` (the no-cache baseline), ``compute`` applied to each copy instead."""
    def run(number: int) -> int:
        copies = [_fresh(template) for _ in range(number)]
        with no_gc():
            t0 = time.perf_counter_ns()
            values = ([getattr(c, name) for c in copies] if compute is None
                      else list(map(compute, copies)))
            jax.block_until_ready(values)
            return time.perf_counter_ns() - t0

    return run


def _use(value: Any, x: jax.Array) -> jax.Array:
    """A scalar that needs every entry of ``value`` (so the program cannot skip it)."""
    total = x
    for leaf in jax.tree_util.tree_leaves(value):
        leaf = jnp.asarray(leaf)
        if jnp.issubdtype(leaf.dtype, jnp.inexact) or jnp.issubdtype(leaf.dtype, jnp.integer):
            total = total + jnp.sum(leaf).astype(total.dtype)
    return total


def _closed_over(template: Any, name: str) -> tuple[Callable[[], Any], int]:
    """A compiled call of a function closing over a fresh instance, and the equations the
    value's computation adds to it (those beyond the program of the value as a constant)."""
    d = _fresh(template)
    x = jnp.zeros((), jnp.float32)

    def program(x: jax.Array) -> jax.Array:
        return _use(getattr(d, name), x)

    compiled = jax.jit(program).lower(x).compile()
    constant = getattr(_fresh(template), name)  # read eagerly: the program of a constant
    baseline = count_equations(jax.make_jaxpr(lambda x: _use(constant, x))(x).jaxpr)
    equations = count_equations(jax.make_jaxpr(program)(x).jaxpr) - baseline
    return (lambda: compiled(x)), equations


def _cases(d: Any, twin: Any, name: str, reps: int, rep_ms: float) -> list[tuple[str, Case]]:
    both = {"numpyro": _fresh(twin), "stabledist": _fresh(d)}  # nothing read: pristine
    first = {lib: _first_read_timer(x, name) for lib, x in both.items()}
    samples, loops = measure(first, reps, rep_ms, 20_000)
    cases = [("first read", Case(f"{name}: first read", {}, samples, loops))]
    read = {lib: _fresh(x) for lib, x in both.items()}
    for x in read.values():
        getattr(x, name)
    hits = {lib: stmt_timer(f"d.{name}", {"d": x}) for lib, x in read.items()}
    samples, loops = measure(hits, reps, rep_ms)
    cases.append(("cache hit", Case(f"{name}: cache hit", {}, samples, loops)))
    calls, equations = {}, {}
    for lib, x in both.items():
        call, equations[lib] = _closed_over(x, name)
        calls[lib] = call_timer(call)
    samples, loops = measure(calls, reps, rep_ms, 100_000)
    cases.append(("per call, closed over", Case(f"{name}: per call", {"equations": equations},
                                                samples, loops)))
    return cases
