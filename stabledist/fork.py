"""Kept so that pickles written by stabledist 0.1.0 load: they name
``stabledist.fork._from_source``. Not API; new pickles name ``stabledist._from_source``."""

from stabledist._src.construction import _from_source as _from_source
