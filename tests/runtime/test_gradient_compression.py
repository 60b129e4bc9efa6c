"""2-bit gradient compression with error feedback against mxnet 1.9.1
(tests/fixtures/make_compression_fixtures.py): the pulled values equal mxnet's
exactly, step after step, with and without an optimizer on the store."""
import json
import os

import numpy as np
import pytest
import torch

import module_api as mx
from compiler.errors import MXNetError
from runtime.gradient_compression import TwoBitCompression

FIXTURES = json.load(open(os.path.join(os.path.dirname(__file__), "..", "fixtures",
                                       "compression.json")))


@pytest.mark.parametrize("name", sorted(FIXTURES))
def test_device_store_matches_mxnet(name):
    case = FIXTURES[name]
    kv = mx.kv.create("device")
    kv.set_gradient_compression({"type": "2bit", "threshold": case["threshold"]})
    init = np.array(case["init"], np.float32)
    kv.init(0, mx.nd.array(init))
    if case["optimizer"]:
        kv.set_optimizer(mx.optimizer.SGD(learning_rate=0.1, momentum=0.9))
    for grads, want in zip(case["grads"], case["pulled"]):
        kv.push(0, [mx.nd.array(np.array(g, np.float32), ctx=mx.cpu(i))
                    for i, g in enumerate(grads)])
        out = mx.nd.zeros(init.shape)
        kv.pull(0, out=out)
        np.testing.assert_allclose(out.asnumpy(), np.array(want, np.float32),
                                   rtol=1e-6, atol=1e-7)


def test_residual_feeds_back_until_the_threshold_is_reached():
    comp = TwoBitCompression(0.5)
    g = torch.tensor([0.2, -0.2, 0.6])
    sent = [comp.quantize("k", g).tolist() for _ in range(3)]
    # 0.2, 0.4, 0.6 -> sends at the third push; 0.6 -> sends every push, keeps 0.1, 0.2, 0.3
    assert sent == [[0.0, 0.0, 0.5], [0.0, 0.0, 0.5], [0.5, -0.5, 0.5]]


def test_dist_store_compresses_the_workers_sum_once(monkeypatch):
    """dist_*: devices are summed uncompressed, the worker's sum is quantized."""
    from runtime import kvstore as kvs
    kv = kvs.KVStore("local")
    kv._type = "dist_sync"                     # one worker: no collective runs
    kv.set_gradient_compression({"type": "2bit", "threshold": 0.5})
    kv.init(0, mx.nd.zeros((2,)))
    kv.push(0, [mx.nd.array([0.3, 0.2]), mx.nd.array([0.3, -0.2])])
    out = mx.nd.zeros((2,))
    kv.pull(0, out=out)
    # per device each value stays under 0.5; the sum 0.6 crosses it
    assert out.asnumpy().tolist() == [0.5, 0.0]


@pytest.mark.parametrize("params, match", [
    ({"type": "3bit"}, "Unknown type for gradient compression 3bit"),
    ({"type": "2bit", "threshold": -1}, "threshold must be greater than 0"),
    ({"type": "2bit", "thresh": 1}, "unknown gradient compression parameters"),
])
def test_bad_parameters_are_named(params, match):
    with pytest.raises(MXNetError, match=match):
        mx.kv.create("device").set_gradient_compression(params)


def test_local_store_refuses_as_in_mxnet():
    with pytest.raises(MXNetError, match="not supported for this type of kvstore"):
        mx.kv.create("local").set_gradient_compression({"type": "2bit"})


def test_module_trains_with_compression_params():
    from tests.models import mlp
    mx.random.seed(0)
    rng = np.random.RandomState(0)
    x = rng.randn(64, 6).astype(np.float32)
    y = (x[:, 0] > 0).astype(np.float32)
    mod = mx.mod.Module(mlp(hidden=(8,), classes=2), context=[mx.cpu(0), mx.cpu(1)],
                        compression_params={"type": "2bit", "threshold": 0.5})
    it = mx.io.NDArrayIter(x, y, batch_size=16)
    mod.fit(it, num_epoch=10, kvstore="device", optimizer="sgd",
            optimizer_params={"learning_rate": 0.5}, initializer=mx.init.Xavier())
    assert mod._kvstore._compression is not None
    assert dict(mod.score(it, "acc"))["accuracy"] > 0.9
