"""`DistSpec`: one distribution as plain data (class name, constructor arguments, dtype, and the
`ArgStyle` in which a user passes the arguments), which builds the *same* distribution with
`stabledist` or with `numpyro.distributions`, prints readably, shrinks well under hypothesis
and pickles into other processes. Hypothesis-free.
"""

from __future__ import annotations

import contextlib
import dataclasses
import inspect
import types
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, cast

import jax
import jax.numpy as jnp
import numpy as np
import numpyro.distributions as nd

import stabledist
from stabledist.testing import catalog
from stabledist.testing._twin import numpyro_twin

__all__ = ["ARG_KINDS", "ArgStyle", "DistSpec", "Raw", "user_value"]

ARG_KINDS: tuple[str, ...] = ("python", "numpy", "numpy-scalar", "numpy-default", "jax")
"""How a user passes an array argument (`ArgStyle.convert`): ``python`` a Python ``float`` /
``int`` / ``bool`` (0-d values; larger ones as NumPy arrays), ``numpy`` a NumPy array of the
drawn dtype, ``numpy-scalar`` a NumPy scalar of it (``np.float32``, ``np.int32``, ... ; 0-d),
``numpy-default`` NumPy's default dtypes (``np.float64``, ``np.int64``: what ``np.array([0.5])``
gives, also without x64), ``jax`` a ``jnp`` array."""


@dataclass(frozen=True)
class ArgStyle:
    """The way a user passes a distribution's arguments: one of `ARG_KINDS` per array
    argument (cycled, in call order, over every constructor call of the build, nested
    distributions included) and ``validate_args`` (``None``: not passed, numpyro's global
    default applies)."""

    kinds: tuple[str, ...] = ("jax",)
    validate_args: bool | None = True

    def __post_init__(self) -> None:
        unknown = set(self.kinds) - set(ARG_KINDS)
        if unknown or not self.kinds:
            raise ValueError(f"ArgStyle kinds must be among {ARG_KINDS}, got {self.kinds}")

    def convert(self, value: Any, i: int) -> Any:
        """``value`` (an array) as the ``i``-th array argument is passed."""
        return _as_kind(value, self.kinds[i % len(self.kinds)])

    def __repr__(self) -> str:
        validate = {None: "not passed", True: "True", False: "False"}[self.validate_args]
        return f"ArgStyle({'/'.join(self.kinds)}, validate_args {validate})"


def _as_kind(value: Any, kind: str) -> Any:
    if kind == "jax":
        return jnp.asarray(value)
    host = np.asarray(value)
    if kind == "numpy":
        return host
    if kind == "numpy-default":
        if np.issubdtype(host.dtype, np.floating):
            host = host.astype(np.float64)
        elif np.issubdtype(host.dtype, np.integer):
            host = host.astype(np.int64)
        return host[()] if host.ndim == 0 else host
    if host.ndim:  # python, numpy-scalar: only 0-d values have a scalar form
        return host
    return host.item() if kind == "python" else host[()]


def user_value(value: Any) -> Any:
    """A value for ``log_prob``/``cdf`` as a user writes it: a Python number for a 0-d value,
    a NumPy array otherwise (``None`` stays ``None``)."""
    if value is None:
        return None
    return _as_kind(value, "python")


