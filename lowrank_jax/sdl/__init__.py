"""Supervised dictionary learning (SDL-H, SDL-W) by lifted projected gradient descent.

``fit`` / ``predict`` / ``predict_proba`` / ``cross_validate`` (``sdl.fit``), the lifted objective,
gradients, factor recovery and Theorem 2.1's constants (``sdl.model``), LPGD and the BCD baseline
with their iterations ``lpgd_iteration`` / ``bcd_iteration`` (``sdl.solvers``; LPGD's steps in the
span of the data, ``sdl.span``), MF-LR (``sdl.baselines``), and the scikit-learn estimator
``SDLClassifier`` (``sdl.estimator``, imported on first use: it needs scikit-learn).

Data are samples in rows at every entry point — X (n, p), X_aux (n, q) — and transposed once into
the paper's layout (columns are samples) by ``prepare``; the fitted factors keep that layout:
W (p, r) the dictionary, H (r, n) the codes, ``coef`` β (r, κ), ``aux_coef`` γ (q, κ).
"""

from lowrank_jax.sdl.baselines import MFLR, mf_lr
from lowrank_jax.sdl.fit import (
    CrossValidation,
    SDLModel,
    activations,
    cross_validate,
    default_lam,
    default_xi,
    fit,
    initial_point,
    predict,
    predict_proba,
    stratified_folds,
)
from lowrank_jax.sdl.model import (
    MODELS,
    Factors,
    SDLData,
    Theory,
    class_probs,
    factors,
    gradients,
    lift,
    nll,
    objective,
    one_hot,
    prepare,
    softmax_curvature,
    step_bound,
    theory,
)
from lowrank_jax.sdl.solvers import (
    BCDResult,
    SolveResult,
    bcd,
    bcd_iteration,
    factored_objective,
    lpgd,
    lpgd_iteration,
    resolve_span,
)

__all__ = [
    "BCDResult",
    "CrossValidation",
    "Factors",
    "MFLR",
    "MODELS",
    "SDLData",
    "SDLModel",
    "SolveResult",
    "Theory",
    "activations",
    "bcd",
    "bcd_iteration",
    "class_probs",
    "cross_validate",
    "default_lam",
    "default_xi",
    "factored_objective",
    "factors",
    "fit",
    "gradients",
    "initial_point",
    "lift",
    "lpgd",
    "lpgd_iteration",
    "mf_lr",
    "nll",
    "objective",
    "one_hot",
    "predict",
    "predict_proba",
    "prepare",
    "resolve_span",
    "softmax_curvature",
    "step_bound",
    "stratified_folds",
    "theory",
]


def __getattr__(name: str):
    """``SDLClassifier`` from ``lowrank_jax.sdl.estimator``, imported on first use so that
    ``import lowrank_jax`` does not need scikit-learn (an ``ImportError`` naming
    ``pip install scikit-learn`` when it is missing).

    Args:
      name: the attribute asked for.

    Returns:
      ``lowrank_jax.sdl.estimator.SDLClassifier`` for ``"SDLClassifier"``; any other name is
      an ``AttributeError``.
    """
    if name == "SDLClassifier":
        from lowrank_jax.sdl.estimator import SDLClassifier

        return SDLClassifier
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
