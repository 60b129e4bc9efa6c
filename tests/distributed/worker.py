"""One worker of the distributed tests: ``python worker.py JOB OUT_DIR``.

Started with the environment torchrun gives its workers (RANK, WORLD_SIZE,
MASTER_ADDR, MASTER_PORT) by ``test_dist_kvstore.py``. Each job trains a small
model through the Module API with a distributed kvstore and writes what the
test compares into ``OUT_DIR/rank<R>.npz``: the parameters after
``init_optimizer`` (rank 0's, whatever this worker drew), every batch it
trained on, and the final parameters.
"""
import atexit
import os
import random
import signal
import sys
import threading
import time

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, ROOT)
os.environ.setdefault("TRITON_INTERPRET", "1")

import numpy as np  # noqa: E402

import module_api as mx  # noqa: E402
from tests.models import mlp  # noqa: E402

MLP_BATCH, MLP_STEPS = 8, 4
LSTM_VOCAB, LSTM_HIDDEN, LSTM_BATCH, LSTM_BUCKETS = 12, 8, 4, (4, 8)
SGD = {"learning_rate": 0.1, "momentum": 0.9, "wd": 1e-4}


def blobs(n, dim=10, classes=4, seed=42):
    """Gaussian blobs: the data test_module's accuracy test uses."""
    rng = np.random.RandomState(seed)
    centers = rng.randn(classes, dim) * 1.5
    y = rng.randint(0, classes, size=n)
    x = (centers[y] + rng.randn(n, dim)).astype(np.float32)
    return x, y.astype(np.float32)


def lstm_sym_gen(seq_len):
    """mxnet's lstm_bucketing model, small."""
    data = mx.sym.Variable('data')
    label = mx.sym.Variable('softmax_label')
    embed = mx.sym.Embedding(data=data, input_dim=LSTM_VOCAB, output_dim=LSTM_HIDDEN,
                             name='embed')
    cell = mx.rnn.LSTMCell(num_hidden=LSTM_HIDDEN, prefix='lstm_l0_')
    outputs, _ = cell.unroll(seq_len, inputs=embed, merge_outputs=True)
    pred = mx.sym.Reshape(outputs, shape=(-1, LSTM_HIDDEN))
    pred = mx.sym.FullyConnected(data=pred, num_hidden=LSTM_VOCAB, name='pred')
    label = mx.sym.Reshape(label, shape=(-1,))
    pred = mx.sym.SoftmaxOutput(data=pred, label=label, name='softmax')
    return pred, ('data',), ('softmax_label',)


def lstm_sentences(n=120, seed=7):
    rng = np.random.RandomState(seed)
    return [list(rng.randint(1, LSTM_VOCAB, size=rng.randint(2, max(LSTM_BUCKETS) + 1)))
            for _ in range(n)]


class Recorder:
    """A batch_end_callback that keeps every batch (and can kill this worker)."""

    def __init__(self, kill_at=None, kill_signal=signal.SIGKILL):
        self.data, self.label, self.keys = [], [], []
        self.kill_at, self.kill_signal = kill_at, kill_signal

    def __call__(self, param):
        batch = param.locals['data_batch']
        self.data.append(batch.data[0].asnumpy())
        self.label.append(batch.label[0].asnumpy())
        self.keys.append(getattr(batch, 'bucket_key', None) or -1)
        if self.kill_at is not None and param.nbatch == self.kill_at:
            print(f"rank {os.environ['RANK']}: sending myself {self.kill_signal.name} at "
                  f"batch {param.nbatch}", flush=True)
            os.kill(os.getpid(), self.kill_signal)


def _params(mod):
    arg, _ = mod.get_params()
    return {k: v.asnumpy() for k, v in arg.items()}


def _save(out, kv, initial, mod, rec, **extra):
    final = _params(mod)
    np.savez(os.path.join(out, f"rank{kv.rank}.npz"),
             **{f"init:{k}": v for k, v in initial.items()},
             **{f"final:{k}": v for k, v in final.items()},
             **{f"data:{i}": v for i, v in enumerate(rec.data)},
             **{f"label:{i}": v for i, v in enumerate(rec.label)},
             keys=np.array(rec.keys), **extra)


