"""Lazy values: numpyro's ``lazy_property`` kept outside ``__dict__``. The weak-key tables of each
instance's values (`CACHE`), the `cached_lazy_property` descriptor and where a first read is
computed (eagerly, in the trace, or hoisted out of a staging trace), and the questions about
classes the groups above ask (MRO lookups, lazy names, numpyro's classes). It reads the records
below and `jax_private`; it knows nothing of pytrees or construction.
"""

from stabledist._src.lazy.cache import CACHE as CACHE
from stabledist._src.lazy.cache import cache_info as cache_info
from stabledist._src.lazy.cache import clear_cache as clear_cache
from stabledist._src.lazy.hoisting import decide as decide
from stabledist._src.lazy.introspect import class_attribute as class_attribute
from stabledist._src.lazy.introspect import is_numpyro_class as is_numpyro_class
from stabledist._src.lazy.introspect import lazy_names as lazy_names
from stabledist._src.lazy.introspect import public_names as public_names
from stabledist._src.lazy.reads import cached_lazy_property as cached_lazy_property
from stabledist._src.lazy.reads import is_lazy as is_lazy
from stabledist._src.lazy.reads import lazy_property_of as lazy_property_of
