"""The registry of stability properties: name -> how `check_stable` runs it on one example.

A property exists only as an entry here, and `check_stable` runs exactly the entries; an
entry whose runner returns without its check recording the class in `COVERAGE` makes
`check_stable` fail ("ran no check"), so no property can pass without running.
Hypothesis-free (random access plans are handed in by `check_stable`).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import jax

from stabledist.testing._closed_over import check_closure, check_hoisting
from stabledist.testing._parametrizations import check_parametrizations, parametrizations
from stabledist.testing._plans import AccessPlan, check_access_plan, full_plan
from stabledist.testing._process import check_hash_seed, check_release, check_threads
from stabledist.testing._transforms import (
    check_control_flow,
    check_jit,
    check_pmap,
    check_round_trip,
    check_shard_map,
    check_vmap,
)
from stabledist.testing._upstream import check_tree_map, check_upstream

__all__ = ["PROPERTIES", "Example", "Property"]


@dataclass(frozen=True)
class Example:
    """One example a property runs on, and what the runners need besides the instance."""

    d: Any
    """An instance."""
    make: Callable[[], Any]
    """A new instance with the same parameters (nothing read yet)."""
    upstream: Callable[[], Any]
    """The instance with the same parameters in the class's numpyro twin (numpyro's class, or
    the user's body on numpyro's base); without a twin, a fresh stable instance."""
    sent: Any
    """What the hash-seed workers rebuild: a `DistSpec`, a module-level factory or `None`
    (then the instance is pickled)."""
    kwargs: dict[str, Any] | None = None
    """The constructor arguments, when known (a `DistSpec`'s); else read from the instance."""
    key: jax.Array = field(default_factory=lambda: jax.random.PRNGKey(0))
    plans: Callable[[Any], list[AccessPlan]] = lambda d: []
    """Random access plans for an instance (drawn by `check_stable`)."""
    cycles: int = 1_000
    n_threads: int = 4


@dataclass(frozen=True)
class Property:
    """A stability property: its one-line statement and how to run it on an `Example`."""

    name: str
    summary: str
    run: Callable[[Example], None]
    devices: int = 1
    """Devices it needs (`pmap`, `shard_map`: at least 2)."""
    applies: Callable[[type], str | None] = lambda cls: None
    """Why it does not apply to a class (``None``: it applies)."""
    compares_with_numpyro: bool = False
    """Whether it states nothing but agreement with numpyro: left out for a class that has
    no numpyro twin (the other properties then compare with a fresh stable instance)."""


def _access_plan(x: Example) -> None:
    check_access_plan(x.make(), full_plan(x.d), x.key, x.upstream())
    for plan in x.plans(x.d):
        check_access_plan(x.make(), plan, x.key, x.upstream())


def _ndev() -> int:
    return jax.device_count()


def _no_alternatives(cls: type) -> str | None:
    if parametrizations(cls):
        return None
    return f"{cls.__name__} has fewer than two alternative parametrizations"


_ALL = (
    Property("access_plan", "tree structure, leaf shapes/dtypes and `vars()` unchanged by any "
             "access plan; every read gives numpyro's value", _access_plan),
    Property("round_trip", "flatten -> unflatten gives the same leaves, and numpyro's "
             "`log_prob` and `sample` after its own round trip",
             lambda x: check_round_trip(x.d, x.key, x.upstream())),
    Property("control_flow", "a `lax.scan` carry, `while_loop` state and both branches of "
             "`lax.cond`, rebuilt and read inside: numpyro's values",
             lambda x: check_control_flow(x.d, upstream=x.upstream())),
    Property("jit", "through `jit` as argument and as return value: numpyro's values",
             lambda x: check_jit(x.d, upstream=x.upstream())),
    Property("vmap", "`vmap` over a stacked batch of instances: numpyro's values",
             lambda x: check_vmap([x.make(), x.make()], x.key,
                                  upstreams=[x.upstream(), x.upstream()])),
    Property("pmap", "`pmap` over a stacked batch, one instance per device",
             lambda x: check_pmap([x.make() for _ in range(_ndev())], x.key,
                                  upstreams=[x.upstream() for _ in range(_ndev())]),
             devices=2),
    Property("shard_map", "`shard_map` over a stacked batch on a 1-d mesh of all devices",
             lambda x: check_shard_map([x.make() for _ in range(_ndev())], x.key,
                                       upstreams=[x.upstream() for _ in range(_ndev())]),
             devices=2),
    Property("closure", "closed over by `jit`, `vmap`, `pmap` and `grad`, then used eagerly: "
             "no leaked tracer, numpyro's values",
             lambda x: check_closure(x.make(), upstream=x.upstream())),
    Property("hoisting", "a fresh instance's lazy values first read inside `jit`, `vmap`, "
             "`grad`, `scan`, `pmap` and `shard_map` equal numpyro's eager values (bit for "
             "bit, or to rounding where a compiled program hoisted them)",
             lambda x: check_hoisting(x.make, x.upstream)),
    Property("parametrizations", "every alternative constructor keyword gives one tree "
             "structure; instances built through them stack, scan and cond together",
             lambda x: check_parametrizations(x.d, x.kwargs), applies=_no_alternatives),
    Property("tree_map", "after a `tree_map` update every lazy value agrees with numpyro's "
             "class rebuilt from the new leaves", lambda x: check_tree_map(x.d, x.upstream())),
    Property("upstream", "same numbers as numpyro for the same parameters and key",
             lambda x: check_upstream(x.d, x.upstream(), x.key), compares_with_numpyro=True),
    Property("hash_seed", "same leaf order in processes started with other `PYTHONHASHSEED` "
             "values", lambda x: check_hash_seed(x.d, x.sent)),
    Property("release", "cache entries are released with the instance",
             lambda x: check_release(x.make, x.cycles)),
    Property("threads", "threads reading one shared instance get identical values, "
             "numpyro's, each computed once",
             lambda x: check_threads(x.make, x.n_threads, x.upstream)),
)

PROPERTIES: dict[str, Property] = {p.name: p for p in _ALL}
"""Every stability property by name, in the order `check_stable` runs them."""
