"""Executor API: simple_bind / bind / eval, forward modes, backward, reshape."""
import numpy as np
import pytest
import torch

import compiler
from compiler import symbol as sym
from compiler.errors import MXNetError
from runtime.context import cpu
from tests.models import mlp


def test_bind_with_given_arrays_and_eval():
    a, b = sym.Variable("a"), sym.Variable("b")
    s = a * b + 1.0
    x, y = torch.randn(3, 4), torch.randn(3, 4)
    out = s.eval(cpu(), a=x, b=y)
    assert torch.allclose(out[0], x * y + 1, rtol=1e-5, atol=1e-6)
    exe = s.bind(cpu(), {"a": x, "b": y}, args_grad={"a": torch.zeros(3, 4), "b": torch.zeros(3, 4)})
    exe.forward(is_train=True)
    exe.backward(out_grads=torch.ones(3, 4))
    assert torch.allclose(exe.grad_dict["a"], y) and torch.allclose(exe.grad_dict["b"], x)
    assert exe.outputs[0].asnumpy().shape == (3, 4)


def test_bind_without_args_grad_differentiates_nothing():
    """mxnet's bind: an argument given no gradient array gets none, so a graph with an
    operator that has no gradient (all_finite) binds; simple_bind allocates them."""
    a = sym.Variable("a")
    exe = sym.all_finite(a).bind(cpu(), {"a": torch.tensor([[float("inf"), 0.0]])})
    assert exe.grad_dict == {} and float(exe.forward()[0][0]) == 0.0
    exe = (a * 2).bind(cpu(), {"a": torch.ones(2)}, grad_req="write")
    assert exe.grad_dict == {}
    exe.forward(is_train=True)
    exe.backward(out_grads=torch.ones(2))          # nothing to write: no error
    assert set((a * 2).simple_bind(cpu(), a=(2,)).grad_dict) == {"a"}


def test_grad_req_dict_ignores_names_that_are_not_arguments():
    """As mxnet's bind: unnamed arguments get 'null', other names are ignored."""
    a, w = sym.Variable("a"), sym.Variable("w")
    exe = (a * w).simple_bind(cpu(), a=(2,), w=(2,), grad_req={"a": "write", "bogus": "null"})
    assert set(exe.grad_dict) == {"a"}


def test_bind_ignores_arrays_for_names_the_symbol_lacks():
    """As mxnet's bind (its tests bind one dict to Convolutions with and without a
    bias): args, args_grad and aux_states entries of other names, or None, are ignored;
    an argument without an array is still an error naming it."""
    a = sym.Variable("a")
    exe = (a * 2).bind(cpu(), {"a": torch.ones(2), "b": torch.ones(3), "c": None},
                       args_grad={"a": torch.zeros(2), "b": torch.zeros(3)},
                       aux_states={"m": torch.ones(1)})
    exe.forward(is_train=True)
    exe.backward(out_grads=torch.ones(2))
    assert exe.grad_dict["a"].asnumpy().tolist() == [2.0, 2.0] and set(exe.arg_dict) == {"a"}
    with pytest.raises(MXNetError, match=r"no array for \['a'\]"):
        (a * 2).bind(cpu(), {"b": torch.ones(2)})


def test_backward_without_out_grads_on_non_loss_head_is_an_error():
    x = sym.Variable("x")
    exe = (x * 2.0).simple_bind(cpu(), x=(2, 2))
    exe.forward(is_train=True)
    with pytest.raises(MXNetError, match="not a loss function"):
        exe.backward()


def test_grad_req_add_accumulates_and_null_skips():
    x, w = sym.Variable("x"), sym.Variable("w")
    s = sym.MakeLoss(sym.sum(x * w))
    exe = s.simple_bind(cpu(), grad_req={"x": "null", "w": "add"}, x=(5,), w=(5,))
    exe.arg_dict["x"][:] = torch.arange(5.0)
    exe.grad_dict["w"][:] = 1.0
    for _ in range(2):
        exe.forward(is_train=True)
        exe.backward()
    assert torch.allclose(exe.grad_dict["w"], 1.0 + 2 * torch.arange(5.0))
    assert "x" not in exe.grad_dict


def test_dropout_is_identity_in_inference_on_a_training_executor():
    x = sym.Variable("x")
    s = sym.Dropout(x, p=0.5)
    exe = s.simple_bind(cpu(), x=(64, 32))
    exe.arg_dict["x"][:] = 1.0
    out = exe.forward(is_train=False)[0]
    assert torch.equal(out, torch.ones(64, 32))
    out = exe.forward(is_train=True)[0].clone()
    kept = torch.ne(out, 0)       # a bool mask (NDArray's `!=` gives mxnet's 0/1 floats)
    assert 0.4 < kept.float().mean().item() < 0.6
    assert torch.allclose(out[kept], torch.full_like(out[kept], 2.0))


