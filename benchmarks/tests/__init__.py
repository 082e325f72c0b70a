"""The benchmark's own tests (``make test-bench``), beside the benchmarks, out of ``make test``."""
