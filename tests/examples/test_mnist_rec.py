"""MNIST packed by im2rec (``examples/mxnet_examples.pack_mnist_rec``, what train_mnist.py
reads beside mxnet) comes back through ``ImageRecordIter`` as the IDX files' pixels and
labels, scaled as train_mnist.py's own reader scales them (``/ 255``)."""
import numpy as np

import module_api as mx
from examples import mxnet_examples
from examples.mnist_data import split_files


def test_im2rec_mnist_reads_back_through_image_record_iter(tmp_path):
    data = tmp_path / "data"
    data.mkdir()
    mxnet_examples.pack_mnist_rec(str(tmp_path / "work"), str(data), count=20)
    it = mx.io.ImageRecordIter(path_imgrec=str(data / "mnist_val.rec"), data_shape=(1, 28, 28),
                               batch_size=10, scale=1.0 / 255, shuffle=False)
    got = [(b.data[0].asnumpy(), b.label[0].asnumpy()) for b in it]
    split = split_files(out_dir=str(tmp_path / "work"))
    images = mxnet_examples._read_idx(split["val_images"])[:20]
    labels = mxnet_examples._read_idx(split["val_labels"])[:20]
    assert len(got) == 2 and got[0][0].shape == (10, 1, 28, 28)
    np.testing.assert_allclose(np.concatenate([g[0] for g in got])[:, 0],
                               images.astype(np.float32) / 255, rtol=1e-6)
    np.testing.assert_array_equal(np.concatenate([g[1] for g in got]), labels)
