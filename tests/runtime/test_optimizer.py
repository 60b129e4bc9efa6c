"""runtime.optimizer / runtime.lr_scheduler: mxnet 1.9.1 formulas, multi-tensor launches,
lr_mult / wd_mult, schedules and the safe state format."""
import pickle

import numpy as np
import pytest
import torch

from compiler import symbol as sym
from compiler.errors import MXNetError
from runtime import lr_scheduler as lrs
from runtime import optimizer as opt
from runtime import safe_unpickle
from runtime.context import cpu
from runtime.launcher import LaunchCounter
from runtime.ndarray import NDArray
from runtime.ndarray import torch_dtype

# ----------------------------------------------------------------------------- oracle
# Expected values were produced by mxnet 1.9.1 (mx.optimizer.create(name,
# param_idx2name={0: 'fc_weight', 1: 'fc_bias'}, **kw), get_updater, three calls
# updater([0, 1], grads, weights)) on the data of _case_data(ci).
ORACLE = [
    ("sgd", dict(learning_rate=0.1, wd=0.01, rescale_grad=0.5),
     [-1.663765549659729, 0.48941847681999207, 1.1181007623672485, -0.18991945683956146],
     [-0.714512050151825, 0.8677864670753479, 0.6494361758232117], None),
    ("sgd", dict(learning_rate=0.1, momentum=0.9, wd=0.01, clip_gradient=0.3, rescale_grad=0.5),
     [2.5613512992858887, 0.5690745711326599, 0.8388941287994385, 0.4467856287956238],
     [0.19069530069828033, -0.8102068305015564, -1.030123233795166],
     [-0.05068141222000122, -0.022638963535428047, -0.03432835265994072]),
    ("nag", dict(learning_rate=0.1, momentum=0.9, wd=0.01, clip_gradient=0.3),
     [1.573644995689392, 0.8830357789993286, 0.9441606402397156, -0.8343400359153748],
     [-0.7263978123664856, -1.0741344690322876, -0.7072960734367371],
     [-0.03245241194963455, -0.035228900611400604, -0.02886345237493515]),
    ("nag", dict(learning_rate=0.1, wd=0.01),
     [-0.9996482729911804, -0.4195314645767212, 0.3096711039543152, -0.23031586408615112],
     [0.805127739906311, 1.728490948677063, -1.1214629411697388], None),
    ("adam", dict(learning_rate=0.01, wd=0.01, clip_gradient=0.3, rescale_grad=0.5),
     [-0.3895464241504669, -0.5620836615562439, -0.5970995426177979, 0.9060167670249939],
     [-1.5373700857162476, -0.36244675517082214, 0.6981962323188782],
     [-0.04326711222529411, 0.003818849101662636, -0.009213913232088089]),
    ("adagrad", dict(learning_rate=0.1, wd=0.01, clip_gradient=0.3),
     [-0.3197087049484253, -0.5482807159423828, -0.8011605143547058, -0.016641512513160706],
     [0.4686121344566345, 0.8445979952812195, -1.5185891389846802],
     [0.19981080293655396, 0.20364248752593994, 0.20021343231201172]),
    ("rmsprop", dict(learning_rate=0.01, wd=0.01, clip_gradient=0.3),
     [2.23870849609375, -1.0644255876541138, 0.4617826044559479, 0.7080774307250977],
     [1.5197800397872925, -1.9508105516433716, 0.33158940076828003],
     [0.024390006437897682, 0.024390006437897682, 0.024390006437897682]),
    ("rmsprop", dict(learning_rate=0.01, wd=0.01, centered=True, clip_weights=0.9),
     [0.35050565004348755, -0.6526575088500977, -0.8999999761581421, 0.40032312273979187],
     [-0.8868083953857422, -0.12216942757368088, 0.4207789897918701],
     [0.1633625328540802, 0.37737521529197693, 0.37289246916770935]),
    ("adadelta", dict(wd=0.01, clip_gradient=0.3, rescale_grad=0.5),
     [-1.0300672054290771, 0.20437537133693695, 1.0887283086776733, 1.0908353328704834],
     [-0.5499637126922607, -0.2734236419200897, -0.8878098130226135],
     [0.020407894626259804, 0.024390000849962234, 0.01907854899764061]),
]
SHAPES = [(4, 3), (3,)]
IDX2NAME = {0: "fc_weight", 1: "fc_bias"}


def _case_data(ci):
    r = np.random.RandomState(100 + ci)
    ws = [r.randn(*s).astype(np.float32) for s in SHAPES]
    gs = [[r.randn(*s).astype(np.float32) for s in SHAPES] for _ in range(3)]
    return ws, gs


def _flat_state(s):
    if s is None:
        return []
    return list(s) if isinstance(s, (tuple, list)) else [s]


@pytest.mark.parametrize("ci", range(len(ORACLE)))
def test_matches_mxnet_oracle(ci, cpu_target):
    name, kw, w0, w1, s0 = ORACLE[ci]
    ws, gs = _case_data(ci)
    u = opt.get_updater(opt.create(name, param_idx2name=IDX2NAME, **kw))
    W = [torch.tensor(w) for w in ws]
    for step in gs:
        u([0, 1], [torch.tensor(g) for g in step], W)
    np.testing.assert_allclose(W[0].numpy().ravel()[:4], w0, rtol=2e-6, atol=2e-7)
    np.testing.assert_allclose(W[1].numpy(), w1, rtol=2e-6, atol=2e-7)
    if s0 is not None:
        np.testing.assert_allclose(_flat_state(u.states[0])[0].numpy().ravel()[:3], s0,
                                   rtol=2e-6, atol=2e-8)
    else:
        assert u.states[0] is None


