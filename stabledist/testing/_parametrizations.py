"""The check of a class's alternative parametrizations (`parametrizations`,
`check_parametrizations`): every optional constructor keyword that is an alternative
(``MultivariateNormal(covariance_matrix= | precision_matrix= | scale_tril=)``) gives one tree
structure with the same leaf shapes and dtypes, so instances built through different ones
stack, ``scan`` and pass through ``cond`` together, with numpyro's values. Hypothesis-free.

Each instance's eager values are numpyro's bit for bit (those of numpyro's instance built
through the same keyword; without a numpyro twin, the stable class's own); the values read in
the compiled ``scan`` are compared with numpyro's through the same program to rounding
(`RTOL`), compiled with `xla_backend_optimization_level=0` (`COMPILER_OPTIONS`).
"""

from __future__ import annotations

import inspect
from typing import Any

import jax

from stabledist._src.construction import upstream_class
from stabledist.testing._catalog_entries import entry_of
from stabledist.testing._closed_over import _eager_lazies
from stabledist.testing._compare import (
    COMPILER_OPTIONS,
    COVERAGE,
    UNSUPPORTED,
    _assert_close,
    _assert_same_leaves,
    _fail,
    _scalar,
    attempt_both,
    destabilize,
    layout,
    same_outcome,
    stack,
)
from stabledist.testing._twin import twin_or_reason

__all__ = ["check_parametrizations", "parametrizations"]

# ---------------------------------------------------------------------------------------------
# Alternative parametrizations.
# ---------------------------------------------------------------------------------------------


def parametrizations(cls: type) -> tuple[str, ...]:
    """Return the constructor keywords of ``cls`` that are alternative parametrizations.

    Optional (``None`` default) parameters with an ``arg_constraints`` entry, less the ones
    the catalog record of its numpyro class lists as ``not_parametrizations`` (optional, but
    not an alternative: `GaussianStateSpace`'s ``initial_value``). Empty when there are fewer
    than two. The factories (``Categorical(probs= | logits=)``, ...) build different classes
    per keyword, so they have no common tree structure to check."""
    # the class's own constructor and constraints (a user's subclass may add or change
    # them); the exceptions are numpyro's, looked up by the numpyro class it derives from
    constraints = getattr(cls, "arg_constraints", {})
    try:
        params = inspect.signature(cls.__init__).parameters.values()
    except (TypeError, ValueError):  # pragma: no cover - a C-implemented __init__
        return ()
    skip = entry_of(upstream_class(cls).__name__).not_parametrizations
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
    """Check that ``d``'s class has one tree structure for all its parametrizations.

    Every alternative constructor keyword of ``d``'s class (`parametrizations`) gives one
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
    built, theirs = _built_through(d, alternatives, base)
    if len(built) < 2:
        raise _fail("parametrizations", d, f"fewer than two of {alternatives} could be built")
    (first_alt, first), *others = built.items()
    for alt, other in others:
        _assert_same_leaves_layout(d, first, other, f"{cls.__name__}({first_alt}=...) vs "
                                                    f"{cls.__name__}({alt}=...)")
    ds = list(built.values())
    want = [_eager_lazies(x) for x in theirs.values()]  # numpyro's eager values
    for alt, x, w in zip(built, ds, want):
        _assert_close("parametrizations", d, f"values of {cls.__name__}({alt}=...)",
                      {n: getattr(x, n) for n in w}, w, exact=True)
    names = tuple(sorted(set.intersection(*(set(w) for w in want))))

    def flow(xs: list[Any]) -> Any:
        with jax.checking_leaks():
            return _parametrization_flow_jit(stack(xs), xs[0], xs[1], names=names)

    ours, upstream_flow = attempt_both(lambda: flow(ds), lambda: flow(list(theirs.values())))
    if same_outcome("parametrizations", d, "scan and cond over the parametrizations", ours,
                    upstream_flow):
        read, chosen = ours.value
        if upstream_flow.ok:
            _assert_close("parametrizations", d, "values read in scan", read,
                          upstream_flow.value[0], exact=False)
        pred = bool(_scalar(jax.tree_util.tree_leaves(first)) > 0)
        _assert_same_leaves("parametrizations", first if pred else ds[1], chosen, "cond result")
    COVERAGE.record("parametrizations", d)


def _built_through(d: Any, alternatives: tuple[str, ...],
                   base: dict[str, Any]) -> tuple[dict[str, Any], dict[str, Any]]:
    """For each alternative keyword ``d`` can read: ``d``'s class built through it, and its
    numpyro twin built through it (without a twin, the stable class again: its own eager
    values are the reference)."""
    cls = type(d)
    twin, _ = twin_or_reason(cls)
    upstream, convert = (cls, lambda v: v) if twin is None else (twin, destabilize)
    built: dict[str, Any] = {}
    theirs: dict[str, Any] = {}
    for alt in alternatives:
        try:
            value = getattr(d, alt)
        except UNSUPPORTED:
            continue
        built[alt] = cls(**base, **{alt: value})
        theirs[alt] = upstream(**{k: convert(v) for k, v in base.items()}, **{alt: value})
    return built, theirs


def _assert_same_leaves_layout(d: Any, a: Any, b: Any, label: str) -> None:
    la, lb = layout(a), layout(b)
    if la[0] != lb[0]:
        raise _fail("parametrizations", d, f"{label}: tree structures differ:\n    {la[0]}\n"
                                           f" vs {lb[0]}")
    if la[1] != lb[1]:
        raise _fail("parametrizations", d, f"{label}: leaves differ:\n    {la[1]}\n"
                                           f" vs {lb[1]}")