def mlp_job(kv_type, out, epochs=1, steps=MLP_STEPS, batch=MLP_BATCH, kill_at=None,
            kill_signal=signal.SIGKILL, unsharded_steps=None):
    kv = mx.kv.create(kv_type)
    mx.random.seed(100 + kv.rank)       # every worker draws different initial weights
    n = kv.num_workers * batch * steps
    x, y = blobs(n + 400)     # 400 held-out rows score every job
    if unsharded_steps is None:
        train = mx.io.NDArrayIter(x[:n], y[:n], batch_size=batch, shuffle=epochs > 1,
                                  num_parts=kv.num_workers, part_index=kv.rank)
    else:       # a mistake: workers read unequal numbers of batches
        m = unsharded_steps * batch
        train = mx.io.NDArrayIter(x[:m], y[:m], batch_size=batch)
    val = mx.io.NDArrayIter(x[n:], y[n:], batch_size=40)
    mod = mx.mod.Module(mlp(hidden=(32,), classes=4), context=mx.cpu())
    mod.bind(train.provide_data, train.provide_label)
    mod.init_params(mx.init.Xavier())
    mod.init_optimizer(kvstore=kv, optimizer='sgd', optimizer_params=SGD)
    initial = _params(mod)
    rec = Recorder(kill_at, kill_signal)
    def mark_epoch_end(epoch, *_):
        open(os.path.join(out, f"epoch{epoch}-ended-on-rank{kv.rank}"), "w").close()

    mod.fit(train, num_epoch=epochs, kvstore=kv, optimizer='sgd', optimizer_params=SGD,
            batch_end_callback=rec,
            epoch_end_callback=[mx.callback.do_checkpoint(os.path.join(out, "mlp")),
                                mark_epoch_end])
    if kv.type == 'dist_async':
        # each worker's last pull predates the others' last pushes: score the shared
        # copy as it is once every worker has finished
        kv.barrier()
        kv.pull(mod._exec_group.param_names, out=mod._exec_group.param_arrays)
        mod._params_dirty = True
    acc = dict(mod.score(val, 'acc'))['accuracy']
    if kv.rank == 0 and kv.type == 'dist_async':
        mod.save_optimizer_states(os.path.join(out, "async.states"))
    _save(out, kv, initial, mod, rec, accuracy=np.float64(acc))
    print(f"rank {kv.rank}: accuracy {acc:.3f}", flush=True)


def mlp_overlap_job(out, on_kvstore):
    """dist_sync through a hand-written loop, a bucket per gradient (a tiny bucket cap),
    so that each gradient is all-reduced from the backward launch that finishes it.
    Batch 1 runs backward twice (the gradients are written again after their buckets
    were sent); after batch 2's backward the loop halves every gradient in place (the
    user's own edit, after the buckets were sent): the pushes must reduce the values
    they are given. ``on_kvstore``: MXNET_UPDATE_ON_KVSTORE=1, else 0 (the workers
    update, the store only sums)."""
    os.environ["SYMTRITON_DIST_BUCKET_MB"] = "0.0001"
    os.environ["MXNET_UPDATE_ON_KVSTORE"] = "1" if on_kvstore else "0"
    from runtime import kvstore_overlap
    kv = mx.kv.create("dist_sync")
    mx.random.seed(100 + kv.rank)
    n = kv.num_workers * MLP_BATCH * MLP_STEPS
    x, y = blobs(n)
    train = mx.io.NDArrayIter(x, y, batch_size=MLP_BATCH, num_parts=kv.num_workers,
                              part_index=kv.rank)
    mod = mx.mod.Module(mlp(hidden=(32,), classes=4), context=mx.cpu())
    mod.bind(train.provide_data, train.provide_label)
    mod.init_params(mx.init.Xavier())
    mod.init_optimizer(kvstore=kv, optimizer='sgd', optimizer_params=SGD)
    initial = _params(mod)
    rec = Recorder()
    for i, batch in enumerate(train):
        mod.forward_backward(batch)
        if i == 1:
            mod.backward()
        if i == 2:
            for grads in mod._exec_group.grad_arrays:
                grads[0] *= 0.5
        mod.update()
        rec.data.append(batch.data[0].asnumpy())
        rec.label.append(batch.label[0].asnumpy())
        rec.keys.append(-1)
    stats = kvstore_overlap.STATS
    _save(out, kv, initial, mod, rec, on_kvstore=np.int64(mod._update_on_kvstore),
          fired_in_backward=np.int64(stats["fired_in_backward"]),
          fired_at_push=np.int64(stats["fired_at_push"]))


