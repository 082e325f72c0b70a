"""``jax.export`` of functions taking and returning stable distributions
(stabledist._src.pytrees.export).

Every catalog example whose static fields can be encoded round-trips through
``export -> serialize -> deserialize -> call`` with the numbers of the direct jitted call, bit
for bit, and with the same tree structure; the others fail at ``serialize()`` with an error
naming the class and the field. The default run takes a subset that covers every kind of aux
value and node (transforms, constraints, lists, hybrid and list fields, arrays in aux data);
the whole catalog, and a second process with another ``PYTHONHASHSEED``, run under
``-m integration``.
"""

from __future__ import annotations

import dataclasses
import json
import os
import re
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any, ClassVar

import jax
import jax.numpy as jnp
import numpy as np
import numpyro.distributions as nd
import pytest
from helpers import BUILDERS

import stabledist
from stabledist._src.pytrees import export as _export
from stabledist._src.pytrees import pytree as _pytree
from stabledist._src.records import records
from stabledist._src.records.records import record_of
from stabledist.testing import catalog

pytest.importorskip("flatbuffers", reason="jax.export serialization needs flatbuffers")

# what jax.export cannot carry: a static field without a portable encoding
UNSERIALIZABLE = {
    "EulerMaruyama": "sde_fn",  # a Python function (the drift and diffusion)
    "CAR[1]": "adj_matrix",  # is_sparse=True: a scipy.sparse matrix
}
# the default run: one example of each kind of aux value and pytree node
SUBSET = (
    "Normal",  # the common case
    "MultivariateNormal",  # matrix parameters
    "MultinomialProbs",  # a jax array in aux data (total_count)
    "ExpandedDistribution",  # OrderedDicts in aux data, a nested distribution
    "Independent",  # a list field, frozen to a tuple
    "MaskedDistribution",  # a hybrid field, static (mask=False)
    "CAR",  # a hybrid field that is a leaf (is_sparse=False)
    "TransformedDistribution",  # numpyro transforms as nodes
    "TwoSidedTruncatedDistribution",  # numpyro constraints with array bounds as nodes
    "MixtureGeneral",  # a list of distributions
    "HurdleNegativeBinomial2",  # an unset field (absent names in aux data)
    "LKJCholesky",  # str and int in aux data
)
ENCODABLE = [(i, b) for i, b in BUILDERS if i not in UNSERIALIZABLE]


def log_prob(d: Any, x: Any) -> Any:
    return d.log_prob(x)


def value_for(example_id: str, d: Any) -> Any:
    name = re.match(r"\w+", example_id).group(0)  # type: ignore[union-attr]
    if name in catalog.LOG_PROB_VALUES:
        return catalog.LOG_PROB_VALUES[name]()
    try:  # a value in the support: compiled, as one program (eagerly, each operation of the
        # sampler compiled on its own was 39% of the whole catalog's run)
        return jax.jit(lambda e: e.sample(jax.random.key(0)))(d)
    except Exception:  # a sampler that needs concrete parameters (a multinomial's total_count)
        return d.sample(jax.random.key(0))


def assert_bits(got: Any, want: Any) -> None:
    assert jax.tree.structure(got) == jax.tree.structure(want)
    for a, b in zip(jax.tree.leaves(got), jax.tree.leaves(want), strict=True):
        a, b = np.asarray(a), np.asarray(b)
        assert a.dtype == b.dtype and a.shape == b.shape
        assert a.tobytes() == b.tobytes(), (a, b)


def round_trip(f: Any, *args: Any) -> jax.export.Exported:
    exported = jax.export.export(jax.jit(f))(*args)
    back = jax.export.deserialize(exported.serialize())
    assert back.in_tree == exported.in_tree
    assert back.out_tree == exported.out_tree
    return back


def log_prob_and_itself(d: Any, x: Any) -> Any:
    return d.log_prob(x), d


def check_example(example_id: str, build: Any) -> None:
    """A function of the distribution returning its log-density and the distribution itself
    (its out_tree is deserialized and unflattened): one program, not one for each (half the
    compiles of the catalog's run)."""
    d = build(stabledist)
    x = value_for(example_id, d)
    got = round_trip(log_prob_and_itself, d, x).call(d, x)
    assert type(got[1]) is type(d)
    # jit makes Python-number leaves arrays
    assert_bits(got, jax.jit(log_prob_and_itself)(d, x))


