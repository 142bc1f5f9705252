"""Multi-device execution on 8 simulated CPU devices (a subprocess with
``XLA_FLAGS=--xla_force_host_platform_device_count=8``; the device count is fixed when JAX starts):
sharded sweeps and row-sharded LRPCA equal their single-device results."""

import os
import subprocess
import sys
import textwrap

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from lowrank_jax import Status

SCRIPT = textwrap.dedent(r"""
    import jax, jax.numpy as jnp, numpy as np
    from jax.sharding import PartitionSpec as P
    from lowrank_jax import Status, rpca, sweep
    from lowrank_jax.rpca import sharded
    from lowrank_jax.datasets import rpca as data

    assert len(jax.devices()) == 8, jax.devices()

    # 1. A sweep's point axis is split over the 8 devices (11 points: padded to 16, trimmed).
    # (LRPCA over its ζ scale and η: ScaledGD's sweeps on several CPU devices are the next test's.)
    prob = data.rpca_problem(jax.random.key(0), 96, 64, 3, 0.1)
    zeta = rpca.oracle_thresholds(prob.Y, 3, prob.X, 8)
    pts = sweep.grid(scale=jnp.array([0.6, 0.8, 1.0]), eta=jnp.linspace(0.3, 0.9, 4))
    pts = {k: v[:-1] for k, v in pts.items()}                    # 11 points
    f = lambda scale, eta: rpca.lrpca(prob.Y, 3, scale * zeta, jnp.full(8, eta)).X
    many = sweep.run(f, pts)
    one = sweep.run(f, pts, devices=jax.devices()[:1])
    assert many.shape == (11, 96, 64), many.shape
    np.testing.assert_allclose(np.asarray(many), np.asarray(one), rtol=1e-4, atol=1e-6)
    padded = sweep.run(lambda a: a * 2.0, {"a": jnp.arange(16.0)})
    assert len(padded.sharding.device_set) == 8, padded.sharding     # really spread over 8 devices
    # One chosen device (in a list, or bare) runs the sweep there, not on the default device.
    for chosen in ([jax.devices()[5]], jax.devices()[5]):
        there = sweep.run(
            lambda a, b: a * b,
            {"a": jnp.arange(3.0)},
            shared={"b": jnp.float32(2.0)},
            devices=chosen,
        )
        assert there.devices() == {jax.devices()[5]}, there.devices()
        # with nothing shared to pull it there: the points themselves go to the chosen device
        alone = sweep.run(lambda a: a * 2.0, {"a": jnp.arange(3.0)}, devices=chosen)
        assert alone.devices() == {jax.devices()[5]}, alone.devices()
    # Shared data committed to one device (that result, a device_put) is replicated over all 8; it
    # was passed as it was, and the program refused "incompatible devices".
    spread = sweep.run(lambda a, b: a * b.sum(), {"a": jnp.arange(5.0)}, shared={"b": there})
    np.testing.assert_array_equal(spread, jnp.arange(5.0) * 6.0)
    # The branch accelerators take (a vmapped block per device under shard_map), on a LAPACK-free
    # solver with a per-point trip count: equal to the per-point results.
    sweep._MAP_PER_POINT_ON.clear()
    def halvings(x0, tol):
        return jax.lax.while_loop(
            lambda c: c[0] > tol, lambda c: (c[0] * 0.5, c[1] + 1), (x0, 0)
        )[1]
    hp = {"x0": jnp.linspace(1.0, 100.0, 13), "tol": jnp.linspace(1e-3, 1e-1, 13)}
    got = sweep.run(halvings, hp)
    want = [halvings(a, b) for a, b in zip(hp["x0"], hp["tol"])]
    assert len(got.sharding.device_set) == 8, got
    assert [int(v) for v in got] == [int(v) for v in want], got
    sweep._MAP_PER_POINT_ON.add("cpu")

    # 2. LRPCA with Y split by rows equals the single-device solver (n1 divisible and not).
    p = rpca.pretrained(0.1)
    for n1 in (400, 403):
        prob = data.rpca_problem(jax.random.key(2), n1, 300, 5, 0.1)
        z = p.thresholds(prob.Y)  # the model's ζ in these data's units
        ref = rpca.lrpca(prob.Y, 5, z, p.eta)
        out = sharded.lrpca_sharded(prob.Y, 5, z, p.eta)
        scale = float(jnp.abs(ref.X).max())
        assert float(jnp.abs(out.X - ref.X).max()) < 1e-5 * scale, n1
        assert float(jnp.abs(out.S - ref.S).max()) < 1e-5 * scale, n1
        np.testing.assert_allclose(
            np.asarray(out.history["residual"]), np.asarray(ref.history["residual"]), rtol=1e-3
        )
        np.testing.assert_allclose(float(out.residual), float(ref.residual), rtol=1e-3)
        assert int(out.status) == int(ref.status) == Status.MAX_ITER
        if n1 == 400:
            assert out.L.sharding.spec == P("rows", None) and out.S.sharding.spec == P("rows", None)
            assert out.R.sharding.spec == P()
    # FRMNN continuation past the learned layers, to a fixed count and to a tolerance
    ref = rpca.lrpca(prob.Y, 5, z, p.eta, beta=0.95, phi=0.9, max_iter=20)
    out = sharded.lrpca_sharded(prob.Y, 5, z, p.eta, beta=0.95, phi=0.9, max_iter=20)
    assert float(jnp.abs(out.X - ref.X).max()) < 1e-5 * float(jnp.abs(ref.X).max())
    # β = 10 diverges: a RuntimeError (the check inside the compiled program, raised while the other
    # devices waited in a collective, stopped the process), or DIVERGED with throw=False
    try:
        sharded.lrpca_sharded(prob.Y, 5, z, p.eta, beta=10.0, phi=0.9, max_iter=20)
        raise AssertionError("a diverging sharded run did not raise")
    except RuntimeError as err:
        assert "diverged" in str(err), err
    bad = sharded.lrpca_sharded(
        prob.Y, 5, z, p.eta, beta=10.0, phi=0.9, max_iter=20, throw=False
    )
    assert int(bad.status) == Status.DIVERGED
    ref = rpca.lrpca(prob.Y, 5, z, p.eta, beta=0.95, phi=0.9, tol=1e-4, max_iter=60)
    out = sharded.lrpca_sharded(prob.Y, 5, z, p.eta, beta=0.95, phi=0.9, tol=1e-4, max_iter=60)
    k = int(ref.n_iter)
    assert int(out.n_iter) == k and k < 60, (int(out.n_iter), k)
    assert int(out.status) == int(ref.status) == Status.CONVERGED
    assert float(out.residual) < 1e-4
    assert float(out.history["residual"][k - 1]) == float(out.residual)
    assert not bool(jnp.isfinite(out.history["residual"][k]))
    assert float(jnp.abs(out.X - ref.X).max()) < 1e-5 * float(jnp.abs(ref.X).max())
    print("MULTIDEVICE OK")
""")