def lstm_job(kv_type, out):
    kv = mx.kv.create(kv_type)
    mx.random.seed(100 + kv.rank)
    random.seed(kv.rank)       # BucketSentenceIter shuffles with the random module
    train = mx.rnn.BucketSentenceIter(lstm_sentences(), LSTM_BATCH, buckets=list(LSTM_BUCKETS),
                                      invalid_label=0, num_parts=kv.num_workers,
                                      part_index=kv.rank)
    mod = mx.mod.BucketingModule(lstm_sym_gen, default_bucket_key=train.default_bucket_key,
                                 context=mx.cpu())
    mod.bind(train.provide_data, train.provide_label)
    mod.init_params(mx.init.Xavier())
    mod.init_optimizer(kvstore=kv, optimizer='sgd', optimizer_params=SGD)
    initial = _params(mod)
    rec = Recorder()
    mod.fit(train, num_epoch=1, kvstore=kv, optimizer='sgd', optimizer_params=SGD,
            eval_metric=mx.metric.Perplexity(0), batch_end_callback=rec)
    _save(out, kv, initial, mod, rec)


def kv_api_job(kv_type, out, compress=False):
    """The kvstore API on its own: init takes rank 0's value; without an optimizer a
    dist_sync push stores the sum over every worker and device, a dist_async push
    replaces the owner's copy. ``compress``: 2-bit compression (threshold 0.5) of
    each worker's sum, the two devices pushing 0.3 (r+1) and 0.3."""
    kv = mx.kv.create(kv_type)
    r, n = kv.rank, kv.num_workers
    if compress:
        kv.set_gradient_compression({"type": "2bit", "threshold": 0.5})
    keys = ["a", "b", "c"]
    kv.init(keys, [mx.nd.full((3,), 10.0 * (r + 1)), mx.nd.full((2, 2), float(r)),
                   mx.nd.full((5,), -1.0 - r)])
    first = [mx.nd.zeros((3,)), mx.nd.zeros((2, 2)), mx.nd.zeros((5,))]
    kv.pull(keys, out=first)
    # two "devices" per worker push (r+1) and 1
    scale = 0.3 if compress else 1.0
    pushed = [[mx.nd.full(v.shape, scale * (r + 1)), mx.nd.full(v.shape, scale)]
              for v in first]
    if kv_type == "dist_async":
        kv.barrier()
        if r == n - 1:
            kv.push(keys, pushed)
        kv.barrier()
    else:
        kv.push(keys, pushed)
    after = [mx.nd.zeros(v.shape) for v in first]
    kv.pull(keys, out=after)
    kv.barrier()
    np.savez(os.path.join(out, f"rank{r}.npz"), rank=r, workers=n,
             **{f"first:{k}": v.asnumpy() for k, v in zip(keys, first)},
             **{f"after:{k}": v.asnumpy() for k, v in zip(keys, after)})


def _late_async_apply(delay=1.0):
    """Owners apply a peer's dist_async push ``delay`` seconds after it arrives: a
    barrier right after the push must still wait for it."""
    from runtime.kvstore_async import DistAsyncKVStore
    apply = DistAsyncKVStore._apply

    def late(self, k, grad):
        if threading.current_thread() is not threading.main_thread():
            time.sleep(delay)
        apply(self, k, grad)
    DistAsyncKVStore._apply = late


