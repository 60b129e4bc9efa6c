"""BucketingModule: mxnet 1.9.1 semantics (one Module per bucket, shared parameters,
memory, optimizer and kernels; checkpoints of the default bucket) on compiled Programs.

The model is an unrolled LSTM language model written with raw symbols (Embedding,
per-step FullyConnected i2h / h2h with shared weight Variables, SliceChannel,
Activation, Concat, FullyConnected, SoftmaxOutput); the bucket key is the sequence
length.
"""
import logging
import os
import time

import numpy as np
import pytest
import torch

import compiler
import compiler.artifacts.cache
import module_api as mx
import module_api.io  # noqa: F401
import module_api.metric  # noqa: F401
import module_api.module  # noqa: F401
from compiler.frontend.name import NameManager
from runtime import threads

nd = mx.ndarray

VOCAB, HID, BATCH = 30, 8, 4
BUCKETS = (3, 5, 7)


@pytest.fixture(autouse=True)
def _isolated_rng():
    """Seed numpy / torch for each test here and give later test files the global
    random state they would have had without this file."""
    np_state, torch_state = np.random.get_state(), torch.get_rng_state()
    np.random.seed(0)
    torch.manual_seed(0)
    yield
    np.random.set_state(np_state)
    torch.set_rng_state(torch_state)


def lstm_sym_gen(seq_len, vocab=VOCAB, num_hidden=HID):
    """An unrolled one-layer LSTM LM; ``seq_len`` steps. The Embedding and the decoder
    FullyConnected are unnamed, so their parameter names (``embedding0_weight``,
    ``fullyconnected0_weight``) depend on a fresh name scope per call."""
    data = mx.sym.Variable('data')
    label = mx.sym.Variable('softmax_label')
    embed = mx.sym.Embedding(data, input_dim=vocab, output_dim=num_hidden)
    wi = mx.sym.Variable('l0_i2h_weight')
    bi = mx.sym.Variable('l0_i2h_bias')
    wh = mx.sym.Variable('l0_h2h_weight')
    bh = mx.sym.Variable('l0_h2h_bias')
    xs = mx.sym.SliceChannel(embed, num_outputs=seq_len, axis=1, squeeze_axis=True)
    h = c = None
    hs = []
    for t in range(seq_len):
        gates = mx.sym.FullyConnected(xs[t], weight=wi, bias=bi, num_hidden=4 * num_hidden,
                                      name='t%d_i2h' % t)
        if h is not None:
            gates = gates + mx.sym.FullyConnected(h, weight=wh, bias=bh,
                                                  num_hidden=4 * num_hidden, name='t%d_h2h' % t)
        sl = mx.sym.SliceChannel(gates, num_outputs=4, name='t%d_slice' % t)
        in_gate = mx.sym.Activation(sl[0], act_type='sigmoid')
        forget_gate = mx.sym.Activation(sl[1], act_type='sigmoid')
        in_transform = mx.sym.Activation(sl[2], act_type='tanh')
        out_gate = mx.sym.Activation(sl[3], act_type='sigmoid')
        c = in_gate * in_transform if c is None else forget_gate * c + in_gate * in_transform
        h = out_gate * mx.sym.Activation(c, act_type='tanh')
        hs.append(h)
    out = mx.sym.Reshape(mx.sym.Concat(*hs, dim=1), shape=(-1, num_hidden))
    pred = mx.sym.FullyConnected(out, num_hidden=vocab)
    sm = mx.sym.SoftmaxOutput(pred, label=mx.sym.Reshape(label, shape=(-1,)), name='softmax')
    return sm, ('data',), ('softmax_label',)


def make_batch(seq_len, batch=BATCH, seed=0):
    """Next-token task: label[t] = (data[t] + 1) % VOCAB."""
    rng = np.random.RandomState(seed * 101 + seq_len)
    x = rng.randint(0, VOCAB, size=(batch, seq_len))
    y = (x + 1) % VOCAB
    return mx.io.DataBatch(
        [nd.array(x)], [nd.array(y)], bucket_key=seq_len,
        provide_data=[mx.io.DataDesc('data', (batch, seq_len))],
        provide_label=[mx.io.DataDesc('softmax_label', (batch, seq_len))])


def fixed_params(seed=3):
    """Deterministic parameter values (same for every module under test)."""
    rng = np.random.RandomState(seed)
    shapes = {'embedding0_weight': (VOCAB, HID),
              'l0_i2h_weight': (4 * HID, HID), 'l0_i2h_bias': (4 * HID,),
              'l0_h2h_weight': (4 * HID, HID), 'l0_h2h_bias': (4 * HID,),
              'fullyconnected0_weight': (VOCAB, HID), 'fullyconnected0_bias': (VOCAB,)}
    return {k: nd.array(rng.uniform(-0.4, 0.4, size=s)) for k, s in shapes.items()}


