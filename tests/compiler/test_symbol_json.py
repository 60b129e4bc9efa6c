"""Symbol JSON interop with mxnet 1.9.1: fixtures written by mxnet load here with
the same listings and shapes, and what we write reads back identically."""
import json
import os

import pytest

from compiler import symbol as sym
from compiler.errors import MXNetError
from compiler.symbol_json import json_doc

FIXTURES = os.path.join(os.path.dirname(os.path.dirname(__file__)), "fixtures")


@pytest.mark.parametrize("name", ["mlp", "lstm_cell", "ops"])
def test_mxnet_json_loads_with_same_listings_and_shapes(name):
    s = sym.load(os.path.join(FIXTURES, f"{name}-symbol.json"))
    with open(os.path.join(FIXTURES, f"{name}-expected.json")) as f:
        want = json.load(f)
    assert s.list_arguments() == want["list_arguments"]
    assert s.list_outputs() == want["list_outputs"]
    assert s.list_auxiliary_states() == want["list_auxiliary_states"]
    assert s.list_inputs() == want["list_inputs"]
    assert s.get_internals().list_outputs() == want["internals_list_outputs"]
    shapes = {k: tuple(v) for k, v in want["input_shapes"].items()}
    arg_shapes, out_shapes, aux_shapes = s.infer_shape(**shapes)
    exp = want["infer_shape"]
    assert [list(x) for x in arg_shapes] == [list(x) for x in exp["arg_shapes"]]
    assert [list(x) for x in out_shapes] == [list(x) for x in exp["out_shapes"]]
    assert [list(x) for x in aux_shapes] == [list(x) for x in exp["aux_shapes"]]


@pytest.mark.parametrize("name", ["mlp", "lstm_cell", "ops"])
def test_our_json_round_trips(name):
    s = sym.load(os.path.join(FIXTURES, f"{name}-symbol.json"))
    again = sym.load_json(s.tojson())
    assert again.tojson() == s.tojson()
    assert again.list_arguments() == s.list_arguments()
    doc = json.loads(s.tojson())
    assert doc["attrs"]["mxnet_version"] == ["int", 10901]
    assert len(doc["node_row_ptr"]) == len(doc["nodes"]) + 1
    # every mxnet field keeps its meaning: inputs are [node, output, version]
    for node in doc["nodes"]:
        for entry in node["inputs"]:
            assert len(entry) == 3 and entry[0] < doc["nodes"].index(node)


def test_auto_names_match_mxnet():
    with sym.NameManager() if hasattr(sym, "NameManager") else _fresh_names():
        x = sym.Variable("data")
        y = sym.FullyConnected(x, num_hidden=3)
        z = sym.Activation(y, act_type="relu")
        w = (z + 1) * z - z / 2
    assert y.name == "fullyconnected0"
    assert z.name == "activation0"
    assert y.list_arguments() == ["data", "fullyconnected0_weight", "fullyconnected0_bias"]
    assert [n["op"] for n in json.loads(w.tojson())["nodes"] if n["op"] != "null"][-4:] == \
        ["_plus_scalar", "elemwise_mul", "_div_scalar", "elemwise_sub"]


def _fresh_names():
    from compiler.frontend.name import NameManager
    return NameManager()


def test_variable_hidden_attributes_survive_json():
    v = sym.Variable("w", shape=(3, 4), lr_mult=2.0, wd_mult=0.0, init="zeros")
    s = sym.load_json(v.tojson())
    assert s.attr("__shape__") == "(3, 4)"
    assert s.attr("lr_mult") == "2.0"
    assert s.attr("__wd_mult__") == "0.0"


@pytest.mark.parametrize("doc, words", [
    ({"nodes": [{"op": "NoSuchOp", "name": "x", "inputs": []}], "heads": [[0, 0, 0]]},
     ["unknown operator", "NoSuchOp", "symtriton ops"]),
    ({"nodes": [{"op": "null", "name": "x", "inputs": []},
                {"op": "Activation", "name": "act", "attrs": {"act_type": "relu", "bogus": "1"},
                 "inputs": [[0, 0, 0]]}], "heads": [[1, 0, 0]]},
     ["unknown attribute", "bogus", "act"]),
    ({"nodes": [{"op": "null", "name": "x", "inputs": []},
                {"op": "Activation", "name": "act", "attrs": {"act_type": "relu"},
                 "inputs": [[0, 0, 0], [0, 0, 0]]}], "heads": [[1, 0, 0]]},
     ["takes 1 inputs", "act"]),
    ({"nodes": [{"op": "null", "name": "x", "inputs": [[3, 0, 0]]}], "heads": [[0, 0, 0]]},
     ["not defined"]),
    ({"nodes": [], "heads": [[5, 0, 0]]}, ["refers to node 5"]),
])
def test_bad_json_is_a_clear_error(doc, words):
    with pytest.raises(MXNetError) as err:
        sym.load_json(json.dumps(doc))
    for w in words:
        assert w in str(err.value)


