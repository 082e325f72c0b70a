"""The pytree protocol of stable distributions: fixed field tables, key paths, checked unflatten.

numpyro gathers a distribution's fields on every flatten by walking the MRO into a ``set``, so
the leaf order follows ``PYTHONHASHSEED`` and each flatten pays for the walk. Here each class
gets a `FieldTable` once, when the class is created, in declaration order (base classes
first, then each class's ``pytree_data_fields`` or ``arg_constraints`` in the order written), and
flatten/unflatten are generated for that table (straight-line code, as dataclasses generates
``__init__``), with general closures for unusual instances. Leaves are exactly numpyro's
declared data fields, the parametrization: lazy values, including alternative
parametrizations a constructor received (``covariance_matrix=``), live in `stabledist._src.cache`,
so one class has one tree structure whatever it was built from or has been read.

Per-class state lives in a registry keyed (weakly) by class, not in attributes of the class.
"""

from __future__ import annotations

import linecache
import weakref
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from itertools import filterfalse
from typing import Any

import jax
import numpy as np
from jax.tree_util import GetAttrKey
from numpyro.distributions.distribution import Distribution as _NumpyroDistribution
from numpyro.distributions.util import lazy_property

from stabledist._src.batching import (
    CONSTRUCTING,
    DERIVED_ALIVE,
    EVENT,
    STORED_BATCH_SHAPE,
    BatchRule,
    after_unflatten,
    derive,
    marked,
    undo,
)

__all__ = ["ClassPytree", "FieldTable", "StaticValue", "field_table", "pytree_of", "register"]

# Aux fields every distribution has (``_validate_args`` is put last).
_BASE_AUX = ("_batch_shape", "_event_shape")
_VALIDATE = "_validate_args"

StaticPredicate = Callable[[Any, Any], bool]
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
    hybrid: Mapping[str, StaticPredicate] = field(default_factory=dict)
    array_fields: frozenset[str] = frozenset()
    # aux names whose value may be a list: frozen to a tuple in aux data (which must be
    # hashable) and thawed back to a list by unflatten
    list_aux: frozenset[str] = frozenset()


