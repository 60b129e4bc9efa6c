"""mxnet 1.9.1's SSD training graph (``example/ssd``: ``get_symbol_train`` for
``vgg16_reduced`` at 300, 20 classes) binds here, runs forward and backward, and matches
mxnet on fixed parameters.

``tests/fixtures/make_ssd_fixture.py`` saved the symbol (mxnet's JSON), the image and
label, mxnet's four outputs and, per parameter, statistics of its gradient; the parameters
are drawn again here with the generator's recipe (:func:`parameters`, bit for bit the same
numpy draws). The whole VGG-16 at 300x300 runs on the ``cpu`` target only: Triton's
interpreter would take hours; every operator of the graph is checked on ``interpret`` by
its own tests (``test_ops_detection.py``, the conv, pool and loss tables).

The outputs are compared whole: ``cls_label`` (which anchors ``MultiBoxTarget`` matched
and mined as hard negatives among 8732) exactly, the detections (``MultiBoxDetection``'s
sort, top 400 and suppression) row by row; ``cls_prob`` agrees with mxnet to about 5e-6
relative although 23 float32 convolutions sum in another order than oneDNN's. Gradients
are compared by L2 norm and sum of magnitudes (relative 1e-3) and their first and last 16
values.
"""
from __future__ import annotations

import json
import os

import numpy as np
import pytest
import torch

from compiler import symbol as sym
from runtime.context import cpu
from tests.compiler.test_mxnet_fixtures import FIXTURES

NAME = "ssd_vgg16_reduced_300"


def parameters(arg_shapes, seed):
    """The generator's parameters (``make_ssd_fixture.parameters``, the same recipe)."""
    rng = np.random.RandomState(seed)
    out = {}
    for name, shape in arg_shapes:
        if name in ("data", "label"):
            continue
        if name.endswith("_scale"):
            out[name] = np.full(shape, 20.0, np.float32)
        elif name.endswith("_bias"):
            out[name] = np.zeros(shape, np.float32)
        else:
            std = np.sqrt(2.0 / int(np.prod(shape[1:])))
            out[name] = (rng.standard_normal(shape) * std).astype(np.float32)
    return out


@pytest.fixture(scope="module")
def ssd_run():
    with open(os.path.join(FIXTURES, NAME + ".json")) as f:
        meta = json.load(f)
    want = dict(np.load(os.path.join(FIXTURES, meta["arrays"])))
    net = sym.load(os.path.join(FIXTURES, meta["symbol"]))
    assert net.list_arguments() == meta["arguments"]
    assert net.list_outputs() == meta["outputs"]
    data, label = want["data"], want["label"]
    arg_shapes, out_shapes, _ = net.infer_shape(data=data.shape, label=label.shape)
    assert [list(s) for s in out_shapes] == meta["output_shapes"]
    names = net.list_arguments()
    params = parameters(list(zip(names, arg_shapes)), meta["seed"])
    req = {n: ("null" if n in ("data", "label") else "write") for n in names}
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("SYMTRITON_CPU_TARGET", "cpu")
        exe = net.simple_bind(cpu(), grad_req=req, data=data.shape, label=label.shape)
        exe.arg_dict["data"][:] = torch.from_numpy(data)
        exe.arg_dict["label"][:] = torch.from_numpy(label)
        for k, v in params.items():
            exe.arg_dict[k][:] = torch.from_numpy(v)
        outs = [o.detach().clone().numpy() for o in exe.forward(is_train=True)]
        exe.backward()
        grads = {n: exe.grad_dict[n].detach().clone().numpy() for n in names
                 if req[n] == "write"}
    return want, outs, grads, exe


@pytest.mark.slow
def test_ssd_binds_with_extern_launches(ssd_run):
    _, _, _, exe = ssd_run
    train, _ = exe.programs
    extern = {ln.kernel for ln in train.launches if ln.is_extern}
    assert {"extern:_contrib_MultiBoxTarget", "extern:_contrib_MultiBoxDetection"} <= extern


@pytest.mark.slow
def test_ssd_outputs_match_mxnet(ssd_run):
    want, outs, _, _ = ssd_run
    cls_prob, loc_loss, cls_label, det = outs
    np.testing.assert_allclose(cls_prob, want["out0"], rtol=1e-4, atol=1e-6)
    np.testing.assert_array_equal(cls_label, want["out2"])    # the same anchors mined
    np.testing.assert_allclose(loc_loss, want["out1"], rtol=1e-4, atol=1e-5)
    assert (det[0, :, 0] >= 0).sum() == (want["out3"][0, :, 0] >= 0).sum() > 0
    np.testing.assert_allclose(det, want["out3"], rtol=1e-4, atol=1e-5)


@pytest.mark.slow
def test_ssd_gradients_match_mxnet(ssd_run):
    want, _, grads, _ = ssd_run
    for name, g in grads.items():
        f = g.astype(np.float64).ravel()
        got = np.array([np.sqrt((f * f).sum()), f.sum(), np.abs(f).sum()])
        ref = want[f"gstat_{name}"]
        np.testing.assert_allclose(got[[0, 2]], ref[[0, 2]], rtol=1e-3, atol=1e-6,
                                   err_msg=f"{name}: L2 norm and |sum|")
        np.testing.assert_allclose(g.ravel()[:16], want[f"ghead_{name}"], rtol=5e-3,
                                   atol=1e-4 * (1 + ref[0]), err_msg=f"{name}: first values")
        np.testing.assert_allclose(g.ravel()[-16:], want[f"gtail_{name}"], rtol=5e-3,
                                   atol=1e-4 * (1 + ref[0]), err_msg=f"{name}: last values")