def make_module(default_key=7, context=None, optimizer='sgd',
                optimizer_params=(('learning_rate', 0.5),), **kwargs):
    mod = mx.mod.BucketingModule(lstm_sym_gen, default_bucket_key=default_key,
                                 context=context or mx.cpu(), **kwargs)
    mod.bind([('data', (BATCH, default_key))], [('softmax_label', (BATCH, default_key))])
    mod.init_params(arg_params=fixed_params())
    mod.init_optimizer(optimizer=optimizer, optimizer_params=optimizer_params)
    return mod


def loss_of(mod, batch):
    """Mean cross entropy of the current outputs on ``batch``'s labels."""
    prob = mod.get_outputs()[0].asnumpy()
    label = batch.label[0].asnumpy().reshape(-1).astype(int)
    return float(-np.mean(np.log(prob[np.arange(label.size), label] + 1e-12)))


def train_step(mod, batch):
    mod.forward(batch, is_train=True)
    loss = loss_of(mod, batch)
    mod.backward()
    mod.update()
    return loss


def params_np(mod):
    arg, _ = mod.get_params()
    return {k: v.asnumpy().copy() for k, v in arg.items()}


def _tensors_of(exe):
    for d in (exe.arg_dict, exe.grad_dict, exe.aux_dict):
        yield from d.values()
    yield from exe.outputs
    yield from exe._pool.tensors
    for bufs in exe._buffers.values():
        yield from bufs
    for heads in exe._head_grads.values():
        yield from heads.values()


def held_bytes(bmod):
    """Bytes of all distinct tensors held by all buckets' executors (parameters,
    gradients, aux states, inputs, outputs, head gradients and the internal
    buffer pool), each storage counted once, by its data_ptr."""
    storages = {}
    for mod in bmod._buckets.values():
        group = mod._exec_group
        for exe in list(group.execs) + list(group._exec_cache.values()):
            for t in _tensors_of(exe):
                if t is None:
                    continue
                st = t.untyped_storage()
                storages[st.data_ptr()] = st.nbytes()
    return sum(storages.values())


# ------------------------------------------------------------------ construction / names
def test_sym_gen_called_under_fresh_name_scope():
    # the ambient scope has already handed out names: sym_gen must not see it
    mx.sym.FullyConnected(mx.sym.Variable('x'), num_hidden=2)
    mx.sym.Embedding(mx.sym.Variable('y'), input_dim=3, output_dim=2)
    calls = []

    def sym_gen(key):
        calls.append(key)
        return lstm_sym_gen(key)

    mod = mx.mod.BucketingModule(sym_gen, default_bucket_key=5)
    assert mod.data_names == ['data'] or list(mod.data_names) == ['data']
    assert mod.output_names == ['softmax_output']
    mod.bind([('data', (BATCH, 5))], [('softmax_label', (BATCH, 5))])
    mod.init_params()
    args = mod.symbol.list_arguments()
    assert args[1] == 'embedding0_weight'              # mxnet's test_module_switch_bucket
    assert 'fullyconnected0_weight' in args
    mod.switch_bucket(3, [('data', (BATCH, 3))], [('softmax_label', (BATCH, 3))])
    assert mod._curr_bucket_key == 3
    assert mod._buckets[3].symbol.list_arguments() == args   # same names in every bucket
    assert mod.data_shapes[0].shape == (BATCH, 3)
    # mxnet's get_output_shapes puts the batch size on the output's batch axis
    assert mod.output_shapes == [('softmax_output', (BATCH, VOCAB))]
    # a fresh NameManager is current inside sym_gen, and the old one after it
    outer = compiler.frontend.name.current()
    seen = []
    mod2 = mx.mod.BucketingModule(lambda k: (seen.append(compiler.frontend.name.current())
                                             or lstm_sym_gen(k)), default_bucket_key=3)
    assert seen and seen[0] is not outer and isinstance(seen[0], NameManager)
    assert compiler.frontend.name.current() is outer
    del mod2


def test_module_switch_bucket_port():
    """mxnet's test_module_switch_bucket: deleting and re-creating a bucket leaves the
    default bucket's memory unchanged."""
    mod = mx.mod.BucketingModule(lstm_sym_gen, default_bucket_key=7, context=[mx.cpu(0)])
    mod.bind([('data', (BATCH, 7))], [('softmax_label', (BATCH, 7))], True, False)
    mod.init_params(initializer=mx.init.Xavier(factor_type="in", magnitude=2.34))
    assert mod.symbol.list_arguments()[1] == "embedding0_weight"
    mod.forward(make_batch(7))
    mod.switch_bucket(5, [('data', (BATCH, 5))], [('softmax_label', (BATCH, 5))])
    mod.forward(make_batch(5))
    default = mod._buckets[7]
    bytes_before = default._total_exec_bytes
    pool_before = default._exec_group.execs[0]._pool.nbytes()
    del mod._buckets[5]
    mod.switch_bucket(5, [('data', (BATCH, 5))], [('softmax_label', (BATCH, 5))])
    mod.forward(make_batch(5))
    assert len(mod._buckets) == 2
    assert default._total_exec_bytes == bytes_before
    assert default._exec_group.execs[0]._pool.nbytes() == pool_before > 0