# ----------------------------------------------------------------------------- numpy reference
def _np_step(name, kw, w, g, st, lr, wd, t):
    """Independent float64 implementation of mxnet's update rules."""
    rescale = kw.get("rescale_grad", 1.0)
    clip = kw.get("clip_gradient")

    def c(x):
        return np.clip(x, -clip, clip) if clip is not None else x
    if name == "sgd":
        mom = kw.get("momentum", 0.0)
        gr = c(rescale * g)
        if mom:
            st[0] = mom * st[0] - lr * wd * w - lr * gr
            return w + st[0]
        return (1 - lr * wd) * w - lr * gr
    if name == "nag":
        mom = kw["momentum"]
        gr = c(rescale * g)
        m = mom * st[0]
        wn = w - m + (mom + 1) * (m - lr * (gr + wd * w))
        st[0] = m - lr * (gr + wd * wn)
        return wn
    if name == "adam":
        b1, b2, eps = kw.get("beta1", 0.9), kw.get("beta2", 0.999), kw.get("epsilon", 1e-8)
        lr = lr * np.sqrt(1 - b2 ** t) / (1 - b1 ** t)
        gr = c(rescale * g + wd * w)
        st[0] = b1 * st[0] + (1 - b1) * gr
        st[1] = b2 * st[1] + (1 - b2) * gr * gr
        return w - lr * st[0] / (np.sqrt(st[1]) + eps)
    if name == "adagrad":
        gr = c(rescale * g)
        st[0] = st[0] + gr * gr
        return w - lr * (gr / np.sqrt(st[0] + kw.get("eps", 1e-7)) + w * wd)
    if name == "rmsprop":
        g1, g2, eps = kw.get("gamma1", 0.9), kw.get("gamma2", 0.9), kw.get("epsilon", 1e-8)
        gr = c(rescale * g + wd * w)
        st[0] = (1 - g1) * gr * gr + g1 * st[0]
        if kw.get("centered"):
            st[1] = (1 - g1) * gr + g1 * st[1]
            st[2] = g2 * st[2] - lr * gr / np.sqrt(st[0] - st[1] ** 2 + eps)
            out = w + st[2]
        else:
            out = w - lr * gr / np.sqrt(st[0] + eps)
        cw = kw.get("clip_weights")
        return np.clip(out, -cw, cw) if cw else out
    if name == "adadelta":
        rho, eps = kw.get("rho", 0.9), kw.get("epsilon", 1e-5)
        gr = c(rescale * g)
        st[0] = rho * st[0] + (1 - rho) * gr * gr
        d = np.sqrt(st[1] + eps) / np.sqrt(st[0] + eps) * gr
        st[1] = rho * st[1] + (1 - rho) * d * d
        return w - (d + wd * w)
    raise AssertionError(name)


NP_CASES = [
    ("sgd", dict(learning_rate=0.05, momentum=0.8, wd=0.02, clip_gradient=1.0, rescale_grad=0.7)),
    ("sgd", dict(learning_rate=0.05)),
    ("nag", dict(learning_rate=0.05, momentum=0.7, wd=0.03)),
    ("adam", dict(learning_rate=0.02, beta1=0.8, beta2=0.99, wd=0.01, rescale_grad=2.0)),
    ("adagrad", dict(learning_rate=0.1, eps=1e-6, wd=0.0, rescale_grad=0.5)),
    ("rmsprop", dict(learning_rate=0.01, gamma1=0.95, clip_gradient=0.5)),
    ("rmsprop", dict(learning_rate=0.01, centered=True, gamma1=0.9, gamma2=0.8, wd=0.01)),
    ("adadelta", dict(rho=0.95, epsilon=1e-6, wd=0.001)),
]


@pytest.mark.parametrize("name,kw", NP_CASES)
def test_matches_numpy_reference(name, kw, cpu_target):
    # one tensor larger than an interpreter block, so several programs share a tensor
    shapes = [(70000,), (33, 7), (1,)]
    rng = np.random.RandomState(7)
    ws = [rng.randn(*s) for s in shapes]
    o = opt.create(name, **kw)
    u = opt.get_updater(o)
    W = [torch.tensor(w, dtype=torch.float32) for w in ws]
    nws = [w.astype(np.float32).astype(np.float64) for w in ws]
    n_states = {"sgd": 1, "nag": 1, "adam": 2, "adagrad": 1, "adadelta": 2,
                "rmsprop": 3 if kw.get("centered") else 1}[name]
    nst = [[np.zeros(s) for _ in range(n_states)] for s in shapes]
    lr = kw.get("learning_rate", 0.01)
    for t in range(1, 4):
        gs = [rng.randn(*s).astype(np.float32) for s in shapes]
        u(list(range(len(shapes))), [torch.tensor(g) for g in gs], W)
        for i in range(len(shapes)):
            nws[i] = _np_step(name, kw, nws[i], gs[i].astype(np.float64), nst[i], lr,
                              kw.get("wd", 0.0), t)
    for w, nw in zip(W, nws):
        np.testing.assert_allclose(w.numpy(), nw, rtol=1e-4, atol=1e-5)


