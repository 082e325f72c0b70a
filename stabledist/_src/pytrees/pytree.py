"""The pytree protocol of stable distributions: generated flatten and unflatten, key paths, a
clear error for malformed input.

A class's flatten and unflatten are generated from its record (`stabledist._src.records`), as
dataclasses generates ``__init__``: straight-line code for its field table, with the batch
check of its `BatchRule` written into the unflatten (the test that sends an instance whose
leaves disagree with its stored batch shape to `stabledist._src.pytrees.batching.derive`). A
distribution is flattened and unflattened on every jitted call that takes one, and straight-line
code is the fastest Python can do it (the benchmarks page has the figures). The source is compiled
under a readable file name and kept in `linecache`, so tracebacks and debuggers show it
(``inspect.getsource(pytree_of(cls).unflatten)``). The functions of each class are this
module's table (`pytree_of`). One generator, one path: every class, hybrid
and list fields included; only an instance with unset fields takes `_flatten_general`, and
malformed input to unflatten raises its clear error from `_invalid`.

Aux data is ``(aux values..., _validate_args, hybrid statics..., absent names)``: hashable and
the same in every process. ``absent names`` are fields the instance does not set (usually
none). ``_validate_args`` is numpyro's: the value a constructor was given, else ``None``, so a
rebuilt instance validates exactly when numpyro's would and has the same tree structure as the
instance it came from.
"""

from __future__ import annotations

import linecache
from collections.abc import Callable
from dataclasses import dataclass
from itertools import filterfalse
from typing import Any

import jax
import numpy as np
from jax.tree_util import GetAttrKey
from numpyro.distributions.distribution import Distribution as _NumpyroDistribution

from stabledist._src.pytrees.batching import STORED_BATCH_SHAPE, derive, restore_children
from stabledist._src.records import (
    BASE_AUX,
    EVENT,
    VALIDATE,
    BatchRule,
    ClassRecord,
    FieldTable,
)

__all__ = ["ClassPytree", "StaticValue", "pytree_of", "register"]


@dataclass(frozen=True)
class ClassPytree:
    """What `register` made for one class: its flatten, JAX's unflatten, the unflatten that
    ``Cls.tree_unflatten`` calls (it also checks the kinds of hand-given leaves), and
    ``set_batch_from_leaves``: the unflatten's batch check alone, run on an instance made
    another way (a numpyro object `stabilize` copies), which it changes in place to the batch
    shape a round trip would give it. ``own``: a user class's own ``(tree_flatten,
    tree_unflatten)``, which JAX calls instead (None for a class the table describes)."""

    flatten: Callable[[Any], tuple[tuple[Any, ...], tuple[Any, ...]]]
    unflatten: Callable[[tuple[Any, ...], Any], Any]
    checked_unflatten: Callable[[tuple[Any, ...], Any], Any]
    set_batch_from_leaves: Callable[[Any], Any]
    own: tuple[Callable[..., Any], Callable[..., Any]] | None = None


_PYTREES: dict[type, ClassPytree] = {}


def pytree_of(cls: type) -> ClassPytree:
    """The pytree functions of the stable class ``cls`` (KeyError for any other class)."""
    return _PYTREES[cls]


@dataclass(frozen=True)
class _Layout:
    """Where each field sits in the leaves and aux data of one class."""

    qualname: str
    data: tuple[str, ...]
    required_aux: tuple[str, ...]  # aux fields but _validate_args (put last)
    hybrid: tuple[tuple[int, str, Any], ...]  # (leaf index, name, static test)
    list_aux: frozenset[str]
    array_at: tuple[int, ...]  # parameters: never a distribution or a string

    @property
    def names(self) -> frozenset[str]:
        return frozenset((*self.data, *self.required_aux, VALIDATE))


def _layout(cls: type, table: FieldTable) -> _Layout:
    data = table.data
    return _Layout(
        qualname=cls.__qualname__, data=data, required_aux=table.aux[:-1],
        hybrid=tuple((data.index(n), n, test) for n, test in table.hybrid.items()),
        list_aux=table.list_aux,
        array_at=tuple(i for i, n in enumerate(data) if n in table.array_fields))


