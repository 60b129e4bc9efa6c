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

NOT_YET = {
    "sym": """
    BilinearSampler CTCLoss Correlation GridGenerator SpatialTransformer adam_update
    all_finite cast_storage col2im ctc_loss erfinv fill_element_0index ftml_update
    ftrl_update gamma gammaln im2col lamb_update_phase1 lamb_update_phase2
    mp_lamb_update_phase1 mp_lamb_update_phase2 mp_nag_mom_update mp_sgd_mom_update
    mp_sgd_update multi_all_finite multi_lars multi_mp_sgd_mom_update
    multi_mp_sgd_update multi_sgd_mom_update multi_sgd_update multi_sum_sq
    nag_mom_update preloaded_multi_mp_sgd_mom_update preloaded_multi_mp_sgd_update
    preloaded_multi_sgd_mom_update preloaded_multi_sgd_update random_gamma
    random_generalized_negative_binomial random_negative_binomial random_pdf_dirichlet
    random_pdf_exponential random_pdf_gamma random_pdf_generalized_negative_binomial
    random_pdf_negative_binomial random_pdf_normal random_pdf_poisson random_pdf_uniform
    random_poisson random_randint reset_arrays rmsprop_update rmspropalex_update
    sample_gamma sample_generalized_negative_binomial sample_multinomial
    sample_negative_binomial sample_poisson sgd_mom_update sgd_update shuffle
    signsgd_update signum_update
    """.split(),
    "sym.random": """
    exponential_like gamma gamma_like generalized_negative_binomial
    generalized_negative_binomial_like multinomial negative_binomial
    negative_binomial_like normal_like poisson poisson_like randint shuffle uniform_like
    """.split(),
    "sym.linalg": """

    """.split(),
    "sym.contrib": """
    BatchNormWithReLU CTCLoss DeformableConvolution DeformablePSROIPooling
    ModulatedDeformableConvolution PSROIPooling RROIAlign SparseEmbedding SyncBatchNorm
    adamw_update allclose backward_gradientmultiplier backward_hawkesll
    backward_index_copy backward_quadratic boolean_mask calibrate_entropy check_call
    cond count_sketch ctc_loss dequantize dgl_adjacency
    dgl_csr_neighbor_non_uniform_sample dgl_csr_neighbor_uniform_sample
    dgl_graph_compact dgl_subgraph edge_id fft foreach getnnz group_adagrad_update
    hawkesll ifft index_array mp_adamw_update quantize quantize_asym quantize_v2
    quantized_act quantized_batch_norm quantized_concat quantized_conv
    quantized_elemwise_add quantized_elemwise_mul quantized_embedding quantized_flatten
    quantized_fully_connected quantized_pooling quantized_rnn rand_zipfian requantize
    uniform while_loop
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
