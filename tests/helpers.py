"""Shared test data: the public distribution names of the installed numpyro, the catalog's
builders, which distribution class a test exercises (how pytest-xdist groups tests), and a
fresh process to run a script in.
Imported by the test modules as ``from helpers import ...`` (tests/ is on ``sys.path``:
pytest's rootdir-relative import of ``tests/conftest.py`` puts it there), so no test imports
from ``conftest``."""

from __future__ import annotations

import functools
import re
import subprocess
import sys
import textwrap

import jax
import jax.numpy as jnp
import numpyro.distributions as nd
from numpyro.distributions.util import lazy_property

import stabledist as sd
from stabledist.testing import catalog

CLASS_NAMES, FACTORY_NAMES = catalog.public_names()
EXAMPLE_NAMES = sorted(n for n in catalog.EXAMPLES if n in nd.__all__)
BUILDERS = sorted(catalog.all_builders())
assert set(CLASS_NAMES + FACTORY_NAMES) - set(catalog.EXCLUDED) <= set(EXAMPLE_NAMES), (
    "every public distribution name of the installed numpyro needs a catalog example"
)


_GROUP_NAMES = frozenset(CLASS_NAMES) | frozenset(EXAMPLE_NAMES)


def class_group(nodeid: str) -> str | None:
    """The distribution class a test exercises: the first word of its parameter id
    (``test_jit[Wishart]``, ``test_same_numbers_as_numpyro[Wishart[1]]``,
    ``test_scan_carry_changes_parametrization[Wishart-scale_matrix]``), if it names one.
    ``make test`` runs every test of one class on one pytest-xdist worker (tests/conftest.py),
    where that class's operations are compiled once."""
    _, bracket, params = nodeid.partition("[")
    word = re.split(r"[\[\]\-@]", params, maxsplit=1)[0] if bracket else ""
    return word if word in _GROUP_NAMES else None


INDEPENDENT_OF_CLASS: dict[str, str] = {
    "Normal": "a plain class: array fields only",
    "MaskedDistribution": "a hybrid field (the mask: a static bool or an array leaf) and a child",
    "MixtureGeneral": "a holder of children: a list of components and a mixing distribution",
    "Categorical": "a factory: the keyword decides the class (CategoricalLogits, ...Probs)",
    "UserDist": "a user's class through make_stable: a lazy value computed from another, a "
                "child built by its constructor (tests/helpers.py, importable by the workers)",
    "TwoSidedTruncatedDistribution": "truncated: a base, constraints holding array bounds, "
                                     "lazy normalizers computed from each other",
    "IntervalCensoredDistribution": "censored: a base and two arrays of censoring flags",
}
"""The covering set: the classes tests/test_properties.py's `test_hash_seed`, `test_release` and
`test_threads` run on, one per kind of instance the core's code walks (and, with
``STABLEDIST_COVERING_ONLY``, every test of one class in the modules it names:
tests/conftest.py). Why these properties do not depend on the class: the leaf order is one
function of a class's declared fields (stabledist._src.construction.describe, computed once per
class in every process); the release is the cache's weak-key bookkeeping of an instance and of the
children it holds; one value per lazy property for racing threads is the cache's store. Each
class differs only in the shape of what that code walks (fields, hybrid fields, one child, a
list of them, a factory's choice, a user's class, constraints holding arrays), and this set has
one class of each. Every catalog example's layout is also compared across hash seeds by
tests/test_pytree.py::test_leaf_order_identical_across_processes (a class's declared fields are
data, so a class could still list them in a set)."""

# Modules whose every test runs its own fresh processes and shares nothing with the others
# (no module-scoped fixture): each test is a group of its own, so the workers split them
# (the docs pages, a fresh process each, took one worker for three minutes as one group).
SPREAD_MODULES = frozenset({"tests/test_docs_examples.py", "tests/test_scenarios.py"})


def worker_group(nodeid: str) -> str:
    """Where ``make test`` runs a test: with its class (`class_group`), else with its module
    (whose tests may share module-scoped fixtures and compiled programs), alone in a module of
    `SPREAD_MODULES`."""
    module = nodeid.split("::")[0]
    return class_group(nodeid) or (nodeid if module in SPREAD_MODULES else module)


__all__ = ["BUILDERS", "CLASS_NAMES", "EXAMPLE_NAMES", "FACTORY_NAMES", "INDEPENDENT_OF_CLASS",
           "SPREAD_MODULES", "UserDist", "class_group", "compiled_reads", "nd", "sd",
           "worker_group"]


def _read(what: str, d, args: tuple):
    return d.log_prob(*args) if what == "log_prob" else getattr(d, what)


@functools.partial(jax.jit, static_argnums=0)
def _reads(whats: tuple[str, ...], ds: list, args: list) -> list:
    return [_read(what, d, a) for what, d, a in zip(whats, ds, args, strict=True)]


def compiled_reads(*reads: tuple) -> list:
    """Each ``(what, d, *args)`` of ``reads`` (``"log_prob"``, ``"mean"`` or ``"variance"`` of
    a batched or sliced distribution), all in one compiled program. Read eagerly, every
    operation compiles once more for each new batch shape (~60 programs for a Wishart's
    log_prob and sampler), which was most of test_batched's and test_slicing's time; one
    program per read still traced, lowered and compiled each read apart (three for a batch's
    log_prob, mean and variance, seven for the slices of one example). Eager reads of slices
    are checked by test_slicing.py::test_an_element_is_what_vmap_sees."""
    whats = tuple(r[0] for r in reads)
    return _reads(whats, [r[1] for r in reads], [tuple(r[2:]) for r in reads])


@sd.make_stable
class UserDist(nd.Distribution):
    """A user's own class made stable by `stabledist.make_stable`: a lazy property, and a child
    distribution its constructor builds. Here, at module level, so that the property suite's
    hash-seed workers (other processes) can rebuild it by name."""

    arg_constraints = {"rate": nd.constraints.positive}  # noqa: RUF012 - numpyro's convention
    pytree_data_fields = ("rate", "inner")
    support = nd.constraints.positive

    def __init__(self, rate, *, validate_args=None):
        self.rate = rate
        self.inner = nd.Exponential(rate, validate_args=validate_args)
        super().__init__(jnp.shape(rate), validate_args=validate_args)

    @lazy_property
    def scale(self):
        return 1.0 / self.rate

    @lazy_property
    def precision(self):  # a lazy value computed from another
        return self.scale**-2

    def sample(self, key, sample_shape=()):
        return self.inner.sample(key, sample_shape)

    def log_prob(self, value):
        return self.inner.log_prob(value)


def run_fresh(script: str) -> str:
    """Run ``script`` (dedented) in a new Python process and return what it printed: for what
    depends on import order or on modules this process has imported already. Fails with the
    child's error output if it exits with an error."""
    done = subprocess.run([sys.executable, "-c", textwrap.dedent(script)], capture_output=True,
                          text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    return done.stdout
