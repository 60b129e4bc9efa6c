"""Distributed kvstores on 2 and 3 worker processes of this machine (gloo over
loopback), checked against one process training on the same batches.

Oracle: with ``dist_sync`` a step sums the gradients of every worker's batch, so
N steps on W workers must equal N steps of one process on the W batches
concatenated (``kvstore='local'``, the same ``rescale_grad = 1/(W*batch)``),
and every worker must end with bit-identical parameters.
"""
import os
import time

import numpy as np
import pytest

import module_api as mx
from runtime import optimizer as opt
from tests.distributed import launch, worker
from tests.models import mlp

pytestmark = pytest.mark.slow


def _load(out_dir, world):
    return [dict(np.load(os.path.join(out_dir, f"rank{r}.npz"))) for r in range(world)]


def _section(result, prefix):
    return {k.split(":", 1)[1]: v for k, v in result.items() if k.startswith(prefix + ":")}


def _batches(result, what):
    return [result[f"{what}:{i}"] for i in range(len(result["keys"]))]


def _assert_identical_workers(results):
    first = _section(results[0], "final")
    for r, res in enumerate(results[1:], 1):
        for k, v in _section(res, "final").items():
            np.testing.assert_array_equal(v, first[k], err_msg=f"rank {r} differs on {k}")
    # init_optimizer took rank 0's values although every worker drew its own
    init0 = _section(results[0], "init")
    for res in results[1:]:
        for k, v in _section(res, "init").items():
            np.testing.assert_array_equal(v, init0[k])


@pytest.mark.parametrize("job", ["kv_api_sync", "kv_api_async", "kv_api_async_late_apply"])
def test_kvstore_api_across_three_workers(tmp_path, job):
    launch.run(job, 3, tmp_path)
    results = _load(tmp_path, 3)
    assert [int(r["rank"]) for r in results] == [0, 1, 2]
    assert all(int(r["workers"]) == 3 for r in results)
    for res in results:
        # init took rank 0's values
        np.testing.assert_array_equal(res["first:a"], np.full((3,), 10.0))
        np.testing.assert_array_equal(res["first:c"], np.full((5,), -1.0))
        # (late_apply: owners apply a peer's push a second after it arrives, and a
        # barrier still waits for it)
        if job == "kv_api_sync":   # sum over workers r=0..2 of (r+1) + 1
            expected = sum(r + 1 + 1 for r in range(3))
        else:                      # the last worker's push replaced the value
            expected = 3 + 1
        for k in "abc":
            np.testing.assert_array_equal(res[f"after:{k}"], np.full_like(res[f"after:{k}"],
                                                                          expected))


def test_dist_sync_compresses_each_workers_sum(tmp_path):
    """2-bit compression on dist_sync quantizes each worker's sum over its devices
    (0.3 (r+1) + 0.3 = 0.6, 0.9, 1.2 -> 0.5 each): 1.5 in all. Compressing each
    device instead would give 0 + 0.5 + 0.5."""
    launch.run("kv_api_compressed", 3, tmp_path)
    for res in _load(tmp_path, 3):
        for k in "abc":
            np.testing.assert_allclose(res[f"after:{k}"], np.full_like(res[f"after:{k}"], 1.5))


def _mlp_reference(results, world, halve_at=None):
    """One process, kvstore='local', each step on the workers' batches concatenated
    (the gradients halved before the update of step ``halve_at``)."""
    batch = worker.MLP_BATCH * world
    mod = mx.mod.Module(mlp(hidden=(32,), classes=4), context=mx.cpu())
    mod.bind([("data", (batch, 10))], [("softmax_label", (batch,))])
    mod.init_params(arg_params={k: mx.nd.array(v) for k, v in _section(results[0], "init").items()})
    mod.init_optimizer(kvstore='local', optimizer='sgd', optimizer_params=worker.SGD)
    for i in range(len(results[0]["keys"])):
        x = np.concatenate([res[f"data:{i}"] for res in results])
        y = np.concatenate([res[f"label:{i}"] for res in results])
        mod.forward_backward(mx.io.DataBatch([mx.nd.array(x)], [mx.nd.array(y)]))
        if i == halve_at:
            for grads in mod._exec_group.grad_arrays:
                grads[0] *= 0.5
        mod.update()
    return {k: v.asnumpy() for k, v in mod.get_params()[0].items()}


