"""``python -m stabledist.benchmark path/to/file.py:name``: benchmark a user's distribution,
model or jitted function with numpyro's classes and with stabledist's, and print the verdict.

``name`` is looked up in the file (or module): a distribution class or instance is timed
lazy value by lazy value (`stabledist.benchmark.distribution`); a function is a numpyro model
(`stabledist.benchmark.model`) or, with ``--jit``, a function to jit
(`stabledist.benchmark.function`). ``--args NAME`` names what it is called with: a tuple
(positional arguments) or a dict (keywords) in the same file, or a function returning one.
"""

from __future__ import annotations

import argparse
import sys
from typing import Any

from stabledist.benchmark import _child
from stabledist.benchmark._environment import PLATFORMS, configure

QUICK = {"processes": 3, "reps": 3, "rep_ms": 10.0}
"""``--quick``: enough to see a large difference, not to resolve a few percent."""


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m stabledist.benchmark",
        description="Time a distribution's lazy values, or a model's (or jitted function's) "
        "trace, compile and calls, with numpyro's classes and with stabledist's, side by "
        "side on this machine's JAX backend, and print a verdict table (ratio = numpyro "
        "time / stabledist time, with 95%% intervals of paired repetitions).")
    parser.add_argument("target", metavar="path/to/file.py:name | module:name",
                        help="a distribution class or instance, a numpyro model, or (with "
                        "--jit) a function; the file imports stabledist as it would numpyro")
    parser.add_argument("--args", metavar="NAME", help="what the target is called with: a "
                        "tuple, a dict, or a function returning one, defined in the same file")
    parser.add_argument("--jit", action="store_true",
                        help="the target is a function to jit, not a model")
    parser.add_argument("--predictive", type=int, metavar="N",
                        help="also time a jitted Predictive of the model with N samples")
    parser.add_argument("--eager-init", action="store_true",
                        help="draw the model's point eagerly (as single-chain MCMC does), "
                        "not inside jit (as parallel chains do)")
    parser.add_argument("--device", choices=list(PLATFORMS), default="auto",
                        help="JAX's backend: auto (JAX's choice), cpu, gpu (CUDA) or tpu")
    parser.add_argument("--processes", type=int, metavar="N", help="fresh processes per "
                        "library for a model or function (default 6; 3 with --quick)")
    parser.add_argument("--reps", type=int, metavar="N", help="paired repetitions per row "
                        "(default: 10 for a distribution, 5 calls per process for a program)")
    parser.add_argument("--fork", action="store_true",
                        help="fork each fresh process from one per library that has "
                        "imported jax (POSIX; the import is then not measured)")
    parser.add_argument("--quick", action="store_true",
                        help="fewer processes and repetitions (a first look)")
    parser.add_argument("--json", metavar="FILE",
                        help="write every repetition, the rows and the environment as JSON")
    parser.add_argument("--plot", metavar="FILE",
                        help="draw the ratios with their intervals (needs stabledist[bench])")
    return parser


def load(target: str) -> Any:
    """The object ``target`` names, or a one-line exit naming the problem."""
    try:
        return _child.load(target)
    except (ValueError, FileNotFoundError, AttributeError, ImportError) as e:
        raise SystemExit(f"python -m stabledist.benchmark: {e}") from None


def _arguments(target: str, name: str | None) -> tuple[tuple, dict]:
    if name is None:
        return (), {}
    value = load(f"{target.rpartition(':')[0]}:{name}")
    if callable(value):
        value = value()
    if isinstance(value, dict):
        return (), dict(value)
    if isinstance(value, tuple):
        return value, {}
    raise SystemExit(f"--args {name}: expected a tuple or a dict (or a function returning "
                     f"one), not {type(value).__name__}")


def run(ns: argparse.Namespace) -> Any:
    """The report the options ask for."""
    import numpyro.distributions as nd

    from stabledist import benchmark

    obj = load(ns.target)
    args, kwargs = _arguments(ns.target, ns.args)
    sizes: dict[str, Any] = dict(QUICK) if ns.quick else {}
    sizes.update({k: v for k, v in (("reps", ns.reps), ("processes", ns.processes))
                  if v is not None})
    if isinstance(obj, nd.Distribution) or (isinstance(obj, type)
                                            and issubclass(obj, nd.Distribution)):
        sizes.pop("processes", None)
        return benchmark.distribution(obj, *args, **sizes, **kwargs)
    if not callable(obj):
        raise SystemExit(f"{ns.target} is a {type(obj).__name__}: expected a distribution, "
                         "a model or a function")
    if ns.jit:
        return benchmark.function(ns.target, *args, device=ns.device, fork=ns.fork, **sizes,
                                  **kwargs)
    return benchmark.model(ns.target, *args, predictive=ns.predictive, eager_init=ns.eager_init,
                           device=ns.device, fork=ns.fork, **sizes, **kwargs)


def main(argv: list[str] | None = None) -> int:
    ns = _parser().parse_args(argv)
    configure(ns.device)
    import jax

    if ns.device not in ("auto", "cpu") and jax.default_backend() == "cpu":
        print(f"--device {ns.device}: JAX found no {ns.device} (its backend is cpu)",
              file=sys.stderr)
        return 2
    report = run(ns)
    print(report.table())
    if ns.json:
        report.write_json(ns.json)
    if ns.plot:
        report.plot(ns.plot)
    return 0


if __name__ == "__main__":
    sys.exit(main())
