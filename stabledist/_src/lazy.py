"""Lazy properties: `cached_lazy_property`, the descriptor whose value lives in the cache, and
`is_lazy`, the one answer to "is this class attribute a lazy property".

A stable class holds, for each of numpyro's ``lazy_property`` (and each recomputed attribute of
`stabledist._src.facts`), the `installed` ``property`` of a `cached_lazy_property` over the same
function: its getter is `stabledist._src.reads.getter` (a hit is one dict lookup; a first read is
computed where `stabledist._src.reads` decides), its setter gives the cache a value the
constructor assigned.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Generic, TypeVar

from numpyro.distributions.util import lazy_property as _numpyro_lazy_property

from stabledist._src.cache import CACHE
from stabledist._src.reads import getter

__all__ = ["cached_lazy_property", "is_lazy", "lazy_property_of"]

T = TypeVar("T")


def is_lazy(attribute: Any) -> bool:
    """Whether a class attribute is a lazy property: numpyro's ``lazy_property``
    (`cached_lazy_property` included), or the plain ``property`` a stable class holds in place
    of one (`cached_lazy_property.installed`: its getter carries the descriptor)."""
    if type(attribute) is property:
        return isinstance(getattr(attribute.fget, "__stable_lazy__", None), cached_lazy_property)
    return isinstance(attribute, _numpyro_lazy_property)


def lazy_property_of(attribute: Any) -> Any:
    """The `cached_lazy_property` behind a stable class's installed ``property`` (its own
    ``wrapped`` is looked up on every first read), or ``attribute`` itself."""
    if type(attribute) is property:
        return getattr(attribute.fget, "__stable_lazy__", attribute)
    return attribute


class _LazyPropertyType(type):
    """``isinstance(x, cached_lazy_property)`` also holds for the plain ``property`` a stable
    class holds in its place (`cached_lazy_property.installed`), as users may ask."""

    def __instancecheck__(cls, instance: Any) -> bool:
        if type(instance) is property:
            return type.__instancecheck__(cls, getattr(instance.fget, "__stable_lazy__", None))
        return super().__instancecheck__(instance)


class cached_lazy_property(property, _numpyro_lazy_property, Generic[T],  # noqa: N801
                           metaclass=_LazyPropertyType):
    """A numpyro ``lazy_property`` whose value lives in the cache, not in ``__dict__``.

    It subclasses numpyro's descriptor so numpyro code that recognises lazy properties
    keeps treating it as one. It is also a ``property`` over its getter: a hit goes through
    the C-level property getter (one call, one dict lookup), not a Python ``__get__``. A
    stable class holds ``installed`` in its place: the same getter in an exact ``property``,
    which CPython reads without a C-to-Python call (its attribute reads are specialized for
    exact ``property`` objects only, from 3.12 on). As a data descriptor it receives what a
    constructor assigns under its name (``self.covariance_matrix = ...`` in numpyro's
    ``MultivariateNormal``): the cache is given that value as the instance's own, read back
    exactly, which is what numpyro's ``__dict__`` assignment achieves upstream.
    """

    name: str
    wrapped: Callable[[Any], T]
    installed: property

    def __init__(self, wrapped: Callable[[Any], T], name: str | None = None) -> None:
        _numpyro_lazy_property.__init__(self, wrapped)
        self._bind(name or wrapped.__name__)

    def __set_name__(self, owner: type, name: str) -> None:
        if name != self.name:
            self._bind(name)

    def _bind(self, name: str) -> None:
        self.name = name
        read = getter(name, self)

        def given(instance: Any, value: Any) -> None:
            CACHE.give(instance, name, value)

        given.__name__ = name
        read.__qualname__ = f"cached_lazy_property.read[{name}]"
        # the wrapped function's annotations, resolved in its own module through __wrapped__
        # (typing.get_type_hints(S.mean.fget) is numpyro's `jax.Array`, as for numpyro)
        read.__annotations__ = dict(getattr(self.wrapped, "__annotations__", {}))
        read.__wrapped__ = self.wrapped  # type: ignore[attr-defined]
        read.__stable_lazy__ = self  # type: ignore[attr-defined]
        given.__qualname__ = f"cached_lazy_property.given[{name}]"
        doc = getattr(self.wrapped, "__doc__", None)
        property.__init__(self, read, given, None, doc)
        self.installed = property(read, given, None, doc)
