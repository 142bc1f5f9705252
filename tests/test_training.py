"""LRPCA parameter learning: the curriculum lowers the loss, checkpoints resume exactly, FRMNN grid
search, parameter files (pretrained ones included) and their errors."""

import dataclasses
import math

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import pytest

from lowrank_jax import Status, datasets, rpca
from lowrank_jax.rpca import params as params_mod
from lowrank_jax.rpca import training

TINY = training.TrainConfig(
    n=60,
    rank=2,
    alpha=0.1,
    num_layers=3,
    pre_steps=4,
    full_steps=8,
    batch=2,
    lr=0.05,
    init_instances=2,
)


LOSS_KEY = jax.random.key(99)


def _mean_loss(p, cfg, layers, key=LOSS_KEY, count=8):
    Y, X = training._instances(key, cfg, count)
    return float(jnp.mean(jax.vmap(lambda y, x: training.stage_loss(p, y, x, layers))(Y, X)))


@pytest.fixture(scope="module")
def tiny_run(tmp_path_factory):
    ckpt = tmp_path_factory.mktemp("train") / "full.eqx"
    log = []
    p = training.train_lrpca(TINY, checkpoint=ckpt, progress=False, log=log, key=jax.random.key(0))
    return p, log, ckpt


def test_training_lowers_the_loss_on_held_out_instances(tiny_run):
    p, log, _ = tiny_run
    start = training.initial_params(jax.random.split(jax.random.key(0))[0], TINY)
    K = TINY.num_layers
    assert _mean_loss(p, TINY, K) < _mean_loss(start, TINY, K) - 0.05
    assert [e["stage"] for e in log] == list(range(K + 1))
    assert all(
        np.all(np.isfinite(leaf)) for leaf in jax.tree.leaves(eqx.filter(p, eqx.is_inexact_array))
    )
    # β, φ are left to the grid search.
    assert float(p.beta) == 1.0 and float(p.phi) == 1.0


def test_interrupted_training_resumes_to_the_same_parameters(tiny_run, tmp_path, capsys):
    p_full, _, _ = tiny_run
    ckpt = tmp_path / "resume.eqx"

    class Interrupt(Exception):
        pass

    def stop_after_two(stage, params):
        if stage == 2:
            raise Interrupt

    with pytest.raises(Interrupt):
        training.train_lrpca(
            TINY, checkpoint=ckpt, progress=False, callback=stop_after_two, key=jax.random.key(0)
        )
    log = []
    p_resumed = training.train_lrpca(
        TINY, checkpoint=ckpt, progress=False, log=log, key=jax.random.key(0)
    )
    assert [e["stage"] for e in log] == [3]  # only the stage after the checkpoint ran again
    for a, b in zip(jax.tree.leaves(p_full), jax.tree.leaves(p_resumed)):
        np.testing.assert_array_equal(a, b)
    # A complete checkpoint: nothing runs, and no empty progress bar is printed.
    capsys.readouterr()
    log = []
    p_again = training.train_lrpca(
        TINY, checkpoint=ckpt, progress=True, log=log, key=jax.random.key(0)
    )
    assert log == [] and capsys.readouterr().err == ""
    for a, b in zip(jax.tree.leaves(p_full), jax.tree.leaves(p_again)):
        np.testing.assert_array_equal(a, b)


def test_parameter_files_round_trip_under_x64(tmp_path, x64):
    """With x64 on, initial_params made β, φ float64 beside a float32 ζ, and save_params wrote the
    leaves as they were under ζ's dtype: loading (and so resuming training) called the file
    corrupt."""
    p0 = training.initial_params(jax.random.key(0), dataclasses.replace(TINY, init_instances=1))
    assert len({leaf.dtype for leaf in jax.tree.leaves(p0)}) == 1
    mixed = rpca.LRPCAParams(
        jnp.asarray([0.5, 0.25], jnp.float32),
        jnp.asarray([0.1], jnp.float32),
        jnp.asarray(1.7, jnp.float64),
        jnp.asarray(0.4, jnp.float64),
        rank=2,
        n=60,
    )
    for p in (p0, mixed):
        params_mod.save_params(tmp_path / "p.eqx", p)
        back = params_mod.load_params(tmp_path / "p.eqx")
        for a, b in zip(jax.tree.leaves(p), jax.tree.leaves(back)):
            np.testing.assert_array_equal(np.asarray(a, np.float64), np.asarray(b, np.float64))


