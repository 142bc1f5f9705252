"""A user's mistakes get a clear word at the boundary, before any heavy work.

Each case below once returned a plausible wrong answer (η = 0 gave back the starting point as the
answer), failed deep inside with an unrelated message (``'str' object is not callable``), named the
wrong cause (a design scaled by 1e20 advised a lower learning rate), or failed only after seconds
of work (``train_lrpca`` refused ``progress="no"`` after 14 s of training). Each is now an error
naming the argument, raised before the solver runs.
"""

from __future__ import annotations

import math

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from lowrank_jax import datasets, pathnorm, regression, rpca, sdl, sweep, transforms
from lowrank_jax.rpca import training

RNG = np.random.default_rng(0)
Y = RNG.standard_normal((12, 10)).astype(np.float32)
A = RNG.standard_normal((40, 4)).astype(np.float32)
B = np.full(40, 1 / 40, np.float32)
LABELS = np.arange(40) % 2
TINY = rpca.TrainConfig(n=20, rank=2, num_layers=2, pre_steps=1, full_steps=1)
PATHNORM = dict(reg="l1", method="sgd", lr=0.1, lam=0.0, hidden=4, epochs=1)


@pytest.fixture
def no_training(monkeypatch):
    """Fail the test if training starts drawing instances: the refusal must come first."""

    def started(*args, **kwargs):
        raise AssertionError("training started before the bad argument was refused")

    monkeypatch.setattr(training, "_instances", started)


CASES = [
    # η = 0 returned the initial guess as the answer
    ("lrpca eta=0", lambda: rpca.lrpca(Y, 2, jnp.ones(3), jnp.zeros(2)), ValueError, "eta"),
    ("scaledgd eta=0", lambda: rpca.scaledgd(Y, 2, 0.1, eta=0.0), ValueError, "eta"),
    (
        "newton_direction damping=-1 (returned zeros)",
        lambda: transforms.newton_direction(jnp.eye(2), jnp.ones(2), damping=-1.0),
        ValueError,
        "damping",
    ),
    (
        "pathnorm.train with one class (trained a one-output network)",
        lambda: pathnorm.train(A, np.zeros(40, int), **PATHNORM, key=jax.random.key(0)),
        ValueError,
        "two classes",
    ),
    (
        "pathnorm.sweep over an empty grid (returned an empty result)",
        lambda: pathnorm.sweep(
            A,
            LABELS,
            lrs=[],
            lams=[],
            reg="l1",
            method="sgd",
            hidden=4,
            batch=4,
            key=jax.random.key(0),
        ),
        ValueError,
        "lrs is empty",
    ),
    (
        "a regression design scaled by 1e20 (a FloatingPointError not naming A)",
        lambda: regression.newton_solve(A * 1e20, B, 0.0, np.zeros(4)),
        ValueError,
        r"^A's largest entry",
    ),
    (
        "pathnorm inputs scaled by 1e20 (advised a lower learning rate)",
        lambda: pathnorm.train(A * 1e20, LABELS, **PATHNORM, key=jax.random.key(0)),
        ValueError,
        r"^X's largest entry",
    ),
    (
        "rpca_problem past int32 entries (a raw overflow)",
        lambda: datasets.rpca_problem(jax.random.key(0), 10**6, 10**6, 2, 0.1),
        ValueError,
        r"n1 \* n2 = 1000000000000 entries is past 2147483647",
    ),
    (
        "rpca_problem with a dtype that is not one (NumPy's message, naming no argument)",
        lambda: datasets.rpca_problem(jax.random.key(0), 10, 10, 2, 0.1, dtype="x"),
        TypeError,
        "dtype must be a floating dtype",
    ),
    (
        "rpca_problem with an array as outlier_scale (a broadcasting error)",
        lambda: datasets.rpca_problem(jax.random.key(0), 10, 10, 2, 0.1, outlier_scale=[]),
        ValueError,
        "outlier_scale must be a scalar",
    ),
    (
        "max_iter = 2**40 (a raw overflow)",
        lambda: rpca.scaledgd(Y, 2, 0.1, max_iter=2**40),
        ValueError,
        r"max_iter = 1099511627776 is past 2147483647",
    ),
    (
        "sdl.fit(max_iter=0) (refused after 5 s of work)",
        lambda: sdl.fit(A, LABELS, 2, max_iter=0),
        ValueError,
        "max_iter",
    ),
    (
        "sdl.predict on a string (an AttributeError deep inside)",
        lambda: sdl.predict("x", A),
        TypeError,
        "m must be a fitted model",
    ),
    (
        "sweep.run of a string (a TypeError deep inside)",
        lambda: sweep.run("notfn", {"a": jnp.ones(2)}),
        TypeError,
        "fn must be a function",
    ),
    (
        "lrpca_sharded(mesh='rows') (an AttributeError deep inside)",
        lambda: rpca.lrpca_sharded(Y, 2, jnp.ones(3), jnp.ones(2), mesh="rows"),
        TypeError,
        r"mesh must be a jax.sharding.Mesh \(e.g. rpca.row_mesh\(\)\)",
    ),
    (
        "TrainConfig(lr=inf) (accepted)",
        lambda: rpca.TrainConfig(lr=math.inf),
        ValueError,
        "lr must be a finite number",
    ),
]


@pytest.mark.parametrize("call, error, match", [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_a_mistake_is_refused_by_name(call, error, match):
    with pytest.raises(error, match=match):
        call()


TRAINING_CASES = [
    ("progress='no' (refused after 14 s)", dict(progress="no"), TypeError, "progress must be"),
    ("a dict as config (an AttributeError)", dict(cfg={"n": 20}), TypeError, "TrainConfig"),
    ("sampler='x' ('str' object is not callable)", dict(sampler="x"), TypeError, "sampler must"),
    ("callback=3", dict(callback=3), TypeError, "callback must"),
    ("log=3", dict(log=3), TypeError, "log must be a list"),
    ("checkpoint=3", dict(checkpoint=3), TypeError, "checkpoint must be a file path"),
]


@pytest.mark.parametrize(
    "change, error, match", [c[1:] for c in TRAINING_CASES], ids=[c[0] for c in TRAINING_CASES]
)
def test_train_lrpca_refuses_a_bad_argument_before_training(no_training, change, error, match):
    args = dict(cfg=TINY, key=jax.random.key(0)) | change
    with pytest.raises(error, match=match):
        rpca.train_lrpca(**args)
    if "cfg" in change or "sampler" in change or "progress" in change:
        params = rpca.pretrained(0.1, n=100)
        with pytest.raises(error, match=match):
            rpca.frmnn_grid_search(params, **args)


def test_labels_through_a_sweeps_shared_say_to_close_over_them():
    """The sweep guide recommends shared= for data; labels decide the number of classes and must
    be concrete, so for SDL the message says how to pass them instead."""
    X = RNG.standard_normal((20, 3)).astype(np.float32)
    y = np.arange(20) % 2
    with pytest.raises(ValueError, match=r"labels must be concrete.*closed over"):
        sweep.run(
            lambda xi, X, y: sdl.fit(X, y, 1, xi=xi, max_iter=2).status,
            {"xi": jnp.array([0.1, 1.0])},
            shared={"X": X, "y": y},
        )
