"""The two CustomOp programs under ``examples/`` (what mxnet 1.9.1's
numpy-ops examples show) against mxnet's own figures
(``examples/data/mxnet_custom_op_examples.json``, written by
``tests/fixtures/make_custom_op_fixtures.py`` running the same files under mxnet):

- ``weighted_logistic_regression.py``: the Python operator's outputs and gradients
  (NDArray arithmetic inside ``forward`` / ``backward``) equal mxnet's, for the
  example's all-ones input and a random one;
- ``custom_softmax.py``: the MLP whose softmax and its gradient are numpy code
  between the compiled segment and the loss trains on the repository's MNIST split
  to mxnet's validation accuracy within one point (mxnet: the mean over three seeds).
"""
import json
import os

import numpy as np
import pytest

from examples import custom_softmax, weighted_logistic_regression

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
MXNET_RUN = os.path.join(ROOT, "examples", "data", "mxnet_custom_op_examples.json")


@pytest.fixture(scope="module")
def mxnet_run():
    with open(MXNET_RUN) as f:
        run = json.load(f)
    assert run["framework"] == "mxnet" and run["version"] == "1.9.1"
    return run


@pytest.mark.parametrize("case", ["ones", "random"])
def test_weighted_logistic_regression_matches_mxnet(mxnet_run, case):
    theirs = mxnet_run["weighted_logistic_regression"][case]
    given = None if case == "ones" else np.asarray(theirs["input"], dtype=np.float32)
    ours = weighted_logistic_regression.main(given)
    for key in ("wlr_output", "lr_output", "wlr_grad", "lr_grad"):
        np.testing.assert_allclose(ours[key], np.asarray(theirs[key]), rtol=1e-5, atol=1e-7,
                                   err_msg=key)
    # the weights matter: negative labels get a tenth of the plain gradient
    assert not np.allclose(ours["wlr_grad"], ours["lr_grad"])


@pytest.mark.slow
def test_custom_softmax_trains_to_mxnets_accuracy(mxnet_run):
    epochs = "10"
    theirs = mxnet_run["custom_softmax"]["validation_accuracy"][epochs]
    ours = custom_softmax.main(["--num-epochs", epochs, "--seed", "0"])
    assert abs(ours - float(np.mean(theirs))) <= 0.01, (ours, theirs)


def test_symtriton_inspect_imports_the_prop_and_shows_the_python_softmax(tmp_path, capsys):
    from compiler import cli
    path = tmp_path / "custom_softmax-symbol.json"
    custom_softmax.network().save(str(path))
    assert cli.main(["inspect", str(path), "--shape", "data=100,784", "--train",
                     "--target", "cpu", "--json", "--import", "examples.custom_softmax"]) == 0
    info = json.loads(capsys.readouterr().out)
    assert [c["name"] for c in info["custom_nodes"]] == ["softmax"]
    assert info["custom_nodes"][0]["inputs"] == ["fc3_output_copy", "softmax_label"]
    assert info["forward_launches"] == 3           # one matmul + bias (+ relu) per layer
    assert all(g["segment"] == 0 for g in info["groups"])


@pytest.mark.parametrize("contexts", [1, 2])
def test_python_softmax_trains_as_softmax_output_does(contexts):
    """The example's Python softmax and its gradient equal SoftmaxOutput's, so a Module
    (one context, or data parallel over two) ends with the same parameters."""
    import module_api as mx
    rng = np.random.RandomState(0)
    x = rng.randn(200, 20).astype(np.float32)
    y = x[:, :10].argmax(1).astype(np.float32)
    params, scores = [], []
    for builtin in (False, True):
        mx.random.seed(1)
        net = custom_softmax.network()
        if builtin:
            net = mx.sym.SoftmaxOutput(net.get_internals()["fc3_output"], name="softmax")
        it = mx.io.NDArrayIter(x, y, batch_size=50, label_name="softmax_label")
        mod = mx.mod.Module(net, context=[mx.cpu(i) for i in range(contexts)])
        mod.fit(it, num_epoch=10, initializer=mx.init.Xavier(),
                optimizer_params={"learning_rate": 0.2, "momentum": 0.9})
        params.append({k: v.asnumpy() for k, v in mod.get_params()[0].items()})
        scores.append(dict(mod.score(it, "acc"))["accuracy"])
    assert scores[0] == scores[1] and scores[0] > 0.9, scores
    for name, value in params[1].items():
        np.testing.assert_allclose(params[0][name], value, rtol=1e-4, atol=1e-5, err_msg=name)
