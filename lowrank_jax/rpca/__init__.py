"""Robust PCA: LRPCA (learned, unfolded ScaledGD), ScaledGD and AltProj.

Every solver decomposes Y ≈ X + S with X = L Rᵀ of rank r and S sparse, runs under one ``jit``,
``vmap``s over instances and hyperparameter arrays, and returns an ``RPCAResult``.
"""

from lowrank_jax.rpca._common import RPCAResult
from lowrank_jax.rpca.alternating import altproj, altproj_iteration
from lowrank_jax.rpca.learned import lrpca, lrpca_iteration, lrpca_step, oracle_thresholds
from lowrank_jax.rpca.params import LRPCAParams, data_scale, load_params, pretrained, save_params
from lowrank_jax.rpca.scaled import scaledgd, scaledgd_iteration, scaledgd_step
from lowrank_jax.rpca.sharded import lrpca_sharded, row_mesh
from lowrank_jax.rpca.training import FRMNNSearch, TrainConfig, frmnn_grid_search, train_lrpca

__all__ = [
    "FRMNNSearch",
    "LRPCAParams",
    "RPCAResult",
    "TrainConfig",
    "altproj",
    "altproj_iteration",
    "data_scale",
    "frmnn_grid_search",
    "load_params",
    "lrpca",
    "lrpca_iteration",
    "lrpca_sharded",
    "lrpca_step",
    "oracle_thresholds",
    "pretrained",
    "row_mesh",
    "save_params",
    "scaledgd",
    "scaledgd_iteration",
    "scaledgd_step",
    "train_lrpca",
]