def test_checkpoint_of_another_configuration_is_refused(tiny_run):
    _, _, ckpt = tiny_run
    other = dataclasses.replace(TINY, lr=0.01)
    with pytest.raises(ValueError, match="another configuration"):
        training.train_lrpca(other, checkpoint=ckpt, progress=False, key=jax.random.key(0))
    # Another key trained the remaining stages on other instances: a mix of two runs.
    with pytest.raises(ValueError, match="another key"):
        training.train_lrpca(TINY, checkpoint=ckpt, progress=False, key=jax.random.key(7))


def test_train_config_takes_numpy_numbers_and_refuses_fractions():
    """n = np.int64(40) trained stage 0 and then failed writing the checkpoint's JSON; n = 40.5
    passed to fail inside the generator. Fields are now plain Python numbers, checked on
    construction."""
    cfg = training.TrainConfig(
        n=np.int64(40), rank=np.int32(2), alpha=np.float32(0.1), lr=np.float64(0.05)
    )
    assert (
        type(cfg.n) is int
        and type(cfg.rank) is int
        and type(cfg.alpha) is float
        and type(cfg.lr) is float
    )
    assert cfg == training.TrainConfig(n=40, rank=2, alpha=float(np.float32(0.1)), lr=0.05)
    for bad in (dict(n=40.5), dict(pre_steps=2.5), dict(lr="0.1"), dict(batch=True)):
        with pytest.raises(ValueError):
            training.TrainConfig(**bad)


def test_grid_search_refuses_to_choose_when_every_point_diverges():
    """All-inf errors: argmin picked the first (diverging) grid point without a word."""
    cfg = training.TrainConfig(n=40, rank=2, alpha=0.1, num_layers=3, init_instances=2)
    p = training.initial_params(jax.random.key(0), cfg)
    with pytest.raises(RuntimeError, match="every .beta, phi. of the grid diverged"):
        training.frmnn_grid_search(
            p,
            cfg,
            num_instances=2,
            extra_layers=30,
            betas=jnp.array([20.0, 40.0]),
            phis=jnp.array([5.0, 9.0]),
            key=jax.random.key(1),
        )
    # A grid with one diverging row: its errors are +inf, never NaN (argmin would pick a NaN), and
    # the search chooses among the finite ones.
    chosen, errors = training.frmnn_grid_search(
        p,
        cfg,
        num_instances=2,
        extra_layers=30,
        betas=jnp.array([1.0, 40.0]),
        phis=jnp.array([0.5, 9.0]),
        key=jax.random.key(1),
    )
    errors = np.asarray(errors)
    assert (
        not np.any(np.isnan(errors))
        and np.all(np.isposinf(errors[1]))
        and np.isfinite(errors[0, 0])
    )
    assert float(chosen.beta) == 1.0 and float(chosen.phi) == float(
        np.asarray([0.5, 9.0])[np.argmin(errors[0])]
    )


def test_frmnn_grid_search_returns_the_argmin_of_its_grid(tiny_run):
    p, _, _ = tiny_run
    betas, phis = jnp.array([0.8, 1.0, 1.2]), jnp.array([0.3, 0.6, 0.9])
    chosen, errors = training.frmnn_grid_search(
        p, TINY, num_instances=4, extra_layers=3, betas=betas, phis=phis, key=jax.random.key(5)
    )
    assert errors.shape == (3, 3)
    i, j = np.unravel_index(np.argmin(np.asarray(errors)), errors.shape)
    assert float(chosen.beta) == pytest.approx(float(betas[i])) and float(
        chosen.phi
    ) == pytest.approx(float(phis[j]))
    # The grid's entry equals a direct FRMNN run of those (β, φ) on the same instances.
    Y, X = training._instances(jax.random.key(5), TINY, 4)
    runs = [rpca.lrpca(y, 2, p.zeta, p.eta, beta=betas[1], phi=phis[2], max_iter=6) for y in Y]
    direct = [float(jnp.linalg.norm(out.X - x) / jnp.linalg.norm(x)) for out, x in zip(runs, X)]
    np.testing.assert_allclose(errors[1, 2], np.mean(direct), rtol=1e-4)


