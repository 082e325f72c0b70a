"""Comparison helpers every check uses: describing a distribution, its layout, eager reference
values, closeness assertions, stacking, the numpyro twin of a stable instance, and the coverage
record. Hypothesis-free: the checks in `stabledist.testing` work without it.
"""

from __future__ import annotations

import re
import threading
from collections import defaultdict
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any, cast

import jax
import jax.numpy as jnp
import numpy as np
import numpyro.distributions as nd
from numpyro.distributions import constraints as C  # noqa: N812 - constraint namespace

from stabledist._src.construction import upstream_class
from stabledist._src.lazy import CACHE, lazy_names
from stabledist.testing._catalog_entries import entry_of
from stabledist.testing._twin import numpyro_twin, skipped_override, upstream_lazy_names

__all__ = ["Outcome", "StabilityError", "attempt", "attempt_both", "describe", "destabilize",
           "same_outcome", "stack", "valid_value"]

UNSUPPORTED = (NotImplementedError, ImportError)
"""A method raising one of these is "not defined" for that distribution (numpyro raises
ImportError where an optional dependency, tensorflow_probability, would be needed)."""

COMPILER_OPTIONS: dict[str, Any] = {"xla_backend_optimization_level": 0}

RTOL, ATOL = 2e-5, 1e-5  # traced vs eager (float32 reassociation, fused ops)

TRACED_METHODS: tuple[str, ...] = ("mean", "variance", "log_prob")
"""Methods evaluated inside traced functions besides every lazy property. ``log_prob`` is
the costliest to compile; a fast profile may pass ``traced=("mean", "variance")`` to the
batched checks (``check_jit`` and ``check_closure``'s ``jit`` always evaluate it)."""


class StabilityError(AssertionError):
    """A stability property does not hold for a distribution."""


StabilityError.__module__ = "stabledist.testing"  # where users import it from


# ---------------------------------------------------------------------------------------------
# Outcomes: numpyro's decides.
# ---------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Outcome:
    """What running a program gave: its value, or the exception it raised."""

    value: Any = None
    error: Exception | None = None

    @property
    def ok(self) -> bool:
        return self.error is None


def attempt(program: Callable[[], Any]) -> Outcome:
    """Run ``program``; a `StabilityError` (a check failing inside) propagates."""
    try:
        return Outcome(program())
    except StabilityError:
        raise
    except Exception as e:
        return Outcome(error=e)


def attempt_both(ours: Callable[[], Any], theirs: Callable[[], Any]) -> tuple[Outcome, Outcome]:
    """`attempt` stabledist's program, then numpyro's, unless stabledist's leaked a tracer: that
    fails whatever numpyro does (`same_outcome`), and JAX's report of a leak on numpyro's side
    walks ``gc.get_referrers`` over the whole heap for every leaked tracer (seconds each)."""
    mine = attempt(ours)
    if mine.error is not None and _is_leak(mine.error):
        return mine, NOT_RUN
    return mine, attempt(theirs)


NOT_RUN = Outcome(error=RuntimeError("not run: stabledist's program leaked a tracer first"))
"""numpyro's outcome where `attempt_both` did not run it."""


def _is_leak(e: BaseException) -> bool:
    """A tracer outlived its trace (``jax.checking_leaks`` or a later use of it)."""
    return isinstance(e, jax.errors.UnexpectedTracerError) or "Leaked trace" in str(e)


_HOLDER = re.compile(r"is referred to by ([^<\s].*)$", re.MULTILINE)
"""JAX's ``checking_leaks`` text names what keeps a leaked tracer alive on a line of its own,
deep in its text: ``<dict 0x..> is referred to by mydists._MEMO``."""
_ATTRIBUTE = re.compile(r"is referred to by <(\w+) \d+>\.(\w+)$", re.MULTILINE)
"""An instance's attribute holding it: ``<Tracer ..> is referred to by <MyNormal 140..>._memo``
(a value a class keeps on ``self`` by hand)."""


def _leak_text(e: BaseException) -> str:
    """A leak's report: the holders JAX names first, then JAX's whole text (the first line
    alone, "Leaked tracer(s):", says neither where nor what)."""
    text = str(e).strip()
    holders = list(dict.fromkeys([*_HOLDER.findall(text), *(
        f"the attribute {attr!r} of a {cls}" for cls, attr in _ATTRIBUTE.findall(text))]))
    held = f", held by {', '.join(holders)}" if holders else ""
    body = "\n".join(f"    {line}" for line in text.splitlines())
    return f"a tracer leaked{held}; {type(e).__name__}:\n{body}"