def test_reshape_compiles_new_shapes_and_returning_hits_the_cache():
    s = mlp(hidden=(8,))
    exe = s.simple_bind(cpu(), data=(4, 6))
    compiler.reset_cache_stats()
    with pytest.raises(MXNetError, match="allow_up_sizing"):
        exe.reshape(data=(7, 6), softmax_label=(7,))
    exe2 = exe.reshape(data=(7, 6), softmax_label=(7,), allow_up_sizing=True)
    made = compiler.cache_stats()
    assert made["compiles"] + made["disk_hits"] >= 1      # a persistent cache may hold it
    assert exe2.arg_dict["fc1_weight"] is exe.arg_dict["fc1_weight"]
    assert tuple(exe2.outputs[0].shape) == (7, 10)
    compiler.reset_cache_stats()
    exe.reshape(data=(4, 6), softmax_label=(4,))
    assert compiler.cache_stats()["compiles"] == 0
    with pytest.raises(MXNetError, match="partial_shaping"):
        exe.reshape(data=(4, 9), allow_up_sizing=True)   # fc1_weight would change


def test_reshape_shares_memory_as_mxnet_does():
    """mxnet 1.9.1's test_executor.test_reshape: a smaller executor's arrays and
    outputs are views of the first elements of the original's."""
    x = sym.Variable("x")
    y = sym.FullyConnected(x, num_hidden=4, name="fc")
    exe = y.simple_bind(cpu(), x=(5, 4), grad_req="null")
    exe.arg_dict["x"][:] = 1
    exe.arg_dict["fc_weight"][:] = 1
    exe.arg_dict["fc_bias"][:] = 0
    small = exe.reshape(x=(3, 4))
    small.forward(is_train=False)
    assert np.all(small.outputs[0].asnumpy() == 4)
    assert np.all(exe.outputs[0].asnumpy()[:3] == 4)         # the same memory
    assert small.arg_dict["x"].data_ptr() == exe.arg_dict["x"].data_ptr()
    exe.forward(is_train=False)
    assert np.all(exe.outputs[0].asnumpy() == 4)
    big = exe.reshape(allow_up_sizing=True, x=(6, 4))
    big.arg_dict["x"][:] = 0                                  # a new array
    assert np.all(exe.arg_dict["x"].asnumpy() == 1)
    assert big.arg_dict["fc_weight"] is exe.arg_dict["fc_weight"]


def test_forward_rejects_wrong_shapes_before_running():
    s = mlp(hidden=(8,))
    exe = s.simple_bind(cpu(), data=(4, 6))
    with pytest.raises(MXNetError, match="reshape"):
        exe.forward(data=np.zeros((5, 6), dtype=np.float32))


def test_shared_exec_reuses_internal_memory():
    s = mlp(hidden=(16,))
    big = s.simple_bind(cpu(), data=(8, 6))
    big.forward(is_train=True)
    big.backward()
    before = big._total_exec_bytes
    small = s.simple_bind(cpu(), data=(4, 6), shared_exec=big)
    small.forward(is_train=True)
    small.backward()
    assert small._total_exec_bytes == before == big._total_exec_bytes
    # the smaller executor still computes correct outputs on the shared memory
    ref = s.simple_bind(cpu(), data=(4, 6))
    for name in ref.arg_dict:
        ref.arg_dict[name][:] = small.arg_dict[name]
    ref.forward(is_train=True)
    ref.backward()
    assert torch.allclose(ref.outputs[0], small.outputs[0])
    assert torch.allclose(ref.grad_dict["fc1_weight"], small.grad_dict["fc1_weight"])


def test_bind_without_a_gradient_array_for_an_argument_gives_it_none():
    """mxnet's bind: an argument missing from ``args_grad`` (a dict without it, or a list
    entry None) gets grad_req 'null', whatever ``grad_req`` says; the others get theirs
    (mxnet's operator unit tests bind SoftmaxOutput's label this way)."""
    import module_api as mx
    data, label = mx.sym.Variable("data"), mx.sym.Variable("label")
    sym = mx.sym.SoftmaxOutput(data * 2.0, label, name="sm")
    x = np.array([[1.0, 2.0, 0.5], [0.1, 0.2, 3.0]], np.float32)
    y = np.array([2, 0], np.float32)
    p = np.exp(2 * x) / np.exp(2 * x).sum(1, keepdims=True)
    want = 2 * (p - np.eye(3, dtype=np.float32)[y.astype(int)])
    for grads in ({"data": mx.nd.zeros((2, 3))}, [mx.nd.zeros((2, 3)), None]):
        exe = sym.bind(mx.cpu(), args={"data": mx.nd.array(x), "label": mx.nd.array(y)},
                       args_grad=grads, grad_req="write")
        exe.forward(is_train=True)
        exe.backward()
        assert exe.grad_arrays[1] is None and exe.grad_dict.get("label") is None
        np.testing.assert_allclose(exe.grad_dict["data"].asnumpy(), want, rtol=1e-5)


def test_simple_bind_ignores_keywords_that_are_not_shapes():
    """mxnet's simple_bind takes only tuple keywords as shapes; its own tests pass an
    operator's attributes along (``axis=0, mode='clip'``), which it ignores. A shape for
    a name the symbol lacks is still refused, naming the arguments."""
    import module_api as mx
    s = mx.sym.take(mx.sym.Variable("a"), mx.sym.Variable("i"), axis=0)
    exe = s.simple_bind(mx.cpu(), a=(3, 4), i=(2,), axis=0, mode="clip")
    assert exe.outputs[0].shape == (2, 4)
    with pytest.raises(MXNetError, match="not an argument"):
        s.simple_bind(mx.cpu(), a=(3, 4), i=(2,), b=(1,))
