"""Benchmark suite: what stabledist's lazy-value cache costs and saves against numpyro
(``make bench``, ``python -m benchmarks --help``).

No jax at import time: ``python -m benchmarks`` sets ``JAX_PLATFORMS`` / ``XLA_FLAGS`` from
its options before jax is first imported.
"""

from __future__ import annotations

from benchmarks.config import PROFILES, Profile
from benchmarks.registry import BENCHMARKS

__all__ = ["BENCHMARKS", "PROFILES", "Profile"]