# ------------------------------------------------------------------ sharing
def test_one_module_per_bucket_and_shared_parameters():
    mod = make_module(default_key=7)
    keys_seen = []
    for step, key in enumerate((7, 3, 5, 3, 7, 5)):
        train_step(mod, make_batch(key, seed=step))
        keys_seen.append(key)
        assert mod._curr_bucket_key == key
        assert len(mod._buckets) == len(set(keys_seen))
        # after every update all buckets see the same values (they hold the same tensors)
        ref = mod._buckets[7]._exec_group.execs[0].arg_dict
        for k, bucket in mod._buckets.items():
            exe = bucket._exec_group.execs[0]
            for name in bucket._param_names:
                assert torch.equal(exe.arg_dict[name], ref[name]), (k, name)
    assert sorted(mod._buckets) == [3, 5, 7]
    default_group = mod._buckets[7]._exec_group
    for key in (3, 5):
        group = mod._buckets[key]._exec_group
        assert group.param_names == default_group.param_names
        for mine, theirs in zip(group.param_arrays, default_group.param_arrays):
            assert mine[0].data_ptr() == theirs[0].data_ptr()
        for mine, theirs in zip(group.grad_arrays, default_group.grad_arrays):
            assert mine[0].data_ptr() == theirs[0].data_ptr()
        # one pool of internal buffers: the default bucket's
        assert group.execs[0]._pool is default_group.execs[0]._pool
        # one optimizer and updater for all buckets
        assert mod._buckets[key]._optimizer is mod._buckets[7]._optimizer
        assert mod._buckets[key]._updater is mod._buckets[7]._updater
    # get_params from any bucket gives the same values
    p7 = params_np(mod)
    mod.switch_bucket(3, None, None)
    p3 = params_np(mod)
    for k in p7:
        np.testing.assert_array_equal(p7[k], p3[k])


@pytest.fixture
def fixed_threads():
    """The thread policy off for the test. The policy is the process's: one that earlier
    tests of the worker left at its row-split rung runs the first step as two half
    batches, whose Program (batch 2) is one more compile (the count of 2 that a full
    run met now and then)."""
    threads.reset(None)
    yield
    threads.reset()


def test_compile_once_per_bucket_and_kernels_shared(tmp_path, monkeypatch, caplog,
                                                    fixed_threads):
    monkeypatch.setenv("SYMTRITON_CACHE_DIR", str(tmp_path))
    # every compile logged with what it compiled: a count that differs says which
    monkeypatch.setenv("SYMTRITON_LOG", "compiles")
    caplog.set_level("WARNING", logger="symtriton.compile")
    # per-step kernels shared across buckets: the steps' own kernels (on the cpu target a
    # chain of steps is otherwise one oneDNN layer call, tests/compiler/test_fuse_lstm_layers.py)
    monkeypatch.setenv("SYMTRITON_LSTM_LAYERS", "0")
    compiler.artifacts.cache.clear_memory_cache()
    kernels_dir = os.path.join(compiler.artifacts.cache.cache_dir(), 'kernels')

    def n_kernel_files():
        return len(os.listdir(kernels_dir)) if os.path.isdir(kernels_dir) else 0

    compiler.reset_cache_stats()
    mod = make_module(default_key=7)
    train_step(mod, make_batch(7))
    compiles = [compiler.cache_stats()['compiles']]
    files = [n_kernel_files()]
    assert compiles[0] == 1 and files[0] > 0, caplog.text
    for key in (3, 5):                          # unseen buckets: one Program each
        train_step(mod, make_batch(key))
        compiles.append(compiler.cache_stats()['compiles'])
        files.append(n_kernel_files())
    assert compiles == [1, 2, 3], caplog.text
    for key in (7, 3, 5, 3, 7):                 # revisits: nothing compiled
        train_step(mod, make_batch(key, seed=9))
    assert compiler.cache_stats()['compiles'] == 3, caplog.text
    assert n_kernel_files() == files[-1]

    # kernels are shared by source hash: the per-step LSTM gate kernel (the forward
    # kernel launched once per step after the first) is in every bucket's Program
    progs = {k: m._exec_group.execs[0].programs[0] for k, m in mod._buckets.items()}
    per_bucket = {k: {ln.kernel for ln in p.launches} for k, p in progs.items()}
    common = set.intersection(*per_bucket.values())
    def fwd_counts(prog):
        kernels = [ln.kernel for ln in prog.launches_in('fwd')]
        return {k: kernels.count(k) for k in set(kernels)}

    counts = {key: fwd_counts(p) for key, p in progs.items()}
    # steps 1..T-1, or 1..T-2: the last step's gate kernel may differ from the others
    # (the backward of tanh and sigmoid reads their outputs, and what the last step
    # stores for it is not what a middle step stores)
    per_step = [k for k in counts[7]
                if any(all(counts[key].get(k) == key - d for key in counts) for d in (1, 2))]
    assert len(per_step) >= 1
    summaries = {ln.kernel: ln.summary for ln in progs[7].launches}
    gates = [k for k in per_step if summaries[k].startswith('pointwise over domain (%d, %d)'
                                                              % (BATCH, HID))]
    assert len(gates) == 1, [(k, summaries[k]) for k in per_step]
    gate = gates[0]
    assert gate in common and len(common) >= 5
    # the disk holds one file per distinct kernel: fewer than the buckets' kernels counted
    # separately (files not in any Program, e.g. the optimizer's, came with bucket 7)
    on_disk = {f[2:-3] for f in os.listdir(kernels_dir)}
    union = set.union(*per_bucket.values())
    assert union <= on_disk and len(on_disk - union) == files[0] - len(per_bucket[7])
    assert len(on_disk) == files[-1] < sum(len(s) for s in per_bucket.values()) + \
        len(on_disk - union)
    new_for_3 = files[1] - files[0]
    assert new_for_3 < len(per_bucket[3])


