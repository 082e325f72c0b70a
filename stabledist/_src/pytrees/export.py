"""Serialization of stable pytrees for ``jax.export``: portable names, explicit aux encoding.

``jax.export.export(jax.jit(f))(d, x).serialize()`` writes the tree structure of the
arguments and results (``in_tree``, ``out_tree``) with the bytes: every custom node needs a
name and an aux data encoder registered with ``jax.export.register_pytree_node_serialization``
(numpyro registers none, so its distributions cannot be exported). Here every stable class is
registered once, when it is created (`register_serialization`, called by the registration,
so a user's `make_stable` class is covered too), and numpyro's constraint and transform types,
which appear as nodes inside distributions (``TransformedDistribution.transforms``, a
truncated distribution's support), once at import (`register_numpyro_nodes`).

* **Names** do not depend on where stabledist keeps its classes: ``stabledist:`` followed by
  the module and qualified name of the class a stable class mirrors
  (``stabledist:numpyro.distributions.continuous.Normal``; a user's class: its own module and
  qualified name), or of the stable class itself when it mirrors nothing (a direct subclass of
  ``stabledist.Distribution``). Constraint and transform types: ``stabledist:`` and numpyro's
  name of the type.
* **Aux data** is encoded to bytes as canonical JSON (sorted keys, no spaces) of a tagged
  representation, never a pickle: ``None``, ``bool``, ``int`` and ``str`` as themselves;
  ``["float", hex]``, ``["tuple", [...]]``, ``["list", [...]]``, ``["dict", [[k, v], ...]]``
  (insertion order), ``["odict", ...]``, ``["dtype", name]``, ``["sctype", name]`` (a numpy
  scalar type), ``["ndarray" | "jax", dtype, shape, base64 of the little-endian bytes]``,
  ``["npscalar", dtype, base64]``, ``["static", value]`` (a hybrid field's static value,
  `stabledist._src.pytrees.pytree.StaticValue`) and ``["constraint", name]`` (one of numpyro's
  parameterless constraint objects, ``constraints.real``, by its name). A distribution's
  aux data goes with the names of its aux fields (``{"fields": [...], "aux": [...]}``), so bytes
  written by a stabledist whose field table differs fail to load with a clear error instead of
  unflattening values into the wrong fields. Anything else (a Python function in
  ``EulerMaruyama.sde_fn``, a SciPy sparse matrix in ``CAR(..., is_sparse=True)``) raises a
  `TypeError` naming the class and the field when the tree is serialized.

Registration only fills two dicts in ``jax.export``; flatten and
unflatten are untouched (JAX's deserialization rebuilds nodes with the registered unflatten).
A type someone else has registered already (numpyro or JAX in a future version) keeps that
registration. On a JAX without ``register_pytree_node_serialization`` nothing is registered.
"""

from __future__ import annotations

import base64
import json
import sys
from collections import OrderedDict
from collections.abc import Callable
from typing import Any

import jax
import numpy as np
from jax.core import Tracer
from numpyro.distributions import constraints as _constraints
from numpyro.distributions import transforms as _transforms
from numpyro.distributions.distribution import Distribution as _NumpyroDistribution

from stabledist._src.jax_private import exports as jax_exports
from stabledist._src.lazy import is_numpyro_class
from stabledist._src.pytrees.pytree import StaticValue, pytree_of
from stabledist._src.records import ClassRecord, is_stable_class, record_of

__all__ = ["UnserializableAuxError", "missing_name", "register_numpyro_nodes",
           "register_serialization", "serialized_name"]

PREFIX = "stabledist:"
_FORMAT = 1  # the version of the encoding below, written with every distribution's aux data
_ABSENT = "<absent>"  # the last aux entry of a table-layout class: names of unset fields

# `import jax` imports jax.export from jax 0.8 on only: imported here, so that with jax 0.7
# registration does not depend on whether the user's script imported it before stabledist
try:
    import jax.export as _jax_export
except ImportError:  # pragma: no cover - a JAX without jax.export
    _jax_export = None

_register_node: Callable[..., Any] | None = getattr(
    _jax_export, "register_pytree_node_serialization", None
)