def test_variable_shape_may_be_a_bare_int_as_in_mxnet():
    """mxnet's own tests write ``shape=(1)``, which is the int 1."""
    from compiler import symbol as sym
    v = sym.var("b", shape=(1))
    assert v.infer_shape()[0] == [(1,)]


def test_tuple_attributes_keep_their_floats_and_integers():
    """A tuple attribute is written as mxnet's str(tuple): floats stay floats
    (``range=(0.1, 0.4)`` once became ``(0, 0)``), numpy integers are integers."""
    import numpy as np
    x = sym.Variable("x")
    h = sym._histogram(x, bin_cnt=3, range=(0.1, 0.4), name="h")
    assert h.attr_dict()["h"]["range"] == "(0.1, 0.4)"
    assert sym.reshape(x, shape=(np.int64(2), 3)).list_attr()["shape"] == "(2, 3)"
    assert sym.slice(x, begin=(None, 1), end=(2, None)).list_attr()["begin"] == "(None, 1)"


def test_the_indented_writer_gives_json_dumps_text_exactly():
    """``tojson``'s writer (``frontend/json_indent.py``) against ``json.dumps(indent=2)``."""
    from compiler.frontend.json_indent import dumps_indented
    odd = ["é\"\\\n\x01\u2603", "", 0, -7, 2.5, -0.0, 1e300, float("nan"), float("inf"),
           -float("inf"), True, False, None, (1, 2), [], {}, [[0, 0, 0]], {"": {"x": [{}]}}]
    for doc in ({"nodes": odd, "attrs": {"k": ["int", 10901]}}, [], {}, "x", 3, odd):
        assert dumps_indented(doc) == json.dumps(doc, indent=2)
        assert dumps_indented(doc, 4) == json.dumps(doc, indent=4)
    assert dumps_indented({1: [2]}) == json.dumps({1: [2]}, indent=2)   # left to json
    x = sym.Variable("data")
    for _ in range(3):
        x = sym.Activation(x, act_type="relu", name=None)
    assert x.tojson() == json.dumps(json_doc(x._outputs, x._effects), indent=2)


# ---------------------------------------------------------------- operator names in JSON
def _mxnet_op_names():
    path = os.path.join(os.path.dirname(os.path.dirname(__file__)), "fixtures",
                        "mxnet_json_op_names.json")
    with open(path) as f:
        return json.load(f)      # tests/fixtures/make_json_op_names.py, under mxnet 1.9.1


def test_every_spelling_is_written_as_the_operator_mxnet_writes():
    from compiler.ops.registry import REGISTRY
    mxnet_names = _mxnet_op_names()
    shared = [s for s in REGISTRY if s in mxnet_names]
    assert len(shared) > 500
    wrong = {s: (REGISTRY[s].json_name(s), mxnet_names[s]) for s in shared
             if REGISTRY[s].json_name(s) != mxnet_names[s]}
    assert not wrong, wrong


def test_aliases_in_a_graph_are_written_as_mxnet_writes_them():
    a, b = sym.Variable("a"), sym.Variable("b")
    made = sym.Group([sym._plus(a, b), sym._Mul(a, b), sym._equal(a, b), sym._Equal(a, b),
                      sym.broadcast_equal(a, b), sym._power(a, b), sym._Power(a, b),
                      sym._maximum(a, b), sym.make_loss(a), sym.MakeLoss(b)])
    ops = [n["op"] for n in json.loads(made.tojson())["nodes"] if n["op"] != "null"]
    assert ops == ["elemwise_add", "elemwise_mul", "_equal", "_equal", "broadcast_equal",
                   "_power", "_power", "_maximum", "make_loss", "MakeLoss"]
    # read back, they are the same operators: writing again gives the same document
    again = sym.load_json(made.tojson())
    assert json.loads(again.tojson()) == json.loads(made.tojson())
    assert again.infer_shape(a=(2, 3), b=(2, 3)) == made.infer_shape(a=(2, 3), b=(2, 3))
