"""stabledist's implementation: private modules, free to change between releases.

The public API is what `stabledist/__init__.py`, `stabledist.handlers` and `stabledist.testing`
export; one module per idea here: `cache` (the weak-key cache of lazy values), `hoisting`
(lazy values first read inside a trace), `pytree` (field tables and generated flatten /
unflatten), `fork` (the stable mirrors of numpyro's classes), `quirks` (the fork's per-class
exceptions), `introspect` (class introspection), `internals` (the opt-in switch for numpyro's
own code) and `submodules` (`stabledist.continuous`, ... mirrors).
"""
