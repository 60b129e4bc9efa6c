"""Rules of the shape operators (compiler/ops/shape.py).

Expected shapes marked "mxnet 1.9.1" were produced by running mxnet 1.9.1's
``Symbol.infer_shape`` on the same inputs and hard-coded here.
"""
import numpy as np
import pytest
import torch

from compiler.frontend.graph import _raw
from compiler.ops import get_op
from compiler.ops.registry import ShapeError, View
from compiler.frontend.reference import check_gradient


def attrs_of(name, **attrs):
    return get_op(name).parse_attrs({k: _raw(v) for k, v in attrs.items()})


def infer(name, shapes, **attrs):
    op = get_op(name)
    _, out = op.infer_shape(attrs_of(name, **attrs), list(shapes))
    return out[0] if len(out) == 1 else out


def ref(name, ins, **attrs):
    return get_op(name).reference(attrs_of(name, **attrs), ins, False)


def rand(*shape):
    return torch.randn(*shape, dtype=torch.float64).float()


# -- Reshape -----------------------------------------------------------------------

# (input shape, shape attr, reverse) -> output shape, from mxnet 1.9.1
RESHAPE_TABLE = [
    ((2, 3, 4), (4, 0, 2), False, (4, 3, 2)),
    ((2, 3, 4), (2, 0, 0), False, (2, 3, 4)),
    ((2, 3, 4), (6, 1, -1), False, (6, 1, 4)),
    ((2, 3, 4), (3, -1, 8), False, (3, 1, 8)),
    ((2, 3, 4), (-1,), False, (24,)),
    ((2, 3, 4), (2, -2), False, (2, 3, 4)),
    ((2, 3, 4), (-2, 1, 1), False, (2, 3, 4, 1, 1)),
    ((2, 3, 4, 5), (-3, -3), False, (6, 20)),
    ((2, 3, 4, 5), (-3, -2), False, (6, 4, 5)),
    ((2, 3, 4), (0, -3), False, (2, 12)),
    ((2, 3, 4), (-4, 1, 2, -2), False, (1, 2, 3, 4)),
    ((2, 3, 4), (2, -4, -1, 3, -2), False, (2, 1, 3, 4)),
    ((10, 5, 4), (-1, 0), True, (50, 4)),
    ((10, 5, 4), (-1, 0), False, (40, 5)),
    ((2, 3, 4), (-1, 2, 0), True, (3, 2, 4)),
    ((2, 3, 4), (0, -1), True, (3, 8)),
    ((1, 3, 1), (-1,), False, (3,)),
    ((3, 1, 5), (3, 5), False, (3, 5)),
    ((6,), (-4, -1, 3), False, (2, 3)),
    ((2, 3, 4), (-4, 2, -1, -2), False, (2, 1, 3, 4)),
    ((2, 3, 5), (0, 0, 0, 1), False, (2, 3, 5, 1)),
    ((7, 1), (1, 7), False, (1, 7)),
    ((2, 3, 4), (-3, 0), False, (6, 4)),
    ((2, 3, 4), (-2,), False, (2, 3, 4)),
    ((4, 1, 3), (0, -1), True, (1, 12)),
    ((2, 3, 4), (-3, -1), True, (6, 4)),
    ((5,), (1, -1, 1), False, (1, 5, 1)),
    ((2, 3, 4), (24,), False, (24,)),
]


@pytest.mark.parametrize("in_shape,shape,reverse,expected", RESHAPE_TABLE)
def test_reshape_table(in_shape, shape, reverse, expected):
    assert infer("Reshape", [in_shape], shape=shape, reverse=reverse) == expected
    x = rand(*in_shape)
    y, = ref("Reshape", [x], shape=shape, reverse=reverse)
    assert tuple(y.shape) == expected
    np.testing.assert_array_equal(y.numpy(), x.numpy().reshape(expected))
    assert get_op("reshape") is get_op("Reshape")


