"""LRPCA on a matrix split by rows across devices (``jax.shard_map``): for Y too large for one
device.

Device i holds rows Y_i (n1/D × n2) and the matching rows L_i of the left factor; R (n2 × r) is
replicated. One layer (LRPCA eq. 7 + 9) is then

    E_i  = −clip(Y_i − L_i Rᵀ, −ζ, ζ)              (local, panel by panel)
    L_i⁺ = L_i − η E_i R (RᵀR)⁻¹                    (local)
    R⁺   = R − η (Σ_i E_iᵀ L_i)(Σ_i L_iᵀ L_i)⁻¹      (psum of (n2, r) and (r, r))

— the iteration of the single-device solver (``lowrank_jax.rpca.lrpca_iteration``: its
step ``lowrank_jax.rpca.lrpca_step``, its schedule and its residual), built on each device's
rows with its reductions named by the mesh axis and run by ``lowrank_jax.loop.run`` inside
``shard_map``. The spectral initialisation is ``lowrank_jax.linalg.randomized_svd`` with
``axis_name`` (TSQR for the row-split orthonormalisations, ``psum`` for the column-side
products). Nothing of size n1 × n2 crosses devices; per layer the traffic is O(n2 r + r²) per
device.

The result equals the single-device ``lrpca`` with the same key up to
floating-point rounding (sums are taken in a different order), which the tests check on 8
simulated CPU devices. The same code runs on several GPUs/TPUs, and across hosts after
``jax.distributed.initialize()`` with a mesh over ``jax.devices()`` (docs/scaling.md).

ScaledGD and AltProj are not offered here: ScaledGD's sparsifier keeps the largest α-fraction of
every *column* as well as every row, which needs whole columns (an all-gather of Y), and AltProj's
thresholds come from full singular values.
"""

from __future__ import annotations

import dataclasses
import functools

import jax
import jax.numpy as jnp
import numpy as np
from jax.sharding import Mesh, NamedSharding
from jax.sharding import PartitionSpec as P

from lowrank_jax import _checks, loop
from lowrank_jax.precision import full_precision
from lowrank_jax.result import finish
from lowrank_jax.rpca._common import KEY, RPCAResult, declared, stopping, unreliable_message
from lowrank_jax.rpca.learned import (
    LRPCA_REMEDY,
    SCHEDULE,
    SCHEDULE_RULES,
    _lrpca_iteration,
    schedule,
)

AXIS = "rows"


def row_mesh(devices=None) -> Mesh:
    """A 1-D device mesh with the axis name ``"rows"``, for ``lrpca_sharded``.

    Args:
      devices: the devices, in order (default None: all of ``jax.devices()``).

    Returns:
      ``jax.sharding.Mesh`` of shape (len(devices),) and axis names ``("rows",)``.
    """
    devices = jax.devices() if devices is None else list(devices)
    return Mesh(np.array(devices), (AXIS,))


def _mesh(mesh, name: str, args) -> Mesh:
    """The mesh of ``lrpca_sharded``: ``None`` is ``row_mesh`` over every device; a given
    one must be 1-D with the axis name ``"rows"``."""
    mesh = row_mesh() if mesh is None else mesh
    if not isinstance(mesh, Mesh):
        raise TypeError(
            f"{name} must be a jax.sharding.Mesh (e.g. rpca.row_mesh()) or None, got "
            f"{type(mesh).__name__} {mesh!r}"
        )
    if mesh.axis_names != (AXIS,):
        raise ValueError(f"{name} must be 1-D with axis name {AXIS!r}, got {mesh.axis_names}")
    return mesh


def _rows_per_device(a) -> str:
    """The message of ``_ENOUGH_ROWS``."""
    devices, rows, width = _split(a)
    return (
        f"{devices} devices leave {rows} rows each, fewer than the sketch "
        f"width rank + oversample = {width}: use fewer devices or a smaller oversample"
    )


def _split(a) -> tuple[int, int, int]:
    """(devices, rows per device after padding, the sketch's width) of the declared arguments."""
    devices = a["mesh"].devices.size
    n1, n2 = a["Y"].shape
    width = min(a["rank"] + a["oversample"], n1, n2)
    return devices, (n1 + (-n1 % devices)) // devices, width


# Every device holds at least the sketch's width in rows (static: shapes and counts).
_ENOUGH_ROWS = _checks.Rule(
    lambda a: _split(a)[1] >= _split(a)[2], _checks.Message(_rows_per_device), uses=()
)


