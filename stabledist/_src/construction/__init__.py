"""The classes: what makes a class stable and builds its instances. `Distribution` and its
metaclass (each construction settled and finished; copies and pickles), the mirror of a numpyro
class made on first request, a class's record described and registered once, when the class is
created, the warnings a user's own class gets, and the package's namespace with the opt-in
switch that makes numpyro's own code build stable classes. The top group: it imports all below.
"""

from stabledist._src.construction.base import Distribution as Distribution
from stabledist._src.construction.base import _from_source as _from_source
from stabledist._src.construction.base import is_stable as is_stable
from stabledist._src.construction.mirrors import make_stable as make_stable
from stabledist._src.construction.mirrors import stabilize as stabilize
from stabledist._src.construction.mirrors import stable_class as stable_class
from stabledist._src.construction.mirrors import upstream_class as upstream_class
from stabledist._src.construction.mirrors import wrap_factory as wrap_factory
from stabledist._src.construction.namespace import check_coverable as check_coverable
from stabledist._src.construction.namespace import mirror_submodules as mirror_submodules
from stabledist._src.construction.namespace import stable_internals as stable_internals
from stabledist._src.construction.namespace import (
    stable_internals_enabled as stable_internals_enabled,
)
from stabledist._src.construction.namespace import use_stable_internals as use_stable_internals
