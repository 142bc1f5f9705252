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
@pytest.mark.skipif(not video.vtest_path().is_file() or importlib.util.find_spec("cv2") is None,
                    reason="needs `make data`")
def test_decoded_clip_has_the_documented_shape():
    v = datasets.load_vtest(scale=0.25, start=10, frames=5, step=2)
    assert v.M.shape == (144 * 192, 5) and v.frame_shape == (144, 192)
    assert v.M.dtype == np.float32 and 0 <= v.M.min() and v.M.max() <= 1
    assert v.fps == pytest.approx(5.0)
    # Frames differ (people walk) but share the static background: rank-1 part dominates.
    s = np.linalg.svd(v.M, compute_uv=False)
    assert s[0] > 10 * s[1] > 0