def field_table(
    cls: type,
    hybrid: Mapping[str, StaticPredicate] | None = None,
    extra_data: Sequence[str] = (),
    extra_aux: Sequence[str] = (),
    list_aux: Sequence[str] = (),
    derived: Sequence[str] = (),
    own_flatten: bool = False,
) -> FieldTable:
    """Gather the field table of ``cls`` in declaration order.

    numpyro's rules (``pytree_data_fields`` if a class declares it, else its
    ``arg_constraints`` keys that are not lazy properties; ``pytree_aux_fields`` added up), in
    first-seen order instead of a ``set``: the data fields are exactly numpyro's, so a stable
    instance has numpyro's leaves. ``extra_data`` / ``extra_aux`` add attributes a constructor
    sets and numpyro's tree drops (an ``extra_data`` name is data even where a class declares
    it aux); ``derived`` names are recomputed from the leaves, so they are neither. With
    ``own_flatten`` (a user class with its own ``tree_flatten``, which decides what is static),
    a name declared both data and aux is in both, as in numpyro.
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
    data.update(dict.fromkeys(extra_data))
    aux.update(dict.fromkeys(extra_aux))
    for name in (*extra_data, *derived):  # the fork's word wins over an aux declaration
        aux.pop(name, None)
    for name in derived:
        data.pop(name, None)
    aux.pop(_VALIDATE, None)
    aux[_VALIDATE] = None
    both = [name for name in data if name in aux]
    hybrid = dict(hybrid or {})
    unknown = [name for name in both if name not in hybrid]
    if unknown and not own_flatten:
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
        list_aux=frozenset(list_aux),
    )


@dataclass(frozen=True)
class ClassPytree:
    """What `register` made for one class: its table, its flatten, and the unflatten that
    ``Cls.tree_unflatten`` calls.

    ``flatten`` follows the table (numpyro's ``super().tree_flatten()`` inside a user's own
    flatten lands here); ``checked_unflatten`` is the table's unflatten that also checks the
    kinds of hand-given leaves. JAX is registered with the table's flatten and unflatten, or
    with the class's own methods when a user class defines them.
    """

    table: FieldTable
    flatten: Callable[[Any], tuple[tuple[Any, ...], tuple[Any, ...]]]
    checked_unflatten: Callable[[tuple[Any, ...], Any], Any]


_PYTREES: weakref.WeakKeyDictionary[type, ClassPytree] = weakref.WeakKeyDictionary()


def pytree_of(cls: type) -> ClassPytree:
    """The `ClassPytree` of a registered class (KeyError for any other class)."""
    return _PYTREES[cls]


def register(
    cls: type,
    table: FieldTable,
    own: tuple[Callable[..., Any], Callable[..., Any]] | None = None,
    rule: BatchRule | None = None,
) -> ClassPytree:
    """Register ``cls`` with JAX and record its `ClassPytree`.

    Aux data is ``(aux values..., hybrid statics..., absent names)``: hashable and the same in
    every process. ``absent names`` are fields the instance does not set (usually none).
    ``_validate_args`` is numpyro's: the value a constructor was given, else ``None``, and
    unflatten sets it, so a rebuilt instance validates exactly when numpyro's would (a
    ``validate_args`` given survives; the class default, on in numpyro 0.22, does not) and has
    the same tree structure as the instance it came from. With a `BatchRule`, unflatten reads
    the batch shape from the leaves where their ranks disagree with the stored one
    (`stabledist._src.batching`). JAX gets key paths (``.loc``),
    unless ``own`` gives a user class's own ``(tree_flatten, tree_unflatten)``, which JAX then
    calls instead.
    """
    data, aux, hybrid = table.data, table.aux, table.hybrid
    n_data, n_aux = len(data), len(aux)
    keys = tuple(GetAttrKey(name) for name in data)
    hybrid_at = tuple((data.index(name), name, test) for name, test in hybrid.items())
    names = (*data, *aux)
    n_statics = n_aux + len(hybrid_at) + 1
    names_set = frozenset(names)
    required_aux = aux[:-1]  # all but _validate_args, which table.aux puts last
    tracked_names = (*data, *required_aux)
    list_at = tuple(i for i, name in enumerate(aux) if name in table.list_aux)
    new: Any = cls.__new__
    special = bool(list_at or hybrid_at)
    array_at = tuple(i for i, name in enumerate(data) if name in table.array_fields)
    qualname = cls.__qualname__
    # the fields that may hold distributions: a parent that keeps its shape restores theirs
    nested = tuple(name for name in data if name not in table.array_fields)

    def flatten(d: Any) -> tuple[tuple[Any, ...], tuple[Any, ...]]:
        # a class with hybrid fields; the others get `_generate`'s straight-line code
        return _flatten_general(d, d.__dict__)

    def _flatten_general(d: Any, state: dict[str, Any]) -> Any:
        absent = tuple(filterfalse(state.__contains__, tracked_names))
        children = tuple(map(state.get, data))
        statics = (*map(state.get, required_aux), state.get(_VALIDATE))
        if STORED_BATCH_SHAPE in state:  # derived from the leaves: aux data keeps numpyro's
            statics = (state[STORED_BATCH_SHAPE], *statics[1:])
        if list_at:
            statics = _freeze(statics, list_at)
        if hybrid_at:
            children, hybrid_statics = _split_hybrid(d, children, hybrid_at)
            statics += hybrid_statics
        return children, (*statics, absent)

    def flatten_with_keys(d: Any) -> tuple[tuple[tuple[Any, Any], ...], tuple[Any, ...]]:
        children, statics = flatten(d)
        return tuple(zip(keys, children)), statics

    def unflatten(statics: tuple[Any, ...], children: Any) -> Any:
        """JAX's path: the treedef came from ``flatten``; leaves may be anything JAX or a
        ``tree_map`` put there (tracers, dtypes, in_axes, strings)."""
        if len(children) != n_data:
            raise ValueError(
                f"{qualname}.tree_unflatten expected {n_data} children {data}, "
                f"got {len(children)}"
            )
        if type(statics) is not tuple or len(statics) != n_statics:
            _malformed(statics)
        state = dict(zip(names, (*children, *statics)))
        if special:
            for i in list_at:
                if type(statics[i]) is tuple:
                    state[aux[i]] = list(statics[i])
            for (i, name, _), static in zip(hybrid_at, statics[n_aux:]):
                if static is None:
                    state[name] = children[i]
                else:
                    state[name] = static.value if type(static) is StaticValue else static
        absent = statics[-1]
        if absent:
            if type(absent) is not tuple or not names_set.issuperset(absent):
                _malformed(statics)
            for name in absent:
                del state[name]
        d = new(cls)
        object.__setattr__(d, "__dict__", state)  # a new instance: no bookkeeping to do
        if rule is not None:
            return after_unflatten(d, rule, children, nested)
        return d

    def checked_unflatten(statics: tuple[Any, ...], children: Any) -> Any:
        """numpyro's ``Cls.tree_unflatten(aux, params)``, called by hand: also check kinds."""
        children = tuple(children)
        for i in array_at:
            if i < len(children) and isinstance(children[i], _NOT_ARRAYS):
                raise TypeError(
                    f"{qualname}.tree_unflatten: parameter {data[i]!r} must be an array-like "
                    f"leaf, got {type(children[i]).__name__}"
                )
        return unflatten(statics, children)

    def _malformed(statics: Any) -> None:
        raise ValueError(
            f"{qualname}.tree_unflatten got malformed aux data {statics!r}: expected a tuple "
            f"of values for {aux + tuple(hybrid)} and a tuple of absent field names"
        )

    if not hybrid_at:  # generated straight-line code, as dataclasses does for __init__
        flatten, unflatten = _generate(cls, data, required_aux, _flatten_general, unflatten,
                                       rule, nested, table.list_aux)
    if own is None:
        jax.tree_util.register_pytree_with_keys(cls, flatten_with_keys, unflatten, flatten)
    else:
        jax.tree_util.register_pytree_node(cls, *own)
    registered = ClassPytree(table, flatten, checked_unflatten)
    _PYTREES[cls] = registered
    return registered