@pytest.mark.parametrize("in_shape,shape,match", [
    ((2, 3, 4), (-1, -1), "only one dim can be inferred"),   # mxnet 1.9.1 errors too
    ((2, 3), (0, 0, 0), "code 0"),                            # mxnet 1.9.1 errors too
    ((2, 3, 4), (-4, 5, -1, -2), "do not multiply"),          # mxnet 1.9.1 errors too
    ((2, 3, 4), (7,), "has 7 elements"),
    ((2, 3, 4), (5, -1), "not divisible"),
    ((2, 3, 4), (-4, -1, -1, -2), "both be -1"),
    ((2,), (-3,), "-3"),
])
def test_reshape_errors(in_shape, shape, match):
    with pytest.raises(ShapeError, match=match) as info:
        infer("Reshape", [in_shape], shape=shape)
    assert str(tuple(in_shape)) in str(info.value) and "shape=" in str(info.value)


def test_reshape_unknown_and_legacy():
    assert infer("Reshape", [None], shape=(2, -1)) is None
    assert infer("Reshape", [(2, 3, 4)], target_shape=(0, 4)) == (6, 4)
    assert infer("Reshape", [(2, 3, 4)], target_shape=(0,), keep_highest=True) == (2, 12)


# -- infer_shape tables of the other ops (mxnet 1.9.1) ------------------------------------

SHAPE_TABLE = [
    ("Flatten", [(2, 3, 4)], {}, (2, 12)),
    ("Flatten", [(5,)], {}, (5, 1)),
    ("Flatten", [(3, 1, 5, 7)], {}, (3, 35)),
    ("Flatten", [(1,)], {}, (1, 1)),
    ("expand_dims", [(2, 3)], {"axis": 0}, (1, 2, 3)),
    ("expand_dims", [(2, 3)], {"axis": 2}, (2, 3, 1)),
    ("expand_dims", [(2, 3)], {"axis": -1}, (2, 3, 1)),
    ("expand_dims", [(2, 3)], {"axis": -3}, (1, 2, 3)),
    ("expand_dims", [(5, 1, 7)], {"axis": 1}, (5, 1, 1, 7)),
    ("transpose", [(2, 3, 5)], {}, (5, 3, 2)),
    ("transpose", [(2, 3, 5)], {"axes": (1, 0, 2)}, (3, 2, 5)),
    ("transpose", [(1, 7, 3, 2)], {"axes": (3, 1, 0, 2)}, (2, 7, 1, 3)),
    ("transpose", [(7,)], {}, (7,)),
    ("SwapAxis", [(2, 3, 5)], {"dim1": 0, "dim2": 2}, (5, 3, 2)),
    ("SwapAxis", [(2, 3, 5)], {}, (2, 3, 5)),
    ("SwapAxis", [(1, 3, 5, 7)], {"dim1": -1, "dim2": 1}, (1, 7, 5, 3)),
    ("Concat", [(2, 3), (2, 5)], {"num_args": 2}, (2, 8)),
    ("Concat", [(2, 3), (1, 3), (4, 3)], {"num_args": 3, "dim": 0}, (7, 3)),
    ("Concat", [(2, 3, 1), (2, 3, 7)], {"num_args": 2, "dim": -1}, (2, 3, 8)),
    ("Concat", [(2, 3, 1), (2, 3, 7)], {"num_args": 2, "dim": 2}, (2, 3, 8)),
    ("SliceChannel", [(2, 6, 5)], {"num_outputs": 3}, [(2, 2, 5)] * 3),
    ("SliceChannel", [(2, 6, 5)], {"num_outputs": 2, "axis": 0}, [(1, 6, 5)] * 2),
    ("SliceChannel", [(3, 5, 7)], {"num_outputs": 7, "axis": -1}, [(3, 5, 1)] * 7),
    ("SliceChannel", [(3, 5, 1)], {"num_outputs": 3, "axis": 0, "squeeze_axis": True},
     [(5, 1)] * 3),
    ("SliceChannel", [(1, 5)], {"num_outputs": 1, "axis": 0, "squeeze_axis": True}, (5,)),
    ("slice_axis", [(5, 7)], {"axis": 1, "begin": 2, "end": 5}, (5, 3)),
    ("slice_axis", [(5, 7)], {"axis": 0, "begin": -3, "end": None}, (3, 7)),
    ("slice_axis", [(5, 7, 3)], {"axis": -2, "begin": 1, "end": -1}, (5, 5, 3)),
    ("slice_axis", [(5, 1)], {"axis": 1, "begin": 0, "end": 1}, (5, 1)),
    ("reverse", [(5, 7)], {"axis": 1}, (5, 7)),
    ("reverse", [(5, 7, 3)], {"axis": (0, 2)}, (5, 7, 3)),
    ("reverse", [(1, 7)], {"axis": 0}, (1, 7)),
    ("reverse", [(5, 7)], {"axis": -1}, (5, 7)),
    ("broadcast_to", [(1, 3)], {"shape": (5, 3)}, (5, 3)),
    ("broadcast_to", [(2, 1, 1)], {"shape": (0, 7, 5)}, (2, 7, 5)),
    ("broadcast_to", [(1, 1)], {"shape": (1, 1)}, (1, 1)),
    ("broadcast_axis", [(1, 3)], {"axis": 0, "size": 5}, (5, 3)),
    ("broadcast_axis", [(2, 1, 1)], {"axis": (1, 2), "size": (7, 3)}, (2, 7, 3)),
    ("broadcast_axis", [(1, 3, 1)], {"axis": 2, "size": 6}, (1, 3, 6)),
    ("_zeros", [], {"shape": (2, 3)}, (2, 3)),
    ("_ones", [], {"shape": (5,)}, (5,)),
    ("_full", [], {"shape": (1, 3), "value": 2.5}, (1, 3)),
    # internal: no mxnet counterpart
    ("_sum_to_shape", [(2, 3, 4)], {"shape": (3, 1)}, (3, 1)),
    ("_sum_to_shape", [(2, 3, 4)], {"shape": (2, 3, 4)}, (2, 3, 4)),
    ("_sum_to_shape", [(5, 1, 7)], {"shape": (1, 1, 1)}, (1, 1, 1)),
]


