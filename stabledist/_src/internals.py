"""Opt-in: numpyro's own code builds stable distributions too.

numpyro's autoguides (``get_posterior``, ``get_base_dist``), reparametrizers, ``Predictive``
and factory functions build distributions from ``numpyro.distributions`` classes, so a program
that mixes them with stabledist instances meets both kinds (a ``lax.scan`` carry or a
``tree_map`` over both then fails on the different treedefs). With the switch on, constructing
any numpyro distribution class builds its stable subclass instead, through numpyro's own
construction hook (``numpyro.distributions.distribution.COERCIONS``), so nothing is patched.
Results are the same objects numpyro would build, but stable: ``isinstance`` against numpyro's
classes still holds, and the numbers are numpyro's own.

The switch is off by default; turn it on for a block (`stable_internals`, per thread and per
asyncio task, as a context variable) or for the whole process (`use_stable_internals`).
"""

from __future__ import annotations

import contextlib
import contextvars
import threading
from collections.abc import Iterator
from typing import Any

from numpyro.distributions import distribution as _numpyro_distribution

from stabledist._src.mirrors import stable_class
from stabledist._src.records import is_stable_class

__all__ = ["stable_internals", "stable_internals_enabled", "use_stable_internals"]

_block: contextvars.ContextVar[bool | None] = contextvars.ContextVar(
    "stabledist_stable_internals", default=None
)
_process_wide = False
_install_lock = threading.Lock()


def _coerce(cls: type, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
    """numpyro's coercion hook: build the stable subclass when the switch is on."""
    if is_stable_class(cls) or not stable_internals_enabled():
        return None  # numpyro goes on with its own construction
    return stable_class(cls)(*args, **kwargs)


def _install() -> None:
    """Put the hook in numpyro's list once, on first use (it costs nothing until then)."""
    with _install_lock:
        if _coerce not in _numpyro_distribution.COERCIONS:
            _numpyro_distribution.COERCIONS.append(_coerce)


def stable_internals_enabled() -> bool:
    """Whether numpyro's constructors build stable distributions here and now."""
    block = _block.get()
    return _process_wide if block is None else block


@contextlib.contextmanager
def stable_internals(enabled: bool = True) -> Iterator[None]:
    """Make numpyro's own code build stable distributions within the block.

    With ``enabled=False``, numpyro's own code builds numpyro's classes within the block, even
    where the process-wide switch (`use_stable_internals`) is on.

    ```python
    import stabledist
    from numpyro.infer.autoguide import AutoMultivariateNormal

    with stabledist.stable_internals():
        posterior = guide.get_posterior(params)   # a stabledist.MultivariateNormal
    ```
    """
    _install()
    token = _block.set(enabled)
    try:
        yield
    finally:
        _block.reset(token)


def use_stable_internals(enabled: bool = True) -> None:
    """Turn stable internals on (or off) for the whole process, every thread.

    A `stable_internals` block still decides inside it."""
    global _process_wide
    _install()
    _process_wide = enabled
