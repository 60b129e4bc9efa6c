"""mxnet's NumPy shape semantics (``mx.np_shape()``): () a scalar's shape, 0 a zero
size, -1 an unknown dim, None an unknown shape. The oracles are mxnet 1.9.1's
documented answers (its test_infer_shape.py / test_operator.py expectations) and
numpy on the same arrays."""
import json

import numpy as np
import pytest

import module_api as mx
from compiler.errors import MXNetError

nd = mx.nd


# -- partial shape inference: the two spellings of "unknown" ---------------------------

def test_partial_inference_spells_unknowns_per_semantics():
    x, y = mx.sym.var("x"), mx.sym.var("y")
    assert mx.sym.sin(x).infer_shape_partial()[:2] == ([()], [()])
    assert mx.sym.dot(x, y).infer_shape_partial(x=(0, 3, 4), y=(4, 5))[1] == [(0, 3, 5)]
    with mx.np_shape():
        assert mx.sym.sin(x).infer_shape_partial()[:2] == ([None], [None])
        assert mx.sym.dot(x, y).infer_shape_partial(x=(-1, 3, 4), y=(4, 5))[1] == \
            [(-1, 3, 5)]
        bd = mx.sym.batch_dot(x, y)
        assert bd.infer_shape_partial(x=(-1, 3, 4), y=(-1, 4, 5))[1] == [(-1, 3, 5)]
        assert bd.infer_shape_partial(x=(-1, 3, 4), y=(-1, -1, 5))[1] == [None]
        w = mx.sym.where(mx.sym.var("c"), x, y)
        assert w.infer_shape_partial(c=(-1,), x=(2, 2), y=(2, 2))[1] == [None]
        hinted = mx.sym.var("data", shape=(10, -1))
        assert mx.sym.slice_axis(hinted, axis=0, begin=0, end=5).infer_shape_partial()[1] \
            == [(5, -1)]
        # complete inference: a 0 is a size, and the answer is remembered apart
        assert (x + 1).infer_shape(x=(0, 3))[1] == [(0, 3)]
    assert mx.sym.dot(x, y).infer_shape_partial(x=(0, 3, 4), y=(4, 5))[1] == [(0, 3, 5)]


def test_unknown_and_zero_size_dims_in_one_question_are_refused_by_name():
    x, y = mx.sym.var("x"), mx.sym.var("y")
    with mx.np_shape(), pytest.raises(MXNetError, match=r"x \(-1, 3\).*y \(0, 3\)"):
        (x + y).infer_shape_partial(x=(-1, 3), y=(0, 3))


# -- creation ----------------------------------------------------------------------------

def test_zeros_and_ones_refuse_unknown_shapes_under_legacy_semantics():
    for make in (nd.zeros, nd.ones):
        for shape in ((), (0, 1, 3, 0)):
            with pytest.raises(MXNetError, match="unknown dim"):
                make(shape)
    # as mxnet: empty and full take them
    assert nd.empty((0, 3)).shape == (0, 3) and nd.full((0, 3), 2).shape == (0, 3)
    with mx.np_shape():
        assert nd.ones(()).asnumpy() == np.ones(())
        assert nd.ones((0, 1, 0, 4)).shape == (0, 1, 0, 4)


def test_an_element_is_a_0d_array_under_numpy_shapes_and_a_1_array_else():
    a = nd.array([[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]])
    assert a[1, 2].shape == (1,) and a[1, 2].asscalar() == 6.0
    with mx.np_shape():
        assert a[1, 2].shape == () and a[1, 2].asscalar() == 6.0
        assert a[1].shape == (3,)


# -- operators on zero-size and scalar arrays, imperative and bound ---------------------

