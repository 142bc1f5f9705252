"""Where the real-data loaders look for files that ``make data`` installs, and the SHA-256 check
every loader runs on each file it reads."""

from __future__ import annotations

import hashlib
import os
import pathlib

_CHUNK = 1 << 20
# (resolved path, size, mtime_ns, ctime_ns, inode) -> hex SHA-256: a file is hashed once per
# process; rewriting it changes its mtime and ctime, so it is hashed again.
_DIGESTS: dict[tuple[str, int, int, int, int], str] = {}


def data_dir() -> pathlib.Path:
    """The folder the real-data loaders read: ``$LOWRANK_JAX_DATA`` if set, else ``data/``.

    ``make data`` writes to ``data/`` at the repository root.

    Returns:
      A ``pathlib.Path`` (the folder may not exist).
    """
    env = os.environ.get("LOWRANK_JAX_DATA")
    return pathlib.Path(env) if env else pathlib.Path(__file__).resolve().parents[2] / "data"


def sha256_file(path) -> str:
    """The SHA-256 of a file's bytes, read in 1 MiB chunks and remembered for the process.

    The memo is keyed by the resolved path, size, modification and change times (ns) and inode, so
    a file that is rewritten or replaced is hashed again.

    Args:
      path: the file.

    Returns:
      The digest as 64 lower-case hex digits.
    """
    path = pathlib.Path(path).resolve()
    st = path.stat()
    key = (str(path), st.st_size, st.st_mtime_ns, st.st_ctime_ns, st.st_ino)
    digest = _DIGESTS.get(key)
    if digest is None:
        h = hashlib.sha256()
        with open(path, "rb") as f:
            for chunk in iter(lambda: f.read(_CHUNK), b""):
                h.update(chunk)
        digest = _DIGESTS[key] = h.hexdigest()
    return digest


def check_sha256(path, expected: str, remedy: str = "re-run `make data`") -> pathlib.Path:
    """Refuse a file whose SHA-256 is not the pinned one.

    Args:
      path: the file about to be read.
      expected: its pinned SHA-256 (64 lower-case hex digits).
      remedy: what to do about a mismatch, the end of the error message (default: re-run
        ``make data``).

    Returns:
      ``path`` as a ``pathlib.Path``.

    Raises:
      ValueError: naming the file, its digest and the pinned one, and ``remedy``.
    """
    path = pathlib.Path(path)
    digest = sha256_file(path)
    if digest != expected:
        raise ValueError(
            f"{path} is not the expected file (sha256 {digest}, pinned {expected}): {remedy}"
        )
    return path
