"""Paper Table 2 setting on data we can ship: background subtraction on OpenCV's vtest.avi.

The clip (795 grey frames, down-sampled by 4 to 144 × 192, as the paper's "down-sample by 4") is
split in time: frames 0–499 for learning, 500–794 (one 27 648 × 295 matrix, not cut) for testing.
- Pseudo ground truth for learning: AltProj (rank 2, threshold_scale hand-tuned, see
  ALTPROJ_SCALE_FACTOR) run to a relative change of 1e-5 as in the paper, or 300 iterations (its
  change levels off near 1e-3: pixels at the threshold enter and leave S).
- Learning: K = 5 layers, r = 2, on random 100-frame windows of the training part (each with the
  matching window of the AltProj background), same recipe as the synthetic models; FRMNN (β, φ) by
  the grid search at K̄ = 10 on 8 windows. ζ is not rescaled between the 100-frame windows and the
  295-frame test clip (the generalisation rule assumes the synthetic generator; pixels do not
  scale with the matrix size).
- Test: LRPCA vs ScaledGD (α = 0.1, η = 0.5, hand-set) vs AltProj, all halted by the paper's
  rule max(‖X_k − X_{k−1}‖_F/‖X_{k−1}‖_F, ‖S_k − S_{k−1}‖_F/‖S_{k−1}‖_F) < 1e-3; wall time after
  compilation, iterations, and the distance of each background to AltProj's 1e-5 solution.
- A PNG grid of original / background / foreground (|S|) for three test frames, per method.

Needs `make data`. Writes results/rpca/video_table2.csv and video_frames.png.
"""

from __future__ import annotations

import argparse
import dataclasses
import math
import time

import jax
import jax.numpy as jnp
import numpy as np
from _rpca import checkpoint, figure, out_dir, timed, write_csv

from lowrank_jax import datasets, rpca
from lowrank_jax.rpca import training

RANK, K, WINDOW, SPLIT, HALT = 2, 5, 100, 500, 1e-3
# AltProj's default threshold_scale β = 1/(2 (n1 n2)^{1/4}) is made for square matrices: on this
# tall clip every threshold stays above the pixel range and S stays 0 (a plain rank-2 SVD, walkers
# left as ghosts in the background). Hand-tuned (as the paper did): half of it gives ~5 %
# foreground pixels; a quarter, 74 %.
ALTPROJ_SCALE_FACTOR = 0.5
VISIBLE = (
    0.05  # |S| above this counts as foreground in the summary (soft thresholds leave small S dense)
)


def altproj_threshold_scale(shape):
    return ALTPROJ_SCALE_FACTOR / (2.0 * (shape[0] * shape[1]) ** 0.25)


def make_sampler(Y, X, window):
    """Random ``window``-frame slices of (Y, X) (pixels × frames), as stacked training instances."""
    Y, X = jnp.asarray(Y), jnp.asarray(X)
    last = Y.shape[1] - window

    def sampler(key, count):
        starts = jax.random.randint(key, (count,), 0, last + 1)
        cut = lambda A, s: jax.lax.dynamic_slice_in_dim(A, s, window, axis=1)  # noqa: E731
        return jax.vmap(lambda s: cut(Y, s))(starts), jax.vmap(lambda s: cut(X, s))(starts)

    return sampler


