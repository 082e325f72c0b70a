"""The fork: a stable subclass for every numpyro distribution class, made at import.

A stable class ``S`` mirrors numpyro class ``N``: ``S.__bases__`` are the stable mirrors of
``N``'s bases followed by ``N`` itself, so ``isinstance(stabledist.LogNormal(0, 1), X)`` holds
for ``X`` = ``numpyro.distributions.LogNormal`` and for ``stabledist.TransformedDistribution``.
Creating ``S`` (or a user's subclass of a stable class) is two steps (`_make_stable`): its spec
is computed from the class and the class it mirrors, passed in (`stabledist._src.spec`, pure),
then the class is registered: the spec's attributes installed (cached lazy properties), the
spec put on the class, its generated flatten/unflatten registered with JAX, and its name with
``jax.export``.

After every construction the new instance is finished (`_finish_construction`): a lazy value
its constructor stored (an alternative parametrization such as ``covariance_matrix=``) moves
from ``__dict__`` to the cache as a seeded value, so the tree is the same whatever the
constructor was given; each numpyro distribution it holds (numpyro builds inner distributions
from its own module globals: ``LogNormal``'s base ``Normal``, ``.to_event()``'s
``Independent``) is replaced by a stable copy with the same state, never mutating an object a
user passed in; and nested batch shapes are numpyro's (`stabledist._src.batching`). Numbers are
untouched: every method that runs is numpyro's own.

The one registry here is `_mirrors` (numpyro class -> its mirror; numpyro's classes are not
ours to annotate). JAX's pytree registry keeps every registered class alive, so mirrors and
their specs live as long as the process.
"""

from __future__ import annotations

import functools
import threading
from collections.abc import Callable, Mapping, Sequence
from typing import Any, TypeVar, cast

import jax
from numpyro.distributions.distribution import Distribution as _NumpyroDistribution
from numpyro.distributions.distribution import DistributionMeta, MaskedDistribution

from stabledist._src import jax_private
from stabledist._src.batching import is_derived, restored, settled, settled_arguments
from stabledist._src.cache import CACHE, cached_lazy_property
from stabledist._src.export import missing_name, register_serialization
from stabledist._src.introspect import is_lazy, is_numpyro_class
from stabledist._src.pytree import build, register_with_jax
from stabledist._src.slicing import getitem
from stabledist._src.spec import (
    FORK_BASE,
    SPEC,
    ClassSpec,
    LazyToInstall,
    StaticPredicate,
    class_spec,
    unknown_own_pytree,
)
from stabledist._src.user_classes import checked_own_flatten, warn_undeclared

__all__ = ["Distribution", "check_coverable", "is_stable", "make_stable", "stabilize",
           "stable_class", "upstream_class"]

D = TypeVar("D", bound=type)

_mirrors: dict[type, type] = {}  # numpyro (or user) class -> its stable subclass
_mirrors_lock = threading.RLock()


def _make_stable(cls: type, source: type) -> None:
    """Make ``cls`` (a new subclass of the fork's base) stable: its spec, computed from ``cls``
    and ``source`` (the class it mirrors, or itself), then the registration."""
    spec = class_spec(cls, source)
    for name, value in spec.install.items():
        if isinstance(value, LazyToInstall):
            value = cached_lazy_property(value.function, name).installed
        setattr(cls, name, value)
    setattr(cls, SPEC, spec)
    spec.pytree = build(cls, spec)
    if spec.own is not None:
        spec.own = (checked_own_flatten(cls, spec.own[0]), spec.own[1])
    register_with_jax(cls, spec, spec.pytree)
    register_serialization(cls, spec)


class StableMeta(DistributionMeta):
    """Constructors get their arguments `settled` and the new instance finished."""

    def __call__(cls, *args: Any, **kwargs: Any) -> Any:  # noqa: N805 - a metaclass
        args, kwargs = settled_arguments(args, kwargs)
        instance = super().__call__(*args, **kwargs)
        if isinstance(instance, Distribution):
            # what is derived now, the constructor's own tree maps derived: numpyro's shape
            _stabilize_children(instance, restored)
            _finish_construction(instance)
        return instance


