"""MF-LR: the unsupervised two-stage baseline — rank-r SVD of the training data (samples in rows,
X ≈ VΣUᵀ), features Uᵀx, then logistic regression (scikit-learn, the ``experiments`` extra)."""

from __future__ import annotations

from typing import Any, NamedTuple

import jax
import numpy as np

from lowrank_jax import _checks, linalg
from lowrank_jax.precision import full_precision
from lowrank_jax.sdl import model as sm


def _features(X_new, name: str, fitted) -> jax.Array:
    """New samples (n_new, p) with the features of the fitted ``MFLR``."""
    X_new = _checks.as_matrix(X_new, name)
    p = fitted.U.shape[0]
    if X_new.shape[1] != p:
        raise ValueError(
            f"{name} must have p = {p} columns (features, as the training X), "
            f"shape (n_new, {p}); got shape {tuple(X_new.shape)}"
        )
    return X_new


def _labels(y, name: str, args) -> np.ndarray:
    """Labels of the rows of X, every class 0, …, max(y) present (as ``lowrank_jax.sdl.fit``
    requires by default)."""
    y = sm.check_labels(y, args["X"].shape[0])
    sm.infer_num_classes(y)
    return y


class MFLR(NamedTuple):
    """The MF-LR baseline, as ``mf_lr`` fits it.

    Attributes:
      U: (p, r) orthonormal feature (gene) groups, the top right singular vectors of X (n, p).
      classifier: the fitted scikit-learn ``LogisticRegression`` on the codes Uᵀx.
    """

    U: np.ndarray
    classifier: Any

    @_checks.validate(X_new=_checks.Convert(lambda v, name, args: _features(v, name, args["self"])))
    def codes(self, X_new) -> np.ndarray:
        """The classifier's features Uᵀx of new samples.

        Args:
          X_new: (n_new, p) samples in rows, finite (``ValueError`` naming X_new otherwise).

        Returns:
          (n_new, r), one row per sample.
        """
        return np.asarray(X_new) @ self.U

    def predict(self, X_new):
        """Predicted labels of new samples.

        Args:
          X_new: (n_new, p) samples in rows.

        Returns:
          (n_new,) labels.
        """
        return self.classifier.predict(self.codes(X_new))

    def predict_proba(self, X_new):
        """Class probabilities of new samples.

        Args:
          X_new: (n_new, p) samples in rows.

        Returns:
          (n_new, κ + 1) probabilities, column c for label c.
        """
        return self.classifier.predict_proba(self.codes(X_new))


@_checks.host_function("sdl.mf_lr")
@full_precision
@_checks.validate(X=_checks.Matrix(), y=_checks.Convert(_labels), rank=_checks.Rank(of="X"))
def mf_lr(X, y, rank: int, *, C: float = 1.0) -> MFLR:
    """Fit MF-LR, the two-stage baseline of the SDL paper: unsupervised factors first, then the
    classifier. With the rank-r SVD Xᵀ ≈ UΣVᵀ (U (p, r) the feature groups), a scikit-learn
    logistic regression is fitted on the codes Uᵀx of the samples.

    Args:
      X: (n, p) training data, samples in rows.
      y: (n,) labels 0, …, max(y), each of which must occur, as ``lowrank_jax.sdl.fit``
        requires by default (labels {0, 2} are refused by both, so that the two are compared on
        the same classes).
      rank: r, 1 ≤ r ≤ min(n, p).
      C: the logistic regression's inverse regularisation strength (default 1).

    Returns:
      ``MFLR`` (U (p, r), the fitted classifier).
    """
    from sklearn.linear_model import LogisticRegression

    U = np.asarray(linalg.truncated_svd(X.T, rank).U)
    clf = LogisticRegression(C=C, max_iter=5000).fit(np.asarray(X) @ U, y)
    return MFLR(U, clf)
