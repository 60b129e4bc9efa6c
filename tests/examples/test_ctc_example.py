"""mxnet 1.9.1's ``example/ctc`` LSTM-CTC OCR graph (``lstm.py``'s ``lstm_unroll``), at
small sizes (2 layers, seq_len 20, num_hidden 32, batch 4), written by mxnet and run here
with ``import module_api as mx``.

``tests/fixtures/make_ctc_example_fixtures.py`` imported the example's own module under
mxnet and recorded its training symbol (an unrolled 2-layer LSTM, a FullyConnected to 11
classes, ``contrib.ctc_loss`` under MakeLoss beside a blocked SoftmaxActivation), its
inference symbol (softmax), Xavier parameters, one executor step's outputs and
parameter gradients, and a Module training run as ``lstm_ocr_train.py`` configures it
(SGD, momentum 0.9, wd 1e-5) over 6 fixed batches. Here the same symbol files bind, run
forward and backward, and train: every recorded number is matched.
"""
from __future__ import annotations

import json
import os

import numpy as np
import torch

import module_api as mx

FIXTURES = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))),
                        "fixtures")
RTOL, ATOL = 1e-4, 1e-4


def _load():
    with open(os.path.join(FIXTURES, "ctc_lstm-sizes.json")) as f:
        sizes = json.load(f)
    return sizes, dict(np.load(os.path.join(FIXTURES, "ctc_lstm.npz")))


def _states(sizes):
    return [f"l{i}_init_{k}" for k in ("c", "h") for i in range(sizes["layers"])]


def _shapes(sizes):
    b, h = sizes["batch"], sizes["num_hidden"]
    out = {"data": (b, sizes["seq_len"], sizes["width"]), "label": (b, sizes["num_label"])}
    out.update({n: (b, h) for n in _states(sizes)})
    return out


def _params(arrays):
    return {k[len("param_"):]: v for k, v in arrays.items() if k.startswith("param_")}


def _close(got, want, what, rtol=RTOL, atol=ATOL):
    got = np.asarray(got.asnumpy() if hasattr(got, "asnumpy") else got)
    assert got.shape == want.shape, f"{what}: shape {got.shape} != {want.shape}"
    err = np.abs(got - want).max()
    assert np.allclose(got, want, rtol=rtol, atol=atol), f"{what}: max abs error {err:.3g}"


def test_training_graph_forward_backward_match_mxnet(cpu_target):
    sizes, arrays = _load()
    s = mx.sym.load(os.path.join(FIXTURES, "ctc_lstm-symbol.json"))
    params = _params(arrays)
    req = {n: "write" if n in params else "null" for n in s.list_arguments()}
    exe = s.simple_bind(mx.cpu(), grad_req=req, **_shapes(sizes))
    for k, v in params.items():
        exe.arg_dict[k][:] = torch.from_numpy(v)
    exe.arg_dict["data"][:] = torch.from_numpy(arrays["data"])
    exe.arg_dict["label"][:] = torch.from_numpy(arrays["label"])
    for n in _states(sizes):
        exe.arg_dict[n][:] = 0
    outs = exe.forward(is_train=True)
    _close(outs[0], arrays["out0"], "softmax head")
    _close(outs[1], arrays["out1"], "CTC loss")
    exe.backward([torch.zeros(tuple(outs[0].shape)), torch.ones(tuple(outs[1].shape))])
    for k in params:
        _close(exe.grad_dict[k], arrays["grad_" + k], f"gradient of {k}")
    launches = [ln for ln in exe.programs[0].launches if ln.is_extern]
    assert [ln.config["op"] for ln in launches] == ["CTCLoss"]     # mxnet saved it by its own name


def test_inference_graph_matches_mxnet():
    sizes, arrays = _load()
    s = mx.sym.load(os.path.join(FIXTURES, "ctc_lstm_infer-symbol.json"))
    shapes = {k: v for k, v in _shapes(sizes).items() if k != "label"}
    exe = s.simple_bind(mx.cpu(), grad_req="null", **shapes)
    for k, v in _params(arrays).items():
        if k in exe.arg_dict:
            exe.arg_dict[k][:] = torch.from_numpy(v)
    exe.arg_dict["data"][:] = torch.from_numpy(arrays["data"])
    for n in _states(sizes):
        exe.arg_dict[n][:] = 0
    _close(exe.forward(is_train=False)[0], arrays["infer_out"], "softmax prediction")


def test_module_training_follows_mxnets_losses():
    """lstm_ocr_train.py's Module set-up over mxnet's 6 batches: each step's mean CTC
    loss and the final parameters are mxnet's."""
    sizes, arrays = _load()
    s = mx.sym.load(os.path.join(FIXTURES, "ctc_lstm-symbol.json"))
    shapes = _shapes(sizes)
    names = ["data"] + _states(sizes)
    mod = mx.mod.Module(s, data_names=names, label_names=["label"])
    mod.bind(data_shapes=[(n, shapes[n]) for n in names],
             label_shapes=[("label", shapes["label"])])
    mod.init_params(arg_params={k: mx.nd.array(v) for k, v in _params(arrays).items()})
    mod.init_optimizer(optimizer="sgd", optimizer_params={
        "learning_rate": sizes["learning_rate"], "momentum": sizes["momentum"],
        "wd": sizes["wd"]})
    zeros = [mx.nd.zeros(shapes[n]) for n in _states(sizes)]
    losses = []
    for k in range(sizes["steps"]):
        batch = mx.io.DataBatch(data=[mx.nd.array(arrays[f"train_data{k}"])] + zeros,
                                label=[mx.nd.array(arrays[f"train_label{k}"])])
        mod.forward_backward(batch)
        losses.append(float(mod.get_outputs()[1].asnumpy().mean()))
        mod.update()
    _close(np.array(losses, np.float32), arrays["train_loss"], "mean CTC loss per step")
    assert losses[-1] < 0.5 * losses[0]          # the trend: it learns
    arg, _ = mod.get_params()
    for k, v in arg.items():
        _close(v, arrays["final_" + k], f"{k} after {sizes['steps']} steps")
