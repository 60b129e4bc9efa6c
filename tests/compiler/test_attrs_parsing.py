"""OpDef.parse_attrs remembers what string attributes parse to: the same answer as
parsing again, never an object shared between two nodes' attributes, and every error
still raised (compiler/ops/registry.py)."""
import dataclasses

import pytest

from compiler.errors import MXNetError
from compiler.ops import get_op
from compiler.ops.registry import Attr, OpDef, parse_int, parse_shape


def _op(**kw):
    specs = kw.pop("attrs", (Attr("axis", parse_shape, ()), Attr("k", parse_int, 1)))
    return OpDef(name="_memo_probe", pattern="elemwise", lowering=None,
                 infer_shape=None, reference=None, attrs=specs, **kw)


def test_a_second_parse_gives_an_equal_dict_of_its_own():
    op = _op()
    first = op.parse_attrs({"axis": "(0, 2)", "k": "3"})
    again = op.parse_attrs({"axis": "(0, 2)", "k": "3"})
    assert first == again == {"axis": (0, 2), "k": 3}
    assert first is not again
    again["k"] = 7                      # a pass changing one node's attrs
    assert op.parse_attrs({"axis": "(0, 2)", "k": "3"})["k"] == 3
    assert len(op._parsed) == 1


def test_errors_are_raised_every_time_and_not_remembered():
    op = _op()
    op.parse_attrs({"k": "2"})
    for _ in range(2):
        with pytest.raises(MXNetError, match="attribute 'k'='x' is invalid"):
            op.parse_attrs({"k": "x"})
        with pytest.raises(MXNetError, match="unknown attribute 'q'"):
            op.parse_attrs({"q": "1"})
    assert list(op._parsed) == [(("k", "2"),)]


def test_only_strings_and_only_immutable_results_are_remembered():
    # raw 1 and 1.0 (or True) are equal keys that an int parser treats differently
    op = _op()
    assert op.parse_attrs({"k": 1}) == {"axis": (), "k": 1}
    assert not op._parsed
    with pytest.raises(MXNetError, match="is invalid"):
        op.parse_attrs({"k": 1.5})
    # a parser returning a list: each call gets its own
    listing = _op(attrs=(Attr("names", lambda v: v.split(",")),))
    a = listing.parse_attrs({"names": "x,y"})
    b = listing.parse_attrs({"names": "x,y"})
    assert a == b == {"names": ["x", "y"]} and a["names"] is not b["names"]
    assert not listing._parsed


def test_a_replaced_opdef_keeps_a_memo_of_its_own():
    op = _op()
    op.parse_attrs({"k": "2"})
    other = dataclasses.replace(op, attrs=(Attr("k", lambda v: int(v) * 10, 1),))
    assert other.parse_attrs({"k": "2"}) == {"k": 20}
    assert op.parse_attrs({"k": "2"}) == {"axis": (), "k": 2}


def test_registered_operators_parse_the_same_from_the_memo():
    bn = get_op("BatchNorm")
    raw = {"eps": "0.001", "fix_gamma": "False", "momentum": "0.9"}
    fresh = bn._parse_attrs(raw, "bn")
    assert bn.parse_attrs(raw, "bn") == fresh == bn.parse_attrs(raw, "bn2")


def test_an_operator_without_attributes_keeps_and_ignores_any_as_mxnet():
    """mxnet's operators without a parameter struct (broadcast_add, relu ...) take any
    attribute and read none (its SVRG module passes broadcast_add(a, b, axis=0)); one with
    attributes still refuses an unknown name."""
    import module_api as mx
    assert _op(attrs=()).parse_attrs({"axis": "0", "q": "x"}) == {}
    a = mx.nd.array([[1.0, 2.0]])
    assert mx.nd.broadcast_add(a, a, axis=0).asnumpy().tolist() == [[2.0, 4.0]]
    s = mx.sym.relu(mx.sym.var("x"), foo="1", name="r")
    assert s.attr_dict()["r"] == {"foo": "1"}
    assert mx.sym.load_json(s.tojson()).attr_dict()["r"] == {"foo": "1"}
    with pytest.raises(MXNetError, match="unknown attribute 'foo'"):
        mx.nd.sum(a, foo=1)