def test_memory_all_buckets_within_125_percent_of_largest_alone():
    """Bytes held by every bucket's executors (distinct storages) after visiting
    3, 5 and 7 (default 7), versus a BucketingModule that only ever saw 7."""
    only_largest = make_module(default_key=7)
    train_step(only_largest, make_batch(7))
    alone = held_bytes(only_largest)

    mod = make_module(default_key=7)
    for key in (7, 3, 5):
        train_step(mod, make_batch(key))
    after_one_cycle = held_bytes(mod)
    for _ in range(2):                          # cycling again allocates nothing
        for key in (3, 5, 7):
            train_step(mod, make_batch(key, seed=5))
    after_three_cycles = held_bytes(mod)
    ratio = after_three_cycles / alone
    logging.getLogger(__name__).info("bucketing memory: %d bytes vs %d alone (%.3fx)",
                                     after_three_cycles, alone, ratio)
    assert after_three_cycles == after_one_cycle
    assert ratio <= 1.25, (after_three_cycles, alone, ratio)
    # the smaller buckets added no pool memory
    pool = mod._buckets[7]._exec_group.execs[0]._pool.nbytes()
    assert pool == only_largest._buckets[7]._exec_group.execs[0]._pool.nbytes()


def test_bucket_larger_than_default_warns(caplog):
    mod = make_module(default_key=3)
    with caplog.at_level(logging.WARNING):
        train_step(mod, make_batch(5))
    assert any('larger' in r.getMessage() and 'default' in r.getMessage()
               for r in caplog.records)
    caplog.clear()
    with caplog.at_level(logging.WARNING):
        train_step(mod, make_batch(3))
        train_step(mod, make_batch(5))           # seen: no new warning
    assert not any('larger' in r.getMessage() for r in caplog.records)


def test_switch_bucket_to_seen_key_is_cheap():
    mod = make_module(default_key=7)
    t0 = time.perf_counter()
    for key in (3, 5):
        mod.switch_bucket(key, [('data', (BATCH, key))], [('softmax_label', (BATCH, key))])
    first_visit = (time.perf_counter() - t0) / 2
    compiles = compiler.cache_stats()['compiles']
    hits = compiler.cache_stats()['hits']
    n = 300
    t0 = time.perf_counter()
    for i in range(n):
        key = BUCKETS[i % 3]
        mod.switch_bucket(key, [('data', (BATCH, key))], [('softmax_label', (BATCH, key))])
    per_switch = (time.perf_counter() - t0) / n
    logging.getLogger(__name__).info("switch_bucket: first visit %.4fs, seen key %.2e s",
                                     first_visit, per_switch)
    assert compiler.cache_stats()['compiles'] == compiles
    assert compiler.cache_stats()['hits'] == hits          # not even a cache lookup
    assert len(mod._buckets) == 3
    assert per_switch < 1e-3
    assert per_switch < first_visit / 50


# ------------------------------------------------------------------ forward details
def test_new_batch_size_in_seen_bucket_reshapes_that_bucket():
    mod = make_module(default_key=7)
    train_step(mod, make_batch(5))
    bucket5 = mod._buckets[5]
    small = make_batch(5, batch=2, seed=4)
    mod.forward(small, is_train=False)
    assert len(mod._buckets) == 2 and mod._buckets[5] is bucket5
    assert mod.data_shapes[0].shape == (2, 5)
    assert mod.get_outputs()[0].shape == (2 * 5, VOCAB)
    # reshaped executors still use the shared parameters
    exe = bucket5._exec_group.execs[0]
    assert exe.arg_dict['l0_i2h_weight'].data_ptr() == \
        mod._buckets[7]._exec_group.execs[0].arg_dict['l0_i2h_weight'].data_ptr()
    # same result as the full-size batch's first two rows
    full = make_batch(5, batch=4, seed=4)
    mod.forward(full, is_train=False)
    np.testing.assert_allclose(mod.get_outputs()[0].asnumpy()[:10],
                               _forward_probs(mod, small), rtol=1e-5, atol=1e-6)


