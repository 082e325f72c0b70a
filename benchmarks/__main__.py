"""``python -m benchmarks`` (``make bench``): run the suite, print the summary, write results.

Options are parsed and the environment is set *before* jax is imported; see ``--help``.
"""

from __future__ import annotations

import argparse
import datetime as dt
import os
import sys
from pathlib import Path

from benchmarks.config import BENCHMARKS, PROFILES
from benchmarks.environment import configure


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog="python -m benchmarks",
        description="Benchmark stabledist against numpyro.distributions (and a no-cache "
        "baseline), interleaved in one run. Writes results.json, report.md and bench-*.png "
        "into the output folder and prints a summary table with target pass/fail lines.",
        epilog="Benchmarks: " + "; ".join(f"{k}: {v}" for k, v in BENCHMARKS.items()),
    )
    size = parser.add_mutually_exclusive_group()
    size.add_argument("--quick", dest="profile", action="store_const", const="quick",
                      help="fewer sizes and repetitions (1-2 minutes on 2 cores)")
    size.add_argument("--full", dest="profile", action="store_const", const="full",
                      help="more sizes and repetitions (about half an hour on 2 cores)")
    size.add_argument("--smoke", dest="profile", action="store_const", const="smoke",
                      help="tiny sizes, only to check that the code runs (used by the tests)")
    parser.set_defaults(profile="default")
    parser.add_argument("--device", choices=("auto", "cpu", "gpu", "tpu"), default="auto",
                        help="JAX backend: auto (JAX's choice), or sets JAX_PLATFORMS "
                        "(gpu = CUDA; for ROCm run with JAX_PLATFORMS=rocm and --device auto)")
    parser.add_argument("--only", default=None, metavar="NAME[,NAME]",
                        help="run only these benchmarks: " + ",".join(BENCHMARKS))
    parser.add_argument("--out", default=None, metavar="DIR",
                        help="output folder (default: results/<timestamp>, git-ignored)")
    parser.add_argument("--host-devices", type=int, default=os.cpu_count() or 1, metavar="N",
                        help="XLA host (CPU) devices, i.e. parallel NUTS chains on CPU "
                        "(default: the CPU count)")
    ns = parser.parse_args(argv)
    if ns.only:
        names = [n.strip() for n in ns.only.split(",") if n.strip()]
        unknown = [n for n in names if n not in BENCHMARKS]
        if unknown:
            parser.error(f"unknown benchmark(s) {unknown}; choose from {list(BENCHMARKS)}")
        ns.only = names
    else:
        ns.only = list(BENCHMARKS)
    if ns.host_devices < 1:
        parser.error("--host-devices must be at least 1")
    if ns.out is None:
        stamp = dt.datetime.now().strftime("%Y%m%d-%H%M%S")
        ns.out = str(Path("results") / stamp)
    return ns


def main(argv: list[str] | None = None) -> int:
    ns = parse_args(argv)
    configure(ns.device, ns.host_devices)
    from benchmarks.runner import run  # imports jax, after configure()

    return run(PROFILES[ns.profile], ns.only, Path(ns.out), ns.device,
               " ".join(["python -m benchmarks", *(sys.argv[1:] if argv is None else argv)]))


if __name__ == "__main__":
    sys.exit(main())