def test_weight_decay_pass_runs_only_where_decay_is_set():
    """The cpu update skips the ``- lr * wd * w`` pass of a group whose ``wd`` is 0
    (mxnet's default; biases' ``wd_mult`` 0); the values stay mxnet's formula."""
    from runtime import optimizer_cpu
    assert optimizer_cpu._scaled_by("(-(lr_ * wd_))", "wd_")
    assert optimizer_cpu._scaled_by("wd_", "wd_")
    assert not optimizer_cpu._scaled_by("(wd_ + 1.0)", "wd_")
    assert not optimizer_cpu._scaled_by("(-(rescale * lr_))", "wd_")
    rng = np.random.RandomState(3)
    shapes = [(50, 4), (4,)]
    for wd in (0.0, 0.05):
        o = opt.create("sgd", learning_rate=0.1, momentum=0.9, wd=wd)
        o.set_wd_mult({1: 0.0})                   # the "bias": no decay, its own group
        u = opt.get_updater(o)
        ws = [rng.randn(*s) for s in shapes]
        W = [torch.tensor(w, dtype=torch.float32) for w in ws]
        ref = [w.astype(np.float32).astype(np.float64) for w in ws]
        moms = [np.zeros(s) for s in shapes]
        for _ in range(3):
            gs = [rng.randn(*s).astype(np.float32) for s in shapes]
            u([0, 1], [torch.tensor(g) for g in gs], W)
            for i, decay in enumerate((wd, 0.0)):
                moms[i] = 0.9 * moms[i] - 0.1 * decay * ref[i] - 0.1 * gs[i]
                ref[i] = ref[i] + moms[i]
        for w, r in zip(W, ref):
            np.testing.assert_allclose(w.numpy(), r, rtol=1e-5, atol=1e-6)
    # the generated sources (kernel files) of the updates this process ran
    sources = [open(fn.__code__.co_filename).read() for fn in optimizer_cpu._FUNCTIONS.values()]
    assert any("if wd_: torch._foreach_add_(mom, w, alpha=(-(lr_ * wd_)))" in src
               for src in sources)


# ----------------------------------------------------------------------------- launches
@pytest.mark.parametrize("name,kw", [("sgd", {"momentum": 0.9}), ("adam", {}),
                                     ("rmsprop", {"centered": True}), ("nag", {"momentum": .5}),
                                     ("adagrad", {}), ("adadelta", {}), ("sgd", {})])
def test_one_launch_per_dtype_and_device(name, kw):
    rng = np.random.RandomState(0)
    shapes = [(rng.randint(1, 40), rng.randint(1, 9)) for _ in range(20)]
    ws = [torch.randn(*s) for s in shapes]
    gs = [torch.randn(*s) for s in shapes]
    u = opt.get_updater(opt.create(name, **kw))
    for step in range(2):
        LaunchCounter.reset()
        u.update_all(list(range(20)), gs, ws)
        assert LaunchCounter.total == 1
    # two dtypes -> two launches
    ws64 = [torch.randn(3, dtype=torch.float64) for _ in range(4)]
    gs64 = [torch.randn(3, dtype=torch.float64) for _ in range(4)]
    LaunchCounter.reset()
    u.update_all(list(range(20)) + list(range(100, 104)), gs + gs64, ws + ws64)
    assert LaunchCounter.total == 2


def test_two_devices_two_launches_and_per_device_counts():
    o = opt.create("adam")
    u = opt.get_updater(o)
    w0 = torch.zeros(4).as_subclass(NDArray)
    w1 = cpu(1) and torch.zeros(4).as_subclass(NDArray)
    w1._mx_ctx = cpu(1)
    LaunchCounter.reset()
    u.update_all([0, 1], [torch.ones(4), torch.ones(4)], [w0, w1])
    assert LaunchCounter.total == 2
    # mxnet keeps update counts per device id
    assert o._all_index_update_counts[0] == {0: 1}
    assert o._all_index_update_counts[1] == {1: 1}
    torch.testing.assert_close(w0, w1)


def test_single_call_path_and_update_methods():
    o = opt.create("SGD", learning_rate=0.5)     # case-insensitive like mxnet
    assert isinstance(o, opt.SGD)
    u = opt.get_updater(o)
    w = torch.ones(3)
    u(0, torch.ones(3), w)
    torch.testing.assert_close(w, torch.full((3,), 0.5))
    o.update(1, w, torch.ones(3), None)
    torch.testing.assert_close(w, torch.zeros(3))
    with pytest.raises(ValueError):
        opt.create("no_such_optimizer")


def test_user_optimizer_overriding_update_runs_python_path():
    @opt.register
    class HalfStep(opt.Optimizer):
        def update(self, index, weight, grad, state):
            self._update_count(index)
            weight[:] = weight - 0.5 * grad

    o = opt.create("halfstep")
    u = opt.get_updater(o)
    w = torch.ones(2)
    u([0], [torch.ones(2)], [w])
    torch.testing.assert_close(w, torch.full((2,), 0.5))
    assert o.num_update == 1


@pytest.mark.parametrize("base, called", [("SGD", False), ("NAG", False), ("LAMB", False),
                                          ("LARS", False), ("Adam", True), ("RMSProp", True)])
def test_updater_calls_a_subclass_update_where_mxnet_does(base, called):
    """mxnet 1.9.1's Updater calls update_multi_precision, which SGD, NAG, LARS and LAMB
    define to run their own rule: a subclass overriding ``update`` alone (mxnet's DSD example's
    SparseSGD) is never called there, and the base rule runs. Other optimizers' reach
    ``self.update``."""
    calls = []

    class Sub(getattr(opt, base)):
        def update(self, index, weight, grad, state):
            calls.append(index)
            super().update(index, weight, grad, state)

    o = Sub(learning_rate=0.5)
    u = opt.get_updater(o)
    w, ref = torch.ones(3), torch.ones(3)
    u([0], [torch.full((3,), 0.5)], [w])
    opt.get_updater(getattr(opt, base)(learning_rate=0.5))([0], [torch.full((3,), 0.5)], [ref])
    assert calls == ([0] if called else [])
    torch.testing.assert_close(w, ref)
    assert Sub._python_update() is called


