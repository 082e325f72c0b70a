"""Checks that involve other processes, threads or the cache's memory: the same leaf order under
other `PYTHONHASHSEED` values (`check_hash_seed`, through long-lived worker processes speaking a
length-prefixed pickle protocol on stdin/stdout), cache entries released with their instance
(`check_release`) and one value per lazy property for concurrent readers (`check_threads`).
Hypothesis-free.

`check_release` and `check_threads` temporarily replace the function a lazy-property
descriptor wraps (`wrapped`), to stub or count computations; they restore it on exit.
"""

from __future__ import annotations

import atexit
import contextlib
import gc
import io
import os
import pickle
import random
import re
import struct
import subprocess
import sys
import threading
import traceback
import types
import weakref
from collections import defaultdict
from collections.abc import Callable, Iterable, Sequence
from typing import Any

import jax

import stabledist
from stabledist._src.lazy import CACHE, class_attribute, lazy_names, lazy_property_of
from stabledist.testing._compare import (
    COVERAGE,
    Outcome,
    StabilityError,
    _assert_close,
    _fail,
    attempt,
    destabilize,
    layout,
    same_outcome,
)
from stabledist.testing._spec import DistSpec

__all__ = [
    "HASH_SEEDS",
    "check_hash_seed",
    "check_release",
    "check_threads",
    "start_hash_seed_workers",
    "stop_hash_seed_workers",
]

HASH_SEEDS: tuple[int, ...] = (0, 1, 2)
_ADDRESS = re.compile(r" at 0x[0-9a-f]+|0x[0-9a-f]{6,}")


def _portable_layout(d: Any) -> tuple[str, tuple[tuple[str, tuple[int, ...], str], ...]]:
    treedef, leaves = layout(d)
    return _ADDRESS.sub("", str(treedef)), leaves


class _Worker:
    """A Python process with a fixed ``PYTHONHASHSEED`` that builds or unpickles a
    distribution and reports its layout; started once, reused for every request."""

    def __init__(self, seed: int) -> None:
        env = dict(os.environ)
        env["PYTHONHASHSEED"] = str(seed)
        env["PYTHONPATH"] = os.pathsep.join(p for p in sys.path if p)
        env.setdefault("JAX_PLATFORMS", "cpu")
        env.pop("XLA_FLAGS", None)
        self.seed = seed
        self.proc = subprocess.Popen(
            [sys.executable, "-c", "from stabledist.testing._process import _worker_main; "
                                   "_worker_main()"],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, env=env,
        )
        self.lock = threading.Lock()

    def ask(self, request: bytes) -> Any:
        with self.lock:
            assert self.proc.stdin is not None and self.proc.stdout is not None
            self.proc.stdin.write(struct.pack("<Q", len(request)) + request)
            self.proc.stdin.flush()
            head = self.proc.stdout.read(8)
            if len(head) < 8:
                raise RuntimeError(f"hash-seed worker {self.seed} died")
            (size,) = struct.unpack("<Q", head)
            return pickle.loads(self.proc.stdout.read(size))

    def close(self) -> None:
        """End of input makes the worker return; kill it if it does not within 10 s."""
        with contextlib.suppress(Exception):
            assert self.proc.stdin is not None
            self.proc.stdin.close()
        try:
            self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        if self.proc.stdout is not None:
            self.proc.stdout.close()


_workers: dict[int, _Worker] = {}
_workers_lock = threading.Lock()
_atexit_registered = False


def start_hash_seed_workers(seeds: Iterable[int] = HASH_SEEDS) -> None:
    """Start the worker processes now (they take a second or two to import JAX), so that a
    test session can overlap that with other work. They are stopped at interpreter exit."""
    global _atexit_registered
    with _workers_lock:
        if not _atexit_registered:
            atexit.register(stop_hash_seed_workers)
            _atexit_registered = True
        for s in seeds:
            if s not in _workers or _workers[s].proc.poll() is not None:
                _workers[s] = _Worker(s)


def stop_hash_seed_workers() -> None:
    with _workers_lock:
        for w in _workers.values():
            w.close()
        _workers.clear()


def _worker_main() -> None:  # pragma: no cover - runs in the worker process
    stdin, stdout = sys.stdin.buffer, sys.stdout.buffer
    while True:
        head = stdin.read(8)
        if len(head) < 8:
            return
        (size,) = struct.unpack("<Q", head)
        try:
            kind, payload = pickle.loads(stdin.read(size))
            context = payload.x64_context() if kind == "spec" else contextlib.nullcontext()
            with context:
                if kind == "spec":
                    d = payload.build()
                elif kind == "factory":
                    d = payload()
                else:
                    d = payload
                answer = ("ok", _portable_layout(d))
        except Exception:
            answer = ("error", traceback.format_exc())
        blob = pickle.dumps(answer)
        stdout.write(struct.pack("<Q", len(blob)) + blob)
        stdout.flush()


