"""mxnet 1.9.1's ``test_autograd.py`` behaviours, as cases run here and under mxnet
(``tests/fixtures/autograd_cases.py``; mxnet's numbers in ``autograd_cases.npz``)."""
import os

import numpy as np
import pytest

import module_api as mx
from compiler.errors import MXNetError
from tests.fixtures import autograd_cases

FIXTURE = os.path.join(os.path.dirname(__file__), "..", "fixtures", "autograd_cases.npz")
EXPECTED = np.load(FIXTURE)


@pytest.mark.parametrize("case", autograd_cases.CASES, ids=lambda c: c.__name__)
def test_case_matches_mxnet(case, cpu_target):
    got = case(mx)
    names = sorted(k.split(".", 1)[1] for k in EXPECTED.files
                   if k.split(".", 1)[0] == case.__name__)
    assert sorted(got) == names
    for name in names:
        np.testing.assert_allclose(got[name], EXPECTED[f"{case.__name__}.{name}"],
                                   rtol=1e-5, atol=1e-6, err_msg=name)


def test_a_freed_graph_refuses_a_second_backward():
    x = mx.nd.ones((2, 2))
    x.attach_grad()
    with mx.autograd.record():
        y = x + 1
    y.backward()
    with pytest.raises(MXNetError, match="retain_graph"):
        y.backward()


def test_grad_attribute_before_and_after_attach_grad():
    x = mx.nd.zeros((3, 3))
    assert x.grad is None
    x.attach_grad()
    with mx.autograd.record():
        y = x * 2
        assert y.grad is None
    y.backward(out_grad=mx.nd.ones_like(y))
    assert (x.grad.asnumpy() == 2).all()


def test_a_head_outside_the_tape_is_refused():
    with pytest.raises(MXNetError, match="record"):
        mx.nd.ones((2,)).backward()


def test_get_symbol_counts_the_arrays_read():
    x, z = mx.nd.ones((1,)), mx.nd.ones((1,))
    x.attach_grad()
    z.attach_grad()
    with mx.autograd.record():
        y = x * x + 2 * x - 1
    assert len(mx.autograd.get_symbol(y).list_arguments()) == 1
    with mx.autograd.record():
        y = x * x + 2 * z - 1
    assert len(mx.autograd.get_symbol(y).list_arguments()) == 2


def test_function_chain_without_variables():
    class AddOne(mx.autograd.Function):
        def forward(self, x):
            return x + 1

        def backward(self, dy):
            return dy

    with mx.autograd.record():
        x = mx.nd.zeros((3, 4))
        for _ in range(5):
            x = AddOne()(x)
    assert (x.asnumpy() == 5).all()


def test_inplace_is_refused():
    x = mx.nd.ones((2,))
    x.attach_grad()
    with mx.autograd.record():
        y = x * 2
        with pytest.raises(MXNetError, match="in-place"):
            y += 1


def test_grad_req_null_and_write():
    x, y = mx.nd.ones((2,)), mx.nd.ones((2,))
    x.attach_grad(grad_req="null")
    y.attach_grad()
    with mx.autograd.record():
        z = x * y * 3
    z.backward()
    assert (x.grad.asnumpy() == 0).all() and (y.grad.asnumpy() == 3).all()
    with mx.autograd.record():
        z = y * 5
    z.backward()
    assert (y.grad.asnumpy() == 5).all()          # written over, not added
