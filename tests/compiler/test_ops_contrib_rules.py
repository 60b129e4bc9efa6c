"""mxnet 1.9.1's names, shape rules, errors and documented values of the contrib operators
of ``compiler/ops/contrib_*.py`` (their numbers: ``test_ops_contrib_nn.py`` and
``test_mxnet_fixtures_contrib_nn.py``).

Expected names and shapes were printed by mxnet 1.9.1 (``mx.sym.contrib.X(...)``'s
``list_arguments``, ``list_outputs`` and ``infer_shape``); the values are the examples of
mxnet's operator docs.
"""
from __future__ import annotations

import numpy as np
import pytest
import torch

from compiler import symbol as sym
from compiler.errors import MXNetError
from compiler.ops import REGISTRY
from runtime.context import cpu

C = sym.contrib
V = sym.Variable

NAMES = ["BilinearResize2D", "AdaptiveAvgPooling2D", "arange_like", "index_copy", "quadratic",
         "div_sqrt_dim", "interleaved_matmul_selfatt_qk", "interleaved_matmul_selfatt_valatt",
         "interleaved_matmul_encdec_qk", "interleaved_matmul_encdec_valatt", "box_iou",
         "box_encode", "box_decode", "MultiBoxPrior", "gradientmultiplier", "round_ste",
         "sign_ste"]


def test_contrib_namespace_and_aliases():
    for name in NAMES:
        assert callable(getattr(C, name)), name
        assert f"_contrib_{name}" in REGISTRY
    assert REGISTRY["_npx_arange_like"] is REGISTRY["_contrib_arange_like"]
    assert REGISTRY["_npx_multibox_prior"] is REGISTRY["_contrib_MultiBoxPrior"]


def test_auto_names_follow_the_public_name():
    """mxnet names a contrib node after its public name: ``bilinearresize2d0_like``."""
    s = C.BilinearResize2D(V("x"), mode="like")
    assert s.list_arguments() == ["x", "bilinearresize2d0_like"]
    e = C.box_encode(V("a"), V("b"), V("c"), V("d"))
    assert e.list_arguments() == ["a", "b", "c", "d", "box_encode0_means", "box_encode0_stds"]
    assert e.list_outputs() == ["box_encode0_output0", "box_encode0_output1"]
    args, outs, _ = e.infer_shape(a=(2, 3), b=(2, 3), c=(2, 3, 4), d=(2, 5, 4))
    assert [tuple(a) for a in args][4:] == [(4,), (4,)]
    assert [tuple(o) for o in outs] == [(2, 3, 4), (2, 3, 4)]
    assert C.index_copy(V("o"), V("i"), V("t")).list_arguments() == ["o", "i", "t"]
    assert C.interleaved_matmul_selfatt_valatt(V("q"), V("a"), heads=1).list_arguments() == \
        ["q", "a"]


def _out(s, **shapes):
    return tuple(s.infer_shape(**shapes)[1][0])


@pytest.mark.parametrize("kw, shape, want", [
    (dict(height=5, width=3), (2, 3, 4, 4), (2, 3, 5, 3)),
    (dict(height=5, width=3, scale_height=0.5, scale_width=2.5), (1, 1, 7, 3), (1, 1, 3, 7)),
    (dict(mode="odd_scale", scale_height=2.0, scale_width=0.5), (1, 1, 5, 6), (1, 1, 9, 3)),
    (dict(mode="to_even_down"), (1, 1, 5, 6), (1, 1, 4, 6)),
    (dict(mode="to_even_up"), (1, 1, 5, 6), (1, 1, 6, 6)),
    (dict(mode="to_odd_down"), (1, 1, 5, 6), (1, 1, 5, 5)),
    (dict(mode="to_odd_up"), (1, 1, 5, 6), (1, 1, 5, 7)),
])
def test_bilinear_output_sizes(kw, shape, want):
    assert _out(C.BilinearResize2D(V("x"), **kw), x=shape) == want