class _MainFinder(pickle.Pickler):
    """A pickler that notes the classes and functions of ``__main__`` it pickles by name: the
    workers are fresh interpreters whose ``__main__`` is not the script being run, so such a
    pickle loads here and fails there."""

    def __init__(self, file: Any) -> None:
        super().__init__(file)
        self.from_main: list[str] = []

    def persistent_id(self, obj: Any) -> None:  # called for every object pickled
        if isinstance(obj, type | types.FunctionType) and obj.__module__ == "__main__":
            self.from_main.append(obj.__qualname__)


def _pickled(payload: Any) -> tuple[bytes, list[str]]:
    """``payload`` pickled, and the names of ``__main__`` it refers to."""
    buffer = io.BytesIO()
    pickler = _MainFinder(buffer)
    pickler.dump(payload)
    return buffer.getvalue(), pickler.from_main


def _transportable(subject: Any, d: Any) -> tuple[str, Any] | str:
    """What to send to a worker: a spec (rebuilt there), a factory, or the pickled instance;
    else why none of them can be sent."""
    from_main: list[str] = []
    for kind, payload in (("spec", subject if isinstance(subject, DistSpec) else None),
                          ("factory", subject if callable(subject) else None), ("instance", d)):
        if payload is None:
            continue
        try:
            blob, names = _pickled((kind, payload))
            pickle.loads(blob)
        except Exception:
            continue
        if names:
            from_main += names
            continue
        return kind, blob
    if from_main:
        *rest, last = dict.fromkeys(from_main)
        names = f"{', '.join(rest)} and {last} are" if rest else f"{last} is"
        factory = getattr(subject, "__name__", "make") if callable(subject) else "make"
        return (f"{names} defined in __main__ (the script being run), which the worker "
                "processes (fresh Python processes) cannot import: move the class and its "
                "factory into a module the script imports, or leave the property out: "
                f"check_stable({factory}, properties=[p for p in PROPERTIES if p != "
                "'hash_seed'])")
    return ("neither the distribution nor its factory pickles: define the class and the "
            "factory at module level (a lambda or a local function cannot be sent)")


def check_hash_seed(d: Any, subject: Any = None, seeds: Sequence[int] = HASH_SEEDS) -> None:
    """Check that ``d``'s tree is the same in processes with different ``PYTHONHASHSEED``.

    Leaf order (key paths, shapes, dtypes) and tree structure of ``d`` are the same in
    processes started with each of ``seeds`` as ``PYTHONHASHSEED``.

    ``subject`` is how the workers get the distribution: a `DistSpec` or a factory
    importable by reference (then the worker constructs it) or, by default, ``d`` pickled.
    """
    sent = _transportable(subject, d)
    if isinstance(sent, str):
        raise _fail("hash_seed", d, f"cannot send the distribution to another process: {sent}")
    kind, blob = sent
    start_hash_seed_workers(seeds)
    ours = _portable_layout(d)
    answers = {s: _workers[s].ask(blob) for s in seeds}
    for s, (status, theirs) in answers.items():
        if status != "ok":
            last = theirs.strip().splitlines()[-1] if theirs.strip() else "no message"
            raise _fail("hash_seed", d, f"the worker with PYTHONHASHSEED={s} could not rebuild "
                                        f"the distribution from its {kind}: {last}")
        if theirs[1] != ours[1]:
            raise _fail("hash_seed", d, f"leaf order differs with PYTHONHASHSEED={s}:\n"
                                        f"    here  {ours[1]}\n    there {theirs[1]}")
        if theirs[0] != ours[0]:
            raise _fail("hash_seed", d, f"tree structure differs with PYTHONHASHSEED={s}:\n"
                                        f"    here  {ours[0]}\n    there {theirs[0]}")
    COVERAGE.record("hash_seed", d)


# ---------------------------------------------------------------------------------------------
# 11. release  12. threads
# ---------------------------------------------------------------------------------------------


def _read_all(d: Any, names: Sequence[str]) -> dict[str, Any]:
    """Read every lazy property; what each gave: its value or the exception it raised."""
    values: dict[str, Any] = {}
    for n in names:
        try:
            values[n] = getattr(d, n)
        except Exception as e:
            values[n] = _Raised(e)
    return values


