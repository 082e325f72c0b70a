"""What ``import stabledist`` leaves to the cyclic collector (issue 57).

A model's first trace runs right after the imports; every gc-tracked object the import
allocates brings the next full collection (80-120 ms with jax loaded) closer, into that trace.
The import registers every numpyro constraint, transform and distribution type for
``jax.export`` (~180 types): each registration must stay one or two small objects, not a pair
of closures with their cells (five objects per type, ~600 more per import).
"""

from __future__ import annotations

import gc
import types

import pytest

import stabledist  # noqa: F401 - the import whose registrations are counted

jax_export = pytest.importorskip("jax._src.export._export")


def _own_tracked(value: object) -> list[object]:
    """The gc-tracked objects a registered callable brings with it: itself, a bound method's
    object, a closure's tuple and cells (shared module-level functions excluded)."""
    if isinstance(value, types.FunctionType):
        if value.__closure__ is None:
            return []  # a module-level function, shared by every registration
        return [value, value.__closure__, *value.__closure__]
    if isinstance(value, types.MethodType):
        return [value, value.__self__]
    return [value] if gc.is_tracked(value) else []


def test_numpyro_type_registrations_are_small():
    from numpyro.distributions import constraints, transforms
    from numpyro.distributions.distribution import Distribution

    counts = {}
    for nodetype, (name, serialize) in list(jax_export.serialization_registry.items()):
        if not (isinstance(nodetype, type) and name.startswith("stabledist:")
                and nodetype.__module__.startswith("numpyro.")
                and issubclass(nodetype, (constraints.Constraint, transforms.Transform,
                                          Distribution))):
            continue
        deserialize = jax_export.deserialization_registry[name][1]
        own = {id(o) for o in (*_own_tracked(serialize), *_own_tracked(deserialize))}
        counts[nodetype.__qualname__] = len(own)
    assert len(counts) > 100  # numpyro's ~180 types are registered
    assert max(counts.values()) <= 2, {k: v for k, v in counts.items() if v > 2}
