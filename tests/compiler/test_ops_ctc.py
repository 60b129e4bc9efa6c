"""mxnet's CTC loss (``compiler/ops/ctc.py``): an extern launch on both cpu targets.

``ROWS`` check forward, gradients and finite differences against an independent
oracle: the CTC forward recursion written out below in float64 (log-space alphas over
the label with blanks, one sequence at a time, mxnet's padding rules and its loss 0 for
a label no alignment fits), differentiated by torch autograd. The label is drawn from
``0 .. C-1``, so rows end at random padding values and some are empty.
``tests/compiler/test_ops_after_views.py`` sweeps ``ROWS`` after every view.
mxnet 1.9.1's own numbers (``tests/fixtures/make_ctc_fixtures.py``) are replayed
through the full compile path, and the shape, dtype and name rules are mxnet's.
"""
from __future__ import annotations

import json
import os

import numpy as np
import pytest
import torch

from compiler import symbol as sym
from compiler.errors import MXNetError
from tests.compiler import test_mxnet_fixtures as replay
from tests.compiler.test_ops_compiled import Op, check
from runtime.context import cpu


# ---------------------------------------------------------------------------
# The oracle

def _lse(terms):
    return torch.logsumexp(torch.stack(terms), 0)


def _nll(logp, labels, blank):
    """-log p(labels | logp) of one sequence, logp (T, C); 0 where no alignment fits."""
    ext = [blank]
    for c in labels:
        ext += [c, blank]
    repeats = sum(1 for a, b in zip(labels, labels[1:]) if a == b)
    t_len = logp.shape[0]
    if len(labels) + repeats > t_len:
        return logp.sum() * 0.0
    alpha = [logp[0, ext[0]], logp[0, ext[1]] if len(ext) > 1 else None]
    alpha += [None] * (len(ext) - len(alpha))
    for t in range(1, t_len):
        new = []
        for s, c in enumerate(ext):
            prev = [alpha[s]] + ([alpha[s - 1]] if s >= 1 else [])
            if s >= 2 and c != blank and c != ext[s - 2]:
                prev.append(alpha[s - 2])
            prev = [p for p in prev if p is not None]
            new.append(_lse(prev) + logp[t, c] if prev else None)
        alpha = new
    return -_lse([a for a in alpha[-2:] if a is not None])


def _row_labels(row, blank_last, length=None):
    vals = [int(v) for v in row]
    if length is not None:
        return vals[:int(length)]
    pad = -1 if blank_last else 0
    return vals[:vals.index(pad)] if pad in vals else vals


def ctc_oracle(data, label, data_lengths=None, label_lengths=None, blank_last=False):
    """The per-sequence CTC loss of activations ``data`` (T, N, C), float64."""
    logp = torch.log_softmax(data.double(), dim=2)
    blank = data.shape[2] - 1 if blank_last else 0
    out = []
    for n in range(data.shape[1]):
        t_len = data.shape[0] if data_lengths is None else int(data_lengths[n])
        length = None if label_lengths is None else label_lengths[n]
        out.append(_nll(logp[:t_len, n], _row_labels(label[n], blank_last, length), blank))
    return torch.stack(out)


# ---------------------------------------------------------------------------
# Rows

SHAPES = [[(8, 3, 5), (3, 3)], [(6, 1, 4), (1, 2)], [(5, 2, 3), (2, 5)]]


def _lengths_shapes(extra):
    return [s + [(s[0][1],)] * extra for s in SHAPES]


ROWS = [
    Op("ctc_first", lambda x, label: sym.ctc_loss(x, label),
       lambda x, label: ctc_oracle(x, label), SHAPES, inputs=("x", "label"),
       gen={"label": "label:3"}, nograd=("label",)),
    Op("ctc_last", lambda x, label: sym.CTCLoss(x, label - 1.0, blank_label="last"),
       lambda x, label: ctc_oracle(x, label - 1, blank_last=True), SHAPES,
       inputs=("x", "label"), gen={"label": "label:3"}, nograd=("label",)),
    Op("ctc_data_lengths",
       lambda x, label, dl: sym.contrib.ctc_loss(x, label, dl + 1.0, use_data_lengths=True),
       lambda x, label, dl: ctc_oracle(x, label, data_lengths=dl + 1),
       _lengths_shapes(1), inputs=("x", "label", "dl"),
       gen={"label": "label:3", "dl": "index:5"}, nograd=("label", "dl")),
    Op("ctc_both_lengths",
       lambda x, label, dl, ll: sym.contrib.CTCLoss(
           x, label, dl + 1.0, ll, use_data_lengths=True, use_label_lengths=True,
           blank_label="last"),
       lambda x, label, dl, ll: ctc_oracle(x, label, dl + 1, ll, blank_last=True),
       _lengths_shapes(2), inputs=("x", "label", "dl", "ll"),
       gen={"label": "label:2", "dl": "index:5", "ll": "index:3"},
       nograd=("label", "dl", "ll")),
]


@pytest.mark.parametrize("op,shapes", [(op, s) for op in ROWS for s in op.shapes],
                         ids=lambda v: v.name if isinstance(v, Op) else str(v))
def test_ctc_row(op, shapes, cpu_target):
    check(op, shapes)


