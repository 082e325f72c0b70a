"""Shared test set-up: 4 host devices for pmap/shard_map (before jax is imported), the
catalog of examples, and parametrization over every public distribution name."""

from __future__ import annotations

import os

os.environ.setdefault("XLA_FLAGS", "--xla_force_host_platform_device_count=4")

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


@pytest.fixture(params=[b for _, b in BUILDERS], ids=[i for i, _ in BUILDERS])
def builder(request: pytest.FixtureRequest):
    """Each example builder, called with a distributions module."""
    return request.param


@pytest.fixture(params=EXAMPLE_NAMES)
def name(request: pytest.FixtureRequest) -> str:
    return request.param


__all__ = ["BUILDERS", "CLASS_NAMES", "EXAMPLE_NAMES", "FACTORY_NAMES", "nd", "sd"]
