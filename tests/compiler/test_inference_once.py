"""A bind infers a symbol's shapes and dtypes once, on one graph the compile then takes
(``Symbol._inference_graph``, ``compile._inferred_graph``): the pipeline neither builds a
third graph nor infers again. A partial or failed inference leaves nothing behind, so
later inference starts afresh; storage inference is answered once per symbol."""
import threading

import numpy as np
import pytest

import module_api as mx
from compiler import symbol as sym_mod
from compiler.errors import MXNetError
from compiler.passes import storage_type


def _net():
    data = mx.sym.Variable("data")
    h = mx.sym.BatchNorm(mx.sym.FullyConnected(data, num_hidden=5, name="fc1"), name="bn")
    h = mx.sym.FullyConnected(mx.sym.Activation(h, act_type="tanh"), num_hidden=3, name="fc2")
    return mx.sym.SoftmaxOutput(h, name="softmax")


def _count_graphs(monkeypatch):
    made = []
    original = sym_mod.Symbol.to_graph

    def to_graph(self):
        made.append(self)
        return original(self)
    monkeypatch.setattr(sym_mod.Symbol, "to_graph", to_graph)
    return made


def _step(exe, seed=0):
    rng = np.random.RandomState(seed)
    for name, arr in exe.arg_dict.items():
        arr[:] = rng.randint(0, 3, arr.shape) if name == "softmax_label" else \
            rng.uniform(-1, 1, arr.shape)
    exe.forward(is_train=True)
    exe.backward()
    return [exe.outputs[0].asnumpy()] + \
        [exe.grad_dict[n].asnumpy() for n in sorted(exe.grad_dict) if exe.grad_dict[n] is not None]


def test_a_bind_builds_one_graph_and_the_compile_takes_it(tmp_path, monkeypatch):
    monkeypatch.setenv("SYMTRITON_CACHE_DIR", str(tmp_path))
    net = _net()
    made = _count_graphs(monkeypatch)
    exe = net.simple_bind(mx.cpu(), data=(4, 6), softmax_label=(4,))
    assert len(made) == 1
    assert "inferred_graph" not in net._derived()      # taken by the compile, not kept
    got = _step(exe)
    # the same program compiled from a graph the pipeline infers itself
    monkeypatch.setenv("SYMTRITON_CACHE_DIR", str(tmp_path / "other"))
    fresh = mx.sym.load_json(net.tojson())
    fresh._inference_graph = lambda kind: fresh.to_graph()     # nothing kept to take
    want = _step(fresh.simple_bind(mx.cpu(), data=(4, 6), softmax_label=(4,)))
    for a, b in zip(got, want):
        np.testing.assert_array_equal(a, b)


def test_a_partial_inference_leaves_no_graph(tmp_path, monkeypatch):
    monkeypatch.setenv("SYMTRITON_CACHE_DIR", str(tmp_path))
    net = _net()
    assert net.infer_shape()[0] is None             # nothing given: partial
    assert "inferred_graph" not in net._derived()
    arg_shapes, _, aux_shapes = net.infer_shape(data=(2, 7))
    assert dict(zip(net.list_arguments(), arg_shapes))["fc1_weight"] == (5, 7)
    assert aux_shapes == [(5,), (5,)]
    exe = net.simple_bind(mx.cpu(), data=(2, 7))
    assert exe.outputs[0].shape == (2, 3)


def test_a_failed_inference_leaves_no_graph(tmp_path, monkeypatch):
    monkeypatch.setenv("SYMTRITON_CACHE_DIR", str(tmp_path))
    net = _net()
    with pytest.raises(MXNetError, match="fc1"):
        net.infer_shape(data=(2, 7), fc1_weight=(5, 8))
    assert "inferred_graph" not in net._derived()
    exe = net.simple_bind(mx.cpu(), data=(3, 8))
    assert exe.arg_dict["fc1_weight"].shape == (5, 8)
    assert exe.outputs[0].shape == (3, 3)


def test_binds_in_threads_each_get_their_own_shapes(tmp_path, monkeypatch):
    monkeypatch.setenv("SYMTRITON_CACHE_DIR", str(tmp_path))
    net = mx.sym.Activation(mx.sym.Variable("data") * 2, act_type="relu")
    got, errors = {}, []

    def bind(rows):
        try:
            exe = net.simple_bind(mx.cpu(), data=(rows, 3))
            exe.arg_dict["data"][:] = -np.arange(rows * 3).reshape(rows, 3) + 4
            exe.forward()
            got[rows] = exe.outputs[0].asnumpy()
        except Exception as exc:          # reported below, with the thread's shape
            errors.append((rows, exc))
    threads = [threading.Thread(target=bind, args=(rows,)) for rows in (1, 2, 3, 4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors
    for rows, out in got.items():
        want = np.maximum(2 * (-np.arange(rows * 3).reshape(rows, 3) + 4), 0)
        np.testing.assert_array_equal(out, want)


def test_storage_answered_at_once_matches_the_rules(monkeypatch):
    dense = _net()
    quick = storage_type.infer_storage(dense)
    monkeypatch.setattr(storage_type, "_all_dense", lambda symbol, bound: False)
    slow = storage_type._infer_storage(dense, {})
    assert quick == slow
    assert set(quick["args"]) == set(dense.list_arguments())     # no auxiliary states
    w = mx.sym.Variable("w")
    emb = mx.sym.Embedding(mx.sym.Variable("idx"), w, input_dim=10, output_dim=4,
                           sparse_grad=True)
    monkeypatch.undo()
    assert storage_type.infer_storage(mx.sym.sum(emb))["grads"]["w"] == "row_sparse"
