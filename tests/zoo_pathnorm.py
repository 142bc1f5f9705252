"""The path-norm trainer in the problem zoo (see tests/zoo.py): Prox-SGD with the exact path-norm
prox on a small two-class problem. Training runs its epochs with no stopping rule, so a good run
ends in MAX_ITER; a learning rate of 1e6 blows the weights up (finite, but a million-fold) within
the three epochs."""

import jax
import numpy as np
from zoo import ZooCase

from lowrank_jax import Status, pathnorm

_rng = np.random.default_rng(0)
_X = _rng.random((40, 6)).astype(np.float32)
_Y = (_X[:, :3].sum(1) > _X[:, 3:].sum(1)).astype(np.int32)


_SETUP = dict(reg="path", method="prox", lam=1e-2, batch=10, hidden=4, logs_per_epoch=2, outputs=2)


def _train(h, throw):
    return pathnorm.train(
        _X, _Y, lr=h["lr"], epochs=3, throw=throw, key=jax.random.key(0), **_SETUP
    )


def _train_iteration(h):
    return pathnorm.train_iteration(_X, _Y, lr=h["lr"], key=jax.random.key(0), **_SETUP)


CASES = [
    ZooCase(
        "pathnorm.train",
        _train,
        {"lr": 0.1},
        {"lr": 1e6},
        ("model.hidden.weight", "model.out.weight", "loss"),
        iterate=_train_iteration,
        max_iter=3,
        done=Status.MAX_ITER,
    ),
]
