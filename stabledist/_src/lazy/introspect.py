"""Questions about distribution classes, answered in one place.

The core, `stabledist.testing`, the benchmarks and the tests all need to know which names of a
class are lazy properties, what the MRO resolves a name to, which numpyro class a stable class
mirrors and which public names are factories. Each answer is written once, here (whether an
attribute is a lazy property: `stabledist._src.lazy.reads.is_lazy`), so the four users cannot drift
apart. Nothing here imports hypothesis or builds a distribution.
"""

from __future__ import annotations

import inspect
import types
from typing import Any

import numpyro.distributions as _nd
from numpyro.distributions.distribution import Distribution as _NumpyroDistribution

from stabledist._src.lazy.reads import is_lazy

__all__ = [
    "NOT_FACTORIES",
    "class_attribute",
    "is_factory_name",
    "is_numpyro_class",
    "lazy_names",
    "public_names",
]

NOT_FACTORIES = frozenset({"biject_to", "kl_divergence"})
"""Public functions of ``numpyro.distributions`` that do not build distributions."""


def class_attribute(cls: type, name: str, default: Any = None) -> Any:
    """The attribute ``name`` as ``cls``'s MRO resolves it, without calling descriptors."""
    for base in cls.__mro__:
        if name in vars(base):
            return vars(base)[name]
    return default


def lazy_names(cls_or_instance: Any) -> tuple[str, ...]:
    """Sorted names that resolve to a lazy property (numpyro's or stabledist's) on a class
    or on an instance's class. A plain attribute that overrides a lazy one hides it."""
    cls = cls_or_instance if isinstance(cls_or_instance, type) else type(cls_or_instance)
    names = {name for base in cls.__mro__ for name in vars(base)}
    return tuple(sorted(n for n in names if is_lazy(class_attribute(cls, n))))


def is_numpyro_class(cls: type) -> bool:
    """Whether ``cls`` is one of numpyro's own distribution classes (not a mirror, not a
    user's class)."""
    return isinstance(cls, type) and cls.__module__.startswith("numpyro.distributions")


def is_factory_name(name: str, module: types.ModuleType = _nd) -> bool:
    """Whether the public name ``name`` of ``module`` is a function that builds distributions
    (``TruncatedNormal``, ``Categorical``, ...): callable, not a class nor a module, and not
    one of `NOT_FACTORIES`."""
    obj = getattr(module, name)
    return (
        callable(obj)
        and not inspect.isclass(obj)
        and not inspect.ismodule(obj)
        and name not in NOT_FACTORIES
    )


def public_names(module: types.ModuleType = _nd) -> tuple[list[str], list[str]]:
    """``(class names, factory names)`` of ``module.__all__``, in ``__all__`` order."""
    classes: list[str] = []
    factories: list[str] = []
    for name in module.__all__:
        obj = getattr(module, name)
        if inspect.isclass(obj) and issubclass(obj, _NumpyroDistribution):
            classes.append(name)
        elif is_factory_name(name, module):
            factories.append(name)
    return classes, factories