@pytest.mark.parametrize("name,shapes,attrs,expected", SHAPE_TABLE)
def test_infer_shape(name, shapes, attrs, expected):
    assert infer(name, shapes, **attrs) == expected
    outs = ref(name, [rand(*s) for s in shapes], **attrs)
    got = [tuple(o.shape) for o in outs]
    assert got == (expected if isinstance(expected, list) else [expected])


@pytest.mark.parametrize("name,attrs,n", [
    ("Flatten", {}, 1), ("expand_dims", {"axis": 0}, 1), ("transpose", {}, 1),
    ("SwapAxis", {"dim1": 0, "dim2": 1}, 1), ("Concat", {"num_args": 2}, 2),
    ("slice_axis", {"axis": 0, "begin": 0, "end": 1}, 1), ("reverse", {"axis": 0}, 1),
    ("broadcast_to", {"shape": (2, 3)}, 1), ("broadcast_axis", {"axis": 0, "size": 2}, 1),
])
def test_unknown_input(name, attrs, n):
    assert infer(name, [None] * n, **attrs) is None
    assert infer("SliceChannel", [None], num_outputs=2) == [None, None]


ERROR_TABLE = [  # every one is an error in mxnet 1.9.1 as well (except where noted)
    ("expand_dims", [(2, 3)], {"axis": 3}, r"axis=3 must be in the range \[-3, 2\]"),
    ("expand_dims", [(2, 3)], {"axis": -4}, "axis=-4"),
    ("transpose", [(2, 3, 5)], {"axes": (1, 0)}, "axes=.*2 entries.*3 dims"),
    ("transpose", [(2, 3, 5)], {"axes": (1, 1, 0)}, "not a permutation"),  # mxnet accepts
    ("SwapAxis", [(2, 3, 5)], {"dim1": 3, "dim2": 0}, "dim1=3 is out of bounds"),
    ("Concat", [(2, 3), (3, 5)], {"num_args": 2}, r"except dim=1.*\(2, 3\), \(3, 5\)"),
    ("Concat", [(2, 3), (2, 5)], {"num_args": 2, "dim": 3}, "dim=3 is out of range"),
    ("Concat", [(2, 3), (2, 3, 1)], {"num_args": 2, "dim": 0}, "must agree"),
    ("Concat", [(2, 3)], {"num_args": 2}, "num_args=2 but 1"),
    ("SliceChannel", [(2, 5, 5)], {"num_outputs": 3}, "num_outputs=3 evenly"),
    ("SliceChannel", [(2, 6, 5)], {"num_outputs": 2, "squeeze_axis": True},
     r"squeeze_axis=True.*\(6\).*num_outputs=2"),
    ("slice_axis", [(5, 7)], {"axis": 1, "begin": 5, "end": 3}, "begin=5, end=3"),
    ("slice_axis", [(5, 7)], {"axis": 1, "begin": 0, "end": 9}, "end=9 .*size 7"),
    ("slice_axis", [(5, 7)], {"axis": 2, "begin": 0, "end": 1}, "axis=2 is out of range"),
    ("slice_axis", [(5, 7)], {"axis": 1, "begin": -9, "end": 2}, "begin=-9"),
    ("reverse", [(5, 7)], {"axis": 2}, "axis=2 is out of range"),  # mxnet: fails at run
    ("broadcast_to", [(3,)], {"shape": (4, 3)}, r"\(3,\) cannot be broadcast.*number of dims"),
    ("broadcast_to", [(2, 3)], {"shape": (2, 4)}, r"\(2, 3\) cannot be broadcast to shape=\(2, 4\)"),
    ("broadcast_axis", [(2, 3)], {"axis": 1, "size": 5}, "axis 1 .* must have size 1"),
    ("broadcast_axis", [(2, 1)], {"axis": (0, 1), "size": 5}, "same length"),
    ("Flatten", [()], {}, "at least 1 dim"),
    ("_sum_to_shape", [(2, 3)], {"shape": (4,)}, r"does not broadcast from shape=\(4,\)"),
    ("_sum_to_shape", [(3,)], {"shape": (1, 3)}, "larger-rank"),
]


