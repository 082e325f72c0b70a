"""Self-check for ``stabledist/testing/catalog.py`` against the installed numpyro.

Plain script (leading underscore: not collected by pytest).  Run with

    .venv/bin/python tests/_catalog_selfcheck.py [-v]

For every catalog entry (main examples and variants) it builds the numpyro instance, samples
with a fixed key, checks shapes and that ``log_prob`` of the sample is finite, probes the
optional methods and prints a table.  It also checks that examples + ``EXCLUDED`` equal the
public names derived from ``numpyro.distributions.__all__``, that builders load no global
other than plain-array helpers (so everything is built through the module argument), and
lists instance attributes missing from the pytree field declarations.  Exits 1 on failure.
"""

from __future__ import annotations

import dis
import sys
import traceback
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np
import numpyro.distributions as nd

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from stabledist.testing import catalog

KEY = jax.random.PRNGKey(0)
ABBREV = {
    "sample": "S",
    "log_prob": "L",
    "mean": "M",
    "variance": "V",
    "cdf": "C",
    "icdf": "I",
    "entropy": "E",
    "enumerate_support": "N",
}
# Globals a builder may load: array helpers only, never a distribution class or numpyro itself.
ALLOWED_GLOBALS = {
    "V",
    "_a",
    "_i",
    "_cov2",
    "_cov3",
    "_corr3",
    "_ring_adjacency",
    "_ou_sde",
    "jnp",
    "np",
}


def builder_globals(fn) -> set[str]:
    """Names loaded with LOAD_GLOBAL by ``fn`` (lambdas have no nested code objects here)."""
    return {i.argval for i in dis.get_instructions(fn) if i.opname == "LOAD_GLOBAL"}


def pytree_extra_attrs(d) -> set[str]:
    cls = type(d)
    return (
        set(vars(d))
        - set(cls.gather_pytree_data_fields())
        - set(cls.gather_pytree_aux_fields())
        - {"_batch_shape", "_event_shape", "_validate_args"}
    )


def check_one(ident: str, builder) -> tuple[str, list[str], set[str], set[str]]:
    """Return (table row, failures, extra attrs at construction, extra attrs after use)."""
    base_name = ident.split("[")[0]
    failures: list[str] = []
    bad_globals = builder_globals(builder) - ALLOWED_GLOBALS
    if bad_globals:
        failures.append(f"builder loads globals {sorted(bad_globals)}")
    d = builder(nd)
    if not isinstance(d, nd.Distribution):
        return f"{ident:34s} NOT A DISTRIBUTION: {type(d)}", [f"returned {type(d)}"], set(), set()
    extra_at_init = pytree_extra_attrs(d)  # before any lazy_property gets cached
    cls = type(d).__name__
    if base_name in catalog.LOG_PROB_VALUES:
        value = catalog.LOG_PROB_VALUES[base_name]()
    else:
        value = d.sample(KEY)
        expected = d.batch_shape + d.event_shape
        if jnp.shape(value) != expected:
            failures.append(f"sample shape {jnp.shape(value)} != {expected}")
    methods = catalog.supported_methods(d, KEY, value)
    if "sample" not in methods and base_name not in catalog.NOTES:
        failures.append("sample not implemented")
    if "log_prob" not in methods:
        failures.append("log_prob not implemented")
    else:
        lp = d.log_prob(value)
        if jnp.shape(lp) != d.batch_shape:
            failures.append(f"log_prob shape {jnp.shape(lp)} != batch {d.batch_shape}")
        if not bool(jnp.all(jnp.isfinite(lp))):
            failures.append(f"log_prob not finite: {np.asarray(lp)}")
    # the constructor really validated: arg_constraints hold
    for p, c in d.arg_constraints.items():
        if p in vars(d) or isinstance(getattr(type(d), p, None), property):
            v = getattr(d, p)
            if v is None or not hasattr(c, "check") or c is nd.constraints.dependent:
                continue
            try:
                ok = c.check(v)
            except Exception:  # dependent constraints etc.
                continue
            if not bool(jnp.all(ok)):
                failures.append(f"arg_constraint {p} violated")
    flags = "".join(ABBREV[m] if m in methods else "." for m in catalog.METHODS)
    row = f"{ident:34s} {cls:30s} {d.batch_shape!s:8s} {d.event_shape!s:8s} {flags}"
    return row, failures, extra_at_init, pytree_extra_attrs(d) - extra_at_init


def main(verbose: bool = False) -> int:
    failures: dict[str, list[str]] = {}

    # 1. coverage: examples + excluded == derived public names
    classes, factories = catalog.public_names(nd)
    public = set(classes) | set(factories)
    covered = set(catalog.EXAMPLES)
    excluded = set(catalog.EXCLUDED)
    if covered & excluded:
        failures["<coverage>"] = [f"both example and excluded: {sorted(covered & excluded)}"]
    if covered | excluded != public:
        failures.setdefault("<coverage>", []).append(
            f"missing {sorted(public - covered - excluded)}, "
            f"unknown {sorted((covered | excluded) - public)}"
        )
    if set(catalog.VARIANTS) - covered:
        failures["<variants>"] = [f"variants of unknown names {set(catalog.VARIANTS) - covered}"]
    for bad in ("Distribution", "NoSuchDistribution"):
        try:
            catalog.example(bad, nd)
        except KeyError:
            pass
        else:
            failures.setdefault("<example()>", []).append(f"no KeyError for {bad}")
    print(
        f"public: {len(classes)} classes + {len(factories)} factories; "
        f"{len(covered)} examples, {len(excluded)} excluded, "
        f"{sum(map(len, catalog.VARIANTS.values()))} variants\n"
    )

    # 2. per-entry checks
    header = f"{'id':34s} {'class':30s} {'batch':8s} {'event':8s} " + "".join(
        ABBREV[m] for m in catalog.METHODS
    )
    print(header)
    print("-" * len(header))
    extras: dict[str, set[str]] = {}
    cached: dict[str, set[str]] = {}
    for ident, builder in catalog.all_builders():
        try:
            row, fails, extra, later = check_one(ident, builder)
        except Exception as e:
            row, fails = f"{ident:34s} ERROR", [f"{type(e).__name__}: {e}"]
            extra, later = set(), set()
            if verbose:
                traceback.print_exc()
        print(row + ("   <-- FAIL" if fails else ""))
        if fails:
            failures[ident] = fails
        if extra:
            extras[ident] = extra
        if later:
            cached[ident] = later
    print("\nlegend: " + ", ".join(f"{v}={k}" for k, v in ABBREV.items()))

    # 3. informational: attributes not declared as pytree fields
    print("\nset by __init__ but not in gather_pytree_data_fields/aux_fields:")
    for ident, extra in extras.items():
        print(f"  {ident:34s} {sorted(extra)}")
    if verbose:
        print("\nadded to vars() later by method calls (lazy_property caches):")
        for ident, extra in cached.items():
            print(f"  {ident:34s} {sorted(extra)}")

    if failures:
        print("\nFAILURES:")
        for ident, fails in failures.items():
            for f in fails:
                print(f"  {ident}: {f}")
        return 1
    print("\nOK")
    return 0


if __name__ == "__main__":
    sys.exit(main(verbose="-v" in sys.argv))