def test_other_shape_rules():
    assert _out(C.BilinearResize2D(V("x"), V("y"), mode="like"), x=(2, 3, 4, 4),
                y=(9, 9, 6, 7)) == (2, 3, 6, 7)
    assert _out(C.AdaptiveAvgPooling2D(V("x"), output_size=(2, 5)), x=(1, 2, 9, 9)) == \
        (1, 2, 2, 5)
    assert _out(C.AdaptiveAvgPooling2D(V("x"), output_size=3), x=(1, 2, 9, 9)) == (1, 2, 3, 3)
    assert _out(C.AdaptiveAvgPooling2D(V("x")), x=(1, 2, 9, 9)) == (1, 2, 1, 1)
    assert _out(C.arange_like(V("x"), axis=1), x=(2, 7, 3)) == (7,)
    assert _out(C.interleaved_matmul_selfatt_qk(V("x"), heads=4), x=(5, 2, 48)) == (8, 5, 5)
    assert _out(C.interleaved_matmul_encdec_qk(V("q"), V("kv"), heads=2), q=(3, 4, 8),
                kv=(6, 4, 16)) == (8, 3, 6)
    assert _out(C.interleaved_matmul_encdec_valatt(V("kv"), V("a"), heads=2), kv=(6, 4, 16),
                a=(8, 3, 6)) == (3, 4, 8)
    assert _out(C.box_iou(V("a"), V("b")), a=(2, 3, 4), b=(5, 4)) == (2, 3, 5)
    assert _out(C.MultiBoxPrior(V("x"), sizes=(1, 2, 3), ratios=(1, 2)), x=(2, 8, 3, 5)) == \
        (1, 60, 4)


@pytest.mark.parametrize("build, shapes, words", [
    (lambda: C.BilinearResize2D(V("x"), height=2, width=2), {"x": (2, 3, 4)}, "must have 4"),
    (lambda: C.BilinearResize2D(V("x"), scale_height=2.0), {"x": (1, 1, 2, 2)}, "scale_width"),
    (lambda: C.BilinearResize2D(V("x"), mode="odd_scale"), {"x": (1, 1, 2, 2)},
     "scale_height"),
    (lambda: C.AdaptiveAvgPooling2D(V("x"), output_size=2), {"x": (2, 3, 4)}, "must have 4"),
    (lambda: C.index_copy(V("o"), V("i"), V("t")), {"o": (4, 3), "i": (2, 1), "t": (2, 3)},
     "index_vector"),
    (lambda: C.index_copy(V("o"), V("i"), V("t")), {"o": (4, 3), "i": (2,), "t": (2, 4)},
     "beyond the first dim"),
    (lambda: C.index_copy(V("o"), V("i"), V("t")), {"o": (4, 3), "i": (3,), "t": (2, 3)},
     "one entry per row"),
    (lambda: C.interleaved_matmul_selfatt_qk(V("x"), heads=2), {"x": (3, 2, 10)},
     "multiple of heads"),
    (lambda: C.interleaved_matmul_selfatt_valatt(V("x"), V("a"), heads=1),
     {"x": (3, 2, 9), "a": (2, 3, 4)}, "attention"),
    (lambda: C.interleaved_matmul_encdec_qk(V("q"), V("kv"), heads=1),
     {"q": (3, 2, 4), "kv": (5, 2, 6)}, "keys_values"),
    (lambda: C.box_iou(V("a"), V("b")), {"a": (3, 5), "b": (2, 4)}, "last dim must be 4"),
    (lambda: C.box_decode(V("d"), V("a")), {"d": (2, 3, 4), "a": (1, 2, 4)}, "fewer than"),
    (lambda: C.MultiBoxPrior(V("x"), offsets=(0.5, 1.5)), {"x": (1, 1, 2, 2)}, "offsets"),
    (lambda: C.MultiBoxPrior(V("x"), steps=(0.5,)), {"x": (1, 1, 2, 2)}, "two values"),
])
def test_bad_shapes_are_named(build, shapes, words):
    with pytest.raises(MXNetError, match=words):
        build().infer_shape(**shapes)


