"""Testing helpers for stable distributions.

```python
from stabledist.testing import check_stable

def test_my_distribution_is_stable():
    check_stable(make_my_distribution)  # a module-level zero-argument factory
```

- `check_stable` runs every property of `PROPERTIES` (name -> check) on a factory or a
  hypothesis strategy; each `check_*` function is one property, callable on its own.
- `specs`, `distributions`, `stacks`, `constraint_values` and `access_plans` are hypothesis
  strategies: distributions drawn from their `arg_constraints`, and random reads of them.
- `catalog` holds a small, fixed example of every public distribution.

The checks, `DistSpec`, `AccessPlan` and `catalog` work without hypothesis; `check_stable` and
the strategies need it (`pip install "stabledist[testing]"`). Everything is imported on first
use. The modules behind these names are private: `_compare` (describing and comparing),
`_constraints` (constraint values), `_spec` / `_strategies` (drawing), `_plans` (access
plans), `_transforms` (the transformation checks), `_closed_over` (an instance closed over by
a transformation, its lazy values first read there), `_parametrizations` (alternative
parametrizations), `_upstream` (comparisons with numpyro), `_process` (hash seeds, release,
threads), `_registry` (`PROPERTIES`), `_twin` (the numpyro twin a class is compared with:
numpyro's class, the one `make_stable` wrapped, or a user's class body on numpyro's base) and
`_stable` (`check_stable`). The per-class facts they use are data: one record per numpyro class
(`_class_entry.ClassEntry`: its examples, drawing hint, parametrizations, numpyro's quirks) in
`_catalog_entries.CATALOG` (the records in `_entries_continuous`, `_entries_discrete` and
`_entries_wrappers`), the hints they share in `_hints`.
"""

from __future__ import annotations

import importlib
from typing import Any

_EXPORTS: dict[str, str] = {
    # hypothesis-free
    "StabilityError": "_compare",
    "describe": "_compare",
    "destabilize": "_compare",
    "stack": "_compare",
    "valid_value": "_compare",
    "DistSpec": "_spec",
    "AccessPlan": "_plans",
    "Step": "_plans",
    "check_access_plan": "_plans",
    "full_plan": "_plans",
    "check_round_trip": "_transforms",
    "check_control_flow": "_transforms",
    "check_jit": "_transforms",
    "check_vmap": "_transforms",
    "check_pmap": "_transforms",
    "check_shard_map": "_transforms",
    "check_closure": "_closed_over",
    "check_hoisting": "_closed_over",
    "check_parametrizations": "_parametrizations",
    "parametrizations": "_parametrizations",
    "check_tree_map": "_upstream",
    "check_upstream": "_upstream",
    "check_hash_seed": "_process",
    "check_release": "_process",
    "check_threads": "_process",
    "PROPERTIES": "_registry",
    "Property": "_registry",
    # need hypothesis
    "StabilityReport": "_stable",
    "check_stable": "_stable",
    "specs": "_strategies",
    "distributions": "_strategies",
    "stacks": "_strategies",
    "catalog_specs": "_strategies",
    "constraint_values": "_strategies",
    "access_plans": "_strategies",
}

__all__ = sorted([*_EXPORTS, "catalog"])

EXTRA_HINT = 'pip install "stabledist[testing]"'


def __getattr__(name: str) -> Any:
    if name == "catalog":
        return importlib.import_module(f"{__name__}.catalog")
    if name not in _EXPORTS:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    try:
        module = importlib.import_module(f"{__name__}.{_EXPORTS[name]}")
    except ModuleNotFoundError as e:
        if (e.name or "").split(".")[0] != "hypothesis":
            raise
        raise ImportError(
            f"stabledist.testing.{name} needs hypothesis, which is not installed: {EXTRA_HINT}"
        ) from e
    value = getattr(module, name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return __all__
