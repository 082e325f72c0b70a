"""stabledist's implementation: private modules, free to change between releases.

The public API is what `stabledist/__init__.py`, `stabledist.handlers` and `stabledist.testing`
export. Five groups in layers (`construction`, `pytrees`, `lazy`, `records`, `jax_private`),
one module per idea; `README.md` beside this file maps them and the data flow of a class's
creation, a construction, a lazy read, a round trip, a vmapped result and a slice.
"""
