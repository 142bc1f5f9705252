"""Synthetic generators of each paper and loaders of real data."""

from lowrank_jax.datasets.rpca import RPCAProblem, random_support, rpca_problem
from lowrank_jax.datasets.video import Video, load_vtest

__all__ = ["RPCAProblem", "Video", "load_vtest", "random_support", "rpca_problem"]