def _run(symbol, grads=None, **values):
    exe = symbol.simple_bind(cpu(), **{k: v.shape for k, v in values.items()})
    for k, v in values.items():
        exe.arg_dict[k][:] = v
    outs = [o.asnumpy() for o in exe.forward(is_train=True)]
    if grads is not None:
        exe.backward([torch.as_tensor(g) for g in grads])
    return outs, exe


def test_documented_values():
    """The examples of mxnet's docs for box_iou, index_copy and arange_like."""
    x = np.array([[0.5, 0.5, 1.0, 1.0], [0.0, 0.0, 0.5, 0.5]], np.float32)
    y = np.array([[0.25, 0.25, 0.75, 0.75]], np.float32)
    got, _ = _run(C.box_iou(V("x"), V("y"), format="corner"), x=x, y=y)
    np.testing.assert_allclose(got[0], [[1 / 7], [1 / 7]], rtol=1e-6)
    t = np.arange(1, 10, dtype=np.float32).reshape(3, 3)
    got, _ = _run(C.index_copy(V("o"), V("i"), V("t")), o=np.zeros((5, 3), np.float32),
                  i=np.array([0, 4, 2], np.float32), t=t)
    assert got[0].tolist() == [[1, 2, 3], [0, 0, 0], [7, 8, 9], [0, 0, 0], [4, 5, 6]]
    got, _ = _run(C.arange_like(V("x"), start=0), x=np.zeros((3, 4), np.float32))
    assert got[0].tolist() == np.arange(12.0).reshape(3, 4).tolist()
    got, _ = _run(C.arange_like(V("x"), start=0, axis=-1), x=np.zeros((3, 4), np.float32))
    assert got[0].tolist() == [0.0, 1.0, 2.0, 3.0]


def test_index_copy_repeated_index():
    """A repeated index: the last row given wins; mxnet's backward hands every repeat the
    output gradient of its row and zeroes the copied rows of old_tensor's gradient."""
    old = np.arange(12, dtype=np.float32).reshape(4, 3)
    new = -np.arange(1, 10, dtype=np.float32).reshape(3, 3)
    idx = np.array([1, 3, 1], np.float32)
    dy = np.arange(100, 112, dtype=np.float32).reshape(4, 3)
    got, exe = _run(C.index_copy(V("o"), V("i"), V("t")), grads=[dy], o=old, i=idx, t=new)
    want = old.copy()
    want[1], want[3] = new[2], new[1]
    assert got[0].tolist() == want.tolist()
    d_old = dy.copy()
    d_old[[1, 3]] = 0
    assert exe.grad_dict["o"].asnumpy().tolist() == d_old.tolist()
    assert exe.grad_dict["t"].asnumpy().tolist() == dy[[1, 3, 1]].tolist()
    assert not exe.grad_dict["i"].asnumpy().any()


def test_box_encode_ignores_unmatched_samples():
    """Samples <= 0.5 get zero targets and masks, whatever their (even -1) match."""
    anchors = np.array([[[0, 0, 1, 1], [0, 0, 2, 2]]], np.float32)
    refs = np.array([[[0.5, 0.5, 1.5, 1.5]]], np.float32)
    got, _ = _run(C.box_encode(V("s"), V("m"), V("a"), V("r"), V("mu"), V("sd")),
                  s=np.array([[1, -1]], np.float32), m=np.array([[0, -1]], np.float32),
                  a=anchors, r=refs, mu=np.zeros(4, np.float32), sd=np.ones(4, np.float32))
    np.testing.assert_allclose(got[0][0], [[0.5, 0.5, 0, 0], [0, 0, 0, 0]], atol=1e-7)
    assert got[1][0].tolist() == [[1] * 4, [0] * 4]
