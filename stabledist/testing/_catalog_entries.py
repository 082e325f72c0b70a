"""The test-side catalog: `CATALOG`, one `ClassEntry` per public name of
``numpyro.distributions`` (each class and factory), keyed by name. It is the one home of what
the tests must know about a class; every per-class table of the tests (the catalog's
``EXAMPLES`` and ``VARIANTS``, the drawing hints, numpyro's known failures, ...) is a view of
it, computed where it is used. Adding a numpyro class is one record here (in the module of its
family) and, for what numpyro's declarations do not say at run time, one ``Facts`` entry in
``stabledist/_src/records/facts.py``.

The records are in three modules by family (one would pass 600 lines), merged here in the
catalog's order: continuous, discrete, then wrappers, factories and the abstract base.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping

from stabledist.testing._class_entry import ClassEntry, UpstreamFailure
from stabledist.testing._entries_continuous import CONTINUOUS
from stabledist.testing._entries_discrete import DISCRETE
from stabledist.testing._entries_wrappers import WRAPPERS

__all__ = ["CATALOG", "NO_ENTRY", "entry_of", "upstream_failures"]


def _merged(*parts: Mapping[str, ClassEntry]) -> dict[str, ClassEntry]:
    """The records of every family, in order; a name recorded twice fails at import (one
    record per class, so one home per fact)."""
    out: dict[str, ClassEntry] = {}
    for part in parts:
        twice = sorted(set(out) & set(part))
        if twice:
            raise ValueError(f"catalog records given twice: {twice}")
        out.update(part)
    return out


CATALOG: dict[str, ClassEntry] = _merged(CONTINUOUS, DISCRETE, WRAPPERS)
"""name -> record, for every public name of ``numpyro.distributions`` (and names of other
numpyro releases the catalog knows)."""

NO_ENTRY = ClassEntry()
"""The record of a name the catalog does not know (a user's class): no quirk, no hint."""


def entry_of(name: str) -> ClassEntry:
    """``name``'s record, or `NO_ENTRY`: a user's class shares nothing of a numpyro class it
    is not (the checks look numpyro's classes up by the name of the class they derive from)."""
    return CATALOG.get(name, NO_ENTRY)


def upstream_failures() -> Iterator[tuple[str, UpstreamFailure]]:
    """Every ``(class name, UpstreamFailure)`` of the catalog, in its order."""
    for name, entry in CATALOG.items():
        for failure in entry.upstream_failures:
            yield name, failure
