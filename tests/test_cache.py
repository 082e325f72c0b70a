"""The external weak-key cache and the lazy reads over it: instances never change, entries die
with them, an assignment drops what was computed from the old field (its holders' values too),
`clear_cache` keeps given values, threads compute once, tracers never outlive their trace,
concrete values are computed eagerly or hoisted."""

from __future__ import annotations

import gc
import threading
from collections.abc import Callable

import jax
import jax.numpy as jnp
import numpy as np
import numpyro.distributions as nd
import pytest
from helpers import BUILDERS
from numpyro.distributions.util import lazy_property

import stabledist as sd
from benchmarks.phases import record_phases
from stabledist._src.lazy.cache import CACHE
from stabledist._src.lazy.introspect import class_attribute
from stabledist._src.lazy.reads import is_lazy, lazy_property_of


def lazy_names(d) -> list[str]:
    return sorted(n for n in dir(type(d)) if is_lazy(getattr(type(d), n, None)))


def read_everything(d) -> None:
    """Read every lazy property of ``d`` and of the distributions it holds (a property that
    raises, as numpyro's does too - see test_lazy_values_equal_numpyro - is still read)."""
    for n in lazy_names(d):
        try:
            getattr(d, n)
        except Exception:
            pass
    for v in vars(d).values():
        for w in v if isinstance(v, list | tuple) else [v]:
            if isinstance(w, nd.Distribution):
                read_everything(w)


LAZY_BUILDERS = BUILDERS  # every example: reading nothing must change nothing either


@pytest.mark.parametrize("build", [b for _, b in LAZY_BUILDERS], ids=[i for i, _ in LAZY_BUILDERS])
def test_reading_lazy_values_changes_nothing(build):
    d = build(sd)
    state, args = dict(vars(d)), d.get_args()
    tree = jax.tree_util.tree_structure(d)
    read_everything(d)
    assert vars(d) == state  # same keys, same objects
    assert d.get_args().keys() == args.keys()
    assert jax.tree_util.tree_structure(d) == tree


@pytest.mark.parametrize("build", [b for _, b in LAZY_BUILDERS], ids=[i for i, _ in LAZY_BUILDERS])
def test_lazy_values_equal_numpyro(build):
    """Every lazy value is bit-identical to numpyro's, or both raise the same error."""
    ours, theirs = build(sd), build(nd)
    for n in lazy_names(theirs):
        try:
            expected = getattr(theirs, n)
        except Exception as e:
            with pytest.raises(type(e)):
                getattr(ours, n)
            continue
        got = getattr(ours, n)
        assert jax.tree_util.tree_structure(got) == jax.tree_util.tree_structure(expected)
        for a, b in zip(jax.tree_util.tree_leaves(got), jax.tree_util.tree_leaves(expected)):
            assert jnp.array_equal(a, b, equal_nan=True), n


def test_lazy_property_count_matches_expectation():
    """Every class with lazy properties is in the catalog (numpyro 0.22: 39 public, 0.21: 29)."""
    with_lazy = {n for n in dir(nd) if isinstance(getattr(nd, n), type)
                 and issubclass(getattr(nd, n), nd.Distribution) and lazy_names_of(getattr(nd, n))}
    covered = {type(b(nd)).__name__ for _, b in BUILDERS}
    assert len(with_lazy) >= 25
    assert with_lazy <= covered


def lazy_names_of(cls) -> list[str]:
    return [n for n in dir(cls) if is_lazy(getattr(cls, n, None))]


def test_values_cached_once_and_identical():
    d = sd.MultivariateNormal(jnp.zeros(3), scale_tril=jnp.eye(3) * 2)
    first = d.precision_matrix
    assert d.precision_matrix is first
    assert CACHE.values_of(d)["precision_matrix"] is first
    u = nd.MultivariateNormal(jnp.zeros(3), scale_tril=jnp.eye(3) * 2)
    assert jnp.array_equal(first, u.precision_matrix)


def test_entries_released_with_instance():
    gc.collect()
    before = sd.cache_info()
    for _ in range(2000):
        d = sd.MultivariateNormal(jnp.zeros(2), scale_tril=jnp.eye(2))
        d.precision_matrix, d.covariance_matrix  # noqa: B018
    del d
    gc.collect()
    assert sd.cache_info() == before


def test_clear_cache_forces_recompute():
    d = sd.MultivariateNormal(jnp.zeros(2), scale_tril=jnp.eye(2))
    p = d.precision_matrix
    sd.clear_cache()
    assert "precision_matrix" not in CACHE.values_of(d)
    assert d.precision_matrix is not p and jnp.array_equal(d.precision_matrix, p)


CALLS: list[int] = []


class Counting(nd.Normal):
    @lazy_property
    def slow(self):
        CALLS.append(1)
        threading.Event().wait(0.05)  # give other threads every chance to race
        return self.loc + 1


