"""Where a vmapped sketched Newton run parts from its single runs on an accelerator (a probe, run by
bench/device/check.sh): the sampled rows, the scores and the iterates, batched against single."""

import jax
import jax.numpy as jnp
import numpy as np

jax.config.update("jax_enable_x64", True)
# The package is imported only once x64 is on, so that nothing in it is set up in float32.
from lowrank_jax import regression as rg  # noqa: E402
from lowrank_jax.regression import sketch  # noqa: E402

k1, k2 = jax.random.split(jax.random.key(4))
A = jax.random.normal(k1, (400, 6), jnp.float64) / 20
b = jax.random.dirichlet(k2, jnp.ones(400, jnp.float64))
ws, rows = jnp.array([4.0, 6.0]), jnp.array([40, 200])
f = lambda w, r: (
    rg.newton_solve(
        A,
        b,
        w,
        jnp.zeros(6),
        "exp",
        "sketch",
        max_iter=4,
        tol=None,
        sketch_size=200,
        sketch_rows=r,
        key=jax.random.key(1),
    ).x
)
print(
    "x batched-single:",
    [float(jnp.abs(a - f(w, r)).max()) for a, w, r in zip(jax.vmap(f)(ws, rows), ws, rows)],
)
D = jnp.stack([jnp.linspace(0.5, 2.0, 400), jnp.linspace(2.0, 0.5, 400)])
sc = lambda d: sketch.approx_leverage_scores(jax.random.key(3), A, d)
print(
    "scores rel diff:",
    [float((jnp.abs(a - sc(d)) / sc(d)).max()) for a, d in zip(jax.vmap(sc)(D), D)],
)
cs = lambda d: sketch.design.count_sketch(jax.random.key(3), A, d, 48)
print("countsketch diff:", [float(jnp.abs(a - cs(d)).max()) for a, d in zip(jax.vmap(cs)(D), D)])
sr = lambda s: sketch.sample_rows(jax.random.key(5), s, 200)[0]
S = jax.vmap(sc)(D)
print("sampled idx mismatches:", [int((a != sr(s)).sum()) for a, s in zip(jax.vmap(sr)(S), S)])
ch = lambda p: jax.random.choice(jax.random.key(5), 400, (200,), p=p / p.sum())
print("choice mismatches:", [int((a != ch(s)).sum()) for a, s in zip(jax.vmap(ch)(S), S)])
u = lambda s: jax.random.uniform(jax.random.key(5), (5,), jnp.float64) + 0 * s.sum()
print("uniform batched vs single:", np.asarray(jax.vmap(u)(S))[0], np.asarray(u(S[0])))
