"""Rescaled softmax regression (Gao, Song, Yin): closed-form curvature and (sketched) Newton.

The paper's Def. 1.2, min_x ‖u(Ax) − ⟨u(Ax), 1⟩ b‖ with u ∈ {exp, cosh, sinh} entrywise, solved
in its regularised form L(x) = ½‖u(Ax) − ⟨u(Ax), 1⟩ b‖² + ½‖diag(w) A x‖² (Eq. 2).

``loss``, ``gradient``, ``hessian`` for each u; the theorem's helpers; the
in-context-learning shift; ``newton_solve`` with exact, diagonal and sketched Hessians, and its
steps as ``newton_solve_iteration``. Design matrices may be dense or sparse (``as_design``
converts a ``BCOO``).
"""

from lowrank_jax.regression import design, sketch
from lowrank_jax.regression.design import RowSparse, as_design
from lowrank_jax.regression.hyperbolic import (
    KINDS,
    Parts,
    approximation_error,
    check_problem,
    curvature_split,
    diagonal_curvature,
    gradient,
    hessian,
    icl_bound,
    icl_shift,
    loss,
    overflow_limit,
    parts,
    psd_certificate,
    radius_R0,
    relative_spectrum,
    sigma_min,
    weight_rule,
)
from lowrank_jax.regression.newton import (
    METHODS,
    NewtonResult,
    newton_solve,
    newton_solve_iteration,
)

__all__ = [
    "KINDS",
    "METHODS",
    "NewtonResult",
    "Parts",
    "RowSparse",
    "approximation_error",
    "as_design",
    "check_problem",
    "curvature_split",
    "design",
    "diagonal_curvature",
    "gradient",
    "hessian",
    "icl_bound",
    "icl_shift",
    "loss",
    "newton_solve",
    "newton_solve_iteration",
    "overflow_limit",
    "parts",
    "psd_certificate",
    "radius_R0",
    "relative_spectrum",
    "sigma_min",
    "sketch",
    "weight_rule",
]