class _Raised:
    """A lazy property that raised (numpyro's own errors, e.g. a low-rank precision). Keeps
    the exception's type and arguments only: its traceback would keep the reader's frames,
    and the instances in them, alive."""

    def __init__(self, error: Exception) -> None:
        self.type, self.args = type(error), error.args

    def __call__(self, instance: Any) -> Any:
        raise self.type(*self.args)


def check_release(factory: Callable[[], Any], cycles: int = 10_000,
                  rebuild: bool = True) -> None:
    """``cycles`` create/access/drop cycles leave nothing in the cache.

    The first instance comes from ``factory``; with ``rebuild`` the others are rebuilt from
    its leaves by ``tree_unflatten`` (what every jit/vmap/scan boundary does, and much
    cheaper than a validating constructor), else each comes from ``factory``. Every cycle
    reads all lazy properties; no new instance may find values already cached (its ``id`` is
    often a dead one's); at the end (after ``gc.collect()``) the cache must hold exactly what
    it held before, and every instance must be dead.

    The cache's bookkeeping is under test, not the arithmetic: the first instance computes its
    values for real, and during the other cycles every read that computes (a cache miss, as
    on each new instance) takes the whole miss path but returns that value, so 10 000 cycles
    cost milliseconds per lazy property instead of 10 000 evaluations.
    """
    # Only this window's objects may be collected: young generations are emptied first, and
    # automatic collection is off until the end, so garbage of earlier code (promoted to the
    # oldest generation) cannot be freed in between and make the counts differ.
    gc.collect(1)
    enabled = gc.isenabled()
    gc.disable()
    try:
        return _release_window(factory, cycles, rebuild)
    finally:
        if enabled:
            gc.enable()


def _release_window(factory: Callable[[], Any], cycles: int, rebuild: bool) -> None:
    before = CACHE.info()
    first = factory()
    names = lazy_names(first)
    leaves, treedef = jax.tree_util.tree_flatten(first)
    refs: list[weakref.ref[Any]] = []
    values = _read_all(first, names)
    refs.append(weakref.ref(first))
    peak = CACHE.info()
    name = type(first).__name__
    stubs = _stub_computations(type(first), values)
    del first
    try:
        for i in range(cycles - 1):
            d = jax.tree_util.tree_unflatten(treedef, leaves) if rebuild else factory()
            if CACHE.values_of(d):  # a dead instance's values under a reused id: served stale
                raise StabilityError(f"[release] {name}: a new instance (cycle {i + 1}) "
                                     f"already has cached values {sorted(CACHE.values_of(d))}")
            _read_all(d, names)
            if i % 97 == 0:
                refs.append(weakref.ref(d))
            del d
    finally:
        for desc, original in stubs:
            desc.wrapped = original
    gc.collect(1)
    after = CACHE.info()
    alive = sum(r() is not None for r in refs)
    if alive == 1 and refs[0]() is not None:  # the factory's own instance, nothing else
        raise StabilityError(
            f"[release] {name}: the instance the factory returned is still alive after the "
            "check dropped it: something else keeps it (a factory that returns an object it "
            "also stores, such as a global or a cached instance), so whether its cache entries "
            "are released cannot be checked; let the factory build a new instance per call")
    if after != before or alive:
        cache = (f"the cache holds {after} (before: {before}, with one live instance: "
                 f"{peak})" if after != before else "the cache is as before")
        raise StabilityError(
            f"[release] {name}: after {cycles} create/access/drop cycles {cache}; {alive} of "
            f"the {len(refs)} instances watched are still alive"
        )
    COVERAGE.record("release", name)


def _stub_computations(cls: type, values: dict[str, Any]) -> list[tuple[Any, Any]]:
    """Make each lazy property of ``cls`` compute (or raise) what it did for the first
    instance; returns ``(descriptor, original)`` pairs to restore."""
    stubs: list[tuple[Any, Any]] = []
    for n, v in values.items():
        desc = _descriptor(cls, n)
        if desc is None or any(desc is p for p, _ in stubs):
            continue
        stubs.append((desc, desc.wrapped))
        desc.wrapped = v if isinstance(v, _Raised) else (lambda instance, _v=v: _v)
    return stubs


