"""Sizes and repetition counts of the suite, per profile (no jax import here)."""

from __future__ import annotations

from dataclasses import asdict, dataclass, replace
from typing import Any

BENCHMARKS: dict[str, str] = {
    "lazy": "lazy property read, eager: first read (miss) and repeated read (hit)",
    "flatten": "jax.tree_util flatten + unflatten of every distribution class",
    "dispatch": "jitted function taking a distribution vs the same function taking arrays",
    "closure": "concrete global distribution read inside a compiled function, per call",
    "compile": "trace + compile time of a model that reads lazy properties repeatedly",
    "nuts": "end-to-end NUTS with global priors, parallel chains over devices",
    "memory": "cache size and process RSS over create/read/drop cycles (subprocesses)",
}
"""Benchmark names (``--only``) in run order, with what each measures."""


@dataclass(frozen=True)
class Profile:
    """How long and how large: one instance per ``--smoke/--quick/(default)/--full``."""

    name: str
    # micro-benchmarks (lazy, flatten, dispatch): repetitions, and the target duration of
    # one repetition of one variant, which sets the loop count per repetition
    reps: int
    rep_ms: float
    lazy_limit: int | None  # at most this many (class, property) pairs; None: all
    lazy_per_class: int | None  # at most this many properties per class; None: all
    flatten_limit: int | None  # at most this many classes; None: all
    dispatch_cases: tuple[str, ...]
    # compiled closures: problem sizes, repetitions, target duration of one repetition
    mvn_dims: tuple[int, ...]
    tn_batches: tuple[int, ...]
    sbvm_batches: tuple[int, ...]
    closure_reps: int
    closure_rep_ms: float
    # trace + compile
    compile_dim: int
    compile_reads: int
    compile_reps: int
    cold_reps: int  # fresh-process first compiles per variant
    compile_warmup: bool  # one untimed trace+compile per variant first
    # NUTS
    nuts_warmup: int
    nuts_samples: int
    nuts_reps: int
    nuts_models: tuple[str, ...]
    nuts_prewarm: bool  # one tiny untimed run per variant first (eager-op caches)
    nuts_chains: int | None  # None: one chain per device (at least 2)
    # memory churn
    churn_cycles: int
    churn_points: int
    churn_light: bool  # only the cheap part of the cycle (smoke: fewer cold compiles)

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


_DISPATCH = ("Normal", "MultivariateNormal", "TruncatedNormal", "MixtureSameFamily")

DEFAULT = Profile(
    name="default",
    reps=21,
    rep_ms=2.5,
    lazy_limit=None,
    lazy_per_class=None,
    flatten_limit=None,
    dispatch_cases=_DISPATCH,
    mvn_dims=(16, 64, 256, 1024, 2048),
    tn_batches=(100, 1_000, 10_000, 100_000, 1_000_000),
    sbvm_batches=(100, 1_000, 10_000, 100_000, 1_000_000),
    closure_reps=9,
    closure_rep_ms=20.0,
    compile_dim=32,
    compile_reads=16,
    compile_reps=5,
    cold_reps=2,
    compile_warmup=True,
    nuts_warmup=300,
    nuts_samples=300,
    nuts_reps=3,
    nuts_models=("regression", "angles"),
    nuts_prewarm=True,
    nuts_chains=None,
    churn_cycles=100_000,
    churn_points=100,
    churn_light=False,
)

PROFILES: dict[str, Profile] = {
    "smoke": replace(
        DEFAULT,
        name="smoke",
        reps=3,
        rep_ms=0.3,
        lazy_limit=3,
        flatten_limit=4,
        dispatch_cases=("Normal",),
        mvn_dims=(16,),
        tn_batches=(),
        sbvm_batches=(),
        closure_reps=3,
        closure_rep_ms=0.5,
        compile_dim=2,
        compile_reads=1,
        compile_reps=1,
        cold_reps=0,
        compile_warmup=False,
        nuts_warmup=5,
        nuts_samples=5,
        nuts_reps=1,
        nuts_models=("tiny",),
        nuts_prewarm=False,
        nuts_chains=1,
        churn_cycles=200,
        churn_points=5,
        churn_light=True,
    ),
    "quick": replace(
        DEFAULT,
        name="quick",
        reps=9,
        rep_ms=0.8,
        lazy_limit=15,
        lazy_per_class=1,
        flatten_limit=40,
        mvn_dims=(16, 1024),
        tn_batches=(100, 100_000),
        sbvm_batches=(100, 100_000),
        closure_reps=5,
        closure_rep_ms=5.0,
        compile_dim=8,
        compile_reads=4,
        compile_reps=2,
        cold_reps=0,
        nuts_warmup=100,
        nuts_samples=100,
        nuts_reps=1,
        nuts_models=("regression",),
        churn_cycles=5_000,
        churn_points=20,
    ),
    "default": DEFAULT,
    "full": replace(
        DEFAULT,
        name="full",
        reps=31,
        rep_ms=5.0,
        mvn_dims=(16, 32, 64, 128, 256, 512, 1024, 2048),
        tn_batches=(100, 300, 1_000, 3_000, 10_000, 30_000, 100_000, 300_000, 1_000_000),
        sbvm_batches=(100, 1_000, 10_000, 100_000, 1_000_000),
        closure_reps=11,
        closure_rep_ms=50.0,
        compile_dim=64,
        compile_reads=32,
        compile_reps=9,
        cold_reps=3,
        nuts_warmup=1000,
        nuts_samples=1000,
        nuts_reps=3,
        churn_cycles=300_000,
        churn_points=150,
    ),
}