@pytest.mark.parametrize("world", [2, 3])
def test_dist_sync_mlp_equals_one_process_on_concatenated_batches(tmp_path, world):
    launch.run("mlp_sync", world, tmp_path)
    results = _load(tmp_path, world)
    _assert_identical_workers(results)
    assert all(len(r["keys"]) == worker.MLP_STEPS for r in results)
    # each worker read its own shard
    assert not np.array_equal(results[0]["data:0"], results[1]["data:0"])
    # fit ran epoch_end_callback (the checkpoint) on rank 0 only
    assert sorted(p.name for p in tmp_path.glob("epoch*")) == ["epoch0-ended-on-rank0"]
    _, saved, _ = mx.model.load_checkpoint(str(tmp_path / "mlp"), 1)
    ref = _mlp_reference(results, world)
    got = _section(results[0], "final")
    for k, v in saved.items():
        np.testing.assert_array_equal(v.asnumpy(), got[k])
    moved = max(float(np.abs(got[k] - _section(results[0], "init")[k]).max()) for k in got)
    assert moved > 1e-2, "training did not change the parameters"
    for k in ref:
        np.testing.assert_allclose(got[k], ref[k], rtol=1e-5, atol=1e-6, err_msg=k)


@pytest.mark.parametrize("job", ["mlp_overlap", "mlp_overlap_local_update"])
def test_gradients_reduced_during_backward_equal_one_process(tmp_path, job):
    """A bucket per gradient, each all-reduced from the backward launch that finishes
    it (kvstore_overlap): the same parameters as one process on the concatenated
    batches, also after a second backward and an in-place edit of the gradients
    between backward and update (both re-send the buckets at the push)."""
    launch.run(job, 2, tmp_path)
    results = _load(tmp_path, 2)
    _assert_identical_workers(results)
    steps = len(results[0]["keys"])
    assert steps == worker.MLP_STEPS
    assert int(results[0]["on_kvstore"]) == (job == "mlp_overlap")
    n_grads = len(_section(results[0], "final"))
    for res in results:
        # the first push agrees on the plan and sends everything; after that the
        # backward sends every bucket, and the pushes of steps 1 and 2 send them again
        assert int(res["fired_in_backward"]) == n_grads * (steps - 1)
        assert int(res["fired_at_push"]) == n_grads * 3
    ref = _mlp_reference(results, 2, halve_at=2)
    got = _section(results[0], "final")
    for k in ref:
        np.testing.assert_allclose(got[k], ref[k], rtol=1e-5, atol=1e-6, err_msg=k)


def test_dist_device_sync_equals_dist_sync(tmp_path):
    (tmp_path / "device").mkdir()
    (tmp_path / "sync").mkdir()
    launch.run("mlp_device_sync", 2, tmp_path / "device")
    launch.run("mlp_sync", 2, tmp_path / "sync")
    dev, sync = _load(tmp_path / "device", 2), _load(tmp_path / "sync", 2)
    _assert_identical_workers(dev)
    for k, v in _section(sync[0], "final").items():
        np.testing.assert_allclose(_section(dev[0], "final")[k], v, rtol=1e-6, atol=1e-7)


def _lstm_reference(results, world):
    """One process: per step, every worker's batch (its own bucket) accumulated with
    grad_req='add', then one update."""
    mod = mx.mod.BucketingModule(worker.lstm_sym_gen, default_bucket_key=max(worker.LSTM_BUCKETS),
                                 context=mx.cpu())
    shape = (worker.LSTM_BATCH, max(worker.LSTM_BUCKETS))
    mod.bind([("data", shape)], [("softmax_label", shape)], grad_req='add')
    mod.init_params(arg_params={k: mx.nd.array(v) for k, v in _section(results[0], "init").items()})
    sgd = dict(worker.SGD, rescale_grad=1.0 / (worker.LSTM_BATCH * world))
    mod.init_optimizer(kvstore='local', optimizer='sgd', optimizer_params=sgd)
    for i in range(len(results[0]["keys"])):
        for g in mod._buckets[mod._default_bucket_key]._exec_group.grad_arrays:
            for arr in g:
                arr[:] = 0
        for res in results:
            key = int(res["keys"][i])
            x, y = res[f"data:{i}"], res[f"label:{i}"]
            mod.forward(mx.io.DataBatch([mx.nd.array(x)], [mx.nd.array(y)], bucket_key=key,
                                        provide_data=[mx.io.DataDesc("data", x.shape)],
                                        provide_label=[mx.io.DataDesc("softmax_label",
                                                                      y.shape)]),
                        is_train=True)
            mod.backward()
        mod.update()
    return {k: v.asnumpy() for k, v in mod.get_params()[0].items()}


def test_dist_sync_bucketing_lstm_with_different_buckets_per_worker(tmp_path):
    launch.run("lstm_sync", 2, tmp_path)
    results = _load(tmp_path, 2)
    _assert_identical_workers(results)
    keys = [r["keys"] for r in results]
    assert len(keys[0]) == len(keys[1]) >= 3
    assert any(a != b for a, b in zip(*keys)), f"workers never differed in bucket: {keys}"
    ref = _lstm_reference(results, 2)
    got = _section(results[0], "final")
    for k in ref:
        np.testing.assert_allclose(got[k], ref[k], rtol=1e-4, atol=1e-6, err_msg=k)


