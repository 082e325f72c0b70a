"""jax.export's private registries of serialized names, read and changed here alone.

A class defined again (a notebook cell run again, a reloaded module) takes over its name, and
bytes naming a class no module has defined yet ask stabledist which module to import. The
registries are probed when this module is imported (at ``import stabledist``); without them
the first definition keeps its name and JAX's own error names only the serialized name.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator
from typing import Any

from stabledist._src.jax_private import _probe, warn_unexpected

__all__ = ["export_name_holder", "on_missing_export_name", "registering_export_names",
           "take_export_name"]


def _export_registries() -> Any:
    from jax._src.export import _export

    if not (isinstance(_export.serialization_registry, dict)
            and isinstance(_export.deserialization_registry, dict)):
        raise AssertionError("jax.export keeps its registries in other types")
    return _export


class _NameRegistry(dict):
    """jax.export's deserialization registry, which asks ``missing(name)`` (it raises a clear
    error) about a name it does not hold, except while stabledist registers one."""

    missing: Callable[[str], None] | None = None
    registering = False

    def __contains__(self, name: object) -> bool:
        if dict.__contains__(self, name):
            return True
        if self.missing is not None and not self.registering and isinstance(name, str):
            self.missing(name)
        return dict.__contains__(self, name)


def export_name_holder(name: str) -> type | None:
    """The type ``jax.export`` deserializes ``name`` as (None when unknown or not held)."""
    if _exports is None:
        return None
    entry = dict.get(_exports.deserialization_registry, name)
    return None if entry is None else entry[0]


def take_export_name(nodetype: type, name: str, serialize: Callable[[Any], bytes],
                     deserialize: Callable[[bytes], Any], unflatten: Callable[..., Any]) -> bool:
    """Make ``name`` deserialize as ``nodetype`` (a class defined again), keeping the old
    type's own serialization (its instances still export); False without the internal."""
    if _exports is None:
        return False
    _exports.serialization_registry[nodetype] = (name, serialize)
    dict.__setitem__(_exports.deserialization_registry, name,
                     (nodetype, deserialize, unflatten))
    return True


def on_missing_export_name(missing: Callable[[str], None]) -> None:
    """Have ``missing(name)`` asked when jax.export deserializes a name no type holds (it
    raises the clear error); set once, at import."""
    if _exports is None:
        return
    registry = _exports.deserialization_registry
    if type(registry) is not _NameRegistry:
        registry = _NameRegistry(registry)
        _exports.deserialization_registry = registry
    registry.missing = missing


@contextlib.contextmanager
def registering_export_names() -> Iterator[None]:
    """While stabledist registers names, a name not held yet is no question to ask."""
    registry = getattr(_exports, "deserialization_registry", None)
    if type(registry) is not _NameRegistry:
        yield
        return
    registry.registering = True
    try:
        yield
    finally:
        registry.registering = False


_exports = _probe("export_registries", _export_registries)
warn_unexpected(["export_registries"])