def _error_text(e: BaseException | None) -> str:
    first = str(e).strip().splitlines()[0] if str(e).strip() else ""
    return f"{type(e).__name__}: {first[:160]}"


def same_outcome(what: str, d: Any, label: str, ours: Outcome, theirs: Outcome) -> bool:
    """numpyro's outcome decides: where numpyro returns, stabledist must return (then this is
    ``True`` and the caller compares the values); where numpyro raises, stabledist raises the
    same exception type for the same reason (``False``: nothing more to compare; a
    ``NotImplementedError`` from a base whose override in the class never ran fails), unless
    the class's catalog record says numpyro's own pytree breaks such programs (``numpyro_fails``,
    stabledist's improvement: ``True``, its value checked by the caller) or numpyro's run
    leaked a tracer (``False``). A leak of stabledist's always fails."""
    if ours.error is not None and _is_leak(ours.error):  # never excused by numpyro's leaking
        raise _fail(what, d, f"{label}: {_leak_text(ours.error)}") from ours.error
    if theirs.error is not None and _is_leak(theirs.error) and ours.ok:
        # numpyro's run leaked where stabledist's did not (a user's class caching by hand in
        # __dict__ keeps a tracer there upstream): no values to compare, and no failure of ours
        return False
    if theirs.ok:
        if not ours.ok:
            raise _fail(what, d, f"{label}: stabledist raises {_error_text(ours.error)} where "
                                 "numpyro returns") from ours.error
        return True
    if entry_of(upstream_class(type(d)).__name__).numpyro_fails is not None:
        return ours.ok  # numpyro's failure is its broken pytree: stabledist does its best
    if ours.ok:
        raise _fail(what, d, f"{label}: stabledist returns where numpyro raises "
                             f"{_error_text(theirs.error)}") from theirs.error
    if type(ours.error) is not type(theirs.error):
        raise _fail(what, d, f"{label}: stabledist raises {_error_text(ours.error)}, numpyro "
                             f"{_error_text(theirs.error)}") from ours.error
    skipped = skipped_override(type(d), ours.error)  # the same type for another reason
    if skipped is not None:
        raise _fail(what, d, f"{label}: {skipped}") from ours.error
    return False


# ---------------------------------------------------------------------------------------------
# Coverage: which classes each property actually ran on.
# ---------------------------------------------------------------------------------------------


@dataclass
class Coverage:
    """Classes (by name) on which each property ran to completion, and how many examples.

    ``events`` keeps every record in order, so a caller can ask what one test exercised
    (:meth:`since`) and ship it to another process (pytest-xdist workers report to the
    controller through it); :meth:`merge` adds such a list back."""

    classes: dict[str, set[str]] = field(default_factory=lambda: defaultdict(set))
    examples: dict[str, int] = field(default_factory=lambda: defaultdict(int))
    events: list[tuple[str, str]] = field(default_factory=list)
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def record(self, prop: str, d_or_name: Any) -> None:
        name = d_or_name if isinstance(d_or_name, str) else type(d_or_name).__name__
        with self._lock:
            self.classes[prop].add(name)
            self.examples[prop] += 1
            self.events.append((prop, name))

    def since(self, mark: int) -> list[tuple[str, str]]:
        """Records made after ``len(self.events)`` was ``mark``."""
        with self._lock:
            return self.events[mark:]

    def merge(self, events: Iterable[Sequence[str]]) -> None:
        for prop, name in events:
            self.record(prop, name)

    def count(self, prop: str) -> int:
        return len(self.classes.get(prop, ()))

    def table(self, order: Sequence[str] = ()) -> str:
        """One line per property: classes and examples; ``order`` first, the rest sorted."""
        width = max([len("property"), *map(len, self.classes)])
        lines = [f"{'property':<{width}}  classes  examples"]
        props = [p for p in order if p in self.classes]
        props += sorted(set(self.classes) - set(order))
        for p in props:
            lines.append(f"{p:<{width}}  {self.count(p):>7}  {self.examples.get(p, 0):>8}")
        return "\n".join(lines)


