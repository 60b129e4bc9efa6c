"""mxnet 1.9.1's own example programs, run with ``import mxnet`` resolved to module_api,
reach the metric mxnet 1.9.1 reached on the same data (``examples/data/
mxnet_module_examples.json``, recorded by ``examples/mxnet_examples.py``) within 2%; for
an unseeded program whose figure spreads between runs, mxnet's recorded runs' range
widened by 2% (``--repeat``: cudnn_rnn_bucketing's validation perplexity spread 183-195
over five mxnet runs of 2 epochs).

The programs are read from an apache/mxnet 1.9.1 checkout named by ``MXNET_SOURCE``
(nothing of mxnet's is kept here); without it these tests are skipped. See
``examples/mxnet_examples.py`` for the CPU edits both sides get and the data.

``python_loss`` as it is (10 epochs) is not among them: it stops while the accuracy still
climbs steeply (mxnet: 0.12 to 0.63 over epochs 5-9), where the figure depends on the
initial draw (ours from the default seed 0.6200, from OS seeds 0.608, 0.582, 0.559, against
mxnet's 0.6165), and float differences between machines move it: its 30-epoch run,
converged, is. ``mnist_mlp`` and ``sequential_module`` as they are stay at chance
(0.115) on both sides after their 2 epochs on 8,000 images; their 30-epoch runs learn.
"""
import json
import os

import pytest

from examples import mxnet_examples

SOURCE = os.environ.get("MXNET_SOURCE")
NEEDS_SOURCE = pytest.mark.skipif(not SOURCE, reason="MXNET_SOURCE (an apache/mxnet 1.9.1 "
                                                     "checkout) is not set")


def _recorded(name):
    with open(mxnet_examples.FIGURES) as f:
        return json.load(f)["examples"][name]["final"]


def _mxnet_spread(name):
    """The lowest and highest final figure of mxnet's recorded runs (one run: its own)."""
    with open(mxnet_examples.FIGURES) as f:
        fig = json.load(f)["examples"][name]
    finals = fig.get("finals", [fig["final"]])
    return min(finals), max(finals)


@pytest.mark.slow
@NEEDS_SOURCE
@pytest.mark.parametrize("name", ["mnist_mlp", "mnist_mlp_30_epochs", "sequential_module",
                                  "sequential_module_30_epochs", "python_loss_30_epochs",
                                  "train_mnist_rec", "word_lm", "dsd", "stochastic_depth",
                                  "nce_toy",
                                  "sparse_linear_classification",
                                  "sparse_factorization_machine",
                                  "sparse_matrix_factorization", "sparse_wide_deep",
                                  "cudnn_rnn_bucketing", "cudnn_rnn_bucketing_stacked",
                                  "cnn_text_classification",
                                  "model_parallel_matrix_factorization"])
def test_example_reaches_mxnet_metric(name, tmp_path, monkeypatch):
    monkeypatch.setenv("SYMTRITON_CACHE_DIR", str(tmp_path))
    ours, log = mxnet_examples.run(SOURCE, name, "symtriton")
    low, high = _mxnet_spread(name)         # within 2% of the spread of mxnet's own runs
    assert 0.98 * low <= ours[-1] <= 1.02 * high, (name, ours, (low, high), log[-2000:])


@NEEDS_SOURCE
@pytest.mark.parametrize("name", ["sparse_linear_classification_small",
                                  "sparse_factorization_machine_small"])
def test_sparse_example_small_reaches_mxnet_log_loss(name, tmp_path, monkeypatch):
    """example/sparse on LibSVMIter, csr data, row_sparse weights, prepare and lazy
    updates (SGD; Adam for the factorization machine), a minute each: mxnet's log-loss
    within 2%."""
    monkeypatch.setenv("SYMTRITON_CACHE_DIR", str(tmp_path))
    ours, log = mxnet_examples.run(SOURCE, name, "symtriton")
    theirs = _recorded(name)
    assert abs(ours[-1] - theirs) <= 0.02 * theirs, (name, ours, theirs, log[-2000:])
    if "factorization" in name:
        # its loop skips a batch that raises, Speedometer line and all: none may (40
        # batches an epoch, a line every 10, 2 epochs)
        assert log.count("Batch [") == 8, log[-2000:]


def test_recorded_figures_have_provenance():
    with open(mxnet_examples.FIGURES) as f:
        doc = json.load(f)
    assert {"mxnet", "source"} <= set(doc["provenance"])
    assert all({"command", "date", "final"} <= set(fig) for fig in doc["examples"].values())
    assert set(doc["examples"]) == set(mxnet_examples.EXAMPLES)
