"""mxnet 1.9.1's ``example/numpy-ops/custom_softmax.py`` through symtriton: an MLP on
MNIST whose softmax (and its gradient) is a Python operator (``mx.operator.CustomOp``)
computed with numpy, between the compiled FullyConnected/ReLU segment and the loss.

The operator and the network are the example's, with the import line changed. Two
other changes, neither in the operator's semantics: ``np.int`` (gone from numpy 2)
is ``int``, and the data are the repository's MNIST split (``examples/data/mnist``,
the official test set: 8,000 images for training, 2,000 for validation; the training
set is not in the repository), laid out as the ``data/`` folder
``get_mnist_iterator`` reads, so mxnet and symtriton read the same files.
``tests/fixtures/make_custom_op_fixtures.py`` runs this very module under mxnet
1.9.1 (``module_api`` aliased to ``mxnet``) to record its accuracy.

Run from the repository root::

    python examples/custom_softmax.py --num-epochs 10

The last line printed is ``final validation accuracy <value>``.
"""
from __future__ import annotations

import argparse
import logging
import os
import shutil
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
if ROOT not in sys.path:          # running from a checkout without `pip install -e .`
    sys.path.insert(0, ROOT)

import module_api as mx                                  # noqa: E402
from module_api.test_utils import get_mnist_iterator     # noqa: E402
import numpy as np                                       # noqa: E402

from examples.mnist_data import DEFAULT_DIR, split_files  # noqa: E402


class Softmax(mx.operator.CustomOp):
    def forward(self, is_train, req, in_data, out_data, aux):
        x = in_data[0].asnumpy()
        y = np.exp(x - x.max(axis=1).reshape((x.shape[0], 1)))
        y /= y.sum(axis=1).reshape((x.shape[0], 1))
        self.assign(out_data[0], req[0], mx.nd.array(y))

    def backward(self, req, out_grad, in_data, out_data, in_grad, aux):
        l = in_data[1].asnumpy().ravel().astype(int)   # noqa: E741  (np.int in mxnet's)
        y = out_data[0].asnumpy()
        y[np.arange(l.shape[0]), l] -= 1.0
        self.assign(in_grad[0], req[0], mx.nd.array(y))


@mx.operator.register("softmax")
class SoftmaxProp(mx.operator.CustomOpProp):
    def __init__(self):
        super(SoftmaxProp, self).__init__(need_top_grad=False)

    def list_arguments(self):
        return ['data', 'label']

    def list_outputs(self):
        return ['output']

    def infer_shape(self, in_shape):
        data_shape = in_shape[0]
        label_shape = (in_shape[0][0],)
        output_shape = in_shape[0]
        return [data_shape, label_shape], [output_shape], []

    def infer_type(self, in_type):
        return in_type, [in_type[0]], []

    def create_operator(self, ctx, shapes, dtypes):
        return Softmax()


def network():
    """The example's MLP, ending in the Python softmax."""
    data = mx.symbol.Variable('data')
    fc1 = mx.symbol.FullyConnected(data=data, name='fc1', num_hidden=128)
    act1 = mx.symbol.Activation(data=fc1, name='relu1', act_type="relu")
    fc2 = mx.symbol.FullyConnected(data=act1, name='fc2', num_hidden=64)
    act2 = mx.symbol.Activation(data=fc2, name='relu2', act_type="relu")
    fc3 = mx.symbol.FullyConnected(data=act2, name='fc3', num_hidden=10)
    return mx.symbol.Custom(data=fc3, name='softmax', op_type='softmax')


def mnist_folder(work_dir):
    """``work_dir/data`` holding the split under the names ``get_mnist_iterator`` reads
    (training part as ``train-*``, validation part as ``t10k-*``)."""
    files = split_files(DEFAULT_DIR, os.path.join(work_dir, "split"))
    os.makedirs(os.path.join(work_dir, "data"), exist_ok=True)
    for part, prefix in (("train", "train"), ("val", "t10k")):
        for kind, idx in (("images", 3), ("labels", 1)):
            shutil.copy(files[f"{part}_{kind}"],
                        os.path.join(work_dir, "data", f"{prefix}-{kind}-idx{idx}-ubyte"))
    return work_dir


def main(argv=None):
    """Train as the example does; return the final validation accuracy."""
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--num-epochs", type=int, default=10)
    p.add_argument("--seed", type=int, default=None, help="mx.random.seed before training")
    ns = p.parse_args(argv)
    if ns.seed is not None:
        mx.random.seed(ns.seed)
        np.random.seed(ns.seed)
    logging.basicConfig(level=logging.INFO)
    here = os.getcwd()
    with tempfile.TemporaryDirectory() as work:
        os.chdir(mnist_folder(work))
        try:
            train, val = get_mnist_iterator(batch_size=100, input_shape=(784,))
            mod = mx.mod.Module(network(), context=mx.cpu())
            mod.fit(train_data=train, eval_data=val, optimizer='sgd',
                    optimizer_params={'learning_rate': 0.1, 'momentum': 0.9, 'wd': 0.00001},
                    num_epoch=ns.num_epochs,
                    batch_end_callback=mx.callback.Speedometer(100, 100))
            acc = dict(mod.score(val, 'acc'))['accuracy']
        finally:
            os.chdir(here)
    print(f"final validation accuracy {acc:.4f}")
    return acc


if __name__ == '__main__':
    main()
