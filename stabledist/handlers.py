"""Effect handlers: numpyro's handlers, with a ``seed`` that never keeps a traced key.

numpyro's `numpyro.handlers.seed` stores the running key on the handler object
(`self.rng_key` is split and reassigned for every sample site). An object that is kept
around (`seeded = seed(model, key)` at module level) and traced more than once -- model
inspection followed by `jax.jit`, `jax.vmap(svi.init)` over a blocked autoguide -- can then
end up holding a tracer from an earlier trace, which is a tracer leak.

`seed` here is a subclass of numpyro's, so `isinstance` checks and numpyro internals
keep working, but no traced key is ever kept on the object:

- `seeded(*args)` runs on a fresh copy of the handler that starts from the handler's key,
  so every call draws the same values and the object can be traced any number of times
  (numpyro 0.22's callable form clones itself the same way);
- `with handler: ...` advances `handler.rng_key` inside the block exactly as numpyro does;
  used eagerly, the handler keeps the advanced key after the block, as numpyro's does, so
  the next block continues the stream (no draw repeats). Inside a trace (`jit`, `vmap`,
  `scan`, ...) the advanced key is a tracer that dies with its trace: there the block hands
  back the key it started from, so every traced call of a function that enters the handler
  draws the same values (numpyro keeps the tracer and raises `UnexpectedTracerError` later);
- a `with handler:` block inside a block of the same handler continues its key, as numpyro
  does, except where that key was traced by a trace the enclosing block is not in (the inner
  block inside `jit`, the outer one outside): then the enclosing block continues from a key
  folded from its own, computed in its own trace, so no traced key outlives its trace and
  still no draw repeats.

Every other public handler of `numpyro.handlers` (`trace`, `condition`, `substitute`, ...) is
re-exported unchanged, so `stabledist.handlers` is a drop-in replacement for it.
"""

from __future__ import annotations

import copy
import functools
from collections.abc import Callable
from types import TracebackType
from typing import Any, TypeAlias, cast

import jax
import jax.numpy as jnp
import numpy as np
import numpyro.handlers as _numpyro_handlers
from jax import random
from jax.core import Tracer
from numpyro.handlers import (
    block,
    collapse,
    condition,
    do,
    infer_config,
    lift,
    mask,
    reparam,
    replay,
    scale,
    scope,
    substitute,
    trace,
    uncondition,
)
from numpyro.util import is_prng_key

from stabledist._src.jax_private import current_trace, in_trace, trace_of

RngSeed: TypeAlias = int | np.integer | np.ndarray | jax.Array | None
"""What `seed` accepts: an int (or 0-d integer array), a PRNG key (typed `jax.random.key` or
legacy uint32 `jax.random.PRNGKey`), or None (the handler then supplies no keys)."""

_SEED_HELP = (
    "an int, a 0-d integer array, a single PRNG key (jax.random.key(...) or a legacy "
    "jax.random.PRNGKey(...), i.e. a uint32 array of shape (2,)), or None"
)


def _describe(value: Any) -> str:
    shape = getattr(value, "shape", None)
    dtype = getattr(value, "dtype", None)
    if shape is not None and dtype is not None:
        return f"{type(value).__name__} of shape {tuple(shape)} and dtype {dtype}"
    text = repr(value)
    return f"{type(value).__name__} {text if len(text) <= 40 else text[:37] + '...'}"


def _to_prng_key(rng_seed: RngSeed) -> jax.Array | None:
    """Turn `rng_seed` into a key (or None) the way numpyro does, with a clear error if it
    cannot be one -- a float seed or a batch of keys is a bug, not something to coerce."""
    if rng_seed is None or is_prng_key(rng_seed):
        return cast("jax.Array | None", rng_seed)
    if isinstance(rng_seed, (int, np.integer)):  # bool included, as in numpyro
        return random.key(rng_seed)
    if isinstance(rng_seed, (np.ndarray, jax.Array)):
        dtype = rng_seed.dtype
        if jnp.issubdtype(dtype, jax.dtypes.prng_key):
            raise TypeError(
                f"seed: rng_seed must be a single PRNG key, got a key array of shape "
                f"{tuple(rng_seed.shape)}; to use several keys, jax.vmap over them."
            )
        is_int = jnp.issubdtype(dtype, jnp.integer) or jnp.issubdtype(dtype, jnp.bool_)
        if rng_seed.shape == () and is_int:
            return random.key(rng_seed)
    raise TypeError(f"seed: rng_seed must be {_SEED_HELP}; got {_describe(rng_seed)}.")


