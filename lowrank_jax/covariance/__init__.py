"""Low-rank + sparse decomposition of covariance matrices: the neural-network parametrisation
(:mod:`.nn`), classical baselines (:mod:`.baselines`) and metrics (:mod:`.metrics`)."""

from lowrank_jax.covariance.nn import (ACTIVATIONS, LOSSES, OPTIMIZERS, CovNet, Decomposition, activation, decompose,
                                       grad_of_M, half_vec, init_network, loss_of_M, smooth_abs, smooth_abs_grad)

__all__ = ["ACTIVATIONS", "CovNet", "Decomposition", "LOSSES", "OPTIMIZERS", "activation", "decompose", "grad_of_M",
           "half_vec", "init_network", "loss_of_M", "smooth_abs", "smooth_abs_grad"]
