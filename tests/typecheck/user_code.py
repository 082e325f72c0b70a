"""A user's file, type-checked by tests/test_types.py (never imported by the test suite).

Each `reveal_type` line is matched against what pyright and mypy say; the two `# error:` lines
must be flagged (typo'd keywords), and nothing else.
"""

from typing import reveal_type

import jax.numpy as jnp

import stabledist
import stabledist.handlers
import stabledist.testing
from stabledist.continuous import Normal

reveal_type(stabledist.MultivariateNormal)
reveal_type(stabledist.MultivariateNormal(jnp.zeros(2), covariance_matrix=jnp.eye(2)))
reveal_type(stabledist.TruncatedNormal)
reveal_type(Normal(0.0, 1.0))
reveal_type(stabledist.Normal(0.0, 1.0).mean)
reveal_type(stabledist.handlers.seed)
reveal_type(stabledist.handlers.trace)
reveal_type(stabledist.testing.check_stable)
reveal_type(stabledist.testing.PROPERTIES)
Normal(loc=0.0, scael=1.0)  # error: scael
stabledist.TruncatedNormal(0.0, 1.0, lowe=0.0)  # error: lowe
