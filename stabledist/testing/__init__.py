"""Testing helpers for stable distributions.

* :mod:`stabledist.testing.catalog` - a fixed example of every public distribution.
* :mod:`stabledist.testing.strategies` - hypothesis strategies: distributions drawn from
  their ``arg_constraints`` (:func:`specs`, :func:`distributions`, :func:`stacks`) and random
  access plans (:func:`access_plans`).
* :mod:`stabledist.testing.check` - the stability properties as functions, and
  :func:`check_stable`, which runs them all on your own distribution::

      from stabledist.testing import check_stable

      def test_my_distribution_is_stable():
          check_stable(lambda: MyStableDist(loc=jnp.zeros(3)))

The strategies and checks need ``hypothesis`` (a test dependency); they are imported on first
use, so ``stabledist.testing.catalog`` works without it.
"""

from __future__ import annotations

import importlib
from typing import Any

_EXPORTS = {
    "check_stable": "check",
    "StabilityError": "check",
    "StabilityReport": "check",
    "PROPERTIES": "check",
    "COVERAGE": "check",
    "describe": "check",
    "DistSpec": "strategies",
    "AccessPlan": "strategies",
    "access_plans": "strategies",
    "constraint_values": "strategies",
    "distributions": "strategies",
    "specs": "strategies",
    "stacks": "strategies",
}

__all__ = sorted([*_EXPORTS, "catalog", "check", "strategies"])


def __getattr__(name: str) -> Any:
    if name in ("catalog", "check", "strategies"):
        return importlib.import_module(f"{__name__}.{name}")
    if name in _EXPORTS:
        module = importlib.import_module(f"{__name__}.{_EXPORTS[name]}")
        return getattr(module, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def __dir__() -> list[str]:
    return __all__
