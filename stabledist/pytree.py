"""The pytree protocol of stable distributions: fixed field tables, key paths, checked unflatten.

numpyro gathers a distribution's fields on every flatten by walking the MRO into a ``set``, so
the leaf order follows ``PYTHONHASHSEED`` and each flatten pays for the walk. Here each class
gets a :class:`FieldTable` once, when the class is created, in declaration order (base classes
first, then each class's ``pytree_data_fields`` or ``arg_constraints`` in the order written), and
flatten/unflatten are closures over that table. Leaves are constructor state only: lazy values
live in :mod:`stabledist.cache`, so reading them can never change the tree.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

import jax
from jax.tree_util import GetAttrKey
from numpyro.distributions.distribution import Distribution as _NumpyroDistribution
from numpyro.distributions.util import lazy_property

__all__ = ["FieldTable", "field_table", "register"]

# Aux fields every distribution has; ``_validate_args`` is often only a class default.
_BASE_AUX = ("_batch_shape", "_event_shape", "_validate_args")

StaticTest = Callable[[Any, Any], bool]
"""``(instance, value) -> True`` when a hybrid field's value is static (goes to aux data)."""


@dataclass(frozen=True)
class FieldTable:
    """Which attributes of a class are leaves (``data``) and which are static (``aux``).

    ``hybrid`` fields appear in both: a hybrid value is a leaf unless its test says it is
    static (numpyro's ``MaskedDistribution._mask`` is a leaf when an array, static when a
    ``bool``). ``array_fields`` are the parameters from ``arg_constraints``, which must never
    be unflattened from a distribution or a string.
    """

    data: tuple[str, ...]
    aux: tuple[str, ...]
    hybrid: Mapping[str, StaticTest] = field(default_factory=dict)
    array_fields: frozenset[str] = frozenset()
    # names whose ``None`` means "not set": the class provides a default (a lazy property,
    # a class attribute), so unflatten leaves them unset, as the constructor did.
    default_on_class: frozenset[str] = frozenset()


def field_table(cls: type, hybrid: Mapping[str, StaticTest] | None = None) -> FieldTable:
    """Gather the field table of ``cls`` in declaration order.

    Mirrors numpyro's rules (``pytree_data_fields`` if a class declares it, else its
    ``arg_constraints`` keys that are not lazy properties; ``pytree_aux_fields`` added up) but
    keeps first-seen order instead of a ``set``.
    """
    data: dict[str, None] = {}
    aux: dict[str, None] = dict.fromkeys(_BASE_AUX)
    arrays: set[str] = set()
    for base in reversed(cls.__mro__):
        if not (isinstance(base, type) and issubclass(base, _NumpyroDistribution)):
            continue
        constraints = base.__dict__.get("arg_constraints", {})
        declared = base.__dict__.get("pytree_data_fields")
        if declared is None:
            declared = tuple(
                arg for arg in constraints if not isinstance(getattr(cls, arg, None), lazy_property)
            )
        data.update(dict.fromkeys(declared))
        aux.update(dict.fromkeys(base.__dict__.get("pytree_aux_fields", ())))
        arrays.update(a for a in constraints if a in data)
    both = [name for name in data if name in aux]
    hybrid = dict(hybrid or {})
    unknown = [name for name in both if name not in hybrid]
    if unknown:
        raise TypeError(
            f"{cls.__qualname__} declares {unknown} as both pytree data and aux fields; "
            "stabledist needs to know when such a field is static: pass "
            "hybrid={name: test} to stabledist.make_stable / register"
        )
    for name in hybrid:
        if name not in data:
            raise TypeError(f"{cls.__qualname__}: hybrid field {name!r} is not a data field")
    return FieldTable(
        data=tuple(data),
        aux=tuple(name for name in aux if name not in hybrid),
        hybrid=hybrid,
        array_fields=frozenset(arrays - set(hybrid)),
        default_on_class=frozenset(n for n in (*data, *aux) if hasattr(cls, n)),
    )


def register(cls: type, table: FieldTable) -> None:
    """Register ``cls`` with JAX (with key paths) and attach numpyro's pytree methods.

    Aux data is ``(aux values..., hybrid statics...)``: hashable, process-independent.
    """
    data, aux, hybrid = table.data, table.aux, table.hybrid
    n_data, n_aux = len(data), len(aux)
    keys = tuple(GetAttrKey(name) for name in data)
    hybrid_at = tuple((data.index(name), name, test) for name, test in hybrid.items())
    skip_none = table.default_on_class
    array_at = tuple(i for i, name in enumerate(data) if name in table.array_fields)
    qualname = cls.__qualname__

    def flatten(d: Any) -> tuple[tuple[Any, ...], tuple[Any, ...]]:
        state = d.__dict__
        children = tuple(map(state.get, data))
        statics = tuple(map(state.get, aux))
        if hybrid_at:
            children, hybrid_statics = _split_hybrid(d, children, hybrid_at)
            statics += hybrid_statics
        return children, statics

    def flatten_with_keys(d: Any) -> tuple[tuple[tuple[GetAttrKey, Any], ...], tuple[Any, ...]]:
        children, statics = flatten(d)
        return tuple(zip(keys, children)), statics

    def unflatten(statics: tuple[Any, ...], children: Any) -> Any:
        children = tuple(children)
        if len(children) != n_data:
            raise ValueError(
                f"{qualname}.tree_unflatten expected {n_data} children {data}, "
                f"got {len(children)}"
            )
        if type(statics) is not tuple or len(statics) != n_aux + len(hybrid_at):
            raise ValueError(
                f"{qualname}.tree_unflatten got malformed aux data {statics!r}: expected a "
                f"tuple of {n_aux + len(hybrid_at)} values for {aux + tuple(hybrid)}"
            )
        for i in array_at:
            leaf = children[i]
            if isinstance(leaf, str | bytes | _NumpyroDistribution):
                raise TypeError(
                    f"{qualname}.tree_unflatten: parameter {data[i]!r} must be an array-like "
                    f"leaf, got {type(leaf).__name__}"
                )
        d = cls.__new__(cls)
        state = d.__dict__
        for name, value in zip(data, children):
            if value is not None or name not in skip_none:
                state[name] = value
        for name, value in zip(aux, statics):
            if value is not None or name not in skip_none:
                state[name] = value
        for (i, name, _), static in zip(hybrid_at, statics[n_aux:]):
            state[name] = children[i] if static is None else static
        return d

    jax.tree_util.register_pytree_with_keys(cls, flatten_with_keys, unflatten, flatten)
    cls.tree_flatten = flatten
    cls.tree_unflatten = classmethod(lambda c, aux_data, params: unflatten(aux_data, params))
    cls.gather_pytree_data_fields = classmethod(lambda c: data)
    cls.gather_pytree_aux_fields = classmethod(lambda c: aux + tuple(hybrid))
    cls.__stable_fields__ = table


def _split_hybrid(
    d: Any, children: tuple[Any, ...], hybrid_at: tuple[tuple[int, str, StaticTest], ...]
) -> tuple[tuple[Any, ...], tuple[Any, ...]]:
    leaves = list(children)
    statics = []
    for i, _, is_static in hybrid_at:
        value = leaves[i]
        if value is not None and is_static(d, value):
            leaves[i] = None
            statics.append(value)
        else:
            statics.append(None)
    return tuple(leaves), tuple(statics)


def is_static_bool(_: Any, value: Any) -> bool:
    """Hybrid test: a Python ``bool`` is static, anything else is a leaf (as in numpyro)."""
    return isinstance(value, bool)
