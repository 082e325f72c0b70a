"""pytest plugin for mutmut's runs: charge import-time calls to every test, run a mutant's
tests fastest first, and count mutmut's trampolines as stabledist's own frames.

mutmut learns which tests exercise a function by recording its calls between one test's
start and teardown; calls made while stabledist is imported (every class is forked, built and
registered then) land on the first test alone, so their mutants would run one test. Every
test depends on the classes built at import, so this plugin adds those calls to each test.
A mutant of such a function runs the whole selection (about 2000 tests) until one fails; mutmut
passes them in no useful order, so this plugin sorts them by the duration mutmut recorded:
most mutants are killed by one of the many tests that take milliseconds (no test here has a
fixture wider than a function, so the order costs no setup).

stabledist's warnings point at the user's line by skipping its own frames (and numpyro's and
JAX's); under mutmut every call of a mutated function passes through a trampoline in mutmut's
package, which would be taken for the user's line.
"""

from __future__ import annotations

import os
from typing import Any

import pytest

_AT_IMPORT: set[str] = set()


def _stats() -> set[str] | None:
    try:
        from mutmut.state import state
    except ImportError:  # pytest run without mutmut
        return None
    return state()._stats


def pytest_configure(config: pytest.Config) -> None:
    if "MUTANT_UNDER_TEST" in os.environ:  # set by mutmut for its stats run and each mutant
        import mutmut

        from stabledist._src.construction import user_classes

        user_classes._INTERNAL_DIRS += (os.path.dirname(mutmut.__file__) + os.sep,)


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    if "__mutmut_" not in os.environ.get("MUTANT_UNDER_TEST", ""):  # stats, listing, plain
        return
    from mutmut.state import state

    durations = state().duration_by_test
    items.sort(key=lambda item: durations.get(item.nodeid, 0.0))


def pytest_collection_finish(session: pytest.Session) -> None:
    stats = _stats()
    if stats is not None:
        _AT_IMPORT.update(stats)


@pytest.hookimpl(tryfirst=True)
def pytest_runtest_teardown(item: pytest.Item, nextitem: Any) -> None:
    stats = _stats()
    if stats is not None:
        stats.update(_AT_IMPORT)
