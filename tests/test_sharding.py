"""Distributions under explicit sharding (issue 24, point 5), on the suite's 4 CPU devices.

Inputs and outputs of `jit` under `jax.set_mesh` with ``AxisType.Explicit``: leaves keep the
sharding `jax.sharding.reshard` gave them (`jax.typeof` shows it), outputs built inside carry
theirs, `shard_map` takes a distribution split along its batch, and a batch made by `vmap`
with ``spmd_axis_name`` is sharded along the batch (issue 24, point 1). Numbers are those of
the same program without a mesh.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import stabledist as dist

pytestmark = pytest.mark.skipif(
    not (hasattr(jax, "set_mesh") and hasattr(jax.sharding, "AxisType")
         and hasattr(jax.sharding, "reshard") and hasattr(jax, "shard_map")),
    reason="explicit sharding needs jax.set_mesh, AxisType, reshard and jax.shard_map "
           f"(jax {jax.__version__})")

P = jax.sharding.PartitionSpec


@pytest.fixture
def mesh():
    if jax.device_count() < 4:
        pytest.skip("needs 4 devices (the suite forces 4 host devices)")
    explicit = jax.sharding.AxisType.Explicit
    return jax.make_mesh((4,), ("batch",), axis_types=(explicit,))


def _sharding(x) -> str:
    """``float32[8@batch]``: shape and sharding as `jax.typeof` shows them (without the ``~``
    it puts before a weak type)."""
    return str(jax.typeof(x)).lstrip("~")


def step(d, x):
    return d.log_prob(x), dist.Normal(d.loc + 0.5 * (x - d.loc), d.scale)


def test_jit_keeps_the_shardings_of_leaves(mesh):
    plain = dist.Normal(jnp.linspace(-1.0, 1.0, 8), jnp.full(8, 2.0))
    expected_lp, expected_out = jax.jit(step)(plain, jnp.ones(8))
    with jax.set_mesh(mesh):
        d = jax.sharding.reshard(plain, P("batch"))
        assert _sharding(d.loc) == _sharding(d.scale) == "float32[8@batch]"
        lp, out = jax.jit(step)(d, jax.sharding.reshard(jnp.ones(8), P("batch")))
        assert type(out) is dist.Normal and out.batch_shape == (8,)
        assert _sharding(lp) == _sharding(out.loc) == "float32[8@batch]"
    np.testing.assert_array_equal(lp, expected_lp)
    np.testing.assert_array_equal(out.loc, expected_out.loc)


def test_one_parameter_sharded_one_replicated(mesh):
    loc = jnp.arange(12.0).reshape(4, 3)
    with jax.set_mesh(mesh):
        d = dist.MultivariateNormal(jax.sharding.reshard(loc, P("batch")),
                                    scale_tril=jnp.eye(3))
        lp = jax.jit(lambda d: d.log_prob(jnp.zeros(3)))(d)
        assert _sharding(d.loc) == "float32[4@batch,3]" and _sharding(lp) == "float32[4@batch]"
    np.testing.assert_allclose(lp, dist.MultivariateNormal(loc, jnp.eye(3)).log_prob(jnp.zeros(3)),
                               rtol=1e-6)


def test_shard_map_splits_a_distribution_along_its_batch(mesh):
    plain = dist.Normal(jnp.linspace(-1.0, 1.0, 8), 1.5)
    with jax.set_mesh(mesh):
        d = jax.sharding.reshard(jax.tree.map(lambda x: jnp.broadcast_to(x, (8,)), plain),
                                 P("batch"))
        lp = jax.shard_map(lambda d: d.log_prob(0.25), in_specs=P("batch"),
                           out_specs=P("batch"))(d)
    np.testing.assert_allclose(lp, plain.log_prob(0.25), rtol=1e-6)


def test_vmap_with_spmd_axis_name_gives_a_sharded_batch(mesh):
    means = jnp.arange(24.0).reshape(8, 3)
    with jax.set_mesh(mesh):
        build = jax.jit(jax.vmap(lambda m: dist.MultivariateNormal(m, jnp.eye(3)),
                                 spmd_axis_name="batch"))
        batched = build(jax.sharding.reshard(means, P("batch")))
        assert batched.batch_shape == (8,) and batched.event_shape == (3,)
        assert _sharding(batched.loc) == "float32[8@batch,3]"
        assert _sharding(batched.scale_tril) == "float32[8@batch,3,3]"
        lp = jax.jit(lambda d: d.log_prob(jnp.zeros(3)))(batched)
        assert _sharding(lp) == "float32[8@batch]"
    np.testing.assert_allclose(lp, dist.MultivariateNormal(means, jnp.eye(3)).log_prob(
        jnp.zeros(3)), rtol=1e-6)
