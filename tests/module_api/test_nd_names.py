"""``mx.nd``'s names held against mxnet 1.9.1's, name by name.

``tests/fixtures/mxnet_ndarray_names.json`` lists the public functions of mxnet
1.9.1's ``mx.nd`` and its ``random``, ``linalg`` and ``contrib`` namespaces
(written by ``tests/fixtures/make_ndarray_names.py`` under mxnet). Every name
except the deprecated ``*_v1`` ones must exist here, or be listed in ``NOT_YET``:
the remaining work, kept exact in both directions (a name that appears must
leave the list). Every registry operator is an ``mx.nd`` function.
"""
import json
import os

import pytest

import module_api as mx
from compiler.ops import REGISTRY
from compiler.ops.registry import namespace_members

FIXTURE = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))),
                       "fixtures", "mxnet_ndarray_names.json")

NOT_YET = {
    "nd": """
    get_indexing_dispatch_code get_oshape_of_gather_nd_op imdecode
    indexing_key_expand_implicit_axes
    """,
    "nd.random": "",
    "nd.linalg": "",
    "nd.contrib": """
    dgl_adjacency dgl_csr_neighbor_non_uniform_sample dgl_csr_neighbor_uniform_sample
    dgl_graph_compact dgl_subgraph multi_lamb_update multi_mp_lamb_update quantized_rnn
    """,
}
NOT_YET = {k: v.split() for k, v in NOT_YET.items()}


def _namespace(space):
    ns = mx
    for part in space.split("."):
        ns = getattr(ns, part, None)
        if ns is None:
            return None
    return ns


def _mxnet():
    with open(FIXTURE) as f:
        record = json.load(f)
    assert record["mxnet_version"] == "1.9.1"
    return record


@pytest.mark.parametrize("space", sorted(NOT_YET))
def test_every_mxnet_nd_function_exists_or_is_listed_as_not_yet(space):
    names = [n for n in _mxnet()["namespaces"][space] if not n.endswith("_v1")]
    ns = _namespace(space)
    missing = sorted(n for n in names if not hasattr(ns, n))
    not_yet = sorted(NOT_YET[space])
    arrived = sorted(set(not_yet) - set(missing))
    assert not arrived, f"mx.{space}: {arrived} exist now: remove them from NOT_YET"
    assert missing == not_yet, f"mx.{space}: missing and not listed: " \
                               f"{sorted(set(missing) - set(not_yet))}"


def test_the_fixture_is_mxnets_nd():
    record = _mxnet()
    assert len(record["namespaces"]["nd"]) == 312
    assert {"FullyConnected", "broadcast_add", "slice_axis", "pick"} <= \
        set(record["namespaces"]["nd"])
    assert {"asscalar", "slice_axis", "wait_to_read", "dtype"} <= set(record["NDArray"])


def test_every_registry_operator_is_an_nd_function():
    for name in REGISTRY:
        if name.startswith("_"):
            assert callable(getattr(mx.nd._internal, name)), name
        else:
            assert callable(getattr(mx.nd, name)), name
    for space in ("contrib", "linalg"):
        for public in namespace_members(space):
            assert callable(getattr(getattr(mx.nd, space), public)), (space, public)


def test_nd_and_sym_name_the_same_registry_entry():
    a = mx.nd.array([[1.0, -2.0, 3.0]])
    assert mx.nd.relu.__name__ == mx.sym.relu.__name__ == "relu"
    assert mx.nd.relu(a).asnumpy().tolist() == [[1.0, 0.0, 3.0]]
