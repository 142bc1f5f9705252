"""Shallow networks regularised by the 1-path-norm, ℓ1, or a layer-wise constraint; Prox-SGD; PGD.

Latorre, Rolland, Hallak, Cevher, ICML 2020. The network is

    h(x) = W_out · elu(W_in x + b_in) + b_out,
    W_in (hidden, inputs),   W_out (outputs, hidden),

an ``equinox`` module initialised like PyTorch's ``nn.Linear`` (uniform ±1/√fan_in, as the
authors' code). Training minimises mean cross-entropy + λ g(W_in, W_out), biases unregularised:

    "path":  g = Σ_i ‖W_out[:, i]‖₁ ‖W_in[i, :]‖₁
             (bounds the ℓ∞ → ℓ1 Lipschitz constant)
    "l1":    g = ‖W_in‖₁ + ‖W_out‖₁
    "layer": ‖W_in‖∞ ≤ 1/λ and ‖W_out‖∞ ≤ 1/λ
             (max row ℓ1 norms; Cisse et al. 2017)

each in two ways (``method``): "sgd", plain SGD on the penalised loss with autodiff (sub)gradients
(the paper's "SGD"; for "layer" the penalty λ Σ_layers max-row-ℓ1, as the authors' code), and
"prox", SGD on the cross-entropy followed by the prox of (learning rate × λ) g — the exact global
path-norm prox, soft thresholding — or, for "layer", the projection onto the constraint (radius
1/λ as the paper says; the authors' code passes lr·λ). All are
``transforms.proximal(optax.sgd(lr), ...)`` or ``optax.sgd`` and run under one ``jit``; λ and the
learning rate are traced, so ``train`` ``vmap``s over them (``sweep``).

Modules: the exact path-norm prox, the norm and the ℓ1-ball projection (``pathnorm.prox``); the
network, its losses, penalties, prox step and sparsity (``pathnorm.network``); the optimizer,
``train`` and ``sweep``, returning a ``TrainResult`` (``pathnorm.training``); the error
rate and the PGD attack (``pathnorm.robustness``).
"""

from lowrank_jax.pathnorm.network import (
    METHODS,
    REGULARIZERS,
    ShallowNet,
    cross_entropy,
    lipschitz_bounds,
    loss_fn,
    nonzero_fraction,
    penalty,
    prox_step,
)
from lowrank_jax.pathnorm.prox import (
    path_norm,
    path_norm_objective,
    path_norm_prox,
    project_l1_ball_rows,
    sort_magnitudes,
)
from lowrank_jax.pathnorm.robustness import error_rate, pgd_attack, robust_error
from lowrank_jax.pathnorm.training import (
    GROWTH_LIMIT,
    TrainResult,
    optimizer,
    sweep,
    train,
    train_iteration,
)

__all__ = [
    "GROWTH_LIMIT",
    "METHODS",
    "REGULARIZERS",
    "ShallowNet",
    "TrainResult",
    "cross_entropy",
    "error_rate",
    "lipschitz_bounds",
    "loss_fn",
    "nonzero_fraction",
    "optimizer",
    "path_norm",
    "path_norm_objective",
    "path_norm_prox",
    "penalty",
    "pgd_attack",
    "project_l1_ball_rows",
    "prox_step",
    "robust_error",
    "sort_magnitudes",
    "sweep",
    "train",
    "train_iteration",
]
