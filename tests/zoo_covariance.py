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


def _ialm(h, throw):
    # IALM has no step size (μ is capped at μ̄), and its norms are scaled: only a Σ beyond float32's
    # range (entries of inf) makes it diverge.
    return covariance.ialm(_SIGMA * h["scale"], tol=1e-5, max_iter=200, throw=throw)


def _ncrpca(h, throw):
    # μ = μ₀ρᵗ has no cap: ρ = 1e30 overflows float32 in the second iteration.
    return covariance.ncrpca(
        _SIGMA, rho=h["rho"], gamma=0.1, tol=1e-5, max_iter=300, norm="l1", throw=throw
    )


def _fpcp(h, throw):
    # FPCP has no step size and no tolerance (it runs max_iter loops): only a Σ beyond float32's
    # range (entries of inf) makes it diverge.
    return covariance.fpcp(_SIGMA * h["scale"], 2, max_iter=5, throw=throw)


def _rpca_gd(h, throw):
    return covariance.rpca_gd(_SIGMA, 2, alpha=0.1, lr=h["lr"], tol=1e-4, max_iter=300, throw=throw)


CASES = [
    ZooCase("covariance.decompose", _decompose, {"lr": 3e-2}, {"lr": 1e6}, ("M", "L")),
    ZooCase(
        "covariance.ialm", _ialm, {"scale": 1.0}, {"scale": 1e38}, ("L", "S"), refused_eagerly=True
    ),
    ZooCase("covariance.ncrpca", _ncrpca, {"rho": 1.1}, {"rho": 1e30}, ("L", "S")),
    ZooCase(
        "covariance.fpcp",
        _fpcp,
        {"scale": 1.0},
        {"scale": 1e38},
        ("L", "S"),
        refused_eagerly=True,
        done=Status.MAX_ITER,
    ),
    ZooCase("covariance.rpca_gd", _rpca_gd, {"lr": 1.0}, {"lr": 1e8}, ("L", "S")),
]