@pytest.mark.parametrize("name,shapes,attrs,match", ERROR_TABLE)
def test_shape_errors(name, shapes, attrs, match):
    with pytest.raises(ShapeError, match=match):
        infer(name, shapes, **attrs)


# -- references against numpy ---------------------------------------------------------------

def test_references_match_numpy():
    x = rand(2, 3, 5)
    a = x.numpy()
    np.testing.assert_array_equal(ref("transpose", [x])[0].numpy(), a.transpose())
    np.testing.assert_array_equal(ref("transpose", [x], axes=(1, 2, 0))[0].numpy(),
                                  a.transpose(1, 2, 0))
    np.testing.assert_array_equal(ref("SwapAxis", [x], dim1=0, dim2=2)[0].numpy(),
                                  np.swapaxes(a, 0, 2))
    np.testing.assert_array_equal(ref("expand_dims", [x], axis=-1)[0].numpy(), a[..., None])
    np.testing.assert_array_equal(ref("Flatten", [x])[0].numpy(), a.reshape(2, 15))
    np.testing.assert_array_equal(ref("reverse", [x], axis=(0, 2))[0].numpy(), a[::-1, :, ::-1])
    np.testing.assert_array_equal(ref("flip", [x], axis=(1, 1))[0].numpy(), a)  # as mxnet
    np.testing.assert_array_equal(ref("slice_axis", [x], axis=2, begin=-4, end=-1)[0].numpy(),
                                  a[:, :, 1:4])
    np.testing.assert_array_equal(ref("slice_axis", [x], axis=1, begin=1, end=None)[0].numpy(),
                                  a[:, 1:])
    y = rand(2, 4, 5)
    np.testing.assert_array_equal(ref("Concat", [x, y], num_args=2)[0].numpy(),
                                  np.concatenate([a, y.numpy()], axis=1))
    parts = ref("split", [y], num_outputs=2)
    for p, q in zip(parts, np.split(y.numpy(), 2, axis=1)):
        np.testing.assert_array_equal(p.numpy(), q)
    parts = ref("SliceChannel", [x], num_outputs=2, axis=0, squeeze_axis=True)
    np.testing.assert_array_equal(parts[1].numpy(), a[1])
    z = rand(2, 1, 5)
    np.testing.assert_array_equal(ref("broadcast_to", [z], shape=(0, 3, 0))[0].numpy(),
                                  np.broadcast_to(z.numpy(), (2, 3, 5)))
    np.testing.assert_array_equal(ref("broadcast_axes", [z], axis=1, size=4)[0].numpy(),
                                  np.broadcast_to(z.numpy(), (2, 4, 5)))
    np.testing.assert_allclose(ref("_sum_to_shape", [x], shape=(3, 1))[0].numpy(),
                               a.sum(axis=(0, 2)).reshape(3, 1), rtol=1e-5, atol=1e-6)
    assert torch.equal(ref("zeros", [], shape=(2, 3))[0], torch.zeros(2, 3))
    assert torch.equal(ref("ones", [], shape=(3,))[0], torch.ones(3))
    assert torch.equal(ref("_full", [], shape=(3,), value=2.5)[0], torch.full((3,), 2.5))
    assert ref("zeros", [], shape=(2,), dtype="int32")[0].dtype == torch.int32
    op = get_op("ones")
    assert op.list_arguments(attrs_of("ones", shape=(2,))) == []
    assert op.infer_type(attrs_of("ones", shape=(2,), dtype="float64"), [])[1] == ["float64"]


