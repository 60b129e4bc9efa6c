"""Optimizer updates with row_sparse gradients, step by step against mxnet 1.9.1
(tests/fixtures/make_lazyopt_fixtures.py): lazy SGD / Adam / AdaGrad / Ftrl, and the
dense fallback of the others, through a ``local`` kvstore, ``get_updater`` (float16
with multi_precision) and ``Module.update``."""
import os

import numpy as np
import pytest
import torch

import module_api as mx
from compiler.errors import MXNetError
from runtime.updater import _leaves

FIX = np.load(os.path.join(os.path.dirname(__file__), "..", "fixtures", "lazyopt_cases.npz"))
NSTEPS = 5
NEVER_PUSHED = [3, 4]
# the fixture's optimizer settings (make_lazyopt_fixtures.py, CASES)
CASES = {
    "sgd_mom": ("sgd", dict(learning_rate=0.1, momentum=0.9, wd=0.01, rescale_grad=0.5,
                            clip_gradient=0.8)),
    "adam": ("adam", dict(learning_rate=0.05, wd=0.01, rescale_grad=0.5, clip_gradient=0.8)),
    "adam_noclip": ("adam", dict(learning_rate=0.05, beta1=0.8, beta2=0.95, epsilon=1e-6)),
    "adagrad": ("adagrad", dict(learning_rate=0.1, rescale_grad=0.5, clip_gradient=0.8)),
    "adagrad_noclip": ("adagrad", dict(learning_rate=0.2, eps=1e-5)),
    "ftrl": ("ftrl", dict(learning_rate=0.1, lamda1=0.05, beta=0.5, wd=0.01,
                          rescale_grad=0.5, clip_gradient=0.8)),
    "signum": ("signum", dict(learning_rate=0.05, momentum=0.9, wd=0.01, rescale_grad=0.5)),
    "rmsprop": ("rmsprop", dict(learning_rate=0.05, wd=0.01, rescale_grad=0.5)),
    "nag": ("nag", dict(learning_rate=0.05, momentum=0.9, wd=0.01, rescale_grad=0.5)),
    "ftml": ("ftml", dict(learning_rate=0.05, wd=0.01, rescale_grad=0.5)),
    "groupadagrad": ("groupadagrad", dict(learning_rate=0.1, rescale_grad=0.5,
                                          clip_gradient=0.8)),
}
LAZY_CASES = {("sgd_mom", 1), ("adam", 1), ("adam_noclip", 1), ("adagrad", None),
              ("adagrad_noclip", None), ("groupadagrad", None)}


def _runs():
    out = []
    for case in CASES:
        for lazy in ((1, 0) if case.startswith(("sgd", "adam")) else (None,)):
            for wstype in ("row_sparse", "default"):
                if case == "nag" and wstype == "row_sparse":
                    continue        # see test_nag_on_a_row_sparse_weight_is_dense_nag
                out.append((case, lazy, wstype))
    return out


def _states(state):
    return [v.detach().cpu().float().numpy() for _, v in _leaves(state) if torch.is_tensor(v)]


def _grad(step):
    vals = []
    d = 0
    while f"kv/g{step}_{d}" in FIX.files:
        vals.append(mx.nd.array(FIX[f"kv/g{step}_{d}"]).tostype("row_sparse"))
        d += 1
    return vals if len(vals) > 1 else vals[0]


def _is_lazy(case, lazy, wstype):
    return (case, lazy) in LAZY_CASES or (case == "ftrl" and wstype == "row_sparse")


@pytest.mark.parametrize("case,lazy,wstype", _runs())
def test_store_updates_with_row_sparse_gradients_match_mxnet(case, lazy, wstype):
    name, params = CASES[case]
    if lazy is not None:
        params = dict(params, lazy_update=bool(lazy))
    kv = mx.kv.create("local")
    kv.set_optimizer(mx.optimizer.create(name, **params))
    kv.init(0, mx.nd.array(FIX["kv/w0"]).tostype(wstype))
    tag = f"kv/{case}/{'' if lazy is None else lazy}/{wstype}"
    for step in range(NSTEPS):
        kv.push(0, _grad(step))
        res = mx.nd.zeros(FIX["kv/w0"].shape)
        kv.pull(0, out=res, ignore_sparse=False)
        msg = f"{tag} step {step}"
        np.testing.assert_allclose(res.asnumpy(), FIX[f"{tag}/w{step}"], rtol=1e-5,
                                   atol=1e-6, err_msg=msg)
        ours = _states(kv._updater.states[0])
        want = [FIX[f"{tag}/s{j}_{step}"] for j in range(len(ours))
                if f"{tag}/s{j}_{step}" in FIX.files]
        if _is_lazy(case, lazy, wstype) or len(want) == len(ours):
            assert len(want) == len(ours), msg
            # FTML's z grows to ~4 from differences of similar terms: float32 rounding
            rtol = 1e-5 if _is_lazy(case, lazy, wstype) else 1e-4
            for j, (a, b) in enumerate(zip(ours, want)):
                np.testing.assert_allclose(a, b, rtol=rtol, atol=1e-6, err_msg=f"{msg} s{j}")
    if _is_lazy(case, lazy, wstype):       # never pushed: weight and states untouched
        np.testing.assert_array_equal(res.asnumpy()[NEVER_PUSHED],
                                      FIX["kv/w0"][NEVER_PUSHED])
        for s in _states(kv._updater.states[0]):
            assert not s[NEVER_PUSHED].any()


