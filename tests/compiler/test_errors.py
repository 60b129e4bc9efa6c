"""Bad input fails before any kernel runs, naming the operator, argument and shapes."""
import os

import pytest

from compiler.artifacts import cache
from compiler import symbol as sym
from compiler.artifacts.compile import compile_symbol
from compiler.errors import MXNetError
from runtime.context import cpu
from runtime.launcher import LaunchCounter


def _raises(fn, *words):
    LaunchCounter.reset()
    with pytest.raises(MXNetError) as err:
        fn()
    assert LaunchCounter.total == 0, "a kernel ran before the error"
    for w in words:
        assert w in str(err.value), (w, str(err.value))
    return str(err.value)


def test_shapes_that_do_not_agree_name_op_inputs_and_shapes():
    a, b = sym.Variable("a"), sym.Variable("b")
    s = sym.elemwise_add(a, b, name="plus")
    _raises(lambda: s.simple_bind(cpu(), a=(2, 3), b=(3, 2)),
            "elemwise_add 'plus'", "a", "(2, 3)", "(3, 2)")


def test_fully_connected_weight_mismatch():
    x = sym.Variable("data")
    w = sym.Variable("w")
    s = sym.FullyConnected(x, weight=w, num_hidden=4, name="fc", no_bias=True)
    _raises(lambda: s.simple_bind(cpu(), data=(2, 5), w=(4, 6)),
            "FullyConnected 'fc'", "(4, 6)", "(4, 5)")


def test_missing_input_shape_names_the_variables():
    x = sym.Variable("data")
    y = sym.Variable("other")
    s = sym.elemwise_add(sym.FullyConnected(x, num_hidden=3, name="fc"), y)
    _raises(lambda: s.simple_bind(cpu()), "data")


def test_duplicate_argument_names():
    s = sym.Variable("x") + sym.Variable("x")
    _raises(lambda: s.simple_bind(cpu(), x=(2,)), "duplicate", "x")


def test_unknown_attribute_and_bad_value():
    x = sym.Variable("x")
    _raises(lambda: sym.Activation(x, act_type="swish", name="act"),
            "Activation", "act", "act_type", "swish")
    _raises(lambda: sym.FullyConnected(x, num_hidden="12; import os", name="fc"),
            "FullyConnected", "num_hidden")


def test_wrong_number_of_inputs():
    x = sym.Variable("x")
    _raises(lambda: sym.elemwise_add(x, x, x), "elemwise_add", "takes 2 inputs")


HOSTILE = ['x"); import os; os.system("echo pwned") #', "a\nb = 1\n", "\\'\"\u00e9\u4e2d",
           "__import__('os')"]


@pytest.mark.parametrize("evil", HOSTILE)
def test_hostile_names_never_reach_kernel_source(evil, tmp_path, monkeypatch):
    monkeypatch.setenv("SYMTRITON_CACHE_DIR", str(tmp_path))
    cache.clear_memory_cache()
    x = sym.Variable(evil)
    y = sym.FullyConnected(x, num_hidden=3, name=evil + "fc")
    y = sym.Activation(y, act_type="relu", name=evil + "act", attr={"__evil__": evil})
    y = sym.SoftmaxOutput(y, name=evil + "sm")
    shapes = {evil: (2, 5), evil + "sm_label": (2,)}
    prog = compile_symbol(y, shapes, True, {n: "write" for n in y.list_arguments()}, True)
    sources = [open(os.path.join(tmp_path, "kernels", f)).read()
               for f in os.listdir(os.path.join(tmp_path, "kernels"))]
    assert sources and prog.launches
    for src in sources:
        for fragment in ("pwned", "import os", "__import__", "\u4e2d", "a\nb = 1", "evil"):
            assert fragment not in src
    cache.clear_memory_cache()


def test_hostile_attribute_values_are_rejected_not_rendered():
    x = sym.Variable("x")
    _raises(lambda: sym.clip(x, a_min="0); import os #", a_max=1.0), "clip", "a_min")
    _raises(lambda: sym.LeakyReLU(x, slope="__import__('os')"), "LeakyReLU", "slope")
