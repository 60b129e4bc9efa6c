"""``mx.model.FeedForward`` against mxnet 1.9.1 (``tests/fixtures/feedforward.npz``,
made by ``make_feedforward_fixtures.py``): from the same parameters, ``fit`` (whole
epochs and ``epoch_size=2``), ``predict`` and ``score`` equal mxnet's, with its
batch-end numbering and log lines; ``save`` / ``load`` and ``create``."""
import logging
import os
import warnings

import numpy as np
import pytest

import module_api as mx

FIXTURE = os.path.join(os.path.dirname(os.path.dirname(__file__)), "fixtures",
                       "feedforward.npz")
REC = dict(np.load(FIXTURE))


def network():
    data = mx.sym.var("data")
    fc1 = mx.sym.FullyConnected(data, num_hidden=8, name="fc1")
    bn = mx.sym.BatchNorm(fc1, fix_gamma=False, name="bn")
    act = mx.sym.Activation(bn, act_type="relu", name="relu")
    fc2 = mx.sym.FullyConnected(act, num_hidden=3, name="fc2")
    return mx.sym.SoftmaxOutput(fc2, name="softmax")


def _params(prefix):
    return {k[len(prefix):]: mx.nd.array(v) for k, v in REC.items() if k.startswith(prefix)}


def _model(**kwargs):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        return mx.model.FeedForward(network(), learning_rate=0.1, momentum=0.9,
                                    numpy_batch_size=20, arg_params=_params("init_"),
                                    aux_params=_params("initaux_"), **kwargs)


@pytest.mark.parametrize("case,epoch_size", [("full", None), ("size2", 2)])
def test_fit_predict_score_equal_mxnets(case, epoch_size, caplog):
    model = _model(num_epoch=3, epoch_size=epoch_size)
    seen = []
    with caplog.at_level(logging.INFO):
        model.fit(mx.io.NDArrayIter(REC["X"], REC["y"], batch_size=20),
                  eval_data=(REC["Xv"], REC["yv"]),
                  batch_end_callback=lambda p: seen.append([p.epoch, p.nbatch]))
    assert seen == REC[f"{case}_nbatch"].tolist()
    lines = [r.getMessage() for r in caplog.records if "Time cost" not in r.getMessage()
             and r.name.startswith("module_api")]
    assert lines == REC[f"{case}_log"].tolist()
    for name, value in model.arg_params.items():
        np.testing.assert_allclose(value.asnumpy(), REC[f"{case}_arg_{name}"], rtol=1e-4,
                                   atol=1e-5, err_msg=name)
    for name, value in model.aux_params.items():
        np.testing.assert_allclose(value.asnumpy(), REC[f"{case}_aux_{name}"], rtol=1e-4,
                                   atol=1e-5, err_msg=name)
    np.testing.assert_allclose(model.predict(REC["Xv"]), REC[f"{case}_predict"], rtol=1e-4,
                               atol=1e-5)
    assert model.score(mx.io.NDArrayIter(REC["Xv"], REC["yv"], batch_size=10)) == \
        pytest.approx(float(REC[f"{case}_score"]))


def test_constructor_is_deprecated_and_checks_names():
    with pytest.warns(DeprecationWarning, match="Please use mxnet.mod.Module"):
        mx.model.FeedForward(network())
    a = mx.sym.FullyConnected(mx.sym.var("data"), num_hidden=2, name="fc")
    twice = mx.sym.FullyConnected(a, num_hidden=2, name="fc")     # fc_weight twice
    with pytest.raises(ValueError, match='duplicated argument name "fc_weight"'), \
            warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        mx.model.FeedForward(twice)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        model = mx.model.FeedForward(network(), allow_extra_params=True,
                                     arg_params={"fc1_bias": mx.nd.zeros(8),
                                                 "other": mx.nd.zeros(1)})
    assert list(model.arg_params) == ["fc1_bias"]


def test_create_save_load_and_numpy_inputs(tmp_path):
    np.random.seed(0)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        model = mx.model.FeedForward.create(network(), REC["X"], REC["y"].reshape(-1, 1),
                                            num_epoch=2, numpy_batch_size=16,
                                            learning_rate=0.1,
                                            initializer=mx.init.Xavier())
    assert model.num_epoch == 2 and model.begin_epoch == 0
    assert sorted(model.arg_params) == ["bn_beta", "bn_gamma", "fc1_bias", "fc1_weight",
                                        "fc2_bias", "fc2_weight"]
    probs, data, label = model.predict(mx.nd.array(REC["Xv"]), return_data=True)
    assert probs.shape == (40, 3) and np.allclose(probs.sum(1), 1, atol=1e-5)
    np.testing.assert_array_equal(data, REC["Xv"])
    assert label.shape == (40,)
    assert model.predict(REC["Xv"], num_batch=1).shape == (16, 3)   # batches of 16
    model.save(str(tmp_path / "ff"))
    assert (tmp_path / "ff-symbol.json").exists() and (tmp_path / "ff-0002.params").exists()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        loaded = mx.model.FeedForward.load(str(tmp_path / "ff"), 2, numpy_batch_size=40)
    assert loaded.begin_epoch == 2
    np.testing.assert_allclose(loaded.predict(REC["Xv"]), probs, rtol=1e-5, atol=1e-6)
    with pytest.raises(ValueError, match="y must be specified"):
        model.fit(REC["X"])
    with pytest.raises(TypeError, match="X must be DataIter"):
        model.predict([1, 2, 3])


