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
from numpyro.distributions import biject_to as biject_to
from numpyro.distributions import constraints as constraints
from numpyro.distributions import kl_divergence as kl_divergence
from numpyro.distributions import transforms as transforms

# The public face: every name below is API; the modules in `stabledist._src` are private.
from stabledist._src.construction import Distribution as Distribution
from stabledist._src.construction import _from_source as _from_source  # the name pickles use
from stabledist._src.construction import check_coverable as _check_coverable
from stabledist._src.construction import is_stable as is_stable
from stabledist._src.construction import make_stable as make_stable
from stabledist._src.construction import mirror_submodules as _mirror_submodules
from stabledist._src.construction import stabilize as stabilize
from stabledist._src.construction import stable_class as stable_class
from stabledist._src.construction import stable_internals as stable_internals
from stabledist._src.construction import stable_internals_enabled as stable_internals_enabled
from stabledist._src.construction import use_stable_internals as use_stable_internals
from stabledist._src.construction import wrap_factory as _wrap_factory
from stabledist._src.lazy import cache_info as cache_info
from stabledist._src.lazy import cached_lazy_property as cached_lazy_property
from stabledist._src.lazy import clear_cache as clear_cache
from stabledist._src.lazy import public_names as _public_names

__version__ = "0.1.0"


# Stable classes are made on first use (`__getattr__`): making all of numpyro's ~100 classes
# here would cost a quarter of a second of every import, for the handful a program uses.
# Factories are cheap wrappers, made now.
_CLASS_NAMES, _FACTORY_NAMES = map(frozenset, _public_names(_nd))
globals().update({n: _wrap_factory(getattr(_nd, n)) for n in _FACTORY_NAMES})
_OTHER = {n: getattr(_nd, n) for n in _nd.__all__ if n not in _CLASS_NAMES
          and n not in _FACTORY_NAMES}  # numpyro's own objects: modules, biject_to, kl_divergence
globals().update(_OTHER)
_uncovered = [n for n, v in _OTHER.items()
              if not (_inspect.ismodule(v) or n in {"biject_to", "kl_divergence"})]
if _uncovered:  # pragma: no cover - guards future numpyro releases
    raise ImportError(f"stabledist does not cover numpyro.distributions names {_uncovered}")
_check_coverable()  # a numpyro class stabledist cannot flatten fails the import, not a model
globals().update(_mirror_submodules(
    __name__, {n: globals()[n] for n in _FACTORY_NAMES}, stable_class))

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

_LAZY_SUBMODULES = ("handlers", "testing")


def __getattr__(name: str) -> _Any:
    """A stable class, made on first use; ``handlers`` / ``testing``, imported on first use;
    close matches for a typo."""
    if name in _CLASS_NAMES:
        cls = globals()[name] = stable_class(getattr(_nd, name))
        return cls
    if name in _LAZY_SUBMODULES:
        import importlib

        return importlib.import_module(f"{__name__}.{name}")
    import difflib

    close = difflib.get_close_matches(name, [*__all__, *_LAZY_SUBMODULES], n=3)
    hint = f"; did you mean {' or '.join(map(repr, close))}?" if close else ""
    raise AttributeError(f"module 'stabledist' has no attribute {name!r}{hint}")


def __dir__() -> list[str]:
    return sorted({*globals(), *__all__, *_LAZY_SUBMODULES})

