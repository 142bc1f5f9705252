"""Supervised dictionary learning solvers in the problem zoo (see tests/zoo.py)."""

from typing import Any, NamedTuple

import numpy as np
from zoo import ZooCase

from lowrank_jax import Status, sdl

_RNG = np.random.default_rng(0)
_X = (
    (_RNG.normal(size=(12, 2)) @ _RNG.normal(size=(2, 10)) + 0.1 * _RNG.normal(size=(12, 10))).T
).astype(np.float32) / 4  # (n, p) = (10, 12)
_Y = np.arange(10) % 2
_DATA = sdl.prepare(_X, _Y, intercept=True)
_THETA0, _AUX_COEF0, _F0 = sdl.initial_point(_DATA, 2, "H", 0)


def _lpgd(h, throw):
    return sdl.lpgd(
        _THETA0,
        _AUX_COEF0,
        _DATA,
        1.0,
        0.1,
        h["lr"],
        2,
        model="H",
        tol=1e-4,
        max_iter=500,
        throw=throw,
    )


def _lpgd_iteration(h):
    return sdl.lpgd_iteration(_THETA0, _AUX_COEF0, _DATA, 1.0, 0.1, h["lr"], 2, model="H", tol=1e-4)


def _bcd(h, throw):
    # BCD's steps 1/L_b follow the data: no step to make it diverge, but X scaled past float32's
    # sums of squares does (refused eagerly by prepare's scale check).
    data = sdl.prepare(_X * h["scale"], _Y, intercept=True)
    return sdl.bcd(_F0, _AUX_COEF0, data, 1.0, 0.1, model="H", max_iter=30, throw=throw)


def _bcd_iteration(h):
    data = sdl.prepare(_X * h["scale"], _Y, intercept=True)
    return sdl.bcd_iteration(_F0, _AUX_COEF0, data, 1.0, 0.1, model="H")


# fit with the iteration's (ξ, λ) (its defaults follow the data's scale)
def _fit(h, throw):
    return sdl.fit(
        _X, _Y, 2, model="W", xi=1.0, lam=0.1, lr=h["lr"], tol=1e-4, max_iter=500, throw=throw
    )


def _fit_bcd(h, throw):
    return sdl.fit(
        _X * h["scale"], _Y, 2, model="W", xi=1.0, lam=0.1, solver="bcd", max_iter=30, throw=throw
    )


# fit prepares the data, starts from initial_point and runs a solver: its iteration is the
# solver's, on fit's data and start.
def _fit_iteration(h):
    data = sdl.prepare(_X, _Y, intercept=True)
    theta0, aux_coef0, _ = sdl.initial_point(data, 2, "W", 0)
    return sdl.lpgd_iteration(theta0, aux_coef0, data, 1.0, 0.1, h["lr"], 2, model="W", tol=1e-4)


class _Lifted(NamedTuple):
    """BCD's result as fit reports it: θ = lift(W, H, β)."""

    status: Any
    n_iter: Any
    theta: Any
    aux_coef: Any


def _fit_bcd_iteration(h):
    data = sdl.prepare(_X * h["scale"], _Y, intercept=True)
    _, aux_coef0, f0 = sdl.initial_point(data, 2, "W", 0)
    it = sdl.bcd_iteration(f0, aux_coef0, data, 1.0, 0.1, model="W")

    def result(out):
        r = it.result(out)
        return _Lifted(r.status, r.n_iter, sdl.lift(r.factors, "W"), r.aux_coef)

    return it._replace(result=result)


CASES = [
    ZooCase(
        "sdl.lpgd",
        _lpgd,
        {"lr": 0.2},
        {"lr": 1e6},
        ("theta", "aux_coef"),
        iterate=_lpgd_iteration,
        max_iter=500,
    ),
    ZooCase(
        "sdl.bcd",
        _bcd,
        {"scale": 1.0},
        {"scale": 1e30},
        ("factors.W", "factors.H", "factors.coef", "aux_coef"),
        iterate=_bcd_iteration,
        max_iter=30,
        refused_eagerly=True,
        done=Status.MAX_ITER,
    ),
    ZooCase(
        "sdl.fit",
        _fit,
        {"lr": 0.2},
        {"lr": 1e6},
        ("theta", "aux_coef"),
        iterate=_fit_iteration,
        max_iter=500,
    ),
    ZooCase(
        "sdl.fit_bcd",
        _fit_bcd,
        {"scale": 1.0},
        {"scale": 1e30},
        ("theta", "aux_coef"),
        iterate=_fit_bcd_iteration,
        max_iter=30,
        refused_eagerly=True,
        done=Status.MAX_ITER,
    ),
]
