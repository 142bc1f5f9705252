"""Low-rank + sparse covariance by an MLP parametrisation: time per optimizer step at n = 200, k = 5
with the authors' network (h(Σ) ∈ ℝ^20100 → 1000 → 200 → 200 → 200 → 1000, ReLU, 20.6 M parameters),
ℓ1 loss over all n² entries and Adam (lr 1e-4), float32, against the same network, loss and Adam
step in PyTorch on the CPU (the authors' framework; ``torch==2.13.0`` from the ``bench-torch``
extra).

Ours twice: with the plain dense first layer (the same computation as PyTorch) and with the
fixed-input first layer (z₀ = A⁽⁰⁾h(Σ) + b⁽⁰⁾ updated directly; A⁽⁰⁾ never stored). Per-step time
inside a run: (time of 11 steps − time of 1) / 10. Target (issue): ≥ 2× faster than PyTorch. Prints;
asserts nothing.
"""

from __future__ import annotations

import argparse
import time

import jax
import jax.numpy as jnp
import numpy as np
from _timing import interleaved_ms


def torch_step_ms(Sigma, k, hidden, reps):
    import torch

    n = Sigma.shape[0]
    i, j = np.triu_indices(n)
    x = torch.tensor(Sigma[i, j], dtype=torch.float32)
    S = torch.tensor(Sigma, dtype=torch.float32)
    widths = [x.numel(), *hidden, n * k]
    mods = []
    for a, b in zip(widths[:-1], widths[1:]):
        lin = torch.nn.Linear(a, b)
        torch.nn.init.xavier_uniform_(lin.weight)
        torch.nn.init.constant_(lin.bias, 0.01)
        mods += [lin, torch.nn.ReLU()]
    model = torch.nn.Sequential(*mods[:-1])
    opt = torch.optim.Adam(model.parameters(), lr=1e-4)

    def step():
        opt.zero_grad()
        M = model(x).reshape(n, k)
        loss = torch.abs(S - M @ M.T).sum()
        loss.backward()
        opt.step()
        return loss

    for _ in range(3):
        step()
    times = []
    for _ in range(reps):
        t0 = time.perf_counter()
        step()
        times.append(time.perf_counter() - t0)
    return 1e3 * float(np.median(times)), sum(p.numel() for p in model.parameters())


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--n", type=int, default=200)
    ap.add_argument("--k", type=int, default=5)
    ap.add_argument("--reps", type=int, default=10)
    args = ap.parse_args(argv)
    from lowrank_jax import covariance as cv

    n, k, hidden = args.n, args.k, (1000, 200, 200, 200)
    rng = np.random.default_rng(0)
    M0 = rng.normal(size=(n, k))
    Sigma = (M0 @ M0.T + np.diag(rng.uniform(0, 1, n))).astype(np.float32)
    print(
        f"covariance NN, one Adam step at n = {n}, k = {k}, "
        f"network {n * (n + 1) // 2}-1000-200-200-200-{n * k}"
    )
    try:
        t_torch, n_params = torch_step_ms(Sigma, k, hidden, args.reps)
    except ImportError:
        print(
            "  PyTorch is not installed: `make bench` installs the bench-torch extra "
            "(torch==2.13.0, CPU build)"
        )
        t_torch, n_params = float("nan"), None
    S = jnp.asarray(Sigma)
    rows = {}
    for mode in ("dense", "fixed-input"):
        runs = {
            it: jax.jit(
                lambda S, it=it: (
                    cv.decompose(S, k, hidden=hidden, max_iter=it, tol=None, first_layer=mode).M
                )
            )
            for it in (1, 11)
        }
        t = interleaved_ms(
            {it: (lambda f=f: f(S)) for it, f in runs.items()}, reps=args.reps, warmup=1
        )
        rows[mode] = (t[11] - t[1]) / 10
    if n_params:
        print(f"  parameters: {n_params / 1e6:.1f} M")
    print(
        f"  PyTorch {t_torch:.1f} ms | ours, dense first layer {rows['dense']:.1f} ms "
        f"({t_torch / rows['dense']:.1f}x) | "
        f"ours, fixed-input first layer {rows['fixed-input']:.1f} ms "
        f"({t_torch / rows['fixed-input']:.1f}x)   target >= 2x"
    )


if __name__ == "__main__":
    main()