# ----------------------------------------------------------------------------- lr/wd mult
def test_lr_wd_mult_from_symbol_attributes():
    x = sym.Variable("data")
    wv = sym.Variable("fc_weight", lr_mult=2.0)
    bv = sym.Variable("fc_bias", wd_mult=3.0)
    net = sym.FullyConnected(x, weight=wv, bias=bv, num_hidden=2, name="fc")
    o = opt.create("sgd", learning_rate=0.1, wd=0.1, sym=net,
                   param_idx2name={0: "fc_weight", 1: "fc_bias", 2: "other"})
    # mxnet 1.9.1: {'fc_weight': 2.0} {'fc_bias': 3.0, 'other': 0.0} [0.2, 0.1, 0.1] [0.1, 0.3, 0.0]
    assert o.lr_mult == {"fc_weight": 2.0}
    assert o.wd_mult == {"fc_bias": 3.0, "other": 0.0}
    assert o._get_lrs([0, 1, 2]) == pytest.approx([0.2, 0.1, 0.1])
    assert o._get_wds([0, 1, 2]) == pytest.approx([0.1, 0.3, 0.0])
    # and the kernel uses them
    u = opt.get_updater(o)
    ws = [torch.ones(2), torch.ones(2), torch.ones(2)]
    u([0, 1, 2], [torch.zeros(2)] * 3, ws)
    np.testing.assert_allclose([w[0].item() for w in ws], [1 - 0.2 * 0.1, 1 - 0.1 * 0.3, 1.0],
                               rtol=1e-6)


def test_wd_mult_zero_for_bias_and_beta_by_name():
    o = opt.create("sgd", wd=0.5, param_idx2name={0: "a_weight", 1: "a_bias", 2: "bn_gamma",
                                                  3: "bn_beta"})
    assert o._get_wds([0, 1, 2, 3]) == [0.5, 0.0, 0.5, 0.0]
    o.set_wd_mult({"a_bias": 2.0})
    assert o._get_wds([1]) == [1.0]
    o.set_lr_mult({0: 3.0})
    assert o._get_lrs([0, 1]) == pytest.approx([0.03, 0.01])


# ----------------------------------------------------------------------------- base class
# (expected values: mxnet 1.9.1's Optimizer given the same calls)
def test_lr_from_scheduler_or_argument(capsys):
    s = lrs.FactorScheduler(step=2, factor=0.5, base_lr=0.3)
    o = opt.create("sgd", learning_rate=0.1, lr_scheduler=s)
    assert capsys.readouterr().out == ("learning rate from ``lr_scheduler`` has been "
                                       "overwritten by ``learning_rate`` in optimizer.\n")
    assert (s.base_lr, o.lr) == (0.1, 0.1)
    opt.create("sgd", learning_rate=0.1,
               lr_scheduler=lrs.FactorScheduler(step=2, factor=0.5, base_lr=0.1))
    assert capsys.readouterr().out == ""            # same rate: nothing printed
    o = opt.create("sgd", lr_scheduler=lrs.FactorScheduler(step=2, factor=0.5, base_lr=0.2))
    assert (o.lr, o.learning_rate) == (None, 0.2)
    with pytest.raises(UserWarning, match="^LRScheduler of the optimizer has already been "
                                          "defined. Note that set_learning_rate can mutate"):
        o.set_learning_rate(0.5)
    o = opt.create("sgd")
    assert (o.lr, o.learning_rate) == (0.01, 0.01)
    o.set_learning_rate(0.5)
    assert o.learning_rate == 0.5
    with pytest.raises(DeprecationWarning):
        o.set_lr_scale({})


def test_registry_override_warning_and_lookup():
    with pytest.raises(ValueError, match="^Cannot find optimizer NoSuch"):
        opt.create("NoSuch")
    with pytest.raises(MXNetError, match="register takes a class"):
        opt.register(opt.SGD())
    with pytest.raises(MXNetError, match="param_idx2name should be a dict of param indexes "
                                         "to names."):
        opt.create("sgd", param_idx2name=["fc_weight"])

    def make():
        class TwiceRegistered(opt.SGD):
            pass
        return TwiceRegistered
    first, second = make(), make()
    try:
        assert opt.register(first) is first
        with pytest.warns(UserWarning) as caught:
            opt.register(second)
        where = f"{__name__}.TwiceRegistered"
        assert [str(w.message) for w in caught] == [
            f"WARNING: New optimizer {where} is overriding existing optimizer {where}"]
        assert type(opt.create("twiceREGISTERED", momentum=0.5)) is second
    finally:
        opt.Optimizer.opt_registry.pop("twiceregistered", None)


def test_update_counts_start_at_begin_num_update_per_device():
    o = opt.create("sgd", begin_num_update=5)
    o._update_count(0)
    o._update_count([0, 1])
    assert (o.num_update, o._index_update_count) == (7, {0: 7, 1: 6})
    o._set_current_context(1)
    o._update_count(0)
    assert (o.num_update, o._index_update_count) == (7, {0: 6})
    o._set_current_context(0)
    o._update_count(2)
    assert o._all_index_update_counts == {0: {0: 7, 1: 6, 2: 6}, 1: {0: 6}}
    assert o._index_update_count is o._all_index_update_counts[0]


def test_multiplier_precedence_param_dict_index_name():
    class Param:
        def __init__(self, lr_mult, wd_mult):
            self.lr_mult, self.wd_mult = lr_mult, wd_mult
    o = opt.create("sgd", learning_rate=0.1, wd=0.2,
                   param_idx2name={0: "a_weight", 1: "b_bias", 2: "c_weight"},
                   param_dict={0: Param(3.0, 4.0)})
    o.set_lr_mult({0: 10.0, "c_weight": 0.5, 1: 7.0})
    o.set_wd_mult({2: 9.0})
    # bit for bit: lr * mult, in mxnet's order
    assert o._get_lrs([0, 1, 2, "c_weight", 3]) == [0.30000000000000004, 0.7000000000000001,
                                                   0.05, 0.05, 0.1]
    assert o._get_wds([0, 1, 2, "b_bias", 3]) == [0.8, 0.0, 1.8, 0.0, 0.2]
    # an index nothing names keeps the rate as given; a named one is multiplied by 1.0
    assert type(opt.create("sgd", learning_rate=1)._get_lr(5)) is int
    assert opt.create("sgd", learning_rate=1, param_idx2name={5: "x"})._get_lrs([5]) == [1.0]