class seed(_numpyro_handlers.seed):  # noqa: N801 -- same name as numpyro's handler
    """Seed the sample sites of `fn` from `rng_seed`, without keeping RNG state between calls.

    Same signature and per-site key splitting as `numpyro.handlers.seed` (so the draws are
    bit-identical to numpyro's), but no traced key is kept on the object: each call of the
    wrapped callable starts from the handler's key, and a `with` block entered eagerly
    advances it as numpyro does, while one entered inside a trace hands back the key it
    started from. That makes a seeded model safe to keep globally and to trace under
    `jax.jit`, `jax.vmap`, `jax.grad` or model inspection any number of times.

    Args:
        fn: Python callable with NumPyro primitives (omit to use as context manager or
            decorator).
        rng_seed: an int, a 0-d integer array, a PRNG key, or None (no keys are supplied).
        hide_types: optional list of site types to skip seeding, e.g. `['plate']`.

    Raises:
        TypeError: `rng_seed` is none of the above (a float, a batch of keys, ...).

    Example:
        ```python
        import jax
        import numpyro
        import stabledist as dist
        from stabledist.handlers import seed

        def model():
            return numpyro.sample("x", dist.Normal(0.0, 1.0))

        seeded = seed(model, rng_seed=0)
        assert jax.jit(seeded)() == seeded()  # no key kept between calls or traces
        ```
    """

    def __init__(
        self,
        fn: Callable | None = None,
        rng_seed: RngSeed = None,
        hide_types: list[str] | None = None,
    ) -> None:
        super().__init__(fn, rng_seed=_to_prng_key(rng_seed), hide_types=hide_types)
        # (key, trace) at entry of the currently open ``with`` blocks of this object,
        # innermost last.
        self._entry_rng_keys: list[tuple[jax.Array | None, Any]] = []

    @property
    def _given_rng_key(self) -> jax.Array | None:
        """The key calls start from: `rng_key` at rest, i.e. as the outermost open `with`
        block of this object found it (a call inside a block starts where it started)."""
        return self._entry_rng_keys[0][0] if self._entry_rng_keys else self.rng_key

    def __enter__(self) -> None:
        # Remember the key and the trace at entry: `__exit__` decides what the key may become.
        self._entry_rng_keys.append((self.rng_key, current_trace()))
        try:
            return super().__enter__()
        except BaseException:
            self._entry_rng_keys.pop()
            raise

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc_value: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        # In a finally: the advanced key may be a tracer of the trace being left.
        try:
            super().__exit__(exc_type, exc_value, traceback)
        finally:
            entry_key, _ = self._entry_rng_keys.pop()
            if not self._entry_rng_keys:
                self.rng_key = _key_at_rest(entry_key, self.rng_key)
            else:  # a block inside a block of this object: the enclosing one continues
                self.rng_key = _continued_key(entry_key, self.rng_key,
                                              self._entry_rng_keys[-1][1])

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        """Run `fn` under a private copy of this handler, so the call's state dies with it."""
        if self.fn is None:
            # Decorator use: ``@seed(rng_seed=0)``.
            if len(args) != 1 or kwargs or not callable(args[0]):
                raise TypeError(
                    "seed: a handler created without fn can only decorate a single callable, "
                    "e.g. `@seed(rng_seed=0)`; to run a model, use `seed(model, rng_seed)(...)`."
                )
            self.fn = args[0]
            functools.update_wrapper(self, self.fn, updated=[])
            return self
        handler = copy.copy(self)
        handler.rng_key = self._given_rng_key
        handler.hide_types = list(self.hide_types)
        handler._entry_rng_keys = []
        with handler:
            return handler.fn(*args, **kwargs)


def _key_at_rest(entry_key: jax.Array | None, key: jax.Array | None) -> jax.Array | None:
    """The key a handler keeps after its outermost ``with`` block, which started from
    ``entry_key`` and ended with ``key``: ``key``, as numpyro keeps it (the next block
    continues the stream), unless ``key`` was traced by a trace the handler does not live in
    (the block ran inside ``jit``): a traced key dies with its trace, so the handler keeps
    ``entry_key`` and every traced call starts from it."""
    if key is None or not isinstance(key, Tracer):
        return key
    home = trace_of(entry_key)  # where the handler's own key lives (eager: the eval trace)
    return key if home is not None and trace_of(key) is home else entry_key


def _continued_key(entry_key: jax.Array | None, key: jax.Array | None,
                   enclosing_trace: Any) -> jax.Array | None:
    """The key an enclosing ``with`` block of a `seed` continues with after an inner block of
    the same object that started from ``entry_key`` and ended with ``key``.

    numpyro's: ``key`` itself, so draws go on where the inner block stopped. But a ``key``
    traced by a trace the enclosing block is not in (the inner block ran inside ``jit``)
    dies with that trace; then the enclosing block continues from ``fold_in(entry_key, 1)``,
    computed in the enclosing block's own trace: a stream that repeats neither the inner
    block's draws (the ``split`` chain of ``entry_key``) nor earlier ones. (On a JAX where
    stabledist cannot tell traces apart, it continues from ``entry_key``.)"""
    if key is None or entry_key is None or not isinstance(key, Tracer):
        return key
    owner = trace_of(key)
    if owner is not None and owner is enclosing_trace:
        return key
    block = in_trace(enclosing_trace)
    if owner is None or block is None:
        return entry_key
    with block:
        return random.fold_in(entry_key, 1)


# numpyro's other handlers, unchanged. Imported by name (not copied in a loop) so that type
# checkers and the API reference see them; tests/test_handlers.py checks that the list is
# numpyro.handlers.__all__ without `seed`, so a new numpyro handler is not missed.
__all__ = [
    "seed",
    "block",
    "collapse",
    "condition",
    "do",
    "infer_config",
    "lift",
    "mask",
    "reparam",
    "replay",
    "scale",
    "scope",
    "substitute",
    "trace",
    "uncondition",
]


def __getattr__(name: str) -> Any:
    """Fall back to `numpyro.handlers` for anything else (e.g. `Messenger`), so this
    module is a drop-in replacement for it."""
    try:
        return getattr(_numpyro_handlers, name)
    except AttributeError:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}") from None
