"""What is known about classes, as data: the frozen `ClassRecord` of each stable class in one
table (and which class mirrors which), what numpyro's declarations do not say about its classes
(the facts, keyed by class object: the only place that names particular numpyro classes), and
the one walk over the distributions a distribution holds. The bottom group: it imports nothing
of stabledist.
"""

from stabledist._src.records.children import descendants as descendants
from stabledist._src.records.children import holding_fields as holding_fields
from stabledist._src.records.children import is_distribution as is_distribution
from stabledist._src.records.children import replace_held as replace_held
from stabledist._src.records.children import replace_held_in as replace_held_in
from stabledist._src.records.facts import BLOCKS_HOLDERS as BLOCKS_HOLDERS
from stabledist._src.records.facts import EVENT as EVENT
from stabledist._src.records.facts import Facts as Facts
from stabledist._src.records.facts import StaticPredicate as StaticPredicate
from stabledist._src.records.facts import facts_of as facts_of
from stabledist._src.records.records import BASE_AUX as BASE_AUX
from stabledist._src.records.records import VALIDATE as VALIDATE
from stabledist._src.records.records import BatchRule as BatchRule
from stabledist._src.records.records import ClassRecord as ClassRecord
from stabledist._src.records.records import FieldTable as FieldTable
from stabledist._src.records.records import add as add
from stabledist._src.records.records import find as find
from stabledist._src.records.records import is_stable_class as is_stable_class
from stabledist._src.records.records import mirror_of as mirror_of
from stabledist._src.records.records import record_of as record_of
