"""Batch slicing, ``d[idx]`` (issue 24, point 2).

Over every catalog example with batch dimensions: integers, negative integers, slices, ``...``,
``None`` and integer arrays select what the same index selects of the log-density array, with
the event dimensions untouched; ``d[i]`` is what ``vmap`` sees as the i-th element; static
out-of-range indices raise NumPy's IndexError; a traced index works under ``jit``. The classes
that cannot be sliced raise a TypeError that says so.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from helpers import compiled_reads

import stabledist as dist
from stabledist._src.pytrees.slicing import _normalize
from stabledist.testing import catalog
from tests.test_batched import _derived

KEY = jax.random.PRNGKey(0)
UNSLICEABLE = {"EulerMaruyama"}  # its `t` is a time grid: the docs list it
INDICES = [0, -1, (..., 0), (None, ...), slice(1, None), np.array([0, 0, 1]),
           (Ellipsis, None)]


def _value(d, name):
    """A value in the support with the distribution's full shape."""
    values = catalog.LOG_PROB_VALUES
    if name in values:
        x = values[name]() if callable(values[name]) else values[name]
    else:
        x = d.sample(KEY)
    return np.broadcast_to(np.asarray(x), d.batch_shape + d.event_shape)


def _name(builder) -> str:
    return type(builder(dist)).__name__


def test_slices_select_what_numpy_selects(builder):
    d = builder(dist)
    if not d.batch_shape:
        with pytest.raises(IndexError, match="too many indices"):
            d[0]
        return
    name = type(d).__name__
    if name in UNSLICEABLE:
        with pytest.raises(TypeError, match="cannot be sliced"):
            d[0]
        return
    try:
        x = _value(d, name)
        lp = np.asarray(d.log_prob(x))
    except NotImplementedError:  # ImproperUniform has no sample
        x, lp = None, None
    reads, wanted = [], []
    for index in INDICES:
        full = _normalize(index, len(d.batch_shape), name)
        s = d[index]
        # an expansion's slice is its base, broadcast to the batch and indexed (an expansion of
        # it would keep the whole batch's shape inside vmap)
        assert type(s).__name__ == (type(d.base_dist).__name__ if name == "ExpandedDistribution"
                                    else name)
        assert s.batch_shape == np.empty(d.batch_shape)[full].shape
        assert s.event_shape == d.event_shape
        if lp is not None:
            reads.append(("log_prob", s, x[full]))
            wanted.append(lp[full])
    # compiled, every slice in one program: each index gives new shapes (helpers)
    for index, got, want in zip(INDICES, compiled_reads(*reads), wanted):
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6, err_msg=f"d[{index!r}]")
    with pytest.raises(IndexError):
        d[d.batch_shape[0]]
    with pytest.raises(IndexError, match="too many indices"):
        d[(0,) * (len(d.batch_shape) + 1)]


def test_an_element_is_what_vmap_sees(builder):
    d = builder(dist)
    if len(d.batch_shape) == 0 or type(d).__name__ in UNSLICEABLE | {"ImproperUniform"}:
        return
    x = _value(d, type(d).__name__)
    lp = np.asarray(d.log_prob(x))
    for i in (0, -1):  # read eagerly, as a user reads d[i]
        np.testing.assert_allclose(d[i].log_prob(x[i]), lp[i], rtol=1e-5, atol=1e-6)
    if _derived(d):  # and the stack of two elements is their batch (test_batched.py)
        stacked = jax.tree.map(lambda *xs: jnp.stack(xs), d[0], d[-1])
        assert stacked.batch_shape == (2, *d.batch_shape[1:])
        np.testing.assert_allclose(stacked.log_prob(x[[0, -1]]), lp[[0, -1]], rtol=1e-5,
                                   atol=1e-6)
    for moment in ("mean", "variance"):
        try:
            whole = getattr(d, moment)
        except (NotImplementedError, ValueError, ImportError):
            continue
        np.testing.assert_allclose(getattr(d[0], moment), whole[0], rtol=1e-5, atol=1e-6)


def test_traced_index_under_jit():
    d = dist.Normal(jnp.arange(5.0), jnp.ones(5))
    f = jax.jit(lambda d, i: d[i].mean)
    assert float(f(d, 3)) == 3.0
    assert jax.jit(lambda d, i: d[i].batch_shape)  # static shape from a traced index
    np.testing.assert_array_equal(jax.jit(lambda d, i: d[i].mean)(d, jnp.array([4, 0])),
                                  jnp.array([4.0, 0.0]))


def test_nested_and_broadcast_parameters():
    base = dist.Normal(jnp.arange(6.0).reshape(2, 3), 1.0)  # scale broadcast
    ind = base.to_event(1)
    assert ind[1].batch_shape == () and ind[1].event_shape == (3,)
    np.testing.assert_array_equal(ind[1].base_dist.loc, jnp.arange(3.0, 6.0))
    tn = dist.TruncatedNormal(jnp.zeros(4), 1.0, low=jnp.array([-1.0, 0.0, 1.0, 2.0]))
    np.testing.assert_allclose(tn[2:].log_prob(2.5), tn.log_prob(2.5)[2:], rtol=1e-6)
    masked = base.mask(jnp.array([[True, False, True], [False, True, False]]))
    np.testing.assert_array_equal(masked[:, 1].log_prob(0.0), masked.log_prob(0.0)[:, 1])
    expanded = dist.Normal(0.0, 1.0).expand((4, 3))
    assert expanded[np.array([0, 2])].batch_shape == (2, 3)


