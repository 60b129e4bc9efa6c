"""The shape operators of ``compiler/ops/shape_more.py`` and ``shape_like.py`` through
the whole compile path, on both cpu targets: forward and gradients against
torch in float64, finite differences, inference (``check`` of
test_ops_compiled.py). ``ROWS`` is swept after every view by
test_ops_after_views.py; mxnet's own numbers for these operators are replayed by
test_mxnet_fixtures_shape.py, and their shape errors are checked at the end.
"""
from __future__ import annotations

import pytest
import torch

from compiler import symbol as sym
from compiler.errors import MXNetError
from tests.compiler.test_ops_compiled import Op, check
from tests.conftest import assert_same_launches_on_cpu_targets

U3 = [[(3, 5)], [(1, 7)], [(2, 1, 3)]]
WIDE = [[(3, 5)], [(1, 7)], [(2, 6, 3)]]          # dim 1 of at least 3
PAIRS = [[(3, 5), (3, 5)], [(1, 7), (1, 7)], [(2, 1, 3), (2, 1, 3)]]
D2S = [[(1, 4, 2, 3)], [(2, 8, 1, 1)], [(1, 12, 3, 5)]]
S2D = [[(1, 3, 2, 4)], [(2, 1, 4, 6)], [(1, 2, 6, 2)]]


def _idx(x, dim, idx):
    return x.index_select(dim, torch.tensor(idx, dtype=torch.long))


def _rev_step(x, dim, step):
    n = x.shape[dim]
    return _idx(x, dim, list(range(n - 1, 0, step)))


def _torch_tile(x, reps):
    n = max(len(reps), x.dim())
    return x.reshape((1,) * (n - x.dim()) + tuple(x.shape)).repeat(
        *((1,) * (n - len(reps)) + tuple(reps)))


def _split(x, bounds, dim, squeeze=False):
    outs = [x.narrow(dim, s, e - s) for s, e in bounds]
    return [o.squeeze(dim) for o in outs] if squeeze else outs


def _sections(n, k):
    small, extra = divmod(n, k)
    starts = [i * small + min(i, extra) for i in range(k)] + [n]
    return list(zip(starts[:-1], starts[1:]))