def test_signatures():
    op = get_op("concat")
    assert op.variadic == "num_args"
    assert op.list_arguments(attrs_of("Concat", num_args=3)) == ["arg0", "arg1", "arg2"]
    assert get_op("split").list_outputs(attrs_of("split", num_outputs=2)) == [
        "output0", "output1"]
    assert get_op("Concat").lowering.kind == "concat"
    assert get_op("zeros").lowering.kind == "constant"
    assert attrs_of("zeros", shape=(2,))["value"] == 0.0
    assert attrs_of("ones", shape=(2,))["value"] == 1.0


# -- View lowerings ------------------------------------------------------------------------------

def apply_view(buf, shape, strides, offset):
    """``torch.as_strided`` that also accepts negative strides."""
    flat = buf.reshape(-1)
    idx = torch.full(tuple(shape), offset, dtype=torch.long)
    for d, (n, s) in enumerate(zip(shape, strides)):
        view = [1] * len(shape)
        view[d] = n
        idx = idx + (torch.arange(n) * s).reshape(view)
    if all(s >= 0 for s in strides):
        direct = torch.as_strided(flat, tuple(shape), tuple(strides), offset)
        assert torch.equal(direct, flat[idx])
    return flat[idx]


def layouts(shape):
    """(buffer, input) pairs: contiguous, sliced from a padded buffer, transposed."""
    x = rand(*shape)
    yield x, x
    big = rand(*[d + 2 for d in shape])
    yield big, big[tuple(slice(1, 1 + d) for d in shape)]
    n = len(shape)
    if n >= 2:
        bigt = rand(*reversed(shape))
        yield bigt, bigt.permute(*range(n - 1, -1, -1))


VIEW_CASES = [
    ("Reshape", (2, 3, 4), {"shape": (6, 4)}),
    ("Reshape", (2, 3, 4), {"shape": (-1,)}),
    ("Reshape", (2, 3, 4), {"shape": (2, 1, 3, 4, 1)}),
    ("Reshape", (3, 1, 5), {"shape": (3, 5)}),
    ("Reshape", (6, 5), {"shape": (-4, 2, 3, -2)}),
    ("Flatten", (2, 3, 5), {}),
    ("Flatten", (7, 1, 1), {}),
    ("expand_dims", (2, 3), {"axis": 1}),
    ("expand_dims", (2, 3), {"axis": 2}),
    ("expand_dims", (5,), {"axis": 0}),
    ("transpose", (2, 3, 5), {}),
    ("transpose", (1, 7, 3, 2), {"axes": (3, 1, 0, 2)}),
    ("SwapAxis", (2, 3, 5), {"dim1": 0, "dim2": 2}),
    ("slice_axis", (5, 7), {"axis": 1, "begin": 2, "end": 5}),
    ("slice_axis", (5, 7, 3), {"axis": 0, "begin": -2, "end": None}),
    ("reverse", (5, 7), {"axis": 1}),
    ("reverse", (5, 7, 3), {"axis": (0, 2)}),
    ("reverse", (1, 6), {"axis": 0}),
    ("broadcast_to", (1, 3), {"shape": (5, 3)}),
    ("broadcast_to", (2, 1, 1), {"shape": (0, 7, 5)}),
    ("broadcast_axis", (1, 3, 1), {"axis": (0, 2), "size": (4, 6)}),
]


