"""The MNIST networks of mxnet's image-classification example: ``lenet``
(LeCun et al. 1998, as mxnet's ``lenet`` symbol builds it) and ``mlp``.

Written with the Symbol API (``import module_api as mx``), layer for layer and with
mxnet's defaults, so a checkpoint saved here loads in mxnet and the other way round.
"""
import module_api as mx


def lenet(num_classes=10, **kwargs):
    """conv 5x5x20, tanh, max-pool 2, conv 5x5x50, tanh, max-pool 2, FC 500, tanh,
    FC ``num_classes``, SoftmaxOutput."""
    data = mx.sym.Variable("data")
    conv1 = mx.sym.Convolution(data=data, kernel=(5, 5), num_filter=20)
    tanh1 = mx.sym.Activation(data=conv1, act_type="tanh")
    pool1 = mx.sym.Pooling(data=tanh1, pool_type="max", kernel=(2, 2), stride=(2, 2))
    conv2 = mx.sym.Convolution(data=pool1, kernel=(5, 5), num_filter=50)
    tanh2 = mx.sym.Activation(data=conv2, act_type="tanh")
    pool2 = mx.sym.Pooling(data=tanh2, pool_type="max", kernel=(2, 2), stride=(2, 2))
    flatten = mx.sym.Flatten(data=pool2)
    fc1 = mx.sym.FullyConnected(data=flatten, num_hidden=500)
    tanh3 = mx.sym.Activation(data=fc1, act_type="tanh")
    fc2 = mx.sym.FullyConnected(data=tanh3, num_hidden=num_classes)
    return mx.sym.SoftmaxOutput(data=fc2, name="softmax")


def mlp(num_classes=10, **kwargs):
    """Flatten, FC 128, relu, FC 64, relu, FC ``num_classes``, SoftmaxOutput."""
    data = mx.sym.Flatten(data=mx.sym.Variable("data"))
    fc1 = mx.sym.FullyConnected(data=data, name="fc1", num_hidden=128)
    act1 = mx.sym.Activation(data=fc1, name="relu1", act_type="relu")
    fc2 = mx.sym.FullyConnected(data=act1, name="fc2", num_hidden=64)
    act2 = mx.sym.Activation(data=fc2, name="relu2", act_type="relu")
    fc3 = mx.sym.FullyConnected(data=act2, name="fc3", num_hidden=num_classes)
    return mx.sym.SoftmaxOutput(data=fc3, name="softmax")


NETWORKS = {"lenet": lenet, "mlp": mlp}
