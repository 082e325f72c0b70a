"""pytest plugin for mutmut's stats run: charge import-time calls to every test.

mutmut learns which tests exercise a function by recording its calls between one test's
start and teardown; calls made while stabledist is imported (every class is forked, built and
registered then) land on the first test alone, so their mutants would run one test. Every
test depends on the classes built at import, so this plugin adds those calls to each test.
"""

from __future__ import annotations

from typing import Any

import pytest

_AT_IMPORT: set[str] = set()


def _stats() -> set[str] | None:
    try:
        from mutmut.state import state
    except ImportError:  # pytest run without mutmut
        return None
    return state()._stats


def pytest_collection_finish(session: pytest.Session) -> None:
    stats = _stats()
    if stats is not None:
        _AT_IMPORT.update(stats)


@pytest.hookimpl(tryfirst=True)
def pytest_runtest_teardown(item: pytest.Item, nextitem: Any) -> None:
    stats = _stats()
    if stats is not None:
        stats.update(_AT_IMPORT)