def test_eight_simulated_devices_match_one():
    flags = " ".join(
        [os.environ.get("XLA_FLAGS", ""), "--xla_force_host_platform_device_count=8"]
    ).strip()
    env = dict(os.environ, XLA_FLAGS=flags, JAX_PLATFORMS="cpu")
    proc = subprocess.run(
        [sys.executable, "-c", SCRIPT], env=env, capture_output=True, text=True, timeout=900
    )
    assert proc.returncode == 0 and "MULTIDEVICE OK" in proc.stdout, (
        proc.stdout[-3000:] + proc.stderr[-3000:]
    )


TWO_CPU_DEVICES = textwrap.dedent(r"""
    import jax, jax.numpy as jnp, numpy as np
    jax.config.update("jax_num_cpu_devices", 2)
    from lowrank_jax import rpca, sweep
    from lowrank_jax.datasets import rpca as data

    assert len(jax.devices()) == 2, jax.devices()
    # 16 ScaledGD points, 8 per device: a vmapped batch per device ran batched LAPACK calls that
    # blocked both threads of the intra-op pool (a deadlock before sweeps mapped per CPU device).
    Y = data.rpca_problem(jax.random.key(0), 96, 64, 3, 0.1).Y
    f = lambda alpha, eta, Y: rpca.scaledgd(
        Y, 3, alpha, eta=eta, tol=None, max_iter=5, svd="exact"
    ).X
    pts = sweep.grid(alpha=jnp.linspace(0.05, 0.2, 4), eta=jnp.linspace(0.3, 0.9, 4))
    two = sweep.run(f, pts, shared={"Y": Y})
    two = sweep.run(f, pts, shared={"Y": Y})  # and again, from the cached program
    one = sweep.run(f, pts, shared={"Y": Y}, devices=jax.devices()[:1])
    assert len(two.sharding.device_set) == 2, two.sharding
    np.testing.assert_allclose(np.asarray(two), np.asarray(one), rtol=1e-4, atol=1e-5)

    # progress=True on the per-point map of CPU devices: 15 points (padded to 16) move the bar point
    # by point from both devices' callbacks, up to 15, and leave the results alone.
    from lowrank_jax import progress
    moves = []
    class Bar:
        n = 0
        def update(self, k=1):
            self.n += k
            moves.append(k)
        def close(self):
            pass
    progress.bar = lambda total, desc, unit, show=True: Bar()
    # (a cheap point function: the bar's mechanism does not depend on the solver, and a second
    # ScaledGD program would double this test's compile time)
    pts15 = {k: v[:15] for k, v in pts.items()}
    g = lambda alpha, eta, Y: jnp.tanh(alpha * Y).sum(0) + eta
    loud = sweep.run(g, pts15, shared={"Y": Y}, progress=True)
    want = np.stack([g(a, e, Y) for a, e in zip(pts15["alpha"], pts15["eta"])])
    np.testing.assert_allclose(np.asarray(loud), want, rtol=1e-5, atol=1e-6)
    assert sum(moves) == 15 and len(moves) >= 8, moves
    # Every output empty: the per-point map is dead code and XLA drops its callbacks; the bar still
    # ends at the finished count (it stayed at 0).
    moves.clear()
    sweep.run(lambda alpha, eta: jnp.zeros((0,)), pts15, progress=True)
    assert sum(moves) == 15, moves

    # The row-sharded scaled-gradient step in an eager (un-jitted) shard_map: the small SPD
    # inverse's 0-size first products failed inside XLA ("'func.call' op expected at least one
    # operand …").
    from jax.sharding import Mesh, PartitionSpec as P
    from lowrank_jax import transforms
    rng = np.random.default_rng(0)
    L, GL = rng.standard_normal((40, 3)), rng.standard_normal((40, 3))
    R, GR = rng.standard_normal((12, 3)), rng.standard_normal((12, 3))
    step = lambda L, R, GL, GR: transforms.scaled_gradient_step(
        (L, R), (GL, GR), 0.3, axis_name="x"
    )
    mesh = Mesh(np.array(jax.devices()), ("x",))
    out = jax.shard_map(
        step,
        mesh=mesh,
        in_specs=(P("x"), P(), P("x"), P()),
        out_specs=(P("x"), P()),
        check_vma=False,
    )(L, R, GL, GR)
    ref = transforms.scaled_gradient_step((L, R), (GL, GR), 0.3)
    for a, b in zip(out, ref):
        np.testing.assert_allclose(np.asarray(a), np.asarray(b), rtol=1e-5, atol=1e-6)
    print("TWO DEVICES OK")
""")


