"""Covariance low-rank + sparse solvers in the problem zoo (see tests/zoo.py)."""

import numpy as np
from zoo import ZooCase

from lowrank_jax import Status, covariance


def _planted(n=16, rank=2, pairs=6, seed=0):
    """Σ = MMᵀ + S₀ (float32) with S₀ a few symmetric off-diagonal spikes."""
    rng = np.random.default_rng(seed)
    M = rng.normal(size=(n, rank))
    S0 = np.zeros((n, n))
    for _ in range(pairs):
        i, j = rng.choice(n, 2, replace=False)
        S0[i, j] = S0[j, i] = rng.uniform(2.0, 4.0) * rng.choice([-1.0, 1.0])
    return (M @ M.T + S0).astype(np.float32)


_SIGMA = _planted()


def _decompose(h, throw):
    return covariance.decompose(
        _SIGMA,
        2,
        hidden=(8,),
        loss="huber",
        optimizer="adam",
        lr=h["lr"],
        max_iter=300,
        tol=1e-4,
        key=0,
        throw=throw,
    )


def _decompose_iteration(h):
    return covariance.decompose_iteration(
        _SIGMA, 2, hidden=(8,), loss="huber", optimizer="adam", lr=h["lr"], tol=1e-4, key=0
    )


def _ialm(h, throw):
    # IALM has no step size (μ is capped at μ̄), and its norms are scaled: only a Σ beyond float32's
    # range (entries of inf) makes it diverge.
    return covariance.ialm(_SIGMA * h["scale"], tol=1e-5, max_iter=200, throw=throw)


def _ialm_iteration(h):
    return covariance.ialm_iteration(_SIGMA * h["scale"], tol=1e-5)


def _ncrpca(h, throw):
    # μ = μ₀ρᵗ has no cap: ρ = 1e30 overflows float32 in the second iteration.
    return covariance.ncrpca(
        _SIGMA, rho=h["rho"], gamma=0.1, tol=1e-5, max_iter=300, norm="l1", throw=throw
    )


def _ncrpca_iteration(h):
    return covariance.ncrpca_iteration(_SIGMA, rho=h["rho"], gamma=0.1, tol=1e-5, norm="l1")


def _fpcp(h, throw):
    # FPCP has no step size and no tolerance (it runs max_iter loops): only a Σ beyond float32's
    # range (entries of inf) makes it diverge.
    return covariance.fpcp(_SIGMA * h["scale"], 2, max_iter=5, throw=throw)


def _fpcp_iteration(h):
    return covariance.fpcp_iteration(_SIGMA * h["scale"], 2)


def _rpca_gd(h, throw):
    return covariance.rpca_gd(_SIGMA, 2, alpha=0.1, lr=h["lr"], tol=1e-4, max_iter=300, throw=throw)


def _rpca_gd_iteration(h):
    return covariance.rpca_gd_iteration(_SIGMA, 2, alpha=0.1, lr=h["lr"], tol=1e-4)


CASES = [
    ZooCase(
        "covariance.decompose",
        _decompose,
        {"lr": 3e-2},
        {"lr": 1e6},
        ("M", "L"),
        iterate=_decompose_iteration,
        max_iter=300,
    ),
    ZooCase(
        "covariance.ialm",
        _ialm,
        {"scale": 1.0},
        {"scale": 1e38},
        ("L", "S"),
        iterate=_ialm_iteration,
        max_iter=200,
        refused_eagerly=True,
    ),
    ZooCase(
        "covariance.ncrpca",
        _ncrpca,
        {"rho": 1.1},
        {"rho": 1e30},
        ("L", "S"),
        iterate=_ncrpca_iteration,
        max_iter=300,
    ),
    ZooCase(
        "covariance.fpcp",
        _fpcp,
        {"scale": 1.0},
        {"scale": 1e38},
        ("L", "S"),
        iterate=_fpcp_iteration,
        max_iter=5,
        refused_eagerly=True,
        done=Status.MAX_ITER,
    ),
    ZooCase(
        "covariance.rpca_gd",
        _rpca_gd,
        {"lr": 1.0},
        {"lr": 1e8},
        ("L", "S"),
        iterate=_rpca_gd_iteration,
        max_iter=300,
    ),
]
