"""The README's first example passes with stabledist and fails with numpyro as it says.

The first ```python block of README.md is run once as written and once with its
``import stabledist as dist`` line replaced by ``import numpyro.distributions as dist``. Each
line ending in a ``# numpyro 0.22: ...`` comment is an ``assert`` the README says numpyro fails:
the numpyro run must stop with an AssertionError on exactly that line (the marked lines before
it are turned into plain expressions, so every documented failure is checked, not only the
first). tests/test_docs_examples.py also runs the block, in a fresh process (integration).
"""

from __future__ import annotations

import re
import traceback
from pathlib import Path

import jax
import jax.numpy as jnp
import pytest

README = Path(__file__).resolve().parent.parent / "README.md"
STABLE_IMPORT = "import stabledist as dist"
NUMPYRO_IMPORT = "import numpyro.distributions as dist"
MARK = "# numpyro 0.22:"
BLOCK = re.compile(r"^```python\n(.*?)^```$", re.DOTALL | re.MULTILINE)


def first_block() -> list[str]:
    match = BLOCK.search(README.read_text(encoding="utf-8"))
    assert match, "README.md has no ```python block"
    return match[1].splitlines()


def run(lines: list[str]) -> dict:
    """Execute ``lines`` in a fresh namespace and return it (a failure keeps it on the error)."""
    namespace: dict = {"__name__": "__readme__"}
    try:
        exec(compile("\n".join(lines) + "\n", "README-block", "exec"), namespace)
    except AssertionError as error:
        error.namespace = namespace  # type: ignore[attr-defined]
        raise
    return namespace


def with_numpyro(lines: list[str]) -> list[str]:
    imports = [i for i, line in enumerate(lines) if line.startswith(STABLE_IMPORT)]
    assert len(imports) == 1, f"the first README block must have one `{STABLE_IMPORT}` line"
    out = list(lines)
    out[imports[0]] = NUMPYRO_IMPORT
    return out


def marked_lines() -> list[int]:
    """0-based indices of the asserts the README says numpyro fails."""
    lines = first_block()
    marked = [i for i, line in enumerate(lines) if MARK in line]
    assert marked, f"the first README block marks no line with {MARK!r}"
    for i in marked:
        assert lines[i].startswith("assert "), f"marked line is not a one-line assert: {lines[i]}"
    return marked


def test_first_example_passes_with_stabledist() -> None:
    namespace = run(first_block())
    groups, y = namespace["groups"], namespace["y"]
    # the batch of posteriors is the distribution built from the stacked parameters
    stacked = namespace["dist"].Normal(groups.loc, groups.scale)
    assert groups.batch_shape == stacked.batch_shape == y.shape[:1]
    assert jnp.array_equal(groups.mean, stacked.mean)
    assert namespace["draws"].shape == (1000, *y.shape[:1])


@pytest.mark.parametrize("k", range(len(marked_lines())))
def test_first_example_fails_with_numpyro_where_documented(k: int) -> None:
    marked = marked_lines()
    lines = with_numpyro(first_block())
    for i in marked[:k]:  # let the run reach the k-th documented failure
        lines[i] = "_ = " + lines[i].removeprefix("assert ")
    with pytest.raises(AssertionError) as info:
        run(lines)
    failed_at = traceback.extract_tb(info.value.__traceback__)[-1]
    assert failed_at.filename == "README-block"
    assert failed_at.lineno == marked[k] + 1, (
        f"numpyro failed on block line {failed_at.lineno}, the README marks {marked[k] + 1}"
    )

    # ... and for the reason the README gives.
    namespace = info.value.namespace  # type: ignore[attr-defined]
    line = first_block()[marked[k]]
    if line.startswith("assert groups.batch_shape"):
        # numpyro's vmapped Normal holds every group's parameters under one group's batch shape,
        # and its methods break on it as the README says
        groups, y = namespace["groups"], namespace["y"]
        assert groups.batch_shape == () and groups.loc.shape == y.shape[:1]
        with pytest.raises(ValueError):
            groups.mean  # noqa: B018
        draw = groups.sample(jax.random.key(0))
        z = (draw - groups.loc) / groups.scale  # one standard-normal draw shared by all groups
        assert jnp.allclose(z, z[0])
        with pytest.raises(TypeError):
            groups[1]  # type: ignore[index]
    else:
        pytest.fail(f"no check of numpyro's documented failure for: {line}")
