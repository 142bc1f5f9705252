"""The video loader: clear errors without the data; the decoded matrix when `make data` has run."""

import importlib.util

import numpy as np
import pytest

from lowrank_jax import datasets
from lowrank_jax.datasets import video


def test_missing_clip_names_make_data(tmp_path, monkeypatch):
    monkeypatch.setenv("LOWRANK_JAX_DATA", str(tmp_path))
    assert video.vtest_path() == tmp_path / "vtest.avi"
    with pytest.raises(FileNotFoundError, match="make data"):
        datasets.load_vtest()
    # A path the caller gave is named as theirs: `make data` would not put the clip there.
    with pytest.raises(FileNotFoundError, match=r"not found \(the path= given\); leave path out"):
        datasets.load_vtest(path=tmp_path / "elsewhere.avi")


def test_wrong_file_is_refused(tmp_path):
    bad = tmp_path / "vtest.avi"
    bad.write_bytes(b"not a video")
    with pytest.raises(ValueError, match="not the expected vtest.avi"):
        datasets.load_vtest(path=bad)
    with pytest.raises(ValueError, match="scale"):
        datasets.load_vtest(path=bad, scale=0.0)


def test_frames_view_is_the_inverse_of_raster_columns():
    frames = np.arange(2 * 3 * 4, dtype=np.float32).reshape(2, 3, 4)
    v = video.Video(frames.reshape(2, 12).T, (3, 4), 10.0)
    np.testing.assert_array_equal(v.frames(), frames)


# Runs only where `make data` has run (the clip is not in the repository; CI does not fetch it).
@pytest.mark.skipif(
    not video.vtest_path().is_file() or importlib.util.find_spec("cv2") is None,
    reason="needs `make data`",
)
def test_decoded_clip_has_the_documented_shape():
    v = datasets.load_vtest(scale=0.25, start=10, frames=5, step=2)
    assert v.M.shape == (144 * 192, 5) and v.frame_shape == (144, 192)
    assert v.M.dtype == np.float32 and 0 <= v.M.min() and v.M.max() <= 1
    assert v.fps == pytest.approx(5.0)
    # Frames differ (people walk) but share the static background: rank-1 part dominates.
    s = np.linalg.svd(v.M, compute_uv=False)
    assert s[0] > 10 * s[1] > 0


def test_frame_selection_must_be_integers_and_is_checked_before_the_clip(tmp_path, monkeypatch):
    """load_vtest(step=1.5, frames=2.5) passed validation (and selected frames by a fractional
    rule). Counts are now integers, checked by name before the loader looks for the clip."""
    monkeypatch.setenv(
        "LOWRANK_JAX_DATA", str(tmp_path)
    )  # no clip here: only the checks can answer
    for kwargs, match in [
        (dict(step=1.5), "step"),
        (dict(frames=2.5), "frames"),
        (dict(start=0.5), "start"),
        (dict(step=0), "step"),
        (dict(frames=0), "frames"),
        (dict(start=-1), "start"),
        (dict(step=True), "step"),
        (dict(scale=float("nan")), "scale"),
        (dict(scale="0.5"), "scale"),
        (dict(scale=1.5), "scale"),
    ]:
        with pytest.raises(ValueError, match=match):
            datasets.load_vtest(**kwargs)
    assert video._check_selection(np.float32(0.5), np.int64(2), np.int32(10), 3) == (0.5, 2, 10, 3)
    assert video._check_selection(1, 0, None, 1) == (1.0, 0, None, 1)
    with pytest.raises(
        FileNotFoundError, match="make data"
    ):  # valid arguments reach the file check
        datasets.load_vtest(start=2, frames=5, step=3)
