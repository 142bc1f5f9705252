"""Matrix-product precision of the solvers: full float32 unless the caller chose otherwise.

JAX leaves the precision of a float32 matrix product to the backend when none is named. On a CPU
that is full float32; on recent NVIDIA GPUs it is TensorFloat-32 (a 10-bit mantissa, relative error
~1e-3 per product) and on TPUs a single bfloat16 pass (~4e-3). The solvers here iterate to relative
errors of 1e-6 … 1e-8 in float32 (LRPCA, ScaledGD, LPGD, Newton), and at TF32 they stall near 1e-4
or drift: a loss history that should fall can rise, and a sweep's points stop matching their single
runs.

So every solver traces its products with ``jax.default_matmul_precision("highest")`` — full float32
on every backend, the same numbers the CPU gives — **unless the caller has set a precision**, which
is then kept:

    rpca.lrpca(Y, r, zeta, eta)        # full float32 products everywhere
    # opt in to TF32 on a GPU (faster, relative error ~1e-3 per product):
    with jax.default_matmul_precision("tensorfloat32"):
        rpca.lrpca(Y, r, zeta, eta)

(``jax.config.update("jax_default_matmul_precision", ...)`` sets it for the whole process.) The
precision is part of what JAX traces, so it also holds inside a caller's ``jit``, ``vmap``, ``grad``
(custom derivative rules, which JAX traces after the solver has returned, carry the same decorator)
and ``lowrank_jax.sweep.run``. So do the leverage scores and the sampled Gram matrix
(``lowrank_jax.regression.sketch``), SDL's initial point, which users compute to pass to a
solver, and the factorisations of ``lowrank_jax.linalg`` that stand in for ``jnp.linalg.svd``
(Gram, randomized, best rank-r approximation, balanced factors; ``prox.project_rank`` through them).
Building blocks (losses, gradients, Hessians, prox operators) follow the caller's setting as any
``jnp`` code does. On a CPU the setting changes no number and no speed: XLA's CPU products are full
float32 either way.
"""

from __future__ import annotations

import contextlib
import functools

import jax

_FULL = "highest"


def chosen() -> str | None:
    """The matrix-product precision the caller set, or None.

    Returns:
      The value set by ``jax.default_matmul_precision`` or the ``jax_default_matmul_precision``
      config option (a string such as ``"highest"`` or ``"tensorfloat32"``), or None when neither is
      set.
    """
    return jax.config.jax_default_matmul_precision  # type: ignore[attr-defined]


def full_precision_context():
    """A context that traces float32 matrix products at full precision, unless the caller chose one.

    Returns:
      ``jax.default_matmul_precision("highest")`` when ``chosen`` is None, else a context that
      changes nothing.
    """
    if chosen() is not None:
        return contextlib.nullcontext()
    return jax.default_matmul_precision(_FULL)


def full_precision(fn):
    """Decorator: run ``fn`` under ``full_precision_context``.

    For a solver, or a custom derivative rule, which JAX traces after the solver has returned (so it
    needs the decorator of its own).

    Args:
      fn: the function to wrap.

    Returns:
      A function with ``fn``'s signature and metadata (``functools.wraps``) that calls it inside the
      context.
    """

    @functools.wraps(fn)
    def wrapped(*args, **kwargs):
        with full_precision_context():
            return fn(*args, **kwargs)

    return wrapped


__all__ = ["chosen", "full_precision", "full_precision_context"]