def test_thresholds_follow_the_data_scale_and_the_rank(tmp_path):
    """A call runs ζ_b · (s(Y)/s_b) · √(r/r_b) with s the median |Y_ij| (and η as stored); on the
    paper's generator that is the paper's rule ζ_b (n_b/n)(r/r_b) up to the sampling of s; scale and
    a fractional size survive a parameter file."""
    p = params_mod.LRPCAParams.from_schedule(
        jnp.array([1.0, 0.5, 0.25]), jnp.array([0.6, 0.5]), rank=5, n=1000, scale=0.05, alpha=0.1
    )
    Y = datasets.rpca_problem(jax.random.key(0), 40, 50, 2, 0.1).Y
    s = float(jnp.median(jnp.abs(Y)))
    np.testing.assert_allclose(float(rpca.data_scale(Y)), s, rtol=1e-6)
    np.testing.assert_allclose(p.thresholds(Y, 2), p.zeta * (s / 0.05) * np.sqrt(2 / 5), rtol=1e-5)
    with pytest.warns(UserWarning, match="trained at n = 1000") as said:  # smaller than trained
        out = p(Y, rank=2, frmnn=False)
    assert said[0].filename == __file__  # the caller's line, through equinox's method wrapper
    once = rpca.lrpca(Y, 2, p.thresholds(Y, 2), p.eta)
    np.testing.assert_allclose(out.X, once.X, rtol=1e-6, atol=1e-7)
    # the generator at n = √(1500 · 6000) = 3000 against n = 1000: the paper's 1000/3000
    big = rpca.data_scale(datasets.rpca_problem(jax.random.key(1), 1500, 6000, 5, 0.1).Y)
    ref = rpca.data_scale(datasets.rpca_problem(jax.random.key(2), 1000, 1000, 5, 0.1).Y)
    # (each instance's singular values spread by ±√(r/n), several per cent at n = 1000)
    np.testing.assert_allclose(float(big / ref), 1000 / 3000, rtol=0.1)
    r = params_mod.LRPCAParams.from_schedule(
        p.zeta, p.eta, rank=5, n=math.sqrt(3000 * 2000), scale=0.25
    )
    params_mod.save_params(tmp_path / "r.eqx", r)
    back = params_mod.load_params(tmp_path / "r.eqx")
    assert (back.n, back.scale, back.alpha) == (math.sqrt(3000 * 2000), 0.25, None)


def test_parameter_files_round_trip_and_bad_files_are_refused(tmp_path, tiny_run):
    p, _, _ = tiny_run
    path = tmp_path / "p.eqx"
    params_mod.save_params(path, p, {"note": "test"})
    q = params_mod.load_params(path, rank=2)
    for a, b in zip(jax.tree.leaves(p), jax.tree.leaves(q)):
        np.testing.assert_array_equal(a, b)
    assert (q.rank, q.n, q.num_layers) == (2, 60, 3)
    with pytest.raises(ValueError, match="rank 2, not rank 5"):
        params_mod.load_params(path, rank=5)
    data = path.read_bytes()
    (tmp_path / "cut.eqx").write_bytes(data[:-7])
    with pytest.raises(ValueError, match="corrupt"):
        params_mod.load_params(tmp_path / "cut.eqx")
    (tmp_path / "junk.eqx").write_bytes(b"not a parameter file")
    with pytest.raises(ValueError, match="not an LRPCA parameter file"):
        params_mod.load_params(tmp_path / "junk.eqx")
    nan = eqx.tree_at(lambda q: q.log_zeta, p, p.log_zeta.at[1].set(jnp.nan))
    params_mod.save_params(tmp_path / "nan.eqx", nan)
    with pytest.raises(ValueError, match="non-finite"):
        params_mod.load_params(tmp_path / "nan.eqx")
    # No temporary files are left behind by the atomic write.
    assert sorted(f.name for f in tmp_path.iterdir()) == ["cut.eqx", "junk.eqx", "nan.eqx", "p.eqx"]


def test_bad_training_configuration_is_refused():
    with pytest.raises(ValueError, match="alpha"):
        training.TrainConfig(alpha=1.5)
    with pytest.raises(ValueError, match="num_layers"):
        training.TrainConfig(num_layers=0)
    with pytest.raises(ValueError, match="lr"):
        training.TrainConfig(lr=0.0)
    with pytest.raises(ValueError, match="init_rule"):
        training.TrainConfig(init_rule="mean")
    with pytest.raises(ValueError, match="init_eta"):
        training.TrainConfig(init_eta=-1.0)


