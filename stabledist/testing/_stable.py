"""`check_stable`: every registered property (`PROPERTIES`) on a user's distribution, with
hypothesis drawing examples and access plans.

What the values are compared with is decided once per class (`stabledist.testing._twin`): the
class's numpyro twin (numpyro's class for stabledist's own, the wrapped class for
`make_stable`, the class's own body on numpyro's base for a class written on a stable base),
or, when no faithful twin exists, a fresh stabledist instance of the same parameters; then the
numpyro comparisons are left out (the `upstream` property is not run) and the report says so
once. Mistakes in what is passed (a factory that needs arguments, raises, returns one shared
object, or a numpyro-built distribution) are reported once, before or above the properties.
"""

from __future__ import annotations

import contextlib
import functools
import inspect
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any, cast

import jax
import numpyro.distributions as nd
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import stabledist
from stabledist._src.lazy import is_numpyro_class
from stabledist.testing._compare import COVERAGE, StabilityError, _rebuild, destabilize
from stabledist.testing._plans import AccessPlan
from stabledist.testing._registry import PROPERTIES, Example
from stabledist.testing._spec import DistSpec
from stabledist.testing._strategies import access_plans
from stabledist.testing._twin import NoNumpyroTwin, resolution_mismatches, twin_or_reason

__all__ = ["StabilityReport", "check_stable"]


@dataclass
class StabilityReport:
    """What `check_stable` ran, returned when every property passed.

    ``passed``: property -> number of examples it passed on; ``skipped``: the properties it
    did not run, with the reason; ``compared_with``: class -> what its values were compared
    with (its numpyro twin, or why the numpyro comparisons were left out); ``notes``: what
    was wrong with what was checked although no property failed (a numpyro-built
    distribution: a pass says nothing about stabledist)."""

    passed: dict[str, int] = field(default_factory=dict)
    skipped: dict[str, str] = field(default_factory=dict)
    compared_with: dict[str, str] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)

    def __str__(self) -> str:
        lines = [f"  {note}" for note in self.notes]
        lines += [f"  {c} compared with {what}" for c, what in self.compared_with.items()]
        lines += [f"  {p}: passed on {n} example(s)" for p, n in self.passed.items()]
        lines += [f"  {p}: not run ({why})" for p, why in self.skipped.items()]
        return "stability report\n" + "\n".join(lines)


StabilityReport.__module__ = "stabledist.testing"  # where users import it from


