"""Where the time of a block of code goes: JAX tracing, lowering, XLA compilation, the rest.

JAX reports each as a time span (:mod:`jax.monitoring`, eager per-primitive compiles
included); spans nest, so the phases are attributed exclusively (compile first, then
lowering, then tracing). "run" is the rest: executing, the device, Python outside a trace.
"""

from __future__ import annotations

import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import Any

from jax import monitoring
from jax._src import monitoring as _monitoring

# jax 0.7 (the oldest stabledist supports) has only the private ones
_unregister_span = getattr(monitoring, "unregister_event_time_span_listener", None) or \
    _monitoring._unregister_event_time_span_listener_by_callback
_unregister_event = getattr(monitoring, "unregister_event_listener", None) or \
    _monitoring._unregister_event_listener_by_callback

TRACE = "/jax/core/compile/jaxpr_trace_duration"
LOWER = "/jax/core/compile/jaxpr_to_mlir_module_duration"
COMPILE = "/jax/core/compile/backend_compile_duration"
CACHE_HIT = "/jax/compilation_cache/cache_hits"
CACHE_MISS = "/jax/compilation_cache/cache_misses"
PHASES = ("trace", "lower", "compile", "run")


def _union_length(spans: Sequence[tuple[float, float]]) -> float:
    total, end = 0.0, float("-inf")
    for a, b in sorted(spans):
        if b <= end:
            continue
        total += b - max(a, end)
        end = b
    return total


class PhaseRecorder:
    """Collects JAX's compile-pipeline spans while active; :meth:`split` attributes them."""

    def __init__(self) -> None:
        self.spans: dict[str, list[tuple[float, float]]] = {TRACE: [], LOWER: [], COMPILE: []}
        self.names: list[str] = []  # what was compiled, in order
        self.events: dict[str, int] = {CACHE_HIT: 0, CACHE_MISS: 0}
        self.t0 = self.t1 = 0.0

    def _on_span(self, event: str, start: float, end: float, **kw: Any) -> None:
        if event in self.spans:
            self.spans[event].append((start, end))
            if event == COMPILE:
                self.names.append(str(kw.get("fun_name", "?")))

    def _on_event(self, event: str, **kw: Any) -> None:
        if event in self.events:
            self.events[event] += 1

    def split(self) -> dict[str, float]:
        """Seconds per phase (``trace``, ``lower``, ``compile``, ``run``), ``total`` and
        ``xla_compiles`` (number of backend compiles, eager per-primitive ones included)."""
        # clipped to the window: a span that began before it (another thread's compile)
        # is not this run's, and the parts never add up to more than the total
        c, lo, t = ([(max(a, self.t0), min(b, self.t1)) for a, b in self.spans[k]
                     if min(b, self.t1) > max(a, self.t0)] for k in (COMPILE, LOWER, TRACE))
        lc, lcl, lall = (_union_length(spans) for spans in (c, c + lo, c + lo + t))
        total = self.t1 - self.t0
        return {"trace": lall - lcl, "lower": lcl - lc, "compile": lc,
                "run": max(total - lall, 0.0), "total": total, "xla_compiles": float(len(c)),
                "cache_hits": float(self.events[CACHE_HIT]),
                "cache_misses": float(self.events[CACHE_MISS])}


@contextmanager
def record_phases() -> Iterator[PhaseRecorder]:
    """``with record_phases() as rec: ...``; then ``rec.split()``."""
    rec = PhaseRecorder()
    monitoring.register_event_time_span_listener(rec._on_span)
    monitoring.register_event_listener(rec._on_event)
    rec.t0 = time.time()  # jax stamps its spans with time.time()
    try:
        yield rec
    finally:
        rec.t1 = time.time()
        _unregister_span(rec._on_span)
        _unregister_event(rec._on_event)
