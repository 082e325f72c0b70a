"""Sizes and repetition counts of the suite, per profile (no jax import here).

``--device gpu`` (or ``tpu``) without a size option runs `ACCELERATOR`, the default profile
with other end-to-end rows, planned to fit a 10-minute device lease.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
"""The repository's root: the page the suite publishes, the commit it measured."""


@dataclass(frozen=True)
class Profile:
    """How long and how large: one instance per ``--smoke/--quick/(default)/--full``."""

    name: str
    # benchmarks it leaves out unless ``--only`` names them or ``--publish`` writes the page:
    # the descriptive ones (no target of their own)
    left_out: tuple[str, ...]
    # micro-benchmarks (lazy, flatten, dispatch): repetitions, ms per repetition and variant
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
    first_reps: int  # first calls of new closures: repetitions (fresh distribution and jit)
    # closed-over constants: (family, size), JAX's simplified constants off and on
    constants_cases: tuple[tuple[str, int], ...]
    # end-to-end inference
    e2e_warmup: int
    e2e_samples: int
    e2e_svi_steps: int
    e2e_reps: int
    e2e_models: tuple[str, ...]
    e2e_methods: tuple[str, ...]  # "NUTS", "SVI"
    e2e_prewarm: bool  # one tiny untimed run per variant first (eager-op caches)
    e2e_chains: int | None  # None: one chain per device (at least 2)
    pcache_reps: int  # persistent cache: (first, second process) pairs per variant
    import_reps: int  # the import: pairs of fresh processes
    # memory churn
    churn_cycles: int
    churn_points: int
    churn_light: bool  # only the cheap part of the cycle (smoke: fewer cold compiles)
    # scale: many sample sites in one trace, large pytrees, many live instances
    scale_sites: tuple[int, ...]  # trace time of the unrolled many-site model
    scale_compile_sites: tuple[int, ...]  # its trace + lower + compile and per call (small)
    scale_fresh_sites: tuple[int, ...]  # its first trace and compile in fresh processes
    scale_fresh_processes: int  # fresh processes per library for each of those
    scale_plate: tuple[int, ...]  # the same model written with a plate: sites per plate
    scale_tree: tuple[int, ...]  # distributions in one pytree: flatten, unflatten, tree_map
    scale_reps: int  # repetitions per variant of each of those
    scale_memory: int  # live instances for memory per instance (fresh process)
    scale_cycles: tuple[int, ...]  # instances per create/drop cycle (gc counts, fresh process)
    scale_shapes: int  # distinct shapes traced for the hoisting tables
    scale_classes: int | None  # catalog examples whose lazy values are read (None: all)
    # timing targets judged, or N/A (smoke: its tiny repetitions resolve nothing)
    judge_timing: bool

    @property
    def label(self) -> str:
        """The name, with every field an option changed from that profile spelled out
        (``--e2e-reps 10``: "default, e2e_reps=10"), since reports and the docs state it."""
        base = PROFILES.get(self.name)
        changed = [] if base is None else [
            f"{k}={v}" for k, v in asdict(self).items() if v != getattr(base, k)]
        return ", ".join([self.name, *changed])

    def as_dict(self) -> dict[str, Any]:
        return {**asdict(self), "label": self.label}

    @classmethod
    def from_dict(cls, fields: dict[str, Any]) -> Profile:
        """The profile `dataclasses.asdict` gave, back from JSON (lists to tuples)."""
        def tuples(v: Any) -> Any:
            return tuple(map(tuples, v)) if isinstance(v, list) else v

        return cls(**{k: tuples(v) for k, v in fields.items()})


DEFAULT = Profile(
    name="default", left_out=("constants",), reps=9, rep_ms=1.0, lazy_limit=None,
    lazy_per_class=None, flatten_limit=None,
    dispatch_cases=("Normal", "MultivariateNormal", "TruncatedNormal", "MixtureSameFamily"),
    mvn_dims=(16, 1024), tn_batches=(100, 10_000), sbvm_batches=(100, 10_000),
    closure_reps=7, closure_rep_ms=10.0, first_reps=3,
    constants_cases=(("truncnormal_logp", 100_000), ("mvn_precision", 1024)),
    e2e_warmup=200, e2e_samples=200, e2e_svi_steps=500, e2e_reps=5,
    e2e_models=("gp_predict",), e2e_methods=("SVI",), e2e_prewarm=True,
    e2e_chains=None,
    pcache_reps=1, import_reps=4, churn_cycles=5_000, churn_points=25, churn_light=False,
    scale_sites=(10, 30), scale_compile_sites=(10, 30), scale_fresh_sites=(60,),
    scale_fresh_processes=3, scale_plate=(1_000, 10_000),
    scale_tree=(100, 1_000, 2_000), scale_reps=5, scale_memory=2_000, scale_cycles=(1_000,),
    scale_shapes=4, scale_classes=3, judge_timing=True,
)
"""A verdict on every target in about 3 minutes on 2 cores; the long runs (NUTS, batch
1,000,000, cold compiles, 10,000 sample sites, pytrees of 100,000) are `--full`'s."""