def _finish_construction(d: Any) -> None:
    """Move lazy values a constructor stored in ``d.__dict__`` to the cache, and mark the
    construction as ended (hot: every construction; one set comparison and one lookup when
    there is nothing to move)."""
    spec: ClassSpec = getattr(type(d), SPEC)
    state = d.__dict__
    if not state.keys() <= spec.fields:
        for name in state.keys() & spec.lazy:
            CACHE.seed(d, name, state.pop(name))
        if not state.keys() <= spec.fields:
            warn_undeclared(type(d), d, spec)
    CACHE.constructed(d)


def _stabilize_children(d: Any, batched: Callable[[Any], Any]) -> None:
    """Replace the numpyro distributions ``d`` holds by stable copies (`stabilize`: with the
    batch shapes a round trip gives them), and stable derived ones (a batch out of ``vmap``)
    by ``batched(child)``: `restored` after a stable constructor, `settled` for a
    numpyro-built object being stabilized. Hot: every construction."""
    state = vars(d)
    for name, value in state.items():
        if isinstance(value, _NumpyroDistribution):
            state[name] = batched(value) if isinstance(value, Distribution) else stabilize(value)
        elif type(value) in _SEQUENCES and value and not isinstance(value[0], int):
            # (shapes are tuples of ints: skipped here)
            if any(isinstance(v, _NumpyroDistribution) for v in value):
                state[name] = type(value)(_stable_child(v, batched) for v in value)


def _stable_child(value: Any, batched: Callable[[Any], Any]) -> Any:
    if isinstance(value, Distribution):
        return batched(value) if is_derived(value) else value
    return stabilize(value) if isinstance(value, _NumpyroDistribution) else value


_SEQUENCES = (list, tuple)


def stable_class(cls: type[Any], extra: dict[str, Any] | None = None) -> type[Any]:
    """The stable subclass of a numpyro (or user) distribution class, made on first request.

    ``extra``: class attributes of the stable subclass only, such as `make_stable`'s hybrid
    fields; ``cls`` itself is never changed."""
    if issubclass(cls, Distribution):
        return cls
    if not issubclass(cls, _NumpyroDistribution):
        raise TypeError(f"{cls!r} is not a numpyro Distribution subclass")
    mirror = _mirrors.get(cls)
    if mirror is not None:
        return mirror
    with _mirrors_lock:
        mirror = _mirrors.get(cls)
        if mirror is None:
            bases = tuple(stable_class(b) for b in cls.__bases__
                          if issubclass(b, _NumpyroDistribution) and b is not _NumpyroDistribution)
            module = cls.__module__
            if is_numpyro_class(cls):
                module = "stabledist." + module.rpartition(".")[2]
            namespace = {"__module__": module, "__qualname__": cls.__qualname__,
                         "__doc__": cls.__doc__, **(extra or {})}
            mirror = StableMeta(cls.__name__, (*(bases or (Distribution,)), cls), namespace,
                                source=cls)
            _mirrors[cls] = mirror
    return mirror


def make_stable(cls: D, *, hybrid: Mapping[str, StaticPredicate] | None = None) -> D:
    """Return the stable subclass of a user's numpyro ``Distribution`` subclass.

    Use it as a decorator (``@stabledist.make_stable``) or a call. The result has the same
    constructor, is a subclass of ``cls``, caches ``lazy_property`` values externally and has
    a stable pytree: built from ``pytree_data_fields`` / ``pytree_aux_fields`` (or
    ``arg_constraints``) with key paths, or the class's own ``tree_flatten`` /
    ``tree_unflatten`` if it defines them. ``hybrid`` names fields that are static when
    ``test(d, value)``. Subclasses of `stabledist.Distribution` are stable already.
    """
    if not (isinstance(cls, type) and issubclass(cls, _NumpyroDistribution)):
        raise TypeError(f"make_stable expects a numpyro Distribution subclass, got {cls!r}")
    if hybrid:
        if issubclass(cls, Distribution) or cls in _mirrors:
            raise TypeError(f"{cls.__qualname__} is already stable; declare hybrid fields "
                            "as the class attribute pytree_hybrid_fields instead")
    stable = stable_class(cls, {"pytree_hybrid_fields": dict(hybrid)} if hybrid else None)
    getattr(stable, SPEC).lint = True
    return cast(D, stable)


