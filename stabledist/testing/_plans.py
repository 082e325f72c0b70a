"""Access plans: sequences of reads of a distribution (every lazy property, `mean`, `variance`,
`log_prob`, `sample`, `cdf`, `icdf`, `entropy`, `enumerate_support`, `expand`, `to_event`,
`mask`), and `check_access_plan`, which says that no plan changes the instance. Hypothesis-free;
the strategy `access_plans` that draws plans is in `stabledist.testing` (it needs hypothesis).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

import jax
import jax.numpy as jnp
import numpyro.distributions as nd

import stabledist
from stabledist._src.lazy import is_numpyro_class, lazy_names
from stabledist.testing._compare import (
    COVERAGE,
    UNSUPPORTED,
    Outcome,
    _assert_close,
    _fail,
    _vars_snapshot,
    attempt,
    destabilize,
    layout,
    same_outcome,
    valid_value,
)
from stabledist.testing._spec import user_value

__all__ = ["AccessPlan", "Step", "check_access_plan", "full_plan", "run_step"]


@dataclass(frozen=True)
class Step:
    """One access: ``kind`` is ``lazy`` (read property ``arg``) or a method name."""

    kind: str
    arg: Any = None

    def __repr__(self) -> str:
        if self.kind == "lazy":
            return f".{self.arg}"
        if self.kind in ("mean", "variance"):
            return f".{self.kind}"
        if self.arg is None:
            return f".{self.kind}()"
        return f".{self.kind}({self.arg!r})"


@dataclass(frozen=True)
class AccessPlan:
    """A sequence of accesses to one distribution; prints as ``d.a .b() ...``."""

    steps: tuple[Step, ...] = field(default_factory=tuple)

    def _repr_pretty_(self, printer: Any, cycle: bool) -> None:
        printer.text(repr(self))

    def __repr__(self) -> str:
        return "AccessPlan(d" + " ".join(repr(s) for s in self.steps) + ")" if self.steps \
            else "AccessPlan(<nothing>)"

    def run(self, d: Any, key: jax.Array | None = None,
            tolerate_errors: bool = True) -> list[tuple[Step, str]]:
        """Run every step on ``d`` and return each step with its outcome.

        Returns ``(step, outcome)`` pairs with outcome ``ok``, ``unsupported: <Error>`` or
        (with ``tolerate_errors``) ``error: <Error>``.

        Errors are tolerated by default because numpyro itself raises for some parameter
        combinations (`check_access_plan` checks that stabledist raises exactly where
        numpyro does); what an access plan checks is that the instance does not change.
        ``AssertionError`` (a derived distribution that is not stable) always propagates."""
        outcomes: list[tuple[Step, str]] = []
        for step, outcome in self.results(d, key):
            error = outcome.error
            if error is None:
                outcomes.append((step, "ok"))
            elif isinstance(error, UNSUPPORTED):
                outcomes.append((step, f"unsupported: {type(error).__name__}"))
            elif isinstance(error, AssertionError) or not tolerate_errors:
                raise error
            else:  # numpyro's own errors (it raises them too)
                outcomes.append((step, f"error: {type(error).__name__}: {error}"[:200]))
        return outcomes

    def results(self, d: Any, key: jax.Array | None = None,
                value: Any = None) -> list[tuple[Step, Outcome]]:
        """Run every step on ``d`` and return what each returned or raised.

        ``log_prob`` and ``cdf`` are evaluated at ``value`` (default: a point of ``d``'s
        support, passed as a user writes it: a Python number or a NumPy array)."""
        key = jax.random.PRNGKey(0) if key is None else key
        results: list[tuple[Step, Outcome]] = []
        for i, step in enumerate(self.steps):
            k = jax.random.fold_in(key, i)

            def one(step: Step = step, k: jax.Array = k) -> Any:
                nonlocal value
                if step.kind in ("log_prob", "cdf") and value is None:
                    value = user_value(valid_value(d, key))
                    if value is None:
                        raise NotImplementedError("no valid value")
                return run_step(d, step, k, value)

            results.append((step, attempt(one)))
        return results


def run_step(d: Any, step: Step, key: jax.Array, value: Any) -> Any:
    """Perform one :class:`Step` on ``d`` and return its result."""
    kind = step.kind
    if kind == "lazy":
        return getattr(d, step.arg)
    if kind in ("mean", "variance"):
        return getattr(d, kind)
    if kind == "entropy":
        return d.entropy()
    if kind == "sample":
        return d.sample(key, step.arg)
    if kind == "log_prob":
        return d.log_prob(value)
    if kind == "cdf":
        return d.cdf(value)
    if kind == "icdf":
        return d.icdf(jnp.full(d.batch_shape, step.arg, dtype=jnp.result_type(float)))
    if kind == "enumerate_support":
        if not d.has_enumerate_support:
            raise NotImplementedError("no enumerate_support")
        return d.enumerate_support(expand=step.arg)
    if kind == "expand":
        return _checked_derived(d, d.expand(tuple(step.arg) + tuple(d.batch_shape)))
    if kind == "to_event":
        return _checked_derived(d, d.to_event(min(step.arg, len(d.batch_shape))))
    if kind == "mask":
        mask: Any = step.arg if isinstance(step.arg, bool) else (
            jnp.arange(math.prod(d.batch_shape)).reshape(d.batch_shape) % 2 == 0
        )
        return _checked_derived(d, d.mask(mask))
    raise ValueError(f"unknown step {step!r}")  # pragma: no cover


def _assert_step_close(d: Any, step: Step, ours: Any, theirs: Any) -> None:
    if isinstance(theirs, nd.Distribution):  # a derived distribution: its shapes and numbers
        for attr in ("batch_shape", "event_shape"):
            if getattr(ours, attr) != getattr(theirs, attr):
                raise _fail("access_plan", d, f"{step!r}: {attr} {getattr(ours, attr)}, "
                                              f"numpyro {getattr(theirs, attr)}")
        ours, theirs = attempt(lambda: ours.mean), attempt(lambda: theirs.mean)
        if not (ours.ok and theirs.ok):
            return
        ours, theirs = ours.value, theirs.value
    _assert_close("access_plan", d, repr(step), ours, theirs, exact=True)


def _checked_derived(d: Any, derived: Any) -> Any:
    """A distribution derived from a stable one must be stable too (and readable)."""
    if stabledist.is_stable(d) and not stabledist.is_stable(derived):
        raise AssertionError(f"{type(derived).__name__} derived from a stable distribution "
                             "is not stable")
    return derived


def full_plan(d: Any) -> AccessPlan:
    """Return the deterministic access plan that `check_stable` runs before random ones.

    Every lazy property of ``d``, then every method once."""
    steps = [Step("lazy", n) for n in lazy_names(d)]
    steps += [Step("mean"), Step("variance"), Step("entropy"), Step("log_prob"), Step("cdf"),
              Step("sample", ()), Step("icdf", 0.5), Step("enumerate_support", True),
              Step("expand", (2,)), Step("to_event", 1), Step("mask", "array"),
              Step("mask", False)]
    return AccessPlan(tuple(steps))


def check_access_plan(d: Any, plan: AccessPlan, key: jax.Array | None = None,
                      upstream: Any | None = None) -> None:
    """Check that ``plan`` changes nothing in ``d`` and that every step gives numpyro's result.

    Structure, leaf shapes/dtypes and ``vars()`` (recursively) unchanged by ``plan``, and
    every step gives what it gives on numpyro's instance ``upstream`` (default: ``d``'s
    numpyro twin): the same values bit for bit, or the same exception type. A ``vars()``
    change fails with the fix for ``d``'s class (a ``lazy_property``, ``make_stable``, or
    stabledist's class for numpyro's own)."""
    upstream = destabilize(d) if upstream is None else upstream
    before, state = layout(d), _vars_snapshot(d)
    keys_before = list(vars(d))
    value = user_value(valid_value(upstream, jax.random.PRNGKey(0) if key is None else key))
    results = plan.results(d, key, value)
    for (step, ours), (_, theirs) in zip(results, plan.results(upstream, key, value)):
        if same_outcome("access_plan", d, f"{step!r} in {plan!r}", ours, theirs) and theirs.ok:
            _assert_step_close(d, step, ours.value, theirs.value)
    outcomes = [("ok" if o.ok else type(o.error).__name__) for _, o in results]
    after = layout(d)
    detail = f"after {plan!r} (outcomes {outcomes})"
    if before[0] != after[0]:
        raise _fail("access_plan", d, f"tree structure changed {detail}:\n    {before[0]}\n"
                                      f" -> {after[0]}")
    if before[1] != after[1]:
        raise _fail("access_plan", d, f"leaves changed {detail}:\n    {before[1]}\n"
                                      f" -> {after[1]}")
    if list(vars(d)) != keys_before or _vars_snapshot(d) != state:
        added = sorted(set(vars(d)) - set(keys_before))
        raise _fail("access_plan", d, f"vars() changed {detail}; new attributes: {added}\n"
                                      f"  fix: {_cache_fix(type(d))}")
    COVERAGE.record("access_plan", d)


def _cache_fix(cls: type) -> str:
    """How to cache a value without writing the instance, for the class at hand: a value
    stored on ``self`` changes the pytree and holds tracers, so say what to write instead."""
    name = cls.__name__
    if is_numpyro_class(cls):
        return (f"this is numpyro's own {name}, whose lazy_property caches in __dict__: build "
                f"it with stabledist, `stabledist.{name}(...)`")
    fix = ("compute the value in a `lazy_property` (numpyro's "
           "`numpyro.distributions.util.lazy_property` or `stabledist.cached_lazy_property`) "
           "instead of storing it on `self`: on a stable class stabledist keeps it in its "
           "external cache, outside vars()")
    if not stabledist.is_stable(cls):
        fix += (f"; {name} is not stable: wrap it, `{name} = stabledist.make_stable({name})`, "
                "or derive it from a stabledist class")
    return fix
