"""Checkpoints of training states that hold distributions, saved and restored with orbax in two
processes with different ``PYTHONHASHSEED``.

The state is an optax Adam state (and the parameters it trains) over a dict holding a
``MultivariateNormal`` and a ``Normal``, after a few steps, so every leaf has its own value.
orbax names each leaf by its key path: a stable distribution's leaves are ``.loc``,
``.scale``, ... in declaration order, so the state restored in the second process is the state
saved by the first. numpyro registers its distributions without key paths, and its field order
comes from a ``set`` of names, which follows the hash seed: orbax can only match leaves by
position (``0``, ``1``), so in a process whose order differs the values land in the wrong
fields (a ``Normal``'s ``loc`` and ``scale`` swapped, silently: they have the same shape).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

pytest.importorskip(
    "orbax.checkpoint",
    reason="orbax-checkpoint is not installed (an optional test extra: pip install "
           "orbax-checkpoint)",
)
pytest.importorskip("optax", reason="optax is not installed")

pytestmark = pytest.mark.integration

_SCRIPT = '''
import importlib, json, sys, warnings
warnings.simplefilter("ignore")
import jax, jax.numpy as jnp, numpy as np, optax

mode, module = sys.argv[1], sys.argv[2]
dist = importlib.import_module(module)
FIELDS = {"mvn": ("loc", "scale_tril"), "normal": ("loc", "scale")}

if mode == "order":  # the leaf order of the distributions' pytrees in this process
    d = {"mvn": dist.MultivariateNormal(jnp.zeros(2), scale_tril=jnp.eye(2)),
         "normal": dist.Normal(jnp.zeros(3), jnp.ones(3))}
    order = {}
    for name, node in d.items():
        leaves = jax.tree.leaves(node)
        order[name] = [next(f for f in FIELDS[name] if getattr(node, f) is leaf)
                       for leaf in leaves]
    print(json.dumps(order))
    sys.exit()

import orbax.checkpoint as ocp

def initial():
    params = {"mvn": dist.MultivariateNormal(jnp.array([0.5, -0.5]),
                                             scale_tril=jnp.array([[1.0, 0.0], [0.3, 2.0]])),
              "normal": dist.Normal(jnp.array([0.1, 0.2, 0.3]), jnp.array([1.5, 2.5, 3.5]))}
    opt = optax.adam(0.05)
    return {"params": params, "opt": opt.init(params)}, opt

def named(state):  # every value by its field name: independent of the leaf order
    out = {}
    for part, tree in (("params", state["params"]), ("mu", state["opt"][0].mu),
                       ("nu", state["opt"][0].nu)):
        for name, fields in FIELDS.items():
            for field in fields:
                out[f"{part}/{name}/{field}"] = np.asarray(getattr(tree[name], field))
    out["count"] = np.asarray(state["opt"][0].count)
    return out

path = sys.argv[3]
state, opt = initial()
if mode == "save":
    x, y = jnp.array([0.0, 1.0, 2.0]), jnp.array([[0.2, 0.1], [1.0, -1.0]])
    def loss(p):
        return -(p["normal"].log_prob(x).sum() + p["mvn"].log_prob(y).sum())
    params, opt_state = state["params"], state["opt"]
    for _ in range(3):
        updates, opt_state = opt.update(jax.grad(loss)(params), opt_state, params)
        params = optax.apply_updates(params, updates)
    state = {"params": params, "opt": opt_state}
    checkpointer = ocp.StandardCheckpointer()
    checkpointer.save(path + "/ckpt", state)
    checkpointer.wait_until_finished()
    np.savez(path + "/saved.npz", **named(state))
    print("saved")
else:
    checkpointer = ocp.StandardCheckpointer()
    try:
        restored = checkpointer.restore(path + "/ckpt", state)
    except ValueError as error:  # orbax refused (leaf shapes do not match the target)
        restored = None
        outcome = f"restore failed: {str(error)[:200]}"
    if restored is not None:
        assert type(restored["params"]["normal"]) is type(state["params"]["normal"])
        np.savez(path + "/restored.npz", **named(restored))
        outcome = "restored"
    checkpointer.close()
    print(outcome)
'''


def _run(tmp_path: Path, seed: int, *args: str) -> str:
    script = tmp_path / "checkpoint_script.py"
    if not script.exists():
        script.write_text(_SCRIPT)
    env = {**os.environ, "PYTHONHASHSEED": str(seed)}
    result = subprocess.run([sys.executable, str(script), *args], capture_output=True,
                            text=True, env=env, timeout=600)
    assert result.returncode == 0, result.stderr[-3000:]
    return result.stdout.strip().splitlines()[-1]


@pytest.fixture(scope="module")
def seeds(tmp_path_factory: pytest.TempPathFactory) -> tuple[int, int]:
    """Two hash seeds for which numpyro's leaf order of ``Normal`` differs and that of
    ``MultivariateNormal`` does not (numpyro's pytree fields come from a set of names, ordered
    by the strings' hashes): its restore then runs, and puts values in the wrong fields."""
    tmp_path = tmp_path_factory.mktemp("order")
    first = json.loads(_run(tmp_path, 0, "order", "numpyro.distributions"))
    for seed in range(1, 16):
        order = json.loads(_run(tmp_path, seed, "order", "numpyro.distributions"))
        if order["normal"] != first["normal"] and order["mvn"] == first["mvn"]:
            return 0, seed
    pytest.fail("no hash seed in 1..15 gave numpyro a different Normal leaf order than 0")


def _same(a: dict[str, np.ndarray], b: dict[str, np.ndarray]) -> bool:
    return a.keys() == b.keys() and all(
        a[k].dtype == b[k].dtype and a[k].tobytes() == b[k].tobytes() for k in a)


def test_stable_state_restores_in_another_process(tmp_path: Path, seeds: tuple[int, int]) -> None:
    save, restore = seeds
    assert _run(tmp_path, save, "save", "stabledist", str(tmp_path)) == "saved"
    assert _run(tmp_path, restore, "restore", "stabledist", str(tmp_path)) == "restored"
    saved, restored = np.load(tmp_path / "saved.npz"), np.load(tmp_path / "restored.npz")
    assert _same(dict(saved), dict(restored))
    assert saved["count"] == 3


def test_numpyro_state_restores_wrongly_where_its_order_differs(
        tmp_path: Path, seeds: tuple[int, int]) -> None:
    """The contrast: the same program with numpyro, whose order differs between the seeds."""
    save, restore = seeds
    orders = {_run(tmp_path, s, "order", "numpyro.distributions") for s in seeds}
    assert len(orders) == 2
    assert _run(tmp_path, save, "save", "numpyro.distributions", str(tmp_path)) == "saved"
    outcome = _run(tmp_path, restore, "restore", "numpyro.distributions", str(tmp_path))
    assert outcome == "restored"  # orbax matched the leaves by position: nothing complains
    saved, restored = np.load(tmp_path / "saved.npz"), np.load(tmp_path / "restored.npz")
    assert not _same(dict(saved), dict(restored))
    # the Normal's loc and scale trade places: same shapes, so nothing complains
    np.testing.assert_array_equal(restored["params/normal/loc"], saved["params/normal/scale"])
    np.testing.assert_array_equal(restored["params/normal/scale"], saved["params/normal/loc"])