def test_dist_async_mlp_reaches_the_local_accuracy_bar(tmp_path):
    launch.run("mlp_async", 2, tmp_path)
    results = _load(tmp_path, 2)
    # test_module.test_fit_mlp_reaches_accuracy_with_speedometer's bar for local training
    for r, res in enumerate(results):
        assert float(res["accuracy"]) >= 0.95, (r, float(res["accuracy"]))
    # the states file rank 0 wrote holds every owner's states
    up = opt.Updater(opt.create('sgd', **worker.SGD))
    with open(tmp_path / "async.states", "rb") as f:
        up.set_states(f.read())
    assert sorted(up.states) == sorted(_section(results[0], "final"))


def test_a_killed_worker_makes_the_others_fail_naming_it(tmp_path):
    procs = launch.start("mlp_kill", 3, tmp_path)
    t_dead = None
    deadline = time.monotonic() + 240
    while time.monotonic() < deadline and any(p.poll() is None for p in procs):
        if t_dead is None and procs[1].poll() is not None:
            t_dead = time.monotonic()
        if t_dead is not None and time.monotonic() - t_dead > 60:
            break
        time.sleep(0.2)
    if t_dead is None and procs[1].poll() is not None:
        t_dead = time.monotonic()
    still_running = [r for r, p in enumerate(procs) if p.poll() is None]
    results = launch.finish(procs, timeout=5)
    assert t_dead is not None, results[1][1][-2000:]
    assert procs[1].returncode == -9
    assert not still_running, f"ranks {still_running} still ran 60 s after rank 1 died"
    for r in (0, 2):
        rc, out = results[r]
        assert rc != 0, out[-2000:]
        assert "lost rank 1" in out, out[-3000:]
        assert out.count("WorkerLostError: ") == 1, out[-3000:]
        launch.assert_clean_exit(out, r)


def test_killing_rank_0_gives_one_line_and_no_cpp_frames(tmp_path):
    """Rank 0 hosts the rendezvous store: its death fails the survivors' collective and
    their store calls. Each says so in one WorkerLostError line; gloo's message and
    torch's C++ warnings (some forty lines of frames) stay out unless SYMTRITON_LOG=dist."""
    results = launch.finish(launch.start("mlp_kill0", 3, tmp_path), timeout=240)
    assert results[0][0] == -9, results[0][1][-2000:]
    for r in (1, 2):
        rc, out = results[r]
        assert rc == 1, out[-3000:]
        assert out.count("WorkerLostError: ") == 1, out[-3000:]
        assert "rank 0, or the host of the rendezvous store" in out
        assert "The above exception was the direct cause" not in out
        launch.assert_clean_exit(out, r)


def test_exit_is_clean_while_the_heartbeat_is_inside_a_store_call(tmp_path):
    """The abort once seen in test_dist_sync_compresses_each_workers_sum: a daemon thread
    that returns from a C++ store call while the interpreter finalizes is ended by
    pthread_exit, whose unwinding through torch's frames calls std::terminate
    (SIGABRT, "terminate called without an active exception"). With a heartbeat that is
    always in a store call (worker.py's _BusyStore) every rank of the old exit, which
    only signalled the thread to stop, aborted; close() now joins it and destroys the
    process group first (launch.run checks every worker's exit state)."""
    launch.run("kv_api_busy_heartbeat", 3, tmp_path)


def test_a_rank_that_never_starts_is_named(tmp_path):
    procs = launch.start("never_joins", 3, tmp_path, ranks=[0, 1],
                         extra_env={"SYMTRITON_DIST_START_TIMEOUT": "6"})
    t0 = time.monotonic()
    results = launch.finish(procs, timeout=120)
    assert time.monotonic() - t0 < 90
    for r, (rc, out) in enumerate(results):
        assert rc == 1, out[-3000:]
        assert f"rank {r} of 3: rank 2 never joined the job within 6 s " \
               f"(SYMTRITON_DIST_START_TIMEOUT)" in out, out[-3000:]
        launch.assert_clean_exit(out, r)


def test_a_rank_0_that_never_starts_is_named(tmp_path):
    procs = launch.start("never_joins", 2, tmp_path, ranks=[1],
                         extra_env={"SYMTRITON_DIST_START_TIMEOUT": "4"})
    rc, out = launch.finish(procs, timeout=120)[0]
    assert rc == 1, out[-3000:]
    assert "rank 1 of 2: rank 0 never started, or its rendezvous store" in out, out[-3000:]
    assert "no connection within 4 s" in out
    launch.assert_clean_exit(out, 1)