def test_initial_schedule_follows_the_configured_oracle():
    """initial_params = geometric mean of the configured oracle's ζ over the init instances,
    η = init_eta."""
    cfg = dataclasses.replace(TINY, init_rule="rms", init_scale=2.0, init_eta=1.5)
    key = jax.random.key(3)
    p = training.initial_params(key, cfg)
    Y, X = training._instances(key, cfg, cfg.init_instances)
    z = jnp.stack(
        [
            rpca.oracle_thresholds(Y[i], cfg.rank, X[i], cfg.num_layers, 1.5, rule="rms", scale=2.0)
            for i in range(cfg.init_instances)
        ]
    )
    # float32: on a GPU the batched and the per-instance oracles differed by 3e-5 in the last layer
    np.testing.assert_allclose(p.zeta, jnp.exp(jnp.mean(jnp.log(z), axis=0)), rtol=1e-4)
    np.testing.assert_allclose(p.eta, 1.5, rtol=1e-6)


@pytest.mark.parametrize("size", params_mod.PRETRAINED_SIZES)
@pytest.mark.parametrize("alpha", params_mod.PRETRAINED_ALPHAS)
def test_pretrained_parameters_recover_a_fresh_instance(alpha, size):
    p = rpca.pretrained(alpha=alpha, n=size)
    assert (p.rank, p.n, p.num_layers) == (5, size, 10)
    prob = datasets.rpca_problem(jax.random.key(12345), size, size, 5, alpha)
    out = p(prob.Y, frmnn=False, X_star=prob.X)
    assert int(out.status) == Status.MAX_ITER and int(out.n_iter) == 10
    assert float(out.error) <= (1e-3 if size >= 300 else 1e-2)  # the n = 100 models are weaker
    with pytest.raises(ValueError, match="rank"):
        rpca.pretrained(alpha=alpha, rank=3)
    # between the shipped densities: the model of the next larger one, which says so
    assert rpca.pretrained(alpha=0.15).alpha == 0.2 and rpca.pretrained(0.0).alpha == 0.1
    with pytest.raises(ValueError, match=r"outlier fraction in \[0, 0.3\]"):
        rpca.pretrained(alpha=0.35)


def test_pretrained_picks_the_model_for_the_size():
    """The n = 1000 models rescaled to smaller problems stall (ζ's rule serves larger problems
    only): at n = 500, α = 0.1 the error after 40 layers stayed near 8e-5. pretrained(alpha, n=...)
    picks the largest training size that is at most n / 0.9 (the n = 300 model there: about 2e-7),
    and the warning of a stalling rescale names that option."""
    assert [
        params_mod.pretrained_size(n) for n in (30, 90, 269, 270, 300, 500, 899.9, 900, 1000, 5000)
    ] == [100, 100, 100, 300, 300, 300, 300, 1000, 1000, 1000]
    assert rpca.pretrained(0.1).n == 1000 and rpca.pretrained(0.1, n=np.int64(450)).n == 300
    for bad in (0, -3, math.nan, math.inf, "500", None):
        with pytest.raises(ValueError, match="n must be a positive problem size"):
            params_mod.pretrained_size(bad)
    prob = datasets.rpca_problem(jax.random.key(7), 500, 500, 5, 0.1)
    sized = rpca.pretrained(0.1, n=500)(prob.Y, max_iter=40, X_star=prob.X)
    with pytest.warns(UserWarning, match=r"pretrained\(alpha, n=\.\.\.\)"):
        rescaled = rpca.pretrained(0.1)(prob.Y, max_iter=40, X_star=prob.X)
    assert float(sized.error) < 1e-5 < float(rescaled.error)
    # one size down: at n = 200 the n = 100 model (about 1e-6) against the n = 300 one (3e-4)
    prob = datasets.rpca_problem(jax.random.key(8), 200, 200, 5, 0.1)
    sized = rpca.pretrained(0.1, n=200)(prob.Y, max_iter=40, X_star=prob.X)
    with pytest.warns(UserWarning, match="trained at n = 300"):
        rescaled = rpca.pretrained(0.1, n=300)(prob.Y, max_iter=40, X_star=prob.X)
    assert sized.n_iter == 40 and float(sized.error) < 2e-5 < float(rescaled.error)


