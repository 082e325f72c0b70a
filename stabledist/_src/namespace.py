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
"""

from __future__ import annotations

import importlib
import inspect
import pkgutil
import sys
import types
from collections.abc import Callable, Mapping
from typing import Any

import numpyro.distributions as _nd
from numpyro.distributions.distribution import Distribution as _NumpyroDistribution

from stabledist._src.describe import unknown_own_pytree
from stabledist._src.introspect import is_numpyro_class

__all__ = ["check_coverable", "mirror_submodules"]


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
