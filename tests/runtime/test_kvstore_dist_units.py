"""In-process pieces of distributed training: bucketing of the all-reduce, the
kvstore decisions the Module makes for distributed stores, and fit's rank-0-only
epoch_end_callback. The multi-process behaviour is in tests/distributed."""
import numpy as np
import pytest
import torch

import module_api as mx
from module_api.model import _create_kvstore, _initialize_kvstore
from runtime import kvstore as kvs
from runtime.kvstore_dist import bucket_tensors
from tests.models import mlp


def test_buckets_respect_the_byte_limit_dtype_and_order():
    ts = [torch.zeros(10), torch.zeros(20), torch.zeros(5, dtype=torch.float64),
          torch.zeros(40), torch.zeros(3)]
    buckets = bucket_tensors(ts, limit_bytes=30 * 4)
    ids = [[next(i for i, t in enumerate(ts) if t is b) for b in bucket] for bucket in buckets]
    # 10+20 fill the first fp32 bucket; 40 is alone (over the limit); 3 starts another
    assert ids == [[0, 1], [2], [3], [4]]
    assert sum(len(b) for b in bucket_tensors(ts, limit_bytes=1 << 30)) == 5
    assert len(bucket_tensors(ts, limit_bytes=1 << 30)) == 2     # one per dtype


class _RankOneStore(kvs.KVStore):
    """A one-process store that reports itself as rank 1 of a 2-worker 'dist_sync' job."""

    def __init__(self):
        super().__init__("local")
        self._type = "dist_sync"

    @property
    def rank(self):
        return 1

    @property
    def num_workers(self):
        return 2


def _blobs(n=64):
    rng = np.random.RandomState(0)
    x = rng.randn(n, 6).astype(np.float32)
    return x, (x[:, 0] > 0).astype(np.float32)


def test_fit_runs_epoch_end_callback_on_rank_0_only():
    x, y = _blobs()
    ends = []
    for store in (kvs.create("local"), _RankOneStore()):
        mod = mx.mod.Module(mlp(hidden=(8,), classes=2), context=mx.cpu())
        mod.fit(mx.io.NDArrayIter(x, y, batch_size=16), num_epoch=2, kvstore=store,
                epoch_end_callback=lambda epoch, *_, s=store: ends.append((s.rank, epoch)))
    assert ends == [(0, 0), (0, 1)]


def test_dist_sync_scales_rescale_grad_by_num_workers():
    x, y = _blobs()
    mod = mx.mod.Module(mlp(hidden=(8,), classes=2), context=mx.cpu())
    mod.bind([("data", (16, 6))], [("softmax_label", (16,))])
    mod.init_params()
    mod.init_optimizer(kvstore=_RankOneStore(), optimizer="sgd")
    assert mod._optimizer.rescale_grad == pytest.approx(1.0 / 32)
    assert mod._update_on_kvstore


class _Recorder(kvs.KVStore):
    def __init__(self, kv_type):
        super().__init__("local")
        self._type = kv_type
        self.calls = []

    def init(self, key, value):
        self.calls.append(("init", list(key)))
        super().init(key, value)

    def pull(self, key, out=None, priority=0, ignore_sparse=True):
        self.calls.append(("pull", list(key)))
        super().pull(key, out, priority)


def test_initialize_kvstore_one_call_and_distributed_stores_pull_even_without_updates():
    params = {"a": mx.nd.ones((2,)), "b": mx.nd.full((3,), 2.0)}
    devs = [[mx.nd.zeros((2,))], [mx.nd.zeros((3,))]]
    local = _Recorder("local")
    _initialize_kvstore(local, devs, params, ["a", "b"], update_on_kvstore=False)
    assert local.calls == [("init", ["a", "b"])]          # mxnet: init only
    dist = _Recorder("dist_sync")
    _initialize_kvstore(dist, devs, params, ["a", "b"], update_on_kvstore=False)
    assert dist.calls == [("init", ["a", "b"]), ("pull", ["a", "b"])]
    assert float(devs[1][0][0]) == 2.0


def test_dist_async_needs_update_on_kvstore(monkeypatch):
    monkeypatch.setenv("MXNET_UPDATE_ON_KVSTORE", "0")
    with pytest.raises(ValueError, match="needs update_on_kvstore"):
        _create_kvstore(_Recorder("dist_async"), 1, {"w": mx.nd.ones((2,))})


@pytest.mark.parametrize("name", ["horovod", "dist", "dist_sync_device_typo"])
def test_unsupported_distributed_types_are_named(name):
    with pytest.raises(mx.MXNetError, match="dist_sync.*torchrun"):
        kvs.create(name)


def test_worker_log_defaults_for_a_distributed_worker_only():
    from module_api import _worker_env
    assert _worker_env.apply({}) == {}                      # not a worker
    env = {"RANK": "1", "WORLD_SIZE": "2"}
    assert _worker_env.apply(env) == {"TORCH_CPP_LOG_LEVEL": "FATAL",
                                      "TORCH_SHOW_CPP_STACKTRACES": "0"}
    assert env["TORCH_CPP_LOG_LEVEL"] == "FATAL"
    mine = {"RANK": "0", "WORLD_SIZE": "2", "TORCH_CPP_LOG_LEVEL": "INFO"}
    assert _worker_env.apply(mine) == {"TORCH_SHOW_CPP_STACKTRACES": "0"}
    assert mine["TORCH_CPP_LOG_LEVEL"] == "INFO"             # the user's choice stays
    assert _worker_env.apply({"RANK": "0", "WORLD_SIZE": "2", "SYMTRITON_LOG": "cache,dist"}) \
        == {}


def test_the_gloo_error_behind_a_lost_worker_is_chained_under_symtriton_log_dist(monkeypatch):
    from runtime.dist_group import WorkerLostError, with_cause
    cause = RuntimeError("[pair.cc:553] Connection closed by peer\nException raised from ...")

    def raised():
        try:
            raise cause
        except RuntimeError as e:
            raise with_cause(WorkerLostError("lost rank 1"), e)

    monkeypatch.delenv("SYMTRITON_LOG", raising=False)
    with pytest.raises(WorkerLostError) as err:
        raised()
    assert err.value.__cause__ is None and err.value.__suppress_context__
    monkeypatch.setenv("SYMTRITON_LOG", "dist")
    with pytest.raises(WorkerLostError) as err:
        raised()
    assert err.value.__cause__ is cause