COVERAGE = Coverage()
"""Process-wide coverage, filled by every check (the test suite reports it at session end)."""

COVERAGE_KEY = "stabledist_coverage"
"""Name under which a test hands its :meth:`Coverage.since` records to the test runner."""


# ---------------------------------------------------------------------------------------------
# Describing and comparing.
# ---------------------------------------------------------------------------------------------


def describe(d: Any) -> str:
    """`ClassName(path=value, ...)` over the leaves, for failure messages."""
    try:
        pairs = jax.tree_util.tree_flatten_with_path(d)[0]
    except Exception as e:  # pragma: no cover - a broken flatten is reported elsewhere
        return f"{type(d).__name__}(<flatten failed: {e!r}>)"
    parts = []
    for path, leaf in pairs:
        arr = np.asarray(leaf)
        text = np.array2string(arr, precision=4, separator=", ", threshold=12)
        parts.append(f"{jax.tree_util.keystr(path)}={text}:{arr.dtype}")
    return f"{type(d).__name__}({', '.join(parts)})"


Layout = tuple[Any, tuple[tuple[str, tuple[int, ...], str], ...]]


def layout(d: Any) -> Layout:
    """Tree structure and, per leaf, its key path, shape and dtype."""
    pairs, treedef = jax.tree_util.tree_flatten_with_path(d)
    return treedef, tuple(
        (jax.tree_util.keystr(p), tuple(np.shape(x)), str(jnp.result_type(x))) for p, x in pairs
    )


def _vars_snapshot(d: Any, seen: set[int] | None = None) -> dict[str, Any]:
    """``vars(d)`` as ``name -> id(value)``, nested distributions expanded."""
    seen = set() if seen is None else seen
    seen.add(id(d))
    out: dict[str, Any] = {}
    for k, v in vars(d).items():
        items = v if isinstance(v, list | tuple) else [v]
        if any(isinstance(x, nd.Distribution) and id(x) not in seen for x in items):
            out[k] = [(_vars_snapshot(x, seen) if isinstance(x, nd.Distribution) else id(x))
                      for x in items]
        else:
            out[k] = id(v)
    return out


def _fail(what: str, d: Any, detail: str = "") -> StabilityError:
    msg = f"[{what}] {type(d).__name__}: {detail}\n  distribution: {describe(d)}"
    return StabilityError(msg)


def _array_leaves(tree: Any) -> list[Any]:
    return [x for x in jax.tree_util.tree_leaves(tree)
            if isinstance(x, jax.Array | np.ndarray | np.generic | float | int)]


def canonical(x: Any) -> np.ndarray:
    """``x`` on the host as JAX holds it once it crosses ``jit``: a Python float or a float64
    NumPy value is float32 without x64 (an int, int32), so a leaf given as ``0.3`` compares
    bit for bit with the ``float32`` array a round trip through ``jit`` returns."""
    host = np.asarray(x)
    return host.astype(jax.dtypes.canonicalize_dtype(host.dtype), copy=False)


def _all_float64(d: Any) -> bool:
    leaves = jax.tree_util.tree_leaves(d)
    return all(x.dtype != np.float32 for x in leaves
               if isinstance(x, jax.Array | np.ndarray | np.generic))


def _assert_close(what: str, d: Any, label: str, got: Any, want: Any, exact: bool) -> None:
    g, w = _array_leaves(got), _array_leaves(want)
    if len(g) != len(w):
        raise _fail(what, d, f"{label}: {len(g)} leaves, expected {len(w)}")
    paths = [jax.tree_util.keystr(p) for p, x in jax.tree_util.tree_flatten_with_path(want)[0]
             if isinstance(x, jax.Array | np.ndarray | np.generic | float | int)]
    for a, b, path in zip(g, w, paths):
        a, b = canonical(a), canonical(b)
        where = f"{label}{path}" if path else label
        if a.shape != b.shape:
            raise _fail(what, d, f"{where}: shape {a.shape}, expected {b.shape}")
        if exact or not np.issubdtype(b.dtype, np.inexact):
            ok = np.array_equal(a, b, equal_nan=True)
        else:
            # float64 results of float32 parameters (x64 with mixed inputs) round as float32
            tol = 1e-9 if b.dtype == np.float64 and _all_float64(d) else RTOL
            ok = np.allclose(a, b, rtol=tol, atol=ATOL, equal_nan=True)
        if not ok:
            raise _fail(what, d, f"{where} differs{_by_how_much(a, b)}:\n    got      {a!r}\n"
                                 f"    expected {b!r}")