def test_not_iterable():
    with pytest.raises(TypeError, match="not iterable"):
        iter(dist.Normal(jnp.zeros(3), 1.0))


def test_boolean_masks_are_refused_clearly():
    with pytest.raises(TypeError, match="boolean masks"):
        dist.Normal(jnp.zeros(3), 1.0)[jnp.array([True, False, True])]


def test_unsliceable_transforms_say_so():
    from numpyro.distributions.transforms import AffineTransform

    d = dist.TransformedDistribution(dist.Normal(jnp.zeros(3), 1.0),
                                     AffineTransform(jnp.arange(3.0), 2.0))
    with pytest.raises(TypeError, match="TransformedDistribution cannot be sliced: its "
                                        "transforms have array parameters"):
        d[0]


@pytest.mark.parametrize("index", ["a", 1.5, True, jnp.array([0.5])],
                         ids=["str", "float", "bool", "float-array"])
def test_invalid_indices_say_what_is_valid(index):
    """Each says what cannot index and what can, and never offers boolean arrays."""
    d = dist.Normal(jnp.arange(4.0), 1.0)
    with pytest.raises(TypeError, match="cannot index a batch; index with integers") as error:
        d[index]
    assert "boolean arrays" not in str(error.value)


def test_an_expanded_distribution_sliced_whole_maps_as_its_elements():
    """``d[:]`` is the documented way to give every parameter the batch shape before ``vmap``
    or ``scan``: for an expansion each element is one of its base's, not the whole batch."""
    ex = dist.Normal(0.0, 1.0).expand((3,))
    inside = []
    out = jax.vmap(lambda e: inside.append(e.batch_shape) or e.log_prob(1.0))(ex[:])
    assert out.shape == (3,) and inside == [()]
    np.testing.assert_allclose(out.sum(), ex.log_prob(1.0).sum())
    assert jax.lax.scan(lambda c, e: (c, e.log_prob(1.0)), 0.0, ex[:])[1].shape == (3,)
    assert dist.Normal(jnp.zeros(3), 1.0).expand((2, 3))[:].batch_shape == (2, 3)


class _Forwarding(dist.Normal):
    """A subclass forwarding its base's arguments (``*args``, ``**kwargs``)."""

    pytree_aux_fields = ("temperature",)

    def __init__(self, *args, temperature=1.0, **kwargs):
        self.temperature = temperature
        super().__init__(*args, **kwargs)


class _Renamed(dist.Normal):
    def __init__(self, mu=0.0, sigma=1.0):
        super().__init__(mu, sigma)


class _Shifting(dist.Normal):
    def __init__(self, loc, scale):
        super().__init__(loc + 100.0, scale)


def test_a_users_constructor_is_not_called_again():
    """A user's ``__init__`` may rename or transform its arguments, so a slice of its class
    is a copy with the fields sliced (what ``vmap`` sees), never the constructor called on
    the fields (a shift applied twice, or arguments rebuilt from their defaults)."""
    d = _Forwarding(jnp.array([10.0, 20.0, 30.0]), jnp.array([1.0, 2.0, 3.0]), temperature=2.0)
    s = d[2]
    assert (float(s.loc), float(s.scale), s.temperature) == (30.0, 3.0, 2.0)
    assert d[1:].batch_shape == (2,)
    renamed = _Renamed(jnp.array([10.0, 20.0]), 2.0)
    assert (float(renamed[1].loc), float(renamed[1].scale)) == (20.0, 2.0)
    shifting = _Shifting(jnp.array([1.0, 2.0]), 1.0)
    assert type(shifting[1]) is _Shifting and float(shifting[1].loc) == 102.0
    assert shifting[1].log_prob(102.0) == shifting.log_prob(102.0)[1]


def test_a_vmapped_expansion_is_refused_with_the_reason_and_its_promotion_slices():
    """An expansion made inside ``vmap`` keeps the shape it was expanded to (numpyro's does:
    its batch shape lives in aux data), so its base's parameters carry an axis its batch
    shape does not describe: a slice is refused with that reason (never an error from inside
    ``broadcast_to``), and numpyro's ``promote_batch_shape`` of it, which names the mapped
    axis, slices as the same expansion made outside ``vmap`` does."""
    from numpyro.contrib.control_flow.scan import promote_batch_shape

    expanded = jax.vmap(lambda m: dist.Normal(m, 1.0).expand((3,)))(jnp.arange(4.0))
    with pytest.raises(TypeError, match=r"batch shape \(4,\), which its batch shape \(3,\)"):
        expanded[1]
    promoted = promote_batch_shape(expanded)
    outside = dist.Normal(jnp.arange(4.0)[:, None], 1.0).expand((4, 3))
    assert promoted.batch_shape == outside.batch_shape == (4, 3)
    for index in (1, (slice(None), 1), (slice(1, 3), 0)):
        assert promoted[index].batch_shape == outside[index].batch_shape
        assert jnp.array_equal(promoted[index].mean, outside[index].mean)
