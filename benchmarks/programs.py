"""The project's programs that `stabledist.benchmark.model` runs in fresh processes, written
once against ``stabledist as dist`` as a user writes theirs (numpyro's processes see
``numpyro.distributions`` under that name).

* `reads_lazy`: global priors (a ``MultivariateNormal`` and a two-sided ``TruncatedNormal``)
  whose ``precision_matrix`` and normalizer the model reads ``reads`` times
  (`reads_lazy_density`: its log density at `reads_lazy_point`, jitted first thing in a fresh
  process).
* `sites`: ``n`` sample sites of ``Normal``, two-sided ``TruncatedNormal`` and
  ``MultivariateNormal``, half of them observed: what a first ``jit`` of a big model pays.
"""

from __future__ import annotations

import functools
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
import numpyro
from numpyro.infer.util import log_density

import stabledist as dist


@functools.cache
def _priors(dim: int) -> tuple[Any, Any]:
    """The global priors, built once and eagerly (even when first asked inside a trace)."""
    a = np.random.default_rng(3).standard_normal((dim, dim)).astype(np.float32)
    with jax.ensure_compile_time_eval():
        return (dist.MultivariateNormal(jnp.zeros(dim), covariance_matrix=a @ a.T / dim
                                        + np.eye(dim, dtype=np.float32)),
                dist.TruncatedNormal(0.0, 1.0, low=-1.0, high=2.0))


def reads_lazy(y: Any, reads: int) -> None:
    mvn, tn = _priors(y.shape[1])
    z = numpyro.sample("z", mvn)
    for k in range(reads):
        r = y[k] - z
        numpyro.factor(f"q{k}", -0.5 * r @ (mvn.precision_matrix @ r))
        numpyro.sample(f"t{k}", tn, obs=0.1 * jnp.tanh(y[k, 0] - z[0]))


def reads_lazy_data(dim: int, reads: int) -> np.ndarray:
    """`reads_lazy`'s observations (arguments pickle to the processes as NumPy arrays)."""
    return np.random.default_rng(4).standard_normal((reads, dim)).astype(np.float32)


def reads_lazy_density(values: dict[str, Any], y: Any, reads: int) -> Any:
    """`reads_lazy`'s log density at ``values``: its trace is the model's first in the process."""
    return log_density(reads_lazy, (y, reads), {}, values)[0]


def reads_lazy_point(dim: int) -> dict[str, np.ndarray]:
    """A point of `reads_lazy`'s one latent site (NumPy: it pickles)."""
    return {"z": np.random.default_rng(5).standard_normal(dim).astype(np.float32)}


def sites(n: int) -> None:
    cov = np.array([[1.0, 0.3], [0.3, 1.0]], np.float32)
    for i in range(n):
        obs = 0.5 if i % 2 else None
        if i % 3 == 0:
            numpyro.sample(f"s{i}", dist.Normal(0.0, 1.0), obs=obs)
        elif i % 3 == 1:
            numpyro.sample(f"s{i}", dist.TruncatedNormal(0.0, 1.0, low=-1.0, high=2.0), obs=obs)
        else:
            numpyro.sample(f"s{i}", dist.MultivariateNormal(np.zeros(2, np.float32), cov),
                           obs=None if obs is None else np.full(2, obs, np.float32))


def sites_density(values: dict[str, Any], n: int) -> Any:
    """`sites`' log density at ``values`` (`sites_point`): jitted first thing in a fresh
    process, its trace is the first trace of the model there, as a user's first ``jit``."""
    return log_density(sites, (n,), {}, values)[0]


def sites_point(n: int) -> dict[str, np.ndarray]:
    """A point of `sites`' latent sites (the even ones), as NumPy arrays (they pickle)."""
    return {f"s{i}": np.full((2,) if i % 3 == 2 else (), 0.5, np.float32)
            for i in range(0, n, 2)}
