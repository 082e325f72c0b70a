"""The numpyro twin of a stable class: the class whose numbers a stable class must reproduce.

Every comparison with numpyro needs the numpyro class that runs "the same code": for one of
stabledist's mirrors (``stabledist.Normal``) that is numpyro's class, and for a class made by
`stabledist.make_stable` the user's numpyro class it wraps. A class a user writes on a stable
base (``class MyNormal(stabledist.Normal)``, ``class NormalPrecision(stabledist.Distribution)``)
has no numpyro counterpart anywhere: its parent is *not* its twin (the parent lacks the user's
lazy properties and overrides), so the twin is built here, once per class: the class's own
body (its ``__dict__`` less what the fork generated) on the twins of its bases, numpyro's
``lazy_property`` in place of stabledist's ``cached_lazy_property``, and every function that
names the class (zero-argument ``super()``, or the class's global name) rebound to the twin.

Where that cannot be done faithfully (a descriptor of a kind this module cannot rebuild holds
such a function, a metaclass of the user's own, ...) `numpyro_twin` raises `NoNumpyroTwin`
with the reason, and `check_stable` leaves the numpyro comparisons out, saying so once in its
report. Hypothesis-free.
"""

from __future__ import annotations

import inspect
import threading
import types
import weakref
from collections.abc import Iterator
from typing import Any

from numpyro.distributions.constraints import dependent_property
from numpyro.distributions.util import lazy_property

import stabledist
from stabledist._src.construction import upstream_class
from stabledist._src.lazy import lazy_names, lazy_property_of
from stabledist._src.records import find, record_of

__all__ = ["RESOLVED", "NoNumpyroTwin", "numpyro_twin", "resolution_mismatches", "resolved_code",
           "skipped_override", "twin_or_reason", "upstream_lazy_names"]


class NoNumpyroTwin(TypeError):  # noqa: N818 - reads as a statement in a traceback
    """A stable class has no numpyro twin that runs the same code; ``reason`` says why."""

    def __init__(self, cls: type, reason: str) -> None:
        self.reason = reason
        super().__init__(
            f"{cls.__qualname__} has no numpyro twin to compare with: {reason}. Pass the "
            "instance to compare with yourself (the check's upstream= argument), or use "
            "check_stable, which leaves the numpyro comparisons out for such a class")


_TWINS: weakref.WeakKeyDictionary[type, type | str] = weakref.WeakKeyDictionary()
_lock = threading.RLock()

# Entries `type()` makes for every class, and the signature numpyro's metaclass computes.
_MADE_BY_TYPE = frozenset({"__dict__", "__weakref__", "__signature__"})


def numpyro_twin(cls: type) -> type:
    """The numpyro class that runs ``cls``'s code (``cls`` itself if it is not stable).

    A mirror's twin is its numpyro (or `make_stable`-wrapped) class; a user's class on a
    stable base gets its own body on numpyro's base, built once and kept while ``cls`` lives.
    Raises `NoNumpyroTwin` when no faithful twin can be built."""
    twin, why = twin_or_reason(cls)
    if twin is None:
        raise NoNumpyroTwin(cls, why)
    return twin


def twin_or_reason(cls: type) -> tuple[type | None, str]:
    """``(twin, how it was found)``, or ``(None, why there is none)``."""
    if not stabledist.is_stable(cls):
        return cls, f"{_name(cls)} itself (not a stable class)"
    with _lock:
        found = _TWINS.get(cls)
        if found is None:
            found = _build(cls)
            _TWINS[cls] = found
    if isinstance(found, str):
        return None, found
    source = upstream_class(cls)
    if found is source:
        return found, _name(found)
    bases = ", ".join(_name(b) if b in source.__mro__ else f"{b.__qualname__}'s twin"
                      for b in found.__bases__)
    return found, f"its numpyro twin: {cls.__qualname__}'s own body on {bases}"


def upstream_lazy_names(cls: type) -> tuple[str, ...]:
    """The lazy properties the twin of ``cls`` has, or, without a twin, those of ``cls`` less
    the ones stabledist derives for it (`stabledist._src.records.facts`: numpyro keeps them in the
    instance)."""
    twin, _ = twin_or_reason(cls)
    if twin is not None:
        return lazy_names(twin)
    return tuple(n for n in lazy_names(cls) if not _stabledists(_lazy_function(cls, n)))


def _name(cls: type) -> str:
    return f"{cls.__module__}.{cls.__qualname__}"


RESOLVED = ("sample", "log_prob", "cdf", "icdf", "mean", "variance", "entropy",
            "enumerate_support", "__init__")
"""The attributes whose resolution a class must share with its twin (the methods users
override; stabledist's own pytree methods are not among them)."""


def resolved_code(cls: type, name: str) -> Any:
    """The code object ``cls.name`` runs: a method's, a property's getter's, a lazy property's
    function, what a wrapper wraps; None where ``cls`` has no such attribute. A twin's copy of
    a function (rebound to the twin) shares its code."""
    attr = inspect.getattr_static(cls, name, None)
    attr = lazy_property_of(attr)
    for held in ("fget", "wrapped", "__func__"):
        attr = getattr(attr, held, attr)
    attr = inspect.unwrap(attr) if callable(attr) else attr
    return getattr(attr, "__code__", None)