@pytest.mark.parametrize("name, kw, named", [
    ("sgd", dict(momentum=0.9), "SGD optimizer"), ("nag", dict(momentum=0.9), "NAG optimizer"),
    ("lars", dict(momentum=0.9), "SGD optimizer"), ("adam", {}, "optimizer"),
    ("rmsprop", {}, "optimizer"), ("signum", {}, "optimizer")])
def test_float16_without_master_copy_warns_as_mxnet(name, kw, named):
    with pytest.warns(UserWarning) as caught:
        opt.create(name, **kw).create_state_multi_precision(0, torch.zeros(2, dtype=torch.float16))
    assert [str(w.message) for w in caught] == [
        "Accumulating with float16 in optimizer can lead to poor accuracy or slow "
        "convergence. Consider using multi_precision=True option of the " + named]


def test_adam_bias_corrected_lr_is_mxnets_to_the_last_bit():
    # the lr mxnet 1.9.1's Adam.update hands adam_update on steps 1..8 (float64 weight)
    mxnet_lrs = [0.0010500000000000006, 0.0008228929321471774, 0.0007416261053249376,
                 0.0007060623372774677, 0.0006914891883588129, 0.0006884926145018349,
                 0.0006925981761477987, 0.0007013603530775486]
    o = opt.create("adam", learning_rate=0.003, beta1=0.8, beta2=0.99,
                   param_idx2name={0: "w_weight"})
    o.set_lr_mult({0: 0.7})
    got = []
    for _ in mxnet_lrs:
        o._update_count(0)
        got.append(o._hyper([0])[0][0])
    assert got == mxnet_lrs


def test_pickle_leaves_out_param_dict_and_restores_counts():
    o = opt.create("sgd", momentum=0.9, param_dict={0: object()})
    o._update_count([0, 1])
    state = o.__getstate__()
    assert "param_dict" not in state and "_launch_plans" not in state
    # mxnet's pickles have no _current_device; without _index_update_count it is found
    mxnet_like = {k: v for k, v in state.items()
                  if k not in ("_current_device", "_index_update_count")}
    back = opt.SGD.__new__(opt.SGD)
    back.__setstate__(mxnet_like)
    assert (back.param_dict, back._current_device) == ({}, 0)
    assert back._index_update_count is back._all_index_update_counts[0]
    assert back._index_update_count == {0: 1, 1: 1}


def test_clip_and_rescale():
    o = opt.create("sgd", learning_rate=1.0, rescale_grad=0.5, clip_gradient=1.0)
    w = torch.zeros(4)
    opt.get_updater(o)(0, torch.tensor([-10.0, -1.0, 1.0, 10.0]), w)
    torch.testing.assert_close(w, torch.tensor([1.0, 0.5, -0.5, -1.0]))


# ----------------------------------------------------------------------------- schedules
def test_schedulers_match_mxnet():
    # sequences printed by mxnet 1.9.1 for the same arguments
    f = lrs.FactorScheduler(step=3, factor=0.5, stop_factor_lr=0.02, base_lr=0.1)
    assert [f(i) for i in range(14)] == pytest.approx(
        [0.1, 0.1, 0.1, 0.1, 0.05, 0.05, 0.05, 0.025, 0.025, 0.025, 0.02, 0.02, 0.02, 0.02])
    m = lrs.MultiFactorScheduler(step=[2, 5], factor=0.1, base_lr=1.0, warmup_steps=1,
                                 warmup_begin_lr=0.5)
    assert [m(i) for i in range(8)] == pytest.approx([0.5, 1.0, 1.0, 0.1, 0.1, 0.1, 0.01, 0.01])
    p = lrs.PolyScheduler(max_update=10, base_lr=0.1, pwr=2, final_lr=0.01, warmup_steps=2)
    assert [p(i) for i in range(13)] == pytest.approx(
        [0.0, 0.05, 0.1, 0.07890625, 0.060625, 0.04515625, 0.0325, 0.02265625, 0.015625,
         0.01140625, 0.01, 0.01, 0.01])
    c = lrs.CosineScheduler(max_update=10, base_lr=0.1, final_lr=0.0, warmup_steps=2,
                            warmup_begin_lr=0.01, warmup_mode="constant")
    assert [c(i) for i in range(13)] == pytest.approx(
        [0.01, 0.01, 0.1, 0.09619397662556434, 0.08535533905932738, 0.0691341716182545, 0.05,
         0.030865828381745515, 0.014644660940672627, 0.0038060233744356634, 0.0, 0.0, 0.0])
    with pytest.raises(ValueError):
        lrs.FactorScheduler(step=0)


def test_scheduled_sgd_matches_mxnet():
    o = opt.create("sgd", learning_rate=1.0,
                   lr_scheduler=lrs.FactorScheduler(step=2, factor=0.5))
    u = opt.get_updater(o)
    w = torch.zeros(2)
    for _ in range(5):
        u(0, torch.ones(2), w)
    torch.testing.assert_close(w, torch.full((2,), -3.25))   # mxnet 1.9.1
    assert o.num_update == 5 and o.learning_rate == 0.25


