"""Comparisons with numpyro itself: the same numbers as numpyro for the same parameters
(`check_upstream`), and after a `tree_map` update the same lazy values as numpyro's class
rebuilt from the same leaves (`check_tree_map`). Hypothesis-free.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, cast

import jax
import jax.numpy as jnp
import numpyro.distributions as nd
from numpyro.distributions import constraints as C  # noqa: N812 - constraint namespace
from numpyro.distributions.transforms import biject_to

from stabledist._src.lazy import lazy_names
from stabledist.testing._compare import (
    COVERAGE,
    _assert_close,
    _fail,
    _outcome,
    destabilize,
    valid_value,
)

__all__ = ["check_tree_map", "check_upstream", "numpyro_rebuild", "perturb"]


def check_upstream(d: Any, upstream: Any | None = None, key: jax.Array | None = None) -> None:
    """Check that ``d``'s values are numpyro's for the same parameters and key.

    Every lazy value, ``mean``, ``variance``, ``entropy``, ``sample``, ``log_prob`` and
    ``cdf`` of ``d`` equal (exactly) upstream's for the same parameters and key."""
    key = jax.random.PRNGKey(2) if key is None else key
    upstream = destabilize(d) if upstream is None else upstream
    value = valid_value(upstream, key)
    probes: dict[str, Callable[[Any], Any]] = {
        "sample": lambda x: x.sample(key),
        "mean": lambda x: x.mean,
        "variance": lambda x: x.variance,
        "entropy": lambda x: x.entropy(),
    }
    if value is not None:
        probes["log_prob"] = lambda x: x.log_prob(value)
        probes["cdf"] = lambda x: x.cdf(value)
    for n in lazy_names(upstream):
        probes[f".{n}"] = lambda x, n=n: getattr(x, n)
    for label, probe in probes.items():
        ours, theirs = _outcome(lambda p=probe: p(d)), _outcome(lambda p=probe: p(upstream))
        if ours[0] != theirs[0] or (ours[0] == "error" and ours[1] != theirs[1]):
            raise _fail("upstream", d, f"{label}: {ours} but upstream {theirs}")
        if ours[0] == "ok":
            if isinstance(theirs[1], nd.Distribution):
                _assert_close("upstream", d, label, jax.tree_util.tree_leaves(ours[1]),
                              jax.tree_util.tree_leaves(theirs[1]), exact=True)
            else:
                _assert_close("upstream", d, label, ours[1], theirs[1], exact=True)
    COVERAGE.record("upstream", d)


def _owner(root: Any, path: tuple[Any, ...]) -> Any:
    """The object holding the leaf at ``path`` (by attribute name, index or key)."""
    obj = root
    for k in path[:-1]:
        if isinstance(k, jax.tree_util.GetAttrKey):
            obj = getattr(obj, k.name)
        elif isinstance(k, jax.tree_util.SequenceKey):
            obj = obj[k.idx]
        elif isinstance(k, jax.tree_util.DictKey):
            obj = obj[k.key]
        else:
            return None
    return obj


def perturb(d: Any, step: float = 0.125) -> Any:
    """``tree_map`` update of ``d`` that stays in every parameter's support: each floating
    leaf named by its owner's ``arg_constraints`` (not dependent) moves by ``step`` in the
    unconstrained space, ``biject_to(c)(biject_to(c).inv(x) + step)``; other leaves are kept."""

    def update(path: tuple[Any, ...], x: Any) -> Any:
        if not path or not isinstance(path[-1], jax.tree_util.GetAttrKey):
            return x
        owner = _owner(d, path)
        constraints = getattr(type(owner), "arg_constraints", {}) if owner is not None else {}
        c = constraints.get(path[-1].name)
        if (c is None or C.is_dependent(c) or c.is_discrete
                or not jnp.issubdtype(jnp.result_type(x), jnp.floating)):
            return x
        try:
            t = biject_to(c)
            y = t(t.inv(x) + step)
        except (NotImplementedError, TypeError, ValueError):
            return x
        if jnp.shape(y) != jnp.shape(x) or not bool(jnp.all(jnp.isfinite(y))):
            return x
        return jnp.asarray(y, dtype=jnp.result_type(x))

    return jax.tree_util.tree_map_with_path(update, d)


def numpyro_rebuild(new: Any, template: Any) -> Any:
    """numpyro's ``tree_unflatten`` of ``template``'s class, with ``template``'s aux data and,
    for each of numpyro's declared data fields, the value ``new`` holds under that name
    (nested distributions rebuilt the same way). Fields are matched by name, not position:
    numpyro orders them by set iteration, which follows ``PYTHONHASHSEED``."""
    if isinstance(template, nd.Distribution) and isinstance(new, nd.Distribution):
        cls = type(template)
        data, aux = template.tree_flatten()
        names = cls.gather_pytree_data_fields()
        params = tuple(None if t is None else numpyro_rebuild(vars(new).get(n), t)
                       for n, t in zip(names, data))
        return cls.tree_unflatten(aux, params)
    if type(template) in (list, tuple) and type(new) is type(template):
        items, templates = cast(Sequence[Any], new), cast(Sequence[Any], template)
        if len(items) == len(templates):
            return type(template)(numpyro_rebuild(a, b) for a, b in zip(items, templates))
    return new


def check_tree_map(d: Any, upstream: Any | None = None, step: float = 0.125) -> None:
    """Check that no lazy value survives a `tree_map` update of ``d``'s leaves.

    After a `tree_map` update (`perturb`), every lazy value, ``mean`` and ``variance`` of
    the new instance equal (to a small tolerance) those of numpyro's class rebuilt by
    ``tree_unflatten`` from the very same leaves: no lazy value survives from the old leaves.

    ``upstream`` is the numpyro instance with ``d``'s parameters (default: ``d``'s numpyro
    twin): `numpyro_rebuild` unflattens its class with the new instance's fields.
    """
    upstream = destabilize(d) if upstream is None else upstream
    new = perturb(d, step)
    theirs = numpyro_rebuild(new, upstream)
    probes: dict[str, Callable[[Any], Any]] = {
        "mean": lambda x: x.mean, "variance": lambda x: x.variance}
    for n in lazy_names(theirs):
        probes[f".{n}"] = lambda x, n=n: getattr(x, n)
    for label, probe in probes.items():
        ours, want = _outcome(lambda p=probe: p(new)), _outcome(lambda p=probe: p(theirs))
        if want[0] == "error":  # numpyro's own unflatten cannot give it: nothing to compare
            continue
        if ours[0] != "ok":
            raise _fail("tree_map", d, f"{label} after tree_map: {ours}, numpyro gives a value")
        if isinstance(want[1], nd.Distribution):
            _assert_close("tree_map", d, f"{label} after tree_map",
                          jax.tree_util.tree_leaves(ours[1]),
                          jax.tree_util.tree_leaves(want[1]), exact=False)
        else:
            _assert_close("tree_map", d, f"{label} after tree_map", ours[1], want[1],
                          exact=False)
    COVERAGE.record("tree_map", d)
