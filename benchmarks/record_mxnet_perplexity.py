"""Record mxnet 1.9.1's validation perplexity per epoch on mxnet's lstm_bucketing example.

    python benchmarks/record_mxnet_perplexity.py --mxnet-python ~/mxnet-venv/bin/python

Runs ``benchmarks/mxnet_peer.py lstm --mode fit`` (mxnet's own example: Sherlock
Holmes corpus, 2 x 200 LSTM, embed 200, batch 32, buckets 10..60, SGD lr 0.01,
wd 1e-5, Xavier(in, 2.34), ``Module.fit`` with ``Perplexity(0)`` on the test
file) once per seed, and writes the per-epoch figures of every run and their
mean to ``examples/data/mxnet_lstm_bucketing_perplexity.json``.
``examples/lstm_bucketing.py`` prints that mean beside its own validation
perplexity at each epoch. mxnet's run-to-run spread (its initialisation and
shuffling) is kept in the file, so a comparison can tell a real difference from
a different seed.
"""
from __future__ import annotations

import argparse
import datetime
import json
import os
import statistics
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)

from benchmarks.data import SHERLOCK, run_mxnet_peer  # noqa: E402

OUT = os.path.join(ROOT, "examples", "data", "mxnet_lstm_bucketing_perplexity.json")


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--mxnet-python", required=True,
                   help="python of a venv with mxnet==1.9.1 and numpy<1.24")
    p.add_argument("--epochs", type=int, default=25)
    p.add_argument("--seeds", default="0,1,2", help="one mxnet run per seed")
    p.add_argument("--threads", type=int, default=os.cpu_count() or 1)
    p.add_argument("--out", default=OUT)
    args = p.parse_args(argv)
    train = os.path.join(SHERLOCK, "sherlockholmes.train.txt")
    valid = os.path.join(SHERLOCK, "sherlockholmes.test.txt")
    runs = []
    for seed in [int(s) for s in args.seeds.split(",")]:
        res = run_mxnet_peer(args.mxnet_python, [
            "--threads", args.threads, "lstm", "--mode", "fit", "--train", train,
            "--valid", valid, "--epochs", args.epochs, "--seed", seed], timeout=24 * 3600)
        if res is None:
            return 1
        runs.append({"seed": seed, "valid_perplexity": res["valid_perplexity"]})
        print(f"seed {seed}: " + ", ".join(f"{x:.2f}" for x in res["valid_perplexity"]),
              flush=True)
    mean = [statistics.fmean(r["valid_perplexity"][e] for r in runs)
            for e in range(args.epochs)]
    doc = {
        "what": "mxnet 1.9.1 example/rnn/bucketing/lstm_bucketing.py: validation perplexity "
                "(Perplexity(invalid_label=0) on sherlockholmes.test.txt) after each epoch",
        "configuration": {"num_layers": 2, "num_hidden": 200, "num_embed": 200,
                          "batch_size": 32, "buckets": [10, 20, 30, 40, 50, 60],
                          "optimizer": "sgd", "lr": 0.01, "momentum": 0.0, "wd": 0.00001,
                          "initializer": "Xavier(factor_type='in', magnitude=2.34)",
                          "kvstore": "device", "context": "cpu(0)"},
        "data": "examples/data/sherlockholmes (train: sherlockholmes.train.txt, "
                "validation: sherlockholmes.test.txt)",
        "mxnet": "1.9.1", "threads": args.threads,
        "recorded": datetime.date.today().isoformat(),
        "command": "python benchmarks/record_mxnet_perplexity.py --mxnet-python PATH "
                   f"--epochs {args.epochs} --seeds {args.seeds}",
        "runs": runs,
        "mean": mean,
    }
    tmp = args.out + ".tmp"
    with open(tmp, "w") as f:
        json.dump(doc, f, indent=1)
        f.write("\n")
    os.replace(tmp, args.out)
    print(f"wrote {os.path.relpath(args.out, ROOT)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