def _by_how_much(a: np.ndarray, b: np.ndarray) -> str:
    """`` (largest difference ...)`` for numbers, empty otherwise."""
    if not (np.issubdtype(a.dtype, np.number) and np.issubdtype(b.dtype, np.number)):
        return ""
    with np.errstate(all="ignore"):
        diff = np.abs(a.astype(np.float64) - b.astype(np.float64))
        if not np.isfinite(diff).any():
            return ""
        worst = float(np.nanmax(np.where(np.isfinite(diff), diff, np.nan)))
    return f" (largest difference {worst:.3g})" if worst else ""


def _assert_same_leaves(what: str, d: Any, other: Any, label: str) -> None:
    lay, lay2 = layout(d), layout(other)
    if lay[0] != lay2[0]:
        raise _fail(what, d, f"{label}: tree structure changed:\n    {lay[0]}\n -> {lay2[0]}")
    if lay[1] != lay2[1]:
        raise _fail(what, d, f"{label}: leaves changed:\n    {lay[1]}\n -> {lay2[1]}")
    _assert_close(what, d, f"{label} leaves", jax.tree_util.tree_leaves(other),
                  jax.tree_util.tree_leaves(d), exact=True)


# ---------------------------------------------------------------------------------------------
# Eager reference values.
# ---------------------------------------------------------------------------------------------


@dataclass
class Reference:
    """Eager values of one instance: lazy properties (those that can be read), ``mean``,
    ``variance`` and ``log_prob`` at ``value`` (``None`` when undefined)."""

    names: tuple[str, ...]
    lazies: dict[str, Any]
    methods: tuple[str, ...]
    values: dict[str, Any]
    value: Any


def reference(d: Any, key: jax.Array | None = None, value: Any = None) -> Reference:
    """Eager values of ``d``; only array-valued lazy properties of ``d``'s numpyro class that
    read without error count (a property that raises, eagerly, raises upstream too)."""
    key = jax.random.PRNGKey(0) if key is None else key
    names, lazies = [], {}
    # the lazy values numpyro's class has too (not the attributes stabledist derives from the
    # leaves where numpyro's round trip drops them, such as Levy's support)
    upstream_lazy = set(upstream_lazy_names(type(d)))
    for n in (n for n in lazy_names(d) if n in upstream_lazy):
        try:
            v = getattr(d, n)
        except Exception:
            continue
        if _array_leaves(v) and all(isinstance(x, jax.Array | np.ndarray | float | int)
                                    for x in jax.tree_util.tree_leaves(v)):
            names.append(n)
            lazies[n] = v
    value = valid_value(d, key) if value is None else value
    methods, values = [], {}
    for m in ("mean", "variance", "log_prob"):
        try:
            v = d.log_prob(value) if m == "log_prob" else getattr(d, m)
        except (*UNSUPPORTED, ValueError, TypeError, IndexError):  # IndexError: a value of
            # the wrong shape (callers that only want the lazy values pass a scalar)
            continue
        if m == "log_prob" and value is None:
            continue
        methods.append(m)
        values[m] = v
    return Reference(tuple(names), lazies, tuple(methods), values, value)


def _read(d: Any, names: tuple[str, ...], methods: tuple[str, ...], value: Any) -> dict[str, Any]:
    out = {n: getattr(d, n) for n in names}
    for m in methods:
        out["@" + m] = d.log_prob(value) if m == "log_prob" else getattr(d, m)
    return out


def _ref_values(ref: Reference) -> dict[str, Any]:
    return {**ref.lazies, **{"@" + m: v for m, v in ref.values.items()}}


def _rebuild(d: Any) -> Any:
    leaves, treedef = jax.tree_util.tree_flatten(d)
    return jax.tree_util.tree_unflatten(treedef, leaves)


def _scalar(values: Any) -> jax.Array:
    """Sum of every finite float entry: one number that depends on all values."""
    total = jnp.zeros((), jnp.result_type(float))
    for x in _array_leaves(values):
        x = jnp.asarray(x)
        if jnp.issubdtype(x.dtype, jnp.inexact):
            total = total + jnp.sum(jnp.where(jnp.isfinite(x), x, 0)).astype(total.dtype)
    return total




