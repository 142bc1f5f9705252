"""Static-camera video as a pixels × frames matrix (Robust PCA background subtraction).

The clip is OpenCV's ``vtest.avi`` (pedestrians on a square, fixed camera; 795 frames of
768 × 576 at 10 fps; Apache-2.0/BSD), shipped in Debian's ``opencv-doc`` package. ``make data``
extracts that one file into ``data/`` and installs the decoder (``opencv-python-headless``, the
``data`` extra). Nothing is downloaded at run time.
"""

from __future__ import annotations

import pathlib
from typing import NamedTuple

import numpy as np

from lowrank_jax import _checks
from lowrank_jax.datasets._paths import check_sha256, data_dir

VTEST_SHA256 = "45cddc9490be69345cbdab64ca583be65987e864ca408038e648db99e10516cf"


class Video(NamedTuple):
    """A grey-scale video as a matrix, for background/foreground separation by Robust PCA.

    Attributes:
      M: (pixels, frames) float32 array in [0, 1]; column j is frame j, raster-scanned.
      frame_shape: (height, width) of a frame.
      fps: frames per second of the kept frames.
    """

    M: np.ndarray
    frame_shape: tuple[int, int]
    fps: float

    def frames(self, X=None) -> np.ndarray:
        """The frames of ``X`` as images, e.g. of a background X or of outliers S.

        Args:
          X: a (pixels, frames) array; default ``M``.

        Returns:
          A (frames, height, width) NumPy array.
        """
        X = self.M if X is None else np.asarray(X)
        return X.T.reshape((X.shape[1],) + self.frame_shape)


def vtest_path() -> pathlib.Path:
    """Where OpenCV's ``vtest.avi`` lies in the data folder (as ``make data`` extracts it).

    Returns:
      The path ``data_dir() / "vtest.avi"``; the file may be absent.
    """
    return data_dir() / "vtest.avi"


def _check_selection(scale, start, frames, step):
    """``load_vtest``'s arguments, checked before the clip is looked for: ``scale`` a finite number
    in (0, 1]; ``start`` >= 0, ``step`` >= 1 and ``frames`` >= 1 (or None) integers — a step of 1.5
    or frames = 2.5 passed and selected frames by a fractional rule. Returns them as Python numbers,
    or raises ``ValueError`` naming the argument."""
    value = _checks.as_real(scale)
    if value is None or not 0 < value <= 1:  # NaN fails too
        raise ValueError(f"scale must be a number in (0, 1], got {scale!r}")
    start = _checks.check_positive_int(start, "start", minimum=0)
    step = _checks.check_positive_int(step, "step")
    frames = _checks.check_positive_int(frames, "frames", allow_none=True)
    return value, start, frames, step


def load_vtest(
    *,
    scale: float = 0.25,
    start: int = 0,
    frames: int | None = None,
    step: int = 1,
    path=None,
    check_hash: bool = True,
) -> Video:
    """Grey, down-sampled frames of ``vtest.avi`` as a (pixels, frames) matrix.

    Frames start, start + step, start + 2·step, ... are kept, ``frames`` of them (all by default).

    Args:
      scale: resize factor per side (area averaging), a number in (0, 1]; 0.25 (default) gives
        144 × 192 frames (27 648 pixels), the paper's "down-sample by 4" (Table 2 setting).
      start: the first frame kept, an integer ≥ 0 (default 0).
      frames: the number of frames kept, an integer ≥ 1, or None (default) for all to the end.
      step: keep every ``step``-th frame, an integer ≥ 1 (default 1).
      path: the clip (default ``vtest_path``).
      check_hash: verify the file's SHA-256 against the Debian package's copy (default True).

    Returns:
      A ``Video`` with M of shape (height · width, kept frames) and
      fps = the clip's fps / step.

    Raises:
      ValueError: an argument outside its range, a file that is not the expected clip, or no frame
        decoded (``start`` past the end).
      FileNotFoundError: the clip is absent (run ``make data``).
      ImportError: the decoder (``opencv-python-headless``) is not installed (run ``make data``).
    """
    scale, start, frames, step = _check_selection(scale, start, frames, step)
    given = path is not None
    path = pathlib.Path(path) if given else vtest_path()
    if not path.is_file():
        if given:  # `make data` does not write to a path the caller chose
            raise FileNotFoundError(
                f"video clip {path} not found (the path= given); leave path out to use the "
                "copy `make data` extracts into data/vtest.avi"
            )
        raise FileNotFoundError(
            f"video clip {path} not found: run `make data` (it extracts vtest.avi from "
            "Debian's opencv-doc package into data/)"
        )
    if _checks.check_flag(check_hash, "check_hash"):
        check_sha256(path, VTEST_SHA256, "it is not the expected vtest.avi; re-run `make data`")
    try:
        import cv2
    except ImportError:
        raise ImportError(
            "decoding the clip needs opencv-python-headless: run `make data`"
        ) from None
    cap = cv2.VideoCapture(str(path))
    fps = cap.get(cv2.CAP_PROP_FPS) or 10.0
    cols: list[np.ndarray] = []
    shape: tuple[int, int] | None = None
    index = 0
    try:
        while frames is None or len(cols) < frames:
            ok, frame = cap.read()
            if not ok:
                break
            if index >= start and (index - start) % step == 0:
                grey = cv2.cvtColor(frame, cv2.COLOR_BGR2GRAY)
                if scale != 1:
                    grey = cv2.resize(grey, None, fx=scale, fy=scale, interpolation=cv2.INTER_AREA)
                shape = grey.shape
                cols.append(grey.astype(np.float32).ravel() / 255.0)
            index += 1
    finally:
        cap.release()
    if not cols or shape is None:  # shape is set with the first decoded frame
        raise ValueError(f"no frames decoded from {path} (start = {start} past the end?)")
    return Video(np.stack(cols, axis=1), shape, fps / step)