def _forward_probs(mod, batch):
    mod.forward(batch, is_train=False)
    return mod.get_outputs()[0].asnumpy()


def test_prepare_binds_next_bucket_and_switches_back():
    mod = make_module(default_key=7)
    mod.prepare(make_batch(3))
    assert 3 in mod._buckets and mod._curr_bucket_key == 7
    assert mod._buckets[3]._optimizer is mod._buckets[7]._optimizer


# ------------------------------------------------------------------ multi-device
def test_two_contexts_equal_one_context():
    one = make_module(default_key=7, context=mx.cpu(0))
    two = make_module(default_key=7, context=[mx.cpu(0), mx.cpu(1)])
    for step, key in enumerate((7, 3, 5, 7)):
        batch = make_batch(key, seed=step)
        l1 = train_step(one, batch)
        l2 = train_step(two, batch)
        assert abs(l1 - l2) < 1e-5
    assert len(two._buckets[3]._exec_group.execs) == 2
    p1, p2 = params_np(one), params_np(two)
    for k in p1:
        np.testing.assert_allclose(p1[k], p2[k], rtol=1e-5, atol=1e-6, err_msg=k)
    # the two devices' parameter copies are shared across buckets per device
    for dev in range(2):
        assert two._buckets[5]._exec_group.param_arrays[0][dev].data_ptr() == \
            two._buckets[7]._exec_group.param_arrays[0][dev].data_ptr()


# ------------------------------------------------------------------ checkpoints
def test_save_checkpoint_writes_default_symbol_and_load_resumes(tmp_path):
    keys = (7, 3, 5, 3, 7, 5, 3, 7)
    # SGD with momentum: the momentum is optimizer state that must survive the restart
    # (as in mxnet, the .states file holds the updater's states, not Adam's step counts)
    opt_args = dict(optimizer='sgd', optimizer_params=(('learning_rate', 0.3), ('momentum', 0.9)))
    ref = make_module(default_key=7, **opt_args)
    ref_losses = [train_step(ref, make_batch(k, seed=i)) for i, k in enumerate(keys)]

    mod = make_module(default_key=7, **opt_args)
    losses = [train_step(mod, make_batch(k, seed=i)) for i, k in enumerate(keys[:4])]
    assert mod._curr_bucket_key == 3               # current bucket is not the default
    prefix = str(tmp_path / 'lm')
    mod.save_checkpoint(prefix, 2, save_optimizer_states=True)

    # the default bucket's symbol (7 steps), not the current bucket's (3 steps)
    saved = mx.sym.load(prefix + '-symbol.json')
    assert saved.tojson() == mod._buckets[7].symbol.tojson()
    assert 't6_i2h_output' in saved.get_internals().list_outputs()
    # mxnet's layout: one symbol per bucket and the bucket list
    for k in (3, 5, 7):
        s = mx.sym.load('%s-%d-symbol.json' % (prefix, k))
        assert s.tojson() == mod._buckets[k].symbol.tojson()
    assert sorted(int(v) for v in nd.load(prefix + '.buckets')[0].asnumpy()) == [3, 5, 7]
    assert os.path.exists(prefix + '-0002.params') and os.path.exists(prefix + '-0002.states')
    sym, arg, aux = mx.model.load_checkpoint(prefix, 2)
    assert set(arg) == set(fixed_params())

    loaded = mx.mod.BucketingModule.load(prefix, 2, sym_gen=lstm_sym_gen, default_bucket_key=7,
                                         load_optimizer_states=True, context=mx.cpu())
    assert sorted(loaded._buckets) == [3, 5, 7] and loaded.params_initialized
    loaded.bind([('data', (BATCH, 7))], [('softmax_label', (BATCH, 7))])
    loaded.init_optimizer(**opt_args)
    assert loaded._preload_opt_states is None
    for i, k in enumerate(keys[4:], start=4):
        losses.append(train_step(loaded, make_batch(k, seed=i)))
    np.testing.assert_allclose(losses, ref_losses, rtol=1e-5, atol=1e-6)
    pr, pl = params_np(ref), params_np(loaded)
    for k in pr:
        np.testing.assert_allclose(pl[k], pr[k], rtol=1e-5, atol=1e-6, err_msg=k)

    # without the optimizer states the momentum restarts and the run diverges from the reference
    fresh = mx.mod.BucketingModule.load(prefix, 2, sym_gen=lstm_sym_gen, default_bucket_key=7)
    fresh.bind([('data', (BATCH, 7))], [('softmax_label', (BATCH, 7))])
    fresh.init_optimizer(**opt_args)
    for i, k in enumerate(keys[4:], start=4):
        train_step(fresh, make_batch(k, seed=i))
    pf = params_np(fresh)
    assert max(np.abs(pf[k] - pr[k]).max() for k in pr) > 1e-4