def _zero_size_cases():
    a = np.arange(6, dtype=np.float32).reshape(2, 3)
    return [
        ("concat", lambda: nd.Concat(nd.ones((0, 3, 10)), nd.ones((0, 4, 10)), dim=1),
         np.ones((0, 7, 10))),
        ("concat with rows", lambda: nd.Concat(nd.ones((0, 3)), nd.array(a), dim=0), a),
        ("tile", lambda: nd.tile(nd.array(np.ones((2, 3, 0, 4))), (2, 4, 6)),
         np.tile(np.ones((2, 3, 0, 4)), (2, 4, 6))),
        ("one_hot", lambda: nd.one_hot(nd.zeros((2, 0, 3)), depth=10), np.ones((2, 0, 3, 10))),
        ("index_array of ()", lambda: nd.contrib.index_array(nd.ones(())),
         np.zeros((0,))),
        ("index_array", lambda: nd.contrib.index_array(nd.ones((0, 2, 0))),
         np.zeros((0, 2, 0, 3))),
        ("sum over an empty axis", lambda: nd.sum(nd.ones((0, 3)), axis=0), np.zeros(3)),
        ("mean over an empty axis", lambda: nd.mean(nd.ones((0, 3)), axis=0),
         np.full(3, np.nan)),
        ("FullyConnected, no inputs", lambda: nd.FullyConnected(
            nd.ones((2, 0)), nd.ones((3, 0)), nd.array([1, 2, 3]), num_hidden=3),
         np.tile(np.array([1.0, 2, 3]), (2, 1))),
        ("softmax", lambda: nd.softmax(nd.ones((0, 3)), axis=0), np.ones((0, 3))),
        ("where", lambda: nd.where(nd.ones((0, 3)), nd.ones((0, 3)), nd.zeros((0, 3))),
         np.ones((0, 3))),
        ("scalar", lambda: nd.exp(nd.ones(())) + nd.ones(()), np.float32(np.e + 1)),
        ("batch_dot, no batch", lambda: nd.batch_dot(nd.ones((0, 2, 3)), nd.ones((0, 3, 4))),
         np.ones((0, 2, 4))),
        ("Convolution, no batch", lambda: nd.Convolution(
            nd.ones((0, 1, 4, 4)), nd.ones((2, 1, 3, 3)), nd.ones((2,)), kernel=(3, 3),
            num_filter=2), np.ones((0, 2, 2, 2))),
        ("Pooling, no batch", lambda: nd.Pooling(nd.ones((0, 1, 4, 4)), kernel=(2, 2),
                                                 pool_type="max"), np.ones((0, 1, 3, 3))),
    ]


@pytest.mark.parametrize("case", range(len(_zero_size_cases())),
                         ids=[c[0] for c in _zero_size_cases()])
def test_zero_size_and_scalar_operators_match_numpy(case, cpu_target):
    name, run, want = _zero_size_cases()[case]
    with mx.np_shape():
        got = run()
        assert got.shape == np.shape(want), name
        np.testing.assert_allclose(got.asnumpy(), want, rtol=1e-6)


@pytest.mark.parametrize("call, message", [
    (lambda: nd.ones((5, 0)).min(), "Reduction input's size"),
    (lambda: nd.ones((5, 0)).max(axis=1), "Reduction input's size"),
    (lambda: nd.take(nd.ones((0, 3)), nd.zeros((2,))), "no element along axis"),
    (lambda: nd.pick(nd.ones((2, 0)), nd.zeros((2,)), axis=1), "no element along axis"),
    (lambda: nd.batch_take(nd.ones((2, 0)), nd.zeros((2,))), "no element to take"),
    (lambda: nd.Embedding(nd.zeros((2,)), nd.ones((0, 3)), input_dim=0, output_dim=3),
     "no row to look up"),
    (lambda: nd.SequenceLast(nd.ones((0, 2, 3))), "no step along axis"),
    # a zero inner dim is a size, so it must match (legacy reads it as unknown)
    (lambda: nd.batch_dot(nd.ones((2, 3, 0)), nd.ones((2, 5, 4))), r"shape mismatch \(0 vs. 5\)"),
])
def test_reading_from_nothing_is_refused_by_name(call, message, cpu_target):
    with mx.np_shape(), pytest.raises(MXNetError, match=message):
        call()


def test_boolean_mask_to_nothing_and_its_gradient():
    with mx.np_shape():
        data = nd.array([[1, 2, 3], [4, 5, 6], [7, 8, 9]])
        data.attach_grad()
        with mx.autograd.record():
            out = nd.contrib.boolean_mask(data, nd.zeros((3,)))
        out.backward()
        assert out.shape == (0, 3)
        assert data.grad.asnumpy().tolist() == [[0.0] * 3] * 3