def _generate(
    cls: type,
    data: tuple[str, ...],
    required_aux: tuple[str, ...],
    flatten_general: Callable[[Any, dict[str, Any]], Any],
    unflatten_general: Callable[[tuple[Any, ...], Any], Any],
    rule: BatchRule | None = None,
    nested: tuple[str, ...] = (),
    list_aux: frozenset[str] = frozenset(),
) -> tuple[Callable[..., Any], Callable[..., Any]]:
    """Straight-line flatten/unflatten for a class without hybrid fields (list fields are
    frozen to tuples and thawed inline).

    Same contract as the general closures in `register` (which handle every unusual
    case: unset fields, malformed input), about twice as fast: a numpyro distribution is
    flattened and unflattened on every jitted call that takes one. The source is compiled
    under a readable file name and kept in `linecache`, so tracebacks and debuggers show it.
    """
    leaves = [f"_{i}" for i in range(len(data))]
    statics = [f"_a{i}" for i in range(len(required_aux))]
    get = [f"s[{n!r}]" for n in data]
    # a batch shape derived from the leaves is not aux data: numpyro's stored one is
    get_aux = [f"s.get({STORED_BATCH_SHAPE!r}, s[{n!r}])" if n == "_batch_shape"
               else f"(tuple(_v) if type(_v := s[{n!r}]) is list else _v)" if n in list_aux
               else f"s[{n!r}]" for n in required_aux]
    values = [f"(list({v}) if type({v}) is tuple else {v})" if n in list_aux else v
              for n, v in zip(required_aux, statics)]
    state = [f"{n!r}: {v}" for n, v in zip((*data, *required_aux, _VALIDATE),
                                            [*leaves, *values, "va"])]
    unpack_leaves = "".join(f"{v}, " for v in leaves)
    unpack_statics = "".join(f"{v}, " for v in statics)
    lines = [
        f"# stabledist._src.pytree: generated for {cls.__module__}.{cls.__qualname__}",
        "def flatten(d):",
        "    s = d.__dict__",
        "    try:",
        f"        return ({''.join(g + ', ' for g in get)}), "
        f"({''.join(g + ', ' for g in get_aux)}s.get({_VALIDATE!r}), ())",
        "    except KeyError:",
        "        return flatten_general(d, s)",
        "",
        "def unflatten(statics, children):",
        "    try:",
        f"        ({unpack_leaves}) = children",
        f"        ({unpack_statics}va, absent) = statics",
        "    except (TypeError, ValueError):",
        "        return unflatten_general(statics, children)  # raises the clear error",
        "    if absent:",
        "        return unflatten_general(statics, children)",
        f"    state = {{{', '.join(state)}}}",
        "    d = new(cls)",
        "    osa(d, '__dict__', state)",
        *_batch_check(rule, required_aux, nested),
        "    return d",
    ]
    source = "\n".join(lines) + "\n"
    filename = f"<stabledist._src.pytree {cls.__module__}.{cls.__qualname__}>"
    linecache.cache[filename] = (len(source), None, source.splitlines(True), filename)
    namespace: dict[str, Any] = {
        "new": cls.__new__, "cls": cls, "osa": object.__setattr__,
        "flatten_general": flatten_general, "unflatten_general": unflatten_general,
        "rule": rule, "derive": derive, "marked": marked, "undo": undo,
        "derived_alive": DERIVED_ALIVE, "constructing": CONSTRUCTING,
    }
    # names are repr()-quoted; values are bound in the namespace, never spliced into code
    exec(compile(source, filename, "exec"), namespace)
    return namespace["flatten"], namespace["unflatten"]