def _small_network():
    data = mx.sym.var("data")
    fc1 = mx.sym.FullyConnected(data, num_hidden=8, name="fc1")
    act = mx.sym.Activation(fc1, act_type="relu", name="relu")
    fc2 = mx.sym.FullyConnected(act, num_hidden=3, name="fc2")
    return mx.sym.SoftmaxOutput(fc2, name="softmax")


class _RecordingSymGen:
    """A ``sym_gen`` that keeps the bucket keys it is called with (picklable)."""

    def __init__(self):
        self.keys = []

    def __call__(self, key):
        self.keys.append(key)
        return _small_network()


def test_callbacks_score_and_pickle_as_mxnet():
    """Values recorded from mxnet 1.9.1 running the same program: the epoch-end
    callback gets the model's own (updated) ``arg_params`` every epoch, evaluation
    batches count from 0 and the end callback gets their number, ``score`` stops
    after ``num_batch`` batches; a pickled model predicts as the original."""
    import pickle
    rs = np.random.RandomState(3)
    X = rs.normal(size=(50, 5)).astype(np.float32)
    y = (X[:, 0] > 0).astype(np.float32)
    Xv = rs.normal(size=(30, 5)).astype(np.float32)
    yv = (Xv[:, 0] > 0).astype(np.float32)
    init = {"fc1_weight": rs.normal(0, .4, (8, 5)), "fc1_bias": np.zeros(8),
            "fc2_weight": rs.normal(0, .4, (3, 8)), "fc2_bias": np.zeros(3)}
    sym_gen, log = _RecordingSymGen(), []

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        model = mx.model.FeedForward(sym_gen, num_epoch=2, learning_rate=0.1,
                                     numpy_batch_size=10,
                                     arg_params={k: mx.nd.array(v) for k, v in init.items()})
    train = mx.io.NDArrayIter(X, y, batch_size=10)
    train.default_bucket_key = 5
    model.fit(train, eval_data=(Xv.tolist(), yv.tolist()),
              epoch_end_callback=lambda e, s, a, x: log.append(
                  ("epoch_end", e, float(a["fc1_bias"].asnumpy().sum()), a is model.arg_params,
                   x)),
              eval_batch_end_callback=[lambda p: log.append(("eval_batch", p.epoch, p.nbatch))],
              eval_end_callback=lambda p: log.append(("eval_end", p.epoch, p.nbatch,
                                                      p.eval_metric.get()[1])))
    assert sym_gen.keys == [5]
    expected = [("epoch_end", 0, 0.12478038668632507, True, {}),
                ("eval_batch", 0, 0), ("eval_batch", 0, 1), ("eval_batch", 0, 2),
                ("eval_end", 0, 3, 0.6333333333333333),
                ("epoch_end", 1, 0.25532758235931396, True, {}),
                ("eval_batch", 1, 0), ("eval_batch", 1, 1), ("eval_batch", 1, 2),
                ("eval_end", 1, 3, 0.6666666666666666)]
    assert [e[:2] for e in log] == [e[:2] for e in expected]
    for got, want in zip(log, expected):
        assert len(got) == len(want)
        for a, b in zip(got, want):
            assert a == (pytest.approx(b, rel=1e-5) if isinstance(b, float) else b), got
    seen = []
    score = model.score(mx.io.NDArrayIter(Xv, yv, batch_size=7), eval_metric="ce", num_batch=3,
                        batch_end_callback=lambda p: seen.append((p.epoch, p.nbatch)))
    assert score == pytest.approx(0.6647161756243024, rel=1e-5)
    assert seen == [(0, 0), (0, 1), (0, 2)]
    assert model.predict(mx.io.NDArrayIter(Xv, yv, batch_size=7), num_batch=2).shape == (14, 3)
    copy = pickle.loads(pickle.dumps(model))
    assert copy._pred_exec is None
    np.testing.assert_array_equal(copy.predict(Xv), model.predict(Xv))
    sums = {"fc1_weight": 2.2123026847839355, "fc1_bias": 0.25532758235931396,
            "fc2_weight": 1.6484096050262451}
    for name, total in sums.items():
        assert float(model.arg_params[name].asnumpy().sum()) == pytest.approx(total, rel=1e-5)