def test_a_kernel_that_writes_no_element_is_not_launched(cpu_target):
    """A group whose outputs are all zero-size is dropped from the Program: no kernel
    meets a zero-size domain (Triton's pooling and convolution index math divide by it)."""
    x, w = mx.sym.var("x"), mx.sym.var("w")
    conv = mx.sym.Convolution(x, w, kernel=(3, 3), num_filter=2, no_bias=True)
    net = mx.sym.Group([mx.sym.relu(conv), mx.sym.sum(x, axis=0)])
    with mx.np_shape():
        exe = net.simple_bind(mx.cpu(), x=(0, 1, 4, 4), w=(2, 1, 3, 3), grad_req="null")
        outs = exe.forward()
    assert outs[0].shape == (0, 2, 2, 2)
    np.testing.assert_array_equal(outs[1].asnumpy(), np.zeros((1, 4, 4)))
    kernels = [ln.summary for ln in exe.programs[1].launches]
    assert kernels == ["reduce over domain (0, 1, 4, 4)"], kernels   # only the sum runs


def test_bound_zero_size_graph_fused_as_a_head_and_backward(cpu_target):
    """In context: a zero-size reduction fused with the pointwise ops around it, a view
    (transpose) before it, both outputs heads; and the gradients."""
    x, w = mx.sym.var("x"), mx.sym.var("w")
    y = mx.sym.sum(mx.sym.transpose(x) * 2 + 1, axis=1)     # (3,): sums over 0 rows
    z = mx.sym.FullyConnected(x, w, num_hidden=2, no_bias=True)   # (0, 2)
    net = mx.sym.Group([mx.sym.broadcast_mul(y, w.sum()), z])
    with mx.np_shape():
        exe = net.simple_bind(mx.cpu(), x=(0, 3), w=(2, 3))
        exe.arg_dict["w"][:] = nd.array(np.arange(6).reshape(2, 3))
        outs = exe.forward(is_train=True)
        assert outs[0].asnumpy().tolist() == [0.0, 0.0, 0.0] and outs[1].shape == (0, 2)
        exe.backward([nd.ones((3,)), nd.ones((0, 2))])
        assert exe.grad_dict["x"].shape == (0, 3)
        assert exe.grad_dict["w"].asnumpy().tolist() == [[0.0] * 3] * 2


def test_program_keys_name_the_semantics_only_when_numpy():
    from compiler.artifacts.compile import program_parts
    net = mx.sym.var("x") * 2
    assert "np_shape" not in program_parts(net, {"x": (2, 3)}, False, {}, False, "cpu")
    with mx.np_shape():
        assert program_parts(net, {"x": (2, 3)}, False, {}, False, "cpu")["np_shape"] is True


# -- files: symbol JSON and NDArray lists ---------------------------------------------

def test_symbol_json_marks_numpy_shapes_and_reads_legacy_hints_as_unknown():
    net = mx.sym.FullyConnected(mx.sym.var("data"), mx.sym.var("weight", shape=(128, 0)),
                                num_hidden=128)
    legacy = net.tojson()
    assert "is_np_shape" not in json.loads(legacy)["attrs"]
    with mx.np_shape():
        assert json.loads(net.tojson())["attrs"]["is_np_shape"] == ["int", 1]
        loaded = mx.sym.load_json(legacy)       # its (128, 0) reads as (128, -1)
        args, outs, _ = loaded.infer_shape(data=(10, 784))
        assert args[1] == (128, 784) and outs == [(10, 128)]
    args, _, _ = mx.sym.load_json(legacy).infer_shape(data=(10, 784))
    assert args[1] == (128, 784)


def test_ndarray_files_are_read_in_the_semantics_they_were_written_in(tmp_path):
    legacy, numpy_file = str(tmp_path / "legacy"), str(tmp_path / "numpy")
    nd.save(legacy, [nd.empty((2, 0, 1)), nd.array([[1.0, 2.0]])])
    assert [a.shape for a in nd.load(legacy)] == [(2, 0, 1), (1, 2)]
    with mx.np_shape():
        nd.save(numpy_file, [nd.ones(()) * 7, nd.ones((0, 4))])
        back = nd.load(numpy_file)
        assert back[0].shape == () and back[0].asscalar() == 7 and back[1].shape == (0, 4)
        with pytest.raises(MXNetError, match="not saved in np shape semantics"):
            nd.load(legacy)
    with pytest.raises(MXNetError, match="saved in np shape semantics"):
        nd.load(numpy_file)
    with mx.np_shape():
        scalar = nd.ones(())
    with pytest.raises(MXNetError, match="shape \\(\\) .*np_shape"):
        nd.save(legacy, [nd.ones((2,)), scalar])
    assert [a.shape for a in nd.load(legacy)] == [(2, 0, 1), (1, 2)]   # left as it was
