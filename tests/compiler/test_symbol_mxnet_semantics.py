"""Symbol behaviour mxnet 1.9.1 defines (values recorded from mxnet 1.9.1)."""
import pytest

import module_api as mx


def test_get_children_of_groups_and_multi_output_nodes():
    a, b = mx.sym.var("a"), mx.sym.var("b")
    assert mx.sym.Group([a + b, a * 2]).get_children().list_outputs() == ["a", "b", "a"]
    assert mx.sym.Group([a + b, b - a]).get_children().list_outputs() == ["a", "b", "b", "a"]
    split = mx.sym.split(a, num_outputs=3)
    assert split.get_children().list_outputs() == ["a"]
    assert split[1].get_children().list_outputs() == ["a"]
    assert a.get_children() is None


@pytest.mark.parametrize("make", [lambda a, b: a + b, lambda a, b: a])
def test_bool_of_a_symbol_raises_as_in_mxnet(make):
    s = make(mx.sym.var("a"), mx.sym.var("b"))
    with pytest.raises(mx.base.NotImplementedForSymbol,
                       match=r'Function __bool__ \(namely operator "bool"\) is not implemented '
                             r'for Symbol and only available in NDArray.'):
        bool(s)
