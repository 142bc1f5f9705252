"""Synthetic generators of each paper and loaders of real data."""

from lowrank_jax.datasets.digits import (ImageData, load_fashion_mnist, load_mnist_5k,
                                       stratified_split)
from lowrank_jax.datasets.rpca import RPCAProblem, random_support, rpca_problem
from lowrank_jax.datasets.video import Video, load_vtest

__all__ = ["ImageData", "RPCAProblem", "Video", "load_fashion_mnist", "load_mnist_5k", "load_vtest",
           "random_support", "rpca_problem", "stratified_split"]
