"""stabledist: numpyro distributions whose pytrees never change.

``import stabledist as dist`` replaces ``import numpyro.distributions as dist``. Every class is
a subclass of the numpyro class of the same name (same constructor, same numbers), but lazy
values live in an external weak-key cache and pytrees have a fixed, key-path field layout.
The list of classes and factory functions is derived from the installed numpyro; import fails
loudly if a new numpyro class cannot be covered.
"""

from __future__ import annotations

import inspect as _inspect
from typing import Any as _Any

import numpyro.distributions as _nd
from numpyro.distributions import biject_to, constraints, kl_divergence, transforms

# The public face: every name below is API; the modules in `stabledist._src` are private.
from stabledist._src.cache import cache_info as cache_info
from stabledist._src.cache import cached_lazy_property as cached_lazy_property
from stabledist._src.cache import clear_cache as clear_cache
from stabledist._src.fork import Distribution as Distribution
from stabledist._src.fork import _from_source as _from_source  # the name pickles use
from stabledist._src.fork import is_stable as is_stable
from stabledist._src.fork import make_stable as make_stable
from stabledist._src.fork import mirror_all as _mirror_all
from stabledist._src.fork import stabilize as stabilize
from stabledist._src.fork import stable_class as stable_class
from stabledist._src.fork import wrap_factory as _wrap_factory
from stabledist._src.internals import stable_internals as stable_internals
from stabledist._src.internals import stable_internals_enabled as stable_internals_enabled
from stabledist._src.internals import use_stable_internals as use_stable_internals
from stabledist._src.introspect import is_factory_name as _is_factory_name
from stabledist._src.submodules import mirror_submodules as _mirror_submodules

__version__ = "0.1.0"


def _build_namespace() -> dict[str, _Any]:
    """Stable classes and factories for every public name of numpyro.distributions."""
    classes = _mirror_all()
    namespace: dict[str, _Any] = dict(classes)
    for name in _nd.__all__:
        upstream = getattr(_nd, name)
        if _inspect.isclass(upstream) and issubclass(upstream, _nd.Distribution):
            namespace[name] = stable_class(upstream)
        elif _is_factory_name(name):
            namespace[name] = _wrap_factory(upstream)
        elif name not in namespace:
            namespace[name] = upstream
    uncovered = [
        n
        for n in _nd.__all__
        if namespace.get(n) is getattr(_nd, n)
        and not (_inspect.ismodule(namespace[n]) or n in {"biject_to", "kl_divergence"})
    ]
    if uncovered:  # pragma: no cover - guards future numpyro releases
        raise ImportError(f"stabledist does not cover numpyro.distributions names {uncovered}")
    return namespace


_namespace = _build_namespace()
globals().update({n: _namespace[n] for n in _nd.__all__})
_submodules = _mirror_submodules(__name__, _namespace)
globals().update(_submodules)

__all__ = [
    *_nd.__all__,
    "cache_info",
    "cached_lazy_property",
    "clear_cache",
    "is_stable",
    "make_stable",
    "stabilize",
    "stable_class",
    "stable_internals",
    "stable_internals_enabled",
    "use_stable_internals",
]
del _namespace

_LAZY_SUBMODULES = ("handlers", "testing")


def __getattr__(name: str) -> _Any:
    """Import ``handlers`` / ``testing`` on first use; name close matches for typos."""
    if name in _LAZY_SUBMODULES:
        import importlib

        return importlib.import_module(f"{__name__}.{name}")
    import difflib

    close = difflib.get_close_matches(name, [*__all__, *_LAZY_SUBMODULES], n=3)
    hint = f"; did you mean {' or '.join(map(repr, close))}?" if close else ""
    raise AttributeError(f"module 'stabledist' has no attribute {name!r}{hint}")
assert biject_to is _nd.biject_to and constraints is _nd.constraints
assert kl_divergence is _nd.kl_divergence and transforms is _nd.transforms
assert Distribution is globals()["Distribution"]