def test_a_hung_worker_trips_the_watchdog_of_the_others(tmp_path):
    procs = launch.start("mlp_hang", 2, tmp_path, extra_env={"SYMTRITON_DIST_LOST_AFTER": "4"})
    try:
        rc, out = launch.finish(procs[:1], timeout=120)[0]
    finally:
        procs[1].kill()         # it is stopped (SIGSTOP): only SIGKILL ends it
        procs[1].communicate()
    assert rc == 75, out[-3000:]
    assert "lost rank 1: no heartbeat for 4 s" in out, out[-3000:]


def test_a_worker_that_finishes_early_is_named(tmp_path):
    results = launch.finish(launch.start("mlp_uneven", 2, tmp_path), timeout=120)
    rc0, out0 = results[0]
    assert results[1][0] == 0, results[1][1][-2000:]
    assert rc0 != 0
    assert "rank 1 finished before this worker" in out0, out0[-3000:]
    assert "num_parts=kv.num_workers" in out0


def test_workers_pushing_different_keys_are_refused(tmp_path):
    # the key summary rides in the gradients' all-reduce: no collective of its own
    results = launch.finish(launch.start("kv_mismatched_keys", 2, tmp_path), timeout=120)
    rc1, out1 = results[1]
    assert rc1 != 0
    assert "other workers pushed different keys" in out1, out1[-3000:]
    assert "rank 1 pushed 2 keys of 7 values" in out1, out1[-3000:]
    assert results[0][0] != 0, results[0][1][-2000:]      # its peer failed: it is told


def test_create_outside_a_job_says_how_to_start_one(monkeypatch):
    for k in ("RANK", "WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT"):
        monkeypatch.delenv(k, raising=False)
    from runtime import dist_group
    monkeypatch.setattr(dist_group, "_GROUP", None)
    with pytest.raises(mx.MXNetError, match="torchrun --nproc_per_node"):
        mx.kv.create("dist_sync")


def test_row_sparse_on_dist_async(tmp_path):
    """row_sparse init / push / row_sparse_pull over dist_async on 3 workers
    (worker.kv_sparse_async_job): only the pushed rows change, by lr 1 x each push."""
    launch.run("kv_sparse_async", 3, tmp_path)
    want_first = np.zeros((6, 3), np.float32)
    want_first[[0, 4]] = 10.0                       # rank 0's rows and values
    pushes = np.zeros((6, 3), np.float32)
    for r in range(3):
        pushes[[r, r + 2]] += r + 1.0
        pushes[5] += 1.0
    for res in _load(tmp_path, 3):
        np.testing.assert_array_equal(res["first"], want_first)
        np.testing.assert_array_equal(res["after"], want_first - pushes)
        np.testing.assert_array_equal(res["dense"], 1.0 - pushes)   # rank 0's ones
        assert res["rows_indices"].tolist() == [0, 1, 5]
        np.testing.assert_array_equal(res["rows_data"], (want_first - pushes)[[0, 1, 5]])


def test_dist_async_module_with_row_sparse_weight_equals_local_training(tmp_path):
    """Two workers taking turns on dist_async (prepare pulls the batch's rows, update
    pushes a row_sparse gradient to the owner's lazy SGD with momentum) end with the
    weights of one process training the same batches in order on a local store."""
    launch.run("sparse_module_async", 2, tmp_path)
    for res in _load(tmp_path, 2):
        np.testing.assert_allclose(res["shared"], res["local"], rtol=1e-6, atol=1e-7)
        assert np.abs(res["local"] - res["initial"]).max() > 1e-2     # it trained


def test_row_sparse_on_two_workers(tmp_path):
    """row_sparse init / push / row_sparse_pull over dist_sync (worker.kv_sparse_job)."""
    launch.run("kv_sparse_sync", 2, tmp_path)
    want_first = np.zeros((6, 3), np.float32)
    want_first[[0, 4]] = 10.0                       # rank 0's rows and values
    want_after = np.zeros((6, 3), np.float32)
    for r in range(2):
        want_after[[r, r + 2]] += r + 1.0
        want_after[5] += 1.0
    for res in _load(tmp_path, 2):
        np.testing.assert_array_equal(res["first"], want_first)
        np.testing.assert_array_equal(res["after"], want_after)
        assert res["rows_indices"].tolist() == [0, 1, 5]
        np.testing.assert_array_equal(res["rows_data"], want_after[[0, 1, 5]])
        # lazy SGD (lr 0.1, momentum 0.9, wd 0.01) of the summed rows 0 (1.0) and 1 (2.0)
        want = np.ones((6, 3), np.float32)
        for row, g in ((0, 1.0), (1, 2.0)):
            want[row] = np.float32(1.0) + (-np.float32(0.1 * 0.01) - np.float32(0.1) * g)
        np.testing.assert_allclose(res["updated"], want, rtol=1e-6)
