"""The snippets of the comparison table in docs/guides/jax-values.md, for one library.

Usage: ``python tools/compare_peers.py LIB``, LIB one of stabledist, numpyro, tfp, distrax,
distreqx; prints each snippet's result or ``raises Type: first line``. TFP (on JAX), distrax and
distreqx are not stabledist's dependencies: run them in a separate environment (the table names
the versions measured). Not part of the test suite.
"""
import os
import subprocess
import sys

import jax
import jax.numpy as jnp
import numpy as np

LIB = sys.argv[1]
if LIB == "stabledist":
    import stabledist
    Normal, VERSION = stabledist.Normal, stabledist.__version__
elif LIB == "numpyro":
    import numpyro
    import numpyro.distributions
    Normal, VERSION = numpyro.distributions.Normal, numpyro.__version__
elif LIB == "tfp":
    from tensorflow_probability.substrates import jax as tfp
    Normal, VERSION = tfp.distributions.Normal, tfp.__version__
elif LIB == "distrax":
    import distrax
    Normal, VERSION = distrax.Normal, distrax.__version__
elif LIB == "distreqx":
    import importlib.metadata

    import distreqx.distributions as dq
    Normal, VERSION = dq.Normal, importlib.metadata.version("distreqx")

def mean(d):  # numpyro: property; others: method
    m = d.mean
    return m() if callable(m) else m

def bshape(d):
    if hasattr(d, "batch_shape"):
        return f"batch_shape={tuple(d.batch_shape)}"
    return (f"no .batch_shape attr; event_shape={tuple(d.event_shape)}, "
            f"mean().shape={tuple(jnp.shape(mean(d)))}")

def err(e):
    msg = (str(e).strip().splitlines() or [""])[0]
    return f"raises {type(e).__name__}: {msg[:200]}"

def run(label, fn):
    try:
        out = fn()
    except Exception as e:
        out = err(e)
    print(f"[{LIB}] {label}: {out}")

def arr(x):
    x = np.asarray(x)
    return f"shape={x.shape} value={np.array2string(x, precision=4)}"

print(f"[{LIB}] versions: lib={VERSION} jax={jax.__version__} python={sys.version.split()[0]}")

# 1. vmap out
def s1():
    d = jax.vmap(lambda m: Normal(m, 1.0))(jnp.arange(3.0))
    parts = [bshape(d)]
    for name, f in [("mean", lambda: arr(mean(d))),
                    ("log_prob(zeros(3))", lambda: arr(d.log_prob(jnp.zeros(3))))]:
        try:
            parts.append(f"{name} {f()}")
        except Exception as e:
            parts.append(f"{name} {err(e)}")
    return "; ".join(parts)
run("1 vmap-out", s1)

# 2. batch slicing
d2 = Normal(jnp.zeros((4, 3)), 1.0)
run("2 base", lambda: bshape(d2))
run("2 d[1]", lambda: bshape(d2[1]))
run("2 d[..., 0]", lambda: bshape(d2[..., 0]))

# 3. jax.export round trip
def s3():
    d, x = Normal(jnp.zeros(3), jnp.ones(3)), jnp.zeros(3)
    stage = "export"
    try:
        exp = jax.export.export(jax.jit(lambda d, x: d.log_prob(x)))(d, x)
        stage = "serialize"
        blob = exp.serialize()
        stage = "deserialize"
        exp2 = jax.export.deserialize(blob)
        stage = "call"
        out = exp2.call(d, x)
    except Exception as e:
        return f"at {stage}: {err(e)}"
    return f"ok ({len(blob)} bytes) call -> {arr(out)}"
run("3 export", s3)

# 4. pytree
d4 = Normal(jnp.zeros(3), jnp.ones(3))
run("4 leaves", lambda: f"{len(jax.tree.leaves(d4))} leaves, shapes "
    f"{[tuple(np.shape(x)) for x in jax.tree.leaves(d4)]}, treedef {jax.tree.structure(d4)}")
run("4 jit mean", lambda: f"ok {arr(jax.jit(lambda d: mean(d))(d4))}")

# 5. leaf-order stability across PYTHONHASHSEED (subprocess per seed)
if os.environ.get("CMP_LEAVES"):
    d5 = Normal(jnp.full(2, 7.0), jnp.full(2, 3.0))  # loc=7, scale=3 so order is visible
    print([float(x[0]) for x in jax.tree.leaves(d5)])
    sys.exit(0)
def s5():
    seen = {}
    for seed in range(8):
        env = dict(os.environ, PYTHONHASHSEED=str(seed), CMP_LEAVES="1")
        r = subprocess.run([sys.executable, __file__, LIB], env=env, capture_output=True, text=True)
        line = (r.stdout.strip().splitlines() or [r.stderr.strip().splitlines()[-1]])[-1]
        seen.setdefault(line, []).append(seed)
    return "; ".join(f"leaf values {k} for seeds {v}" for k, v in seen.items())
run("5 leaf order over PYTHONHASHSEED 0-7 (loc=7, scale=3)", s5)
