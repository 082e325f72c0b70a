"""Messages for a newcomer's common mistakes: the exception numpyro raises, with what to pass
instead where numpyro's says nothing (never a raise where numpyro returns)."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpyro.distributions as nd
import pytest

import stabledist as sd


@pytest.mark.parametrize("key", [0, jnp.ones(3), None], ids=["int", "floats", "None"])
def test_sample_without_a_key_says_what_to_pass(key) -> None:
    with pytest.raises(AssertionError) as numpyros:
        nd.Normal(0.0, 1.0).sample(key)
    assert str(numpyros.value) == ""  # numpyro's says nothing
    with pytest.raises(AssertionError, match=r"Normal.sample expects a PRNG key .*jax.random"):
        sd.Normal(0.0, 1.0).sample(key)


def test_sample_with_a_key_is_numpyros() -> None:
    for key in (jax.random.key(0), jax.random.PRNGKey(1)):
        for shape in ((), (3,)):
            assert jnp.array_equal(sd.Normal(0.0, 2.0).sample(key, shape),
                                   nd.Normal(0.0, 2.0).sample(key, shape))
