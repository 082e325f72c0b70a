"""The test-side catalog (`stabledist.testing._catalog_entries.CATALOG`): one record per public
name, consistent in itself, and every quirk it records still needed.

A quirk entry (numpyro's own failure, a catalog-only class, a keyword that is not an
alternative parametrization, a ``log_prob`` value where a sample cannot be one) changes what a
check does for its class. Each is re-verified here against the installed numpyro, cheaply (the
catalog example, eager or one round trip): once numpyro changes, the test of the entry fails
and the entry must go, so the catalog never excuses a class for a reason that no longer holds.
``upstream_failures`` are re-verified by tests/test_properties.py (their reads run under
``shard_map``) and ``promote_wrong`` by tests/test_batched.py (beside the check it changes).
"""

from __future__ import annotations

import inspect

import jax
import jax.numpy as jnp
import numpyro.distributions as nd
import pytest
from helpers import CLASS_NAMES, FACTORY_NAMES

import stabledist as sd
from stabledist import testing
from stabledist._src.construction import upstream_class
from stabledist.testing import _strategies, catalog
from stabledist.testing._catalog_entries import CATALOG
from stabledist.testing._compare import UNSUPPORTED

KEY = jax.random.PRNGKey(0)


def _names(field: str) -> list[str]:
    """The records that set ``field``."""
    return [name for name, entry in CATALOG.items() if getattr(entry, field)]


def test_one_record_per_public_name() -> None:
    """Every public name has one record, with an example or the reason it has none; the
    record's parts agree with each other."""
    assert set(CATALOG) == set(CLASS_NAMES) | set(FACTORY_NAMES)
    for name, entry in CATALOG.items():
        assert (entry.example is None) == bool(entry.no_example), name
        assert not entry.variants or entry.example is not None, name
        assert bool(entry.note) == (entry.log_prob_value is not None), name
        assert not entry.alternatives or tuple(entry.alternatives) == entry.parametrizations, name
        assert entry.float64 or not entry.x64_switch, name  # the switch casts a float64 class
        for failure in entry.upstream_failures:
            assert failure.prop in testing.PROPERTIES and failure.match, (name, failure)
    assert set(_names("float64")) | set(_names("catalog_only")) <= set(CLASS_NAMES)


@pytest.mark.parametrize("name", _names("numpyro_fails"))
def test_numpyro_failures_still_fail(name: str) -> None:
    """numpyro's own class still fails the recorded program (so stabledist's returning there is
    still the improvement, not a divergence); the record is found through the numpyro class
    the instance is of."""
    failure = CATALOG[name].numpyro_fails
    assert failure is not None
    build = catalog.EXAMPLES[failure.shown_by or name]
    assert upstream_class(type(build(sd))).__name__ == name
    d = build(nd)
    with pytest.raises(failure.raises, match=failure.match):
        failure.program(d)


@pytest.mark.parametrize("name", _names("catalog_only"))
def test_catalog_only_classes_cannot_be_drawn(name: str) -> None:
    """A class drawn from the catalog only still has an argument ``arg_constraints`` cannot
    give (no constraint, or a dependent one): once it can be drawn generically, drop the entry
    (or replace it with a hint)."""
    assert not _strategies._derivable(getattr(sd, name))


@pytest.mark.parametrize("name", _names("not_parametrizations"))
def test_not_parametrizations_are_optional_constrained_keywords(name: str) -> None:
    """Each keyword still looks like an alternative parametrization to the derivation
    (``None`` default, an ``arg_constraints`` entry), which the entry exists to undo."""
    upstream = getattr(nd, name)
    params = inspect.signature(upstream.__init__).parameters
    for keyword in CATALOG[name].not_parametrizations:
        assert params[keyword].default is None, keyword
        assert keyword in upstream.arg_constraints, keyword


@pytest.mark.parametrize("name", _names("log_prob_value"))
def test_log_prob_values_are_still_needed(name: str) -> None:
    """numpyro's example still has no sample ``log_prob`` can take (``sample`` raises, or its
    shape is not the batch and event shape), and the recorded value is one: both
    implementations evaluate it."""
    value = catalog.LOG_PROB_VALUES[name]()
    d = catalog.EXAMPLES[name](nd)
    try:
        shape = jnp.shape(d.sample(KEY))
    except UNSUPPORTED:
        shape = None
    assert shape != (*d.batch_shape, *d.event_shape), (name, shape)
    for module in (nd, sd):
        out = catalog.EXAMPLES[name](module).log_prob(value)
        assert jnp.shape(out) == d.batch_shape, (name, module.__name__)
