"""Paper Figure 2: three unfolding models — FNN, pure RNN, FRMNN — error per iteration.

n = 1000, r = 5, α = 0.1, float32; mean over 10 test instances.
- FNN: the shipped K = 10 model, its 10 layers only.
- FRMNN: the same model continued by (β, φ) (eq. 13) for 40 iterations in all.
- Pure RNN: tied parameters from the first iteration on. With K = 0 the continuation has no base
  (no learned step η_0 to continue from), so the RNN here is the smallest FRMNN: ζ_0 and one
  learned layer (ζ_1, η_1), then η_k = β^{k−1} η_1, ζ_k = φ^{k−1} ζ_1 with (β, φ) from the same
  grid search (K̄ = 15). Trained with the same recipe (cached in results/rpca/models/).

Writes results/rpca/fig2_unfolding.{csv,png}.
"""

from __future__ import annotations

import argparse
import dataclasses

import jax
import numpy as np
from _rpca import figure, instance, out_dir, write_csv

from lowrank_jax import rpca
from lowrank_jax.rpca import training

TOTAL = 40


def rnn_model(n: int):
    path = out_dir() / "models" / f"lrpca_rnn_n{n}.eqx"
    if path.exists():
        return rpca.load_params(path)
    cfg = training.TrainConfig(n=n, rank=5, alpha=0.1, num_layers=1)
    key = jax.random.key(11)
    p = training.train_lrpca(cfg, key=key)
    p, _ = training.frmnn_grid_search(p, cfg, extra_layers=14, key=jax.random.fold_in(key, 1))
    rpca.save_params(path, p, {"config": dataclasses.asdict(cfg), "model": "pure RNN (K = 1)"})
    return p


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--instances", type=int, default=10)
    args = ap.parse_args(argv)
    n = 1000
    fnn = rpca.pretrained(alpha=0.1)
    rnn = rnn_model(n)
    runs = {
        "FNN (K = 10)": jax.jit(lambda Y, X: fnn(Y, frmnn=False, X_star=X).history["error"]),
        "pure RNN": jax.jit(lambda Y, X: rnn(Y, max_iter=TOTAL, X_star=X).history["error"]),
        "FRMNN (K = 10)": jax.jit(lambda Y, X: fnn(Y, max_iter=TOTAL, X_star=X).history["error"]),
    }
    curves = {name: [] for name in runs}
    for s in range(args.instances):
        p = instance(300 + s, n, 5, 0.1)
        for name, run in runs.items():
            curves[name].append(np.asarray(run(p.Y, p.X)))
    rows = []
    plt = figure()
    fig, ax = plt.subplots(figsize=(5.5, 3.8))
    for (name, c), style in zip(curves.items(), ("o-", "s-", "-")):
        mean = np.mean(np.array(c), axis=0)
        rows += [[name, k + 1, v] for k, v in enumerate(mean)]
        ax.semilogy(np.arange(1, len(mean) + 1), mean, style, ms=3, label=name)
        print(
            f"{name:15s}: error at 10 = {mean[min(9, len(mean) - 1)]:.2e}, "
            f"at the end ({len(mean)}) = {mean[-1]:.2e}"
        )
    write_csv("fig2_unfolding.csv", ["model", "iteration", "mean_error"], rows)
    ax.set_xlabel("iteration k")
    ax.set_ylabel("mean ‖X_k − X⋆‖_F/‖X⋆‖_F")
    ax.set_title("Fig. 2: n = 1000, r = 5, α = 0.1, float32")
    ax.legend()
    fig.tight_layout()
    fig.savefig(out_dir() / "fig2_unfolding.png", dpi=120)


if __name__ == "__main__":
    main()
