"""MF-LR: the unsupervised two-stage baseline — rank-r SVD X_train ≈ UΣVᵀ, features Uᵀx, then
logistic regression (scikit-learn, the ``experiments`` extra)."""

from __future__ import annotations

from typing import Any, NamedTuple

import numpy as np

from lowrank_jax import _checks, linalg
from lowrank_jax.precision import full_precision
from lowrank_jax.sdl import model as sm


class MFLR(NamedTuple):
    """The MF-LR baseline (:func:`mf_lr`): orthonormal gene groups ``U`` (p, r) from an SVD of X and
    a logistic regression on the codes Uᵀx; ``predict`` / ``predict_proba`` take
    X_new (p, n_new)."""

    U: np.ndarray  # (p, r) orthonormal gene groups
    classifier: Any  # fitted sklearn LogisticRegression on Uᵀx

    def codes(self, X_new) -> np.ndarray:
        """Uᵀx of every column of X_new (p, n_new), as rows (n_new, r): the classifier's features.
        ``ValueError`` naming X_new when it is not a finite (p, n_new) matrix."""
        X_new = _checks.as_matrix(X_new, "X_new")
        if X_new.shape[0] != self.U.shape[0]:
            raise ValueError(
                f"X_new must have p = {self.U.shape[0]} rows (features, as the training X), shape "
                f"({self.U.shape[0]}, n_new); got shape {tuple(X_new.shape)}"
            )
        return (self.U.T @ np.asarray(X_new)).T

    def predict(self, X_new):
        return self.classifier.predict(self.codes(X_new))

    def predict_proba(self, X_new):
        return self.classifier.predict_proba(self.codes(X_new))


@_checks.host_function("sdl.mf_lr")
@full_precision
def mf_lr(X, y, rank: int, *, C: float = 1.0) -> MFLR:
    """Fit MF-LR, the two-stage baseline of the SDL paper: unsupervised factors first, then the
    classifier. U (p, r) = the top-``rank`` left singular vectors of X (p, n), then a scikit-learn
    logistic regression (inverse regularisation strength ``C``) on the codes Uᵀx of the samples
    (columns); y (n,) labels 0, …, max(y), each of which must occur, as :func:`lowrank_jax.sdl.fit`
    requires by default (labels {0, 2} are refused by both, so that the two are compared on the same
    classes)."""
    from sklearn.linear_model import LogisticRegression

    X = _checks.as_matrix(X, "X")
    y = sm.check_labels(y, X.shape[1])
    sm.infer_num_classes(y)
    rank = _checks.check_rank(rank, X.shape)
    U = np.asarray(linalg.truncated_svd(X, rank).U)
    clf = LogisticRegression(C=C, max_iter=5000).fit((U.T @ np.asarray(X)).T, y)
    return MFLR(U, clf)