# ---------------------------------------------------------------------------------------------
# Stacking, the numpyro twin, a valid point.
# ---------------------------------------------------------------------------------------------


def stack(ds: Sequence[Any]) -> Any:
    """One instance whose leaves are the instances' leaves stacked on a new leading axis."""
    # compared with ==, not hashed into a set: numpyro 0.21 keeps a constraint in aux data
    # (the power laws' ``_support``), whose hash is its identity while it compares equal
    first, *rest = (jax.tree_util.tree_structure(d) for d in ds)
    for other in rest:
        if other != first:
            raise ValueError(f"cannot stack instances of different structures: {first} and "
                             f"{other}")
    return jax.tree_util.tree_map(_stack_leaves, *ds)


def _stack_leaves(*xs: Any) -> jax.Array:
    # on the host: jnp.stack would compile a concatenate for every new combination
    dtype = jnp.asarray(xs[0]).dtype
    return jnp.asarray(np.stack([np.asarray(x, dtype=dtype) for x in xs]))



def destabilize(value: Any) -> Any:
    """Return the numpyro twin of a stable distribution: what numpyro computes for it.

    Same ``__dict__`` (with the lazy values the constructor was given, which stabledist
    keeps in its cache and numpyro in ``__dict__``), in the class that runs the same code on
    numpyro's base: numpyro's
    class for stabledist's own, the wrapped class for one made by `stabledist.make_stable`,
    and for a user's class written on a stable base that class's own body on numpyro's base
    (never its parent, which lacks what the class adds). Nested distributions are converted
    too; other values come back unchanged. Raises `TypeError` (``NoNumpyroTwin``) naming the
    reason when a user's class has no faithful twin."""
    if isinstance(value, nd.Distribution):
        cls = numpyro_twin(type(value))
        twin = cast(Any, cls).__new__(cls)
        # with the values its constructor was given for lazy properties (a covariance_matrix=
        # argument): numpyro's constructor keeps them in __dict__, stabledist's in the cache
        state = {**vars(value), **CACHE.given(value)}
        vars(twin).update({k: destabilize(v) for k, v in state.items()})
        return twin
    if type(value) in (list, tuple):
        return type(value)(destabilize(v) for v in value)
    return value


def _outcome(f: Callable[[], Any]) -> tuple[str, Any]:
    try:
        return "ok", f()
    except Exception as e:
        return "error", type(e).__name__


def valid_value(d: Any, key: jax.Array) -> Any:
    """A point where ``d.log_prob`` is defined, of shape ``batch_shape + event_shape``.

    Continuous supports: ``biject_to(support)`` of uniform noise (no sampling, so no costly
    sampler compile). Otherwise ``d.sample(key)``. ``None`` when neither works.
    """
    shape = tuple(d.batch_shape) + tuple(d.event_shape)
    if type(d).__name__ == "IntervalCensoredDistribution":
        lower = valid_value(d.base_dist, key)
        return jnp.stack([lower, lower + 1.0], -1)
    try:
        support = d.support
        if not support.is_discrete:
            t = nd.transforms.biject_to(support)
            u = jax.random.uniform(key, t.inverse_shape(shape), minval=-1.0, maxval=1.0)
            x = t(u)
            if tuple(x.shape) == shape:
                return x
        else:
            x = _discrete_point(support, shape)
            if x is not None:
                return x
    except (NotImplementedError, ImportError, TypeError, ValueError, AttributeError):
        pass
    try:
        x = d.sample(key)
    except UNSUPPORTED:
        return None
    return x if tuple(jnp.shape(x)) == shape else None


def _discrete_point(support: C.Constraint, shape: tuple[int, ...]) -> jax.Array | None:
    """The lower end of a discrete support (no sampling), or ``None`` for other supports."""
    if support is C.boolean:
        return jnp.zeros(shape, jnp.int32)
    # integer_interval, integer_greater_than, nonnegative_integer, positive_integer: each
    # includes its lower bound (public attribute of numpyro's integer constraints)
    if getattr(support, "lower_bound", None) is not None and not C.is_dependent(support):
        low = jnp.asarray(cast(Any, support).lower_bound)
        return jnp.broadcast_to(low, shape).astype(jnp.int32)
    return None