ROWS = [
    # -- slice: steps, negative steps, None, clamping; crop is its other name
    Op("slice_step2", lambda x: sym.slice(x, begin=(0, 1), end=(None, None), step=(1, 2)),
       lambda x: x[:, 1::2], WIDE),
    Op("slice_negstep", lambda x: sym.slice(x, begin=(None, -1), end=(None, 0), step=(-1, -2)),
       lambda x: _rev_step(x.flip(0), 1, -2), WIDE),
    Op("slice_clamp", lambda x: sym.slice(x, begin=(-10, 1), end=(10, -1)),
       lambda x: x[:, 1:-1], WIDE),
    Op("slice_none_flip", lambda x: sym.slice(x, begin=(None, None), end=(None, None),
                                              step=(None, -1)),
       lambda x: x.flip(1), U3),
    Op("slice_3d_step3", lambda x: sym.slice(x, begin=(None, None, 2), end=(None, None, None),
                                             step=(-1, 1, 3)),
       lambda x: x.flip(0)[:, :, 2::3], [[(2, 3, 7)], [(1, 1, 3)], [(3, 2, 6)]]),
    Op("slice_then_mul", lambda x: sym.slice(x, begin=(1,), end=(None,)) * 3,
       lambda x: x[1:] * 3, [[(3, 5)], [(2, 7)], [(4, 1, 3)]]),
    Op("crop", lambda x: sym.crop(x, begin=(0,), end=(1,)), lambda x: x[0:1], U3),
    # -- squeeze
    Op("squeeze_all", lambda x: sym.squeeze(x), lambda x: x.reshape(
        [d for d in x.shape if d != 1] or [1]), [[(2, 1, 3)], [(1, 7)], [(3, 1, 1, 5)]]),
    Op("squeeze_axis", lambda x: sym.squeeze(x, axis=-2), lambda x: x.squeeze(-2),
       [[(2, 1, 3)], [(5, 1, 1)], [(3, 1, 7)]]),
    Op("squeeze_to_one", lambda x: sym.squeeze(x, axis=(0, 1)) * 2,     # (1, 1) -> (1,)
       lambda x: x.reshape(tuple(x.shape[2:]) or (1,)) * 2, [[(1, 1)], [(1, 1, 3)], [(1, 1, 5, 1)]]),
    # -- stack
    Op("stack_axis1", lambda x, y: sym.stack(x, y, axis=1), lambda x, y: torch.stack([x, y], 1),
       PAIRS, inputs=("x", "y")),
    Op("stack_neg", lambda x, y: sym.stack(x, y * 2, axis=-1),
       lambda x, y: torch.stack([x, y * 2], -1), PAIRS, inputs=("x", "y")),
    Op("stack_three", lambda x, y, z: sym.stack(x, y, z),
       lambda x, y, z: torch.stack([x, y, z]), [[(3, 5)] * 3, [(1, 7)] * 3, [(2, 1, 3)] * 3],
       inputs=("x", "y", "z")),
    Op("stack_one", lambda x: sym.stack(x, axis=-1), lambda x: x.unsqueeze(-1), U3),
    # -- tile / repeat
    Op("tile_2d", lambda x: sym.tile(x, reps=(2, 3)), lambda x: _torch_tile(x, (2, 3)), U3),
    Op("tile_promote", lambda x: sym.tile(x, reps=(2, 1, 3)),
       lambda x: _torch_tile(x, (2, 1, 3)), [[(3, 5)], [(1, 7)], [(2, 3)]]),
    Op("tile_short_reps", lambda x: sym.tile(x, reps=(3,)), lambda x: _torch_tile(x, (3,)), U3),
    Op("tile_ones", lambda x: sym.tile(x, reps=(1, 1)), lambda x: x.clone(),
       [[(3, 5)], [(1, 7)], [(2, 3)]]),
    Op("repeat_flat", lambda x: sym.repeat(x, repeats=3),
       lambda x: x.reshape(-1).repeat_interleave(3), U3),
    Op("repeat_axis", lambda x: sym.repeat(x, repeats=2, axis=-1),
       lambda x: x.repeat_interleave(2, dim=-1), U3),
    Op("repeat_axis0", lambda x: sym.repeat(x, repeats=3, axis=0) + 1,
       lambda x: x.repeat_interleave(3, dim=0) + 1, U3),
    # -- reshape_like / slice_like / broadcast_like: the second input lends its shape only
    Op("reshape_like", lambda x, y: sym.reshape_like(x, y), lambda x, y: x.reshape(y.shape),
       [[(2, 3), (3, 2)], [(1, 6), (3, 2, 1)], [(2, 1, 3), (6,)]], inputs=("x", "y")),
    Op("reshape_like_ranges",
       lambda x, y: sym.reshape_like(x, y, lhs_begin=1, lhs_end=3, rhs_begin=0, rhs_end=1),
       lambda x, y: x.reshape(x.shape[0], y.shape[0], *x.shape[3:]),
       [[(2, 3, 4), (12, 7)], [(1, 5, 1, 2), (5, 1)], [(3, 2, 3), (6, 2)]], inputs=("x", "y"),
       nograd=("y",)),
    Op("reshape_like_neg",
       lambda x, y: sym.reshape_like(x, y, lhs_begin=-2, rhs_begin=1),
       lambda x, y: x.reshape(*x.shape[:-2], *y.shape[1:]),
       [[(2, 3, 4), (5, 4, 3)], [(1, 6, 1), (7, 2, 3)], [(3, 5, 2), (1, 10)]],
       inputs=("x", "y"), nograd=("y",)),
    Op("slice_like", lambda x, y: sym.slice_like(x, y), lambda x, y: x[:y.shape[0], :y.shape[1]],
       [[(4, 5), (2, 3)], [(1, 7), (1, 7)], [(3, 6), (1, 5)]], inputs=("x", "y")),
    Op("slice_like_axes", lambda x, y: sym.slice_like(x, y, axes=(-1,)),
       lambda x, y: x[..., :y.shape[-1]],
       [[(4, 5), (2, 3)], [(1, 7), (3, 2)], [(2, 1, 6), (1, 1, 1)]], inputs=("x", "y"),
       nograd=("y",)),
    Op("broadcast_like", lambda x, y: sym.broadcast_like(x, y), lambda x, y: x.expand(y.shape),
       [[(1, 5), (3, 5)], [(2, 1, 3), (2, 7, 3)], [(1, 1), (1, 1)]], inputs=("x", "y")),
    Op("broadcast_like_axes",
       lambda x, y: sym.broadcast_like(x, y, lhs_axes=(0, -1), rhs_axes=(2, 0)),
       lambda x, y: x.expand(y.shape[2], x.shape[1], y.shape[0]),
       [[(1, 5, 1), (3, 2, 7)], [(1, 1, 1), (1, 4, 6)], [(1, 3, 1), (2, 1, 1)]],
       inputs=("x", "y"), nograd=("y",)),
    # -- block moves
    Op("depth_to_space", lambda x: sym.depth_to_space(x, block_size=2),
       lambda x: x.reshape(x.shape[0], 2, 2, x.shape[1] // 4, *x.shape[2:])
       .permute(0, 3, 4, 1, 5, 2).reshape(x.shape[0], x.shape[1] // 4, x.shape[2] * 2,
                                          x.shape[3] * 2), D2S),
    Op("space_to_depth", lambda x: sym.space_to_depth(x, block_size=2),
       lambda x: x.reshape(x.shape[0], x.shape[1], x.shape[2] // 2, 2, x.shape[3] // 2, 2)
       .permute(0, 3, 5, 1, 2, 4).reshape(x.shape[0], x.shape[1] * 4, x.shape[2] // 2,
                                          x.shape[3] // 2), S2D),
    Op("depth_to_space_b3", lambda x: sym.depth_to_space(x, block_size=3) * 2,
       lambda x: x.reshape(x.shape[0], 3, 3, x.shape[1] // 9, *x.shape[2:])
       .permute(0, 3, 4, 1, 5, 2).reshape(x.shape[0], x.shape[1] // 9, x.shape[2] * 3,
                                          x.shape[3] * 3) * 2,
       [[(1, 9, 2, 3)], [(2, 18, 1, 1)], [(1, 9, 1, 5)]]),
    # -- split_v2
    Op("split_v2_indices", lambda x: sym.split_v2(x, (1, 3), axis=-1),
       lambda x: _split(x, [(0, 1), (1, 3), (3, x.shape[-1])], -1),
       [[(3, 5)], [(1, 7)], [(2, 1, 4)]]),
    Op("split_v2_sections", lambda x: sym.split_v2(x, 3),
       lambda x: _split(x, _sections(x.shape[0], 3), 0), [[(3, 5)], [(5, 1)], [(7, 2, 3)]]),
    Op("split_v2_squeeze",
       lambda x: sym._split_v2(x, indices=(0, 1, 2), axis=1, squeeze_axis=True),
       lambda x: _split(x, [(0, 1), (1, 2), (2, 3)], 1, squeeze=True),
       [[(2, 3)], [(1, 3, 5)], [(5, 3, 1)]]),
]


def _params():
    return [pytest.param(op, shapes, id=f"{op.name}-{i}")
            for op in ROWS for i, shapes in enumerate(op.shapes)]


def test_rows_have_three_shapes_with_a_size_one_and_an_odd_dim():
    assert len({op.name for op in ROWS}) == len(ROWS)
    for op in ROWS:
        dims = [d for shapes in op.shapes for s in shapes for d in s]
        assert len(op.shapes) >= 3 and 1 in dims and any(d & (d - 1) for d in dims), op.name


@pytest.mark.parametrize("op,shapes", _params())
def test_op(op, shapes, cpu_target):
    exe = check(op, shapes)
    if cpu_target == "interpret":
        assert_same_launches_on_cpu_targets(exe)


_x, _y = sym.Variable("x"), sym.Variable("y")


@pytest.mark.parametrize("s,shapes,words", [
    (sym.slice(_x, begin=(0,), end=(1,), step=(0,)), {"x": (3, 5)}, "step[0] cannot be 0"),
    (sym.slice(_x, begin=(0, 0, 0), end=(1, 1, 1)), {"x": (3, 5)}, "name more axes"),
    (sym.slice(_x, begin=(0, 1), end=(1,)), {"x": (3, 5)}, "same length"),
    (sym.slice(_x, begin=(2,), end=(1,)), {"x": (3, 5)}, "select no element"),
    (sym.squeeze(_x, axis=0), {"x": (2, 1, 3)}, "size is 2, not 1"),
    (sym.squeeze(_x, axis=(1, 1)), {"x": (2, 1, 3)}, "duplicate"),
    (sym.squeeze(_x, axis=5), {"x": (2, 1, 3)}, "out of bounds"),
    (sym.stack(_x, _y, axis=3), {"x": (2, 3), "y": (2, 3)}, "axis=3"),
    (sym.stack(_x, _y), {"x": (2, 3), "y": (2, 4)}, "same shape"),
    (sym.tile(_x, reps=(0, 2)), {"x": (2, 3)}, "positive"),
    (sym.repeat(_x, repeats=2, axis=2), {"x": (2, 3)}, "out of bounds"),
    (sym.reshape_like(_x, _y), {"x": (2, 3), "y": (3, 3)}, "different size"),
    (sym.reshape_like(_x, _y, lhs_begin=2, lhs_end=1), {"x": (2, 3, 4), "y": (5, 4, 3)},
     "lhs_begin=2"),
    (sym.slice_like(_x, _y), {"x": (4, 5), "y": (2, 6)}, "exceeds the size 5"),
    (sym.slice_like(_x, _y), {"x": (4, 5, 6), "y": (2, 3)}, "ranks differ"),
    (sym.broadcast_like(_x, _y), {"x": (3, 5), "y": (2, 5)}, "cannot be broadcast"),
    (sym.broadcast_like(_x, _y, lhs_axes=(1,), rhs_axes=(2,)), {"x": (1, 5), "y": (2, 5, 7)},
     "not 1"),
    (sym.depth_to_space(_x, block_size=2), {"x": (2, 6, 2, 2)}, "multiple of block_size^2"),
    (sym.depth_to_space(_x, block_size=2), {"x": (2, 8, 2)}, "4-D"),
    (sym.space_to_depth(_x, block_size=2), {"x": (2, 6, 3, 2)}, "multiple of block_size=2"),
    (sym.split_v2(_x, (3, 1), axis=-1), {"x": (2, 5)}, "start 3 is not less than end 1"),
    (sym.split_v2(_x, (1, 7), axis=-1), {"x": (2, 5)}, "end 7 exceeds"),
    (sym.split_v2(_x, (1, 3), axis=-1, squeeze_axis=True), {"x": (2, 5)}, "axis size of 1"),
])
def test_shape_errors_name_the_operator_and_the_shapes(s, shapes, words):
    with pytest.raises(MXNetError) as info:
        s.infer_shape(**shapes)
    assert words in str(info.value)


def test_attributes_keep_mxnets_defaults_and_json():
    s = sym.slice(_x, begin=(None, 1), end=(None, -1), step=(-1, 2))
    node = [n for n in __import__("json").loads(s.tojson())["nodes"] if n["op"] == "slice"][0]
    assert node["attrs"] == {"begin": "(None, 1)", "end": "(None, -1)", "step": "(-1, 2)"}
    assert sym.split_v2(_x, 3).infer_shape(x=(7, 2))[1] == [(3, 2), (2, 2), (2, 2)]
    assert sym.squeeze(_x).infer_shape(x=(1, 1))[1] == [(1,)]
    assert sym.slice(_x, begin=(-10,), end=(10,)).infer_shape(x=(3, 5))[1] == [(3, 5)]
    with pytest.raises(ValueError):
        sym.split_v2(_x, [1, 2])