@pytest.mark.parametrize(("example_id", "build"),
                         [pytest.param(i, b, id=i) for i, b in ENCODABLE if i in SUBSET])
def test_round_trip_subset(example_id: str, build: Any) -> None:
    check_example(example_id, build)


def test_the_subset_is_in_the_catalog() -> None:
    assert set(SUBSET) <= {i for i, _ in ENCODABLE}


@pytest.mark.integration
@pytest.mark.parametrize(("example_id", "build"),
                         [pytest.param(i, b, id=i) for i, b in ENCODABLE if i not in SUBSET])
def test_round_trip_catalog(example_id: str, build: Any) -> None:
    check_example(example_id, build)


def test_function_returning_distributions() -> None:
    def make(loc: Any, scale: Any) -> Any:
        normal = stabledist.Normal(loc, scale)
        return {"normal": normal, "log": stabledist.LogNormal(loc, scale).to_event(1),
                "mask": normal.mask(False)}

    loc, scale = jnp.arange(3.0), jnp.full(3, 2.0)
    got = round_trip(make, loc, scale).call(loc, scale)
    assert_bits(got, jax.jit(make)(loc, scale))
    assert isinstance(got["log"].base_dist, stabledist.TransformedDistribution)


@pytest.mark.parametrize("example_id", sorted(UNSERIALIZABLE))
def test_unencodable_aux_names_class_and_field(example_id: str) -> None:
    d = dict(BUILDERS)[example_id](stabledist)
    exported = jax.export.export(jax.jit(log_prob))(d, value_for(example_id, d))
    with pytest.raises(_export.UnserializableAuxError) as error:
        exported.serialize()
    message = str(error.value)
    assert type(d).__qualname__ in message and repr(UNSERIALIZABLE[example_id]) in message
    assert isinstance(error.value, TypeError)


def test_names_follow_the_mirrored_class() -> None:
    import numpyro.distributions as nd

    assert (_export.serialized_name(stabledist.Normal)
            == "stabledist:numpyro.distributions.continuous.Normal")
    assert (_export.serialized_name(stabledist.Distribution)
            == "stabledist:numpyro.distributions.distribution.Distribution")
    registry = jax._src.export._export.deserialization_registry  # the names jax looks up
    for name in ("Normal", "TransformedDistribution", "MultivariateNormal"):
        source, stable = getattr(nd, name), getattr(stabledist, name)  # (made on first use)
        entry = registry[f"stabledist:{source.__module__}.{source.__qualname__}"]
        assert entry[0] is stable
    assert registry["stabledist:numpyro.distributions.transforms.AffineTransform"][0] is (
        nd.transforms.AffineTransform)


class _Scaled(stabledist.Distribution):
    """A user's subclass of stabledist.Distribution: named by itself."""

    arg_constraints: ClassVar = {"scale": stabledist.constraints.positive}
    pytree_aux_fields = ("tag", "dtype")
    support = stabledist.constraints.real

    def __init__(self, scale: Any, tag: str = "t", validate_args: Any = None) -> None:
        self.scale, self.tag, self.dtype = scale, tag, np.dtype("float32")
        super().__init__(jnp.shape(scale), validate_args=validate_args)

    def log_prob(self, value: Any) -> Any:
        return -jnp.abs(value) / self.scale - jnp.log(2 * self.scale)


def test_user_classes() -> None:
    import numpyro.distributions as nd

    class Shifted(nd.Normal):  # made stable by make_stable: named by the user's class
        pytree_aux_fields = ("shift",)

        def __init__(self, loc: Any, scale: Any, shift: float = 0.5) -> None:
            self.shift = shift
            super().__init__(loc, scale)

    stable = stabledist.make_stable(Shifted)
    assert _export.serialized_name(stable) == f"stabledist:{__name__}.{Shifted.__qualname__}"
    assert _export.serialized_name(_Scaled) == f"stabledist:{__name__}._Scaled"
    x = jnp.linspace(-1.0, 1.0, 3)
    for d in (stable(jnp.zeros(3), jnp.ones(3), shift=0.25), _Scaled(jnp.full(3, 2.0), "x")):
        back = round_trip(log_prob, d, x)
        assert_bits(back.call(d, x), jax.jit(log_prob)(d, x))