def test_the_lazy_update_counts_an_empty_gradient_as_a_step():
    # Adam's bias correction follows the update count: a push with no rows counts
    kv = mx.kv.create("local")
    kv.set_optimizer(mx.optimizer.Adam(learning_rate=0.05))
    kv.init(0, mx.nd.ones((4, 2)))
    kv.push(0, mx.nd.sparse.zeros("row_sparse", (4, 2)))
    assert kv._updater.optimizer._index_update_count[0] == 1
    res = mx.nd.zeros((4, 2))
    kv.pull(0, out=res)
    np.testing.assert_array_equal(res.asnumpy(), np.ones((4, 2)))


@pytest.mark.parametrize("case", ["adam", "adagrad", "sgd_mom"])
def test_float16_multi_precision_updates_match_mxnet(case):
    # Adam / AdaGrad: lazy on the float32 master copy; SGD: mxnet's mp_sgd_mom_update
    # has no sparse path, so every row moves (dense fallback)
    name, params = CASES[case]
    upd = mx.optimizer.get_updater(mx.optimizer.create(name, multi_precision=True, **params))
    w = mx.nd.array(FIX["mp/w0"], dtype=np.float16)
    for step in range(3):
        upd(0, mx.nd.array(FIX[f"mp/g{step}"], dtype=np.float16).tostype("row_sparse"), w)
        np.testing.assert_allclose(w.asnumpy().astype(np.float32),
                                   FIX[f"mp/{case}/w{step}"].astype(np.float32),
                                   rtol=1e-3, atol=1e-3, err_msg=f"{case} step {step}")
        ours = _states(upd.states[0])
        for j, a in enumerate(ours):
            want = FIX[f"mp/{case}/s{j}_{step}"]   # the same layout as mxnet's states
            np.testing.assert_allclose(a, want.astype(np.float32), rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("store", ["name", "object"])
@pytest.mark.parametrize("name,params", [("adam", {"learning_rate": 0.05, "wd": 0.01}),
                                         ("adagrad", {"learning_rate": 0.1}),
                                         ("ftrl", {"learning_rate": 0.1, "lamda1": 0.01})])
def test_module_update_of_a_sparse_embedding_matches_mxnet(name, params, store):
    # 'name': kvstore='local' on one device (mxnet updates through its updater);
    # 'object': a KVStore passed in, as example/sparse's train.py does (the store updates)
    data = mx.sym.var("data")
    weight = mx.sym.var("embed_weight", stype="row_sparse")
    emb = mx.sym.contrib.SparseEmbedding(data=data, weight=weight, input_dim=10, output_dim=3,
                                         name="embed")
    sym = mx.sym.LinearRegressionOutput(mx.sym.sum(emb, axis=(1, 2)), mx.sym.var("label"))
    it = mx.io.NDArrayIter(FIX["mod/idx"], {"label": FIX["mod/label"]}, batch_size=2)
    mod = mx.mod.Module(sym, label_names=["label"])
    mod.bind(it.provide_data, it.provide_label)
    mod.init_params(arg_params={"embed_weight": mx.nd.array(FIX["mod/w0"]).tostype("row_sparse")})
    kv = "local" if store == "name" else mx.kv.create("local")
    mod.init_optimizer(kvstore=kv, optimizer=name, optimizer_params=params)
    every_row = {"embed_weight": mx.nd.arange(10)}
    step = 0
    for _ in range(2):
        it.reset()
        for batch in it:
            mod.prepare(batch, sparse_row_id_fn=lambda b: every_row)
            mod.forward(batch, is_train=True)
            mod.backward()
            mod.update()
            mod.prepare(batch, sparse_row_id_fn=lambda b: every_row)
            np.testing.assert_allclose(mod.get_params()[0]["embed_weight"].asnumpy(),
                                       FIX[f"mod/{name}/{store}/w{step}"], rtol=1e-5, atol=1e-6,
                                       err_msg=f"{name} step {step}")
            step += 1
    assert step == 4


@pytest.mark.parametrize("wstype", ["row_sparse", "default"])
def test_sparse_adagrad_with_weight_decay_is_refused(wstype):
    kv = mx.kv.create("local")
    kv.set_optimizer(mx.optimizer.AdaGrad(learning_rate=0.1, wd=0.01))
    kv.init(0, mx.nd.ones((3, 2)).tostype(wstype))
    with pytest.raises(MXNetError, match=r"key 0.*_sparse_adagrad_update.*wd=0.01"):
        kv.push(0, mx.nd.ones((3, 2)).tostype("row_sparse"))


def test_lazy_adam_refuses_a_row_sparse_weight_missing_rows():
    kv = mx.kv.create("local")
    kv.set_optimizer(mx.optimizer.Adam())
    kv.init("p", mx.nd.sparse.row_sparse_array(([[1.0, 2.0]], [1]), shape=(3, 2)))
    with pytest.raises(MXNetError, match="every row"):
        kv.push("p", mx.nd.ones((3, 2)).tostype("row_sparse"))
