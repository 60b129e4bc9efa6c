"""Symbol attributes as mxnet 1.9.1 gives them (``tests/fixtures/symbol_attr_cases.py``,
its answers recorded by mxnet in ``tests/fixtures/mxnet_symbol_attrs.json``).

``AttrScope`` keys are kept as given; mxnet's hidden keys are stored as ``__key__``
wherever an attribute is set (a Variable, an operator, ``_set_attr``) and listed both
ways; ``attr(key)`` falls back to ``__key__`` for those keys only.
"""
import json

import pytest

import module_api as mx
from tests.fixtures.symbol_attr_cases import OUT, cases

with open(OUT) as f:
    MXNET = json.load(f)
OURS = cases(mx)


@pytest.mark.parametrize("case", sorted(MXNET))
def test_attributes_are_mxnets(case):
    assert OURS[case] == MXNET[case]


def test_a_hidden_key_with_a_prefix_is_refused_with_the_form_to_use():
    with pytest.raises(mx.base.MXNetError, match=r"w = Variable\(lr_mult=2\)"):
        mx.sym.Variable("y")._set_attr(weight_lr_mult="2")