def is_stable(d: object) -> bool:
    """Whether ``d`` is a stable distribution (instance) or class."""
    return isinstance(d, Distribution) or (isinstance(d, type) and issubclass(d, Distribution))


def stabilize(value: Any) -> Any:
    """Return a stable version of ``value``: a distribution, or any pytree holding some.

    ``value`` may be a distribution or a list, tuple, dict, ... of them. A numpyro
    distribution is copied (same state) into its stable class, with the batch shape a round
    trip gives it (a numpyro distribution out of ``vmap`` is batched); stable distributions
    and everything else come back as they are, and ``value`` itself when it holds no numpyro
    distribution."""
    if isinstance(value, _NumpyroDistribution):
        return value if isinstance(value, Distribution) else _stable_copy(value)
    leaves, treedef = jax.tree_util.tree_flatten(value, is_leaf=_is_distribution)
    if not any(_is_distribution(x) and not isinstance(x, Distribution) for x in leaves):
        return value
    return treedef.unflatten([stabilize(x) if _is_distribution(x) else x for x in leaves])


def _is_distribution(value: Any) -> bool:
    return isinstance(value, _NumpyroDistribution)


def _stable_copy(value: Any) -> Any:
    cls = stable_class(type(value))
    copy = cast(Any, cls).__new__(cls)
    vars(copy).update(vars(value))
    _stabilize_children(copy, settled)
    getattr(cls, SPEC).pytree.check(copy)  # the batch shape a round trip gives it
    _finish_construction(copy)  # lazy values numpyro stored (constructor's, reads): seeded
    return copy


def check_coverable() -> None:
    """Fail the import on a numpyro class with its own pytree methods that stabledist does not
    know (a newer numpyro), rather than a model's first use of it. Mirrors themselves are made
    on first use (`stable_class`)."""
    pending, seen = [_NumpyroDistribution], set()
    while pending:
        for sub in pending.pop().__subclasses__():
            if sub not in seen and is_numpyro_class(sub):
                seen.add(sub)
                pending.append(sub)
                unknown_own_pytree(sub)


def wrap_factory(factory: Callable[..., Any]) -> Callable[..., Any]:
    """``factory`` returning stable distributions, same signature and docs."""

    @functools.wraps(factory)
    def stable_factory(*args: Any, **kwargs: Any) -> Any:
        return stabilize(factory(*args, **kwargs))

    stable_factory.__module__ = "stabledist"
    return stable_factory


def upstream_class(cls: type) -> type:
    """The class a stable class mirrors (numpyro's or a user's); ``cls`` if it is not stable.
    A user's subclass of a stable class mirrors nothing itself: its first non-stable base."""
    if not issubclass(cls, Distribution):
        return cls
    source = getattr(cls, SPEC).source
    if source is not cls:
        return source
    for base in cls.__mro__:
        if issubclass(base, _NumpyroDistribution) and not issubclass(base, Distribution) \
                and FORK_BASE not in vars(base):
            return base
    raise TypeError(f"{cls!r} mirrors no class")  # pragma: no cover - mirrors have a base


def _from_source(source: type) -> Any:
    """Unpickling: a bare instance of ``source``'s stable class (its state follows)."""
    cls: Any = stable_class(source)
    return cls.__new__(cls)


# Pickles name the unpickling function by module and name: the package's own name, which no
# move of private modules can break (`stabledist/__init__.py` exports it; pickles written by
# 0.1.0 name `stabledist.fork._from_source`, kept in `stabledist/fork.py`).
_from_source.__module__ = "stabledist"


class _SkipNumpyroRegistration(_NumpyroDistribution):
    """Stops numpyro's ``__init_subclass__`` (an MRO-walking, set-ordered pytree registration)
    for every class below, which the fork registers itself."""

    _stabledist_fork_base = True

    def __init_subclass__(cls, **kwargs: Any) -> None:
        # ``source``: the class a mirror mirrors (`stable_class` passes it); else ``cls``
        source = kwargs.pop("source", None)
        object.__init_subclass__(**kwargs)
        _make_stable(cls, source if source is not None else cls)