def test_from_schedule_refuses_bad_values_by_name_and_keeps_a_fractional_n():
    """from_schedule truncated rank = 2.7 to 2 and n = 100.7 to 100 (the class keeps fractional
    sizes), took rank = 0, n = 0 or -5 (the model then failed with "math
    domain error"), a NaN β and an infinite ζ. Each is now a ValueError naming the argument."""
    z, e = jnp.array([1.0, 0.5, 0.25]), jnp.array([0.6, 0.5])
    p = params_mod.LRPCAParams.from_schedule(
        z, e, rank=np.int64(2), n=100.7, beta=np.float32(1.2), phi=0.5
    )
    assert type(p.rank) is int and p.rank == 2 and p.n == 100.7
    np.testing.assert_allclose(p.zeta, z, rtol=1e-6)
    np.testing.assert_allclose([p.beta, p.phi], [1.2, 0.5], rtol=1e-6)
    assert params_mod.LRPCAParams.from_schedule(z, e, rank=2, n=100.0).n == 100
    bad = [
        (dict(rank=2.7), "rank"),
        (dict(rank=0), "rank"),
        (dict(rank=True), "rank"),
        (dict(n=0), "n must"),
        (dict(n=-5), "n must"),
        (dict(n=math.inf), "n must"),
        (dict(n=math.nan), "n must"),
        (dict(n="100"), "n must"),
        (dict(beta=math.nan), "beta"),
        (dict(beta=0.0), "beta"),
        (dict(beta=jnp.array([1.0, 2.0])), "beta"),
        (dict(phi=math.inf), "phi"),
        (dict(phi=-0.5), "phi"),
        (dict(zeta=jnp.array([1.0, jnp.inf, 0.25])), "zeta"),
        (dict(zeta=jnp.array([1.0, jnp.nan, 0.25])), "zeta"),
        (dict(eta=jnp.array([0.6, jnp.inf])), "eta"),
        (dict(eta=jnp.array([0.6, -0.5])), "eta"),
    ]
    for kwargs, match in bad:
        args = dict(zeta=z, eta=e, rank=2, n=100) | kwargs
        with pytest.raises(ValueError, match=match):
            params_mod.LRPCAParams.from_schedule(args.pop("zeta"), args.pop("eta"), **args)
    # Under jit the arrays are traced: shapes are checked, values are not (no error, same result).
    jitted = jax.jit(
        lambda zz: params_mod.LRPCAParams.from_schedule(zz, e, rank=2, n=100).log_zeta
    )(z)
    np.testing.assert_allclose(jitted, jnp.log(z), rtol=1e-6)


def test_frmnn_grid_search_refuses_bad_arguments_by_name():
    """num_instances = 0 ended in "every (beta, phi) of the grid diverged", extra_layers = -1 in
    "num_steps must be an integer >= 0" (an argument the caller never passed), and phis = [-0.5]
    was searched and returned as the chosen φ. All are refused by name before any instance is
    drawn."""
    p = params_mod.LRPCAParams.from_schedule(
        jnp.array([1.0, 0.5, 0.25, 0.1]), jnp.array([0.6, 0.5, 0.5]), rank=TINY.rank, n=TINY.n
    )
    bad = [
        (dict(num_instances=0), "num_instances"),
        (dict(num_instances=2.5), "num_instances"),
        (dict(extra_layers=-1), "extra_layers"),
        (dict(extra_layers=1.5), "extra_layers"),
        (dict(phis=[-0.5]), "phis"),
        (dict(phis=[0.5, math.nan]), "phis"),
        (dict(phis=[[0.5]]), "phis"),
        (dict(betas=[0.0, 1.0]), "betas"),
        (dict(betas=[math.inf]), "betas"),
        (dict(betas=[]), "betas"),
        (dict(betas=1.0), "betas"),
    ]
    for kwargs, match in bad:
        with pytest.raises(ValueError, match=match):
            training.frmnn_grid_search(
                p, TINY, **(dict(num_instances=1, extra_layers=1) | kwargs), key=jax.random.key(0)
            )


