"""lowrank_jax: functional JAX solvers for low-rank, sparse and proximal problems.

Shared building blocks: :mod:`lowrank_jax.linalg`, :mod:`lowrank_jax.prox`, :mod:`lowrank_jax.loop`,
:mod:`lowrank_jax.transforms`. Families: :mod:`lowrank_jax.rpca`. Data: :mod:`lowrank_jax.datasets`.
"""

from lowrank_jax import datasets, design, linalg, loop, pathnorm, prox, regression, rpca, selection, sketch, transforms

__version__ = "0.1.0"
__all__ = ["datasets", "design", "linalg", "loop", "pathnorm", "prox", "regression", "rpca", "selection", "sketch",
           "transforms"]
