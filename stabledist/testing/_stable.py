"""`check_stable`: every registered property (`PROPERTIES`) on a user's distribution, with
hypothesis drawing examples and access plans."""

from __future__ import annotations

import contextlib
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any, cast

import jax
import numpyro.distributions as nd
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from stabledist.testing._compare import COVERAGE, StabilityError, _rebuild, destabilize
from stabledist.testing._plans import AccessPlan
from stabledist.testing._registry import PROPERTIES, Example
from stabledist.testing._spec import DistSpec
from stabledist.testing._strategies import access_plans

__all__ = ["StabilityReport", "check_stable"]


@dataclass
class StabilityReport:
    """What `check_stable` ran, returned when every property passed.

    ``passed``: property -> number of examples it passed on; ``skipped``: the properties it
    did not run, with the reason."""

    passed: dict[str, int] = field(default_factory=dict)
    skipped: dict[str, str] = field(default_factory=dict)

    def __str__(self) -> str:
        lines = [f"  {p}: passed on {n} example(s)" for p, n in self.passed.items()]
        lines += [f"  {p}: not run ({why})" for p, why in self.skipped.items()]
        return "stability report\n" + "\n".join(lines)


StabilityReport.__module__ = "stabledist.testing"  # where users import it from


def check_stable(
    factory: Any,
    *,
    properties: Iterable[str] = tuple(PROPERTIES),
    max_examples: int = 5,
    cycles: int = 1_000,
    n_threads: int = 4,
    plan_steps: int = 12,
    key: jax.Array | None = None,
) -> StabilityReport:
    """Run the stability properties on a distribution and report what it passed.

    Raises `StabilityError` (an `AssertionError`) with every failing property's message, or
    returns a `StabilityReport`.

    Args:
        factory: what to test. Either a zero-argument callable returning a new instance
            with the same parameters on each call (define it at module level so that the
            `hash_seed` property can send it to other processes), or a hypothesis strategy of
            instances or of `DistSpec` (then each property runs on up to `max_examples` drawn
            examples, and failures are shrunk).
        properties: names from `PROPERTIES` to run (default: all, in registry order).
        max_examples: examples per property for a strategy; random access plans per instance.
        cycles: create/access/drop cycles of the `release` property.
        n_threads: concurrent readers of the `threads` property.
        plan_steps: longest random access plan of the `access_plan` property.
        key: PRNG key for samples and `log_prob` points (default `PRNGKey(0)`).

    Properties that need several devices (`pmap`, `shard_map`) and properties that do not
    apply to the class (`parametrizations` of a class with one parametrization) are reported
    in `StabilityReport.skipped` with the reason, never as passed. A property passes only if
    its check ran to completion on every example.
    """
    props = tuple(properties)
    unknown = sorted(set(props) - set(PROPERTIES))
    if unknown:
        raise ValueError(f"unknown properties {unknown}; choose from {tuple(PROPERTIES)}")
    if isinstance(factory, nd.Distribution):
        raise TypeError(f"check_stable takes a factory, not an instance: pass "
                        f"`lambda: {type(factory).__name__}(...)` (a new instance per call) or "
                        "a hypothesis strategy")
    if not _factory_or_strategy(factory):
        raise TypeError(f"check_stable takes a zero-argument factory or a hypothesis "
                        f"strategy, got {type(factory).__name__}")
    key = jax.random.PRNGKey(0) if key is None else key
    report = StabilityReport()
    failures: list[str] = []
    is_strategy = isinstance(factory, st.SearchStrategy)

    def plans(d: Any) -> list[AccessPlan]:
        found: list[AccessPlan] = []

        @settings(max_examples=max_examples, database=None, deadline=None,
                  suppress_health_check=cast(Any, list(HealthCheck)))
        @given(access_plans(d, max_steps=plan_steps))
        def pick(plan: AccessPlan) -> None:
            found.append(plan)

        pick()
        return found

    def example(drawn: Any, data: Any = None) -> Example:
        # under a strategy's @given, plans are drawn from its data (no nested @given)
        drawn_plans = plans if data is None else (
            lambda d: [data.draw(access_plans(d, max_steps=plan_steps), label="plan")])
        common = {"key": key, "plans": drawn_plans, "cycles": cycles, "n_threads": n_threads}
        if isinstance(drawn, DistSpec):
            return Example(drawn.build(), drawn.build, lambda: drawn.build(nd), drawn,
                           kwargs=None if drawn.catalog_id else drawn.kwargs(), **common)
        if is_strategy:  # a drawn instance: new ones are rebuilt from its leaves
            return Example(drawn, lambda: _rebuild(drawn),
                           lambda: destabilize(_rebuild(drawn)), None, **common)
        return Example(drawn, factory, lambda: destabilize(factory()), factory, **common)

    def run(name: str, x: Example) -> None:
        mark = len(COVERAGE.events)
        PROPERTIES[name].run(x)
        if (name, type(x.d).__name__) not in COVERAGE.since(mark):
            raise StabilityError(f"[{name}] ran no check on {type(x.d).__name__}")

    def run_strategy(name: str) -> int:
        count = [0]
        not_applicable: list[str] = []

        @settings(max_examples=max_examples, database=None, deadline=None,
                  suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
        @given(factory, st.data())
        def each(drawn: Any, data: Any) -> None:
            spec = isinstance(drawn, DistSpec)
            with drawn.x64_context() if spec else contextlib.nullcontext():
                x = example(drawn, data)
                why = PROPERTIES[name].applies(type(x.d))
                if why:
                    not_applicable.append(why)
                    return
                run(name, x)
            count[0] += 1

        each()
        if not count[0] and not_applicable:
            raise _NotApplicable(not_applicable[0])
        return count[0]

    first: Any = None
    for name in props:
        prop = PROPERTIES[name]
        if jax.device_count() < prop.devices:
            report.skipped[name] = (f"{jax.device_count()} device; set XLA_FLAGS="
                                    "--xla_force_host_platform_device_count=4")
            continue
        try:
            if not is_strategy:
                first = factory() if first is None else first
                why = prop.applies(type(first))
                if why:
                    report.skipped[name] = why
                    continue
                run(name, example(factory()))
                report.passed[name] = 1
            else:
                report.passed[name] = run_strategy(name)
        except _NotApplicable as e:
            report.skipped[name] = str(e)
        except AssertionError as e:
            failures.append(f"{name}: {e}")
        except Exception as e:
            failures.append(f"{name}: {type(e).__name__}: {e}")
    if failures:
        raise StabilityError(
            f"{len(failures)} stability propert{'y' if len(failures) == 1 else 'ies'} failed:"
            "\n\n" + "\n\n".join(failures)
        )
    return report


def _factory_or_strategy(value: Any) -> bool:
    return callable(value) or isinstance(value, st.SearchStrategy)


class _NotApplicable(Exception):  # noqa: N818 - internal control flow, not an error
    """A property that does not apply to any drawn example's class."""