def kv_sparse_job(out):
    """row_sparse values on dist_sync: init takes rank 0's rows; worker r's two devices
    push rows [r, r+2] of value r+1 and row [5] of value 1; row_sparse_pull reads rows
    [5, 1, 0, 5] of the sum; a dense pull reads all of it."""
    kv = mx.kv.create("dist_sync")
    r, n = kv.rank, kv.num_workers
    init = mx.nd.sparse.row_sparse_array((np.full((2, 3), 10.0 * (r + 1), np.float32),
                                          [r, 4]), shape=(6, 3))
    kv.init("w", init)
    first = mx.nd.zeros((6, 3))
    kv.pull("w", out=first, ignore_sparse=False)
    pushed = [mx.nd.sparse.row_sparse_array((np.full((2, 3), r + 1.0, np.float32), [r, r + 2]),
                                            shape=(6, 3)),
              mx.nd.sparse.row_sparse_array((np.ones((1, 3), np.float32), [5]), shape=(6, 3))]
    kv.push("w", pushed)
    rows = mx.nd.sparse.zeros("row_sparse", (6, 3))
    kv.row_sparse_pull("w", out=rows, row_ids=mx.nd.array([5, 1, 0, 5], dtype="int64"))
    after = mx.nd.zeros((6, 3))
    kv.pull("w", out=after)
    # SGD's lazy update on the store: worker r pushes row r of value r+1
    kv.set_optimizer(mx.optimizer.SGD(learning_rate=0.1, momentum=0.9, wd=0.01))
    kv.init("v", mx.nd.ones((6, 3)))
    kv.push("v", mx.nd.sparse.row_sparse_array((np.full((1, 3), r + 1.0, np.float32), [r]),
                                               shape=(6, 3)))
    updated = mx.nd.zeros((6, 3))
    kv.pull("v", out=updated)
    kv.barrier()
    np.savez(os.path.join(out, f"rank{r}.npz"), rank=r, workers=n, first=first.asnumpy(),
             after=after.asnumpy(), rows_indices=rows.indices.asnumpy(),
             rows_data=rows.data.asnumpy(), updated=updated.asnumpy())


def kv_sparse_async_job(out):
    """row_sparse values on dist_async, 3 workers: init takes rank 0's rows; with SGD
    (lr 1) on the owners, worker r's two devices push rows [r, r+2] of value r+1 and
    row [5] of value 1, each push applied lazily on its own; after a barrier
    row_sparse_pull reads rows [5, 1, 0, 5] and a dense pull reads all of it. Key
    "d" is dense with row_sparse pushes (an Embedding's sparse gradient)."""
    kv = mx.kv.create("dist_async")
    r, n = kv.rank, kv.num_workers
    init = mx.nd.sparse.row_sparse_array((np.full((2, 3), 10.0 * (r + 1), np.float32),
                                          [r, 4]), shape=(6, 3))
    kv.init(["w", "d"], [init, mx.nd.full((6, 3), 1.0 + r)])
    first = mx.nd.sparse.zeros("row_sparse", (6, 3))
    kv.row_sparse_pull("w", out=first, row_ids=mx.nd.arange(0, 6, dtype="int64"))
    kv.set_optimizer(mx.optimizer.SGD(learning_rate=1.0))
    kv.barrier()
    pushed = [mx.nd.sparse.row_sparse_array((np.full((2, 3), r + 1.0, np.float32), [r, r + 2]),
                                            shape=(6, 3)),
              mx.nd.sparse.row_sparse_array((np.ones((1, 3), np.float32), [5]), shape=(6, 3))]
    kv.push(["w", "d"], [pushed, [p.copy() for p in pushed]])
    kv.barrier()
    rows = mx.nd.sparse.zeros("row_sparse", (6, 3))
    kv.row_sparse_pull("w", out=rows, row_ids=mx.nd.array([5, 1, 0, 5], dtype="int64"))
    after, dense = mx.nd.zeros((6, 3)), mx.nd.zeros((6, 3))
    kv.pull(["w", "d"], out=[after, dense])
    kv.barrier()
    np.savez(os.path.join(out, f"rank{r}.npz"), rank=r, workers=n,
             first=first.asnumpy(), after=after.asnumpy(), dense=dense.asnumpy(),
             rows_indices=rows.indices.asnumpy(), rows_data=rows.data.asnumpy())


