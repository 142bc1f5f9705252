"""Robust PCA solvers in the problem zoo (see tests/zoo.py)."""

import jax
import jax.numpy as jnp
from zoo import ZooCase

from lowrank_jax import datasets, rpca

_P = datasets.rpca_problem(jax.random.key(0), 60, 60, rank=2, alpha=0.1)
_ZETA = rpca.oracle_thresholds(_P.Y, 2, _P.X, num_layers=4)


def _lrpca(h, throw):
    return rpca.lrpca(
        _P.Y,
        2,
        _ZETA,
        jnp.full(4, h["eta"]),
        beta=1.0,
        phi=0.7,
        tol=1e-4,
        max_iter=200,
        throw=throw,
    )


def _lrpca_iteration(h):
    return rpca.lrpca_iteration(_P.Y, 2, _ZETA, jnp.full(4, h["eta"]), beta=1.0, phi=0.7, tol=1e-4)


def _lrpca_sharded(h, throw):
    return rpca.lrpca_sharded(
        _P.Y,
        2,
        _ZETA,
        jnp.full(4, h["eta"]),
        beta=1.0,
        phi=0.7,
        tol=1e-4,
        max_iter=200,
        oversample=2,
        throw=throw,
    )


def _scaledgd(h, throw):
    return rpca.scaledgd(_P.Y, 2, 0.1, eta=h["eta"], tol=1e-4, max_iter=300, throw=throw)


def _scaledgd_iteration(h):
    return rpca.scaledgd_iteration(_P.Y, 2, 0.1, eta=h["eta"], tol=1e-4)


def _altproj(h, throw):
    # AltProj has no step size; a Y scaled to overflow float32 makes it diverge.
    return rpca.altproj(_P.Y * h["scale"], 2, tol=1e-4, max_iter=200, throw=throw)


def _altproj_iteration(h):
    return rpca.altproj_iteration(_P.Y * h["scale"], 2, tol=1e-4)


CASES = [
    ZooCase(
        "rpca.lrpca",
        _lrpca,
        {"eta": 0.5},
        {"eta": 1e8},
        ("X", "S"),
        iterate=_lrpca_iteration,
        max_iter=200,
    ),
    ZooCase("rpca.lrpca_sharded", _lrpca_sharded, {"eta": 0.5}, {"eta": 1e8}, ("X", "S")),
    ZooCase(
        "rpca.scaledgd",
        _scaledgd,
        {"eta": 0.5},
        {"eta": 1e8},
        ("X", "S"),
        iterate=_scaledgd_iteration,
        max_iter=300,
    ),
    ZooCase(
        "rpca.altproj",
        _altproj,
        {"scale": 1.0},
        {"scale": 1e30},
        ("X", "S"),
        iterate=_altproj_iteration,
        max_iter=200,
        refused_eagerly=True,
    ),
]