@dataclass(frozen=True, eq=False)
class DistSpec:
    """A distribution class and constructor arguments, as plain data.

    ``name`` is a public ``numpyro.distributions`` name (built from whichever module
    `build` is given) unless ``cls`` is set (a user's class). ``catalog_id`` names a
    catalog builder instead of ``args``. Float leaves are float64 when ``x64`` is true: build
    and use such a spec inside `x64_context`.
    """

    name: str
    args: tuple[tuple[str, Any], ...] = ()
    cls: type | None = None
    catalog_id: str | None = None
    x64: bool = False
    mode: str = "generic"
    style: ArgStyle | None = None
    """How the arguments are passed (``None``: ``jnp`` arrays, ``validate_args`` as given)."""

    def build(self, module: types.ModuleType | None = None) -> nd.Distribution:
        """The instance, from ``module`` (default `stabledist`)."""
        module = stabledist if module is None else module
        with self.x64_context():
            if self.catalog_id is not None:
                builder = _catalog_builders()[self.catalog_id]
                if self.x64:  # float64 leaves: no constructor runs, the style cannot apply
                    return _cast_floats(builder(module), jnp.float64)
                styled = module if self.style is None else _StyledModule(module, self.style)
                return builder(cast(types.ModuleType, styled))
            return self.target(module)(**self.kwargs(module))

    def build_pair(self) -> tuple[Any, Any] | None:
        """Build the stabledist and the numpyro instance of this spec, to compare them.

        ``(stabledist instance, numpyro instance)``, or ``None`` where numpyro's constructor
        raises for these arguments and stabledist's raises the same exception type (then
        there is nothing to compare: hypothesis should draw another example); a
        `StabilityError` where only one of them raises."""
        from stabledist.testing._compare import StabilityError, attempt

        theirs, ours = attempt(lambda: self.build(nd)), attempt(self.build)
        if theirs.ok and ours.ok:
            return ours.value, theirs.value
        if not theirs.ok and not ours.ok and type(ours.error) is type(theirs.error):
            return None
        detail = [f"{who} {'returns' if o.ok else f'raises {type(o.error).__name__}: {o.error}'}"
                  for who, o in (("stabledist", ours), ("numpyro", theirs))]
        raise StabilityError(f"[construction] {self!r}: {', '.join(detail)}")

    def kwargs(self, module: types.ModuleType | None = None) -> dict[str, Any]:
        """The constructor arguments, nested specs built from ``module``.

        Call it inside `x64_context` for a float64 spec."""
        module = stabledist if module is None else module
        counter = iter(range(1 << 30))
        out = {k: _materialize(v, module, self.style, counter) for k, v in self.args}
        if self.style is not None:
            out.pop("validate_args", None)
            if self.style.validate_args is not None and _accepts_validate_args(
                    self.target(module)):
                out["validate_args"] = self.style.validate_args
        return out

    def target(self, module: types.ModuleType | None = None) -> Callable[..., Any]:
        """The class (or factory) that `build` calls."""
        module = stabledist if module is None else module
        if self.cls is None:
            return getattr(module, self.name)
        if module is nd:  # the user's class on numpyro's base (NoNumpyroTwin if none)
            return numpyro_twin(self.cls)
        return self.cls

    def x64_context(self) -> Any:
        """``jax.enable_x64(True)`` for a float64 spec, else a no-op context."""
        return jax.enable_x64(True) if self.x64 else contextlib.nullcontext()

    def _repr_pretty_(self, printer: Any, cycle: bool) -> None:  # hypothesis's printer
        printer.text(repr(self))

    def __repr__(self) -> str:
        style = "" if self.style is None else f" with {self.style!r}"
        if self.catalog_id is not None:
            head = f"catalog[{self.catalog_id}]"
            return head + (".astype(float64)" if self.x64 else style)
        args = ", ".join(f"{k}={_short(v)}" for k, v in self.args)
        return f"{self.name}({args}){style}"


class _StyledModule:
    """A distributions module whose constructors get their array arguments in an `ArgStyle`
    (the catalog's builders pass ``jnp`` arrays and ``validate_args=True``)."""

    def __init__(self, module: types.ModuleType, style: ArgStyle) -> None:
        self._module, self._style, self._count = module, style, 0

    def __getattr__(self, name: str) -> Any:
        value = getattr(self._module, name)
        if name[:1].isupper() and callable(value) and name in nd.__all__:
            return self._styled(value)
        return value

    def _styled(self, constructor: Callable[..., Any]) -> Callable[..., Any]:
        def build(*args: Any, **kwargs: Any) -> Any:
            args = tuple(self._convert(a) for a in args)
            kwargs = {k: self._convert(v) for k, v in kwargs.items() if k != "validate_args"}
            if self._style.validate_args is not None and _accepts_validate_args(constructor):
                kwargs["validate_args"] = self._style.validate_args
            return constructor(*args, **kwargs)

        return build

    def _convert(self, value: Any) -> Any:
        if not isinstance(value, jax.Array):
            return value
        self._count += 1
        return self._style.convert(value, self._count - 1)


def _accepts_validate_args(target: Any) -> bool:
    try:
        return "validate_args" in inspect.signature(target).parameters
    except (TypeError, ValueError):  # pragma: no cover - a C-implemented callable
        return False


@dataclass(frozen=True, eq=False)
class Raw:
    """An argument passed to the constructor as is (e.g. ``CAR``'s numpy adjacency matrix,
    which numpyro requires to be a numpy array, not a JAX array)."""

    value: Any

    def __repr__(self) -> str:
        return _short(self.value)


def _materialize(value: Any, module: types.ModuleType, style: ArgStyle | None,
                 counter: Any) -> Any:
    if isinstance(value, DistSpec):  # nested: passed in its holder's style unless its own
        if value.style is None and style is not None:
            value = dataclasses.replace(value, style=style)
        return value.build(module)
    if isinstance(value, Raw):
        return value.value
    if isinstance(value, np.ndarray | np.generic):
        return jnp.asarray(value) if style is None else style.convert(value, next(counter))
    if isinstance(value, list):
        return [_materialize(v, module, style, counter) for v in value]
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
