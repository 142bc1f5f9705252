"""A scikit-learn classifier around ``lowrank_jax.sdl.fit``: ``SDLClassifier``.

Samples are in rows, X (n_samples, n_features), as in every scikit-learn estimator and in
``lowrank_jax.sdl.fit`` itself; labels may be any values (strings too), mapped to 0, …, K − 1
in the order of ``classes_``, the first class the softmax reference. The estimator validates its
input with scikit-learn's own utilities and passes scikit-learn's estimator checks
(``sklearn.utils.estimator_checks``); ``tests/test_sdl_estimator.py`` runs the named subset that
fits within the test suite's time budget and lists the rest with the reason each is left out.

This module needs scikit-learn (``pip install scikit-learn``); ``import lowrank_jax`` does not, and
``lowrank_jax.sdl.SDLClassifier`` imports this module on first use.
"""

from __future__ import annotations

import numpy as np

try:
    from sklearn.base import BaseEstimator, ClassifierMixin
    from sklearn.utils import check_random_state
    from sklearn.utils.multiclass import check_classification_targets
    from sklearn.utils.validation import check_is_fitted, validate_data
except ImportError as err:  # pragma: no cover - exercised only without scikit-learn
    raise ImportError(
        "lowrank_jax.sdl.SDLClassifier needs scikit-learn 1.6 or newer: "
        "pip install 'scikit-learn>=1.6'"
    ) from err

from lowrank_jax.sdl.fit import fit as sdl_fit
from lowrank_jax.sdl.fit import predict_proba as sdl_predict_proba


class SDLClassifier(ClassifierMixin, BaseEstimator):
    """Supervised dictionary learning (SDL-H or SDL-W, ``lowrank_jax.sdl.fit``) as a
    scikit-learn classifier. With the lifted θ of rank ≤ r and the covariates' coefficients γ it
    minimises

        F(θ, γ) = Σ_s ℓ(y_s, a_s) + ξ‖X − B‖²_F + λ(‖A‖²_F + ‖γ‖²_F)

    by LPGD (or BCD), and predicts by ``lowrank_jax.sdl.predict_proba``. The parameters keep
    ``lowrank_jax.sdl.fit``'s names and defaults; ``rank`` above what the training data allow
    is lowered to min(n_samples, n_features), the rank used is ``rank_``.

    Units are ``lowrank_jax.sdl.fit``'s: at its chosen step it solves on X/s (s² the mean
    squared sample norm) and maps the model back, so X and c·X fit alike.

    Args:
      rank: r, the number of dictionary atoms (default 2).
      model: "H" (SDL-H, default) or "W" (SDL-W).
      xi, lam: ξ, λ ≥ 0, or None (default) for ``lowrank_jax.sdl.fit``'s scale-aware
        defaults.
      max_iter: LPGD steps (or BCD sweeps), default 1000.
      tol: LPGD's relative step tolerance (default 1e-6; None runs ``max_iter`` steps).
      intercept: fit an unpenalised intercept (default True).
      init: "svd" (default) or "random".
      solver: "lpgd" (default) or "bcd".
      coding: how SDL-H codes new samples, "lstsq" (default) or "supervised".
      random_state: integer seed of the random parts of the start (β₀), a NumPy ``RandomState``
        (one integer is drawn from it), or None (default) for seed 0: fits are deterministic.

    Attributes:
      model_: the fitted ``lowrank_jax.sdl.SDLModel``.
      classes_: the sorted distinct training labels; column c of ``predict_proba`` is
        ``classes_[c]``, and ``classes_[0]`` is the softmax reference.
      n_features_in_: the number of features; ``feature_names_in_`` too when X had string column
        names.
      n_iter_: the LPGD steps (or BCD sweeps) taken.
      rank_: the rank used, min(rank, n_samples, n_features).

    Example:
        ```python
        import numpy as np
        from sklearn.pipeline import make_pipeline
        from sklearn.preprocessing import StandardScaler
        from lowrank_jax.sdl import SDLClassifier

        rng = np.random.default_rng(0)
        X = rng.normal(size=(60, 8))
        y = np.where(X[:, 0] + X[:, 1] > 0, "yes", "no")
        clf = make_pipeline(StandardScaler(), SDLClassifier(rank=2, model="W"))
        clf.fit(X[:40], y[:40])
        print(clf.score(X[40:], y[40:]))  # held-out accuracy, labels as given
        ```
    """

    def __init__(
        self,
        rank: int = 2,
        *,
        model: str = "H",
        xi=None,
        lam=None,
        max_iter: int = 1000,
        tol=1e-6,
        intercept: bool = True,
        init: str = "svd",
        solver: str = "lpgd",
        coding: str = "lstsq",
        random_state=None,
    ):
        self.rank = rank
        self.model = model
        self.xi = xi
        self.lam = lam
        self.max_iter = max_iter
        self.tol = tol
        self.intercept = intercept
        self.init = init
        self.solver = solver
        self.coding = coding
        self.random_state = random_state

    def fit(self, X, y):
        """Fit the model to samples X (n_samples, n_features) with labels y (n_samples,).

        Args:
          X: array-like (n_samples, n_features), finite.
          y: array-like (n_samples,), at least two distinct labels of any kind.

        Returns:
          self, fitted.
        """
        X, y = validate_data(self, X, y, dtype=[np.float64, np.float32])
        check_classification_targets(y)
        self.classes_, codes = np.unique(y, return_inverse=True)
        if self.classes_.size < 2:
            raise ValueError(
                "SDLClassifier needs samples of at least 2 classes, got 1 class "
                f"({self.classes_[0]!r})"
            )
        n, p = X.shape
        self.rank_ = min(int(self.rank), n, p) if _is_int(self.rank) else self.rank
        if isinstance(self.random_state, (int, np.integer)):
            seed = int(self.random_state)
        elif self.random_state is None:
            seed = 0
        else:
            seed = int(check_random_state(self.random_state).randint(2**31 - 1))
        self.model_ = sdl_fit(
            X,
            codes,
            self.rank_,
            model=self.model,
            xi=self.xi,
            lam=self.lam,
            max_iter=self.max_iter,
            tol=self.tol,
            intercept=self.intercept,
            key=seed,
            init=self.init,
            solver=self.solver,
            num_classes=self.classes_.size,
        )
        self.n_iter_ = int(self.model_.n_iter)
        return self

    def predict_proba(self, X):
        """Class probabilities of new samples (``lowrank_jax.sdl.predict_proba``).

        Args:
          X: array-like (n_samples, n_features).

        Returns:
          NumPy array (n_samples, n_classes), columns in the order of ``classes_``.
        """
        check_is_fitted(self, "model_")
        X = validate_data(self, X, reset=False, dtype=[np.float64, np.float32])
        return np.asarray(sdl_predict_proba(self.model_, X, coding=self.coding))

    def predict(self, X):
        """Predicted labels of new samples: the class of largest probability.

        Args:
          X: array-like (n_samples, n_features).

        Returns:
          NumPy array (n_samples,) of labels taken from ``classes_``.
        """
        check_is_fitted(self, "model_")
        return self.classes_[np.argmax(self.predict_proba(X), axis=1)]

    def __sklearn_tags__(self):
        """scikit-learn's tags: a classifier of dense, finite data, multiclass, deterministic.

        Returns:
          ``sklearn.utils.Tags``.
        """
        tags = super().__sklearn_tags__()
        tags.classifier_tags.multi_class = True
        tags.input_tags.allow_nan = False
        tags.input_tags.sparse = False
        return tags


def _is_int(value) -> bool:
    return isinstance(value, (int, np.integer)) and not isinstance(value, bool)
