"""A class-weighted logistic loss written in Python, next to the built-in one.

This program shows what mxnet 1.9.1's numpy-ops weighted logistic regression
example shows, written for this project: a loss operator defined in Python
(``mx.operator.CustomOp``, registered through ``mx.operator.CustomOpProp``) whose
``forward`` and ``backward`` are NDArray arithmetic. Its forward is the sigmoid, as
``LogisticRegressionOutput``'s is; its gradient scales the rows labelled 1 by
``pos_grad_scale`` and the rows labelled 0 by ``neg_grad_scale`` (and divides by
the number of columns), so with the scales 1 and 0.1 used here the negative rows
get a tenth of the built-in gradient. :func:`main` runs both losses on the same
input and returns (and prints) their outputs and input gradients.

``tests/fixtures/make_custom_op_fixtures.py`` runs this module under mxnet 1.9.1
(``module_api`` aliased to ``mxnet``) to record mxnet's outputs and gradients.

Run from the repository root::

    python examples/weighted_logistic_regression.py
"""
import os
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
if ROOT not in sys.path:          # running from a checkout without `pip install -e .`
    sys.path.insert(0, ROOT)

import numpy as np               # noqa: E402
import module_api as mx          # noqa: E402

OP_TYPE = "weighted_logistic_regression"
ROWS_PER_CLASS, COLUMNS = 2, 5     # the input: two rows labelled 1 over two labelled 0
POS_SCALE, NEG_SCALE = 1, 0.1


class ClassWeightedSigmoidLoss(mx.operator.CustomOp):
    """Sigmoid forward; backward ``(p - y) * scale(y) / columns``, row by row.

    Parameters
    ----------
    pos_scale, neg_scale : float
        Factors of the gradient where the label is 1 and where it is 0.
    """

    def __init__(self, pos_scale, neg_scale):
        super().__init__()
        self.pos_scale = pos_scale
        self.neg_scale = neg_scale

    def forward(self, is_train, req, in_data, out_data, aux):
        logits = in_data[0]
        probability = mx.nd.divide(1, 1 + mx.nd.exp(-logits))
        self.assign(out_data[0], req[0], probability)

    def backward(self, req, out_grad, in_data, out_data, in_grad, aux):
        probability, target = out_data[0], in_data[1]
        # (p - 1) where the label is 1, p where it is 0, each with its own weight;
        # the operand order is the one mxnet's figures were recorded with
        towards_one = (probability - 1) * target * self.pos_scale
        towards_zero = probability * (1 - target) * self.neg_scale
        columns = probability.shape[1]
        self.assign(in_grad[0], req[0], (towards_one + towards_zero) / columns)


@mx.operator.register(OP_TYPE)
class ClassWeightedSigmoidLossProp(mx.operator.CustomOpProp):
    """Declares the loss: inputs ``data`` and ``label`` of one shape, one output of
    that shape, no head gradient (it ends the graph). The two scales arrive as
    strings, as every attribute of ``mx.sym.Custom`` does."""

    def __init__(self, pos_grad_scale, neg_grad_scale):
        super().__init__(need_top_grad=False)
        self.pos_scale = float(pos_grad_scale)
        self.neg_scale = float(neg_grad_scale)

    def list_arguments(self):
        return ['data', 'label']

    def list_outputs(self):
        return ['output']

    def infer_shape(self, in_shape):
        data_shape = in_shape[0]
        return [data_shape, data_shape], [data_shape]

    def create_operator(self, ctx, shapes, dtypes):
        return ClassWeightedSigmoidLoss(self.pos_scale, self.neg_scale)


def two_losses():
    """The Python loss (node ``wlr``) and ``LogisticRegressionOutput`` (node ``lr``)
    over one ``data`` variable; each gets its label variable ``<node>_label``."""
    data = mx.sym.Variable('data')
    weighted = mx.sym.Custom(data, op_type=OP_TYPE, name='wlr',
                             pos_grad_scale=POS_SCALE, neg_grad_scale=NEG_SCALE)
    builtin = mx.sym.LogisticRegressionOutput(data, name='lr')
    return {'wlr': weighted, 'lr': builtin}


def run_loss(loss, node, inputs, labels):
    """One training step of ``loss`` on ``inputs``: ``(output, gradient of data)``."""
    exe = loss.simple_bind(ctx=mx.cpu(), data=labels.shape)
    exe.arg_dict['data'][:] = inputs
    exe.arg_dict[node + '_label'][:] = labels
    exe.forward(is_train=True)
    exe.backward()
    return exe.outputs[0].asnumpy(), exe.grad_dict['data'].asnumpy()


def main(data_values=None):
    """Run both losses on one input and compare them.

    Parameters
    ----------
    data_values : array of shape (4, 5), optional
        The input (logits); all ones by default.

    Returns
    -------
    dict of numpy arrays
        ``wlr_output`` / ``lr_output`` (the sigmoids, equal) and ``wlr_grad`` /
        ``lr_grad`` (the input gradients; the negative rows differ by the scale).
    """
    labels = np.concatenate([np.ones((ROWS_PER_CLASS, COLUMNS)),
                             np.zeros((ROWS_PER_CLASS, COLUMNS))])
    inputs = np.ones(labels.shape) if data_values is None else data_values
    results = {}
    for node, loss in two_losses().items():
        results[node + '_output'], results[node + '_grad'] = run_loss(loss, node, inputs,
                                                                      labels)
    titles = {'wlr': 'Weighted Logistic Regression', 'lr': 'Logistic Regression'}
    for kind, heading in (('output', 'output'), ('grad', 'gradients')):
        for node, title in titles.items():
            print(f'{title} {heading}:')
            print(results[f'{node}_{kind}'])
    return {key: results[key] for key in ('wlr_output', 'lr_output', 'wlr_grad', 'lr_grad')}


if __name__ == '__main__':
    main()
