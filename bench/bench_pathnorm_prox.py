"""The 1-path-norm prox of a 784-200-10 network: ours vs a per-unit NumPy implementation of the
paper's algorithm, vs the fastest sort of the same rows in JAX, vs one minibatch SGD step.

Targets (issue): ≥ 50× faster than the NumPy per-unit implementation, ≤ 2× the fastest sort.
Prints medians (ms) and ratios; asserts nothing about time.
"""

from __future__ import annotations

import argparse

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import optax
from _timing import interleaved_ms, median_ms
from jax import lax

from lowrank_jax import pathnorm

INPUTS, HIDDEN, OUTPUTS, BATCH = 784, 200, 10, 100


def numpy_unit(x, y, lam):
    """One hidden unit by the paper's Algorithms 5 + 3, plainly in NumPy (argsort, walk, explicit
    candidate vectors, un-sort, re-sign)."""
    p, m = len(x), len(y)
    px, py = np.argsort(-np.abs(x)), np.argsort(-np.abs(y))
    a, b = np.abs(x)[px], np.abs(y)[py]
    A, B = np.concatenate([[0.0], np.cumsum(a)]), np.concatenate([[0.0], np.cumsum(b)])

    def candidate(sv, sw):
        d = 1.0 - lam * lam * sv * sw
        if d <= 0:
            return None
        cv = (lam * lam * sw * A[sv] - lam * B[sw]) / d
        cw = (lam * lam * sv * B[sw] - lam * A[sv]) / d
        v = np.where(np.arange(p) < sv, a + cv, 0.0)
        w = np.where(np.arange(m) < sw, b + cw, 0.0)
        return v, w

    def feasible(sv, sw):
        c = candidate(sv, sw)
        if c is None:
            return False
        v, w = c
        return (sv == 0 or v[sv - 1] >= 0) and (sw == 0 or w[sw - 1] >= 0)

    boundary, sv, sw, maximal = [], 0, m, True
    while sv <= p and sw >= 0:
        if feasible(sv, sw):
            sv, maximal = sv + 1, True
        else:
            if maximal:
                boundary.append((sv - 1, sw))
                maximal = False
            sw -= 1
    if sv == p + 1:
        boundary.append((p, sw))
    best, best_h = None, np.inf
    for sv, sw in boundary:
        v, w = candidate(sv, sw)
        h = 0.5 * np.sum((v - a) ** 2) + 0.5 * np.sum((w - b) ** 2) + lam * v.sum() * w.sum()
        if h < best_h:
            best, best_h = (v, w), h
    v_out, w_out = np.zeros(p), np.zeros(m)
    v_out[px], w_out[py] = best
    return v_out * np.sign(x), w_out * np.sign(y)


def numpy_prox(W_in, W_out, lam):
    out_in, out_out = np.empty_like(W_in), np.empty_like(W_out)
    for i in range(W_in.shape[0]):
        out_out[:, i], out_in[i] = numpy_unit(W_out[:, i], W_in[i], lam)
    return out_in, out_out


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--reps", type=int, default=30)
    ap.add_argument("--strength", type=float, default=1e-3)
    args = ap.parse_args(argv)
    key = jax.random.key(0)
    k1, k2, k3 = jax.random.split(key, 3)
    hidden = eqx.nn.Linear(INPUTS, HIDDEN, key=k1)
    out = eqx.nn.Linear(HIDDEN, OUTPUTS, key=k2)
    W_in, W_out = hidden.weight, out.weight
    lam = jnp.float32(args.strength)

    ours = jax.jit(pathnorm.path_norm_prox)
    P_in, P_out = ours(W_in, W_out, lam)
    N_in, N_out = numpy_prox(
        np.asarray(W_in, np.float64), np.asarray(W_out, np.float64), args.strength
    )
    f = lambda a, b: float(pathnorm.path_norm_objective(a, b, W_in, W_out, lam))  # noqa: E731
    print(
        f"objective: ours {f(P_in, P_out):.6f}, NumPy (float64) {f(N_in, N_out):.6f}; "
        f"non-zeros ours {int(jnp.count_nonzero(P_in))}/{P_in.size}"
    )

    bits = lax.bitcast_convert_type(jnp.abs(W_in), jnp.int32)
    sort_float = jax.jit(lambda w: jnp.sort(jnp.abs(w), axis=1))
    sort_bits = jax.jit(lambda b: lax.sort(b, dimension=1))
    sort_mag = jax.jit(pathnorm.sort_magnitudes)

    x = jax.random.uniform(k3, (BATCH, INPUTS))
    y = jax.random.randint(k3, (BATCH,), 0, OUTPUTS)
    model = (hidden, out)
    opt = optax.sgd(0.1)
    state = opt.init(eqx.filter(model, eqx.is_array))

    @eqx.filter_jit
    def sgd_step(model, state, x, y):
        def loss(m):
            h, o = m
            logits = jax.vmap(lambda v: o(jax.nn.elu(h(v))))(x)
            return optax.softmax_cross_entropy_with_integer_labels(logits, y).mean()

        g = eqx.filter_grad(loss)(model)
        upd, state = opt.update(g, state)
        return eqx.apply_updates(model, upd), state

    W_in64, W_out64 = np.asarray(W_in, np.float64), np.asarray(W_out, np.float64)
    t_numpy = median_ms(lambda: numpy_prox(W_in64, W_out64, args.strength), reps=3, warmup=1)
    t = interleaved_ms(
        {
            "ours": lambda: ours(W_in, W_out, lam),
            "sort_float": lambda: sort_float(W_in),
            "sort_bits": lambda: sort_bits(bits),
            "sort_magnitudes": lambda: sort_mag(W_in),
            "sgd_step": lambda: sgd_step(model, state, x, y),
        },
        reps=args.reps,
    )
    fastest_sort = min(t["sort_float"], t["sort_bits"], t["sort_magnitudes"])
    print(
        f"path-norm prox, {HIDDEN} units of {INPUTS} inputs + {OUTPUTS} outputs (float32), medians:"
    )
    print(
        f"  ours {t['ours']:.2f} ms | NumPy per-unit (paper's Alg. 5+3) {t_numpy:.0f} ms "
        f"-> {t_numpy / t['ours']:.0f}x faster (target >= 50x)"
    )
    print(
        f"  sorts of the same rows: float {t['sort_float']:.2f} ms, "
        f"int32 bits {t['sort_bits']:.2f} ms, "
        f"|W| by bits incl. abs/reverse {t['sort_magnitudes']:.2f} ms -> ours / fastest sort = "
        f"{t['ours'] / fastest_sort:.2f} (target <= 2)"
    )
    print(
        f"  one minibatch SGD step ({BATCH} images) {t['sgd_step']:.2f} ms -> prox / SGD step = "
        f"{t['ours'] / t['sgd_step']:.1f}"
    )


if __name__ == "__main__":
    main()