def _where(code: Any) -> str:
    return "nothing" if code is None else (
        f"{code.co_qualname} ({code.co_filename}:{code.co_firstlineno})")


def resolution_mismatches(cls: type, twin: type) -> list[str]:
    """Each attribute of `RESOLVED` that ``cls`` resolves to other code than its twin: a
    stable class runs what the same hierarchy on numpyro's classes runs, at every depth."""
    return [f"{cls.__qualname__}.{name} runs {_where(ours)}, its numpyro twin's runs "
            f"{_where(theirs)}"
            for name in RESOLVED
            if (ours := resolved_code(cls, name)) is not (theirs := resolved_code(twin, name))]


def skipped_override(cls: type, error: BaseException | None) -> str | None:
    """What to say when ``error`` is a ``NotImplementedError`` from a method ``cls`` overrides
    whose override never ran (a base's method raised in its place): not numpyro's reason for
    raising, whatever numpyro's twin raises. None otherwise."""
    if not isinstance(error, NotImplementedError) or error.__traceback__ is None:
        return None
    frames = [tb.tb_frame.f_code for tb in _traceback(error.__traceback__)]
    raised = frames[-1]
    own = _written_code(cls, raised.co_name)
    if own is None or own is raised or own in frames:
        return None
    return (f"{_where(raised)} raised NotImplementedError, but {cls.__qualname__} defines "
            f"{raised.co_name} ({_where(own)}), which never ran")


def _written_code(cls: type, name: str) -> Any:
    """The code ``cls.name`` runs by its class statements alone (what stabledist set on a
    class skipped): the reference a resolution is judged by."""
    for base in cls.__mro__:
        record = find(base)
        skipped = () if record is None else record.added | record.generated
        if name in vars(base) and name not in skipped:
            return resolved_code(base, name)
    return None


def _traceback(tb: Any) -> Iterator[Any]:
    while tb is not None:
        yield tb
        tb = tb.tb_next


def _build(cls: type) -> type | str:
    """The twin of stable ``cls``, or why there is none."""
    source = upstream_class(cls)
    if source in cls.__bases__:  # a mirror: stable_class(source) adds nothing to source
        return source
    if type(cls) is not type(stabledist.Distribution):
        return (f"{cls.__qualname__} has its own metaclass ({type(cls).__name__}), which a "
                "class on numpyro's base cannot share")
    try:
        bases = tuple(numpyro_twin(b) if stabledist.is_stable(b) else b for b in cls.__bases__)
    except NoNumpyroTwin as e:
        return f"its base has no numpyro twin: {e.reason}"
    rebinder = _Rebinder(cls)
    try:
        body = {name: rebinder.attribute(name, value) for name, value in _own_body(cls)}
        twin = types.new_class(cls.__name__, bases, exec_body=lambda ns: ns.update(body))
    except _Unbindable as e:
        return str(e)
    except Exception as e:  # a body numpyro's base rejects: report it, do not guess
        return (f"{cls.__qualname__}'s body could not be put on numpyro's base: "
                f"{type(e).__name__}: {e}")
    rebinder.bind(twin)
    return twin


def _own_body(cls: type) -> Iterator[tuple[str, Any]]:
    """The entries of ``cls.__dict__`` its class statement wrote: not those `type()` makes,
    its slots, the attributes stabledist derives or set (its record's ``added``), nor copies
    of a base's entry (the fork copies a base's attribute down to keep its precedence over a
    generated one)."""
    slots = getattr(cls, "__slots__", ())
    slots = {slots} if isinstance(slots, str) else set(slots)
    added = record_of(cls).added  # what the registration set: not the user's statement
    for name, value in vars(cls).items():
        if name in _MADE_BY_TYPE or name in slots or name in added:
            continue
        value = lazy_property_of(value)  # a stable class holds a plain property in its place
        if isinstance(value, lazy_property) and _stabledists(value.wrapped):
            continue
        dunder = name.startswith("__") and name.endswith("__")  # __module__, __qualname__, ...
        if not dunder and any(_same_entry(vars(base).get(name), value)
                              for base in cls.__mro__[1:]):
            continue
        yield name, value


def _same_entry(theirs: Any, ours: Any) -> bool:
    theirs, ours = lazy_property_of(theirs), lazy_property_of(ours)
    if theirs is ours:
        return True
    return (isinstance(theirs, lazy_property) and isinstance(ours, lazy_property)
            and theirs.wrapped is ours.wrapped)


def _stabledists(fn: Any) -> bool:
    """A function stabledist wrote (a derived attribute), not the user nor numpyro."""
    return str(getattr(fn, "__module__", "")).startswith("stabledist._src")


def _lazy_function(cls: type, name: str) -> Any:
    for base in cls.__mro__:
        if name in vars(base):
            return getattr(lazy_property_of(vars(base)[name]), "wrapped", None)
    return None


class _Unbindable(Exception):  # noqa: N818 - internal: becomes `NoNumpyroTwin`'s reason
    """A class attribute holds a function naming the class in a way that cannot be rebound."""


