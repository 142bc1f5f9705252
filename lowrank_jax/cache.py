"""JAX's persistent compilation cache, for interactive use.

Most of a solver's first call is XLA compiling its program (seconds on a CPU); later calls at new
hyperparameter values reuse the program. With the cache on, a program compiled in one Python
session is read back from disk in the next, so a notebook's first calls take a fraction of the
cold time (``python bench/bench_first_call.py`` measures both; the benchmarks page has the table).

    import lowrank_jax
    lowrank_jax.enable_compilation_cache()   # once, before the first solve

It is safe in the sense that matters: an entry is keyed on the program, the compile options, the
backend and the JAX version, so a hit returns the same compiled program a fresh compile would and
never changes a result. Keep the directory on the machine that compiles (the default is): code
compiled for one CPU's instruction set is not meant for another's.
"""

from __future__ import annotations

import os
import pathlib

import jax
from jax.experimental.compilation_cache import compilation_cache as _jax_cache

__all__ = ["enable_compilation_cache"]


def _default_directory() -> pathlib.Path:
    base = os.environ.get("XDG_CACHE_HOME") or pathlib.Path.home() / ".cache"
    return pathlib.Path(base) / "lowrank_jax" / "xla"


def _configured() -> str | None:
    """The cache directory JAX is configured with (None: no cache)."""
    return jax.config.jax_compilation_cache_dir  # type: ignore[attr-defined]


def enable_compilation_cache(directory: str | os.PathLike | None = None) -> pathlib.Path:
    """Turn on JAX's persistent compilation cache, caching every program however fast it compiled.

    Where a cache directory is already configured (``jax.config.jax_compilation_cache_dir`` or
    the ``JAX_COMPILATION_CACHE_DIR`` variable) and ``directory`` is not given, that one is kept.

    Args:
      directory: where compiled programs are stored; default ``$XDG_CACHE_HOME/lowrank_jax/xla``
        (``~/.cache/lowrank_jax/xla``). Created if missing.

    Returns:
      The cache directory in use.

    Example:
      ```python
      import tempfile
      import lowrank_jax

      where = lowrank_jax.enable_compilation_cache(tempfile.mkdtemp())
      print(where.is_dir())  # True
      ```
    """
    if directory is None:
        current = _configured()
        directory = current if current else _default_directory()
    if not isinstance(directory, (str, os.PathLike)):
        raise TypeError(f"directory must be a path, got {type(directory).__name__}")
    path = pathlib.Path(directory).expanduser()
    path.mkdir(parents=True, exist_ok=True)
    if _configured() != str(path):
        # JAX opens its cache at the first compile and keeps that directory until reset.
        _jax_cache.reset_cache()
        jax.config.update("jax_compilation_cache_dir", str(path))
    # JAX caches only programs that took a second or more to compile by default; a solver's first
    # call is many programs of well under a second each.
    jax.config.update("jax_persistent_cache_min_compile_time_secs", 0.0)
    jax.config.update("jax_persistent_cache_min_entry_size_bytes", 0)
    return path
