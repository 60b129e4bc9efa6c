"""``mx.viz`` against mxnet 1.9.1: ``print_summary``'s table and ``plot_network``'s
dot source for a LeNet, an MLP, a ResNet-20 and a graph with several inputs per
layer, equal to what mxnet printed and drew (``tests/fixtures/viz_cases.json``,
made by ``make_viz_fixtures.py``); rendering with Graphviz's ``dot`` program where
it is installed."""
import contextlib
import io
import json
import os
import shutil

import numpy as np
import pytest

import module_api as mx

FIXTURE = os.path.join(os.path.dirname(os.path.dirname(__file__)), "fixtures",
                       "viz_cases.json")
with open(FIXTURE) as _f:
    CASES = json.load(_f)


def _summary(sym, **kwargs):
    buf = io.StringIO()
    with contextlib.redirect_stdout(buf):
        assert mx.viz.print_summary(sym, **kwargs) is None
    return buf.getvalue()


def _case(name):
    case = CASES[name]
    return case, mx.sym.load_json(case["symbol"]), {k: tuple(v) for k, v in
                                                     case["shape"].items()}


@pytest.mark.parametrize("name", sorted(CASES))
def test_print_summary_equals_mxnets(name):
    case, sym, shape = _case(name)
    assert _summary(sym, shape=shape) == case["summary"]
    assert _summary(sym) == case["summary_no_shape"]
    assert _summary(sym, shape=shape, line_length=80, positions=[30, 50, 60, 80]) == \
        case["summary_narrow"]


def test_lenet_table_reads_as_expected():
    """The numbers of LeNet's table, spelled out."""
    text = CASES["lenet"]["summary"]
    assert "conv1(Convolution)" in text and "Total params: 431180" in text
    _, sym, shape = _case("lenet")
    arg_shapes, _, aux_shapes = sym.infer_shape(**shape)
    owned = sum(int(np.prod(s)) for n, s in zip(sym.list_arguments(), arg_shapes)
                if n not in ("data", "softmax_label"))
    assert owned == 431180            # LeNet's table counts exactly its parameters
    assert len(aux_shapes) == 2       # BatchNorm's moving statistics are not counted


@pytest.mark.parametrize("name", sorted(CASES))
def test_plot_network_source_equals_mxnets(name):
    case, sym, shape = _case(name)
    dot = mx.viz.plot_network(sym, title=name)
    assert type(dot).__name__ == "Digraph" and dot.format == "pdf"
    # graphviz 0.21 ends the source with a newline, the release beside mxnet did not
    assert dot.source.rstrip("\n") == case["dot"].rstrip("\n")
    drawn = mx.viz.plot_network(sym, shape=shape, dtype={k: np.float32 for k in shape},
                                node_attrs={"fixedsize": "false"}, save_format="png")
    assert drawn.format == "png"
    assert drawn.source.rstrip("\n") == case["dot_shapes"].rstrip("\n")
    assert mx.viz.plot_network(sym, hide_weights=False).source.rstrip("\n") == \
        case["dot_weights"].rstrip("\n")


def test_plot_network_nodes_and_edges():
    _, sym, _ = _case("lenet")
    src = mx.viz.plot_network(sym, shape={"data": (1, 1, 28, 28)}).source
    assert 'conv1 [label="Convolution\n5x5/1, 20"' in src
    assert 'pool1 [label="Pooling\nmax, 2x2/2x2"' in src
    assert 'conv1 -> data [label="1x28x28" arrowtail=open dir=back]' in src
    assert "conv1_weight" not in src
    # one edge per operator input that is not a weight or bias (softmax_label included)
    assert src.count(" -> ") == 13


def test_errors():
    with pytest.raises(TypeError):
        mx.viz.print_summary("not a symbol")
    with pytest.raises(TypeError):
        mx.viz.plot_network(None)


@pytest.mark.skipif(shutil.which("dot") is None,
                    reason="Graphviz's dot program is not installed (apt-get install graphviz)")
def test_render_lenet_to_png(tmp_path):
    _, sym, shape = _case("lenet")
    dot = mx.viz.plot_network(sym, shape=shape, save_format="png", title="lenet")
    path = dot.render(directory=str(tmp_path))
    with open(path, "rb") as f:
        assert f.read(8) == b"\x89PNG\r\n\x1a\n"
    assert os.path.getsize(path) > 10000


def test_two_variables_of_one_name_are_drawn_with_a_warning():
    """mxnet's test_viz: a graph reusing the name 'fc' draws, warning once (edge
    labels are looked up by name, as mxnet's: both 'fc' layers read the later one's)."""
    import warnings
    net = mx.sym.FullyConnected(mx.sym.var("data"), name="fc", num_hidden=128)
    net = mx.sym.Activation(net, name="relu1", act_type="relu")
    net = mx.sym.FullyConnected(net, name="fc", num_hidden=10)
    net = mx.sym.SoftmaxOutput(net, name="out")
    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        dot = mx.viz.plot_network(net, shape={"data": (100, 200)},
                                  dtype={"data": np.float32}, hide_weights=False)
    assert len(seen) == 1
    assert "multiple variables with the same name" in str(seen[0].message)
    assert "fc_bias,fc_weight" in str(seen[0].message)
    src = dot.source
    assert 'fc -> data [label="200(float32)"' in src
    assert 'fc -> relu1 [label="128(float32)"' in src
    assert 'out -> fc [label="10(float32)"' in src
    with pytest.raises(mx.MXNetError, match="duplicate argument names"):
        net.simple_bind(mx.cpu(), data=(100, 200))
