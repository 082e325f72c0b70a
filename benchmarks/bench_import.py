"""The import: ``import stabledist`` against ``import numpyro.distributions``, in pairs of
fresh processes run at once: each times its one import statement (jax's own included, as a
user's first line pays it), its peak RSS, and whether the import started a JAX backend (it
must not: a user configures devices after the imports). No jax in this module.
"""

from __future__ import annotations

import os
import statistics
import subprocess
import sys

from benchmarks.child import result
from benchmarks.config import ROOT, Profile
from stabledist.benchmark._environment import subprocess_env
from stabledist.benchmark._measure import BenchResult, Case, paired_ratio_interval, progress, step
from stabledist.benchmark._rows import Row, Verdict, make_row, single

MODULES = {"numpyro": "numpyro.distributions", "stabledist": "stabledist"}

MAX_RATIO = 1.10
"""stabledist's import at most this times numpyro.distributions' wall time (issue 42)."""
MAX_EXTRA_MIB = 10.0
"""stabledist's peak RSS after its import at most this above numpyro.distributions'."""

_CHILD = """
import json, resource, sys, time
t = time.perf_counter()
import {module}
seconds = time.perf_counter() - t
from jax._src import xla_bridge
print(json.dumps({{"seconds": seconds,
                  "peak_mib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
                  "backends": sorted(getattr(xla_bridge, "_backends", None) or ())}}))
"""


def _spawn(module: str) -> subprocess.Popen[str]:
    """One fresh process importing ``module`` (nothing else: not `benchmarks.child`)."""
    return subprocess.Popen([sys.executable, "-c", _CHILD.format(module=module)], text=True,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            env=subprocess_env(ROOT))


def _pair(order: list[str]) -> dict[str, dict[str, float | list[str]]]:
    """The two processes of a pair (``order``: which starts first), their import time, peak
    RSS and started backends: at once, one per core, where there are two cores (both under
    the very same conditions; measured on 2 cores, an import beside another takes 3% longer
    than alone), else one after the other."""
    if (os.cpu_count() or 1) < 2:
        return {v: result(_spawn(MODULES[v]), f"import {MODULES[v]}", timeout=300) for v in order}
    procs = {v: _spawn(MODULES[v]) for v in order}
    return {v: result(proc, f"import {MODULES[v]}", timeout=300) for v, proc in procs.items()}


def bench_import(profile: Profile) -> BenchResult:
    result = BenchResult(name="import",
                         title=f"The import, {profile.import_reps} pairs of fresh processes",
                         unit="ms", variants={"numpyro": "import numpyro.distributions",
                                              "stabledist": "import stabledist"},
                         nocache="not applicable (nothing is cached at import)")
    runs: dict[str, list[dict[str, float | list[str]]]] = {v: [] for v in MODULES}
    for rep in range(profile.import_reps):
        step(f"import: pair {rep + 1} of {profile.import_reps} of fresh processes")
        order = list(MODULES) if rep % 2 == 0 else list(MODULES)[::-1]
        for variant, found in _pair(order).items():
            runs[variant].append(found)
    progress(f"import: {profile.import_reps} pairs done")
    result.cases.append(Case("import wall time", {"kind": "time", "unit": "ms"},
                             {v: [1e3 * float(r["seconds"]) for r in rs]
                              for v, rs in runs.items()}))
    result.cases.append(Case("peak RSS after the import", {"kind": "memory", "unit": "MiB"},
                             {v: [float(r["peak_mib"]) for r in rs] for v, rs in runs.items()}))
    result.extra["backends"] = {v: sorted({b for r in rs for b in r["backends"]})
                                for v, rs in runs.items()}
    return result


def import_rows(res: BenchResult) -> list[Row]:
    """The wall-time row (paired, numpyro/stabledist with its interval) and the peak-RSS row."""
    rows = []
    for case in res.cases:
        if case.params["kind"] == "time":
            started = res.extra["backends"]["stabledist"]
            # not judged by "no row slower": importing stabledist imports numpyro.distributions
            # and then its own modules, so it cannot be as fast; `import_target` bounds it
            rows.append(single(res.name, case, "ms", judged=False,
                               note="backends started by the import: "
                               + (", ".join(started) if started else "none")))
        else:
            rows.append(make_row(res.name, case.name, "MiB", numpyro=case.median("numpyro"),
                                 stabledist=case.median("stabledist"), speed=False,
                                 note=f"median of paired differences {_extra_mib(case):+.1f} MiB"))
    return rows


def import_target(res: BenchResult) -> Verdict | None:
    """At most `MAX_RATIO` x numpyro.distributions' wall time (median of the paired ratios,
    with the 95% interval beside it), at most `MAX_EXTRA_MIB` more peak RSS, no backend."""
    time, memory = res.case("import wall time"), res.case("peak RSS after the import")
    if time is None or memory is None:
        return None
    ratio = time.ratio_median("stabledist", "numpyro")
    iv = paired_ratio_interval(time.samples["stabledist"], time.samples["numpyro"])
    extra = _extra_mib(memory)
    started = res.extra["backends"]["stabledist"]
    interval = "" if iv["lo"] is None else f" (95% interval {iv['lo']:.2f}-{iv['hi']:.2f}x)"
    return Verdict(f"{ratio:.3f}x wall, {extra:+.1f} MiB",
                   ratio <= MAX_RATIO and extra <= MAX_EXTRA_MIB and not started,
                   f"median of {len(time.samples['stabledist'])} paired fresh processes"
                   f"{interval}; numpyro.distributions {time.median('numpyro'):.0f} ms, "
                   f"stabledist {time.median('stabledist'):.0f} ms; backends started: "
                   + (", ".join(started) if started else "none"))


def _extra_mib(case: Case) -> float:
    a, b = case.samples["stabledist"], case.samples["numpyro"]
    return statistics.median(x - y for x, y in zip(a, b))
