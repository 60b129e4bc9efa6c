"""mxnet 1.9.1's ``example/numpy-ops/weighted_logistic_regression.py`` through symtriton:
a logistic regression output whose gradient weights positive and negative labels
differently, written as a Python operator (``mx.operator.CustomOp``) on NDArrays, next
to the built-in ``LogisticRegressionOutput``.

The code is the example's with the import line changed; its ``__main__`` block is
:func:`main`, which also returns what it prints.
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


class WeightedLogisticRegression(mx.operator.CustomOp):
    def __init__(self, pos_grad_scale, neg_grad_scale):
        self.pos_grad_scale = float(pos_grad_scale)
        self.neg_grad_scale = float(neg_grad_scale)

    def forward(self, is_train, req, in_data, out_data, aux):
        self.assign(out_data[0], req[0], mx.nd.divide(1, (1 + mx.nd.exp(- in_data[0]))))

    def backward(self, req, out_grad, in_data, out_data, in_grad, aux):
        in_grad[0][:] = ((out_data[0] - 1) * in_data[1] * self.pos_grad_scale
                         + out_data[0] * (1 - in_data[1]) * self.neg_grad_scale) / out_data[0].shape[1]  # noqa: E501  (the example's line)


@mx.operator.register("weighted_logistic_regression")
class WeightedLogisticRegressionProp(mx.operator.CustomOpProp):
    def __init__(self, pos_grad_scale, neg_grad_scale):
        self.pos_grad_scale = pos_grad_scale
        self.neg_grad_scale = neg_grad_scale
        super(WeightedLogisticRegressionProp, self).__init__(False)

    def list_arguments(self):
        return ['data', 'label']

    def list_outputs(self):
        return ['output']

    def infer_shape(self, in_shape):
        shape = in_shape[0]
        return [shape, shape], [shape]

    def create_operator(self, ctx, shapes, dtypes):
        return WeightedLogisticRegression(self.pos_grad_scale, self.neg_grad_scale)


def main(data_values=None):
    """The example's ``__main__`` block; ``data_values`` replaces its all-ones input.

    Returns
    -------
    dict of numpy arrays: ``wlr_output``, ``lr_output``, ``wlr_grad``, ``lr_grad``.
    """
    m, n = 2, 5
    pos, neg = 1, 0.1
    data = mx.sym.Variable('data')

    wlr = mx.sym.Custom(data, pos_grad_scale=pos, neg_grad_scale=neg, name='wlr',
                        op_type='weighted_logistic_regression')
    lr = mx.sym.LogisticRegressionOutput(data, name='lr')

    context = mx.cpu()

    exe1 = wlr.simple_bind(ctx=context, data=(2 * m, n))
    exe2 = lr.simple_bind(ctx=context, data=(2 * m, n))

    values = np.ones([2 * m, n]) if data_values is None else data_values
    exe1.arg_dict['data'][:] = values
    exe2.arg_dict['data'][:] = values

    exe1.arg_dict['wlr_label'][:] = np.vstack([np.ones([m, n]), np.zeros([m, n])])
    exe2.arg_dict['lr_label'][:] = np.vstack([np.ones([m, n]), np.zeros([m, n])])

    exe1.forward(is_train=True)
    exe2.forward(is_train=True)

    print('Weighted Logistic Regression output:')
    print(exe1.outputs[0].asnumpy())

    print('Logistic Regression output:')
    print(exe2.outputs[0].asnumpy())

    exe1.backward()
    exe2.backward()

    print('Weighted Logistic Regression gradients:')
    print(exe1.grad_dict['data'].asnumpy())

    print('Logistic Regression gradients:')
    print(exe2.grad_dict['data'].asnumpy())
    return {"wlr_output": exe1.outputs[0].asnumpy(), "lr_output": exe2.outputs[0].asnumpy(),
            "wlr_grad": exe1.grad_dict['data'].asnumpy(),
            "lr_grad": exe2.grad_dict['data'].asnumpy()}


if __name__ == '__main__':
    main()