def test_sweep_on_as_many_cpu_devices_as_cores_does_not_deadlock():
    # the suite's compile flags only (conftest): no simulated device count of the caller's
    env = dict(
        os.environ,
        JAX_PLATFORMS="cpu",
        XLA_FLAGS=" ".join(
            f for f in os.environ.get("XLA_FLAGS", "").split() if "device_count" not in f
        ),
    )
    proc = subprocess.run(
        [sys.executable, "-c", TWO_CPU_DEVICES],
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode == 0 and "TWO DEVICES OK" in proc.stdout, (
        proc.stdout[-3000:] + proc.stderr[-3000:]
    )


def test_sharded_lrpca_on_one_device_equals_lrpca():
    from lowrank_jax import rpca
    from lowrank_jax.datasets import rpca as data
    from lowrank_jax.rpca import sharded

    prob = data.rpca_problem(jax.random.key(5), 120, 90, 4, 0.1)
    p = rpca.pretrained(0.1)
    ref = rpca.lrpca(prob.Y, 4, p.zeta, p.eta)
    out = sharded.lrpca_sharded(prob.Y, 4, p.zeta, p.eta, mesh=sharded.row_mesh(jax.devices()[:1]))
    np.testing.assert_allclose(np.asarray(out.X), np.asarray(ref.X), rtol=1e-4, atol=1e-6)
    # no layer at all (as lrpca allows): the initial X and S = S_ζ₀(Y), with or without FRMNN
    # (and no learned layer: ζ = (ζ₀,), η empty)
    for zeta, eta, kw in (
        (p.zeta, p.eta, dict(max_iter=0)),
        (p.zeta, p.eta, dict(max_iter=0, beta=p.beta, phi=p.phi)),
        (p.zeta[:1], p.eta[:0], {}),
    ):
        ref = rpca.lrpca(prob.Y, 4, zeta, eta, **kw)
        out = sharded.lrpca_sharded(
            prob.Y, 4, zeta, eta, mesh=sharded.row_mesh(jax.devices()[:1]), **kw
        )
        assert int(out.n_iter) == int(ref.n_iter) == 0
        for a, b in ((out.X, ref.X), (out.S, ref.S)):
            np.testing.assert_allclose(np.asarray(a), np.asarray(b), rtol=1e-4, atol=1e-6)
    # Y = 0: residual 0 (not 0/0) and the tolerance stop after the first layer, as lrpca
    zero = jnp.zeros((40, 30))
    ref = rpca.lrpca(zero, 4, p.zeta, p.eta, tol=1e-4)
    out = sharded.lrpca_sharded(
        zero, 4, p.zeta, p.eta, tol=1e-4, mesh=sharded.row_mesh(jax.devices()[:1])
    )
    assert (
        float(out.residual) == float(ref.residual) == 0.0
        and int(out.n_iter) == int(ref.n_iter) == 1
    )
    assert int(out.status) == int(ref.status) == Status.CONVERGED


def test_sharded_lrpca_raises_on_divergence_like_lrpca():
    """FRMNN with β = 10 grows the steps without bound: lrpca raised, lrpca_sharded returned NaN.
    Both raise RuntimeError, and with throw=False both report DIVERGED at the same layer (the
    sharded rule sums ‖L‖_F² across devices)."""
    from lowrank_jax import rpca
    from lowrank_jax.datasets import rpca as data
    from lowrank_jax.rpca import sharded

    prob = data.rpca_problem(jax.random.key(0), 60, 50, 3, 0.1)
    zeta, eta = rpca.oracle_thresholds(prob.Y, 3, prob.X, 8), jnp.full(8, 0.5)
    mesh = sharded.row_mesh(jax.devices()[:1])
    kw = dict(beta=10.0, phi=0.7, max_iter=60)
    with pytest.raises(RuntimeError, match="diverged.*beta"):
        rpca.lrpca(prob.Y, 3, zeta, eta, **kw)
    with pytest.raises(RuntimeError, match="diverged.*beta"):
        sharded.lrpca_sharded(prob.Y, 3, zeta, eta, mesh=mesh, **kw)
    ref = rpca.lrpca(prob.Y, 3, zeta, eta, tol=1e-30, throw=False, **kw)
    out = sharded.lrpca_sharded(prob.Y, 3, zeta, eta, mesh=mesh, tol=1e-30, throw=False, **kw)
    assert int(ref.status) == int(out.status) == Status.DIVERGED
    # stopped where it blew up, past the K layers
    assert 8 < int(out.n_iter) == int(ref.n_iter) < 60
    assert np.all(np.isnan(np.asarray(out.history["residual"][int(out.n_iter) :])))


def test_sharded_lrpca_rejects_bad_input():
    from jax.sharding import Mesh

    from lowrank_jax.rpca import sharded

    Y = jnp.ones((40, 30))
    z, e = jnp.ones(3), jnp.ones(2)
    with pytest.raises(ValueError, match="len\\(zeta\\)"):
        sharded.lrpca_sharded(Y, 2, jnp.ones(2), e)
    with pytest.raises(ValueError, match="together"):
        sharded.lrpca_sharded(Y, 2, z, e, beta=0.9)
    with pytest.raises(ValueError, match="axis name"):
        sharded.lrpca_sharded(Y, 2, z, e, mesh=Mesh(np.array(jax.devices()[:1]), ("x",)))
    with pytest.raises(ValueError, match="max_iter"):
        sharded.lrpca_sharded(Y, 2, z, e, max_iter=5)
    # a TypeError from '>' before
    with pytest.raises(ValueError, match="max_iter must be an integer"):
        sharded.lrpca_sharded(Y, 2, z, e, max_iter="3")


def test_sharded_lrpca_stops_strictly_below_tol_and_keeps_frmnn_thresholds_for_s():
    """One device. The tolerance stop is strict, as lrpca's: tol equal to the residual after layer 2
    (from the same compiled program, a tol that never fires) stops after layer 3. And with FRMNN the
    returned S is the last layer's S = S_{ζ_K φ^p}(Y − X_{k−1}), as lrpca's (not thresholded at
    ζ_K)."""
    from lowrank_jax import rpca
    from lowrank_jax.datasets import rpca as data
    from lowrank_jax.rpca import sharded

    # the shapes and schedule length of test_sharded_lrpca_on_one_device_equals_lrpca's Y = 0 run,
    # whose compiled tolerance program this one reuses
    prob = data.rpca_problem(jax.random.key(3), 40, 30, 4, 0.1)
    mesh = sharded.row_mesh(jax.devices()[:1])
    # Theorem 1's oracle schedule (a shipped model does not serve a problem this small: its S
    # comes out dense, UNRELIABLE)
    zeta, eta = rpca.oracle_thresholds(prob.Y, 4, prob.X, 10), jnp.full(10, 0.5)
    full = sharded.lrpca_sharded(prob.Y, 4, zeta, eta, tol=1e-30, mesh=mesh)
    res = np.asarray(full.history["residual"])
    assert (
        int(full.n_iter) == 10 and res[2] < res[1] < res[0] and int(full.status) == Status.MAX_ITER
    )
    stopped = sharded.lrpca_sharded(prob.Y, 4, zeta, eta, tol=float(res[1]), mesh=mesh)
    assert int(stopped.n_iter) == 3 and int(stopped.status) == Status.CONVERGED
    kw = dict(beta=1.0, phi=0.5, max_iter=13)
    ref = rpca.lrpca(prob.Y, 4, zeta, eta, **kw)
    out = sharded.lrpca_sharded(prob.Y, 4, zeta, eta, mesh=mesh, **kw)
    assert np.any(np.asarray(ref.S) != 0)
    np.testing.assert_allclose(np.asarray(out.S), np.asarray(ref.S), rtol=1e-4, atol=1e-6)
