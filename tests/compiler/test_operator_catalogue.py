"""The symbolic operator catalogue held against mxnet 1.9.1's, name by name.

``tests/fixtures/mxnet_operator_names.json`` lists the public functions of
mxnet 1.9.1's ``mx.sym`` (and its ``random``, ``linalg`` and ``contrib``
namespaces), written by ``tests/fixtures/make_operator_names.py`` under mxnet.
Every name except the deprecated ``*_v1`` ones must exist on ``module_api``'s
namespace, or be listed in ``NOT_YET`` below: the catalogue's remaining work,
kept exact in both directions (a name that appears moves out of the list).
"""
import json
import os

import pytest

import module_api as mx

FIXTURE = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))),
                       "fixtures", "mxnet_operator_names.json")

# ``check_call`` in mxnet's ``mx.sym.contrib`` is not an operator: it is mxnet.base's
# C-API error check, imported by mxnet's mx.sym.contrib module for its own use.
NOT_YET = {
    "sym": """

    """.split(),
    "sym.random": """

    """.split(),
    "sym.linalg": """

    """.split(),
    "sym.contrib": """
    check_call dgl_adjacency dgl_csr_neighbor_non_uniform_sample
    dgl_csr_neighbor_uniform_sample dgl_graph_compact dgl_subgraph quantized_rnn
    """.split(),
}


def _namespace(path):
    ns = mx
    for part in path.split("."):
        ns = getattr(ns, part, None)
        if ns is None:
            return None
    return ns


def _mxnet_names():
    with open(FIXTURE) as f:
        record = json.load(f)
    assert record["mxnet_version"] == "1.9.1"
    return record["namespaces"]


@pytest.mark.parametrize("space", sorted(NOT_YET))
def test_every_mxnet_operator_exists_or_is_listed_as_not_yet(space):
    names = [n for n in _mxnet_names()[space] if not n.endswith("_v1")]
    ns = _namespace(space)
    missing = sorted(n for n in names if ns is None or not hasattr(ns, n))
    not_yet = sorted(NOT_YET[space])
    arrived = sorted(set(not_yet) - set(missing))
    assert not arrived, f"mx.{space}: {arrived} exist now: remove them from NOT_YET"
    assert missing == not_yet, f"mx.{space}: missing and not listed: " \
                               f"{sorted(set(missing) - set(not_yet))}"


def test_the_fixture_is_mxnets_catalogue():
    names = _mxnet_names()
    assert len(names["sym"]) == 287 and len(names["sym.contrib"]) == 79
    assert {"FullyConnected", "SoftmaxOutput", "cbrt", "ctc_loss"} <= set(names["sym"])