class UnserializableAuxError(TypeError):
    """Aux data of a pytree node that has no portable encoding (raised by ``serialize()``)."""


class _CannotEncodeError(Exception):
    """Internal: ``value`` at ``path`` inside one aux entry cannot be encoded."""

    def __init__(self, value: Any, path: str) -> None:
        super().__init__(value, path)
        self.value, self.path = value, path


# --- registration ---------------------------------------------------------------------------


def serialized_name(cls: type) -> str:
    """The name ``jax.export`` writes for the stable class ``cls`` (see the module doc)."""
    return PREFIX + _qualified(record_of(cls).source)


def register_serialization(cls: type, record: ClassRecord) -> None:
    """Register the stable class ``cls`` (just registered as a pytree) for ``jax.export``.

    A class with a user's own ``tree_flatten`` has the user's aux data (encoded as a value,
    without a field layout). Called once per class, at class creation.
    """
    if _register_node is None:
        return
    name = PREFIX + _qualified(record.source)
    if record.own is not None:
        serialize, deserialize = _value_codec(cls, name)
    else:
        serialize, deserialize = _table_codec(cls, name)
    _register(cls, name, serialize, deserialize)


def _register(nodetype: type, name: str, serialize: Callable[[Any], bytes],
              deserialize: Callable[[bytes], Any]) -> None:
    """Register ``nodetype`` under ``name``. A name held already stays with its holder
    (numpyro or JAX registered it themselves), except when the holder is an earlier definition
    of the same stable class (a notebook cell run again, a module reloaded): the newest
    definition takes the name, and the old one keeps serializing while it lives."""
    assert _register_node is not None
    try:
        with jax_exports.registering_export_names():
            _register_node(nodetype, serialized_name=name, serialize_auxdata=serialize,
                           deserialize_auxdata=deserialize)
    except ValueError:
        holder = jax_exports.export_name_holder(name)
        if holder is not None and holder is not nodetype and _redefines(nodetype, holder):
            jax_exports.take_export_name(nodetype, name, serialize, deserialize,
                                         _from_children(nodetype))


def _redefines(new: type, old: type) -> bool:
    return _qualified(new) == _qualified(old) and is_stable_class(new) and is_stable_class(old)


def _from_children(nodetype: type) -> Callable[..., Any]:
    functions = pytree_of(nodetype)
    return functions.own[1] if functions.own is not None else functions.unflatten


def missing_name(name: str, stable_class: Callable[[type], type]) -> None:
    """jax.export is about to fail on bytes that name a stable class no module has defined in
    this process. A mirror of numpyro's is made now (``stable_class``: mirrors are made on
    first use); for any other class, say which module to import (JAX's own error names only
    the name)."""
    if not name.startswith(PREFIX):
        return
    path = name[len(PREFIX):]
    module = path.split(".", 1)[0]
    source = _imported_class(path)
    if source is not None and is_numpyro_class(source):
        stable_class(source)  # registers its name
        return
    if source is not None:  # its module is imported, the class is numpyro-style: not stable
        where = (f"the exporting process made it stable: call `stabledist.make_stable("
                 f"{source.__module__}.{source.__qualname__})` before jax.export.deserialize")
    elif module == "__main__":
        where = ("it was defined in a script (__main__): define it in a module that both the "
                 "exporting and the deserializing process import")
    else:
        where = (f"import the module that defines it (`import {path.rpartition('.')[0]}`, or "
                 f"the module of `{module}` that defines it) before jax.export.deserialize")
    raise ValueError(f"cannot deserialize: the exported function takes or returns a "
                     f"`{path}` ({name}), a class this process has not defined; {where}")


def _imported_class(path: str) -> type | None:
    """The class ``module.qualname`` names, when its module is imported already (nothing is
    imported here) and it is a numpyro-style distribution class that is not stable (numpyro's or
    a user's)."""
    parts = path.split(".")
    for i in range(len(parts) - 1, 0, -1):
        found: Any = sys.modules.get(".".join(parts[:i]))
        if found is None:
            continue
        for attr in parts[i:]:
            found = getattr(found, attr, None)
        if (isinstance(found, type) and issubclass(found, _NumpyroDistribution)
                and not is_stable_class(found)):
            return found
        return None
    return None


