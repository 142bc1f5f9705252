"""lowrank_jax: functional JAX solvers for low-rank, sparse and proximal problems.

Shared building blocks: ``lowrank_jax.result``, ``lowrank_jax.linalg``,
``lowrank_jax.prox``, ``lowrank_jax.selection``, ``lowrank_jax.loop``,
``lowrank_jax.transforms``, ``lowrank_jax.sweep``, ``lowrank_jax.progress``,
``lowrank_jax.precision``. Families: ``lowrank_jax.rpca``, ``lowrank_jax.regression``,
``lowrank_jax.pathnorm``, ``lowrank_jax.sdl``, ``lowrank_jax.covariance``. Data:
``lowrank_jax.datasets``. Interactive use: ``enable_compilation_cache`` (``lowrank_jax.cache``).
"""

from lowrank_jax import (
    cache,
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
from lowrank_jax.cache import enable_compilation_cache
from lowrank_jax.result import Result, Status

__version__ = "0.1.0"
__all__ = [
    "Result",
    "Status",
    "cache",
    "covariance",
    "enable_compilation_cache",
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