def register(cls: type, record: ClassRecord,
             own: tuple[Callable[..., Any], Callable[..., Any]] | None = None) -> ClassPytree:
    """Generate ``cls``'s flatten and unflatten from its record, keep them in this module's
    table and register ``cls`` with JAX: key paths (``.loc``) and the generated functions, or
    ``own``, a user class's own ``(tree_flatten, tree_unflatten)``, which JAX then calls."""
    functions = _generate(cls, record, own)
    _PYTREES[cls] = functions
    if own is not None:
        jax.tree_util.register_pytree_node(cls, *own)
        return functions
    keys = tuple(GetAttrKey(name) for name in record.table.data)
    flatten = functions.flatten

    def flatten_with_keys(d: Any) -> tuple[tuple[tuple[Any, Any], ...], tuple[Any, ...]]:
        children, statics = flatten(d)
        return tuple(zip(keys, children)), statics

    jax.tree_util.register_pytree_with_keys(cls, flatten_with_keys, functions.unflatten, flatten)
    return functions


def _generate(cls: type, record: ClassRecord,
              own: tuple[Callable[..., Any], Callable[..., Any]] | None) -> ClassPytree:
    layout = _layout(cls, record.table)
    check = _batch_check_lines(record.batch, layout, record.nested)
    lines = [
        f"# stabledist._src.pytrees.pytree: generated for {cls.__module__}.{cls.__qualname__}",
        *_flatten_lines(layout), "", *_unflatten_lines(layout, check), "",
        *_set_batch_lines(layout, check),
    ]
    namespace: dict[str, Any] = {
        "new": cls.__new__, "cls": cls, "osa": object.__setattr__,
        "flatten_general": lambda d, s: _flatten_general(layout, d, s),
        "invalid": lambda statics, children: _invalid(layout, statics, children),
        "drop_absent": lambda state, absent, statics: _drop_absent(layout, state, absent,
                                                                   statics),
        "static": _static, "StaticValue": StaticValue, "derive": derive,
        "restore_children": restore_children, "STORED": STORED_BATCH_SHAPE,
        **{f"test{j}": test for j, (_, _, test) in enumerate(layout.hybrid)},
    }
    flatten, unflatten, set_batch = _compile(cls, "\n".join(lines) + "\n", namespace)
    return ClassPytree(flatten, unflatten, _checking(layout, unflatten), set_batch, own)


def _batch_check_lines(rule: BatchRule | None, layout: _Layout, nested: tuple[str, ...]
                       ) -> list[str]:
    """The lines, after ``d`` is built from ``state``, ``children`` (leaves ``_0``, ``_1``,
    ...) and aux values ``_a0``, ``_a1``, ..., that send an instance whose leaves disagree with
    its stored batch shape to `derive`: one ``len`` per parameter of the rule (numpyro does not
    promote every parameter to one rank: a state-space model's transition matrix is never
    batched), or, without parameters, a derived nested distribution. A parent that keeps its
    shape and whose children keep theirs (``rule.restores_children``) gives them their stored
    shapes back."""
    if rule is None:
        return []
    restore = (_restore_lines(layout, nested) if rule.restores_children and nested else [])
    if rule.keep:
        return restore
    if not rule.arrays:
        marks = " or ".join(f"getattr(_{i}, STORED, None) is not None" for i, _ in rule.children)
        return [f"    if {marks}:", "        return derive(d, children)", *restore]
    batch, event = (f"_a{layout.required_aux.index(n)}" for n in BASE_AUX)
    ranks = [f"len(getattr(_{i}, 'shape', ()))"
             + (f" - len({event})" if rank == EVENT else f" - {rank}" if rank else "")
             for i, rank in rule.arrays]
    names = [f"r{k}" for k in range(len(ranks))]
    # the largest rank differs from n: one rank above it (new axes), or every rank below it
    test = (" or ".join(f"{r} > n" for r in names) + " or ("
            + " and ".join(f"{r} < n" for r in names) + ")")
    return ["    try:", f"        n = len({batch})",
            *(f"        {r} = {rank}" for r, rank in zip(names, ranks)),
            f"        if {test}:", "            return derive(d, children)",
            "    except TypeError:  # a leaf whose shape is no sequence (a distribution's method)",
            "        return derive(d, children)", *restore]