def test_frmnn_grid_is_the_papers_step_tenth_grid_and_the_search_default():
    """The default grid (the paper's step 0.1) lives in frmnn_grid, which the search and
    experiments/rpca_frmnn_grid.py share: β from 0.5 to 2.0, φ from 0.1 to 1.0, ends included, and a
    search without betas/phis returns errors over exactly that grid (mean of one instance,
    argmin)."""
    betas, phis = training.frmnn_grid()
    np.testing.assert_allclose(betas, 0.5 + 0.1 * np.arange(16), atol=1e-6)
    np.testing.assert_allclose(phis, 0.1 + 0.1 * np.arange(10), atol=1e-6)
    p = params_mod.LRPCAParams.from_schedule(
        jnp.array([1.0, 0.5, 0.25, 0.1]), jnp.array([0.6, 0.5, 0.5]), rank=TINY.rank, n=TINY.n
    )
    result = training.frmnn_grid_search(
        p, TINY, num_instances=1, extra_layers=1, key=jax.random.key(3)
    )
    chosen, errors = result  # an FRMNNSearch unpacks as (params, errors)
    assert (
        isinstance(result, rpca.FRMNNSearch) and result.params is chosen and result.errors is errors
    )
    assert errors.shape == (16, 10)
    i, j = np.unravel_index(int(jnp.argmin(errors)), errors.shape)
    assert (float(chosen.beta), float(chosen.phi)) == (float(betas[i]), float(phis[j]))


def test_pretrained_takes_concrete_numpy_and_jax_scalars():
    """rpca.pretrained(jnp.float32(0.2)) was refused as "not a number" while np.float32(0.3) was
    taken. Concrete 0-d NumPy and JAX numbers now select the same file as the Python float."""
    ref = rpca.pretrained(0.2)
    for alpha in (
        jnp.float32(0.2),
        jnp.asarray(0.2),
        np.array(0.2),
        np.float32(0.2),
        np.float64(0.2),
    ):
        p = rpca.pretrained(alpha)
        for a, b in zip(jax.tree.leaves(p), jax.tree.leaves(ref)):
            np.testing.assert_array_equal(a, b)
    for bad in ("0.2", True, jnp.array([0.2]), np.array(True), jnp.float32(0.35), -0.1, np.nan):
        with pytest.raises(ValueError, match="alpha"):
            rpca.pretrained(bad)


def test_each_phase_moves_only_the_entries_it_trains(tiny_run):
    """Stage j's first phase trains layer j alone (ζ_j and η_{j−1}, the step into it), its second
    phase layers 0..j; later layers and the FRMNN factors never move. Adam's first step moves every
    entry whose gradient is non-zero, so the moved entries are exactly the trained ones."""
    p = training.initial_params(jax.random.key(0), TINY)
    step = training._make_phase(TINY, 2)  # compiled by tiny_run already
    for only_new, zetas, etas in ((True, [2], [1]), (False, [0, 1, 2], [0, 1])):
        mask_z, mask_e = training._masks(p, 2, only_new)
        state = training._optimizer(TINY).init(eqx.filter(p, eqx.is_inexact_array))
        q, _, _ = step(p, state, jax.random.key(3), mask_z, mask_e)
        np.testing.assert_array_equal(np.flatnonzero(np.asarray(q.log_zeta != p.log_zeta)), zetas)
        np.testing.assert_array_equal(np.flatnonzero(np.asarray(q.log_eta != p.log_eta)), etas)
        assert float(q.beta) == float(p.beta) and float(q.phi) == float(p.phi)


def test_stage_loss_is_the_mean_log_error_of_its_layers(tiny_run):
    """Stage j's loss is the mean of log e_k over k = 1..j (log e_0 at j = 0), e_k the relative
    error after k layers."""
    p, _, _ = tiny_run
    Y, X = training._instances(jax.random.key(7), TINY, 1)
    logs = [np.log(float(training.layer_error(p, Y[0], X[0], k))) for k in range(4)]
    for j in range(4):
        want = logs[0] if j == 0 else np.mean(logs[1 : j + 1])
        np.testing.assert_allclose(float(training.stage_loss(p, Y[0], X[0], j)), want, rtol=1e-5)