def _qualified(cls: type) -> str:
    return f"{cls.__module__}.{cls.__qualname__}"


def register_numpyro_nodes() -> None:
    """Register numpyro's constraint and transform types (nodes inside distributions), and
    numpyro's own distribution classes with a refusal that names the fix; once, at import.

    numpyro registers each with JAX as a pytree (``__init_subclass__``) with aux data
    ``(parameter names, {attribute: value})``; types defined later (a user's transform) are
    not covered and make ``serialize()`` fail with JAX's "unregistered type" error.

    Every import makes these ~180 registrations, so each is one small object (two for a
    constraint or transform type), not a pair of closures and their cell (five objects the
    cyclic collector counts, and walks in every full collection for the life of the process).
    """
    if _register_node is None:
        return
    for base in (_constraints.Constraint, _transforms.Transform):
        for node in sorted(_subclasses(base), key=_qualified):
            if node.__module__.startswith("numpyro."):
                name = PREFIX + _qualified(node)
                codec = _NumpyroNodeCodec(f"{node.__qualname__} ({name})")
                _register(node, name, codec, codec.deserialize)
    for cls in sorted(_subclasses(_NumpyroDistribution), key=_qualified):
        if cls.__module__.startswith("numpyro.") and not is_stable_class(cls):
            _register(cls, f"{PREFIX}numpyro-built:{_qualified(cls)}", _Refusal(cls),
                      _never_exported)


class _Refusal:
    """numpyro's own distribution classes: ``serialize()`` says to convert them (JAX's error
    would say only "unregistered type")."""

    __slots__ = ("cls",)

    def __init__(self, cls: type) -> None:
        self.cls = cls

    def __call__(self, aux: Any) -> bytes:
        raise UnserializableAuxError(
            f"cannot serialize a numpyro.distributions.{self.cls.__qualname__} for jax.export: "
            "numpyro's distribution classes are not exportable; give the function a stable "
            "one: stabledist.stabilize(d) converts it (numpyro's autoguides and Predictive "
            "build stable ones inside `with stabledist.stable_internals():`)")


def _never_exported(data: bytes) -> Any:  # pragma: no cover - nothing serializes these names
    raise ValueError("numpyro's distributions are never exported")


def _subclasses(base: type) -> set[type]:
    found: set[type] = set()
    pending = [base]
    while pending:
        for sub in pending.pop().__subclasses__():
            if sub not in found:
                found.add(sub)
                pending.append(sub)
    return found


# --- codecs: one per registered type --------------------------------------------------------


def _table_codec(cls: type, name: str
                 ) -> tuple[Callable[[Any], bytes], Callable[[bytes], Any]]:
    """Aux data ``(aux values..., hybrid statics..., absent names)`` with its field names."""
    label = f"{cls.__qualname__} ({name})"

    def fields() -> list[str]:
        table = record_of(cls).table
        return [*table.aux, *table.hybrid, _ABSENT]

    def serialize(aux: Any) -> bytes:
        names = fields()
        if type(aux) is not tuple or len(aux) != len(names):
            raise UnserializableAuxError(
                f"cannot serialize {label}: its aux data {aux!r} does not match its fields "
                f"{names}"
            )
        encoded = [_encode_field(label, field, value) for field, value in zip(names, aux)]
        return _dump({"format": _FORMAT, "fields": names, "aux": encoded})

    def deserialize(data: bytes) -> Any:
        payload = _load(label, data)
        names = fields()
        written = payload.get("fields")
        if written != names:
            raise ValueError(
                f"cannot deserialize {label}: the exported bytes were written with the aux "
                f"fields {written}, but this stabledist's {cls.__qualname__} has the fields "
                f"{names} (a different stabledist or numpyro version); export again with the "
                "versions that will load it"
            )
        return tuple(_decode_field(label, f, v) for f, v in zip(names, payload["aux"]))

    return serialize, deserialize