def _sparse_embedding_table():
    return np.random.RandomState(6).randn(10, 3).astype(np.float32)


def _train_sparse_embedding(kvstore, turn, steps=6, batch=4):
    """A SparseEmbedding regression trained with lazy SGD on ``kvstore``; batch ``i``
    is trained here where ``turn(i)``, its rows pulled by ``prepare``; a dist store
    barriers after every batch, so the workers take turns."""
    rng = np.random.RandomState(5)
    idx = rng.randint(0, 10, size=(steps * batch, 2)).astype(np.float32)
    label = rng.randn(steps * batch).astype(np.float32)
    table = _sparse_embedding_table()
    weight = mx.sym.var("embed_weight", stype="row_sparse")
    emb = mx.sym.contrib.SparseEmbedding(data=mx.sym.var("data"), weight=weight,
                                         input_dim=10, output_dim=3, name="embed")
    sym = mx.sym.LinearRegressionOutput(mx.sym.sum(emb, axis=(1, 2)), mx.sym.var("label"))
    mod = mx.mod.Module(sym, context=mx.cpu(), label_names=["label"])
    mod.bind(data_shapes=[("data", (batch, 2))], label_shapes=[("label", (batch,))])
    mod.init_params(arg_params={"embed_weight": mx.nd.array(table).tostype("row_sparse")})
    mod.init_optimizer(kvstore=kvstore, optimizer="sgd",
                       optimizer_params={"learning_rate": 0.1, "momentum": 0.9, "wd": 0.01})
    for i in range(steps):
        if turn(i):
            part = slice(i * batch, (i + 1) * batch)
            b = mx.io.DataBatch([mx.nd.array(idx[part])], [mx.nd.array(label[part])])
            rows = {"embed_weight": mx.nd.array(np.unique(idx[part]), dtype="int64")}
            mod.prepare(b, sparse_row_id_fn=lambda _: rows)
            mod.forward_backward(b)
            mod.update()
        if not isinstance(kvstore, str):
            kvstore.barrier()
    return mod


def sparse_module_async_job(out):
    """Module training of a row_sparse embedding over dist_async, the workers taking
    turns; then one process trains the same batches in order on a local store."""
    kv = mx.kv.create("dist_async")
    r, n = kv.rank, kv.num_workers
    _train_sparse_embedding(kv, lambda i: i % n == r)
    shared = mx.nd.sparse.zeros("row_sparse", (10, 3))
    kv.row_sparse_pull("embed_weight", out=shared, row_ids=mx.nd.arange(0, 10, dtype="int64"))
    ref = _train_sparse_embedding("local", lambda i: True)
    ref.prepare(None, sparse_row_id_fn=lambda _: {"embed_weight": mx.nd.arange(0, 10)})
    kv.barrier()
    np.savez(os.path.join(out, f"rank{r}.npz"), rank=r, workers=n, shared=shared.asnumpy(),
             local=ref.get_params()[0]["embed_weight"].asnumpy(),
             initial=_sparse_embedding_table())


def mismatched_keys_job(out):
    """Rank 1 pushes keys 'a' and 'c' where the others push 'a' and 'b', of the same
    sizes: the sums would mix 'b' and 'c' silently; the push must fail instead."""
    kv = mx.kv.create("dist_sync")
    kv.init(["a", "b", "c"], [mx.nd.zeros((3,)), mx.nd.zeros((4,)), mx.nd.zeros((4,))])
    keys = ["a", "c"] if kv.rank == 1 else ["a", "b"]
    kv.push(keys, [mx.nd.ones((3,)), mx.nd.ones((4,))])
    kv.barrier()


