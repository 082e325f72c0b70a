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


@pytest.mark.filterwarnings("ignore:.*requires ndarray or scalar arguments:DeprecationWarning")
@pytest.mark.parametrize("method", ["log_prob", "sample"])
def test_a_list_as_a_parameter_says_what_to_pass(method: str) -> None:
    """numpyro builds ``Normal([0., 1.], 1.)`` and then fails inside ``log_prob`` and
    ``sample`` with Python's operand error; stabledist builds it too (numpyro returns there)
    and its error, the same ``TypeError``, names the parameter and the fix."""
    call = {"log_prob": lambda d: d.log_prob(0.5),
            "sample": lambda d: d.sample(jax.random.key(0))}[method]
    theirs, ours = nd.Normal([0.0, 1.0], 1.0), sd.Normal([0.0, 1.0], 1.0)
    assert ours.batch_shape == theirs.batch_shape == (2,)
    with pytest.raises(TypeError, match="unsupported operand") as numpyros:
        call(theirs)
    with pytest.raises(TypeError) as error:
        call(ours)
    text = str(error.value)
    assert "parameter loc is a Python list" in text and "jnp.asarray" in text
    assert str(numpyros.value) in text  # numpyro's own words are kept


def test_another_type_error_is_numpyros_own() -> None:
    """A ``TypeError`` with no list behind it passes through unchanged."""
    with pytest.raises(TypeError) as numpyros:
        nd.Normal(0.0, 1.0).log_prob("x")
    with pytest.raises(TypeError) as ours:
        sd.Normal(0.0, 1.0).log_prob("x")
    assert str(ours.value) == str(numpyros.value)


@pytest.mark.parametrize("name", ["Normal", "MultivariateNormal", "Independent", "Delta"])
def test_explained_methods_keep_numpyros_signature(name: str) -> None:
    import inspect

    for method in ("sample", "log_prob"):
        ours, theirs = getattr(getattr(sd, name), method), getattr(getattr(nd, name), method)
        assert inspect.signature(ours) == inspect.signature(theirs)
        assert ours.__doc__ == theirs.__doc__