def test_load_dict_and_batch_without_provide_data():
    src = make_module(default_key=7)
    train_step(src, make_batch(3))
    arg, aux = src.get_params()
    syms = {}
    for k in (3, 7):
        with NameManager():
            syms[k] = lstm_sym_gen(k)[0]
    mod = mx.mod.BucketingModule.load_dict(syms, sym_gen=lstm_sym_gen, default_bucket_key=7,
                                           arg_params=arg, aux_params=aux)
    assert sorted(mod._buckets) == [3, 7]
    mod.bind([('data', (BATCH, 7))], [('softmax_label', (BATCH, 7))], for_training=False)
    for key in (3, 5):
        batch = make_batch(key, seed=2)
        expect = _forward_probs(src, batch)
        # no provide_data / provide_label: the shapes come from the arrays
        bare = mx.io.DataBatch(batch.data, batch.label, bucket_key=key)
        np.testing.assert_allclose(_forward_probs(mod, bare), expect, rtol=1e-5, atol=1e-6)
    assert sorted(mod._buckets) == [3, 5, 7]


def test_set_params_get_params_roundtrip_and_force_rebind():
    mod = make_module(default_key=7)
    train_step(mod, make_batch(3))
    before = params_np(mod)
    new = {k: nd.array(v * 0.5) for k, v in before.items()}
    mod.set_params(new, {})
    after = params_np(mod)
    for k in before:
        np.testing.assert_allclose(after[k], before[k] * 0.5, rtol=1e-6)
    # the values reach every bucket (shared tensors)
    np.testing.assert_allclose(
        mod._buckets[3]._exec_group.execs[0].arg_dict['l0_h2h_weight'].numpy(),
        before['l0_h2h_weight'] * 0.5, rtol=1e-6)
    # force_rebind (e.g. for prediction) keeps the parameters, drops the buckets
    mod.bind([('data', (BATCH, 7))], [('softmax_label', (BATCH, 7))], for_training=False,
             force_rebind=True)
    assert list(mod._buckets) == [7] and mod._curr_bucket_key == 7
    for k, v in params_np(mod).items():
        np.testing.assert_allclose(v, before[k] * 0.5, rtol=1e-6)
    out = _forward_probs(mod, make_batch(5))
    assert out.shape == (BATCH * 5, VOCAB) and len(mod._buckets) == 2


# ------------------------------------------------------------------ fit
class BucketIter(mx.io.DataIter):
    """A tiny bucketed iterator: each batch has its own sequence length."""

    def __init__(self, keys=(7, 3, 5, 7, 3, 5), batch_size=BATCH, seed=0):
        super().__init__(batch_size)
        self.keys = list(keys)
        self.default_bucket_key = max(keys)
        self.seed = seed
        self.provide_data = [mx.io.DataDesc('data', (batch_size, self.default_bucket_key))]
        self.provide_label = [mx.io.DataDesc('softmax_label',
                                             (batch_size, self.default_bucket_key))]
        self.reset()

    def reset(self):
        self.cur = 0

    def next(self):
        if self.cur >= len(self.keys):
            raise StopIteration
        key = self.keys[self.cur]
        batch = make_batch(key, self.batch_size, seed=self.seed + self.cur)
        self.cur += 1
        return batch


def test_fit_with_bucketed_iterator_loss_falls():
    train = BucketIter()
    mod = mx.mod.BucketingModule(lstm_sym_gen, default_bucket_key=train.default_bucket_key)
    metric = mx.metric.Perplexity(None)
    mod.bind(train.provide_data, train.provide_label)
    mod.init_params(arg_params=fixed_params())
    before = dict(mod.score(BucketIter(), mx.metric.Perplexity(None)))['perplexity']
    mod.fit(train, eval_metric=metric, optimizer='adam',
            optimizer_params={'learning_rate': 0.05}, num_epoch=4)
    after = dict(mod.score(BucketIter(), mx.metric.Perplexity(None)))['perplexity']
    assert sorted(mod._buckets) == [3, 5, 7]
    assert after < 0.3 * before, (before, after)   # about 30.5 -> 5.0


# ------------------------------------------------------------------ other 1.9.1 surface
def _mean_sym_gen(seq_len):
    """Bucketed by sequence length; the parameters do not depend on it."""
    data = mx.sym.Variable('data')
    pooled = mx.sym.mean(data, axis=1)
    fc = mx.sym.FullyConnected(pooled, num_hidden=3, name='fc')
    return mx.sym.SoftmaxOutput(fc, name='softmax'), ('data',), ('softmax_label',)


