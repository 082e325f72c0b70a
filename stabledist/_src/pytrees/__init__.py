"""Distributions as JAX values: the generated flatten and unflatten of each class (with its batch
check), batch shapes read from the leaves (a vmapped distribution is batched), names and aux
encodings for ``jax.export``, and ``d[idx]``, a batch slice rebuilt by the class's constructor.
It reads the lazy values and the records below; it knows nothing of how classes are made.
"""

from stabledist._src.pytrees.batching import restored as restored
from stabledist._src.pytrees.batching import settled as settled
from stabledist._src.pytrees.batching import settled_arguments as settled_arguments
from stabledist._src.pytrees.export import missing_name as missing_name
from stabledist._src.pytrees.export import register_numpyro_nodes as register_numpyro_nodes
from stabledist._src.pytrees.export import register_serialization as register_serialization
from stabledist._src.pytrees.pytree import pytree_of as pytree_of
from stabledist._src.pytrees.pytree import register as register
from stabledist._src.pytrees.slicing import getitem as getitem