def test_stage_zero_takes_both_phases_steps(monkeypatch, tiny_run):
    """Stage 0 (ζ₀ alone) has no earlier layers to split from, so it runs pre + full steps in one
    phase (stopped after stage 0 by its callback; the step is compiled by tiny_run already)."""
    ticks = []

    class Counter:
        def update(self, k):
            ticks.append(k)

        def set_postfix(self, **kw):
            pass

        def close(self):
            pass

    class Stop(Exception):
        pass

    def stop(stage, params):
        raise Stop

    monkeypatch.setattr(training.progress_bar, "bar", lambda *a, **k: Counter())
    with pytest.raises(Stop):
        training.train_lrpca(TINY, callback=stop, key=jax.random.key(0))
    assert sum(ticks) == TINY.pre_steps + TINY.full_steps


def _fake_phases(monkeypatch, calls, loss_at=lambda stage, i: 0.0):
    """Replace the compiled optimiser step by a recorder (and the oracle initialisation by a fixed
    schedule): train_lrpca's loop logic is then run without compiling anything."""

    def make_phase(cfg, layers, sampler=None):
        def step(params, opt_state, key, mask_z, mask_e):
            calls.append(
                dict(
                    stage=layers,
                    key=tuple(np.asarray(jax.random.key_data(key)).ravel().tolist()),
                    z=np.asarray(mask_z).tolist(),
                    e=np.asarray(mask_e).tolist(),
                    fresh=not isinstance(opt_state, str),
                )
            )
            return params, "used", jnp.float32(loss_at(layers, len(calls)))

        return step

    def init(key, cfg, sampler=None):
        K = cfg.num_layers
        return params_mod.LRPCAParams.from_schedule(
            jnp.full(K + 1, 0.1), jnp.full(K, 0.5), rank=cfg.rank, n=cfg.n
        )

    monkeypatch.setattr(training, "_make_phase", make_phase)
    monkeypatch.setattr(training, "initial_params", init)


def test_curriculum_order_fresh_instances_and_optimiser_restarts(monkeypatch):
    """The loop's schedule: stage 0 runs pre + full steps on ζ₀; stage j ≥ 1 runs pre_steps on layer
    j alone, then full_steps on layers 0..j (different counts here, so a swap shows); every step
    gets a key of its own (fresh instances: not the same batch at every step of a phase, nor the
    same batches at every stage or in both phases), and every phase starts a fresh Adam state."""
    cfg = dataclasses.replace(TINY, pre_steps=2, full_steps=3)
    K = cfg.num_layers
    calls = []
    _fake_phases(monkeypatch, calls)
    log = []
    training.train_lrpca(cfg, progress=False, log=log, key=jax.random.key(0))
    assert [e["stage"] for e in log] == list(range(K + 1))

    def only(j):
        z, e = np.zeros(K + 1), np.zeros(K)
        z[j] = 1
        e[j - 1] = 1
        return z.tolist(), e.tolist()

    def upto(j):
        return (np.arange(K + 1) <= j).astype(float).tolist(), (np.arange(K) < j).astype(
            float
        ).tolist()

    want = [(0, *upto(0), i == 0) for i in range(cfg.pre_steps + cfg.full_steps)]
    for j in range(1, K + 1):
        want += [(j, *only(j), i == 0) for i in range(cfg.pre_steps)]
        want += [(j, *upto(j), i == 0) for i in range(cfg.full_steps)]
    assert [(c["stage"], c["z"], c["e"], c["fresh"]) for c in calls] == want
    keys = [c["key"] for c in calls]
    assert len(set(keys)) == len(keys)


def test_a_non_finite_loss_stops_training_and_keeps_the_last_finished_stage(monkeypatch, tmp_path):
    """A NaN loss (stage 2 here) raises RuntimeError naming the stage instead of training on; the
    checkpoint holds stage 1, the last finished one."""
    calls = []
    _fake_phases(monkeypatch, calls, loss_at=lambda stage, i: np.nan if stage == 2 else 0.0)
    ckpt = tmp_path / "nan.eqx"
    with pytest.raises(RuntimeError, match="stage 2.*lower cfg.lr"):
        training.train_lrpca(TINY, checkpoint=ckpt, progress=False, key=jax.random.key(0))
    assert max(c["stage"] for c in calls) == 2 and sum(c["stage"] == 2 for c in calls) == 1
    _, header = params_mod.read_params(ckpt.read_bytes())
    assert header["meta"]["stage"] == 1


