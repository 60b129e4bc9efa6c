"""``passes/reduce_precision.py`` against mxnet 1.9.1's ReducePrecision pass.

Every case of ``tests/fixtures/amp_convert.json`` (written by
``make_amp_fixtures.py`` with mxnet) is an input symbol, ``convert_symbol``'s
arguments and the graph mxnet returned: the same nodes (operator, name, inputs,
attributes such as the cast's ``dtype`` and a parameter's ``__dtype__``) in the
same order, and the same heads. The cases cover float16 and bfloat16 targets, the
fp32 / lp16 / widest-type / conditional lists and their overrides, excluded
names, ``cast_optional_params`` with data names, shared casts, fp32 outputs,
multi-output operators, the unrolled LSTM language model and the fused RNN op.
"""
from __future__ import annotations

import json
import os

import pytest

from compiler.passes import amp_lists
from compiler.errors import MXNetError
from compiler.passes.reduce_precision import reduce_precision
from compiler.symbol import load_json

FIXTURE = os.path.join(os.path.dirname(__file__), "..", "fixtures", "amp_convert.json")
with open(FIXTURE) as _f:
    DATA = json.load(_f)


def _nodes(sym, remove_amp_cast=False):
    doc = json.loads(sym.tojson(remove_amp_cast=remove_amp_cast))
    nodes = [{"op": n["op"], "name": n["name"], "inputs": [e[:2] for e in n["inputs"]],
              "attrs": n.get("attrs", {})} for n in doc["nodes"]]
    return nodes, [h[:2] for h in doc["heads"]]


def _kwargs(kwargs):
    out = dict(kwargs)
    if "conditional_fp32_ops" in out:
        out["conditional_fp32_ops"] = [tuple(c) for c in out["conditional_fp32_ops"]]
    return out


@pytest.mark.parametrize("case", DATA["cases"], ids=[c["name"] for c in DATA["cases"]])
def test_converted_graph_matches_mxnet(case):
    sym = load_json(case["symbol"])
    before = sym.tojson()
    nodes, heads = _nodes(reduce_precision(sym, **_kwargs(case["kwargs"])))
    assert [(n["op"], n["name"]) for n in nodes] == \
        [(n["op"], n["name"]) for n in case["nodes"]]
    for got, want in zip(nodes, case["nodes"]):
        assert got == want, got["name"]
    assert heads == case["heads"]
    assert sym.tojson() == before          # the input symbol is left as it was


@pytest.mark.parametrize("case", DATA["cases"], ids=[c["name"] for c in DATA["cases"]])
def test_saved_json_drops_the_casts_as_mxnet_does(case):
    """``tojson()`` / ``save()`` default to ``remove_amp_cast=True``: inputs read past
    the casts, the heads stay; a converted model saves as mxnet saves it."""
    conv = reduce_precision(load_json(case["symbol"]), **_kwargs(case["kwargs"]))
    nodes, heads = _nodes(conv, remove_amp_cast=True)
    want_nodes, want_heads = case["saved"]
    assert nodes == want_nodes
    assert heads == want_heads


@pytest.mark.parametrize("probe", DATA["suffix"], ids=[p["op"] for p in DATA["suffix"]])
def test_cast_names_an_output_as_mxnet_does(probe):
    sym = load_json(probe["symbol"])
    nodes, _ = _nodes(reduce_precision(sym, **probe["kwargs"]))
    assert [n["name"] for n in nodes if n["op"] == "amp_cast"] == probe["casts"]


@pytest.mark.parametrize("case", DATA["errors"], ids=[c["name"] for c in DATA["errors"]])
def test_refuses_what_mxnet_refuses(case):
    assert case["refused"]
    sym = load_json(DATA["cases"][0]["symbol"])
    with pytest.raises(MXNetError):
        reduce_precision(sym, **case["kwargs"])


def test_error_names_the_operator_on_two_lists():
    sym = load_json(DATA["cases"][0]["symbol"])
    with pytest.raises(MXNetError, match="FullyConnected.*target_dtype_ops and fp32_ops"):
        reduce_precision(sym, target_dtype_ops=["FullyConnected"], fp32_ops=["FullyConnected"])


@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
def test_lists_are_mxnets(dtype):
    want = DATA["lists"][dtype]
    got = amp_lists.op_lists(dtype)
    for key in ("lp16", "fp32", "lp16_fp32", "widest_type_cast", "loss_output"):
        assert list(got[key]) == want[key], key
    assert [[a, b, list(c)] for a, b, c in got["conditional_fp32"]] == want["conditional_fp32"]
    conv = got["use_fp32_params"]
    assert (None if conv is None else {k: list(v) for k, v in conv.items()}) == \
        want["use_fp32_params"]


def test_converted_graph_has_its_own_cache_key():
    """The cache key reads the graph with its casts (``tojson(remove_amp_cast=False)``):
    a converted symbol never hits the float32 original's Program."""
    from compiler.artifacts.compile import canonical_graph_json, compile_symbol
    case = DATA["cases"][0]
    sym = load_json(case["symbol"])
    conv = reduce_precision(sym, **_kwargs(case["kwargs"]))
    assert canonical_graph_json(conv) != canonical_graph_json(sym)
    assert "amp_cast" in canonical_graph_json(conv)
    shapes = {"data": (2, 5)}
    p32 = compile_symbol(sym, shapes)
    p16 = compile_symbol(conv, shapes)
    assert p32 is not p16
    assert "float16" in p16.buffer_dtypes and "float16" not in p32.buffer_dtypes
