"""Pickles written by earlier stabledist versions load, whatever the package's modules are now.

``data/pickles-0.1.0.pkl`` was written by stabledist 0.1.0 at commit 6de18cd, before its core
modules became private: a dict of distributions (NumPy leaves, so the file does not depend on
jax's own pickle format), each pickled as ``stabledist.fork._from_source(<numpyro class>)``
plus its state. New pickles name ``stabledist._from_source``, a name of the package itself,
which no later move of modules can break.
"""

from __future__ import annotations

import pickle
from pathlib import Path

import numpy as np
import numpyro.distributions as nd
import pytest

import stabledist as sd

DATA = Path(__file__).resolve().parent / "data" / "pickles-0.1.0.pkl"
COV = np.array([[2.0, 0.3], [0.3, 1.0]], np.float32)


def expected(m):
    """The distributions the file holds, built with ``m`` (stabledist or numpyro)."""
    return {
        "Normal": m.Normal(np.float32(0.5), np.float32(2.0)),
        "MultivariateNormal": m.MultivariateNormal(np.zeros(2, np.float32),
                                                   covariance_matrix=COV),
        "TruncatedNormal": m.TruncatedNormal(np.float32(0.0), np.float32(1.0),
                                             low=np.float32(-0.5), high=np.float32(1.5)),
        "Independent": m.Normal(np.zeros(3, np.float32), np.ones(3, np.float32)).to_event(1),
        "Wishart": m.Wishart(np.float32(4.0), scale_matrix=COV),
    }


def test_the_fixture_names_the_old_module() -> None:
    assert b"stabledist.fork" in DATA.read_bytes()


@pytest.mark.parametrize("name", sorted(expected(nd)))
def test_pickles_of_0_1_0_load(name: str) -> None:
    loaded = pickle.loads(DATA.read_bytes())[name]
    assert type(loaded) is type(expected(sd)[name])
    assert sd.is_stable(loaded)
    theirs = expected(nd)[name]
    x = theirs.sample(np.array([0, 1], np.uint32))
    np.testing.assert_array_equal(loaded.log_prob(x), theirs.log_prob(x))
    # the file's leaves went through tree_map: a given matrix is recomputed from its factor
    np.testing.assert_allclose(loaded.mean, theirs.mean, rtol=1e-6)


def test_new_pickles_name_the_package_not_a_module() -> None:
    data = pickle.dumps(expected(sd))
    assert b"stabledist.fork" not in data and b"stabledist._src" not in data
    assert b"_from_source" in data
    back = pickle.loads(data)
    for name, d in expected(nd).items():
        np.testing.assert_allclose(back[name].mean, d.mean, rtol=1e-6)