def _restore_lines(layout: _Layout, nested: tuple[str, ...]) -> list[str]:
    """``restore_children`` for the nested fields, called only when one of them may hold a
    derived distribution (it has the stored shape, or it is a list or tuple): most rebuilt
    parents hold none, and the call is most of their unflatten. The test reads the attribute,
    never the child's ``__dict__``: asking for it makes CPython build a dict object for an
    instance whose fields sit inline (a second gc-tracked object per rebuilt child, and most
    of the parent's unflatten time)."""
    call = f"restore_children(d.__dict__, {nested!r})"
    if any(name not in layout.data for name in nested):
        return [f"    {call}"]
    tests = [f"type(_{i}) in (list, tuple) or getattr(_{i}, STORED, None) is not None"
             for i in map(layout.data.index, nested)]
    return [f"    if {' or '.join(tests)}:", f"        {call}"]


def _flatten_lines(layout: _Layout) -> list[str]:
    """``flatten(d)``: the leaves in declaration order; hybrid fields split into a leaf or a
    static; a derived batch shape emits numpyro's stored one (the treedef stays numpyro's)."""
    hybrid = {i: j for j, (i, _, _) in enumerate(layout.hybrid)}
    leaves = [f"l{hybrid[i]}" if i in hybrid else f"s[{n!r}]" for i, n in enumerate(layout.data)]
    aux = [f"s.get({STORED_BATCH_SHAPE!r}, s[{n!r}])" if n == "_batch_shape"
           else f"(tuple(_v) if type(_v := s[{n!r}]) is list else _v)" if n in layout.list_aux
           else f"s[{n!r}]" for n in layout.required_aux]
    aux += [f"s.get({VALIDATE!r})", *(f"h{j}" for j in range(len(layout.hybrid)))]
    split = [line for j, (_, name, _) in enumerate(layout.hybrid) for line in (
        f"        l{j} = s[{name!r}]",
        f"        h{j} = static(l{j}) if l{j} is not None and test{j}(d, l{j}) else None",
        f"        if h{j} is not None:", f"            l{j} = None")]
    return ["def flatten(d):", "    s = d.__dict__", "    try:", *split,
            f"        return ({''.join(x + ', ' for x in leaves)}), "
            f"({''.join(x + ', ' for x in aux)}())",
            "    except KeyError:  # an unset field",
            "        return flatten_general(d, s)"]


def _unflatten_lines(layout: _Layout, check: list[str]) -> list[str]:
    """``unflatten(statics, children)``: the instance, without running its constructor (JAX may
    put anything in a leaf: tracers, dtypes, in_axes specs), its fields set one by one with
    ``object.__setattr__`` (no bookkeeping: a new instance), then the batch check. Set one by
    one, they stay inline in the instance, as a constructor's do, with no ``__dict__`` object
    of its own: a rebuilt instance is one gc-tracked object, as numpyro's is, not two, so a
    program rebuilding many does not make full collections due sooner than numpyro's does
    (setting the dict whole costs as much). One statement per field, no state dict, unless
    fields are absent (`_flatten_general`): a round trip of thousands is mostly this."""
    leaves = [f"_{i}" for i in range(len(layout.data))]
    statics = [f"_a{i}" for i in range(len(layout.required_aux))]
    hybrid = [f"_h{j}" for j in range(len(layout.hybrid))]
    values = [f"(list({v}) if type({v}) is tuple else {v})" if n in layout.list_aux else v
              for n, v in zip(layout.required_aux, statics)]
    for j, (i, _, _) in enumerate(layout.hybrid):  # the static in the leaf's place, if any
        leaves[i] = (f"({leaves[i]} if _h{j} is None else "
                     f"_h{j}.value if type(_h{j}) is StaticValue else _h{j})")
    fields = list(zip((*layout.data, *layout.required_aux, VALIDATE), [*leaves, *values, "va"]))
    state = ", ".join(f"{n!r}: {v}" for n, v in fields)
    return [
        "def unflatten(statics, children):", "    try:",
        f"        ({''.join(f'_{i}, ' for i in range(len(layout.data)))}) = children",
        f"        ({''.join(v + ', ' for v in (*statics, 'va', *hybrid))}absent) = statics",
        "    except (TypeError, ValueError):", "        invalid(statics, children)",
        "    d = new(cls)", "    if absent:", f"        state = {{{state}}}",
        "        drop_absent(state, absent, statics)", "        for _k in state:",
        "            osa(d, _k, state[_k])", "    else:",
        *(f"        osa(d, {n!r}, {v})" for n, v in fields), *check, "    return d"]


