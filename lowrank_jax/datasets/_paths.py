"""Where the real-data loaders look for files that ``make data`` installs."""

from __future__ import annotations

import os
import pathlib


def data_dir() -> pathlib.Path:
    """The folder the real-data loaders read: ``$LOWRANK_JAX_DATA`` if set, else ``data/``.

    ``make data`` writes to ``data/`` at the repository root.

    Returns:
      A ``pathlib.Path`` (the folder may not exist).
    """
    env = os.environ.get("LOWRANK_JAX_DATA")
    return pathlib.Path(env) if env else pathlib.Path(__file__).resolve().parents[2] / "data"
