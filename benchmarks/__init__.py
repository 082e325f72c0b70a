"""Benchmark suite: what stabledist's lazy-value cache costs and saves against numpyro.

Run it with ``make bench`` (or ``python -m benchmarks --help``). Every benchmark measures
stabledist, upstream ``numpyro.distributions`` and, where it applies, a no-cache baseline
*interleaved in one process*, after warm-up, and reports per-repetition numbers, medians,
spreads and pair-by-pair ratios (see :mod:`benchmarks.timing`).

This package must not import jax at import time: ``python -m benchmarks`` sets
``JAX_PLATFORMS`` / ``XLA_FLAGS`` from its options before jax is first imported.
"""

from __future__ import annotations

from benchmarks.config import PROFILES, Profile
from benchmarks.registry import BENCHMARKS

__all__ = ["BENCHMARKS", "PROFILES", "Profile"]