class _Rebinder:
    """Copies of the functions of ``cls``'s body that name ``cls``, naming the twin instead:
    a zero-argument ``super()`` reads the ``__class__`` cell, so the copy gets a cell of its
    own (filled by `bind`); a function that names the class as a global gets a copy of its
    module's globals in which the name is the twin (in the numpyro world the module's class
    *is* the twin)."""

    def __init__(self, cls: type) -> None:
        self.cls = cls
        self.cell = types.CellType()
        self.copies: dict[int, dict[str, Any]] = {}  # id(original globals) -> the copy
        self.seen: dict[int, Any] = {}

    def attribute(self, name: str, value: Any) -> Any:
        value = lazy_property_of(value)  # a stable class holds a plain property in its place
        if isinstance(value, lazy_property):  # stabledist's or numpyro's: numpyro's
            return lazy_property(self.function(value.wrapped))
        if isinstance(value, types.FunctionType):
            return self.function(value)
        if isinstance(value, staticmethod | classmethod):
            return type(value)(self.function(value.__func__))
        if isinstance(value, dependent_property):
            return dependent_property(self._functions(value)[0], is_discrete=value._is_discrete,
                                      event_dim=value._event_dim)
        if type(value) is property:
            return property(*self._functions(value), value.__doc__)
        for fn in _functions_held(value):
            if self._names_class(fn, set()):
                raise _Unbindable(
                    f"{self.cls.__qualname__}.{name} is a {type(value).__name__} whose function "
                    f"{fn.__qualname__} refers to {self.cls.__name__} (super() or its name), "
                    "which a copy on numpyro's base cannot rebind")
        return value

    def _functions(self, prop: property) -> tuple[Any, Any, Any]:
        return tuple(None if f is None else self.function(f)  # type: ignore[return-value]
                     for f in (prop.fget, prop.fset, prop.fdel))

    def function(self, fn: Any) -> Any:
        """``fn``, or a copy of it naming the twin where it names the class."""
        if not isinstance(fn, types.FunctionType) or not self._names_class(fn, set()):
            return fn
        if id(fn) in self.seen:
            return self.seen[id(fn)]
        closure = None
        if fn.__closure__ is not None:
            closure = tuple(self._cell(name, cell)
                            for name, cell in zip(fn.__code__.co_freevars, fn.__closure__))
        copy = types.FunctionType(fn.__code__, self._globals(fn), fn.__name__, fn.__defaults__,
                                  closure)
        copy.__kwdefaults__ = fn.__kwdefaults__
        copy.__dict__.update(fn.__dict__)
        for attr in ("__module__", "__qualname__", "__doc__", "__annotations__"):
            setattr(copy, attr, getattr(fn, attr))
        self.seen[id(fn)] = copy
        return copy

    def _cell(self, name: str, cell: types.CellType) -> types.CellType:
        content = _content(cell)
        if name == "__class__" and content is self.cls:
            return self.cell
        if isinstance(content, types.FunctionType) and self._names_class(content, set()):
            return types.CellType(self.function(content))  # a decorated method's original
        return cell

    def _globals(self, fn: types.FunctionType) -> dict[str, Any]:
        g = fn.__globals__
        if g.get(self.cls.__name__) is not self.cls or not _loads(fn.__code__, self.cls.__name__):
            return g
        return self.copies.setdefault(id(g), dict(g))

    def _names_class(self, fn: types.FunctionType, seen: set[int]) -> bool:
        """Whether ``fn`` (or a function its closure holds) reads ``__class__`` as this class
        or loads the class by its global name."""
        if id(fn) in seen:
            return False
        seen.add(id(fn))
        name = self.cls.__name__
        if fn.__globals__.get(name) is self.cls and _loads(fn.__code__, name):
            return True
        for var, cell in zip(fn.__code__.co_freevars, fn.__closure__ or ()):
            content = _content(cell)
            if var == "__class__" and content is self.cls:
                return True
            if isinstance(content, types.FunctionType) and self._names_class(content, seen):
                return True
        return False

    def bind(self, twin: type) -> None:
        """Point the copies at the twin (it exists only after the body is made)."""
        self.cell.cell_contents = twin
        for g in self.copies.values():
            g[self.cls.__name__] = twin


def _functions_held(value: Any) -> list[types.FunctionType]:
    """The functions a descriptor of a kind this module does not know may call: under the
    usual attribute names, and in its ``__dict__``."""
    held = [getattr(value, a, None) for a in ("fget", "fset", "fdel", "__func__", "func",
                                              "wrapped", "__wrapped__")]
    held += list(getattr(value, "__dict__", {}).values())
    return [f for f in held if isinstance(f, types.FunctionType)]


def _content(cell: types.CellType) -> Any:
    try:
        return cell.cell_contents
    except ValueError:  # an empty cell
        return None


def _loads(code: types.CodeType, name: str) -> bool:
    """Whether ``code`` or a function or comprehension inside it loads global ``name``."""
    if name in code.co_names:
        return True
    return any(isinstance(c, types.CodeType) and _loads(c, name) for c in code.co_consts)
