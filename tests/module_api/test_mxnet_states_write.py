"""``SYMTRITON_STATES_FORMAT=mxnet``: the .states we write are mxnet 1.9.1's pickle
(runtime/mxnet_states.py). They load back here through the restricted loader,
and in mxnet 1.9.1 itself when its interpreter is available."""
import os
import pickletools
import subprocess

import numpy as np
import pytest

import module_api as mx

OPT = {"learning_rate": 0.1, "momentum": 0.9}
# the Makefile's mxnet 1.9.1 venv (`make mxnet-venv`); the test skips without it
MXNET_PYTHON = os.environ.get("MXNET_PYTHON", os.path.join(
    os.path.dirname(__file__), "..", "..", ".mxnet-venv", "bin", "python"))


def _trained(tmp_path, monkeypatch):
    monkeypatch.setenv("SYMTRITON_STATES_FORMAT", "mxnet")
    rng = np.random.RandomState(0)
    x, y = rng.randn(16, 5).astype(np.float32), rng.randint(0, 3, 16).astype(np.float32)
    net = mx.sym.FullyConnected(mx.sym.var("data"), num_hidden=3, name="fc")
    mod = mx.mod.Module(mx.sym.SoftmaxOutput(net, name="softmax"), context=mx.cpu())
    mod.fit(mx.io.NDArrayIter(x, y, batch_size=8), num_epoch=2, optimizer="sgd",
            optimizer_params=OPT, kvstore=None)
    prefix = str(tmp_path / "ours")
    mod.save_checkpoint(prefix, 2, save_optimizer_states=True)
    moms = {i: mod._updater.states[i].asnumpy()
            for i in range(len(mod._exec_group.param_names))}
    return mod, prefix, moms


def test_written_states_are_mxnets_pickle_and_load_back(tmp_path, monkeypatch):
    mod, prefix, moms = _trained(tmp_path, monkeypatch)
    data = open(prefix + "-0002.states", "rb").read()
    ops = [op.name for op, _, _ in pickletools.genops(data)]
    assert ops[0] == "PROTO" and ops[-1] == "STOP"
    globals_ = [arg for op, arg, _ in pickletools.genops(data) if op.name == "GLOBAL"]
    assert set(globals_) == {"mxnet.ndarray.ndarray NDArray", "__builtin__ bytearray",
                             "_codecs encode"}
    mod.load_optimizer_states(prefix + "-0002.states", allow_pickle=True)
    for i, m in moms.items():
        np.testing.assert_array_equal(mod._updater.states[i].asnumpy(), m)


@pytest.mark.skipif(not os.path.exists(MXNET_PYTHON), reason="no mxnet 1.9.1 interpreter")
def test_mxnet_loads_the_written_states(tmp_path, monkeypatch):
    _, prefix, moms = _trained(tmp_path, monkeypatch)
    np.savez(str(tmp_path / "moms.npz"), **{str(k): v for k, v in moms.items()})
    script = f"""
import mxnet as mx, numpy as np
mod = mx.mod.Module.load({prefix!r}, 2, load_optimizer_states=True, context=mx.cpu())
mod.bind([('data', (8, 5))], [('softmax_label', (8,))])
mod.init_optimizer(optimizer='sgd', optimizer_params={OPT!r}, kvstore=None)
want = np.load({str(tmp_path / 'moms.npz')!r})
for k in want.files:
    np.testing.assert_array_equal(mod._updater.states[int(k)].asnumpy(), want[k])
print('OK', len(want.files))
"""
    proc = subprocess.run([MXNET_PYTHON, "-c", script], capture_output=True, text=True,
                          timeout=300)
    assert proc.returncode == 0 and "OK 2" in proc.stdout, proc.stderr[-3000:]


def test_protocol_2_pickles_from_mxnet_load(tmp_path):
    """The fixture mxnet wrote with protocol=2 (``__builtin__.bytearray``)."""
    from runtime.optimizer import SGD, Updater
    fix = os.path.join(os.path.dirname(__file__), "..", "fixtures", "nd_states.pkl")
    up = Updater(SGD())
    up.set_states(open(fix, "rb").read(), allow_pickle=True)
    expected = np.load(os.path.join(os.path.dirname(fix), "nd_expected.npz"))
    np.testing.assert_array_equal(up.states[0].asnumpy(), expected["nd_states/0"])
    np.testing.assert_array_equal(up.states[1][1].asnumpy(), expected["nd_states/1.1"])
    assert up.states[2] is None