def test_a_step_reports_the_batch_mean_of_the_stage_loss(tiny_run):
    """The loss a step returns (and the log's errors) is ℓ_j = (1/B) Σ_b loss_b on the batch drawn
    from its key, at the parameters before the update: the mean, not the sum, over the batch."""
    p = tiny_run[0]
    step = training._make_phase(TINY, 2)  # compiled by tiny_run already
    mask_z, mask_e = training._masks(p, 2, False)
    state = training._optimizer(TINY).init(eqx.filter(p, eqx.is_inexact_array))
    key = jax.random.key(11)
    _, _, loss = step(p, state, key, mask_z, mask_e)
    Y, X = training._instances(key, TINY, TINY.batch)
    per = jax.jit(jax.vmap(lambda y, x: training.stage_loss(p, y, x, 2)))(Y, X)
    assert per.shape == (TINY.batch,) and float(jnp.std(per)) > 0  # the instances differ
    np.testing.assert_allclose(float(loss), float(jnp.mean(per)), rtol=1e-5)


def test_a_diverging_instance_does_not_abort_the_compiled_training_step(tiny_run):
    """The training loss runs lrpca with throw=False: with steps η × 1e8 every run diverges, and the
    step returns a loss far above a sane one (or NaN, which train_lrpca reports by stage) instead of
    raising from inside the compiled program; stage_loss called directly raises as lrpca does."""
    p = tiny_run[0]
    bad = eqx.tree_at(lambda q: q.log_eta, p, p.log_eta + jnp.log(1e8))
    step = training._make_phase(TINY, 2)  # compiled by tiny_run already
    mask_z, mask_e = training._masks(p, 2, False)
    state = training._optimizer(TINY).init(eqx.filter(p, eqx.is_inexact_array))
    _, _, good = step(p, state, jax.random.key(11), mask_z, mask_e)
    _, _, loss = step(bad, state, jax.random.key(11), mask_z, mask_e)
    assert not np.isfinite(float(loss)) or float(loss) > float(good) + 5
    Y, X = training._instances(jax.random.key(11), TINY, 1)
    with pytest.raises(RuntimeError, match="LRPCA diverged"):
        training.stage_loss(bad, Y[0], X[0], 2)
    quiet = float(training.stage_loss(bad, Y[0], X[0], 2, throw=False))
    assert not np.isfinite(quiet) or quiet > float(good) + 5


def test_train_config_refuses_a_rank_above_n():
    with pytest.raises(ValueError, match="rank must be <= n"):
        training.TrainConfig(n=3, rank=4)
    assert training.TrainConfig(n=3, rank=3).rank == 3


def test_a_schedule_is_stored_as_logs_and_its_lengths_are_checked():
    """from_schedule stores log ζ and log η (the trained, positive-by-construction coordinates): ζ
    and η read back as given, and a model with one threshold too few or too many is refused."""
    z, e = jnp.array([1.0, 0.5, 0.25]), jnp.array([0.6, 0.3])
    p = params_mod.LRPCAParams.from_schedule(z, e, rank=2, n=60)
    np.testing.assert_allclose(p.log_zeta, np.log(np.asarray(z)), rtol=1e-6)
    np.testing.assert_allclose(p.log_eta, np.log(np.asarray(e)), rtol=1e-6)
    np.testing.assert_allclose(p.eta, e, rtol=1e-6)
    for bad_eta in (jnp.array([0.6, 0.3, 0.2]), jnp.array([0.6])):
        with pytest.raises(ValueError, match="one more entry"):
            params_mod.LRPCAParams.from_schedule(z, bad_eta, rank=2, n=60)
    with pytest.raises(ValueError, match="one more entry"):
        params_mod.LRPCAParams(jnp.zeros(3), jnp.zeros(3), jnp.ones(()), jnp.ones(()), rank=2, n=60)


def test_frmnn_grid_search_progress_bar_counts_the_instances(tiny_run, recorded_bars):
    p, _, _ = tiny_run
    grid = dict(num_instances=3, extra_layers=2, betas=jnp.array([0.8, 1.2]), phis=jnp.array([0.5]))
    chosen, errors = training.frmnn_grid_search(
        p, TINY, progress=True, **grid, key=jax.random.key(5)
    )
    (bar,) = recorded_bars
    assert bar.total == 3 and bar.n == 3 and bar.closed
    np.testing.assert_array_equal(
        errors, training.frmnn_grid_search(p, TINY, **grid, key=jax.random.key(5))[1]
    )