# ----------------------------------------------------------------------------- fp16
def test_multi_precision_keeps_fp32_master():
    o = opt.create("sgd", learning_rate=1e-4, momentum=0.9, multi_precision=True)
    u = opt.get_updater(o)
    w = torch.ones(8, dtype=torch.float16)
    for _ in range(10):
        u(0, torch.ones(8, dtype=torch.float16), w)
    mom, master = u.states[0]
    assert torch_dtype(master) == torch.float32 and torch_dtype(mom) == torch.float32
    # fp16 alone cannot move 1.0 by 1e-4 steps; the master copy can
    assert master[0].item() < 1.0 - 1e-3
    assert w[0].item() == pytest.approx(master[0].item(), abs=1e-3)
    o2 = opt.create("adam", multi_precision=True)
    u2 = opt.get_updater(o2)
    w2 = torch.ones(4, dtype=torch.float16)
    u2(0, torch.ones(4, dtype=torch.float16), w2)
    master2, (mean, var) = u2.states[0]
    assert torch_dtype(master2) == torch.float32 and torch_dtype(mean) == torch.float32
    assert w2[0].item() == pytest.approx(1 - 0.001, abs=1e-3)


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
@pytest.mark.parametrize("name,kw", [("sgd", dict(momentum=0.9, wd=0.01)), ("nag", dict(momentum=0.9)),
                                     ("adam", {}), ("adagrad", {}), ("rmsprop", {}),
                                     ("adadelta", {})])
def test_multi_precision_master_follows_the_float32_update(name, kw, dtype):
    """With multi_precision, a float16 / bfloat16 weight's float32 master takes exactly
    the float32 optimizer's steps (on the gradient widened to float32), and the weight
    is the master rounded to its dtype (mxnet's mp_* rule; bfloat16 here as float16)."""
    rng = np.random.RandomState(0)
    w0 = torch.tensor(rng.randn(16).astype(np.float32)).to(dtype)
    mp = opt.get_updater(opt.create(name, learning_rate=0.05, multi_precision=True, **kw))
    ref = opt.get_updater(opt.create(name, learning_rate=0.05, **kw))
    w, w32 = w0.clone(), w0.float()
    for _ in range(3):
        g = torch.tensor(rng.randn(16).astype(np.float32)).to(dtype)
        mp(0, g, w)
        ref(0, g.float(), w32)
    # mxnet's state layouts: (momentum, master) for SGD and NAG, (master, state) else
    master = mp.states[0][1 if name in ("sgd", "nag") else 0]
    assert torch_dtype(master) == torch.float32 and w.dtype == dtype
    torch.testing.assert_close(master, w32, rtol=1e-6, atol=1e-7)
    assert torch.equal(w, w32.to(dtype))


# ----------------------------------------------------------------------------- states
def _train(u, ws, steps, seed):
    rng = np.random.RandomState(seed)
    for _ in range(steps):
        gs = [torch.tensor(rng.randn(*w.shape).astype(np.float32)) for w in ws]
        u(list(range(len(ws))), gs, ws)


@pytest.mark.parametrize("name,kw", [("adam", dict(learning_rate=0.01)),
                                     ("sgd", dict(momentum=0.9, lr_scheduler=lrs.FactorScheduler(
                                         step=2, factor=0.5, base_lr=0.1))),
                                     ("rmsprop", dict(centered=True))])
def test_states_round_trip_continue_equals_uninterrupted(name, kw):
    import copy
    shapes = [(5, 4), (4,)]
    base = [torch.randn(*s) for s in shapes]
    ws_a = [w.clone() for w in base]
    ua = opt.get_updater(opt.create(name, **copy.deepcopy(kw)))
    _train(ua, ws_a, 3, 1)
    _train(ua, ws_a, 3, 2)

    ws_b = [w.clone() for w in base]
    ub = opt.get_updater(opt.create(name, **copy.deepcopy(kw)))
    _train(ub, ws_b, 3, 1)
    blob = ub.get_states(dump_optimizer=True)
    assert blob.startswith(opt.MAGIC)
    uc = opt.get_updater(opt.create("sgd"))     # optimizer replaced by the dumped one
    uc.set_states(blob)
    assert type(uc.optimizer) is type(ub.optimizer)
    assert uc.optimizer.num_update == 3
    _train(uc, ws_b, 3, 2)
    for a, b in zip(ws_a, ws_b):
        torch.testing.assert_close(a, b, rtol=0, atol=0)


def test_states_without_optimizer_and_key_types():
    u = opt.get_updater(opt.create("adam"))
    u.update_all([3, 7], [torch.ones(2), torch.ones(3)], [torch.zeros(2), torch.zeros(3)])
    u2 = opt.get_updater(opt.create("adam"))
    u2.set_states(u.get_states())
    assert set(u2.states) == {3, 7}
    torch.testing.assert_close(u2.states[7][0], u.states[7][0])
    us = opt.get_updater(opt.create("sgd", momentum=0.5))
    us("w", torch.ones(2), torch.zeros(2))
    us2 = opt.get_updater(opt.create("sgd", momentum=0.5))
    us2.set_states(us.get_states())
    assert list(us2.states) == ["w"]


def test_loaded_states_move_to_weight_device():
    u = opt.get_updater(opt.create("sgd", momentum=0.9))
    u(0, torch.ones(3), torch.zeros(3))
    u2 = opt.get_updater(opt.create("sgd", momentum=0.9))
    u2.set_states(u.get_states())
    w = torch.zeros(3).as_subclass(NDArray)
    w._mx_ctx = cpu(1)
    u2(0, torch.ones(3), w)
    st = u2.states[0]
    assert isinstance(st, NDArray) and st.context == cpu(1) and st.device == w.device
    torch.testing.assert_close(st, torch.full((3,), -0.019))


class _Evil:
    def __reduce__(self):
        import os
        return (os.system, ("echo pwned",))


