"""The project's program that `stabledist.benchmark.function` runs in fresh processes, written
once against ``stabledist as dist`` as a user writes theirs (numpyro's processes see
``numpyro.distributions`` under that name): `sites`, ``n`` sample sites of ``Normal``, two-sided
``TruncatedNormal`` and ``MultivariateNormal``, half of them observed, what a first ``jit`` of a
big model pays. (A model reading global priors' lazy values is the guide's example,
docs/guides/benchmark.md, run by the same tool.)
"""

from __future__ import annotations

from typing import Any

import numpy as np
import numpyro
from numpyro.infer.util import log_density

import stabledist as dist


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
