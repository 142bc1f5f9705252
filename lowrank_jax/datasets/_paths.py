"""Where the real-data loaders look for files that ``make data`` installs."""

from __future__ import annotations

import os
import pathlib


def data_dir() -> pathlib.Path:
    """``$LOWRANK_JAX_DATA`` if set, else ``data/`` at the repository root (where ``make data``
    writes)."""
    env = os.environ.get("LOWRANK_JAX_DATA")
    return pathlib.Path(env) if env else pathlib.Path(__file__).resolve().parents[2] / "data"