def check_threads(factory: Callable[[], Any], n_threads: int = 4,
                  upstream: Callable[[], Any] | None = None) -> None:
    """Check that threads reading one shared instance's lazy values agree with numpyro.

    ``n_threads`` threads read every lazy property of one fresh shared instance, in
    different orders, at the same time: all see identical values (the very same object for a
    cached one, the one the cache holds: racing threads may each compute a value, one is kept
    for everyone), numpyro's (``upstream()``: numpyro's instance; default the twin of a
    ``factory()``) bit for bit."""
    d = factory()
    twin = destabilize(factory()) if upstream is None else upstream()
    names = lazy_names(d)
    counts, patched = _count_computations(d, names)
    barrier = threading.Barrier(n_threads)
    results: list[dict[str, Any]] = [{} for _ in range(n_threads)]
    errors: list[BaseException] = []

    def reader(i: int) -> None:
        order = list(names)
        random.Random(i).shuffle(order)
        try:
            barrier.wait(timeout=30)
            for n in order:
                try:
                    results[i][n] = ("ok", getattr(d, n))
                except Exception as e:
                    results[i][n] = ("error", type(e).__name__, e)
        except BaseException as e:
            errors.append(e)

    try:
        threads = [threading.Thread(target=reader, args=(i,)) for i in range(n_threads)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
    finally:
        for desc, original in patched:
            desc.wrapped = original
    if errors:
        raise errors[0]
    _agree(d, twin, names, results, counts, n_threads)
    COVERAGE.record("threads", d)


def _count_computations(
    d: Any, names: Sequence[str]
) -> tuple[defaultdict[str, int], list[tuple[Any, Callable[..., Any]]]]:
    """Make the computation of each of ``names`` count the times it runs for ``d`` (racing
    threads may each compute a value, but no more than once each); returns the counts and the
    ``(descriptor, original)`` pairs to restore."""
    counts: defaultdict[str, int] = defaultdict(int)
    counts_lock = threading.Lock()
    patched: list[tuple[Any, Callable[..., Any]]] = []
    target = id(d)
    for n in names:
        desc = _descriptor(type(d), n)
        if desc is None or any(desc is p for p, _ in patched):
            continue
        original = desc.wrapped

        def counting(instance: Any, _f: Callable[..., Any] = original, _n: str = n) -> Any:
            value = _f(instance)
            if id(instance) == target:
                with counts_lock:
                    counts[_n] += 1
            return value

        patched.append((desc, original))
        desc.wrapped = counting
    return counts, patched


def _agree(d: Any, twin: Any, names: Sequence[str], results: list[dict[str, Any]],
           counts: dict[str, int], n_threads: int) -> None:
    """The threads' reads of ``d`` agree with each other (one object per cached value: the one
    the cache holds, its bookkeeping whole) and with ``twin``'s."""
    cached = CACHE.values_of(d) if stabledist.is_stable(d) else {}
    for n in names:
        outcomes = [r[n] for r in results]
        first = outcomes[0]
        for other in outcomes[1:]:
            # statuses and error types only: values are arrays, compared below
            if other[0] != first[0] or (first[0] == "error" and other[1] != first[1]):
                raise _fail("threads", d, f"{n}: threads disagree: {_shown(first)} vs "
                                          f"{_shown(other)}")
            if first[0] == "ok" and other[1] is not first[1]:
                if n in cached or not stabledist.is_stable(d):
                    raise _fail("threads", d, f"{n}: threads got different objects")
                _assert_close("threads", d, n, other[1], first[1], exact=True)
        if first[0] == "ok" and n in cached and cached[n] is not first[1]:
            raise _fail("threads", d, f"{n}: the threads read an object the cache does not "
                                      "hold (another value was kept)")
        if first[0] == "ok" and counts[n] > n_threads:
            raise _fail("threads", d, f"{n} was computed {counts[n]} times by {n_threads} "
                                      f"threads (at most {n_threads} expected)")
        ours = Outcome(first[1]) if first[0] == "ok" else Outcome(error=first[2])
        theirs = attempt(lambda n=n: getattr(twin, n))
        if same_outcome("threads", d, n, ours, theirs) and theirs.ok:
            _assert_close("threads", d, n, ours.value, theirs.value, exact=True)


def _shown(outcome: tuple[Any, ...]) -> str:
    return "a value" if outcome[0] == "ok" else f"raises {outcome[1]}"


def _descriptor(cls: type, name: str) -> Any:
    """The lazy-property descriptor ``name`` resolves to on ``cls`` (``None`` if another kind
    of attribute hides it)."""
    attr = lazy_property_of(class_attribute(cls, name))
    return attr if hasattr(attr, "wrapped") else None
