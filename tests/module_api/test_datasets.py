"""``mx.test_utils.get_mnist`` / ``get_mnist_ubyte`` / ``get_mnist_iterator`` /
``get_cifar10``: local files found where documented (a ``data_dir`` argument,
``./data``, ``SYMTRITON_DATA_DIR``, ``MXNET_HOME``), mxnet's return values, and an
error naming every folder looked in."""
import gzip
import os
import struct

import numpy as np
import pytest

import module_api as mx
from module_api.datasets import MNIST_FILES
from module_api.mnist_iter import std_shuffle_order

REPO_MNIST = os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(
    os.path.abspath(__file__)))), "examples", "data", "mnist")


def _write_mnist(folder, n_train=30, n_test=20, gz=True):
    """Small MNIST-shaped IDX files (28x28, labels 0-9); returns the raw arrays."""
    os.makedirs(folder, exist_ok=True)
    rs = np.random.RandomState(1)
    parts = {}
    for prefix, n in (("train", n_train), ("t10k", n_test)):
        images = rs.randint(0, 256, (n, 28, 28)).astype(np.uint8)
        labels = rs.randint(0, 10, n).astype(np.uint8)
        parts[prefix] = (images, labels)
        for name, blob in ((f"{prefix}-images-idx3-ubyte",
                            struct.pack(">IIII", 2051, n, 28, 28) + images.tobytes()),
                           (f"{prefix}-labels-idx1-ubyte",
                            struct.pack(">II", 2049, n) + labels.tobytes())):
            with open(os.path.join(folder, name + (".gz" if gz else "")), "wb") as f:
                f.write(gzip.compress(blob) if gz else blob)
    return parts


@pytest.fixture
def clean_env(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("SYMTRITON_DATA_DIR", raising=False)
    monkeypatch.setenv("MXNET_HOME", str(tmp_path / "mxhome"))
    return tmp_path


def test_get_mnist_from_a_data_dir_argument(clean_env):
    parts = _write_mnist(str(clean_env / "mine"))
    got = mx.test_utils.get_mnist(data_dir=str(clean_env / "mine"))
    assert sorted(got) == ["test_data", "test_label", "train_data", "train_label"]
    images, labels = parts["train"]
    assert got["train_data"].shape == (30, 1, 28, 28) and got["train_data"].dtype == np.float32
    np.testing.assert_array_equal(got["train_data"][:, 0], images.astype(np.float32) / 255)
    assert got["train_label"].dtype == np.int8        # as mxnet reads the labels
    np.testing.assert_array_equal(got["train_label"], labels)
    assert got["test_data"].shape == (20, 1, 28, 28)


@pytest.mark.parametrize("where", ["env", "env_sub", "mxnet_home", "cwd_data"])
def test_get_mnist_finds_the_documented_folders(clean_env, monkeypatch, where):
    folder = {"env": clean_env / "d", "env_sub": clean_env / "d" / "mnist",
              "mxnet_home": clean_env / "mxhome" / "datasets" / "mnist",
              "cwd_data": clean_env / "data"}[where]
    if where.startswith("env"):
        monkeypatch.setenv("SYMTRITON_DATA_DIR", str(clean_env / "d"))
    parts = _write_mnist(str(folder), gz=where != "cwd_data")
    got = mx.test_utils.get_mnist()
    np.testing.assert_array_equal(got["test_label"], parts["t10k"][1])


def test_missing_files_name_every_folder(clean_env, monkeypatch):
    monkeypatch.setenv("SYMTRITON_DATA_DIR", str(clean_env / "d"))
    with pytest.raises(mx.MXNetError) as err:
        mx.test_utils.get_mnist(data_dir=str(clean_env / "given"))
    msg = str(err.value)
    assert "does not download" in msg and "train-images-idx3-ubyte[.gz]" in msg
    for folder in ("given", "data", "d", os.path.join("d", "mnist"),
                   os.path.join("mxhome", "datasets", "mnist")):
        assert str(clean_env / folder) in msg
    # the repository's copy holds the test set only: the training files are named missing
    with pytest.raises(mx.MXNetError, match=r"train-labels-idx1-ubyte\[\.gz\]"):
        mx.test_utils.get_mnist(data_dir=REPO_MNIST)
    with pytest.raises(mx.MXNetError, match="get_cifar10: .*train.rec, test.rec"):
        mx.test_utils.get_cifar10()


def test_get_mnist_ubyte_and_iterator(clean_env):
    parts = _write_mnist(str(clean_env / "src"), n_train=40)
    train, val = mx.test_utils.get_mnist_iterator(10, (784,), data_dir=str(clean_env / "src"))
    for name in MNIST_FILES:       # uncompressed copies in ./data, as mxnet leaves them
        with open(clean_env / "data" / name, "rb") as f:
            assert f.read(4) in (struct.pack(">I", 2051), struct.pack(">I", 2049))
    assert train.provide_data[0].shape == (10, 784)
    assert sum(1 for _ in train) == 4 and sum(1 for _ in val) == 2
    val.reset()
    # mxnet's helper leaves validation at MNISTIter's default: shuffled once, seed 0
    first = next(iter(val))
    order = std_shuffle_order(20, 0)[:10]
    np.testing.assert_allclose(first.data[0].asnumpy(),
                               parts["t10k"][0][order].reshape(10, 784) / 256.0)
    np.testing.assert_array_equal(first.label[0].asnumpy(), parts["t10k"][1][order])
    images, _ = mx.test_utils.get_mnist_iterator(5, (1, 28, 28), num_parts=2, part_index=1)
    assert images.provide_data[0].shape == (5, 1, 28, 28)      # ./data is used now
    assert sum(1 for _ in images) == 4                          # 20 of the 40 examples


def test_get_cifar10_copies_the_record_files(clean_env, monkeypatch):
    src = clean_env / "d" / "cifar"
    src.mkdir(parents=True)
    for name in ("train.rec", "test.rec", "train.lst", "test.lst"):
        (src / name).write_bytes(name.encode())
    monkeypatch.setenv("SYMTRITON_DATA_DIR", str(clean_env / "d"))
    mx.test_utils.get_cifar10()
    assert (clean_env / "data" / "cifar" / "test.lst").read_bytes() == b"test.lst"