@pytest.mark.parametrize("name,shape,attrs", VIEW_CASES)
def test_view(name, shape, attrs):
    op = get_op(name)
    assert isinstance(op.lowering, View)
    parsed = attrs_of(name, **attrs)
    out_shape = infer(name, [shape], **attrs)
    for buf, x in layouts(shape):
        expected, = op.reference(parsed, [x], False)
        res = op.lowering.view(parsed, shape, out_shape, tuple(x.stride()), x.storage_offset())
        if res is None:
            assert name in ("Reshape", "Flatten")
            with pytest.raises(RuntimeError):
                x.view(out_shape)  # torch cannot view it either: a copy is needed
            continue
        strides, offset = res
        assert len(strides) == len(out_shape)
        got = apply_view(buf, out_shape, strides, offset)
        assert torch.equal(got, expected)


def test_reshape_view_needs_copy():
    big = rand(4, 9)
    x = big[:, 1:7]                       # rows are not contiguous with each other
    op = get_op("Reshape")
    parsed = attrs_of("Reshape", shape=(-1,))
    assert op.lowering.view(parsed, (4, 6), (24,), x.stride(), x.storage_offset()) is None
    parsed = attrs_of("Reshape", shape=(4, 2, 3))  # splitting a dim still works
    strides, offset = op.lowering.view(parsed, (4, 6), (4, 2, 3), x.stride(), x.storage_offset())
    assert torch.equal(apply_view(big, (4, 2, 3), strides, offset), x.reshape(4, 2, 3))


# -- dimmap --------------------------------------------------------------------------------------

DIMMAP_CASES = [
    ("Reshape", (2, 3, 4), {"shape": (2, 1, 3, 4, 1)}, True),
    ("Reshape", (3, 1, 5), {"shape": (3, 5)}, True),
    ("Reshape", (1, 7), {"shape": (7, 1)}, True),
    ("Reshape", (2, 3, 4), {"shape": (6, 4)}, False),
    ("Reshape", (6,), {"shape": (-4, 2, 3)}, False),
    ("Flatten", (7, 1, 1), {}, True),
    ("Flatten", (2, 3, 5), {}, False),
    ("expand_dims", (2, 3), {"axis": 1}, True),
    ("expand_dims", (2, 3), {"axis": -1}, True),
    ("transpose", (2, 3, 5), {}, True),
    ("transpose", (1, 7, 3, 2), {"axes": (3, 1, 0, 2)}, True),
    ("SwapAxis", (2, 3, 5), {"dim1": 1, "dim2": -1}, True),
    ("broadcast_to", (2, 1, 1), {"shape": (0, 7, 5)}, True),
    ("broadcast_to", (1, 1), {"shape": (1, 1)}, True),
    ("broadcast_axis", (1, 3, 1), {"axis": 2, "size": 6}, True),
    ("slice_axis", (5, 7), {"axis": 1, "begin": 2, "end": 5}, False),
    ("reverse", (5, 7), {"axis": 1}, False),
]


@pytest.mark.parametrize("name,shape,attrs,is_map", DIMMAP_CASES)
def test_dimmap(name, shape, attrs, is_map):
    op = get_op(name)
    parsed = attrs_of(name, **attrs)
    out_shape = infer(name, [shape], **attrs)
    dm = op.lowering.dimmap(parsed, shape, out_shape) if op.lowering.dimmap else None
    if not is_map:
        assert dm is None
        return
    assert dm is not None and len(dm) == len(out_shape)
    used = [d for d in dm if d is not None]
    assert len(set(used)) == len(used)
    for o, i in enumerate(dm):
        if i is not None:
            assert out_shape[o] == shape[i]
    # Rebuild the output from the input with the map alone.
    x = rand(*shape)
    unused = [i for i in range(len(shape)) if i not in used]
    assert all(shape[i] == 1 for i in unused)
    kept = sorted(used)
    y = x.reshape([shape[i] for i in kept]) if len(kept) != len(shape) else x
    y = y.permute(*[kept.index(i) for i in used]) if used else y
    full = []
    k = 0
    for o, i in enumerate(dm):
        full.append(y.shape[k] if i is not None else 1)
        k += i is not None
    y = y.reshape(full).expand(out_shape)
    expected, = op.reference(parsed, [x], False)
    assert torch.equal(y, expected)


# -- gradients --------------------------------------------------------------------------------

