"""Shared test data: the public distribution names of the installed numpyro, the catalog's
builders, and the pytest-xdist grouping mark. Imported by the test modules as
``from helpers import ...`` (tests/ is on ``sys.path``: pytest's rootdir-relative import of
``tests/conftest.py`` puts it there), so no test imports from ``conftest``."""

from __future__ import annotations

import numpyro.distributions as nd
import pytest

import stabledist as sd
from stabledist.testing import catalog

CLASS_NAMES, FACTORY_NAMES = catalog.public_names()
EXAMPLE_NAMES = sorted(n for n in catalog.EXAMPLES if n in nd.__all__)
BUILDERS = sorted(catalog.all_builders())
assert set(CLASS_NAMES + FACTORY_NAMES) - set(catalog.EXCLUDED) <= set(EXAMPLE_NAMES), (
    "every public distribution name of the installed numpyro needs a catalog example"
)


def same_worker(name: str) -> pytest.MarkDecorator:
    """Under ``--dist loadgroup`` (``make test``) every test marked with one class's name runs
    on the same pytest-xdist worker, where that class's operations are compiled once."""
    return pytest.mark.xdist_group(name.split("[")[0])


__all__ = ["BUILDERS", "CLASS_NAMES", "EXAMPLE_NAMES", "FACTORY_NAMES", "nd", "sd", "same_worker"]