def check_stable(
    factory: Any,
    *,
    properties: str | Iterable[str] = tuple(PROPERTIES),
    max_examples: int = 5,
    cycles: int = 1_000,
    n_threads: int = 4,
    plan_steps: int = 12,
    key: jax.Array | None = None,
) -> StabilityReport:
    """Run the stability properties on a distribution and report what it passed.

    Raises `StabilityError` (an `AssertionError`) with every failing property's message, or
    returns a `StabilityReport`. A leaked tracer's message keeps JAX's whole text, which names
    what holds the tracer; a value cached on the instance fails `access_plan` with the fix.

    Args:
        factory: what to test. Either a zero-argument callable returning a new instance
            with the same parameters on each call (define it at module level so that the
            `hash_seed` property can send it to other processes), or a hypothesis strategy of
            instances or of `DistSpec` (then each property runs on up to `max_examples` drawn
            examples, and failures are shrunk).
        properties: names from `PROPERTIES` to run (default: all, in registry order), or
            one name as a string (``properties="jit"``).
        max_examples: examples per property for a strategy; random access plans per instance.
        cycles: create/access/drop cycles of the `release` property.
        n_threads: concurrent readers of the `threads` property.
        plan_steps: longest random access plan of the `access_plan` property.
        key: PRNG key for samples and `log_prob` points (default `PRNGKey(0)`).

    Values are compared with the class's numpyro twin: numpyro's class for stabledist's own
    classes, the wrapped class for `make_stable`, and for a class written on a stable base
    (``class MyNormal(stabledist.Normal)``) its own body on numpyro's base, never its parent.
    When no faithful twin exists, the numpyro comparisons are left out (`upstream` is not
    run, the others compare with a fresh instance's eager values) and
    `StabilityReport.compared_with` says why. Properties that need several devices (`pmap`,
    `shard_map`) and properties that do not apply to the class (`parametrizations` of a class
    with one parametrization) are reported in `StabilityReport.skipped` with the reason, never
    as passed. A property passes only if its check ran to completion on every example.
    """
    # one name alone, not its letters: "jit" would otherwise be ('j', 'i', 't')
    props = (properties,) if isinstance(properties, str) else tuple(properties)
    unknown = sorted(set(props) - set(PROPERTIES))
    if unknown:
        raise ValueError(f"unknown properties {unknown}; choose from {tuple(PROPERTIES)}")
    is_strategy = _strategy_or_factory(factory)
    first = None if is_strategy else _first_instance(factory)
    runner = _Runner(factory, is_strategy, jax.random.PRNGKey(0) if key is None else key,
                     max_examples, cycles, n_threads, plan_steps)
    report = StabilityReport()
    failures: list[str] = []
    for name in props:
        runner.run_property(name, first, report, failures)
        if runner.unfaithful:  # its twin runs other code: no comparison means anything
            failures.insert(0, "resolution: " + "\n  ".join(runner.unfaithful))
            break
    report.compared_with = dict(runner.compared_with)
    report.notes = list(runner.notes.values())
    if failures:
        raise StabilityError(runner.failure_text(failures))
    return report


def _strategy_or_factory(value: Any) -> bool:
    """Whether ``value`` is a strategy (else a factory); what it cannot be raises."""
    if isinstance(value, nd.Distribution):
        name = type(value).__name__
        stable = "" if stabledist.is_stable(value) else (
            f"; it is numpyro's {name}, not a stable one: build it with stabledist "
            f"(`stabledist.{name}(...)`) or `stabledist.stabilize(...)` it in the factory"
            if is_numpyro_class(type(value)) else
            f"; {name} is not stable: `stabledist.make_stable({name})` gives the stable class")
        raise TypeError(f"check_stable takes a factory, not an instance: pass "
                        f"`lambda: {name}(...)` (a new instance per call) or a hypothesis "
                        f"strategy{stable}")
    if isinstance(value, st.SearchStrategy):
        return True
    if not callable(value):
        raise TypeError(f"check_stable takes a zero-argument factory or a hypothesis "
                        f"strategy, got {type(value).__name__}")
    return False


def _label(factory: Callable[..., Any]) -> str:
    name = getattr(factory, "__name__", None)
    return f"{name}()" if isinstance(name, str) else f"{factory!r}()"


def _first_instance(factory: Callable[[], Any]) -> Any:
    """``factory()``, once it is known to be a factory check_stable can use: callable without
    arguments, returning a distribution, a new one on every call. Each misuse is reported
    here, once, rather than as the same error under every property."""
    _callable_without_arguments(factory)
    try:
        first = factory()
    except Exception as e:
        e.add_note(f"check_stable: {_label(factory)} raised this before any property ran; "
                   "the factory must build a valid instance when called without arguments")
        raise
    if not isinstance(first, nd.Distribution):
        raise TypeError(f"check_stable: {_label(factory)} returned a {type(first).__name__}, "
                        "not a distribution; the factory must return a new distribution on "
                        "each call")
    if factory() is first:
        raise TypeError(
            f"check_stable: {_label(factory)} returned the same object on two calls; the "
            "release, hoisting and threads properties need a new instance on every call "
            "(release checks that the cache empties as instances die): build the "
            f"distribution inside the factory, `return {type(first).__name__}(...)`, instead "
            "of returning one kept elsewhere")
    return first