GRAD_CASES = [
    ("Reshape", [(2, 3, 4)], {"shape": (4, -1)}),
    ("Reshape", [(2, 3, 4)], {"shape": (-1, 2, 0), "reverse": True}),
    ("Flatten", [(2, 3, 5)], {}),
    ("expand_dims", [(2, 3)], {"axis": 1}),
    ("transpose", [(2, 3, 5)], {}),
    ("transpose", [(1, 7, 3, 2)], {"axes": (3, 1, 0, 2)}),
    ("SwapAxis", [(2, 3, 5)], {"dim1": 0, "dim2": 2}),
    ("Concat", [(2, 3), (2, 5)], {"num_args": 2}),
    ("Concat", [(2, 3), (1, 3), (4, 3)], {"num_args": 3, "dim": 0}),
    ("SliceChannel", [(2, 6, 5)], {"num_outputs": 3}),
    ("SliceChannel", [(3, 5, 1)], {"num_outputs": 3, "axis": 0, "squeeze_axis": True}),
    ("SliceChannel", [(1, 5)], {"num_outputs": 1, "axis": 0, "squeeze_axis": True}),
    ("slice_axis", [(5, 7)], {"axis": 1, "begin": 2, "end": 5}),
    ("slice_axis", [(5, 7)], {"axis": 0, "begin": 0, "end": 3}),
    ("slice_axis", [(5, 7)], {"axis": 0, "begin": -3, "end": None}),
    ("slice_axis", [(5, 1)], {"axis": 1, "begin": 0, "end": 1}),
    ("reverse", [(5, 7, 3)], {"axis": (0, 2)}),
    ("broadcast_to", [(2, 1, 1)], {"shape": (0, 7, 5)}),
    ("broadcast_axis", [(1, 3)], {"axis": 0, "size": 5}),
    ("_sum_to_shape", [(2, 3, 4)], {"shape": (3, 1)}),
    ("_sum_to_shape", [(5, 1, 7)], {"shape": (1, 7)}),
]


@pytest.mark.parametrize("name,shapes,attrs", GRAD_CASES)
def test_gradient(name, shapes, attrs):
    ins = [rand(*s) for s in shapes]
    graph_grads, auto = check_gradient(name, ins, attrs)
    assert len(graph_grads) == len(ins)
    for g, a, x in zip(graph_grads, auto, ins):
        assert tuple(g.shape) == tuple(x.shape)
        torch.testing.assert_close(g, a, rtol=1e-5, atol=1e-6)


def test_constant_gradient_is_empty():
    for name in ("zeros", "ones", "_full"):
        assert get_op(name).gradient(None, None) == []  # no inputs, nothing to differentiate


# -- Decompose lowerings ------------------------------------------------------------------------

@pytest.mark.parametrize("name,shape,attrs", [
    ("SliceChannel", (2, 6, 5), {"num_outputs": 3}),
    ("SliceChannel", (3, 5, 1), {"num_outputs": 3, "axis": 0, "squeeze_axis": True}),
    ("_sum_to_shape", (2, 3, 4), {"shape": (3, 1)}),
    ("_sum_to_shape", (5, 1, 7), {"shape": (1, 7)}),
    ("_sum_to_shape", (2, 3), {"shape": (2, 3)}),
])
def test_decompose(name, shape, attrs):
    from compiler.frontend.graph import Builder, Graph, infer_node
    from compiler.ops.registry import NodeView
    from compiler.frontend.reference import evaluate
    op = get_op(name)
    parsed = attrs_of(name, **attrs)
    g = Graph()
    v = g.add_node("null", "x", role="arg")
    g.node(v)["shapes"] = [shape]
    n = g.add_node(name, "op", [(v, 0)], parsed, {})
    infer_node(g, n)
    b = Builder(g, "fwd", "dec")
    out_shapes = g.node(n)["shapes"]
    view = NodeView("op", parsed, [b.ref((v, 0))], [b.ref((n, i)) for i in range(len(out_shapes))],
                    [], [shape], out_shapes)
    refs = op.lowering.build(b, view, False)
    assert len(refs) == len(out_shapes)
    x = rand(*shape)
    vals = evaluate(g, {"x": x}, False, [r.entry for r in refs])
    expected = op.reference(parsed, [x], False)
    for r, e in zip(refs, expected):
        assert torch.allclose(vals[r.entry], e, rtol=1e-6)
