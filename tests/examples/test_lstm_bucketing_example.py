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
        "--num-sentences", "240", "--num-epochs", "3", "--buckets", "10,20,30",
        "--lr", "0.02", "--plot", str(tmp_path / "ppl.png"), "--kv-store", "local"])
    assert math.isfinite(reached) and best is not None
    assert 1.0 < best < reached < 61.0   # learned something, cannot beat the true model
    valid = [history.valid[e]["perplexity"] for e in sorted(history.valid)]
    assert valid[-1] < valid[0], valid
