"""Messages for a newcomer's common mistakes: the exception numpyro raises, with what to pass
instead where numpyro's says nothing (never a raise where numpyro returns)."""

from __future__ import annotations

import inspect
import warnings

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
def test_a_list_as_a_parameter_says_what_to_pass_in_sample() -> None:
    """numpyro builds ``Normal([0., 1.], 1.)`` and then fails inside ``sample`` with Python's
    operand error; stabledist builds it too (numpyro returns there) and its error, the same
    ``TypeError``, names the parameter and the fix. ``log_prob`` is numpyro's own, unwrapped
    (its frame would move numpyro's warnings): its error is numpyro's."""
    theirs, ours = nd.Normal([0.0, 1.0], 1.0), sd.Normal([0.0, 1.0], 1.0)
    assert ours.batch_shape == theirs.batch_shape == (2,)
    with pytest.raises(TypeError, match="unsupported operand") as numpyros:
        theirs.sample(jax.random.key(0))
    with pytest.raises(TypeError) as error:
        ours.sample(jax.random.key(0))
    text = str(error.value)
    assert "parameter loc is a Python list" in text and "jnp.asarray" in text
    assert str(numpyros.value) in text  # numpyro's own words are kept
    with pytest.raises(TypeError) as numpyros:
        theirs.log_prob(0.5)
    with pytest.raises(TypeError) as error:
        ours.log_prob(0.5)
    assert str(error.value) == str(numpyros.value)


@pytest.mark.parametrize("name", ["Normal", "MultivariateNormal", "Independent", "Delta",
                                  "LogNormal", "TruncatedNormal", "MixtureSameFamily"])
def test_explained_methods_wrap_the_method_python_resolves(name: str) -> None:
    """A mirror's ``sample`` wraps exactly numpyro's, keeping its signature and docs; its
    ``log_prob`` (and every other method) is numpyro's function itself."""
    ours, theirs = getattr(sd, name), getattr(nd, name)
    if not isinstance(ours, type):  # a factory: the class it returns
        ours, theirs = type(ours(0.0, 1.0, low=0.0)), type(theirs(0.0, 1.0, low=0.0))
    assert inspect.unwrap(ours.sample) is theirs.sample
    assert inspect.signature(ours.sample) == inspect.signature(theirs.sample)
    assert ours.sample.__doc__ == theirs.sample.__doc__
    assert ours.log_prob is theirs.log_prob


def _user_chain(module):
    """A user's two levels on ``module``'s Uniform: an override, and a subclass adding nothing."""
    class Shifted(module.Uniform):
        def log_prob(self, value):
            return super().log_prob(value) + 100.0

    class Child(Shifted):
        pass

    return Child


_WARNING_CASES = {
    "Uniform": (lambda m: m.Uniform(0.0, 1.0, validate_args=True), 1.5),
    "Beta": (lambda m: m.Beta(2.0, 2.0, validate_args=True), -0.5),
    "LogNormal": (lambda m: m.LogNormal(0.0, 1.0, validate_args=True), -1.0),
    "TruncatedNormal": (lambda m: m.TruncatedNormal(0.0, 1.0, low=0.0, high=1.0,
                                                    validate_args=True), 2.0),
    "Independent": (lambda m: m.Gamma(jnp.ones(2), validate_args=True).to_event(1),
                    -jnp.ones(2)),
    "a user's subclass of a subclass": (
        lambda m: _user_chain(m)(0.0, 1.0, validate_args=True), 1.5),
}


def _warnings_of(module, make, value) -> list[tuple[str, int, type, str]]:
    d = make(module)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("default")
        d.log_prob(value)  # call site 1
        d.log_prob(value)  # call site 2: a second warning under the default filter
    return [(w.filename, w.lineno, w.category, str(w.message)) for w in caught]


@pytest.mark.parametrize("name", list(_WARNING_CASES))
def test_numpyros_warnings_point_at_the_users_line(name: str) -> None:
    """numpyro warns about out-of-support values at the first frame outside numpyro: the
    user's line, once per call site under Python's default filter. stabledist adds no frame
    in between, so the same warnings come with the same file, line, category and text."""
    make, value = _WARNING_CASES[name]
    theirs, ours = _warnings_of(nd, make, value), _warnings_of(sd, make, value)
    assert theirs == ours and all(w[0] == __file__ for w in ours)
    # two call sites, two warnings (a user's override warns from its own super() line)
    assert len(ours) == (1 if name.startswith("a user's") else 2)


def test_a_users_subclass_keeps_its_override_and_numpyros_warning() -> None:
    """Two levels of a user's classes: the override runs (numpyro's value), and numpyro's
    warning from its ``super()`` call points at the line that called ``log_prob``."""
    values = []
    for module in (nd, sd):
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("default")
            d = _user_chain(module)(0.0, 1.0, validate_args=True)
            values.append((d.log_prob(1.5), d.log_prob(0.5)))
        assert [w.filename for w in caught] == [__file__]
    assert values[0] == values[1] == (-jnp.inf, 100.0)
