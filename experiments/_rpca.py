"""Helpers shared by the Robust PCA experiment scripts: output folder, CSV, timing, instances."""

from __future__ import annotations

import csv
import dataclasses
import hashlib
import json
import pathlib
import time

import jax
import numpy as np

from lowrank_jax import datasets

ROOT = pathlib.Path(__file__).resolve().parents[1]
RESULTS = ROOT / "results" / "rpca"


def out_dir() -> pathlib.Path:
    RESULTS.mkdir(parents=True, exist_ok=True)
    return RESULTS


def checkpoint(folder: pathlib.Path, stem: str, cfg) -> pathlib.Path:
    """A training checkpoint's path named after its TrainConfig: a run with other settings (--n,
    --scale, step counts) starts its own file instead of failing to resume one written for another
    configuration."""
    tag = hashlib.sha1(
        json.dumps(dataclasses.asdict(cfg), sort_keys=True, default=str).encode()
    ).hexdigest()[:8]
    folder.mkdir(parents=True, exist_ok=True)
    return folder / f"{stem}_{tag}.eqx"


def write_csv(name: str, header, rows) -> pathlib.Path:
    path = out_dir() / name
    with open(path, "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(header)
        w.writerows(rows)
    return path


def figure():
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def instance(key, n: int, rank: int, alpha: float):
    """The paper's generator (Appendix C.1, outliers U[−mean|X⋆|, mean|X⋆|]), float32, from ``key``
    (a ``jax.random`` key or an integer seed)."""
    return datasets.rpca_problem(key, n, n, rank, alpha)


def timed(fn, *args):
    """(result, seconds) of a call already compiled (the caller warms up); results awaited."""
    t0 = time.perf_counter()
    out = jax.block_until_ready(fn(*args))
    return out, time.perf_counter() - t0


def first_below(curve, level):
    """1-based index of the first entry ≤ level, or None."""
    curve = np.asarray(curve)
    hit = np.nonzero(curve <= level)[0]
    return int(hit[0]) + 1 if hit.size else None


def nearest_pretrained_alpha(alpha: float) -> float:
    from lowrank_jax.rpca.params import PRETRAINED_ALPHAS

    return min(PRETRAINED_ALPHAS, key=lambda a: abs(a - alpha))