PROFILES: dict[str, Profile] = {
    "smoke": replace(
        DEFAULT, name="smoke", left_out=(),
        reps=3, rep_ms=0.3, lazy_limit=3, flatten_limit=4, dispatch_cases=("Normal",),
        mvn_dims=(16,), tn_batches=(), sbvm_batches=(),
        closure_reps=3, closure_rep_ms=0.5, first_reps=1, constants_cases=(("mvn_precision", 16),),
        e2e_warmup=5, e2e_samples=5, e2e_svi_steps=5, e2e_reps=1, e2e_models=("tiny",),
        e2e_methods=("SVI",),  # NUTS compiles for long; the quick profile runs it
        e2e_prewarm=False, e2e_chains=1,
        pcache_reps=0,  # retraces only: the cross-process pairs start 4 Python processes
        import_reps=2, churn_cycles=200, churn_points=5, churn_light=True,
        scale_sites=(3, 9), scale_compile_sites=(3,), scale_fresh_sites=(),
        scale_plate=(30,), scale_tree=(30, 90),
        scale_reps=2, scale_memory=300, scale_cycles=(100,), scale_shapes=4, scale_classes=2,
        judge_timing=False,
    ),
    "quick": replace(
        DEFAULT, name="quick",
        reps=7, rep_ms=0.8, lazy_limit=15, lazy_per_class=1, flatten_limit=40,
        mvn_dims=(16, 1024), tn_batches=(100,), sbvm_batches=(100,),
        closure_reps=5, closure_rep_ms=5.0, first_reps=2, constants_cases=(("mvn_precision", 256),),
        e2e_warmup=100, e2e_samples=100, e2e_svi_steps=300, e2e_reps=1,
        e2e_models=("gp_predict",),
        pcache_reps=0,  # retraces only: the cross-process pairs start 4 Python processes
        import_reps=6, churn_cycles=2_000, churn_points=20,
        scale_sites=(10, 30), scale_compile_sites=(10,), scale_fresh_sites=(), scale_plate=(1_000,),
        scale_tree=(100, 1_000), scale_reps=3, scale_memory=1_000, scale_cycles=(1_000,),
        scale_shapes=4, scale_classes=3,
    ),
    "default": DEFAULT,
    "full": replace(
        DEFAULT, name="full", left_out=(),
        reps=31, rep_ms=5.0, mvn_dims=(16, 32, 64, 128, 256, 512, 1024, 2048),
        tn_batches=(100, 300, 1_000, 3_000, 10_000, 30_000, 100_000, 300_000, 1_000_000),
        sbvm_batches=(100, 1_000, 10_000, 100_000, 1_000_000),
        closure_reps=11, closure_rep_ms=50.0, first_reps=5,
        constants_cases=(("truncnormal_logp", 10_000), ("truncnormal_logp", 300_000),
                         ("truncnormal_logp", 1_000_000), ("mvn_precision", 512),
                         ("mvn_precision", 2048)),
        e2e_warmup=1000, e2e_samples=1000, e2e_svi_steps=5000, e2e_reps=6,
        e2e_models=("gp", "hierarchical", "regression", "statespace", "angles", "gp_predict"),
        e2e_methods=("NUTS", "SVI"),
        pcache_reps=4, import_reps=40, churn_cycles=300_000, churn_points=150,
        scale_sites=(100, 1_000, 10_000), scale_compile_sites=(10, 30, 100),
        scale_fresh_sites=(30, 60, 300), scale_fresh_processes=6,
        scale_plate=(1_000, 100_000, 1_000_000), scale_tree=(100, 1_000, 10_000, 100_000),
        scale_reps=5, scale_memory=100_000, scale_cycles=(1_000, 10_000, 100_000),
        scale_shapes=200, scale_classes=None,
    ),
}

ACCELERATOR_CHANGES: dict[str, Any] = {
    "e2e_reps": 2,
    "e2e_models": ("regression", "angles", "gp_predict"),
    "e2e_methods": ("NUTS", "SVI"),
}
"""What `ACCELERATOR` changes in the default profile: the end-to-end rows of the three
models whose results differ most between the libraries on a GPU, NUTS and SVI, two
repetitions each; a GPU's host cores run the rest of the default profile in minutes."""

ACCELERATOR = replace(DEFAULT, name="accelerator", **ACCELERATOR_CHANGES)
"""The default profile on an accelerator (``--device gpu|tpu`` without a size option)."""

PROFILES["accelerator"] = ACCELERATOR

DEADLINE_MIN = 9.0
"""``--device gpu|tpu``: the default ``--deadline`` in minutes (a minute of a 10-minute
lease left for the start, the report and the plots)."""


def accelerator_note(profile: Profile) -> str:
    """What the accelerator profile changes, in one line (empty for another profile)."""
    if profile.name != "accelerator":
        return ""
    changed = [f"{k} {getattr(DEFAULT, k)} -> {getattr(profile, k)}"
               for k in ACCELERATOR_CHANGES if getattr(profile, k) != getattr(DEFAULT, k)
               and k not in ("e2e_models", "e2e_methods")]
    if profile.e2e_methods != DEFAULT.e2e_methods:
        changed.append("e2e methods " + " and ".join(profile.e2e_methods))
    dropped = [m for m in DEFAULT.e2e_models if m not in profile.e2e_models]
    if dropped:
        changed.append("e2e models without " + ", ".join(dropped))
    added = [m for m in profile.e2e_models if m not in DEFAULT.e2e_models]
    if added:
        changed.append("e2e models with " + ", ".join(added))
    return ("profile 'accelerator': the default profile with the end-to-end rows of the H200 "
            "runs, planned to fit a 10-minute device lease (" + "; ".join(changed)
            + "); --default runs the default profile")
