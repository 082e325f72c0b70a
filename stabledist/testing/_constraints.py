"""Values that satisfy a numpyro constraint, through numpyro's public API only.

A continuous constraint's value is `biject_to(constraint)` of a moderate unconstrained draw
(entries in `[-1, 1]`): positive definite matrices from Cholesky factors with diagonal in
`[e^-1, e]`, simplices from stick-breaking, ordered vectors from cumulative exponentials, and so
on - well-conditioned by construction, and whatever numpyro adds to `biject_to` is drawn the same
way. Constraints without a bijection are recognised by identity with numpyro's public constraint
objects, or by public attributes (`is_discrete`, `lower_bound`, `upper_bound`,
`base_constraint`), never by numpyro's private constraint classes; `NO_BIJECTION` lists them.

Hypothesis-free: the random source is a pair of callables, so the hypothesis strategies
(`stabledist.testing.specs`) and a plain `numpy.random.Generator` share this code.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
from numpyro.distributions import constraints as C  # noqa: N812 - constraint namespace
from numpyro.distributions.transforms import biject_to

__all__ = ["NO_BIJECTION", "constrained_value"]

Floats = Callable[[tuple[int, ...], float, float], np.ndarray]
"""``floats(shape, lo, hi)``: an array of floats in ``[lo, hi]``."""
Ints = Callable[[tuple[int, ...], int, int], np.ndarray]
"""``ints(shape, lo, hi)``: an array of integers in ``[lo, hi]``."""

UNCONSTRAINED_BOUND = 1.0
"""Unconstrained draws are in `[-UNCONSTRAINED_BOUND, UNCONSTRAINED_BOUND]`: property tests are
about structure and tracing, not extreme-value numerics."""

NO_BIJECTION: dict[str, str] = {
    "boolean": "discrete: a boolean array",
    "integer_interval / integer_greater_than / nonnegative_integer / positive_integer":
        "discrete: integers from `lower_bound` (to `upper_bound`, or 10 above it)",
    "sphere": "numpyro registers no bijection: a normalised vector with positive entries",
    "positive_definite_circulant_vector": "numpyro registers no bijection: the inverse real FFT "
                                          "of a positive spectrum",
    "dependent": "depends on other parameters: a strategy hint or `params=` gives the value",
}
"""Constraints `constrained_value` does not reach through `biject_to`, and what it does instead
(recognised by the public constraint objects and attributes, not by private classes)."""


def constrained_value(c: Any, batch: tuple[int, ...], n: int, dtype: Any, floats: Floats,
                      ints: Ints) -> np.ndarray:
    """An array in constraint ``c`` with batch shape ``batch`` and event size ``n`` (every
    event dimension has size ``n``), of float ``dtype`` (integers for discrete constraints:
    int64 beside float64 parameters, int32 otherwise).

    Raises `NotImplementedError` for a dependent constraint (its values depend on other
    parameters) and for constraints that neither `biject_to` nor `NO_BIJECTION` covers.
    """
    if C.is_dependent(c):
        raise NotImplementedError(f"no generic values for the dependent constraint {c!r}")
    if c is C.boolean:
        return np.asarray(ints(batch, 0, 1).astype(np.bool_))
    if c.is_discrete:
        lo = getattr(c, "lower_bound", None)
        if lo is None:
            raise NotImplementedError(f"no generic values for constraint {c!r}")
        hi = getattr(c, "upper_bound", None)
        hi = int(lo) + 10 if hi is None else int(hi)
        int_dtype = np.int64 if np.dtype(dtype) == np.float64 else np.int32
        return np.asarray(ints(batch, int(lo), hi), dtype=int_dtype)
    if c is C.sphere:
        v = floats((*batch, n), 0.1, 1.0)
        return (v / np.linalg.norm(v, axis=-1, keepdims=True)).astype(dtype)
    if c is C.positive_definite_circulant_vector:
        spectrum = floats((*batch, n // 2 + 1), 0.5, 3.0)
        return np.fft.irfft(spectrum, n).astype(dtype)
    base = getattr(c, "base_constraint", None)
    if base is not None and (base is C.boolean or base.is_discrete or base is C.sphere):
        k = c.reinterpreted_batch_ndims  # independent(<no bijection>, k)
        return constrained_value(base, (*batch, *(n,) * k), n, dtype, floats, ints)
    shape = (*batch, *(n,) * c.event_dim)
    try:
        t = biject_to(c)
    except NotImplementedError as e:
        raise NotImplementedError(f"no generic values for constraint {c!r}") from e
    u = floats(tuple(t.inverse_shape(shape)), -UNCONSTRAINED_BOUND, UNCONSTRAINED_BOUND)
    # in float64 whatever the target dtype, then rounded once: the same value for float32 and
    # float64 draws of one unconstrained array, computed op by op on small arrays
    with jax.enable_x64(True):
        x = np.asarray(t(jnp.asarray(u, jnp.float64)))
    if x.shape != shape:  # pragma: no cover - a transform changing the event shape
        raise NotImplementedError(f"biject_to({c!r}) gives shape {x.shape}, not {shape}")
    return _polish(c, x).astype(dtype)


def _polish(c: Any, x: np.ndarray) -> np.ndarray:
    """Exact symmetry / unit diagonal after rounding (numpyro's validation checks them to a
    tolerance float32 rounding of a float64 product can exceed)."""
    if c is C.corr_matrix or c is C.positive_definite or c is C.positive_semidefinite:
        x = 0.5 * (x + np.swapaxes(x, -1, -2))
    if c is C.corr_matrix:
        idx = np.arange(x.shape[-1])
        x[..., idx, idx] = 1.0
    return x
