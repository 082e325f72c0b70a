"""stabledist's namespace: every public name of `numpyro.distributions`, and
`stabledist.<name>` for every `numpyro.distributions.<name>`, so imports keep working.

Classes are made stable on first use (the package's and each mirrored submodule's
``__getattr__``): making all of numpyro's ~100 classes at import would cost a quarter of a
second of every import, for the handful a program uses. A numpyro class stabledist could not
flatten fails the import all the same (`check_coverable`).

`from numpyro.distributions.continuous import Normal` becomes
`from stabledist.continuous import Normal` and yields the stable class. A submodule that
defines no distribution (`constraints`, `transforms`, `util`, `kl`, ...) is numpyro's
own module object, so constraint and transform identities (`biject_to`'s registry,
`constraints.positive is ...`) are exactly upstream's. A mirrored submodule makes each stable
class on first use, as the package does; type checkers see the mirrors through the generated
stubs `stabledist/<name>.pyi`.

Stable internals, opt-in: numpyro's own code builds stable distributions too.

numpyro's autoguides (``get_posterior``, ``get_base_dist``), reparametrizers, ``Predictive``
and factory functions build distributions from ``numpyro.distributions`` classes, so a program
that mixes them with stabledist instances meets both kinds (a ``lax.scan`` carry or a
``tree_map`` over both then fails on the different treedefs). With the switch on, constructing
any numpyro distribution class builds its stable subclass instead, through numpyro's own
construction hook (``numpyro.distributions.distribution.COERCIONS``), so nothing is patched.
Results are the same objects numpyro would build, but stable: ``isinstance`` against numpyro's
classes still holds, and the numbers are numpyro's own.

The switch is off by default; turn it on for a block (`stable_internals`, per thread and per
asyncio task, as a context variable) or for the whole process (`use_stable_internals`).
"""

from __future__ import annotations

import contextlib
import contextvars
import importlib
import inspect
import pkgutil
import sys
import threading
import types
from collections.abc import Callable, Iterator, Mapping
from typing import Any

import numpyro.distributions as _nd
from numpyro.distributions import distribution as _numpyro_distribution
from numpyro.distributions.distribution import Distribution as _NumpyroDistribution

from stabledist._src.construction.describe import unknown_own_pytree
from stabledist._src.construction.mirrors import stable_class
from stabledist._src.lazy import is_numpyro_class
from stabledist._src.records import is_stable_class

__all__ = ["check_coverable", "mirror_submodules", "stable_internals",
           "stable_internals_enabled", "use_stable_internals"]


def check_coverable() -> None:
    """Fail the import on a numpyro class with its own pytree methods that stabledist does not
    know (a newer numpyro), rather than a model's first use of it."""
    pending, seen = [_NumpyroDistribution], set()
    while pending:
        for sub in pending.pop().__subclasses__():
            if sub not in seen and is_numpyro_class(sub):
                seen.add(sub)
                pending.append(sub)
                unknown_own_pytree(sub)


def mirror_submodules(package: str, factories: Mapping[str, Any],
                      stable_class: Callable[[type], type]) -> dict[str, types.ModuleType]:
    """Create `<package>.<sub>` for each numpyro submodule and register it in `sys.modules`.

    A submodule that defines distribution classes or factories is mirrored: its classes are
    made stable on first use (``stable_class``), its factories are the package's
    (``factories``: name -> wrapped factory), and every other attribute is numpyro's."""
    mirrored: dict[str, types.ModuleType] = {}
    for info in pkgutil.iter_modules(_nd.__path__):
        upstream = importlib.import_module(f"{_nd.__name__}.{info.name}")
        classes = {n for n, v in vars(upstream).items() if _defined_class(v, upstream)}
        own = {n: f for n, f in factories.items()
               if getattr(getattr(upstream, n, None), "__module__", None) == upstream.__name__}
        module = upstream
        if classes or own:
            module = types.ModuleType(f"{package}.{info.name}", upstream.__doc__)
            module.__dict__.update(own, __all__=sorted({*classes, *own}),
                                   __getattr__=_forward(upstream, classes, stable_class))
        sys.modules[f"{package}.{info.name}"] = module
        mirrored[info.name] = module
    return mirrored


def _defined_class(value: Any, module: types.ModuleType) -> bool:
    return (inspect.isclass(value) and issubclass(value, _NumpyroDistribution)
            and value.__module__ == module.__name__)


def _forward(upstream: types.ModuleType, classes: set[str],
             stable_class: Callable[[type], type]) -> Any:
    def __getattr__(name: str) -> Any:  # noqa: N807 - module-level __getattr__ protocol
        try:
            value = getattr(upstream, name)
        except AttributeError:
            message = f"module {upstream.__name__!r} has no attribute {name!r}"
            raise AttributeError(message) from None
        return stable_class(value) if name in classes else value

    return __getattr__


# --- stable internals ------------------------------------------------------------------------

_block: contextvars.ContextVar[bool | None] = contextvars.ContextVar(
    "stabledist_stable_internals", default=None
)
_process_wide = False
_install_lock = threading.Lock()


def _coerce(cls: type, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
    """numpyro's coercion hook: build the stable subclass when the switch is on."""
    if is_stable_class(cls) or not stable_internals_enabled():
        return None  # numpyro goes on with its own construction
    return stable_class(cls)(*args, **kwargs)


def _install() -> None:
    """Put the hook in numpyro's list once, on first use (it costs nothing until then)."""
    with _install_lock:
        if _coerce not in _numpyro_distribution.COERCIONS:
            _numpyro_distribution.COERCIONS.append(_coerce)


def stable_internals_enabled() -> bool:
    """Whether numpyro's constructors build stable distributions here and now."""
    block = _block.get()
    return _process_wide if block is None else block


@contextlib.contextmanager
def stable_internals(enabled: bool = True) -> Iterator[None]:
    """Make numpyro's own code build stable distributions within the block.

    With ``enabled=False``, numpyro's own code builds numpyro's classes within the block, even
    where the process-wide switch (`use_stable_internals`) is on.

    ```python
    import stabledist
    from numpyro.infer.autoguide import AutoMultivariateNormal

    with stabledist.stable_internals():
        posterior = guide.get_posterior(params)   # a stabledist.MultivariateNormal
    ```
    """
    _install()
    token = _block.set(enabled)
    try:
        yield
    finally:
        _block.reset(token)


def use_stable_internals(enabled: bool = True) -> None:
    """Turn stable internals on (or off) for the whole process, every thread.

    A `stable_internals` block still decides inside it."""
    global _process_wide
    _install()
    _process_wide = enabled