def _value_codec(cls: type, name: str) -> tuple[Callable[[Any], bytes], Callable[[bytes], Any]]:
    """A user class with its own ``tree_flatten``: its aux data, encoded as one value."""
    label = f"{cls.__qualname__} ({name})"

    def serialize(aux: Any) -> bytes:
        return _dump({"format": _FORMAT, "own": _encode_field(label, "aux data", aux)})

    def deserialize(data: bytes) -> Any:
        payload = _load(label, data)
        if "own" not in payload:
            raise ValueError(f"cannot deserialize {label}: the bytes were written for a "
                             "class with a field table, and this class has its own tree_flatten")
        return _decode_field(label, "aux data", payload["own"])

    return serialize, deserialize


class _NumpyroNodeCodec:
    """numpyro's constraint/transform aux data ``(parameter names, {attribute: value})``: the
    object serializes (it is called), its ``deserialize`` loads."""

    __slots__ = ("label",)

    def __init__(self, label: str) -> None:
        self.label = label

    def __call__(self, aux: Any) -> bytes:
        label = self.label
        if not (type(aux) is tuple and len(aux) == 2 and isinstance(aux[1], dict)):
            return _dump({"format": _FORMAT, "value": _encode_field(label, "aux data", aux)})
        keys, attributes = aux
        encoded = [[k, _encode_field(label, str(k), v)] for k, v in attributes.items()]
        return _dump({"format": _FORMAT, "params": _encode_field(label, "parameter names", keys),
                      "attributes": encoded})

    def deserialize(self, data: bytes) -> Any:
        label = self.label
        payload = _load(label, data)
        if "value" in payload:
            return _decode_field(label, "aux data", payload["value"])
        keys = _decode_field(label, "parameter names", payload["params"])
        return keys, {k: _decode_field(label, k, v) for k, v in payload["attributes"]}


def _dump(payload: dict[str, Any]) -> bytes:
    return json.dumps(payload, sort_keys=True, separators=(",", ":"), ensure_ascii=True,
                      allow_nan=False).encode("ascii")


def _load(label: str, data: bytes) -> dict[str, Any]:
    try:
        payload = json.loads(data.decode("ascii"))
    except (UnicodeDecodeError, ValueError) as error:
        raise ValueError(f"cannot deserialize {label}: its aux data is not stabledist's "
                         f"encoding ({error})") from None
    if not isinstance(payload, dict) or payload.get("format") != _FORMAT:
        found = payload.get("format") if isinstance(payload, dict) else None
        raise ValueError(f"cannot deserialize {label}: aux data format {found!r}, this "
                         f"stabledist reads format {_FORMAT}")
    return payload


def _encode_field(label: str, field: str, value: Any) -> Any:
    try:
        return _encode(value, "")
    except _CannotEncodeError as error:
        where = f"field {field!r}" + (f" (at {error.path})" if error.path else "")
        what = type(error.value)
        raise UnserializableAuxError(
            f"cannot serialize {label} for jax.export: its static {where} holds a "
            f"{what.__module__}.{what.__qualname__} ({_short_repr(error.value)}), which has no "
            "portable encoding. Static fields can be serialized when they hold None, bool, int, "
            "float, str, tuples, lists and dicts of these, numpy dtypes, numpy or jax arrays and "
            "numpyro's parameterless constraints; pass the distribution's parameters to the "
            "exported function instead and build it inside"
        ) from None


def _decode_field(label: str, field: str, encoded: Any) -> Any:
    try:
        return _decode(encoded)
    except (KeyError, TypeError, ValueError, IndexError) as error:
        raise ValueError(f"cannot deserialize {label}: malformed value of field {field!r} "
                         f"({error!r})") from None


