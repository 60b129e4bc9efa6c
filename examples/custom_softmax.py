"""Train an MNIST MLP whose softmax loss is a Python operator computed with numpy.

This program shows what mxnet 1.9.1's numpy-ops custom-softmax example shows,
written for this project: a loss defined in Python (``mx.operator.CustomOp``,
declared by a ``mx.operator.CustomOpProp``) ends a network whose other layers are
compiled. Its ``forward`` is a numerically stable softmax over each row, its
``backward`` the cross-entropy gradient ``softmax - one_hot(label)`` (not divided
by the batch: ``Module`` sets the optimizer's ``rescale_grad``); both run in numpy
on copies of the NDArrays. Between the compiled FullyConnected/ReLU segment and the
loss, symtriton cuts the graph and calls the operator.

The data are the repository's MNIST split (``examples/data/mnist``, the official
test set: 8,000 images for training, 2,000 for validation), staged in a temporary
folder under the file names ``get_mnist_iterator`` reads, so mxnet and symtriton
read the same files. ``tests/fixtures/make_custom_op_fixtures.py`` runs this module
under mxnet 1.9.1 (``module_api`` aliased to ``mxnet``) to record its accuracy.

Run from the repository root::

    python examples/custom_softmax.py --num-epochs 10

The last line printed is ``final validation accuracy <value>``.
"""
from __future__ import annotations

import argparse
import contextlib
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

OP_TYPE = "numpy_softmax"
HIDDEN_UNITS = (128, 64)
NUM_CLASSES = 10
BATCH_SIZE = 100
SGD_PARAMS = {'learning_rate': 0.1, 'momentum': 0.9, 'wd': 0.00001}


def row_softmax(scores):
    """Softmax of each row of a 2-d numpy array (the row maximum subtracted first)."""
    exps = np.exp(scores - scores.max(axis=1, keepdims=True))
    exps /= exps.sum(axis=1, keepdims=True)
    return exps


class NumpySoftmax(mx.operator.CustomOp):
    """Softmax cross-entropy loss: the probabilities forward, ``p - one_hot`` back."""

    def forward(self, is_train, req, in_data, out_data, aux):
        probabilities = row_softmax(in_data[0].asnumpy())
        self.assign(out_data[0], req[0], mx.nd.array(probabilities))

    def backward(self, req, out_grad, in_data, out_data, in_grad, aux):
        classes = in_data[1].asnumpy().ravel().astype(int)
        grad = out_data[0].asnumpy()
        grad[np.arange(len(classes)), classes] -= 1.0
        self.assign(in_grad[0], req[0], mx.nd.array(grad))


@mx.operator.register(OP_TYPE)
class NumpySoftmaxProp(mx.operator.CustomOpProp):
    """Declares the loss: ``data`` (batch, classes) and ``label`` (batch,) in, the
    probabilities out, in the data's dtype; no head gradient (it ends the graph)."""

    def __init__(self):
        super().__init__(need_top_grad=False)

    def list_arguments(self):
        return ['data', 'label']

    def list_outputs(self):
        return ['output']

    def infer_shape(self, in_shape):
        scores = in_shape[0]
        return [scores, (scores[0],)], [scores], []

    def infer_type(self, in_type):
        return in_type, [in_type[0]], []

    def create_operator(self, ctx, shapes, dtypes):
        return NumpySoftmax()


def network():
    """``fc1``-``relu1``-``fc2``-``relu2``-``fc3`` and the Python loss ``softmax``
    (its label variable is ``softmax_label``)."""
    net = mx.sym.Variable('data')
    for layer, units in enumerate(HIDDEN_UNITS, start=1):
        net = mx.sym.FullyConnected(data=net, name=f'fc{layer}', num_hidden=units)
        net = mx.sym.Activation(data=net, name=f'relu{layer}', act_type='relu')
    net = mx.sym.FullyConnected(data=net, name=f'fc{len(HIDDEN_UNITS) + 1}',
                                num_hidden=NUM_CLASSES)
    return mx.sym.Custom(data=net, name='softmax', op_type=OP_TYPE)


def stage_mnist(work_dir):
    """Copy the MNIST split into ``work_dir/data`` as ``get_mnist_iterator`` names
    it (training part ``train-*``, validation part ``t10k-*``); return ``work_dir``."""
    split = split_files(DEFAULT_DIR, os.path.join(work_dir, "split"))
    target = os.path.join(work_dir, "data")
    os.makedirs(target, exist_ok=True)
    for part, stem in (("train", "train"), ("val", "t10k")):
        shutil.copy(split[f"{part}_images"], os.path.join(target, f"{stem}-images-idx3-ubyte"))
        shutil.copy(split[f"{part}_labels"], os.path.join(target, f"{stem}-labels-idx1-ubyte"))
    return work_dir


def train_and_score(num_epochs):
    """Fit the network with SGD on the staged split; the validation accuracy."""
    with tempfile.TemporaryDirectory() as work, contextlib.chdir(stage_mnist(work)):
        train, val = get_mnist_iterator(batch_size=BATCH_SIZE, input_shape=(784,))
        mod = mx.mod.Module(network(), context=mx.cpu())
        mod.fit(train_data=train, eval_data=val, optimizer='sgd',
                optimizer_params=dict(SGD_PARAMS), num_epoch=num_epochs,
                batch_end_callback=mx.callback.Speedometer(BATCH_SIZE, 100))
        return dict(mod.score(val, 'acc'))['accuracy']


def parse_args(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--num-epochs", type=int, default=10)
    parser.add_argument("--seed", type=int, default=None,
                        help="seed mx.random and numpy.random before training")
    return parser.parse_args(argv)


def main(argv=None):
    """Train and report; return the final validation accuracy (a float)."""
    args = parse_args(argv)
    if args.seed is not None:
        mx.random.seed(args.seed)
        np.random.seed(args.seed)
    logging.basicConfig(level=logging.INFO)
    accuracy = train_and_score(args.num_epochs)
    print(f"final validation accuracy {accuracy:.4f}")
    return accuracy


if __name__ == '__main__':
    main()
