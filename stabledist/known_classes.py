"""What stabledist knows about individual numpyro classes, each fact with its reason.

Everything else the fork does is derived from numpyro's own declarations (``arg_constraints``,
``pytree_data_fields``, ``pytree_aux_fields``, ``lazy_property``). The entries here are the
exceptions, keyed by numpyro class name; a maintainer adding support for a new numpyro
release reads this module top to bottom. The first half is what the fork needs; the second
half is what the property suite needs as plain data (catalog-only classes, keywords that are
not parametrizations, property exclusions, upstream failures). The testing *code* that uses
them (strategy hints, the catalog of fixed examples) is in `stabledist.testing`.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from numpyro.distributions import constraints

from stabledist.pytree import StaticTest, is_static_bool

__all__ = [
    "CATALOG_ONLY",
    "DERIVED_ATTRIBUTES",
    "EXTRA_FIELDS",
    "HYBRID_FIELDS",
    "NOT_PARAMETRIZATIONS",
    "PROPERTY_EXCLUSIONS",
    "UPSTREAM_FAILURES",
]

HYBRID_FIELDS: dict[str, dict[str, StaticTest]] = {
    # numpyro writes a custom tree_flatten for each of these: the field is a leaf when it is an
    # array and static (aux data) otherwise. A numpyro class with a custom tree_flatten that is
    # not listed here makes the import fail, rather than flatten it wrongly.
    "MaskedDistribution": {"_mask": is_static_bool},  # mask=True/False is a Python bool
    # the sparse adjacency matrix (scipy) cannot be a leaf
    "CAR": {"adj_matrix": lambda d, _: bool(d.__dict__.get("is_sparse", False))},
}

EXTRA_FIELDS: dict[str, dict[str, tuple[str, ...]]] = {
    # Attributes numpyro constructors set but numpyro's pytrees drop (a round trip then loses
    # them). Found by tests/test_pytree.py (test_every_attribute_is_a_field).
    # a list of parameter names numpyro sets but does not declare: static, frozen to a tuple
    "Independent": {"aux": ("reparametrized_params",), "list_aux": ("reparametrized_params",)},
}



DERIVED_ATTRIBUTES: dict[str, dict[str, Callable[[Any], Any]]] = {
    # Attributes a constructor computes from the parameters and numpyro's pytree does not
    # declare as data. They become lazy values (the constructor's own value is seeded, so the
    # same instance reads it exactly); an instance rebuilt by tree_unflatten recomputes them
    # from its leaves, so they are never leaves and always agree with them after a tree_map.
    # numpyro drops Levy's support in a round trip (a jitted Levy has no support).
    "Levy": {"_support": lambda d: constraints.greater_than(d.loc)},
    # numpyro 0.21 declares these supports aux data: their bounds are arrays and constraints
    # compare by identity, so no two instances had equal treedefs (no jit cache hit, no scan
    # carry). numpyro 0.22 declares them data fields, which wins (they stay leaves there).
    "DoublyTruncatedPowerLaw": {"_support": lambda d: constraints.interval(d.low, d.high)},
    "LowerTruncatedPowerLaw": {"_support": lambda d: constraints.greater_than(d.low)},
}

# =============================================================================================
# Testing facts (stabledist.testing). Plain data, each entry with its reason; the code that
# uses them is in stabledist/testing (strategy hints for dependent arguments are code, in
# stabledist/testing/_hints.py, one function per class; the catalog of fixed examples is
# stabledist/testing/catalog.py).
# =============================================================================================

CATALOG_ONLY: dict[str, str] = {
    "TransformedDistribution": "arguments are a base distribution and a list of transforms",
    "MixtureGeneral": "a list of component distributions whose shapes must agree",
    "SineSkewed": "base must be a circular distribution on a torus (SineBivariateVonMises)",
    "GaussianCopula": "a marginal distribution whose icdf works without optional deps",
    "EulerMaruyama": "an SDE function and an initial distribution of matching shape",
    "IntervalCensoredDistribution": "log_prob values are (lower, upper) pairs, not samples",
}
"""Classes the property suite draws from the catalog only (fixed structure, main example or a
variant), because their arguments cannot be drawn from ``arg_constraints``."""

NOT_PARAMETRIZATIONS: dict[str, dict[str, str]] = {
    "GaussianStateSpace": {
        "initial_value": "optional data (the state at time 0), not an alternative to the "
                         "covariance parametrizations",
    },
}
"""Optional (``None``-default) constrained constructor keywords that are NOT alternative
parametrizations. Every other such keyword is one (MultivariateNormal covariance_matrix /
precision_matrix / scale_tril, the Wisharts' scale_matrix / rate_matrix / scale_tril,
CirculantNormal covariance_row / covariance_rfft, GaussianCopula correlation_matrix /
correlation_cholesky). The factories (Categorical(probs= | logits=), ...) build different
classes per keyword, so they have no common tree structure to check."""

PROPERTY_EXCLUSIONS: dict[str, dict[str, str]] = {
    "*": {
        "Distribution": "abstract base class: no parameters to draw, no sample/log_prob; "
                        "every concrete subclass is tested",
    },
}
"""(property or "*") -> class -> reason: pairs the property suite collects as skipped tests
carrying the reason (shown by -ra), never drops silently."""

UPSTREAM_FAILURES: dict[str, dict[str, dict[str, str]]] = {
    "shard_map": {
        "Gompertz": {
            "mean": "Gompertz.mean calls jax.scipy.special.expi, whose while_loop carry is "
                    "not varying-manual-axes aware: inside shard_map JAX raises 'while_loop "
                    "body function carry input and carry output must have equal types' for "
                    "numpyro's own Gompertz too (the same JAX bug class as jax-ml/jax#31080, "
                    "fixed there for random.gamma). The structure and every other read are "
                    "still checked; test_upstream_failures_still_fail drops the entry's "
                    "reason to exist when JAX fixes it",
        },
    },
}
"""(property) -> class -> method -> reason: reads that fail under the transformation for
numpyro's own class (a JAX or numpyro bug, not a stabledist one). Only that read is left out;
each entry is re-verified upstream by test_upstream_failures_still_fail
(tests/test_properties.py)."""