class _BusyStore:
    """A store client whose ``add`` calls into C++ for half a second (thousands of calls,
    each releasing and retaking the GIL), beating every millisecond: the heartbeat thread
    is inside, or returning from, a C++ call nearly all the time. A heartbeat thread
    still running when the interpreter finalizes then returns from C++ into a finalizing
    interpreter, which ends it with pthread_exit, whose unwinding through torch's frames
    aborts the process ("terminate called without an active exception", as rank 1 once
    did after test_dist_sync_compresses_each_workers_sum)."""

    def __init__(self, store):
        self._store = store

    def add(self, key, n):
        import time
        end = time.monotonic() + 0.5
        while time.monotonic() < end:
            self._store.add(key, 0)
        return self._store.add(key, n)

    def __getattr__(self, name):
        return getattr(self._store, name)


def _slow_heartbeat():
    """The heartbeat thread's store (the first one WorkerGroup makes) becomes busy."""
    from runtime import dist_group
    dist_group._HEARTBEAT_S = 0.001
    make = dist_group.WorkerGroup._new_store
    made = []

    def slow(self):
        store = make(self)
        made.append(store)
        return _BusyStore(store) if len(made) == 1 and store is not None else store

    dist_group.WorkerGroup._new_store = slow


def _report_exit_state():
    """Registered before the kvstore exists, so it runs after the kvstore's and the
    worker group's atexit handlers: what they left behind."""
    import torch.distributed as dist
    names = sorted(t.name for t in threading.enumerate() if t is not threading.main_thread())
    print(f"exit state: threads {names}, process group "
          f"{'still initialized' if dist.is_initialized() else 'destroyed'}", flush=True)


def main(job, out):
    atexit.register(_report_exit_state)
    if job == "kv_api_busy_heartbeat":
        _slow_heartbeat()
        kv_api_job("dist_sync", out)
    elif job == "never_joins":
        mx.kv.create("dist_sync")
    elif job == "mlp_sync":
        mlp_job("dist_sync", out)
    elif job == "mlp_device_sync":
        mlp_job("dist_device_sync", out)
    elif job == "mlp_async":
        # test_module's accuracy run (320 rows in batches of 32) shared out; 8 epochs
        # instead of 5, since async steps use gradients of parameters already stale
        mlp_job("dist_async", out, epochs=8, batch=32,
                steps=10 // int(os.environ["WORLD_SIZE"]))
    elif job == "mlp_kill":
        mlp_job("dist_sync", out, steps=40,
                kill_at=3 if os.environ["RANK"] == "1" else None)
    elif job == "mlp_kill0":
        mlp_job("dist_sync", out, steps=40,
                kill_at=3 if os.environ["RANK"] == "0" else None)
    elif job == "mlp_hang":
        mlp_job("dist_sync", out, steps=40,
                kill_at=3 if os.environ["RANK"] == "1" else None, kill_signal=signal.SIGSTOP)
    elif job == "mlp_uneven":
        mlp_job("dist_sync", out, unsharded_steps=2 if os.environ["RANK"] == "1" else 6)
    elif job == "kv_sparse_sync":
        kv_sparse_job(out)
    elif job == "kv_sparse_async":
        kv_sparse_async_job(out)
    elif job == "sparse_module_async":
        sparse_module_async_job(out)
    elif job == "kv_mismatched_keys":
        mismatched_keys_job(out)
    elif job == "kv_api_compressed":
        kv_api_job("dist_sync", out, compress=True)
    elif job in ("kv_api_sync", "kv_api_async"):
        kv_api_job("dist_sync" if job == "kv_api_sync" else "dist_async", out)
    elif job == "kv_api_async_late_apply":
        _late_async_apply()
        kv_api_job("dist_async", out)
    elif job in ("mlp_overlap", "mlp_overlap_local_update"):
        mlp_overlap_job(out, on_kvstore=job == "mlp_overlap")
    elif job == "lstm_sync":
        lstm_job("dist_sync", out)
    else:
        raise SystemExit(f"unknown job {job!r}")


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
