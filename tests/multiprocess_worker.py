"""One process of a multi-process JAX program that passes distributions between processes.

    python tests/multiprocess_worker.py PROCESS_ID NUM_PROCESSES PORT MODULE OUT [CASE ...]

``MODULE`` is ``stabledist`` or ``numpyro.distributions``. With ``NUM_PROCESSES`` 2 the processes
join through ``jax.distributed`` on ``localhost:PORT`` (gloo CPU collectives, 2 devices each);
with 1 the same program runs in one process on 4 devices (the reference). Every process writes
what it computed to ``OUT`` (npz, arrays named ``<case>/<what><key path>``), so the test
(tests/test_multiprocess.py) can compare processes with each other and with the reference.
The parallel guide (docs/guides/parallel.md) shows this program.
"""

from __future__ import annotations

import importlib
import json
import os
import re
import sys
import traceback
from typing import Any

# jax is imported inside the functions: main() chooses the devices before the first import
# (the test imports this module too, for build() and values())
DEVICES = 4  # over all processes: the global mesh
BATCH = 8  # the batch axis of every distribution, split over the mesh


def build(dist: Any, shift: float) -> dict[str, Any]:
    """The distributions every process builds; ``shift`` makes per-process variants."""
    import jax.numpy as jnp

    loc = jnp.arange(BATCH * 3, dtype=jnp.float32).reshape(BATCH, 3) / 10 + shift
    factor = jnp.linspace(-1.0, 1.0, BATCH * 3, dtype=jnp.float32).reshape(BATCH, 3, 1)
    cov = jnp.eye(3) + factor * jnp.swapaxes(factor, -1, -2)  # one covariance per batch member
    line = jnp.linspace(-1.0, 1.0, BATCH, dtype=jnp.float32)
    return {
        "mvn": dist.MultivariateNormal(loc, covariance_matrix=cov),
        # every leaf has shape (BATCH,): numpyro's mixed-up leaves have matching shapes, so
        # its collectives run and mix them silently instead of failing
        "truncated": dist.TruncatedNormal(
            loc=line + shift, scale=1.5 + line**2, low=line - 2.0, high=line + 3.0
        ),
    }


def values() -> dict[str, Any]:
    """Points at which each distribution's log density is evaluated."""
    import jax.numpy as jnp

    return {
        "mvn": jnp.linspace(-1.0, 2.0, BATCH * 3, dtype=jnp.float32).reshape(BATCH, 3),
        "truncated": jnp.linspace(-0.5, 1.5, BATCH, dtype=jnp.float32),
    }


def named_leaves(tree: Any, prefix: str) -> dict[str, Any]:
    """``{prefix + key path: leaf as numpy}``: numpyro's paths are flat indices."""
    import jax
    import numpy as np

    return {prefix + jax.tree_util.keystr(path): np.asarray(leaf)
            for path, leaf in jax.tree_util.tree_flatten_with_path(tree)[0]}


def shard_shapes(tree: Any) -> Any:
    """Each leaf's per-device shape, in leaf order, as JSON."""
    import jax
    import numpy as np

    return np.asarray(json.dumps([leaf.sharding.shard_shape(leaf.shape)
                                  for leaf in jax.tree.leaves(tree)]))


def run(module: str, cases: list[str]) -> dict[str, Any]:
    import jax
    import numpy as np
    from jax.experimental import multihost_utils

    dist = importlib.import_module(module)
    out: dict[str, Any] = {
        "process_index": np.asarray(jax.process_index()),
        "process_count": np.asarray(jax.process_count()),
    }
    same = build(dist, 0.0)  # identical in every process
    mine = build(dist, float(jax.process_index()))  # different in every process
    points = values()
    for case in cases:
        d = same[case]
        out[f"{case}/fields"] = np.asarray(json.dumps(
            [type(d).__name__, list(type(d).gather_pytree_data_fields())]))
        out.update(named_leaves(d, f"{case}/same"))
        out.update(named_leaves(mine[case], f"{case}/mine"))

        # the collectives of multihost_utils take any pytree, so distributions too
        out.update(named_leaves(multihost_utils.broadcast_one_to_all(mine[case]),
                                f"{case}/broadcast"))
        out.update(named_leaves(multihost_utils.process_allgather(mine[case]),
                                f"{case}/allgather"))
        for name, tree in (("same", d), ("mine", mine[case])):
            try:
                multihost_utils.assert_equal(tree, f"{case} differs between processes")
                out[f"{case}/assert_equal_{name}"] = np.asarray("")
            except AssertionError as error:
                out[f"{case}/assert_equal_{name}"] = np.asarray(str(error)[:200])
        out.update(on_global_mesh(case, d, points[case]))
    return out


