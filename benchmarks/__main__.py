"""``python -m benchmarks`` (``make bench``): run the suite, print the summary, write results.

Options are parsed and the environment is set *before* jax is imported; see ``--help``.
"""

from __future__ import annotations

import argparse
import dataclasses
import datetime as dt
import os
import sys
from pathlib import Path

from benchmarks.config import DEADLINE_MIN, PROFILES, Profile
from benchmarks.registry import BENCHMARKS
from stabledist.benchmark._environment import configure


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m benchmarks",
        description="Benchmark stabledist against numpyro.distributions (and a no-cache "
        "baseline), interleaved in one run. Writes results.json, report.md and bench-*.png "
        "into the output folder and prints a verdict table (one unit per column and group), "
        "the targets' PASS/FAIL lines and a one-line verdict. Exit status 0 when the run "
        "completes, unless --strict and a target failed (3).",
        epilog="Benchmarks: " + "; ".join(f"{k}: {v.summary}" for k, v in BENCHMARKS.items()),
    )
    size = parser.add_mutually_exclusive_group()
    size.add_argument("--quick", dest="profile", action="store_const", const="quick",
                      help="fewer sizes and repetitions (about 2 minutes on 2 cores)")
    size.add_argument("--full", dest="profile", action="store_const", const="full",
                      help="more sizes and repetitions: NUTS, batch 1,000,000, 10,000 sample "
                      "sites, pytrees of 100,000 (about an hour on 2 cores)")
    size.add_argument("--smoke", dest="profile", action="store_const", const="smoke",
                      help="tiny sizes, only to check that the code runs (used by the tests)")
    size.add_argument("--default", dest="profile", action="store_const", const="default",
                      help="the default profile (about 3 minutes on 2 cores) even with --device "
                      "gpu/tpu, which otherwise runs it with the H200's end-to-end rows, "
                      "planned for a 10-minute device lease (profile 'accelerator')")
    parser.set_defaults(profile=None)
    parser.add_argument("--device", choices=("auto", "cpu", "gpu", "tpu"), default="auto",
                        help="JAX backend: auto (JAX's choice), or sets JAX_PLATFORMS "
                        "(gpu = CUDA; for ROCm run with JAX_PLATFORMS=rocm and --device auto)")
    parser.add_argument("--deadline", type=float, default=None, metavar="MIN",
                        help="skip a benchmark that would end after MIN minutes from the "
                        "start, and stop a running one at its next step after it, keeping "
                        f"what it measured (default with --device gpu/tpu: {DEADLINE_MIN:g}; "
                        "else none; 0: none)")
    parser.add_argument("--only", default=None, metavar="NAME[,NAME]",
                        help="run only these benchmarks: " + ",".join(BENCHMARKS))
    parser.add_argument("--out", default=None, metavar="DIR",
                        help="output folder (default: results/<timestamp>, git-ignored)")
    parser.add_argument("--strict", action=argparse.BooleanOptionalAction, default=None,
                        help="exit with status 3 when a target fails (default with --publish; "
                        "CI's smoke step: --smoke --strict); without it, or with --no-strict, "
                        "a completed run exits 0 and only a benchmark that raises (status 1) "
                        "fails the run")
    parser.add_argument("--publish", action="store_true",
                        help="after the run, rewrite the results in docs/benchmarks.md and "
                        "docs/img/ (states the commit measured; refuses uncommitted changes "
                        "under stabledist/ or benchmarks/ unless --allow-dirty, and a run "
                        "during which the commit changed); `make release-check` then says "
                        "whether the page measured the code as it is")
    parser.add_argument("--allow-dirty", action="store_true",
                        help="with --publish: publish even with uncommitted code changes")
    parser.add_argument("--host-devices", type=int, default=os.cpu_count() or 1, metavar="N",
                        help="XLA host (CPU) devices, i.e. parallel NUTS chains on CPU "
                        "(default: the CPU count)")
    parser.add_argument("--e2e-reps", type=int, default=None, metavar="N",
                        help="repetitions per end-to-end row (default: the profile's: 5; 1 "
                        "with --quick, 2 on an accelerator); one program's compile time "
                        "varies by up to 15%% from run to run on a 2-core machine, so "
                        "resolving a few percent takes ~10")
    return parser


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    """The options, checked, with the defaults that depend on ``--device`` resolved."""
    parser = _parser()
    ns = parser.parse_args(argv)
    if ns.e2e_reps is not None and ns.e2e_reps < 1:
        parser.error("--e2e-reps must be at least 1")
    accelerator = ns.device in ("gpu", "tpu")
    ns.profile = ns.profile or ("accelerator" if accelerator else "default")
    ns.only = ([n.strip() for n in ns.only.split(",") if n.strip()] if ns.only
               else [n for n in BENCHMARKS  # the page shows every benchmark
                     if ns.publish or n not in PROFILES[ns.profile].left_out])
    if unknown := [n for n in ns.only if n not in BENCHMARKS]:
        parser.error(f"unknown benchmark(s) {unknown}; choose from {list(BENCHMARKS)}")
    if ns.host_devices < 1:
        parser.error("--host-devices must be at least 1")
    if ns.deadline is None:
        ns.deadline = DEADLINE_MIN if accelerator else 0.0
    if ns.deadline < 0:
        parser.error("--deadline must be at least 0")
    if ns.strict is None:  # published numbers come with their verdict in the exit status
        ns.strict = ns.publish
    if ns.out is None:
        ns.out = str(Path("results") / dt.datetime.now().strftime("%Y%m%d-%H%M%S"))
    return ns


def profile_of(ns: argparse.Namespace) -> Profile:
    """The profile the options name, with ``--e2e-reps`` applied (`Profile.label` says so)."""
    profile = PROFILES[ns.profile]
    return profile if ns.e2e_reps is None else dataclasses.replace(profile, e2e_reps=ns.e2e_reps)


def main(argv: list[str] | None = None) -> int:
    ns = parse_args(argv)
    if ns.publish:
        from benchmarks.release import dirty_code

        if (dirty := dirty_code()) and not ns.allow_dirty:
            print("--publish: uncommitted changes under stabledist/ or benchmarks/ (commit "
                  "them first, or --allow-dirty):\n  " + "\n  ".join(dirty), file=sys.stderr)
            return 2
    configure(ns.device, ns.host_devices)
    from benchmarks.runner import run  # jax starts after configure()

    status, payload = run(profile_of(ns), ns.only, Path(ns.out), ns.device,
                          " ".join(["python -m benchmarks",
                                    *(sys.argv[1:] if argv is None else argv)]),
                          strict=ns.strict, deadline_s=ns.deadline * 60 or None)
    if ns.publish and payload:
        from benchmarks.publish import publish
        from stabledist.benchmark._environment import git_commit

        measured, now = payload["environment"].get("git_commit"), git_commit()
        if measured != now:  # a commit during the run: the numbers are of neither
            print(f"--publish: the commit changed during the run ({measured} -> {now}); "
                  "nothing published", file=sys.stderr)
            return 2
        doc = publish(payload, Path(ns.out), payload.get("plots", []))
        print(f"published the results into {doc} and docs/img/ (commit {measured}); commit "
              "them with `git add docs/benchmarks.md docs/img && git commit`")
    return status


if __name__ == "__main__":
    sys.exit(main())
