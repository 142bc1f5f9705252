"""Synthetic generators of each paper and loaders of real data."""

from lowrank_jax.datasets.covariance import (
    CorrelationData,
    LRSProblem,
    load_french_correlation,
    load_sp500_correlation,
    lrs_problem,
    sp500_demo_matrix,
)
from lowrank_jax.datasets.digits import (
    ImageData,
    load_fashion_mnist,
    load_mnist_5k,
    stratified_split,
)
from lowrank_jax.datasets.genes import (
    GeneData,
    load_all_leukemia,
    load_golub,
    load_nci60,
    standardize,
)
from lowrank_jax.datasets.rpca import RPCAProblem, random_support, rpca_problem
from lowrank_jax.datasets.video import Video, load_vtest

__all__ = [
    "CorrelationData",
    "LRSProblem",
    "load_french_correlation",
    "load_sp500_correlation",
    "lrs_problem",
    "sp500_demo_matrix",
    "GeneData",
    "ImageData",
    "RPCAProblem",
    "Video",
    "load_all_leukemia",
    "load_fashion_mnist",
    "load_golub",
    "load_mnist_5k",
    "load_nci60",
    "load_vtest",
    "random_support",
    "rpca_problem",
    "standardize",
    "stratified_split",
]