def _mean_batch(seq_len, batch=4, seed=0):
    rng = np.random.RandomState(seed + seq_len)
    x = rng.randn(batch, seq_len, 4).astype(np.float32)
    y = rng.randint(0, 3, size=batch).astype(np.float32)
    return mx.io.DataBatch([nd.array(x)], [nd.array(y)], bucket_key=seq_len,
                           provide_data=[mx.io.DataDesc('data', x.shape)],
                           provide_label=[mx.io.DataDesc('softmax_label', y.shape)])


def test_input_grads_fixed_params_grad_req_and_monitor():
    mod = mx.mod.BucketingModule(_mean_sym_gen, default_bucket_key=6,
                                 fixed_param_names=['fc_bias'])
    mod.bind([('data', (4, 6, 4))], [('softmax_label', (4,))], inputs_need_grad=True,
             grad_req='add')
    mod.init_params(mx.init.Xavier())
    mod.init_optimizer(optimizer_params=(('learning_rate', 0.1),))
    stats = []
    mon = mx.monitor.Monitor(1, pattern='.*')
    mod.install_monitor(mon)
    bias0 = params_np(mod)['fc_bias']
    for key in (6, 2, 2):
        mon.tic()
        batch = _mean_batch(key)
        mod.forward(batch, is_train=True)
        mod.backward()
        g = mod.get_input_grads()[0]
        assert g.shape == (4, key, 4)
        # d(mean over axis 1)/dx is the same for every step
        np.testing.assert_allclose(g.asnumpy()[:, 0], g.asnumpy()[:, -1], rtol=1e-5, atol=1e-7)
        stats.append(len(mon.toc()))
        mod.update()
    assert all(s > 0 for s in stats)               # the monitor reaches the new bucket too
    assert mod._buckets[2]._exec_group.grad_req['fc_weight'] == 'add'
    assert mod._buckets[2]._exec_group.grad_req['fc_bias'] == 'null'
    np.testing.assert_array_equal(params_np(mod)['fc_bias'], bias0)
    metric = mx.metric.Accuracy()
    mod.update_metric(metric, _mean_batch(2).label)
    assert metric.num_inst == 4


def _state_sym_gen(seq_len):
    data = mx.sym.Variable('data')
    state = mx.sym.Variable('init_state')
    fc = mx.sym.FullyConnected(mx.sym.mean(data, axis=1), num_hidden=3, name='fc')
    return mx.sym.SoftmaxOutput(fc + state, name='softmax'), ('data',), ('softmax_label',)


def test_states():
    mod = mx.mod.BucketingModule(_state_sym_gen, default_bucket_key=4,
                                 state_names=['init_state'])
    mod.bind([('data', (4, 4, 4))], [('softmax_label', (4,))])
    mod.init_params(mx.init.Xavier())
    mod.forward(_mean_batch(2), is_train=False)
    mod.set_states(value=0.25)
    np.testing.assert_allclose(mod.get_states(merge_multi_context=False)[0][0].asnumpy(),
                               np.full((4, 3), 0.25))
    assert mod._curr_bucket_key == 2


def test_bind_errors_and_unbound_properties():
    mod = mx.mod.BucketingModule(lstm_sym_gen, default_bucket_key=3)
    assert list(mod.data_names) == ['data'] and list(mod.label_names) == ['softmax_label']
    with pytest.raises(AssertionError):
        mx.mod.BucketingModule(lstm_sym_gen)
    with pytest.raises(AssertionError):
        mod.switch_bucket(3, [('data', (BATCH, 3))])
    with pytest.raises(AssertionError):
        mod.bind([('data', (BATCH, 3))], [('softmax_label', (BATCH, 3))],
                 shared_module=mod)
    with pytest.raises(AssertionError):
        mod.save_checkpoint('/nonexistent/x', 0)
    assert mx.module.BucketingModule is mx.mod.BucketingModule


# ------------------------------------------------------------------ more of the 1.9.1 surface
def test_set_params_allow_missing_sets_what_is_given_in_every_bucket():
    mod = make_module(default_key=7)
    train_step(mod, make_batch(3))
    before = params_np(mod)
    mod.set_params({'l0_h2h_bias': nd.array(np.full(4 * HID, 0.125))}, {},
                   allow_missing=True)
    after = params_np(mod)                         # reread from the executors
    np.testing.assert_array_equal(after['l0_h2h_bias'], np.full(4 * HID, 0.125))
    for k in before:
        if k != 'l0_h2h_bias':
            np.testing.assert_array_equal(after[k], before[k])
    np.testing.assert_array_equal(
        mod._buckets[3]._exec_group.execs[0].arg_dict['l0_h2h_bias'].numpy(),
        np.full(4 * HID, 0.125, dtype=np.float32))
    with pytest.warns(UserWarning, match="set_params call ignored"):
        mod.set_params({'l0_h2h_bias': nd.array(np.zeros(4 * HID))}, {},
                       allow_missing=True, force_init=False)
    np.testing.assert_array_equal(params_np(mod)['l0_h2h_bias'], np.full(4 * HID, 0.125))


