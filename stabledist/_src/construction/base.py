"""The base class of every stable distribution, `Distribution`, and its metaclass.

``stabledist.Distribution`` is the mirror of numpyro's ``Distribution`` (the root of every
mirror, `stabledist._src.construction.mirrors`). Every class below it is registered by stabledist,
in place of numpyro's registration (an MRO-walking, set-ordered pytree registration), when it is
created (`stabledist._src.construction.describe.register`); every construction gets its arguments
settled and the new instance finished (`StableMeta`). Its methods are numpyro's, except those that
return new distributions (stable ones), the pytree methods (from the class's record), field
assignment (which drops the lazy values computed from the old field), and those that must see the
values the constructor was given though they live in the cache (`get_args`, copies and pickles).

Copies and pickles: a stable distribution carries the values it was given, and a mirror of a
user's class is found again in the process that loads it.

A copy or a pickle of a distribution carries its ``__dict__`` and the values its constructor
was *given* (an alternative parametrization, ``covariance_matrix=``), as numpyro's
``__dict__`` does; never the lazy values read since (numpyro's pickle grows with every read).
A mirror made by ``make_stable(cls)`` shares ``cls``'s name, so pickle cannot find it by name:
it is pickled as "the stable class of ``cls``" (`_from_source`), as are numpyro's mirrors, so a
loading process makes the mirror if it has not yet (mirrors are made on first use).
"""

from __future__ import annotations

import functools
from collections.abc import Sequence
from typing import Any, cast

from numpyro.distributions.distribution import COERCIONS, DistributionMeta, MaskedDistribution
from numpyro.distributions.distribution import Distribution as _NumpyroDistribution

from stabledist._src.construction.describe import FORK_BASE, register
from stabledist._src.construction.mirrors import (
    finish_construction,
    stabilize,
    stabilize_children,
    stable_class,
)
from stabledist._src.jax_private import exports as jax_exports
from stabledist._src.lazy import CACHE, is_lazy
from stabledist._src.pytrees import (
    getitem,
    missing_name,
    pytree_of,
    register_numpyro_nodes,
    restored,
    settled_arguments,
)
from stabledist._src.records import is_stable_class, record_of

__all__ = ["Distribution", "StableMeta", "_from_source", "is_stable", "reduce",
           "restore_state", "state_of"]


class StableMeta(DistributionMeta):
    """Constructors get their arguments settled (`stabledist._src.pytrees.batching`) and the new
    instance finished (`stabledist._src.construction.mirrors`); while its ``__init__`` runs, the
    cache knows the instance is under construction (what its constructor gives a lazy property stays
    when the constructor then assigns its fields; after construction an assignment drops it)."""

    def __call__(cls, *args: Any, **kwargs: Any) -> Any:  # noqa: N805 - a metaclass
        args, kwargs = settled_arguments(args, kwargs)
        for coerce in COERCIONS:  # numpyro's DistributionMeta.__call__, then type.__call__
            result = coerce(cls, args, kwargs)
            if result is not None:
                return result
        instance = cast(Any, cls).__new__(cls, *args, **kwargs)
        if not isinstance(instance, cls):
            return instance
        with CACHE.constructing(instance):
            instance.__init__(*args, **kwargs)
        if is_stable_class(type(instance)):
            # what is derived now, the constructor's own tree maps derived: numpyro's shape
            stabilize_children(instance, restored)
            finish_construction(instance)
        return instance


class _RegisteredByStabledist(_NumpyroDistribution):
    """Every class below is registered by stabledist when it is created, in place of
    numpyro's own registration."""

    _stabledist_fork_base = True

    def __init_subclass__(cls, **kwargs: Any) -> None:
        # ``source``: the class a mirror mirrors (`stable_class` passes it); else ``cls``
        source = kwargs.pop("source", None)
        object.__init_subclass__(**kwargs)
        register(cls, source if source is not None else cls)


assert FORK_BASE == "_stabledist_fork_base"
_owners, _holding, _constructing = CACHE.owners, CACHE.holding, CACHE.constructing_keys


