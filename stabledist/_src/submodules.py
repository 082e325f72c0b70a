"""`stabledist.<name>` for every `numpyro.distributions.<name>`, so imports keep working.

`from numpyro.distributions.continuous import Normal` becomes
`from stabledist.continuous import Normal` and yields the stable class. A submodule that
defines no distribution (`constraints`, `transforms`, `util`, `kl`, ...) is numpyro's
own module object, so constraint and transform identities (`biject_to`'s registry,
`constraints.positive is ...`) are exactly upstream's. Derived from the installed numpyro;
type checkers see the mirrors through the generated stubs `stabledist/<name>.pyi`.
"""

from __future__ import annotations

import importlib
import pkgutil
import sys
import types
from typing import Any

import numpyro.distributions as _nd

__all__ = ["mirror_submodules"]


def mirror_submodules(package: str, stable: dict[str, Any]) -> dict[str, types.ModuleType]:
    """Create `<package>.<sub>` for each numpyro submodule and register it in `sys.modules`.

    `stable` maps public names to stable classes and factories; a mirrored module holds those
    that numpyro's submodule defines and forwards every other attribute to numpyro's module.
    """
    mirrored: dict[str, types.ModuleType] = {}
    for info in pkgutil.iter_modules(_nd.__path__):
        upstream = importlib.import_module(f"{_nd.__name__}.{info.name}")
        own = {
            name: value
            for name, value in stable.items()
            if value is not getattr(upstream, name, None)
            and _defined_in(getattr(upstream, name, None), upstream)
        }
        if own:
            module = types.ModuleType(f"{package}.{info.name}", upstream.__doc__)
            module.__dict__.update(own, __getattr__=_forward(upstream), __all__=sorted(own))
        else:
            module = upstream
        sys.modules[f"{package}.{info.name}"] = module
        mirrored[info.name] = module
    return mirrored


def _defined_in(obj: Any, module: types.ModuleType) -> bool:
    return obj is not None and getattr(obj, "__module__", None) == module.__name__


def _forward(upstream: types.ModuleType) -> Any:
    def __getattr__(name: str) -> Any:  # noqa: N807 - module-level __getattr__ protocol
        try:
            return getattr(upstream, name)
        except AttributeError:
            message = f"module {upstream.__name__!r} has no attribute {name!r}"
            raise AttributeError(message) from None

    return __getattr__
