"""Synthetic generators of each paper and loaders of real data."""

from lowrank_jax.datasets.rpca import RPCAProblem, random_support, rpca_problem

__all__ = ["RPCAProblem", "random_support", "rpca_problem"]