def _set_batch_lines(layout: _Layout, check: list[str]) -> list[str]:
    """``set_batch_from_leaves(d)``: the batch check of ``unflatten``, the same lines, on an
    existing instance (its leaves as the generated flatten gives them, its stored shapes),
    which it changes in place."""
    leaves = "".join(f"_{i}, " for i in range(len(layout.data)))
    statics = [f"    _a{k} = state[{n!r}]" for k, n in enumerate(layout.required_aux)
               if n in ("_batch_shape", "_event_shape")]
    return ["def set_batch_from_leaves(d):", "    state = d.__dict__",
            "    children = flatten(d)[0]",
            f"    ({leaves}) = children" if leaves else "    pass", *statics, *check,
            "    return d"]


def _compile(cls: type, source: str, namespace: dict[str, Any]) -> tuple[Any, Any, Any]:
    filename = f"<stabledist._src.pytrees.pytree {cls.__module__}.{cls.__qualname__}>"
    linecache.cache[filename] = (len(source), None, source.splitlines(True), filename)
    # names are repr()-quoted; values are bound in the namespace, never spliced into code
    exec(compile(source, filename, "exec"), namespace)
    return namespace["flatten"], namespace["unflatten"], namespace["set_batch_from_leaves"]


def _flatten_general(layout: _Layout, d: Any, state: dict[str, Any]) -> Any:
    """An instance that does not set every field (the generated flatten's slow path): unset
    fields are named in the last aux entry and are left unset by unflatten."""
    tracked = (*layout.data, *layout.required_aux)
    absent = tuple(filterfalse(state.__contains__, tracked))
    children = list(map(state.get, layout.data))
    statics: list[Any] = [*map(state.get, layout.required_aux), state.get(VALIDATE)]
    if STORED_BATCH_SHAPE in state:  # derived from the leaves: aux data keeps numpyro's
        statics[0] = state[STORED_BATCH_SHAPE]
    for k, name in enumerate(layout.required_aux):
        if name in layout.list_aux and type(statics[k]) is list:
            statics[k] = tuple(statics[k])
    for i, _, is_static in layout.hybrid:
        value = children[i]
        static = _static(value) if value is not None and is_static(d, value) else None
        if static is not None:
            children[i] = None
        statics.append(static)
    return tuple(children), (*statics, absent)


def _drop_absent(layout: _Layout, state: dict[str, Any], absent: Any, statics: Any) -> None:
    if type(absent) is not tuple or not layout.names.issuperset(absent):
        _invalid(layout, statics, None)
    for name in absent:
        del state[name]


def _invalid(layout: _Layout, statics: Any, children: Any) -> None:
    """Raise the clear error for leaves or aux data this class's unflatten cannot take."""
    n = len(layout.data)
    if children is not None and len(children) != n:
        raise ValueError(f"{layout.qualname}.tree_unflatten expected {n} children "
                         f"{layout.data}, got {len(children)}")
    names = (*layout.required_aux, VALIDATE, *(name for _, name, _ in layout.hybrid))
    raise ValueError(
        f"{layout.qualname}.tree_unflatten got malformed aux data {statics!r}: expected a "
        f"tuple of values for {names} and a tuple of absent field names")


_NOT_ARRAYS = (str, bytes, _NumpyroDistribution)


def _checking(layout: _Layout, unflatten: Callable[..., Any]) -> Callable[..., Any]:
    """numpyro's ``Cls.tree_unflatten(aux, params)``, called by hand: also check leaf kinds."""
    def checked_unflatten(statics: tuple[Any, ...], children: Any) -> Any:
        children = tuple(children)
        for i in layout.array_at:
            if i < len(children) and isinstance(children[i], _NOT_ARRAYS):
                raise TypeError(
                    f"{layout.qualname}.tree_unflatten: parameter {layout.data[i]!r} must be "
                    f"an array-like leaf, got {type(children[i]).__name__}")
        return unflatten(statics, children)

    return checked_unflatten


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