def _batch_check(rule: BatchRule | None, required_aux: tuple[str, ...],
                 nested: tuple[str, ...]) -> list[str]:
    """Lines of the generated unflatten (`stabledist._src.batching.after_unflatten`, inline)
    that send an instance whose leaves disagree with its stored batch shape to `derive`: one
    ``len`` per parameter (numpyro does not promote every parameter to one rank: a state-space
    model's transition matrix is never batched), or, for a parent of nested distributions
    only, a derived child. A parent that keeps its shape gives nested distributions derived by
    this unflatten their stored shapes back (numpyro's truncated and censored classes hold a base
    distribution whose parameters have the parent's rank and whose stored shape is its own)."""
    if rule is None:
        return []
    restore = (["    if derived_alive and not constructing.depth:",
                f"        undo(state, {nested!r})"] if nested else [])
    if rule.keep:
        return restore
    batch, event = (f"_a{required_aux.index(n)}" for n in _BASE_AUX)
    if not rule.arrays:
        children = "".join(f"_{i}, " for i, _ in rule.children)
        return [f"    if derived_alive and marked({children}):",
                "        return derive(d, rule, children)", *restore]
    ranks = [f"len(getattr(_{i}, 'shape', ()))"
             + (f" - len({event})" if rank == EVENT else f" - {rank}" if rank else "")
             for i, rank in rule.arrays]
    names = [f"r{k}" for k in range(len(ranks))]
    # the largest rank differs from n: one rank above it (new axes), or every rank below it
    test = (" or ".join(f"{r} > n" for r in names) + " or ("
            + " and ".join(f"{r} < n" for r in names) + ")")
    return ["    try:", f"        n = len({batch})",
            *(f"        {r} = {rank}" for r, rank in zip(names, ranks)),
            f"        if {test}:", "            return derive(d, rule, children)",
            "    except TypeError:  # a leaf whose shape is no sequence (a distribution's method)",
            "        return derive(d, rule, children)", *restore]


_NOT_ARRAYS = (str, bytes, _NumpyroDistribution)


def _freeze(statics: tuple[Any, ...], list_at: tuple[int, ...]) -> tuple[Any, ...]:
    frozen = list(statics)
    for i in list_at:
        if type(frozen[i]) is list:
            frozen[i] = tuple(frozen[i])
    return tuple(frozen)


class StaticValue:
    """A hybrid field's static value in aux data, with the equality and hash JAX needs.

    Treedefs compare aux data with ``==`` and hash it (jit's cache key). A numpy array or a
    scipy sparse matrix (``CAR(adj_matrix=..., is_sparse=True)``) answers ``==`` with an
    array, so the second instance passed to a jitted function raised (it does upstream).
    Here equal contents mean equal treedefs; the hash reads only type, shape and dtype, so
    hashing on every call costs nothing, and ``==`` compares contents only for two distinct
    objects.
    """

    __slots__ = ("value",)

    def __init__(self, value: Any) -> None:
        self.value = value

    def _signature(self) -> tuple[Any, ...]:
        v = self.value
        return type(v), getattr(v, "shape", None), str(getattr(v, "dtype", ""))

    def __hash__(self) -> int:
        return hash(self._signature())

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, StaticValue):
            return NotImplemented
        a, b = self.value, other.value
        if a is b:
            return True
        if self._signature() != other._signature():
            return False
        if hasattr(a, "nnz"):  # scipy.sparse: no dense copy
            return (a != b).nnz == 0
        return bool(np.array_equal(np.asarray(a), np.asarray(b)))

    def __repr__(self) -> str:
        return f"StaticValue({type(self.value).__name__}{self._signature()[1]})"


def _static(value: Any) -> Any:
    """``value`` as aux data: wrapped unless ``==`` on it gives a plain ``bool``."""
    if isinstance(value, bool | int | float | str | tuple | type(None)):
        return value
    return StaticValue(value)


def _split_hybrid(
    d: Any, children: tuple[Any, ...], hybrid_at: tuple[tuple[int, str, StaticPredicate], ...]
) -> tuple[tuple[Any, ...], tuple[Any, ...]]:
    leaves = list(children)
    statics = []
    for i, _, is_static in hybrid_at:
        value = leaves[i]
        if value is not None and is_static(d, value):
            leaves[i] = None
            statics.append(_static(value))
        else:
            statics.append(None)
    return tuple(leaves), tuple(statics)


def is_static_bool(_: Any, value: Any) -> bool:
    """Hybrid test: a Python ``bool`` is static, anything else is a leaf (as in numpyro)."""
    return isinstance(value, bool)