def main(argv=None):
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument("--scale", type=float, default=0.25)
    args = ap.parse_args(argv)
    v = datasets.load_vtest(scale=args.scale)
    M = jnp.asarray(v.M)
    train, test = M[:, :SPLIT], M[:, SPLIT:]
    print(
        f"vtest.avi: {v.M.shape[1]} frames of {v.frame_shape}; "
        f"train {train.shape}, test {test.shape}"
    )

    t0 = time.perf_counter()
    gt_train = rpca.altproj(
        train,
        RANK,
        threshold_scale=altproj_threshold_scale(train.shape),
        tol=1e-5,
        stop="change",
        max_iter=300,
    )
    print(
        f"AltProj pseudo ground truth on the training part: {int(gt_train.n_iter)} iterations, "
        f"{time.perf_counter() - t0:.1f} s, "
        f"{float(jnp.mean(gt_train.S != 0)):.1%} foreground pixels"
    )
    sampler = make_sampler(train, gt_train.X, WINDOW)
    cfg = training.TrainConfig(
        n=round(math.sqrt(train.shape[0] * WINDOW)),
        rank=RANK,
        alpha=0.1,
        num_layers=K,
        pre_steps=10,
        full_steps=20,
        batch=1,
        init_instances=2,
    )
    key = jax.random.key(2)
    t0 = time.perf_counter()
    params = training.train_lrpca(
        cfg, sampler=sampler, checkpoint=checkpoint(out_dir(), "video_checkpoint", cfg), key=key
    )
    params, _ = training.frmnn_grid_search(
        params,
        cfg,
        num_instances=8,
        extra_layers=5,
        sampler=sampler,
        key=jax.random.fold_in(key, 1),
    )
    t_learn = time.perf_counter() - t0
    rpca.save_params(
        out_dir() / "video_params.eqx",
        params,
        {"config": dataclasses.asdict(cfg), "data": "vtest.avi frames 0-499"},
    )
    print(
        f"learned K = {K} video layers in {t_learn:.0f} s; beta = {float(params.beta):.1f}, "
        f"phi = {float(params.phi):.1f}"
    )

    reference = rpca.altproj(
        test,
        RANK,
        threshold_scale=altproj_threshold_scale(test.shape),
        tol=1e-5,
        stop="change",
        max_iter=300,
    )
    solvers = {
        "LRPCA": lambda Y: params(Y, normalize=False, tol=HALT, stop="change", max_iter=200),
        "ScaledGD": lambda Y: rpca.scaledgd(
            Y, RANK, 0.1, eta=0.5, tol=HALT, stop="change", max_iter=1000
        ),
        "AltProj": lambda Y: rpca.altproj(
            Y, RANK, threshold_scale=altproj_threshold_scale(Y.shape), tol=HALT, stop="change"
        ),
    }
    rows, results = [], {}
    for name, solve in solvers.items():
        jax.block_until_ready(solve(test))  # compile
        out, sec = timed(solve, test)
        gap = float(jnp.linalg.norm(out.X - reference.X) / jnp.linalg.norm(reference.X))
        rows.append([name, sec, int(out.n_iter), gap, float(jnp.mean(jnp.abs(out.S) > VISIBLE))])
        results[name] = out
        print(
            f"{name:9s} {sec:7.2f} s  {int(out.n_iter):4d} iterations  "
            f"‖X − X_AltProj(1e-5)‖/‖X_AltProj‖ = {gap:.1e}  foreground {rows[-1][4]:.1%}"
        )
    write_csv(
        "video_table2.csv",
        ["solver", "seconds", "iterations", "distance_to_altproj_1e-5", "fraction_abs_S_over_0.05"],
        rows,
    )

    plt = figure()
    frames = [0, 120, 240]
    fig, axes = plt.subplots(
        1 + 2 * len(results), len(frames), figsize=(3.2 * len(frames), 2.5 * (1 + 2 * len(results)))
    )
    Yf = v.frames(np.asarray(test))
    for j, f in enumerate(frames):
        axes[0, j].imshow(Yf[f], cmap="gray", vmin=0, vmax=1)
        axes[0, j].set_title(f"original, test frame {f}")
        for i, (name, out) in enumerate(results.items()):
            axes[1 + 2 * i, j].imshow(v.frames(np.asarray(out.X))[f], cmap="gray", vmin=0, vmax=1)
            axes[1 + 2 * i, j].set_title(f"{name}: background")
            axes[2 + 2 * i, j].imshow(
                np.abs(v.frames(np.asarray(out.S))[f]), cmap="gray_r", vmin=0, vmax=0.5
            )
            axes[2 + 2 * i, j].set_title(f"{name}: foreground |S|")
    for ax in axes.ravel():
        ax.axis("off")
    fig.tight_layout()
    fig.savefig(out_dir() / "video_frames.png", dpi=80)


if __name__ == "__main__":
    main()
