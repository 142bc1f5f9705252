"""Peers run as their own code, with the settings the comparisons need."""

from __future__ import annotations

import contextlib
import io
import types

import numpy as np


def accaltproj(Y: np.ndarray, rank: int, tol: float, max_iter: int = 200):
    """AccAltProj as PyPI's ``rpca`` 0.1.6 (benchmark extra) runs it, without its column centring.

    The port always subtracts the column means before its iterations (``mean_``); the RPCA
    problems here are Y = X⋆ + S⋆ with no offset, and centring turns a rank-r X⋆ into one of rank
    r + 1, which a rank-r fit cannot recover. During the fit the port's module sees a NumPy whose
    ``mean`` is 0, so its code runs unchanged on the uncentred Y. Returns the fitted model; its X
    is ``L_``.
    """
    from rpca import RobustPCA
    from rpca import rpca as port

    no_mean = types.SimpleNamespace(
        **{k: getattr(np, k) for k in dir(np) if not k.startswith("__")}
    )
    no_mean.mean = lambda X, axis=None: np.zeros(np.shape(X)[1], np.asarray(X).dtype)
    model = RobustPCA(n_components=rank, tol=tol, max_iter=max_iter, verbose=False)
    saved, port.np = port.np, no_mean
    try:
        with contextlib.redirect_stdout(io.StringIO()):
            model.fit(Y)
    finally:
        port.np = saved
    return model