class Distribution(_RegisteredByStabledist, _NumpyroDistribution, metaclass=StableMeta,
                   source=_NumpyroDistribution):
    """Base of every stable distribution; subclass it as you would numpyro's ``Distribution``.

    Overrides what returns new distributions (so that they are stable too), the pytree
    methods (ordered, from the class's field table), and what must see values the constructor
    was given even though they live in the cache (`get_args`, copies and pickles).
    """

    _stabledist_fork_base = True

    def expand(self, batch_shape: Sequence[int]) -> _NumpyroDistribution:
        return stabilize(super().expand(batch_shape))

    def expand_by(self, sample_shape: Sequence[int]) -> _NumpyroDistribution:
        return stabilize(super().expand_by(sample_shape))

    def to_event(self, reinterpreted_batch_ndims: int | None = None) -> _NumpyroDistribution:
        return stabilize(super().to_event(reinterpreted_batch_ndims))

    def mask(self, mask: Any) -> MaskedDistribution:
        return stabilize(super().mask(mask))

    def __getitem__(self, index: Any) -> Distribution:
        """The distribution of the batch elements ``index`` selects (NumPy's indexing of the
        batch dimensions; event dimensions untouched): `stabledist._src.pytrees.slicing`."""
        return getitem(self, index)

    __iter__ = None  # indexable, not iterable: ``for x in d`` would loop until IndexError

    def __setattr__(self, name: str, value: Any) -> None:
        """numpyro's assignment; after construction, assigning a field drops the lazy values
        that depend on it (this instance's and its holders', `stabledist._src.lazy.cache`), so
        none is served for leaves it was not computed from (numpyro's would be stale)."""
        object.__setattr__(self, name, value)
        key = id(self)
        if (key in _owners or (_holding and key not in _constructing)) and (
                name in record_of(type(self)).fields):
            CACHE.changed(self)

    for _name in ("expand", "expand_by", "to_event", "mask"):  # numpyro's annotations
        functools.update_wrapper(locals()[_name], getattr(_NumpyroDistribution, _name),
                                 assigned=("__annotations__",), updated=())
    del _name

    def get_args(self) -> dict[str, Any]:
        """numpyro's ``get_args``: the parameters given or stored at construction, never
        the lazy values read since (numpyro's answer grows with every read)."""
        given = CACHE.given(self)
        cls = type(self)
        return {param: getattr(self, param) for param in self.arg_constraints
                if param in self.__dict__ or param in given
                or not is_lazy(getattr(cls, param))}

    def __getstate__(self) -> Any:
        """Copies and pickles carry the values the constructor was given (as numpyro's
        ``__dict__`` does), not the lazy values read since (`state_of`)."""
        return state_of(self)

    def __setstate__(self, state: Any) -> None:
        restore_state(self, state)

    def __reduce_ex__(self, protocol: Any) -> Any:
        return reduce(self, protocol)

    def tree_flatten(self) -> tuple[tuple[Any, ...], tuple[Any, ...]]:
        """``(leaves, aux)`` by the class's field table, in declaration order."""
        return pytree_of(type(self)).flatten(self)

    @classmethod
    def tree_unflatten(cls, aux_data: tuple[Any, ...], params: tuple[Any, ...]) -> Any:
        """Rebuild from `tree_flatten` output; malformed input raises a clear error."""
        return pytree_of(cls).checked_unflatten(aux_data, params)

    @classmethod
    def gather_pytree_data_fields(cls) -> tuple[str, ...]:
        """numpyro's data fields of the class, in declaration order (numpyro's is a set)."""
        return record_of(cls).table.data

    @classmethod
    def gather_pytree_aux_fields(cls) -> tuple[str, ...]:
        """The aux fields of the class, in a fixed order."""
        table = record_of(cls).table
        return table.aux + tuple(table.hybrid)


def is_stable(d: object) -> bool:
    """Whether ``d`` is a stable distribution (instance) or class."""
    return isinstance(d, Distribution) or (isinstance(d, type) and issubclass(d, Distribution))


# --- copies and pickles ----------------------------------------------------------------------


def _from_source(source: type) -> Any:
    """Unpickling: a bare instance of ``source``'s stable class (its state follows)."""
    cls: Any = stable_class(source)
    return cls.__new__(cls)


# Pickles name the unpickling function by module and name: the package's own name, which no
# move of private modules can break (`stabledist/__init__.py` exports it; pickles written by
# 0.1.0 name `stabledist.fork._from_source`, kept in `stabledist/fork.py`).
_from_source.__module__ = "stabledist"


def state_of(d: Any) -> Any:
    """``__getstate__``: the instance's ``__dict__``, with the values it was given if any."""
    given = CACHE.given(d)
    return (d.__dict__, given) if given else d.__dict__


def restore_state(d: Any, state: Any) -> None:
    """``__setstate__``: the state `state_of` gave, the given values given again."""
    given: dict[str, Any] = {}
    if isinstance(state, tuple):
        state, given = state
    vars(d).update(state)
    for name, value in given.items():
        CACHE.give(d, name, value)


def reduce(d: Any, protocol: Any) -> Any:
    """``__reduce_ex__``: by the class's own name where pickle can find it, else (a mirror)
    through `_from_source`."""
    source = record_of(type(d)).source
    if source is type(d) or source is _NumpyroDistribution:
        return object.__reduce_ex__(d, protocol)
    return _from_source, (source,), state_of(d)


register_numpyro_nodes()  # numpyro's constraints and transforms, nodes inside distributions
# bytes naming a mirror not made yet in this process: made then (mirrors are made on first use)
jax_exports.on_missing_export_name(functools.partial(missing_name, stable_class=stable_class))
