"""Low-rank + sparse decomposition of covariance matrices: the neural-network parametrisation
(:mod:`.nn`, Baes, Herrera, Neufeld, Ruyssen 2021), classical baselines IALM, NC-RPCA, FPCP and
RPCA-GD (:mod:`.baselines`) and the paper's metrics (:mod:`.metrics`)."""

from lowrank_jax.covariance.baselines import (
    BaselineResult,
    fpcp,
    gamma_norm_shrink,
    ialm,
    ncrpca,
    rpca_gd,
)
from lowrank_jax.covariance.metrics import (
    RealDataErrors,
    check_symmetric,
    default_shrink,
    is_shrunk,
    rank_above,
    real_data_errors,
    relative_error,
    report,
    sparsity,
)
from lowrank_jax.covariance.nn import (
    ACTIVATIONS,
    LOSSES,
    OPTIMIZERS,
    CovNet,
    Decomposition,
    activation,
    decompose,
    grad_of_M,
    half_vec,
    init_network,
    loss_of_M,
    smooth_abs,
    smooth_abs_grad,
)

__all__ = [
    "ACTIVATIONS",
    "BaselineResult",
    "CovNet",
    "Decomposition",
    "LOSSES",
    "OPTIMIZERS",
    "RealDataErrors",
    "activation",
    "check_symmetric",
    "decompose",
    "default_shrink",
    "fpcp",
    "gamma_norm_shrink",
    "grad_of_M",
    "half_vec",
    "ialm",
    "init_network",
    "is_shrunk",
    "loss_of_M",
    "ncrpca",
    "rank_above",
    "real_data_errors",
    "relative_error",
    "report",
    "rpca_gd",
    "smooth_abs",
    "smooth_abs_grad",
    "sparsity",
]