@full_precision
@_checks.validate(
    *SCHEDULE_RULES,
    _ENOUGH_ROWS,
    **declared("Y", "oversample", "power_iters", "rank"),
    **SCHEDULE,
    mesh=_checks.Convert(_mesh),
    throw=_checks.Flag(),
    key=KEY,
)
def lrpca_sharded(
    Y,
    rank,
    zeta,
    eta,
    *,
    mesh=None,
    beta=None,
    phi=None,
    tol=None,
    max_iter=None,
    key=None,
    oversample: int = 10,
    power_iters: int = 4,
    throw=True,
) -> RPCAResult:
    """LRPCA with Y and L split by rows over the devices of a mesh (``jax.shard_map``).

    The layers of ``lowrank_jax.rpca.lrpca`` (Cai, Liu, Yin 2021, eq. 7 + 9), device i holding
    the rows Y_i and L_i and every device R:

        E_i = −clip(Y_i − L_i Rᵀ, −ζ, ζ),   L_i⁺ = L_i − η E_i R (RᵀR)⁻¹,
        R⁺ = R − η (Σ_i E_iᵀ L_i)(Σ_i L_iᵀ L_i)⁻¹,

    with FRMNN continuation past layer K as in ``lrpca``. The result equals ``lrpca``'s with the
    same key up to rounding. n1 need not divide by the device count: Y is padded with zero rows,
    which stay exactly zero in L and S, and trimmed after. As in ``lrpca``, a learned schedule runs
    its layers: ``tol=None`` and ``max_iter=None`` run the K layers.

    Args:
      Y: (n1, n2) observation.
      rank: target rank r (static).
      zeta: (K+1,) thresholds, ``zeta[0] > 0``.
      eta: (K,) step sizes.
      mesh: a 1-D mesh with axis name ``"rows"`` (default None: ``row_mesh`` over every
        device).
      beta, phi: FRMNN factors (scalars > 0), both or neither (default None).
      tol: stop once ‖Y − Xₖ₋₁ − Sₖ‖_F/‖Y‖_F < tol (the residual is summed across devices, so
        every device stops at the same layer); default None.
      max_iter: total number of layers (≥ 0; ``max_iter = 0`` runs none): without FRMNN at most
        K, default K; with FRMNN required unless ``tol`` is given (then default 1000).
      key: ``jax.random`` key or integer seed of the randomized initial SVD (default key(0)).
      oversample: the randomized SVD's oversampling (static, ≥ 0; default 10); each device must
        hold at least rank + oversample rows.
      power_iters: the randomized SVD's power iterations (static, ≥ 0; default 4).
      throw: as in ``lrpca``; a direct call judges the status on the host. Inside a caller's
        ``jit`` or ``vmap`` on a mesh of several devices pass ``throw=False`` and read ``status``:
        there the check is an ``equinox.error_if`` in the program, which gathers the result onto
        every device, and whose error, raised while the other devices wait in a collective, stops
        the process (XLA:CPU).

    Returns:
      ``RPCAResult`` whose L, X and S stay split by rows
      (``NamedSharding``) and whose R is replicated; ``residual`` is the final ‖E_k‖_F/‖Y‖_F and
      ``history["residual"]`` holds it per layer. Not computed here: ``lrpca``'s diagnostics
      (``X_star``, ``support``), its ``svd`` choice (the first SVD is randomized),
      ``stop="change"`` and ``differentiable``. Results stay split only when n1 divides by the
      device count (JAX splits an axis in equal blocks only); trimmed results come back whole on
      every device, so for a Y too large for one device make n1 a multiple of the device count.
    """
    zeta, eta, beta, phi, frmnn, budget = schedule(Y, zeta, eta, beta, phi, max_iter)
    devices = mesh.devices.size
    n1, n2 = Y.shape
    pad = -n1 % devices
    if pad:
        Y = jnp.concatenate([Y, jnp.zeros((pad, n2), Y.dtype)])
    Y = jax.device_put(Y, NamedSharding(mesh, P(AXIS, None)))
    use_tol, tol = stopping(tol, Y.dtype)
    out = _run(
        Y,
        zeta,
        eta,
        beta,
        phi,
        tol,
        key,
        mesh=mesh,
        rank=rank,
        rows=n1 + pad,
        budget=budget,
        frmnn=frmnn,
        use_tol=use_tol,
        oversample=oversample,
        power_iters=power_iters,
    )
    if pad:
        out = dataclasses.replace(out, L=out.L[:n1], X=out.X[:n1], S=out.S[:n1])
    return finish(
        out,
        throw,
        diverged="LRPCA (sharded) diverged (non-finite or exploding factors): the step sizes "
        "eta are too large (or FRMNN's beta, phi grow the thresholds too fast)",
        invalid="LRPCA (sharded): zeta[0] must be > 0, zeta >= 0 and eta > 0, beta and phi > 0 and "
        "tol > 0 (the result is NaN)",
        unreliable=unreliable_message("LRPCA (sharded)", LRPCA_REMEDY),
    )


@functools.partial(
    jax.jit,
    static_argnames=(
        "mesh",
        "rank",
        "rows",
        "budget",
        "frmnn",
        "use_tol",
        "oversample",
        "power_iters",
    ),
)
def _run(Y, zeta, eta, beta, phi, tol, key, *, mesh, rows, budget, **static):
    def local(Y_i, zeta, eta, beta, phi, tol, key):
        it = _lrpca_iteration(
            Y_i,
            zeta,
            eta,
            beta,
            phi,
            tol,
            None,
            None,
            key,
            svd="randomized",
            axis_name=AXIS,
            rows=rows,
            **static,
        )
        return it.result(loop.run(it, max_iter=budget))

    # check_vma=False: the panel loop builds its accumulators from unsharded zeros, which the
    # varying-axes check rejects; R, the residual and the Grams are replicated by construction
    # (psum).
    rep, split = P(), P(AXIS, None)
    return jax.shard_map(
        local,
        mesh=mesh,
        in_specs=(split, rep, rep, rep, rep, rep, rep),
        out_specs=RPCAResult(
            n_iter=rep,
            status=rep,
            history=rep,
            L=split,
            R=rep,
            X=split,
            S=split,
            residual=rep,
            density=rep,
        ),
        check_vma=False,
    )(Y, zeta, eta, beta, phi, tol, key)


__all__ = ["AXIS", "lrpca_sharded", "row_mesh"]
