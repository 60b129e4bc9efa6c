"""The main job, scaled down: the bucketed LSTM language model trains on the
generated corpus, validation perplexity falls, and the best reachable
perplexity printed beside it is the true model's."""
import math

import pytest

from examples import lstm_bucketing
from examples.corpus import MarkovGrammar


def test_best_perplexity_is_the_true_models():
    g = MarkovGrammar(vocab_size=5, branching=2, seed=3)
    sents = g.sentences(200)
    best = g.best_perplexity(sents)
    # a 2-way branching chain: between 1 and 2 per token
    assert 1.0 < best <= 2.0
    assert math.isclose(best, g.best_perplexity(sents))


@pytest.mark.slow
def test_example_trains_and_validation_perplexity_falls(tmp_path):
    reached, best, history = lstm_bucketing.main([
        "--num-hidden", "16", "--num-embed", "16", "--batch-size", "16",
        "--generated", "240", "--num-epochs", "3", "--buckets", "10,20,30",
        "--optimizer", "adam", "--lr", "0.02", "--plot", str(tmp_path / "ppl.png"),
        "--kv-store", "local"])
    assert math.isfinite(reached) and best is not None
    assert 1.0 < best < reached < 61.0   # learned something, cannot beat the true model
    valid = [history.valid[e] for e in sorted(history.valid)]
    assert valid[-1] < valid[0], valid


@pytest.mark.slow
def test_example_trains_on_two_workers_under_torchrun(tmp_path):
    """The README's command, scaled down: both workers train with dist_sync, each
    on its own half of the sentences, and only rank 0 writes the plot."""
    import os
    import subprocess
    import sys
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    env = dict(os.environ, OMP_NUM_THREADS="1", TRITON_INTERPRET="1")
    plot = tmp_path / "ppl.png"
    proc = subprocess.run(
        [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node", "2",
         os.path.join(root, "examples", "lstm_bucketing.py"), "--kv-store", "dist_sync",
         "--num-hidden", "16", "--num-embed", "16", "--batch-size", "16",
         "--generated", "240", "--num-epochs", "1", "--buckets", "10,20,30",
         "--optimizer", "adam", "--lr", "0.02", "--disp-batches", "2", "--plot", str(plot)],
        cwd=tmp_path, env=env, capture_output=True, text=True, timeout=600)
    log = proc.stdout + proc.stderr
    assert proc.returncode == 0, log[-4000:]
    for rank in (0, 1):
        trained = [line for line in log.splitlines()
                   if f"[rank {rank}] Epoch[0] Train-perplexity=" in line]
        assert len(trained) == 1, log[-4000:]
        assert math.isfinite(float(trained[0].rsplit("=", 1)[1]))
    # each worker ran the same number of steps on half the data: 240 sentences,
    # batches of 16, so at most 7 batches each (the Speedometer logs batch 2, 4, 6)
    assert "[rank 1] Epoch[0] Batch [0-8]" not in log
    assert "[rank 0] validation perplexity reached" in log
    try:
        import matplotlib  # noqa: F401
        assert plot.exists()
    except ImportError:
        assert "matplotlib is not installed" in log