def _short_repr(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 80 else text[:77] + "..."


# --- the value encoding ---------------------------------------------------------------------


def _constraint_names() -> dict[int, str]:
    """numpyro's module-level constraint objects without parameters: ``id -> name``."""
    names: dict[int, str] = {}
    for key in sorted(getattr(_constraints, "__all__", ())):
        value = getattr(_constraints, key, None)
        if isinstance(value, _constraints.Constraint) and id(value) not in names:
            names[id(value)] = key
    return names


_CONSTRAINTS: dict[int, str] | None = None


def _encode(value: Any, path: str) -> Any:
    kind = type(value)
    if value is None or kind is bool or kind is int or kind is str:
        return value
    if kind is float:
        return ["float", value.hex()]
    if kind is tuple or kind is list:
        return [kind.__name__, [_encode(v, f"{path}[{i}]") for i, v in enumerate(value)]]
    if kind is dict or kind is OrderedDict:
        return ["dict" if kind is dict else "odict",
                [[_encode(k, path), _encode(v, f"{path}[{k!r}]")] for k, v in value.items()]]
    if kind is StaticValue:
        return ["static", _encode(value.value, path)]
    if isinstance(value, np.dtype):
        return ["dtype", value.name]
    if isinstance(value, type) and issubclass(value, np.generic):
        return ["sctype", np.dtype(value).name]
    if isinstance(value, np.ndarray | np.generic | jax.Array):
        return _encode_array(value, path)
    if isinstance(value, _constraints.Constraint):
        global _CONSTRAINTS
        if _CONSTRAINTS is None:
            _CONSTRAINTS = _constraint_names()
        name = _CONSTRAINTS.get(id(value))
        if name is not None:
            return ["constraint", name]
    raise _CannotEncodeError(value, path)


def _encode_array(value: Any, path: str) -> Any:
    if isinstance(value, Tracer):
        raise _CannotEncodeError(value, path)
    array = np.asarray(value)
    if array.dtype.kind not in "biufc" and array.dtype.name not in _EXTRA_DTYPES:
        raise _CannotEncodeError(value, path)
    little = array.astype(array.dtype.newbyteorder("<"), copy=False)
    raw = base64.b64encode(np.ascontiguousarray(little).tobytes()).decode("ascii")
    if isinstance(value, np.generic):
        return ["npscalar", array.dtype.name, raw]
    tag = "ndarray" if isinstance(value, np.ndarray) else "jax"
    return [tag, array.dtype.name, list(array.shape), raw]


_EXTRA_DTYPES = frozenset({"bfloat16", "float8_e4m3fn", "float8_e5m2", "int4", "uint4"})


def _dtype(name: str) -> np.dtype[Any]:
    if name in _EXTRA_DTYPES:
        import ml_dtypes  # jax's dependency: the dtypes numpy does not name

        return np.dtype(getattr(ml_dtypes, name))
    return np.dtype(name)


def _decode(encoded: Any) -> Any:
    if encoded is None or type(encoded) in (bool, int, str):
        return encoded
    tag, *rest = encoded
    if tag == "float":
        return float.fromhex(rest[0])
    if tag == "tuple":
        return tuple(_decode(v) for v in rest[0])
    if tag == "list":
        return [_decode(v) for v in rest[0]]
    if tag in ("dict", "odict"):
        items = [(_decode(k), _decode(v)) for k, v in rest[0]]
        return dict(items) if tag == "dict" else OrderedDict(items)
    if tag == "static":
        return StaticValue(_decode(rest[0]))
    if tag == "dtype":
        return _dtype(rest[0])
    if tag == "sctype":
        return _dtype(rest[0]).type
    if tag == "npscalar":
        dtype = _dtype(rest[0])
        return np.frombuffer(base64.b64decode(rest[1]), dtype.newbyteorder("<"))[0].astype(dtype)
    if tag in ("ndarray", "jax"):
        dtype = _dtype(rest[0])
        flat = np.frombuffer(base64.b64decode(rest[2]), dtype.newbyteorder("<"))
        array = flat.astype(dtype).reshape(tuple(rest[1]))
        return array if tag == "ndarray" else jax.numpy.asarray(array, dtype=dtype)
    if tag == "constraint":
        value = getattr(_constraints, rest[0])
        if not isinstance(value, _constraints.Constraint):
            raise ValueError(f"{rest[0]!r} is not a numpyro constraint")
        return value
    raise ValueError(f"unknown tag {tag!r}")
