"""examples/train_mnist.py, scaled down: LeNet and the MLP train on the repository's
MNIST split (examples/data/mnist, 8,000 / 2,000) and reach an accuracy far above
chance (0.1) in a few hundred steps; the split files are what mxnet's MNISTIter
reads."""
import struct

import pytest

from examples import mnist_data, train_mnist


@pytest.fixture(scope="module")
def data_dir(tmp_path_factory):
    """A copy of the gzipped files, so the split is written under a temp dir."""
    import shutil
    d = tmp_path_factory.mktemp("mnist")
    for name in (mnist_data.IMAGES, mnist_data.LABELS):
        shutil.copy(f"{mnist_data.DEFAULT_DIR}/{name}", d / name)
    return d


def test_split_is_8000_and_2000_uncompressed_idx(data_dir):
    files = mnist_data.split_files(str(data_dir))
    for part, n in (("train", 8000), ("val", 2000)):
        with open(files[f"{part}_images"], "rb") as f:
            assert struct.unpack(">IIII", f.read(16)) == (2051, n, 28, 28)
        with open(files[f"{part}_labels"], "rb") as f:
            assert struct.unpack(">II", f.read(8)) == (2049, n)
            assert len(f.read()) == n


@pytest.mark.parametrize("network,lr,batches,want", [("lenet", 0.05, 40, 0.85),
                                                     ("mlp", 0.1, 60, 0.8)])
def test_network_learns(data_dir, network, lr, batches, want, capsys):
    acc = train_mnist.main(["--network", network, "--data-dir", str(data_dir),
                            "--num-epochs", "2", "--max-batches", str(batches), "--lr",
                            str(lr), "--disp-batches", "1000", "--kv-store", "local"])
    assert acc > want, acc
    assert f"final validation accuracy {acc:.4f}" in capsys.readouterr().out