def test_oracle_matches_a_hand_computed_loss():
    """Two steps, one label 'a' (channel 1), uniform probabilities over 2 channels:
    alignments 'a-', '-a', 'aa' each 1/4, so the loss is -log(3/4)."""
    data = torch.zeros(2, 1, 2)
    got = ctc_oracle(data, torch.tensor([[1.0]]))
    torch.testing.assert_close(got, torch.tensor([-np.log(0.75)], dtype=torch.float64))


# ---------------------------------------------------------------------------
# mxnet's numbers

with open(os.path.join(replay.FIXTURES, "cases_ctc_index.json")) as _f:
    CASES = {c["name"]: c for c in json.load(_f)["cases"]}


@pytest.mark.parametrize("name", sorted(CASES))
def test_mxnet_ctc_case(name, cpu_target, monkeypatch):
    monkeypatch.setitem(replay.CASES, name, CASES[name])
    replay.test_mxnet_case(name, cpu_target)


def test_every_ctc_case_has_arrays():
    assert len(CASES) >= 8
    for case in CASES.values():
        keys = set(np.load(os.path.join(replay.FIXTURES, case["arrays"])).files)
        assert keys == set(case["array_keys"]), case["name"]


# ---------------------------------------------------------------------------
# Names, signature, shape and dtype rules

def test_names_and_signature():
    d, l = sym.Variable("d"), sym.Variable("l")
    for fn in (sym.CTCLoss, sym.ctc_loss, sym.contrib.CTCLoss, sym.contrib.ctc_loss):
        s = fn(d, l, name="c")
        assert s.list_outputs() == ["c_output0"]
        assert s.list_arguments() == ["d", "l"]
    s = sym.ctc_loss(d, l, use_data_lengths=True, use_label_lengths=True, name="c")
    assert s.list_arguments() == ["d", "l", "c_data_lengths", "c_label_lengths"]
    s = sym.ctc_loss(d, l, use_label_lengths=True, name="c")
    assert s.list_arguments() == ["d", "l", "c_label_lengths"]
    _, out, _ = s.infer_shape(d=(7, 3, 5), l=(3, 4), c_label_lengths=(3,))
    assert out == [(3,)]


@pytest.mark.parametrize("shapes,message", [
    ({"d": (7, 15), "l": (3, 4)}, "must be 3"),
    ({"d": (7, 3, 5), "l": (12,)}, "must be 2"),
    ({"d": (7, 3, 5), "l": (2, 4)}, "batch size"),
    ({"d": (3, 2, 5), "l": (2, 4)}, "cannot exceed"),
])
def test_shape_errors(shapes, message):
    s = sym.ctc_loss(sym.Variable("d"), sym.Variable("l"))
    with pytest.raises(MXNetError, match=message):
        s.infer_shape(**shapes)


def test_lengths_must_be_batch_vectors():
    s = sym.ctc_loss(sym.Variable("d"), sym.Variable("l"), sym.Variable("dl"),
                     use_data_lengths=True)
    with pytest.raises(MXNetError, match="data_lengths"):
        s.infer_shape(d=(7, 3, 5), l=(3, 4), dl=(2,))


def test_data_must_be_float32():
    s = sym.ctc_loss(sym.Variable("d"), sym.Variable("l"))
    with pytest.raises(MXNetError, match="float32"):
        s.simple_bind(cpu(), d=(4, 2, 3), l=(2, 2), type_dict={"d": "float64"})


def test_labels_out_of_range_are_refused(cpu_target):
    s = sym.ctc_loss(sym.Variable("d"), sym.Variable("l"), blank_label="last")
    exe = s.simple_bind(cpu(), d=(4, 2, 3), l=(2, 2), grad_req="null")
    exe.arg_dict["l"][:] = torch.tensor([[0.0, 2.0], [1.0, -1.0]])   # 2 is the blank
    with pytest.raises(MXNetError, match="not labels"):
        exe.forward()


def test_steps_past_a_data_length_are_not_read_nan_padding_included():
    """mxnet never reads a sequence's steps past its data length: NaN there (mxnet's
    unit test test_ctc_loss_grad pads so) gives the loss and gradient of the
    steps read, and a zero gradient on the rest. Through ``mx.contrib.ndarray`` too."""
    import module_api as mx
    rng = np.random.RandomState(5)
    steps, lengths = 7, [5, 3]
    x = rng.standard_normal((steps, 2, 6)).astype(np.float32)
    padded = x.copy()
    for n, length in enumerate(lengths):
        padded[length:, n] = np.nan
    label = np.array([[1, 2, 3], [4, 2, 0]], np.float32)

    def run(data, ctc):
        arr = mx.nd.array(data)
        arr.attach_grad()
        with mx.autograd.record():
            loss = ctc(arr, mx.nd.array(label), use_data_lengths=True, use_label_lengths=True,
                       data_lengths=mx.nd.array(lengths), label_lengths=mx.nd.array([3, 2]))
        loss.backward()
        return loss.asnumpy(), arr.grad.asnumpy()
    want_loss, want_grad = run(x, mx.nd.CTCLoss)
    for ctc in (mx.nd.CTCLoss, mx.contrib.ndarray.CTCLoss):
        loss, grad = run(padded, ctc)
        np.testing.assert_allclose(loss, want_loss, rtol=1e-6)
        np.testing.assert_allclose(grad, want_grad, rtol=1e-6, atol=1e-7)
        for n, length in enumerate(lengths):
            assert not np.isnan(grad).any() and (grad[length:, n] == 0).all()