def on_global_mesh(case: str, d: Any, x: Any) -> dict[str, Any]:
    """``d``'s log density and gradient with the batch split over the global mesh (4 devices,
    2 per process), as the parallel guide computes them."""
    import jax
    import jax.numpy as jnp
    import numpy as np
    from jax.experimental import multihost_utils
    from jax.sharding import AxisType, NamedSharding
    from jax.sharding import PartitionSpec as P

    # explicit axes, as in the parallel guide (jax.make_mesh's default from jax 0.10 on)
    mesh = jax.make_mesh((DEVICES,), ("data",), axis_types=(AxisType.Explicit,))
    set_mesh = getattr(jax, "set_mesh", None) or jax.sharding.use_mesh  # jax 0.7: use_mesh

    def spec(leaf: Any) -> Any:
        """Split the batch axis over the mesh, replicate everything else."""
        batched = np.ndim(leaf) > 0 and np.shape(leaf)[0] == BATCH
        return P("data") if batched else P()

    try:
        d_global = jax.device_put(d, jax.tree.map(lambda leaf: NamedSharding(mesh, spec(leaf)), d))
        x_global = jax.device_put(x, NamedSharding(mesh, spec(x)))
    except AssertionError as error:  # jax's check that every process passed the same value
        return {f"{case}/device_put_error": np.asarray(str(error)[:500])}
    lp = jax.jit(lambda d, x: d.log_prob(x),
                 out_shardings=NamedSharding(mesh, P("data")))(d_global, x_global)
    # numpyro's densities are not written for explicit sharding (jax 0.12 raises
    # ShardingTypeError in their derivatives there): the gradient is taken under auto_axes
    value_and_grad = jax.sharding.auto_axes(
        jax.value_and_grad(lambda d, x: jnp.sum(d.log_prob(x))),
        out_sharding=(P(), jax.tree.map(spec, d)))
    with set_mesh(mesh):
        total, grad = jax.jit(value_and_grad)(d_global, x_global)
    assert type(grad) is type(d), type(grad)  # the gradient is a distribution of cotangents
    return {
        f"{case}/shard_shapes": shard_shapes(d_global),
        f"{case}/grad_shard_shapes": shard_shapes(grad),
        f"{case}/log_prob": multihost_utils.process_allgather(lp, tiled=True),
        f"{case}/total": multihost_utils.process_allgather(total, tiled=True),
        **named_leaves(multihost_utils.process_allgather(grad, tiled=True), f"{case}/grad"),
    }


def main(argv: list[str]) -> None:
    process_id, num_processes, port = int(argv[1]), int(argv[2]), int(argv[3])
    module, path, cases = argv[4], argv[5], argv[6:] or ["mvn", "truncated"]
    # This process's devices, before jax is imported: drop a device count inherited from the
    # parent (the test suite asks for 4) and ask for this process's share of the mesh.
    os.environ["XLA_FLAGS"] = re.sub(
        r"--xla_force_host_platform_device_count=\S+", "", os.environ.get("XLA_FLAGS", ""))
    import jax
    import numpy as np

    jax.config.update("jax_platforms", "cpu")
    jax.config.update("jax_num_cpu_devices", DEVICES // num_processes)
    if num_processes > 1:
        # CPU collectives between processes (without them: "Multiprocess computations aren't
        # implemented on the CPU backend")
        jax.config.update("jax_cpu_collectives_implementation", "gloo")
        jax.distributed.initialize(f"localhost:{port}", num_processes=num_processes,
                                   process_id=process_id, initialization_timeout=240)
    assert jax.device_count() == DEVICES and jax.process_count() == num_processes
    try:
        out = run(module, cases)
    except Exception:
        np.savez(path, error=np.asarray(traceback.format_exc()))
        traceback.print_exc()
        sys.stderr.flush()
        # at once: a clean exit would wait for the other process, which may be stuck in a
        # collective this one never joined
        os._exit(1)
    np.savez(path, **out)
    if num_processes > 1:
        jax.distributed.shutdown()


if __name__ == "__main__":
    main(sys.argv)
