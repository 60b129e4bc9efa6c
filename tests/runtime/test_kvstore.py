"""runtime.kvstore: local / device stores, push sums, pull, optimizer on the store, states."""
import numpy as np
import pytest
import torch

import module_api as mx
from compiler.errors import MXNetError
from runtime import kvstore as kvs
from runtime import optimizer as opt
from runtime.context import cpu
from runtime.launcher import LaunchCounter
from runtime.ndarray import NDArray


def _on(ctx, t):
    a = t.clone().as_subclass(NDArray)
    a._mx_ctx = ctx
    return a


def test_create_and_properties():
    for name in ("local", "device"):
        kv = kvs.create(name)
        assert kv.type == name and kv.rank == 0 and kv.num_workers == 1
        assert kv._updater is None
    with pytest.raises(MXNetError, match="distributed"):
        kvs.create("dist_sync")
    with pytest.raises(MXNetError):
        kvs.create("bogus")
    with pytest.raises(MXNetError, match="compression"):
        kvs.create("local").set_gradient_compression({"type": "2bit"})


@pytest.mark.parametrize("kv_type", ["local", "device"])
def test_init_push_pull_int_and_str_keys(kv_type):
    kv = kvs.create(kv_type)
    kv.init(3, torch.ones(2, 3))
    out = torch.zeros(2, 3)
    kv.pull(3, out=out)
    torch.testing.assert_close(out, torch.ones(2, 3))
    # push a per-device list: the store holds the sum
    kv.push(3, [_on(cpu(0), torch.full((2, 3), 1.0)), _on(cpu(1), torch.full((2, 3), 2.0))])
    outs = [_on(cpu(0), torch.zeros(2, 3)), _on(cpu(1), torch.zeros(2, 3))]
    kv.pull(3, out=outs)
    for o in outs:
        torch.testing.assert_close(o, torch.full((2, 3), 3.0))
    # lists of keys
    kv.init([5, 6], [torch.zeros(2), torch.zeros(4)])
    kv.push([5, 6], [torch.ones(2), torch.full((4,), 2.0)])
    a, b = torch.zeros(2), torch.zeros(4)
    kv.pull([5, 6], out=[a, b])
    torch.testing.assert_close(a, torch.ones(2))
    torch.testing.assert_close(b, torch.full((4,), 2.0))
    with pytest.raises(MXNetError, match="int or str"):
        kv.init("w", torch.zeros(1))
    with pytest.raises(MXNetError, match="init"):
        kv.pull(99, out=torch.zeros(1))
    ks = kvs.create(kv_type)
    ks.init("w", torch.zeros(2))
    ks.pushpull("w", [torch.ones(2), torch.ones(2)], out=a)
    torch.testing.assert_close(a, torch.full((2,), 2.0))
    v = torch.full((2,), 5.0)
    ks.pushpull("w", v)          # out=None pulls into the pushed value
    torch.testing.assert_close(v, torch.full((2,), 5.0))


def _train(kv_type, steps=4, save_at=None, tmp_path=None):
    rng = np.random.RandomState(3)
    shapes = [(6, 5), (5,), (3, 2)]
    kv = kvs.create(kv_type)
    init = [torch.tensor(rng.randn(*s).astype(np.float32)) for s in shapes]
    kv.init(list(range(len(shapes))), init)
    kv.set_optimizer(opt.create("sgd", learning_rate=0.1, momentum=0.9, wd=1e-3,
                                rescale_grad=0.5))
    assert isinstance(kv._updater, opt.Updater)
    launches = []
    for step in range(steps):
        if save_at is not None and step == save_at:
            fname = str(tmp_path / "kv.states")
            kv.save_optimizer_states(fname, dump_optimizer=True)
            # a fresh store: current weights, another optimizer, then the saved states
            outs = [torch.zeros(*s) for s in shapes]
            kv.pull(list(range(len(shapes))), out=outs)
            kv2 = kvs.create(kv_type)
            kv2.init(list(range(len(shapes))), outs)
            kv2.set_optimizer(opt.create("adam"))
            kv2.load_optimizer_states(fname)
            assert isinstance(kv2._updater.optimizer, opt.SGD)
            kv = kv2
        grads = [[torch.tensor(rng.randn(*s).astype(np.float32)) for _ in range(2)]
                 for s in shapes]
        dev_grads = [[_on(cpu(0), g[0]), _on(cpu(1), g[1])] for g in grads]
        LaunchCounter.reset()
        kv.push(list(range(len(shapes))), dev_grads)
        launches.append(LaunchCounter.total)
    outs = [torch.zeros(*s) for s in shapes]
    kv.pull(list(range(len(shapes))), out=outs)
    return outs, launches


def test_local_and_device_agree_and_update_in_one_launch():
    a, la = _train("local")
    b, lb = _train("device")
    for x, y in zip(a, b):
        torch.testing.assert_close(x, y, rtol=0, atol=0)
    assert la == lb == [1, 1, 1, 1]


def test_update_on_store_matches_updater():
    rng = np.random.RandomState(3)
    w = torch.tensor(rng.randn(4).astype(np.float32))
    g0, g1 = torch.randn(4), torch.randn(4)
    kv = kvs.create("local")
    kv.init(0, w)
    kv.set_optimizer(opt.create("adam", learning_rate=0.01))
    kv.push(0, [g0, g1])
    out = torch.zeros(4)
    kv.pull(0, out=out)
    ref = w.clone()
    opt.get_updater(opt.create("adam", learning_rate=0.01))(0, g0 + g1, ref)
    torch.testing.assert_close(out, ref, rtol=0, atol=0)


@pytest.mark.parametrize("kv_type", ["local", "device"])
def test_optimizer_states_save_load_continue(kv_type, tmp_path):
    a, _ = _train(kv_type, steps=5)
    b, _ = _train(kv_type, steps=5, save_at=2, tmp_path=tmp_path)
    for x, y in zip(a, b):
        torch.testing.assert_close(x, y, rtol=0, atol=0)
    data = (tmp_path / "kv.states").read_bytes()
    assert data.startswith(opt.MAGIC)


def test_states_need_an_optimizer(tmp_path):
    kv = kvs.create("local")
    with pytest.raises(MXNetError):
        kv.save_optimizer_states(str(tmp_path / "x"))
    with pytest.raises(MXNetError):
        kv.load_optimizer_states(str(tmp_path / "x"))


def test_a_plain_function_updater_is_called_per_key():
    """mxnet's test_kvstore pattern: ``kv._set_updater(f)`` with f(key, recv, local)."""
    kv = kvs.create("local")
    kv.init(["a", "b"], [mx.nd.zeros((2,)), mx.nd.ones((3,))])
    seen = []

    def updater(key, recv, local):
        seen.append(key)
        local += recv * 2

    kv._set_updater(updater)
    kv.push(["a", "b"], [mx.nd.ones((2,)), mx.nd.ones((3,))])
    out = [mx.nd.zeros((2,)), mx.nd.zeros((3,))]
    kv.pull(["a", "b"], out=out)
    assert seen == ["a", "b"]
    assert out[0].asnumpy().tolist() == [2.0, 2.0] and out[1].asnumpy().tolist() == [3.0] * 3
