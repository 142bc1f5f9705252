"""lowrank_jax: functional JAX solvers for low-rank, sparse and proximal problems.

Shared building blocks: :mod:`lowrank_jax.result`, :mod:`lowrank_jax.linalg`,
:mod:`lowrank_jax.prox`, :mod:`lowrank_jax.selection`, :mod:`lowrank_jax.loop`,
:mod:`lowrank_jax.transforms`, :mod:`lowrank_jax.sweep`, :mod:`lowrank_jax.progress`,
:mod:`lowrank_jax.precision`. Families: :mod:`lowrank_jax.rpca`, :mod:`lowrank_jax.regression`,
:mod:`lowrank_jax.pathnorm`, :mod:`lowrank_jax.sdl`, :mod:`lowrank_jax.covariance`. Data:
:mod:`lowrank_jax.datasets`.
"""

from lowrank_jax import (
    covariance,
    datasets,
    linalg,
    loop,
    pathnorm,
    precision,
    prox,
    regression,
    result,
    rpca,
    sdl,
    selection,
    sweep,
    transforms,
)
from lowrank_jax.result import Result, Status

__version__ = "0.1.0"
__all__ = [
    "Result",
    "Status",
    "covariance",
    "datasets",
    "linalg",
    "loop",
    "pathnorm",
    "precision",
    "prox",
    "regression",
    "result",
    "rpca",
    "sdl",
    "selection",
    "sweep",
    "transforms",
]