assert FORK_BASE == "_stabledist_fork_base"


class Distribution(_SkipNumpyroRegistration, _NumpyroDistribution, metaclass=StableMeta,
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
        batch dimensions; event dimensions untouched): `stabledist._src.slicing`."""
        return getitem(self, index)

    __iter__ = None  # indexable, not iterable: ``for x in d`` would loop until IndexError

    def __setattr__(self, name: str, value: Any) -> None:
        """numpyro's assignment; after construction, assigning a pytree field drops the
        lazy values that depend on it (this instance's and its holders', `stabledist._src.cache`),
        so none is served for leaves it was not computed from (numpyro's would be stale)."""
        if CACHE.pending:  # holders read since the last assignment: record what they hold
            CACHE.resolve_pending()  # (first: a value the assignment gives sees the record)
        object.__setattr__(self, name, value)
        if id(self) in CACHE.owners and name in getattr(type(self), SPEC).fields:
            CACHE.invalidate(self)

    for _name in ("expand", "expand_by", "to_event", "mask"):  # numpyro's annotations
        functools.update_wrapper(locals()[_name], getattr(_NumpyroDistribution, _name),
                                 assigned=("__annotations__",), updated=())
    del _name

    def get_args(self) -> dict[str, Any]:
        """numpyro's ``get_args``: the parameters given or stored at construction, never
        the lazy values read since (numpyro's answer grows with every read)."""
        seeded = CACHE.seeded(self)
        cls = type(self)
        return {param: getattr(self, param) for param in self.arg_constraints
                if param in self.__dict__ or param in seeded
                or not is_lazy(getattr(cls, param))}

    def __getstate__(self) -> Any:
        """Copies and pickles carry the values the constructor was given (as numpyro's
        ``__dict__`` does), not the lazy values read since."""
        seeded = CACHE.seeded(self)
        return (self.__dict__, seeded) if seeded else self.__dict__

    def __setstate__(self, state: Any) -> None:
        seeded: dict[str, Any] = {}
        if isinstance(state, tuple):
            state, seeded = state
        vars(self).update(state)
        for name, value in seeded.items():
            CACHE.seed(self, name, value)
        CACHE.constructed(self)

    def __reduce_ex__(self, protocol: Any) -> Any:
        """A mirror made by `make_stable(cls)` shares ``cls``'s name, so pickle cannot find it
        by name: it is pickled as "the stable class of ``cls``" (numpyro's mirrors too)."""
        source = getattr(type(self), SPEC).source
        if source is type(self) or source is _NumpyroDistribution:
            return super().__reduce_ex__(protocol)
        return _from_source, (source,), self.__getstate__()

    def tree_flatten(self) -> tuple[tuple[Any, ...], tuple[Any, ...]]:
        """``(leaves, aux)`` by the class's field table, in declaration order."""
        return getattr(type(self), SPEC).pytree.flatten(self)

    @classmethod
    def tree_unflatten(cls, aux_data: tuple[Any, ...], params: tuple[Any, ...]) -> Any:
        """Rebuild from `tree_flatten` output; malformed input raises a clear error."""
        return getattr(cls, SPEC).pytree.checked_unflatten(aux_data, params)

    @classmethod
    def gather_pytree_data_fields(cls) -> tuple[str, ...]:
        """numpyro's data fields of the class, in declaration order (numpyro's is a set)."""
        return getattr(cls, SPEC).table.data

    @classmethod
    def gather_pytree_aux_fields(cls) -> tuple[str, ...]:
        """The aux fields of the class, in a fixed order."""
        table = getattr(cls, SPEC).table
        return table.aux + tuple(table.hybrid)


_mirrors[_NumpyroDistribution] = Distribution
# bytes naming a mirror not made yet in this process: made then (mirrors are made on first use)
jax_private.on_missing_export_name(functools.partial(missing_name, stable_class=stable_class))