def test_malicious_pickle_is_refused():
    u = opt.get_updater(opt.create("sgd"))
    evil = pickle.dumps({0: _Evil()})
    with pytest.raises(MXNetError, match="allow_pickle"):
        u.set_states(evil)
    with pytest.raises(MXNetError, match="refusing"):
        u.set_states(evil, allow_pickle=True)
    with pytest.raises(MXNetError):
        u.set_states(b"garbage that is no state file")
    # a tampered safe file cannot name a class to run
    good = opt.get_updater(opt.create("sgd", momentum=0.9))
    good(0, torch.ones(2), torch.zeros(2))
    blob = good.get_states(True).replace(b'"class": "sgd"', b'"class": "os.system"')
    with pytest.raises(MXNetError):
        u.set_states(blob)


# mxnet 1.9.1: sgd(lr=0.1, momentum=0.9); updater(0, ones(2,3), w); updater('b', ones, w);
# the bytes of updater.get_states() (a pickle of {0: NDArray, 'b': NDArray}, both -0.1).
MX_STATES_PICKLE = bytes.fromhex(
    "800495f6000000000000007d94284b008c156d786e65742e6e6461727261792e6e646172726179948c074e44"
    "41727261799493944e859452947d948c0668616e646c65948c086275696c74696e73948c0962797465617272"
    "61799493944340c9fa93f9000000000200000002000000000000000300000000000000010000000000000000"
    "000000cdccccbdcdccccbdcdccccbdcdccccbdcdccccbdcdccccbd948594529473628c016294680368045294"
    "7d946807680a4340c9fa93f90000000002000000020000000000000003000000000000000100000000000000"
    "00000000cdccccbdcdccccbdcdccccbdcdccccbdcdccccbdcdccccbd94859452947362752e")


def test_mxnet_pickle_only_with_opt_in():
    data = MX_STATES_PICKLE
    assert b"mxnet.ndarray.ndarray" in data and b"bytearray" in data
    u = opt.get_updater(opt.create("sgd", momentum=0.9))
    with pytest.raises(MXNetError, match="allow_pickle"):
        u.set_states(data)
    u.set_states(data, allow_pickle=True)
    assert set(u.states) == {0, "b"}
    torch.testing.assert_close(u.states[0], torch.full((2, 3), -0.1))
    w = torch.zeros(2, 3)
    u(0, torch.ones(2, 3), w)      # continues from the loaded momentum
    torch.testing.assert_close(w, torch.full((2, 3), -0.9 * 0.1 - 0.01 * 1))


@pytest.mark.parametrize("name,kw", NP_CASES + [("sgd", dict(momentum=0.9, multi_precision=True))])
def test_cpu_lowering_equals_kernel(monkeypatch, name, kw):
    """The cpu target's foreach function and the Triton kernel (in the interpreter) give
    the same numbers, each in one launch per step for all parameters."""
    dt = torch.float16 if kw.get("multi_precision") else torch.float32
    base = [torch.randn(50, 3).to(dt), torch.randn(7).to(dt)]
    grads = [[torch.randn(50, 3).to(dt), torch.randn(7).to(dt)] for _ in range(3)]
    results = []
    for target in ("interpret", "cpu"):
        monkeypatch.setenv("SYMTRITON_CPU_TARGET", target)
        u = opt.get_updater(opt.create(name, **kw))
        ws = [w.clone() for w in base]
        gs0 = [[g.clone() for g in gs] for gs in grads]
        LaunchCounter.reset()
        for gs in grads:
            u([0, 1], gs, ws)
        assert LaunchCounter.total == 3
        for gs, g0 in zip(grads, gs0):   # gradients are read, never written
            for g, g_ in zip(gs, g0):
                assert torch.equal(g, g_)
        results.append(ws)
    for a, b in zip(*results):
        torch.testing.assert_close(a, b, rtol=1e-5, atol=1e-6)


# mxnet 1.9.1: sgd(learning_rate=0.1, momentum=0.9, wd=0.01, lr_scheduler=FactorScheduler(step=2,
# factor=0.5), param_idx2name={0: 'fc_weight', 1: 'fc_bias'}); weights arange(6).reshape(2, 3)
# twice; three updater([0, 1], [ones, ones], [w, w2]); get_states(dump_optimizer=True).
MX_DUMP_PICKLE = bytes.fromhex(
    "8004956b030000000000007d94284b008c156d786e65742e6e6461727261792e6e646172726179948c074e44"
    "41727261799493944e859452947d948c0668616e646c65948c086275696c74696e73948c0962797465617272"
    "61799493944340c9fa93f9000000000200000002000000000000000300000000000000010000000000000000"
    "0000003b1062bef55264beac9566be65d868be1e1b6bbed75d6dbe948594529473624b016803680452947d94"
    "6807680a4340c9fa93f900000000020000000200000000000000030000000000000001000000000000000000"
    "0000d24d62bed24d62bed24d62bed24d62bed24d62bed24d62be94859452947362758c196d786e65742e6f70"
    "74696d697a65722e6f7074696d697a6572948c035347449493942981947d94288c0c72657363616c655f6772"
    "616494473ff00000000000008c0c6c725f7363686564756c6572948c126d786e65742e6c725f736368656475"
    "6c6572948c0f466163746f725363686564756c65729493942981947d94288c07626173655f6c7294473fa999"
    "999999999a8c0c7761726d75705f7374657073944b008c0f7761726d75705f66696e616c5f6c7294473f847a"
    "e147ae147b8c0f7761726d75705f626567696e5f6c72944b008c0b7761726d75705f6d6f6465948c066c696e"
    "656172948c0473746570944b028c06666163746f7294473fe00000000000008c0e73746f705f666163746f72"
    "5f6c7294473e45798ee2308c3a8c05636f756e74944b0275628c026c7294473fb999999999999a8c02776494"
    "473f847ae147ae147b8c076c725f6d756c74947d948c0777645f6d756c74947d948c0766635f626961739447"
    "0000000000000000738c10626567696e5f6e756d5f757064617465944b008c0a6e756d5f757064617465944b"
    "038c185f616c6c5f696e6465785f7570646174655f636f756e7473947d944b007d94284b004b034b014b0375"
    "738c135f696e6465785f7570646174655f636f756e749468348c0d636c69705f6772616469656e74944e8c0f"
    "6d756c74695f707265636973696f6e94898c0d6167677265676174655f6e756d944b048c08696478326e616d"
    "65947d94284b008c0966635f776569676874944b01682f758c0873796d5f696e666f94298c0e616c6c6f775f"
    "6e705f617272617994898c086d6f6d656e74756d94473feccccccccccccd8c0b6c617a795f75706461746594"
    "88756286942e")


