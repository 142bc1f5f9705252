"""Low-rank + sparse decomposition of covariance matrices: the neural-network parametrisation
(:mod:`.nn`, Baes, Herrera, Neufeld, Ruyssen 2021), classical baselines IALM, FPCP and RPCA-GD
(:mod:`.baselines`) and the paper's metrics (:mod:`.metrics`)."""

from lowrank_jax.covariance.baselines import BaselineResult, fpcp, ialm, rpca_gd
from lowrank_jax.covariance.metrics import (RealDataErrors, check_symmetric, default_shrink, rank_above,
                                            real_data_errors, rel_error, report, shrink, sparsity)
from lowrank_jax.covariance.nn import (ACTIVATIONS, LOSSES, OPTIMIZERS, CovNet, Decomposition, activation, decompose,
                                       grad_of_M, half_vec, init_network, loss_of_M, smooth_abs, smooth_abs_grad)

__all__ = ["ACTIVATIONS", "BaselineResult", "CovNet", "Decomposition", "LOSSES", "OPTIMIZERS", "RealDataErrors",
           "activation", "check_symmetric", "decompose", "default_shrink", "fpcp", "grad_of_M", "half_vec", "ialm",
           "init_network", "loss_of_M", "rank_above", "real_data_errors", "rel_error", "report", "rpca_gd", "shrink",
           "smooth_abs", "smooth_abs_grad", "sparsity"]
