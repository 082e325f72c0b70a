"""Tests written to kill surviving mutants of the core (tools/mutation): each checks real
behaviour a mutant broke and no other test noticed. The mutant each one kills is named in its
docstring (mutmut's names: function + number)."""

from __future__ import annotations

import gc

import jax.numpy as jnp
import numpy as np
import numpyro.distributions as nd
import pytest
from numpyro.distributions.util import lazy_property

import stabledist as sd
from stabledist._src.cache import CACHE


@pytest.fixture(autouse=True)
def _fresh_cache() -> None:
    gc.collect()
    sd.clear_cache()


def test_clear_cache_forgets_computed_values_and_their_owners() -> None:
    """``LazyValueCache.clear`` 3 (values left in the table), 7 (names kept), 10 (owners
    without values or holders kept)."""
    d = sd.MultivariateNormal(jnp.zeros(2), scale_tril=2 * jnp.eye(2))
    before = sd.cache_info()  # other live instances of this worker keep their seeded values
    first = d.covariance_matrix
    assert sd.cache_info().instances == before.instances + 1 and id(d) in CACHE.owners
    sd.clear_cache()
    assert id(d) not in CACHE.owners
    assert CACHE.cached(d) == {}
    assert all(id(d) not in CACHE.table(n) for n in ("covariance_matrix", "precision_matrix"))
    np.testing.assert_array_equal(d.covariance_matrix, first)  # recomputed, the same
    assert id(d) in CACHE.owners and set(CACHE.cached(d)) == {"covariance_matrix"}


def test_clear_cache_keeps_seeded_values() -> None:
    cov = jnp.array([[2.0, 0.3], [0.3, 1.0]])
    d = sd.MultivariateNormal(jnp.zeros(2), covariance_matrix=cov)
    d.precision_matrix  # noqa: B018 - a computed value
    sd.clear_cache()
    assert set(CACHE.cached(d)) == {"covariance_matrix"}
    assert d.covariance_matrix is cov or np.array_equal(d.covariance_matrix, cov)


def test_an_assignment_refreshes_every_distribution_holding_a_shared_base() -> None:
    """``LazyValueCache._adopt`` (was ``_holds`` 13, 17, 19): a base held by two
    distributions must remember both holders."""
    base = sd.Normal(jnp.asarray(0.0), jnp.asarray(1.0))
    a = sd.TruncatedNormal(0.0, 1.0, low=0.0, high=1.0)
    b = sd.TruncatedNormal(0.0, 1.0, low=-1.0, high=2.0)
    a.base_dist = base
    b.base_dist = base
    stale = a.log_prob(0.5), b.log_prob(0.5)  # both cache their normalizers
    base.loc = jnp.asarray(0.5)
    want = (nd.TruncatedNormal(0.5, 1.0, low=0.0, high=1.0).log_prob(0.5),
            nd.TruncatedNormal(0.5, 1.0, low=-1.0, high=2.0).log_prob(0.5))
    got = a.log_prob(0.5), b.log_prob(0.5)
    assert got[0] != stale[0] and got[1] != stale[1]
    np.testing.assert_allclose(got, want, rtol=1e-6)


def test_an_assignment_after_clear_cache() -> None:
    """``LazyValueCache._invalidate`` 5: a holder whose values were cleared has no owner any
    more; an assignment to what it holds must skip it, not fail."""
    d = sd.TruncatedNormal(0.0, 1.0, low=0.0, high=1.0)
    d.log_prob(0.5)
    sd.clear_cache()
    d.base_dist.loc = jnp.asarray(0.5)  # must not raise
    np.testing.assert_allclose(d.log_prob(0.5),
                               nd.TruncatedNormal(0.5, 1.0, low=0.0, high=1.0).log_prob(0.5),
                               rtol=1e-6)


def test_clear_cache_after_an_assignment_to_a_seeded_field() -> None:
    """``LazyValueCache._invalidate`` 18: an assignment after construction drops the seeded
    values too, and the cache stays consistent for `clear` and later reads."""
    d = sd.MultivariateNormal(jnp.zeros(2), covariance_matrix=2 * jnp.eye(2))
    d.scale_tril = 3 * jnp.eye(2)
    assert float(d.covariance_matrix[0, 0]) == 9.0
    sd.clear_cache()  # must not raise
    assert CACHE.cached(d) == {}
    assert float(d.covariance_matrix[0, 0]) == 9.0


