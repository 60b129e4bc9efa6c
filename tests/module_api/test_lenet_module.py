"""Module-level: mxnet's LeNet (examples/mnist_symbols.py) learns a generated image
task with Module.fit on the cpu target: which of four bar orientations (horizontal,
vertical, the two diagonals) a noisy 28x28 image shows, at a random offset."""
import numpy as np

import module_api as mx
from examples.mnist_symbols import lenet


def bars(n, seed):
    rs = np.random.RandomState(seed)
    x = rs.uniform(0, 0.3, (n, 1, 28, 28)).astype(np.float32)
    y = rs.randint(0, 4, n)
    for i, c in enumerate(y):
        r, q = rs.randint(6, 22, 2)
        for t in range(-6, 7):
            rr, cc = [(r, q + t), (r + t, q), (r + t, q + t), (r + t, q - t)][c]
            x[i, 0, rr, cc] = 1.0
    return x, y.astype(np.float32)


def test_lenet_learns_bar_orientation():
    x, y = bars(512, 0)
    xv, yv = bars(256, 1)
    mx.random.seed(0)
    train = mx.io.NDArrayIter(x, y, batch_size=32, shuffle=True)
    val = mx.io.NDArrayIter(xv, yv, batch_size=32)
    mod = mx.mod.Module(lenet(num_classes=4), context=mx.cpu())
    mod.fit(train, num_epoch=6, optimizer="sgd",
            optimizer_params={"learning_rate": 0.01, "momentum": 0.9, "wd": 1e-4},
            initializer=mx.init.Xavier(rnd_type="gaussian", factor_type="in", magnitude=2))
    acc = dict(mod.score(val, mx.metric.Accuracy()))["accuracy"]
    assert acc > 0.95, acc        # chance is 0.25; 0.996-1.0 for init seeds 0-3
