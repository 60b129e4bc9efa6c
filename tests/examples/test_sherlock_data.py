"""The main job's data and its mxnet reference: the corpus is the one mxnet's example
downloads (checksums), every full batch falls in bucket 30, and mxnet 1.9.1's recorded
perplexities cover the demo's epochs for exactly the example's default configuration,
so ``make demo`` always prints them beside its own."""
import hashlib
import json
import logging
import os

from examples import lstm_bucketing

HERE = lstm_bucketing.SHERLOCK


def test_corpus_matches_its_checksums():
    with open(os.path.join(HERE, "SHA256SUMS")) as f:
        sums = dict(reversed(line.split()) for line in f if line.strip())
    assert set(sums) == {"sherlockholmes.train.txt", "sherlockholmes.valid.txt",
                         "sherlockholmes.test.txt"}
    for name, digest in sums.items():
        with open(os.path.join(HERE, name), "rb") as f:
            assert hashlib.sha256(f.read()).hexdigest() == digest, name


def test_mxnet_tokenizer_view_of_the_corpus():
    sents, vocab = lstm_bucketing.tokenize_text(os.path.join(HERE, "sherlockholmes.train.txt"),
                                                invalid_label=0, start_label=1)
    assert len(vocab) == 2000 and len(sents) == 4143
    assert max(len(s) for s in sents) == 21                 # every full batch: bucket 30
    assert sum(1 for s in sents if len(s) > 20) // 32 == 129


def test_reference_covers_the_demo_configuration(caplog):
    args = lstm_bucketing.parser.parse_args([])
    ref = lstm_bucketing.load_reference(args)
    assert ref is not None, "the default configuration must be the recorded one"
    assert ref["mxnet"] == "1.9.1" and len(ref["runs"]) >= 2
    assert len(ref["mean"]) >= args.num_epochs
    for run in ref["runs"]:
        assert len(run["valid_perplexity"]) == len(ref["mean"])
    # the per-epoch line shows mxnet's mean and range beside ours
    history = lstm_bucketing.PerplexityHistory(ref, args.num_epochs, show_progress=False)

    class Param:
        epoch = 0

        class eval_metric:
            @staticmethod
            def get_name_value():
                return [("perplexity", 230.0)]
    with caplog.at_level(logging.INFO):
        history.on_eval(Param)
    line = caplog.records[-1].getMessage()
    assert "Validation-perplexity=230.000" in line and "mxnet 1.9.1:" in line
    assert f"{ref['mean'][0]:.3f}" in line


def test_other_configurations_are_not_compared():
    args = lstm_bucketing.parser.parse_args(["--num-hidden", "32"])
    assert lstm_bucketing.load_reference(args) is None
    args = lstm_bucketing.parser.parse_args(["--generated", "100"])
    assert lstm_bucketing.load_reference(args) is None


def test_reference_file_is_what_the_recorder_writes():
    with open(lstm_bucketing.REFERENCE) as f:
        ref = json.load(f)
    assert ref["command"].startswith("python benchmarks/record_mxnet_perplexity.py")
    means = [sum(r["valid_perplexity"][e] for r in ref["runs"]) / len(ref["runs"])
             for e in range(len(ref["mean"]))]
    assert all(abs(a - b) < 1e-9 for a, b in zip(means, ref["mean"]))
