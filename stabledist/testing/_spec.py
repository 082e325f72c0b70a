"""`DistSpec`: one distribution as plain data (class name, constructor arguments, dtype), which
builds the *same* distribution with `stabledist` or with `numpyro.distributions`, prints
readably, shrinks well under hypothesis and pickles into other processes. Hypothesis-free.
"""

from __future__ import annotations

import types
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
import numpyro.distributions as nd

import stabledist
from stabledist.introspect import upstream_class
from stabledist.testing import catalog

__all__ = ["DistSpec", "Raw"]


@dataclass(frozen=True, eq=False)
class DistSpec:
    """A distribution class and constructor arguments, as plain data.

    ``name`` is a public ``numpyro.distributions`` name (built from whichever module
    :meth:`build` is given) unless ``cls`` is set (a user's class). ``catalog_id`` names a
    catalog builder instead of ``args``. Float leaves are float64 when ``x64`` is true: build
    and use such a spec inside :meth:`x64_context`.
    """

    name: str
    args: tuple[tuple[str, Any], ...] = ()
    cls: type | None = None
    catalog_id: str | None = None
    x64: bool = False
    mode: str = "generic"

    def build(self, module: types.ModuleType | None = None) -> nd.Distribution:
        """The instance, from ``module`` (default :mod:`stabledist`)."""
        module = stabledist if module is None else module
        with self.x64_context():
            if self.catalog_id is not None:
                d = _catalog_builders()[self.catalog_id](module)
                return _cast_floats(d, jnp.float64) if self.x64 else d
            return self.target(module)(**self.kwargs(module))

    def kwargs(self, module: types.ModuleType | None = None) -> dict[str, Any]:
        """The constructor arguments, nested specs built from ``module`` (call it inside
        `x64_context` for a float64 spec)."""
        module = stabledist if module is None else module
        return {k: _materialize(v, module) for k, v in self.args}

    def target(self, module: types.ModuleType | None = None) -> Callable[..., Any]:
        """The class (or factory) that :meth:`build` calls."""
        module = stabledist if module is None else module
        if self.cls is None:
            return getattr(module, self.name)
        if module is nd:
            return upstream_class(self.cls)
        return self.cls

    def x64_context(self) -> Any:
        """``jax.enable_x64(True)`` for a float64 spec, else a no-op context."""
        return jax.enable_x64(True) if self.x64 else _nullcontext()

    def _repr_pretty_(self, printer: Any, cycle: bool) -> None:  # hypothesis's printer
        printer.text(repr(self))

    def __repr__(self) -> str:
        if self.catalog_id is not None:
            head = f"catalog[{self.catalog_id}]"
            return head + (".astype(float64)" if self.x64 else "")
        args = ", ".join(f"{k}={_short(v)}" for k, v in self.args)
        return f"{self.name}({args})"


class _nullcontext:  # noqa: N801 - tiny, picklable, reusable stand-in for contextlib's
    def __enter__(self) -> None:
        return None

    def __exit__(self, *exc: object) -> None:
        return None


@dataclass(frozen=True, eq=False)
class Raw:
    """An argument passed to the constructor as is (e.g. ``CAR``'s numpy adjacency matrix,
    which numpyro requires to be a numpy array, not a JAX array)."""

    value: Any

    def __repr__(self) -> str:
        return _short(self.value)


def _materialize(value: Any, module: types.ModuleType) -> Any:
    if isinstance(value, DistSpec):
        return value.build(module)
    if isinstance(value, Raw):
        return value.value
    if isinstance(value, np.ndarray | np.generic):
        return jnp.asarray(value)
    if isinstance(value, list):
        return [_materialize(v, module) for v in value]
    return value


def _short(value: Any) -> str:
    if isinstance(value, np.ndarray | np.generic):
        body = np.array2string(np.asarray(value), precision=4, separator=", ", threshold=20)
        return f"{body}:{value.dtype}"
    if isinstance(value, list):
        return "[" + ", ".join(_short(v) for v in value) + "]"
    return repr(value)


def _cast_floats(d: Any, dtype: Any) -> Any:
    """``d`` with every floating leaf cast to ``dtype`` (no constructor runs)."""

    def cast(x: Any) -> Any:
        if isinstance(x, jax.Array | np.ndarray) and jnp.issubdtype(x.dtype, jnp.floating):
            return jnp.asarray(x, dtype=dtype)
        return x

    return jax.tree_util.tree_map(cast, d)


_CATALOG: dict[str, Callable[[types.ModuleType], Any]] | None = None


def _catalog_builders() -> dict[str, Callable[[types.ModuleType], Any]]:
    global _CATALOG
    if _CATALOG is None:
        _CATALOG = dict(catalog.all_builders())
    return _CATALOG