def test_second_bind_and_init_optimizer_warn_as_mxnet(caplog):
    mod = make_module(default_key=7)
    with caplog.at_level(logging.WARNING):
        mod.bind([('data', (BATCH, 7))], [('softmax_label', (BATCH, 7))])
        mod.init_optimizer()
    messages = [r.getMessage() for r in caplog.records]
    assert 'Already bound, ignoring bind()' in messages
    assert 'optimizer already initialized, ignoring.' in messages


def test_failed_bind_leaves_the_module_unbound():
    mod = mx.mod.BucketingModule(lstm_sym_gen, default_bucket_key=5)
    with pytest.raises(ValueError, match="don't match names"):
        mod.bind([('tokens', (BATCH, 5))], [('softmax_label', (BATCH, 5))])
    assert not mod.binded
    mod.bind([('data', (BATCH, 5))], [('softmax_label', (BATCH, 5))])
    mod.init_params(arg_params=fixed_params())
    assert mod.data_shapes[0].shape == (BATCH, 5)


def test_prepare_reads_shapes_of_a_batch_without_provide_data():
    mod = make_module(default_key=7)
    batch = make_batch(3)
    mod.prepare(mx.io.DataBatch(batch.data, batch.label, bucket_key=3))
    assert sorted(mod._buckets) == [3, 7] and mod._curr_bucket_key == 7
    assert mod._buckets[3].data_shapes[0].shape == (BATCH, 3)


def test_borrow_optimizer_reaches_every_bucket():
    owner = make_module(default_key=7)
    mod = mx.mod.BucketingModule(lstm_sym_gen, default_bucket_key=7)
    mod.bind([('data', (BATCH, 7))], [('softmax_label', (BATCH, 7))])
    mod.init_params(arg_params=fixed_params())
    mod.switch_bucket(3, [('data', (BATCH, 3))], [('softmax_label', (BATCH, 3))])
    mod.borrow_optimizer(owner._buckets[7])
    assert mod.optimizer_initialized
    for bucket in mod._buckets.values():
        assert bucket._optimizer is owner._buckets[7]._optimizer
        assert bucket._updater is owner._buckets[7]._updater
    train_step(mod, make_batch(3))                  # update() is allowed


def _named_sym_gen(key):
    return lstm_sym_gen({'short': 3, 'long': 7}[key])


def test_checkpoint_with_string_bucket_keys(tmp_path):
    """mxnet's .buckets holds int32 keys; with other keys it is not written and load
    restores the default bucket (the others bind again on first use)."""
    mod = mx.mod.BucketingModule(_named_sym_gen, default_bucket_key='long')
    mod.bind([('data', (BATCH, 7))], [('softmax_label', (BATCH, 7))])
    mod.init_params(arg_params=fixed_params())
    for key, n in (('long', 7), ('short', 3)):
        batch = make_batch(n)
        batch.bucket_key = key
        mod.forward(batch, is_train=False)
    prefix = str(tmp_path / 'named')
    # a listing an earlier save of integer keys left under the same prefix
    mx.nd.save(prefix + '.buckets', mx.nd.array([3, 7], dtype='int32'))
    mod.save_checkpoint(prefix, 1)
    assert not os.path.exists(prefix + '.buckets')
    assert os.path.exists(prefix + '-short-symbol.json')
    assert os.path.exists(prefix + '-long-symbol.json')
    loaded = mx.mod.BucketingModule.load(prefix, 1, sym_gen=_named_sym_gen,
                                         default_bucket_key='long')
    assert list(loaded._buckets) == ['long']
    loaded.bind([('data', (BATCH, 7))], [('softmax_label', (BATCH, 7))], for_training=False)
    batch = make_batch(3, seed=1)
    batch.bucket_key = 'short'
    np.testing.assert_allclose(_forward_probs(loaded, batch), _forward_probs(mod, batch),
                               rtol=1e-6, atol=1e-7)


def test_load_dict_without_the_default_bucket_builds_it_from_sym_gen():
    src = make_module(default_key=7)
    arg, aux = src.get_params()
    with NameManager():
        sym3 = lstm_sym_gen(3)[0]
    mod = mx.mod.BucketingModule.load_dict({3: sym3}, sym_gen=lstm_sym_gen,
                                           default_bucket_key=7, arg_params=arg,
                                           aux_params=aux)
    assert sorted(mod._buckets) == [3, 7] and mod.params_initialized
    mod.bind([('data', (BATCH, 7))], [('softmax_label', (BATCH, 7))], for_training=False)
    for key in (7, 3):
        batch = make_batch(key, seed=3)
        np.testing.assert_allclose(_forward_probs(mod, batch), _forward_probs(src, batch),
                                   rtol=1e-6, atol=1e-7)
