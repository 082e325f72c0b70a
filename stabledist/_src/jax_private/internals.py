"""The JAX internals stabledist relies on, one `Internal` record each: the private names, what
they are for, the releases they were checked on and what stabledist does without them. The
probes and accessors are the group's face (`stabledist._src.jax_private`); this is its data.
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["CHECKED", "INTERNALS", "Internal"]

CHECKED = "jax 0.7.0, 0.10.2, 0.11.2 and 0.12.0.1"


@dataclass(frozen=True)
class Internal:
    """One private JAX name (or group of names used together) that stabledist relies on."""

    name: str
    uses: str  # the private names
    purpose: str
    fallback: str  # what stabledist does when the probe fails
    checked: str = CHECKED
    since: tuple[int, ...] = ()  # older supported releases lack it: no warning there


INTERNALS: dict[str, Internal] = {i.name: i for i in (
    Internal(
        "trace_state", "jax._src.core.trace_ctx (.trace, .is_top_level()), .eval_trace",
        "tell eager code from traced code, and find the current trace",
        "every lazy value is computed where it is read and cached when concrete, as numpyro "
        "does; nothing is hoisted"),
    Internal(
        "fast_top_level", "jax._src.core.trace_state_strong_ref, .axis_env_state, "
        ".top_axis_env (jax >= 0.8)",
        "the eager test of every first read, by identity, without jax's two property calls",
        "the first read asks trace_ctx.is_top_level() (slower, same answer)", since=(0, 8)),
    Internal(
        "eval_context", "jax._src.core.eval_context",
        "run a hoisting program eagerly from inside the caller's trace",
        "nothing is hoisted: values are computed in the trace, as numpyro does"),
    Internal(
        "ambient_mesh", "jax._src.mesh.use_abstract_mesh, .empty_abstract_mesh",
        "compute a hoisted value outside an ambient pmap/shard_map mesh (a cached value must "
        "not carry that mesh in its type)",
        "nothing is hoisted: values are computed in the trace, as numpyro does"),
    Internal(
        "pass_through_traces", "jax._src.interpreters.ad.JVPTrace, .LinearizeTrace, "
        "jax._src.interpreters.batching.BatchTrace, Trace.parent_trace",
        "under grad, jvp or vmap alone operations on concrete values run eagerly: a value read "
        "there is computed and cached as numpyro does",
        "every trace counts as staging: such values are hoisted or computed in the trace"),
    Internal(
        "equation_recording", "DynamicJaxprTrace.frame (.tracing_eqns, .constvar_to_val), "
        "the recorded equations' .in_tracers and their tracers' .val",
        "decide whether to hoist from what a value's first computation added to the trace, and "
        "take those equations back out when it is hoisted",
        "the decision comes from an abstract trace of the value (jax.make_jaxpr: a slower first "
        "read, the same decision)"),
    Internal(
        "equation_fields", "the fields of an equation (JaxprEqn, or the TracingEqn a trace's "
        "frame records): .primitive.name, .params (sub-jaxprs: ClosedJaxpr.jaxpr, Jaxpr.eqns), "
        ".invars and .outvars with their .aval.shape, .effects; a Jaxpr's .invars and .outvars",
        "tell from the equations a value's computation adds (or an abstract trace of it) "
        "whether hoisting it pays",
        "nothing is hoisted: values are computed in the trace, as numpyro does"),
    Internal(
        "export_registries", "jax._src.export._export.serialization_registry, "
        ".deserialization_registry",
        "jax.export: a class defined again (a notebook cell run again, a reloaded module) takes "
        "over its name, and bytes naming a class no module has defined yet say which module to "
        "import",
        "the first definition keeps its name (a redefined class cannot be serialized), and "
        "JAX's own error names only the serialized name"),
    Internal(
        "array_type", "jax._src.array.ArrayImpl",
        "recognise a concrete jax array by its exact type on the first-read path, without "
        "creating an array at import (which would start JAX's backend before the user has "
        "configured it)",
        "a value is checked for tracers leaf by leaf (slower, same answer)"),
    Internal(
        "tracer_traces", "Tracer._trace, jax._src.core.set_current_trace",
        "stabledist.handlers.seed: a key traced by an inner block's trace never outlives it; "
        "the enclosing block continues from a key computed in its own trace",
        "a block whose key cannot outlive it hands back the key it started from"),
)}