def test_many_distributions_holding_one_child_stay_cheap_and_correct() -> None:
    """Recording holders was a linear scan per first read: 3000 copies sharing one marginal
    (the benchmark's fresh copies, or many wrappers of one prior) made each first read ~190 us
    (quadratic); and an assignment to the shared child must reach every holder."""
    import time

    from stabledist.testing import catalog

    template = dict(catalog.all_builders())["GaussianCopula"](sd)
    copies = []
    for _ in range(5000):
        c = type(template).__new__(type(template))
        c.__dict__.update(template.__dict__)  # shares template.marginal_dist
        copies.append(c)
    t0 = time.perf_counter()
    for c in copies:
        c.correlation_matrix  # noqa: B018 - a first read records the shared child's holder
    per_read = (time.perf_counter() - t0) / len(copies)
    assert per_read < 50e-6, f"{per_read * 1e6:.0f} us per first read"
    assert "correlation_matrix" in CACHE.cached(copies[-1])
    template.marginal_dist.loc = jnp.asarray(0.5)
    assert "correlation_matrix" not in CACHE.cached(copies[0])
    assert "correlation_matrix" not in CACHE.cached(copies[-1])


def test_a_dead_instance_leaves_no_value_behind() -> None:
    """``LazyValueCache._release`` (AST mutant): values of a dead instance must leave the
    tables, or a new instance that gets its id would read them."""
    before = sd.cache_info()
    d = sd.MultivariateNormal(jnp.zeros(2), scale_tril=2 * jnp.eye(2))
    key = id(d)
    d.covariance_matrix  # noqa: B018 - a computed value
    assert key in CACHE.table("covariance_matrix")
    del d
    gc.collect()
    assert sd.cache_info() == before
    assert key not in CACHE.owners


class _Chained(nd.Normal):
    """Two lazy values, the first computed from the second (numpyro's pattern:
    ``TruncatedNormal._log_diff_tail_probs`` reads ``_tail_prob_at_high``)."""

    @lazy_property
    def outer(self):
        return self.inner + 1.0

    @lazy_property
    def inner(self):
        return self.loc * 2.0


def test_a_value_computed_from_another_keeps_both_and_releases_both() -> None:
    """``LazyValueCache.reader`` (first-read fast path): when the value read creates the
    instance's owner itself (through the value it reads), that owner must stay and record
    both names; replacing it would leave ``inner`` behind when the instance dies."""
    chained = sd.make_stable(_Chained)
    d = chained(jnp.asarray(1.0), jnp.asarray(1.0))
    key = id(d)
    assert float(d.outer) == 3.0
    assert set(CACHE.cached(d)) == {"outer", "inner"}
    del d
    gc.collect()
    assert key not in CACHE.table("inner") and key not in CACHE.table("outer")
    assert key not in CACHE.owners


def test_dead_holders_leave_no_record_in_the_child() -> None:
    """``LazyValueCache._release`` (``held``): a global base held by many short-lived
    distributions with values must not collect a record of each one, and an assignment
    to it still reaches the holders that are alive."""
    import copy

    template = sd.TruncatedDistribution(sd.Normal(0.0, 1.0), low=0.0, high=1.0)
    base = template.base_dist
    for _ in range(200):
        t = copy.copy(template)  # shares base
        assert t.base_dist is base
        t.log_prob(0.5)  # its normalizer: a value, so it is recorded as base's holder
    alive = t
    del t
    gc.collect()
    holders = CACHE._owners[id(base)].holders
    assert holders is not None and list(holders) == [id(alive)]
    before = alive.log_prob(0.5)
    base.loc = jnp.asarray(0.5)
    want = nd.TruncatedDistribution(nd.Normal(0.5, 1.0), low=0.0, high=1.0).log_prob(0.5)
    got = alive.log_prob(0.5)
    assert got != before
    np.testing.assert_allclose(got, want, rtol=1e-6)
