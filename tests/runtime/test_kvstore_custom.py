"""Stores written in Python (``KVStoreBase.register``, ``runtime/kvstore_base.py``):
created by name, driving a Module's training as the built-in stores do."""
import warnings

import numpy as np
import pytest

import module_api as mx


def test_teststore_broadcasts_and_sums_as_mxnet_documents():
    kv = mx.kv.create("TestStore")
    assert kv.type == "teststore" and kv.rank == 0 and kv.num_workers == 1
    assert type(kv).is_capable("optimizer") is False
    with pytest.raises(ValueError, match="Unknown capability"):
        kv.is_capable("sparse")
    out = [mx.nd.empty((2,)), mx.nd.empty((2,))]
    kv.broadcast("w", mx.nd.array([1.0, 2.0]), out)
    for o in out:
        np.testing.assert_array_equal(o.asnumpy(), [1, 2])
    vals = [mx.nd.array([1.0, 2.0]), mx.nd.array([3.0, 5.0])]
    kv.pushpull("w", vals)
    for v in vals:
        np.testing.assert_array_equal(v.asnumpy(), [4, 7])
    for method, args in (("set_optimizer", (mx.optimizer.create("sgd"),)),
                         ("save_optimizer_states", ("f",)), ("load_optimizer_states", ("f",))):
        with pytest.raises(NotImplementedError):
            getattr(kv, method)(*args)


def test_a_registered_class_is_created_by_name_and_replacing_one_warns():
    created = []

    @mx.kv.KVStoreBase.register
    class MyStoreForTest(mx.kv.KVStoreBase):
        def __init__(self):
            created.append(self)

    assert isinstance(mx.kv.create("mystorefortest"), MyStoreForTest) and created
    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")

        @mx.kv.KVStoreBase.register
        class MyStoreForTest(mx.kv.KVStoreBase):    # noqa: F811
            pass
    assert any("overriding existing kvstore" in str(w.message) for w in seen)
    del mx.kv.KVStoreBase.kv_registry["mystorefortest"]


def _fit(kvstore):
    mx.random.seed(3)
    rng = np.random.RandomState(0)
    x, y = rng.normal(size=(40, 5)), rng.randint(0, 3, size=(40,))
    data = mx.sym.var("data")
    net = mx.sym.SoftmaxOutput(mx.sym.FullyConnected(data, num_hidden=3, name="fc"),
                               name="softmax")
    mod = mx.mod.Module(net, context=[mx.cpu(0), mx.cpu(1)])
    it = mx.io.NDArrayIter(x, y, batch_size=10)
    mod.fit(it, num_epoch=2, kvstore=kvstore, optimizer="sgd",
            optimizer_params={"learning_rate": 0.5, "momentum": 0.9},
            initializer=mx.init.Xavier())
    return {k: v.asnumpy() for k, v in mod.get_params()[0].items()}


def test_a_module_trains_through_the_teststore_as_through_local():
    got, want = _fit("teststore"), _fit("local")
    for name in want:
        np.testing.assert_allclose(got[name], want[name], rtol=1e-5, atol=1e-6)
