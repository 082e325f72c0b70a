"""Benchmark your own distributions and models: what stabledist's lazy values save, on the
device JAX runs on, measured side by side with numpyro.

* `distribution` times each lazy value of one distribution (the first read, a cache hit, and
  the per-call cost of a jitted function closing over it) with stabledist's class and with
  numpyro's;
* `model` and `function` run a user's program, written once against ``stabledist``, in fresh
  processes with numpyro's classes and with stabledist's, and time its trace, compile and
  per-call cost, and count what each lazy value the trace reads adds to the program.

Both return a `Report` (``print(report)`` shows its verdict table). The command line,
``python -m stabledist.benchmark path/to/file.py:name``, runs either and prints the table.
"""

from stabledist.benchmark._lazy_values import distribution
from stabledist.benchmark._measure import paired_ratio_interval
from stabledist.benchmark._programs import function, model
from stabledist.benchmark._report import LazyRead, Report

__all__ = ["LazyRead", "Report", "distribution", "function", "model", "paired_ratio_interval"]