def test_threads_racing_for_a_value_all_get_the_one_kept():
    """Racing threads may each compute a value (no lock is held while one is computed), but
    every reader gets the same object, the one the cache keeps, and its bookkeeping is whole
    (the value is released with the instance)."""
    Stable = sd.make_stable(Counting)  # noqa: N806
    d = Stable(jnp.arange(3.0), 1.0)
    CALLS.clear()
    barrier, results = threading.Barrier(8), []

    def read():
        barrier.wait()
        results.append(d.slow)

    threads = [threading.Thread(target=read) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert 1 <= len(CALLS) <= 8
    assert all(r is results[0] for r in results)
    assert CACHE.values_of(d) == {"slow": results[0]}
    key = id(d)
    results.clear()
    d = None
    gc.collect()
    assert key not in CACHE.owners and key not in CACHE.table("slow")


# ---- storage: owners, holders, release, clear -------------------------------------------------


@pytest.fixture
def fresh_cache() -> None:
    """No computed value from earlier tests, no dead instance waiting for collection."""
    gc.collect()
    sd.clear_cache()


@pytest.mark.usefixtures("fresh_cache")
def test_clear_cache_forgets_computed_values_and_their_owners():
    """``clear_cache`` drops computed values from their tables, the instance's names, and an
    owner left without values or holders; the value is computed again, the same, on the next
    read, with a new owner."""
    d = sd.MultivariateNormal(jnp.zeros(2), scale_tril=2 * jnp.eye(2))
    before = sd.cache_info()  # other live instances of this worker keep their given values
    first = d.covariance_matrix
    assert sd.cache_info().instances == before.instances + 1 and id(d) in CACHE.owners
    sd.clear_cache()
    assert id(d) not in CACHE.owners
    assert CACHE.values_of(d) == {}
    assert all(id(d) not in CACHE.table(n) for n in ("covariance_matrix", "precision_matrix"))
    np.testing.assert_array_equal(d.covariance_matrix, first)  # recomputed, the same
    assert id(d) in CACHE.owners and set(CACHE.values_of(d)) == {"covariance_matrix"}


@pytest.mark.usefixtures("fresh_cache")
def test_cache_info_counts_instances_and_values():
    """``cache_info`` counts the instances with values and the values."""
    d = sd.MultivariateNormal(jnp.zeros(2), scale_tril=2 * jnp.eye(2))
    before = sd.cache_info()
    d.covariance_matrix, d.precision_matrix  # noqa: B018 - reads
    after = sd.cache_info()
    assert (after.instances, after.values) == (before.instances + 1, before.values + 2)


@pytest.mark.usefixtures("fresh_cache")
def test_a_dead_instance_leaves_no_value_behind():
    """The values of a dead instance leave the tables with it (a new instance that gets its id
    would read them), and so does its owner."""
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


@pytest.mark.usefixtures("fresh_cache")
def test_a_value_computed_from_another_keeps_both_and_releases_both():
    """A first read whose computation stores another value of the same instance first: the
    owner that store made stays and records both names (replacing it would leave ``inner``
    behind when the instance dies)."""
    chained = sd.make_stable(_Chained)
    d = chained(jnp.asarray(1.0), jnp.asarray(1.0))
    key = id(d)
    assert float(d.outer) == 3.0
    assert set(CACHE.values_of(d)) == {"outer", "inner"}
    del d
    gc.collect()
    assert key not in CACHE.table("inner") and key not in CACHE.table("outer")
    assert key not in CACHE.owners


@pytest.mark.usefixtures("fresh_cache")
def test_many_distributions_holding_one_child_stay_cheap_and_correct():
    """A holder's first read looks at nothing else: 5000 copies sharing one marginal (the
    benchmark's fresh copies, or many wrappers of one prior) each pay little for a first read;
    and an assignment to the shared child reaches every holder."""
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
    assert "correlation_matrix" in CACHE.values_of(copies[-1])
    template.marginal_dist.loc = jnp.asarray(0.5)
    assert "correlation_matrix" not in CACHE.values_of(copies[0])
    assert "correlation_matrix" not in CACHE.values_of(copies[-1])


@pytest.mark.usefixtures("fresh_cache")
def test_an_assignment_refreshes_every_distribution_holding_a_shared_base():
    """A base held by two distributions: an assignment to it drops the values of both,
    which then give numpyro's numbers for the new base."""
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


@pytest.mark.usefixtures("fresh_cache")
def test_dead_holders_leave_the_index():
    """A global base held by many short-lived distributions with values: the dead ones leave
    the cache's index of holders, and an assignment to the base still reaches the holder that
    is alive."""
    import copy

    template = sd.TruncatedDistribution(sd.Normal(0.0, 1.0), low=0.0, high=1.0)
    base = template.base_dist
    for _ in range(200):
        t = copy.copy(template)  # shares base
        assert t.base_dist is base
        t.log_prob(0.5)  # its normalizer: a first value, which indexes it as a holder
    alive = t
    del t
    gc.collect()
    assert set(CACHE.holding) == {id(alive)}
    before = alive.log_prob(0.5)
    base.loc = jnp.asarray(0.5)
    want = nd.TruncatedDistribution(nd.Normal(0.5, 1.0), low=0.0, high=1.0).log_prob(0.5)
    got = alive.log_prob(0.5)
    assert got != before
    np.testing.assert_allclose(got, want, rtol=1e-6)


@pytest.mark.usefixtures("fresh_cache")
def test_an_assignment_after_clear_cache():
    """A holder whose values were cleared has no owner any more: an assignment to what it
    holds skips it (no error), and the next read is numpyro's value for the new field."""
    d = sd.TruncatedNormal(0.0, 1.0, low=0.0, high=1.0)
    d.log_prob(0.5)
    sd.clear_cache()
    d.base_dist.loc = jnp.asarray(0.5)  # must not raise
    np.testing.assert_allclose(d.log_prob(0.5),
                               nd.TruncatedNormal(0.5, 1.0, low=0.0, high=1.0).log_prob(0.5),
                               rtol=1e-6)


@pytest.mark.usefixtures("fresh_cache")
def test_clear_cache_after_an_assignment_to_a_given_field():
    """An assignment after construction drops the given values too, and the cache stays
    consistent for `clear_cache` and later reads."""
    d = sd.MultivariateNormal(jnp.zeros(2), covariance_matrix=2 * jnp.eye(2))
    d.scale_tril = 3 * jnp.eye(2)
    assert float(d.covariance_matrix[0, 0]) == 9.0
    sd.clear_cache()  # must not raise
    assert CACHE.values_of(d) == {}
    assert float(d.covariance_matrix[0, 0]) == 9.0


class _Companion(nd.Normal):
    @lazy_property
    def twice(self):
        return 2.0 * self.loc


class _WithCompanion(nd.Normal):
    @lazy_property
    def companion(self):  # a lazy value that holds another distribution with values
        return [sd.make_stable(_Companion)(self.loc + 1.0, 1.0)]


@pytest.mark.usefixtures("fresh_cache")
def test_clear_cache_survives_instances_dying_during_it():
    """Dropping one value in `clear_cache` may free the last reference to another instance
    with values, whose release removes its owner while `clear` walks its snapshot: no
    error, and the survivor recomputes."""
    h = sd.make_stable(_WithCompanion)(jnp.asarray(0.0), 1.0)
    companion = h.companion[0]
    companion.twice  # noqa: B018 - its owner comes after h's in the snapshot
    del companion
    sd.clear_cache()  # must not raise
    assert float(h.companion[0].twice) == 2.0


class _Wrap(nd.Distribution):
    """A user's distribution holding another (possibly a `_Wrap`) in a data field."""

    pytree_data_fields = ("base",)

    def __init__(self, base):
        self.base = base
        super().__init__(batch_shape=(), event_shape=())

    @lazy_property
    def twice_loc(self):
        inner = self.base
        while isinstance(inner, _Wrap):
            inner = inner.base
        return 2.0 * inner.loc


@pytest.mark.usefixtures("fresh_cache")
def test_an_assignment_reaches_holders_of_holders_and_reassigned_children():
    """An assignment to a child drops the values of its holder and of the holder's holder,
    and, after a holder's child field is reassigned, those of the holder of the new child."""
    wrap = sd.make_stable(_Wrap)
    c = sd.Normal(jnp.asarray(1.0), 1.0)
    h1 = wrap(c)
    h2 = wrap(h1)
    assert float(h2.twice_loc) == 2.0 and float(h1.twice_loc) == 2.0
    c.loc = jnp.asarray(5.0)
    assert float(h1.twice_loc) == 10.0 and float(h2.twice_loc) == 10.0

    h = wrap(sd.Normal(jnp.asarray(0.0), 1.0))
    assert float(h.twice_loc) == 0.0
    c2 = sd.Normal(jnp.asarray(1.0), 1.0)
    h.base = c2
    assert float(h.twice_loc) == 2.0
    c2.loc = jnp.asarray(7.0)
    assert float(h.twice_loc) == 14.0


@pytest.mark.usefixtures("fresh_cache")
def test_a_holder_first_read_under_grad_is_dropped_by_an_assignment_to_its_child():
    """A holder's first value computed on the traced path (read inside ``grad``, concrete
    leaves: computed eagerly and stored) is indexed too, so an assignment to its child drops
    the value."""
    wrap = sd.make_stable(_Wrap)
    c = sd.Normal(jnp.asarray(1.0), 1.0)
    h = wrap(c)
    assert float(jax.grad(lambda x: x * h.twice_loc)(1.0)) == 2.0  # the first read
    assert "twice_loc" in CACHE.values_of(h)
    c.loc = jnp.asarray(5.0)
    assert float(h.twice_loc) == 10.0


@pytest.mark.usefixtures("fresh_cache")
def test_a_reassigned_child_no_longer_reaches_its_old_holder():
    """After ``h.base = new`` an assignment to the old child leaves ``h``'s values (``h`` no
    longer holds it: dropping them would be for nothing); one to the new child drops them."""
    wrap = sd.make_stable(_Wrap)
    old, new = sd.Normal(jnp.asarray(1.0), 1.0), sd.Normal(jnp.asarray(2.0), 1.0)
    h = wrap(old)
    assert float(h.twice_loc) == 2.0
    h.base = new
    assert float(h.twice_loc) == 4.0
    old.loc = jnp.asarray(9.0)
    assert "twice_loc" in CACHE.values_of(h)
    assert float(h.twice_loc) == 4.0
    new.loc = jnp.asarray(3.0)
    assert "twice_loc" not in CACHE.values_of(h)
    assert float(h.twice_loc) == 6.0


@pytest.mark.usefixtures("fresh_cache")
def test_a_held_child_settles_so_an_assignment_drops_what_was_given():
    """A held child was constructed before its holder: a value assigned to it later is dropped
    by its next field assignment, as for any constructed instance."""
    wrap = sd.make_stable(_Wrap)
    child = sd.MultivariateNormal(jnp.zeros(2), scale_tril=jnp.eye(2))
    h = wrap(child)
    h.twice_loc  # noqa: B018 - a holder with a value
    child.covariance_matrix = 4.0 * jnp.eye(2)  # given
    child.scale_tril = 3.0 * jnp.eye(2)  # the given value no longer describes the instance
    np.testing.assert_array_equal(child.covariance_matrix, 9.0 * jnp.eye(2))


@pytest.mark.usefixtures("fresh_cache")
def test_an_assignment_to_a_distribution_in_a_list_field_drops_its_holders_values():
    """Distributions in a list field are held too, also of a class no field has held yet: an
    assignment to one drops the values of the distribution holding the list."""

    class Total(nd.Distribution):
        pytree_data_fields = ("parts",)

        def __init__(self, parts):
            self.parts = list(parts)
            super().__init__(batch_shape=(), event_shape=())

        @lazy_property
        def total(self):
            return sum(p.loc for p in self.parts)

    d = sd.make_stable(Total)([sd.Normal(1.0, 1.0), sd.Normal(2.0, 1.0)])
    assert float(d.total) == 3.0
    d.parts[1].loc = jnp.asarray(5.0)
    assert float(d.total) == 6.0

    class Part(nd.Normal):  # a class no field has held yet
        pass

    part = sd.make_stable(Part)
    d = sd.make_stable(Total)([part(1.0, 1.0), part(2.0, 1.0)])
    assert float(d.total) == 3.0
    d.parts[0].loc = jnp.asarray(4.0)
    assert float(d.total) == 6.0


@pytest.mark.usefixtures("fresh_cache")
def test_a_constructor_that_reads_then_gives_then_assigns_keeps_what_it_was_given():
    """A constructor that reads a lazy value, then assigns another (given), then assigns a
    field keeps the given value, as numpyro does: the construction has not ended, so only
    the value read is dropped (and recomputed from the new field, where numpyro's is
    stale)."""

    class Given(nd.Normal):
        def __init__(self, loc, scale):
            super().__init__(loc, scale)
            assert float(self.doubled) == 2 * float(loc)  # a first read, mid-construction
            self.given = jnp.asarray(1.0)  # a lazy value set by the constructor (given)
            self.loc = self.loc + 1.0  # a field assigned afterwards

        @lazy_property
        def doubled(self):
            return 2 * self.loc

        @lazy_property
        def given(self):
            return jnp.asarray(2.0)

    theirs, ours = Given(0.5, 1.0), sd.make_stable(Given)(0.5, 1.0)
    assert float(theirs.given) == float(ours.given) == 1.0
    # the value read before the assignment: numpyro's stays stale, stabledist's follows it
    assert float(theirs.doubled) == 1.0 and float(ours.doubled) == 3.0


def test_an_object_that_cannot_be_weakly_referenced_is_refused_clearly():
    """Giving a value to an object without weak references raises an error that names its
    type and the reason."""
    with pytest.raises(TypeError) as info:
        CACHE.give(7, "loc", 1.0)
    assert str(info.value) == ("int instances cannot be weakly referenced (a __slots__ "
                               "without '__weakref__'?), so their lazy values cannot be "
                               "cached externally")


def test_a_first_read_by_an_instance_without_weak_references_names_the_problem():
    """The first read of a cached lazy property on a class whose ``__slots__`` leave out
    ``__weakref__`` raises the error that says why its values cannot be cached."""

    class Slotted:
        __slots__ = ("x",)

        def __init__(self):
            self.x = 2.0

        @sd.cached_lazy_property
        def doubled(self):
            return 2 * self.x

    with pytest.raises(TypeError) as info:
        Slotted().doubled  # noqa: B018 - the read is the test
    assert str(info.value) == (
        "Slotted instances cannot be weakly referenced (a __slots__ without '__weakref__'?), "
        "so their lazy values cannot be cached externally")


def test_a_release_racing_with_clear_still_drops_the_values():
    """When another thread's ``clear()`` removes a dying instance's owner between the
    release's lookup and its removal, the release still drops the instance's values (else
    they would wait for the next object with the same ``id``). The race is staged
    deterministically on a private cache."""
    from stabledist._src.lazy.cache import LazyValueCache

    class RacingOwners(dict):
        def get(self, key, default=None):
            found = super().get(key, default)
            self.pop(key, None)  # clear() in another thread, right after the lookup
            return found

    cache = LazyValueCache()
    d = sd.Normal(0.0, 1.0)
    cache.give(d, "x", 1.0)
    key = id(d)
    cache._owners = RacingOwners(cache._owners)
    del d
    gc.collect()
    assert key not in cache.table("x")


def test_a_release_after_a_racing_clear_dropped_one_value_drops_the_others():
    """A value another thread's ``clear()`` already dropped (its owner's names not updated
    yet) does not stop the release from dropping the rest. Staged on a private cache, with
    the names in a fixed order."""
    from stabledist._src.lazy.cache import LazyValueCache

    cache = LazyValueCache()
    d = sd.Normal(0.0, 1.0)
    cache.give(d, "gone", 1.0)
    cache.give(d, "kept", 2.0)
    key = id(d)
    cache.table("gone").pop(key)  # clear() popped it; owner.names still lists it
    cache._owners[key].names = ("gone", "kept")
    del d
    gc.collect()
    assert key not in cache.table("kept")


# ---- the lazy descriptor ----------------------------------------------------------------------


def test_a_cached_lazy_property_bound_under_another_name_caches_under_that_name():
    """An attribute made from a function of another name (``total =
    cached_lazy_property(_sum)``) caches under the attribute's name, which is what an
    assignment to it gives."""

    def _sum(self):
        return self.loc + self.scale

    class Summed(sd.Normal):
        total = sd.cached_lazy_property(_sum)

    d = Summed(1.0, 2.0)
    assert float(d.total) == 3.0
    assert set(CACHE.values_of(d)) == {"total"}
    record = lazy_property_of(Summed.total)  # the class holds a plain property over its reader
    assert record.name == "total" and Summed.total.fget.__name__ == "total"
    assert Summed.total.fget.__wrapped__ is _sum


def test_a_cached_lazy_property_reads_like_the_function_it_wraps():
    """A cached lazy property keeps its function's docstring (``help`` and the API docs show
    it) and type hints (resolved in the function's module), and wraps any callable, also one
    without ``__annotations__``."""
    import typing

    class Twice:
        def __call__(self, d):
            return 2 * d.loc

    class Annotated(sd.Normal):
        @sd.cached_lazy_property
        def doubled(self) -> jax.Array:
            """Twice the location."""
            return 2 * self.loc

        twice = sd.cached_lazy_property(Twice(), "twice")

    getter = Annotated.__dict__["doubled"]
    assert getter.__doc__ == "Twice the location."
    # (this module's annotations are strings: resolved in the function's globals)
    assert typing.get_type_hints(getter.fget) == {"return": jax.Array}
    d = Annotated(1.5, 1.0)
    assert float(d.doubled) == float(d.twice) == 3.0


@pytest.mark.usefixtures("fresh_cache")
def test_a_lazy_value_that_is_not_an_array_is_cached_as_numpyro_caches_it():
    """A value of another type than arrays and numbers (a tuple, a constraint) is stored on
    the first-read path: computed once, the same object at each read, as numpyro's."""
    calls: list[str] = []

    class Bounded(nd.Normal):
        @lazy_property
        def bounds(self):
            calls.append("bounds")
            return (self.loc - 3 * self.scale, self.loc + 3 * self.scale)

    for cls in (Bounded, sd.make_stable(Bounded)):
        calls.clear()
        d = cls(0.5, 1.0)
        assert d.bounds is d.bounds and calls == ["bounds"], cls
    assert list(CACHE.values_of(d)) == ["bounds"]


# ---- tracing -------------------------------------------------------------------------------

PRIOR = sd.TruncatedNormal(0.5, 1.0, low=1.0, high=2.0)
MVN = sd.MultivariateNormal(jnp.zeros(3), scale_tril=jnp.tril(jnp.ones((3, 3))) + jnp.eye(3))


@pytest.mark.parametrize(
    "transform",
    [
        lambda f: jax.jit(f),
        lambda f: jax.vmap(f),
        lambda f: jax.grad(lambda x: f(x).sum()),
        lambda f: jax.jit(jax.vmap(f)),
        lambda f: lambda x: jax.lax.scan(lambda c, xi: (c, f(xi)), 0.0, x)[1],
        lambda f: jax.pmap(f),
    ],
    ids=["jit", "vmap", "grad", "jit-vmap", "scan", "pmap"],
)
def test_global_instances_under_transformations_do_not_leak(transform):
    x = jnp.full((4,), 1.5)

    def f(x):
        value = jnp.stack([x, x, x], -1)
        return PRIOR.log_prob(x) + MVN.log_prob(value) + MVN.precision_matrix[0, 0]

    sd.clear_cache()
    expected = jax.vmap(f)(x) if True else None
    sd.clear_cache()
    with jax.checking_leaks():
        out = transform(f)(x)
        again = transform(f)(x)
    if out.shape == expected.shape:  # grad has the same shape but other values
        assert jnp.allclose(again, out)
    # values cached during the trace are concrete, and the globals still work eagerly
    for value in [*CACHE.values_of(PRIOR).values(), *CACHE.values_of(MVN).values()]:
        assert not isinstance(value, jax.core.Tracer)
    assert jnp.allclose(jax.vmap(f)(x), expected)


def test_concrete_value_is_one_constant_in_the_jaxpr():
    p = jnp.eye(50) * 2.0
    ours = sd.MultivariateNormal(jnp.zeros(50), scale_tril=p)
    theirs = nd.MultivariateNormal(jnp.zeros(50), scale_tril=p)
    x = jnp.ones(50)
    n_ours = len(jax.make_jaxpr(lambda x: ours.precision_matrix @ x)(x).eqns)
    n_theirs = len(jax.make_jaxpr(lambda x: theirs.precision_matrix @ x)(x).eqns)
    assert n_ours == 1 < n_theirs
    # first read happened inside the trace and was cached as a concrete value
    assert not isinstance(CACHE.values_of(ours)["precision_matrix"], jax.core.Tracer)


def test_traced_parameters_are_not_cached():
    seen = []

    def f(loc):
        d = sd.MultivariateNormal(loc, scale_tril=jnp.eye(2))
        value = d.precision_matrix
        seen.append(CACHE.values_of(d))
        return value.sum() + loc.sum()

    with jax.checking_leaks():
        jax.jit(f)(jnp.zeros(2))
        jax.grad(f)(jnp.zeros(2))
    # whatever was cached for an instance with traced leaves is concrete
    assert all(not isinstance(v, jax.core.Tracer) for s in seen for v in s.values())

    def g(scale):
        d = sd.MultivariateNormal(jnp.zeros(2), scale_tril=scale * jnp.eye(2))
        value = d.precision_matrix
        seen.append(CACHE.values_of(d))
        return value.sum()

    seen.clear()
    with jax.checking_leaks():
        jax.jit(g)(1.0)
        jax.grad(g)(1.0)
        jax.vmap(g)(jnp.ones(2))
    assert seen == [{}, {}, {}]


def test_instance_built_outside_read_inside_nested_trace():
    """A concrete instance built eagerly, first read inside nested transformations."""
    d = sd.TruncatedNormal(0.0, 1.0, low=-1.0, high=1.0)
    with jax.checking_leaks():
        out = jax.jit(jax.vmap(jax.grad(lambda x: d.log_prob(x))))(jnp.array([0.1, 0.2]))
    assert jnp.allclose(
        out, jax.vmap(jax.grad(nd.TruncatedNormal(0.0, 1.0, low=-1.0, high=1.0).log_prob))(
            jnp.array([0.1, 0.2])
        )
    )


def _fresh_lazy_read(transform: str, d, name: str):
    read = lambda s: s + 0.0 * jnp.sum(jnp.asarray(getattr(d, name)))  # noqa: E731
    if transform == "grad":
        return jax.grad(read)(1.0)
    if transform == "vmap":
        return jax.vmap(read)(jnp.ones(2))
    return jax.jit(read)(1.0)


@pytest.mark.parametrize("transform", ["grad", "vmap"])
def test_value_first_read_under_grad_or_vmap_is_cached_like_numpyro(transform, monkeypatch):
    """Under grad or vmap alone, operations on concrete leaves run eagerly: numpyro caches the
    value it gets in __dict__, stabledist in its cache - the same value, bit for bit, computed
    where it is read (hoisting is never asked: the trace stages nothing) - so later compiled
    programs see the same constant in both (NUTS reads values this way first)."""
    from stabledist._src.lazy import hoisting

    def hoisted(*args, **kwargs):
        raise AssertionError("a value read under grad or vmap alone was hoisted")

    ours = sd.TruncatedNormal(0.5, 2.0, low=-1.0, high=3.0)
    theirs = nd.TruncatedNormal(0.5, 2.0, low=-1.0, high=3.0)
    with jax.checking_leaks(), monkeypatch.context() as patched:
        for name in ("known_mode", "mode_from_recording", "decide_abstractly",
                     "compute_hoisted"):
            patched.setattr(hoisting, name, hoisted)
        _fresh_lazy_read(transform, ours, "_log_diff_tail_probs")
        _fresh_lazy_read(transform, theirs, "_log_diff_tail_probs")
    assert "_log_diff_tail_probs" in vars(theirs)  # numpyro cached it under the transform
    cached = CACHE.values_of(ours)["_log_diff_tail_probs"]
    assert not isinstance(cached, jax.core.Tracer)
    assert jnp.array_equal(cached, vars(theirs)["_log_diff_tail_probs"])
    # then inside jit both programs use it as a constant: the same program
    x = jnp.linspace(-0.5, 2.5, 5)
    ours_text = jax.jit(ours.log_prob).lower(x).as_text()
    theirs_text = jax.jit(theirs.log_prob).lower(x).as_text()
    assert ours_text.count("\n") == theirs_text.count("\n")


def test_elementwise_value_first_read_inside_jit_is_not_cached():
    """Inside jit an elementwise value is computed in the trace, as numpyro does: nothing to
    cache (the traced result is not concrete)."""
    d = sd.TruncatedNormal(0.5, 2.0, low=-1.0, high=3.0)
    with jax.checking_leaks():
        _fresh_lazy_read("jit", d, "_log_diff_tail_probs")
    assert "_log_diff_tail_probs" not in CACHE.values_of(d)


def test_staging_traces():
    from stabledist._src.jax_private import stages

    seen = {}

    def probe(label):
        def f(x):
            seen[label] = stages(jax._src.core.trace_ctx.trace)
            return x
        return f

    probe("eager")(1.0)
    jax.grad(probe("grad"))(1.0)
    jax.vmap(probe("vmap"))(jnp.ones(2))
    jax.vmap(jax.grad(probe("vmap-grad")))(jnp.ones(2))
    jax.jit(probe("jit"))(1.0)
    jax.jit(jax.vmap(probe("jit-vmap")))(jnp.ones(2))
    jax.lax.scan(lambda c, x: (c, probe("scan")(x)), 0.0, jnp.ones(2))
    assert seen == {"eager": False, "grad": False, "vmap": False, "vmap-grad": False,
                    "jit": True, "jit-vmap": True, "scan": True}


def _compiles(fn) -> list[str]:
    """The names of the programs XLA compiles while ``fn()`` runs (the process's one-time probe
    of XLA's options is made first: it is not part of any value's cost)."""
    from stabledist._src.lazy.hoisting import cpu_one_shot_options

    cpu_one_shot_options()
    with record_phases() as rec:
        fn()
    return rec.names


def test_long_hoisted_computation_is_one_program_shared_across_instances():
    """SineBivariateVonMises's norm_const (a series, ~30 distinct operations) is hoisted by one
    compiled program, not one eager kernel per operation, and a second instance with the same
    shapes reuses it; the value is numpyro's eager one to rounding."""
    from stabledist._src.lazy.hoisting import decide

    def make(m, phi):  # a batch of 3: shapes no other test hoists with
        return m.SineBivariateVonMises(jnp.full(3, phi), -1.0, 2.0, 3.0, correlation=0.8)

    first, second = make(sd, 0.25), make(sd, 0.5)
    x = jnp.zeros((7, 3, 2))
    leaves, treedef = jax.tree_util.tree_flatten(first)
    compute = lazy_property_of(class_attribute(type(first), "norm_const")).wrapped
    assert decide(first, "norm_const", compute, leaves, treedef).mode == "program"
    names = _compiles(lambda: jax.block_until_ready(jax.jit(first.log_prob)(x)))
    assert names == ["jit(hoisted_norm_const)", "jit(log_prob)"]  # no eager kernel
    again = _compiles(lambda: jax.block_until_ready(jax.jit(second.log_prob)(x)))
    assert "jit(hoisted_norm_const)" not in again, again
    for ours, phi in ((first, 0.25), (second, 0.5)):
        want = make(nd, phi).norm_const
        assert jnp.allclose(CACHE.values_of(ours)["norm_const"], want, rtol=1e-6)


def test_short_hoisted_value_is_one_cheap_program_on_the_cpu():
    """On the CPU, MultivariateNormal's precision_matrix (a few operations) first read inside
    jit is computed by one program compiled with cheap code generation, not by jax's eager
    kernels compiled with XLA's defaults; it is numpyro's eager value to rounding."""
    from stabledist._src.lazy.hoisting import one_shot_programs

    assert one_shot_programs()  # the suite runs on the CPU
    n = 7  # a dimension no other test hoists with (the program is shared per shape)
    tril = jnp.linalg.cholesky(jnp.eye(n) + 0.1 * jnp.ones((n, n)))
    d = sd.MultivariateNormal(jnp.zeros(n), scale_tril=tril)
    x = jnp.ones(n)  # made before: only the read inside jit is recorded
    names = _compiles(lambda: jax.block_until_ready(jax.jit(lambda x: d.precision_matrix @ x)(x)))
    assert names == ["jit(hoisted_precision_matrix)", "jit(<lambda>)"], names  # no eager kernel
    want = nd.MultivariateNormal(jnp.zeros(n), scale_tril=tril).precision_matrix
    assert jnp.allclose(CACHE.values_of(d)["precision_matrix"], want, rtol=1e-6)


def _fresh_decisions(monkeypatch: pytest.MonkeyPatch) -> None:
    """Hoisting decides as if no class had decided anything yet (a memo of this test's own)."""
    from stabledist._src.lazy import hoisting

    monkeypatch.setattr(hoisting, "_decisions", {})


def _record_decisions(
    monkeypatch: pytest.MonkeyPatch,
) -> tuple[list[tuple[str, tuple]], list[str], Callable]:
    """Hoisting decides afresh, recording in ``decided`` the value name and leaf shapes of each
    decision it remembers and in ``abstract`` each value it ran an abstract trace for;
    ``decide`` is that abstract trace unrecorded, which every decision must agree with."""
    from stabledist._src.lazy import hoisting

    _fresh_decisions(monkeypatch)
    decided: list[tuple[str, tuple]] = []
    abstract: list[str] = []
    remember, decide = hoisting._remember, hoisting._abstract_mode

    def counting(cls, name, leaves, mode, sizeless):
        decided.append((name, tuple(jnp.shape(x) for x in leaves)))
        return remember(cls, name, leaves, mode, sizeless)

    def abstract_trace(compute, leaves, treedef):
        abstract.append(compute.__name__)
        return decide(compute, leaves, treedef)

    monkeypatch.setattr(hoisting, "_remember", counting)
    monkeypatch.setattr(hoisting, "_abstract_mode", abstract_trace)
    return decided, abstract, decide


def test_hoisting_decision_is_made_once_per_leaf_ranks_when_sizes_cannot_change_it(
        monkeypatch):
    """Whether to hoist a value is decided from the equations its first computation in the
    trace added (no second, abstract trace: that costs as much as tracing the whole
    log_prob, ~20 ms for a TruncatedNormal normaliser). A new size reuses a decision that
    cannot depend on sizes - elementwise work (computed in the trace) and linear algebra
    (hoisted) - while a decision made by an intermediate's size (a series on a grid) is made
    again for every shape (and so is every decision under JAX's simplified constants). Either
    way the decision is the one an abstract trace of the new shape gives, and the jitted
    result is numpyro's (bit for bit when computed in the trace)."""
    from stabledist._src.lazy import hoisting

    decided, abstract, decide = _record_decisions(monkeypatch)

    def tn(m, b):
        return m.TruncatedNormal(jnp.linspace(-1, 1, b), 1.5, low=-1.0, high=jnp.full(b, 2.0))

    def sbvm(m, b):
        return m.SineBivariateVonMises(jnp.full(b, 0.25), -1.0, 2.0, 3.0, correlation=0.8)

    def mvn(m, n):
        return m.MultivariateNormal(jnp.zeros(n), scale_tril=jnp.eye(n) * 1.5)

    def log_prob(d, x):
        return d.log_prob(x)

    def precision(d, x):
        return x @ d.precision_matrix

    # under JAX's simplified constants a large elementwise value is hoisted, so elementwise
    # decisions depend on the size there: made again for every shape
    simplified = hoisting.simplified_constants()
    cases = [  # (build, sizes, read, value kind, decided again per shape)
        (tn, (4, 9, 33), log_prob, "elementwise", simplified),
        (mvn, (3, 6), precision, "linear algebra", False),
        (sbvm, (2, 5), log_prob, "series on a grid", True),
    ]
    for build, sizes, read, kind, per_shape in cases:
        decided.clear()
        for size in sizes:
            ours, theirs = build(sd, size), build(nd, size)
            x = theirs.sample(jax.random.PRNGKey(size), (2,))
            got = jax.jit(lambda x, d=ours, r=read: r(d, x))(x)
            want = jax.jit(lambda x, d=theirs, r=read: r(d, x))(x)
            if kind == "elementwise":  # computed in the trace: numpyro's program
                assert jnp.array_equal(got, want), (kind, size)
            else:
                assert jnp.allclose(got, want, rtol=1e-5), (kind, size)
            leaves, treedef = jax.tree_util.tree_flatten(ours)
            shapes = tuple(jnp.shape(v) for v in leaves)
            memo = hoisting._decisions.get(type(ours), {})
            for key, mode in list(memo.items()):
                if key[0] == "shapes" and key[2] == shapes:
                    compute = lazy_property_of(class_attribute(type(ours), key[1])).wrapped
                    assert mode == decide(compute, leaves, treedef)[0], (kind, size, key)
        first = [d for d in decided if d[1] == decided[0][1]]
        assert first, kind
        assert len(decided) == (len(first) * len(sizes) if per_shape else len(first)), (
            kind, decided)
    assert abstract == [], abstract  # fresh instances: decided from their own trace


def test_a_value_hoisted_after_its_first_computation_in_the_trace_leaves_no_equation(
        monkeypatch):
    """Deciding from the trace computes the value there first; a value then hoisted (or
    decided again from the leaves) leaves none of those equations in the program: jit
    keeps dead equations, so they would be lowered and compiled for nothing."""

    _fresh_decisions(monkeypatch)
    cov = jnp.array([[2.0, 0.5, 0.1], [0.5, 1.0, 0.2], [0.1, 0.2, 1.5]])
    d = sd.MultivariateNormal(jnp.zeros(3), covariance_matrix=cov)  # hoisted
    jaxpr = jax.make_jaxpr(lambda x: d.precision_matrix @ x)(jnp.ones(3))
    assert [e.primitive.name for e in jaxpr.eqns] == ["dot_general"], jaxpr
    copula = sd.GaussianCopulaBeta(2.0, 3.0, correlation_matrix=cov / 2 + jnp.eye(3) / 2)
    jaxpr = jax.make_jaxpr(lambda: copula.correlation_matrix)()  # decided again from leaves
    assert jaxpr.eqns == [], jaxpr


def test_hoisting_decisions_from_the_trace_agree_with_abstract_traces_over_the_catalog(
        monkeypatch):
    """For every catalog example, a fresh instance whose lazy values are first read inside jit
    has each hoisting decision (made from what its computation added to the trace) equal to
    the decision an abstract trace from the leaves alone gives."""
    from stabledist._src.lazy import hoisting

    compared = 0
    for example, build in BUILDERS:
        d = build(sd)
        names = lazy_names(d)
        if not names:
            continue
        _fresh_decisions(monkeypatch)

        def read(s, d=d, names=names):
            out = {}
            for n in names:
                try:
                    out[n] = getattr(d, n)
                except Exception:  # numpyro raises for some (mode, ...), as upstream
                    pass
            return s, out

        jax.jit(read)(jnp.zeros(()))
        leaves, treedef = jax.tree_util.tree_flatten(d)
        for key, mode in list(hoisting._decisions.get(type(d), {}).items()):
            if key[0] != "shapes" or key[2] != tuple(jnp.shape(x) for x in leaves):
                continue  # a held distribution's decision (checked with its own class)
            compute = lazy_property_of(class_attribute(type(d), key[1])).wrapped
            assert mode == hoisting._abstract_mode(compute, leaves, treedef)[0], (
                example, key[1])
            compared += 1
    assert compared >= 60, compared


def test_hoisting_decision_of_an_instance_with_cached_values_is_made_from_its_leaves(
        monkeypatch):
    """A value whose first computation in the trace used cached values (its own instance's,
    or a held distribution's seeded one) is decided by an abstract trace from the leaves
    alone, as a fresh instance would compute it - never from what this instance happens to
    hold; the result is numpyro's."""
    from stabledist._src.lazy import hoisting

    _fresh_decisions(monkeypatch)
    abstract: list[str] = []
    decide = hoisting._abstract_mode

    def abstract_trace(compute, leaves, treedef):
        abstract.append(compute.__name__)
        return decide(compute, leaves, treedef)

    monkeypatch.setattr(hoisting, "_abstract_mode", abstract_trace)
    corr = jnp.array([[1.0, 0.3, 0.1], [0.3, 1.0, 0.2], [0.1, 0.2, 1.0]])
    # the copula's correlation_matrix is its MVN's covariance_matrix, seeded by the constructor
    ours = sd.GaussianCopulaBeta(2.0, 3.0, correlation_matrix=corr)
    got = jax.jit(lambda: ours.correlation_matrix)()
    assert abstract == ["correlation_matrix"], abstract
    assert jnp.array_equal(got, nd.GaussianCopulaBeta(2.0, 3.0, correlation_matrix=corr)
                           .correlation_matrix)
    # a value computed from another value cached eagerly before
    class Scaled(sd.Normal):
        @lazy_property
        def spread(self):
            return 2.0 * self.variance_

        @lazy_property
        def variance_(self):
            return jnp.broadcast_to(self.scale**2, self.batch_shape)

    abstract.clear()
    ours = Scaled(jnp.zeros(5), jnp.linspace(1.0, 2.0, 5))
    ours.variance_  # noqa: B018 - cached eagerly
    got = jax.jit(lambda: ours.spread)()
    assert abstract == ["spread"], abstract
    assert jnp.array_equal(got, 2.0 * jnp.linspace(1.0, 2.0, 5) ** 2)


def test_hoisting_program_falls_back_to_eager_for_unhashable_static_fields(monkeypatch):
    """A tree structure that cannot be a dict key (static fields without a hash) gets no
    shared program: the value is computed op by op, still cached and correct."""
    from stabledist._src.lazy import hoisting

    d = sd.SineBivariateVonMises(0.25, -1.0, 2.0, 3.0, correlation=0.8)
    real = hoisting.compute_hoisted

    def unhashable(instance, name, compute, mode, leaves, treedef, known):
        class Unhashable:
            __hash__ = None
        return real(instance, name, compute, mode, leaves, Unhashable(), known)

    monkeypatch.setattr(hoisting, "compute_hoisted", unhashable)
    names = _compiles(lambda: jax.jit(d.log_prob)(jnp.zeros((3, 2))))
    assert "jit(hoisted_norm_const)" not in names, names
    want = nd.SineBivariateVonMises(0.25, -1.0, 2.0, 3.0, correlation=0.8).norm_const
    assert jnp.array_equal(CACHE.values_of(d)["norm_const"], want)  # op by op: eager bits


_SIMPLIFIED = """
import jax, jax.numpy as jnp, numpy as np, numpyro.distributions as nd, stabledist as sd
from stabledist._src.lazy.cache import CACHE
from stabledist._src.lazy.hoisting import LARGE_CONSTANTS
assert jax.config.jax_use_simplified_jaxpr_constants
for n, hoisted in ((LARGE_CONSTANTS, True), (256, False)):
    x = jnp.linspace(0.1, 0.9, n)
    ours, theirs = (m.TruncatedNormal(jnp.linspace(0.0, 1.0, n), 1.0, low=0.0, high=2.0)
                    for m in (sd, nd))
    got = jax.jit(lambda x: ours.log_prob(x))(x)
    want = jax.jit(lambda x: theirs.log_prob(x))(x)
    assert ("_log_diff_tail_probs" in CACHE.values_of(ours)) is hoisted, (n, CACHE.values_of(ours))
    if hoisted:  # computed once by a program: numpyro's value to rounding
        np.testing.assert_allclose(got, want, rtol=1e-5)
    else:  # computed in the trace: numpyro's program, bit for bit
        np.testing.assert_array_equal(got, want)
print("ok")
"""


def test_large_elementwise_values_are_hoisted_under_simplified_constants():
    """With ``JAX_USE_SIMPLIFIED_JAXPR_CONSTANTS=1`` closed-over arrays are arguments of the
    compiled program, so an elementwise lazy value (a TruncatedNormal's normaliser) would be
    computed in every call: from `LARGE_CONSTANTS` numbers on it is hoisted (the constants rows
    of the benchmarks page: per call tens of times faster than numpyro); smaller ones stay in
    the trace, numpyro's program."""
    import os
    import subprocess
    import sys

    env = {**os.environ, "JAX_USE_SIMPLIFIED_JAXPR_CONSTANTS": "1"}
    done = subprocess.run([sys.executable, "-c", _SIMPLIFIED], capture_output=True, text=True,
                          env=env, timeout=300)
    assert done.returncode == 0 and done.stdout.strip() == "ok", done.stderr[-3000:]


def test_hoisting_program_compiles_with_the_options_this_jaxlib_has() -> None:
    """jaxlib 0.11 dropped ``xla_cpu_use_fusion_emitters``: a hoisting program asks only for
    the options this jaxlib accepts, so it still compiles (one program, no eager kernels)."""
    from stabledist._src.lazy.hoisting import cpu_one_shot_options

    options = cpu_one_shot_options()
    assert options.get("xla_backend_optimization_level") == 0
    compiled = jax.jit(lambda x: x * 2, compiler_options=options).lower(1.0).compile()
    assert compiled is not None
    n = 5  # a dimension no other test hoists with
    tril = jnp.linalg.cholesky(jnp.eye(n) + 0.2 * jnp.ones((n, n)))
    d = sd.MultivariateNormal(jnp.zeros(n), scale_tril=tril)
    got = jax.jit(lambda x: d.precision_matrix @ x)(jnp.ones(n))
    want = nd.MultivariateNormal(jnp.zeros(n), scale_tril=tril).precision_matrix @ jnp.ones(n)
    assert jnp.allclose(got, want, rtol=1e-5)


# ---- first reads under a trace: computed where reads decides, stored when concrete -----------


@pytest.mark.usefixtures("fresh_cache")
def test_a_first_read_in_trace_with_no_trace_active_computes_once_and_stores():
    """``first_read_in_trace`` reached with no trace active (the getter's fast test only says a
    trace may be active) computes the value from the instance, stores it, and gives the stored
    one to every later read."""
    from stabledist._src.lazy.reads import first_read_in_trace

    d = sd.Normal(0.0, 2.0)
    calls: list[int] = []

    def compute(instance):
        calls.append(1)
        return instance.scale * 2

    values = CACHE.table("_first_read_test_value")
    first = first_read_in_trace(d, "_first_read_test_value", compute, values)
    again = first_read_in_trace(d, "_first_read_test_value", compute, values)
    assert first is again and float(first) == 4.0 and len(calls) == 1
    assert CACHE.values_of(d)["_first_read_test_value"] is first
    assert values[id(d)] is first


@pytest.mark.usefixtures("fresh_cache")
def test_a_value_computed_in_the_trace_is_computed_there_once():
    """A value first read in a trace and decided "compute in the trace" is the value that
    computation gave, not computed again: the program is numpyro's, equation for equation."""

    def program(d):
        return jax.make_jaxpr(lambda x: d.log_prob(x))(jnp.linspace(-0.5, 2.5, 5))

    ours = program(sd.TruncatedNormal(0.5, 2.0, low=-1.0, high=3.0))
    theirs = program(nd.TruncatedNormal(0.5, 2.0, low=-1.0, high=3.0))
    assert [e.primitive.name for e in ours.eqns] == [e.primitive.name for e in theirs.eqns]


@pytest.mark.usefixtures("fresh_cache")
def test_a_hoisted_program_is_given_the_values_the_instance_already_has():
    """The program that hoists a value gives its rebuilt instance the values the cache holds
    for the instance (a covariance given to the constructor): it runs, stays the class's
    shared program for this tree structure, and the value is numpyro's to rounding."""
    from stabledist._src.lazy import hoisting

    d = sd.MultivariateNormal(jnp.zeros(3), covariance_matrix=2.0 * jnp.eye(3))
    assert "covariance_matrix" in CACHE.given(d)
    jax.jit(lambda x: x @ d.precision_matrix)(jnp.ones(3))
    programs = {key[0]: program for key, program in hoisting._programs.get(type(d), {}).items()}
    assert programs.get("precision_matrix") is not None
    failed = [key[0] for key in hoisting._unprogrammable.get(type(d), {})]
    assert "precision_matrix" not in failed  # it ran
    np.testing.assert_allclose(CACHE.values_of(d)["precision_matrix"], 0.5 * jnp.eye(3),
                               rtol=1e-6)


@pytest.mark.usefixtures("fresh_cache")
def test_a_value_that_cannot_be_traced_is_hoisted_op_by_op():
    """A lazy value with Python control flow on an array it computed cannot be computed in a
    trace (numpyro raises ``ConcretizationTypeError`` inside ``jit``): stabledist computes it
    op by op outside the trace and stores it."""

    class Branchy(nd.Normal):
        @lazy_property
        def half_or_double(self):
            return self.scale * (0.5 if float(jnp.sum(self.loc)) > 0 else 2.0)

    upstream = Branchy(jnp.ones(2), jnp.full(2, 3.0))
    with pytest.raises(jax.errors.ConcretizationTypeError):
        jax.jit(lambda x: x * upstream.half_or_double)(2.0)
    d = sd.make_stable(Branchy)(jnp.ones(2), jnp.full(2, 3.0))
    np.testing.assert_array_equal(jax.jit(lambda x: x * d.half_or_double)(2.0), [3.0, 3.0])
    np.testing.assert_array_equal(CACHE.values_of(d)["half_or_double"], [1.5, 1.5])


@pytest.mark.usefixtures("fresh_cache")
def test_a_value_that_is_a_tuple_of_arrays_is_cached():
    """A concrete value of a type the fast test does not list (a tuple of arrays) is stored
    too, read eagerly or first under ``vmap``."""

    class Pair(nd.Normal):
        @lazy_property
        def pair(self):
            return (self.loc + 1, self.scale * 2)

    d = sd.make_stable(Pair)(jnp.ones(2), jnp.full(2, 3.0))
    first = d.pair
    assert d.pair is first and CACHE.values_of(d)["pair"] is first
    e = sd.make_stable(Pair)(jnp.ones(3), jnp.full(3, 3.0))
    jax.vmap(lambda x: x * e.pair[1])(jnp.ones(2))  # first read under vmap alone
    assert CACHE.values_of(e)["pair"] is e.pair


def test_a_value_given_after_construction_is_dropped_by_the_next_assignment() -> None:
    """An instance that had no value when its construction ended is constructed all the same:
    a value assigned to its lazy property afterwards is dropped by its next field assignment
    (numpyro serves the stale one), while what a constructor gives stays through its own
    assignments."""
    d = sd.MultivariateNormal(jnp.zeros(2), scale_tril=jnp.eye(2))
    d.covariance_matrix = 4.0 * jnp.eye(2)
    assert float(d.covariance_matrix[0, 0]) == 4.0
    d.scale_tril = 3.0 * jnp.eye(2)
    assert float(d.covariance_matrix[0, 0]) == 9.0
    given = sd.MultivariateNormal(jnp.zeros(2), covariance_matrix=2.0 * jnp.eye(2))
    assert "covariance_matrix" in CACHE.given(given)