def test_mxnet_pickle_with_optimizer_continues_like_mxnet():
    u = opt.get_updater(opt.create("adam"))
    with pytest.raises(MXNetError, match="allow_pickle"):
        u.set_states(MX_DUMP_PICKLE)
    u.set_states(MX_DUMP_PICKLE, allow_pickle=True)
    o = u.optimizer
    assert isinstance(o, opt.SGD) and isinstance(o.lr_scheduler, lrs.FactorScheduler)
    assert o.num_update == 3 and o.wd_mult == {"fc_bias": 0.0}
    # weights after the three mxnet steps, then one more step here
    w = torch.tensor([-0.5106650590896606, 0.48422831296920776, 1.4791216850280762,
                      2.474015235900879, 3.4689083099365234, 4.463801383972168]).reshape(2, 3)
    w2 = torch.tensor([-0.5109999775886536, 0.48899999260902405, 1.4890000820159912,
                       2.489000082015991, 3.489000082015991, 4.488999843597412]).reshape(2, 3)
    u([0, 1], [torch.ones(2, 3)] * 2, [w, w2])
    # mxnet 1.9.1 after its fourth step (lr 0.05, num_update 4)
    np.testing.assert_allclose(w.numpy().ravel(), [
        -0.7590982913970947, 0.2333107590675354, 1.2257198095321655, 2.2181291580200195,
        3.210537910461426, 4.202946662902832], rtol=1e-6)
    np.testing.assert_allclose(w2.numpy().ravel(), [
        -0.7598999738693237, 0.24010001122951508, 1.2401001453399658, 2.240100145339966,
        3.240100145339966, 4.240099906921387], rtol=1e-6)
    assert o.lr_scheduler.base_lr == 0.05 and o.num_update == 4
    # and it saves again in the safe format
    u2 = opt.get_updater(opt.create("sgd"))
    u2.set_states(u.get_states(dump_optimizer=True))
    assert u2.optimizer.num_update == 4


def test_raw_ndarray_decoder_of_pickled_states_is_ndarray_ios():
    import struct
    raw = (struct.pack("<IiI", 0xF993FAC9, 0, 2) + struct.pack("<qq", 2, 3)
           + struct.pack("<iii", 1, 0, 0) + np.arange(6, dtype=np.float32).tobytes())
    a = safe_unpickle._decode_raw_ndarray(raw)
    torch.testing.assert_close(a, torch.arange(6, dtype=torch.float32).reshape(2, 3))
    with pytest.raises(MXNetError, match="truncated"):
        safe_unpickle._decode_raw_ndarray(raw[:-2])


def test_nag_multi_precision_and_sgd_without_momentum_states_round_trip():
    for name, kw in (("nag", dict(momentum=0.9)), ("sgd", {})):
        u = opt.get_updater(opt.create(name, multi_precision=True, **kw))
        w = torch.ones(4, dtype=torch.float16)
        u(0, torch.ones(4, dtype=torch.float16), w)
        mom, master = u.states[0]
        assert torch_dtype(master) == torch.float32 and (mom is None) == (name == "sgd")
        u2 = opt.get_updater(opt.create(name, multi_precision=True, **kw))
        u2.set_states(u.get_states())
        assert (u2.states[0][0] is None) == (name == "sgd")
        torch.testing.assert_close(u2.states[0][1], master)


# ------------------------------------------------------------ reused launch plans
def _plan_case_step(updater, weights, grads):
    updater([0, 1], grads, weights)
    return [w.clone() for w in weights]


@pytest.mark.parametrize("name, kw", [("sgd", dict(learning_rate=0.1, momentum=0.9, wd=0.01)),
                                      ("adam", dict(learning_rate=0.01, clip_gradient=0.3))])
def test_a_reused_launch_plan_follows_replaced_states_and_changed_rules(name, kw):
    """The fused update reuses its grouping of tensors between calls on the same arrays;
    replaced states (set_states), a changed rule (momentum switched off) and other
    gradient arrays must still be what it updates: equal, bit for bit, to an optimizer
    that plans every call afresh."""
    g = torch.Generator().manual_seed(0)
    def arrays():
        return [torch.randn(4, 3, generator=g).as_subclass(NDArray),
                torch.randn(3, generator=g).as_subclass(NDArray)]
    weights, grads, other_grads = arrays(), arrays(), arrays()
    fresh_w = [w.clone() for w in weights]
    reused = opt.get_updater(opt.create(name, **kw))
    fresh = opt.get_updater(opt.create(name, **kw))

    def both(gs):
        fresh.optimizer._plans.clear()
        want = _plan_case_step(fresh, fresh_w, [x.clone() for x in gs])
        got = _plan_case_step(reused, weights, gs)
        for a, b in zip(got, want):
            assert torch.equal(a, b)
    for _ in range(2):
        both(grads)
    assert len(reused.optimizer._plans) == 1
    reused.set_states(reused.get_states())      # new state objects
    fresh.set_states(fresh.get_states())
    both(grads)
    both(other_grads)
    if name == "sgd":
        reused.optimizer.momentum = fresh.optimizer.momentum = 0.0
        both(grads)
    both(grads)
    assert reused.get_states() == fresh.get_states()    # the states updated are the new ones