def test_aux_encoding_is_canonical_json() -> None:
    d = stabledist.Normal(0.0, 1.0).expand((2, 3))
    for node in (d, d.base_dist):
        _, aux = node.tree_flatten()
        serialize, deserialize = _export._table_codec(type(node), "n")
        data = serialize(aux)
        payload = json.loads(data)
        assert data == json.dumps(payload, sort_keys=True, separators=(",", ":")).encode()
        assert payload["fields"] == [*type(node).gather_pytree_aux_fields(), "<absent>"]
        assert deserialize(data) == aux
    value = (None, True, 3, 1.5, "s", [1, (2,)], {"a": np.dtype("int32")}, np.float32(2.5),
             np.arange(4, dtype=np.int16).reshape(2, 2), jnp.arange(3), np.float32,
             stabledist.constraints.real, _pytree.StaticValue(np.eye(2)))
    back = _export._decode(json.loads(json.dumps(_export._encode(value, ""))))
    assert repr(back[:8]) == repr(value[:8])
    np.testing.assert_array_equal(back[8], value[8])
    assert isinstance(back[9], jax.Array) and back[9].dtype == value[9].dtype
    assert back[10] is np.float32 and back[11] is stabledist.constraints.real
    assert back[12] == value[12]


def test_layout_change_is_a_clear_error(monkeypatch: pytest.MonkeyPatch) -> None:
    d, x = _Scaled(jnp.full(2, 2.0)), jnp.ones(2)
    data = jax.export.export(jax.jit(log_prob))(d, x).serialize()
    record = record_of(_Scaled)
    monkeypatch.setitem(records._RECORDS, _Scaled, dataclasses.replace(record, table=(
        dataclasses.replace(record.table, aux=("renamed", *record.table.aux[1:])))))
    with pytest.raises(ValueError, match=r"_Scaled .* written with the aux fields .*'renamed'"):
        jax.export.deserialize(data)


def _forget(monkeypatch: pytest.MonkeyPatch, name: str) -> None:
    """This process forgets the serialized name ``name``, as one that never defined it."""
    registry = jax._src.export._export.deserialization_registry
    forgetful = type(registry)({k: v for k, v in dict.items(registry) if k != name})
    forgetful.missing = registry.missing  # stabledist's clear error for unknown names
    monkeypatch.setattr(jax._src.export._export, "deserialization_registry", forgetful)


def test_unknown_class_says_which_module_to_import(monkeypatch: pytest.MonkeyPatch) -> None:
    """Bytes naming a class this process has not created (a user's module not imported yet):
    the error names the class and the module to import (JAX's own names only the name)."""
    d, x = _Scaled(jnp.full(2, 2.0)), jnp.ones(2)
    data = jax.export.export(jax.jit(log_prob))(d, x).serialize()
    name = _export.serialized_name(_Scaled)
    _forget(monkeypatch, name)
    with pytest.raises(ValueError, match=rf"`{__name__}._Scaled`.*import {__name__}"):
        jax.export.deserialize(data)


def test_registration_is_guarded() -> None:
    """A second registration of a class, or of a name another class holds, keeps the first."""
    before = dict(jax._src.export._export.serialization_registry)
    _export.register_serialization(stabledist.Normal, record_of(stabledist.Normal))
    _export._register(stabledist.Normal, "other", bytes, bytes)
    _export._register(stabledist.LogNormal, _export.serialized_name(stabledist.Normal), bytes,
                      bytes)
    assert jax._src.export._export.serialization_registry == before


def test_a_class_defined_again_is_exported_by_its_newest_definition() -> None:
    """A notebook cell run again (or a module reloaded) defines a class twice: both
    definitions serialize while alive, and the bytes deserialize as the newest one."""
    namespace: dict[str, Any] = {"stabledist": stabledist}
    classes = []
    for _ in range(2):
        exec("class Redefined(stabledist.Normal):\n    pass", namespace)
        classes.append(namespace["Redefined"])
    old, new = classes
    export = jax.export.export(jax.jit(lambda d: d.log_prob(0.5)))
    for cls in (new, old):
        exported = jax.export.deserialize(export(cls(0.0, 1.0)).serialize())
        assert type(jax.tree.unflatten(exported.in_tree, [0.0, 1.0])[0][0]) is new
        assert_bits(exported.call(new(0.0, 1.0)), stabledist.Normal(0.0, 1.0).log_prob(0.5))


