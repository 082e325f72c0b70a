"""The registration: what makes a class stable, once, when it is created.

Every subclass of `stabledist.Distribution` - the mirrors of numpyro's classes, a user's
subclass, a class given to ``make_stable`` - is registered by `register` from the base class's
``__init_subclass__`` (`stabledist._src.base`): its record is described
(`stabledist._src.describe`, pure), its lazy properties and recomputed attributes installed,
the record kept (`stabledist._src.records`), its flatten and unflatten generated and
registered with JAX (`stabledist._src.pytree`), and its name with ``jax.export``
(`stabledist._src.export`). JAX's pytree registry keeps every registered class alive, so a
record lives as long as the process.
"""

from __future__ import annotations

from stabledist._src import export, pytree, records
from stabledist._src.describe import LazyToInstall, describe
from stabledist._src.lazy import cached_lazy_property
from stabledist._src.user_classes import checked_own_flatten

__all__ = ["register"]


def register(cls: type, source: type) -> None:
    """Make ``cls`` stable: ``source`` is the class it mirrors (numpyro's, or a user's class
    given to ``make_stable``), or ``cls`` itself."""
    record, install = describe(cls, source)
    for name, value in install.items():
        if isinstance(value, LazyToInstall):
            value = cached_lazy_property(value.function, name).installed
        setattr(cls, name, value)
    records.add(cls, record)
    own = record.own
    if own is not None:  # a user's flatten, checked at its first call
        own = (checked_own_flatten(cls, own[0]), own[1])
    pytree.register(cls, record, own)
    export.register_serialization(cls, record)