def _callable_without_arguments(factory: Callable[..., Any]) -> None:
    try:
        signature = inspect.signature(factory)
    except (TypeError, ValueError):  # a callable without a signature: calling it tells
        return
    try:
        signature.bind()
    except TypeError:
        needed = [p.name for p in signature.parameters.values()
                  if p.default is p.empty and p.kind not in (p.VAR_POSITIONAL, p.VAR_KEYWORD)]
        name = getattr(factory, "__name__", "factory")
        raise TypeError(
            f"check_stable calls the factory without arguments, but {_label(factory)[:-2]} "
            f"requires {', '.join(map(repr, needed))}: pass `functools.partial({name}, "
            f"{needed[0]}=...)` or a module-level function of no arguments (both can be sent "
            "to the hash_seed property's worker processes)") from None


class _NotApplicable(Exception):  # noqa: N818 - internal control flow, not an error
    """A property that does not apply to any drawn example's class."""


@dataclass
class _Runner:
    """One `check_stable` call: builds the examples and runs the properties on them."""

    factory: Any
    is_strategy: bool
    key: jax.Array
    max_examples: int
    cycles: int
    n_threads: int
    plan_steps: int
    compared_with: dict[str, str] = field(default_factory=dict)
    """class name -> what its values were compared with."""
    notes: dict[str, str] = field(default_factory=dict)
    """class name -> a mistake worth saying once above the failures (a numpyro-built
    distribution)."""
    twins: dict[type, bool] = field(default_factory=dict)
    plain: set[str] = field(default_factory=set)
    """Classes compared with numpyro's own class (a mirror, or numpyro's class itself)."""
    unfaithful: list[str] = field(default_factory=list)
    """Attributes a class resolves to other code than its twin (`resolution_mismatches`)."""

    def run_property(self, name: str, first: Any, report: StabilityReport,
                     failures: list[str]) -> None:
        """Run one property; record it as passed, skipped or failed."""
        prop = PROPERTIES[name]
        if jax.device_count() < prop.devices:
            report.skipped[name] = (f"{jax.device_count()} device; set XLA_FLAGS="
                                    "--xla_force_host_platform_device_count=4")
            return
        try:
            if self.is_strategy:
                report.passed[name] = self.run_strategy(name)
                return
            why = self.not_applicable(name, first)
            if why:
                report.skipped[name] = why
                return
            self.run(name, self.example(self.factory()))
            report.passed[name] = 1
        except _NotApplicable as e:
            report.skipped[name] = str(e)
        except AssertionError as e:
            failures.append(f"{name}: {e}")
        except Exception as e:
            failures.append(f"{name}: {type(e).__name__}: {e}")

    def failure_text(self, failures: list[str]) -> str:
        """The failures, under the notes and what a user's class was compared with (said
        once; numpyro's own classes go without saying)."""
        head = [f"  {note}" for note in self.notes.values()]
        head += [f"  {c} compared with {what}" for c, what in self.compared_with.items()
                 if c not in self.plain]
        count = f"{len(failures)} stability propert{'y' if len(failures) == 1 else 'ies'}"
        return "\n".join([f"{count} failed:", *head]) + "\n\n" + "\n\n".join(failures)

    def not_applicable(self, name: str, d: Any) -> str | None:
        prop = PROPERTIES[name]
        if prop.compares_with_numpyro and not self.has_twin(d):
            return (f"it compares {type(d).__name__} with numpyro, and it has no numpyro twin "
                    "(see 'compared with')")
        return prop.applies(type(d))

    def has_twin(self, d: Any) -> bool:
        """Whether ``d`` (its class, and the classes of the distributions it holds) has a
        numpyro twin; the answer is recorded for the report."""
        cls = type(d)
        if cls not in self.twins:
            try:
                twin = type(destabilize(d))
                self.unfaithful += resolution_mismatches(cls, twin)
                self.twins[cls] = True
                self.compared_with[cls.__name__] = twin_or_reason(cls)[1]
                if is_numpyro_class(twin) or not stabledist.is_stable(cls):
                    self.plain.add(cls.__name__)
            except NoNumpyroTwin as e:
                self.twins[cls] = False
                self.compared_with[cls.__name__] = (
                    "a fresh stabledist instance's own values: the numpyro comparisons are "
                    f"left out, as it has no faithful numpyro twin ({e.reason})")
            if not stabledist.is_stable(cls):
                self.notes[cls.__name__] = _numpyro_built(cls, self.factory)
        return self.twins[cls]

    def plans(self, d: Any) -> list[AccessPlan]:
        found: list[AccessPlan] = []

        @settings(max_examples=self.max_examples, database=None, deadline=None,
                  suppress_health_check=cast(Any, list(HealthCheck)))
        @given(access_plans(d, max_steps=self.plan_steps))
        def pick(plan: AccessPlan) -> None:
            found.append(plan)

        pick()
        return found

    def example(self, drawn: Any, data: Any = None) -> Example:
        """The `Example` of an instance, a drawn instance or a drawn `DistSpec`."""
        # under a strategy's @given, plans are drawn from its data (no nested @given)
        drawn_plans = self.plans if data is None else (
            lambda d: [data.draw(access_plans(d, max_steps=self.plan_steps), label="plan")])
        common = {"key": self.key, "plans": drawn_plans, "cycles": self.cycles,
                  "n_threads": self.n_threads}
        if isinstance(drawn, DistSpec):
            d = drawn.build()
            upstream = functools.partial(drawn.build, nd) if self.has_twin(d) else drawn.build
            return Example(d, drawn.build, upstream, drawn,
                           kwargs=None if drawn.catalog_id else drawn.kwargs(), **common)
        if self.is_strategy:  # a drawn instance: new ones are rebuilt from its leaves
            make = functools.partial(_rebuild, drawn)
            twin = self.has_twin(drawn)
            return Example(drawn, make, (lambda: destabilize(make())) if twin else make, None,
                           **common)
        twin = self.has_twin(drawn)
        upstream = (lambda: destabilize(self.factory())) if twin else self.factory
        return Example(drawn, self.factory, upstream, self.factory, **common)

    def run(self, name: str, x: Example) -> None:
        mark = len(COVERAGE.events)
        PROPERTIES[name].run(x)
        if (name, type(x.d).__name__) not in COVERAGE.since(mark):
            raise StabilityError(f"[{name}] ran no check on {type(x.d).__name__}")

    def run_strategy(self, name: str) -> int:
        count = [0]
        not_applicable: list[str] = []

        @settings(max_examples=self.max_examples, database=None, deadline=None,
                  suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
        @given(self.factory, st.data())
        def each(drawn: Any, data: Any) -> None:
            spec = isinstance(drawn, DistSpec)
            with drawn.x64_context() if spec else contextlib.nullcontext():
                x = self.example(drawn, data)
                why = self.not_applicable(name, x.d)
                if why:
                    not_applicable.append(why)
                    return
                self.run(name, x)
            count[0] += 1

        each()
        if not count[0] and not_applicable:
            raise _NotApplicable(not_applicable[0])
        return count[0]


def _numpyro_built(cls: type, factory: Any) -> str:
    """What to say, once, when the distributions under test are not stable at all."""
    made = "a hypothesis strategy draws" if isinstance(factory, st.SearchStrategy) else \
        f"{_label(factory)} returns"
    if is_numpyro_class(cls):
        fix = (f"build it with stabledist (`stabledist.{cls.__name__}(...)`) or return "
               "`stabledist.stabilize(...)` of it")
        what = f"numpyro's own {cls.__name__}"
    else:
        fix = (f"wrap the class (`{cls.__name__} = stabledist.make_stable({cls.__name__})`) "
               "or return `stabledist.stabilize(...)` of the instance")
        what = f"{cls.__name__}, a numpyro class stabledist has not made stable"
    return (f"note: {made} {what}, which is not a stable distribution, so this checked "
            f"numpyro's; to check stabledist's, {fix}")