# --- a second process ----------------------------------------------------------------------

_USER_MODULE = '''
import jax.numpy as jnp
import numpyro.distributions as nd
import stabledist

@stabledist.make_stable
class Shifted(nd.Normal):
    pytree_aux_fields = ("shift",)

    def __init__(self, loc, scale, shift=0.5):
        self.shift = shift
        super().__init__(loc, scale)
'''

_SCRIPT = '''
import sys, warnings
import numpy as np, jax, jax.numpy as jnp
warnings.simplefilter("ignore")
sys.path.insert(0, sys.argv[3])
import stabledist
from stabledist.testing import catalog

def cases():
    builders = dict(catalog.all_builders())
    out = {}
    for name in ("Normal", "TransformedDistribution", "TwoSidedTruncatedDistribution",
                 "ExpandedDistribution", "MultinomialProbs"):
        d = builders[name](stabledist)
        out[name] = (d, d.sample(jax.random.key(1)))
    import user_dists
    d = user_dists.Shifted(jnp.zeros(3), jnp.ones(3), shift=0.25)
    out["Shifted"] = (d, jnp.linspace(-1.0, 1.0, 3))
    return out

def log_prob(d, x):
    return d.log_prob(x)

mode, folder = sys.argv[1], sys.argv[2]
if mode == "write":
    for name, (d, x) in cases().items():
        data = jax.export.export(jax.jit(log_prob))(d, x).serialize()
        open(f"{folder}/{name}.bin", "wb").write(data)
        np.save(f"{folder}/{name}.npy", np.asarray(jax.jit(log_prob)(d, x)))
    print("written")
else:
    data = open(f"{folder}/Shifted.bin", "rb").read()
    try:  # before the user's module is imported: its class is unknown
        jax.export.deserialize(data)
        print("UNKNOWN-ACCEPTED")
    except ValueError as error:
        print("unknown:", error)
    for name, (d, x) in cases().items():
        got = np.asarray(jax.export.deserialize(open(f"{folder}/{name}.bin", "rb").read())
                         .call(d, x))
        want = np.load(f"{folder}/{name}.npy")
        assert got.dtype == want.dtype and got.tobytes() == want.tobytes(), (name, got, want)
        print("same", name)
'''


@pytest.mark.integration
def test_second_process_with_another_hash_seed(tmp_path: Path) -> None:
    (tmp_path / "user_dists.py").write_text(textwrap.dedent(_USER_MODULE))
    script = tmp_path / "script.py"
    script.write_text(_SCRIPT)

    def run(mode: str, seed: str) -> str:
        env = {**os.environ, "PYTHONHASHSEED": seed}
        result = subprocess.run([sys.executable, str(script), mode, str(tmp_path), str(tmp_path)],
                                capture_output=True, text=True, env=env, timeout=600)
        assert result.returncode == 0, result.stderr[-3000:]
        return result.stdout

    assert "written" in run("write", "1")
    out = run("read", "2")
    assert "`user_dists.Shifted`" in out and "import user_dists" in out
    assert out.count("same ") == 6, out


def test_a_numpyro_built_distribution_points_to_stabilize() -> None:
    """numpyro's own classes cannot be serialized: the error says how to convert them."""
    import numpyro.distributions as nd

    exported = jax.export.export(jax.jit(log_prob))(nd.Normal(0.0, 1.0), 0.5)
    with pytest.raises(_export.UnserializableAuxError, match=r"stabledist\.stabilize\(d\)"):
        exported.serialize()
    converted = stabledist.stabilize(nd.Normal(0.0, 1.0))
    assert jax.export.export(jax.jit(log_prob))(converted, 0.5).serialize()


class _PlainNormal(nd.Normal):
    """A numpyro-style class of a user's, made stable by `make_stable` where it is exported."""


def test_an_unknown_make_stable_class_says_to_make_it_stable(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """The deserializing process imported the class's module but did not call `make_stable`
    on it: the error says to."""
    stable = stabledist.make_stable(_PlainNormal)
    data = jax.export.export(jax.jit(log_prob))(stable(0.0, 1.0), 0.5).serialize()
    name = _export.serialized_name(stable)
    _forget(monkeypatch, name)
    with pytest.raises(ValueError, match=rf"stabledist\.make_stable\({__name__}\._PlainNormal\)"):
        jax.export.deserialize(data)
