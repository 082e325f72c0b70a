"""The fork's per-class exceptions: what numpyro's own declarations (``arg_constraints``,
``pytree_data_fields``, ``pytree_aux_fields``, ``lazy_property``) do not say, keyed by numpyro
class name, each with its reason. Everything else the fork does is derived from numpyro.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from numpyro.distributions import constraints

from stabledist._src.pytree import StaticPredicate, is_static_bool

__all__ = ["DERIVED_ATTRIBUTES", "EXTRA_FIELDS", "HYBRID_FIELDS"]

HYBRID_FIELDS: dict[str, dict[str, StaticPredicate]] = {
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
