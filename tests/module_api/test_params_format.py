"""mxnet's binary NDArray-list format: fixtures written by mxnet 1.9.1
(tests/fixtures/make_fixtures_nd.py), byte-for-byte writes, corrupt files."""
import os
import pickle
import struct

import numpy as np
import pytest
import torch

import module_api as mx
import module_api.ndarray as nd
from compiler.errors import MXNetError
from runtime import ndarray_io
from runtime.ndarray import NDArray, torch_dtype

FIX = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "fixtures")


def fixture(name):
    return os.path.join(FIX, name)


def read(name):
    with open(fixture(name), "rb") as f:
        return f.read()


@pytest.fixture(scope="module")
def expected():
    with np.load(fixture("nd_expected.npz")) as z:
        return {k: z[k] for k in z.files}


def _check(loaded, prefix, expected):
    items = loaded.items() if isinstance(loaded, dict) else enumerate(loaded)
    for key, arr in items:
        want = expected[f"{prefix}/{key}"]
        assert isinstance(arr, NDArray)
        assert arr.asnumpy().dtype == want.dtype
        assert tuple(arr.shape) == want.shape
        np.testing.assert_array_equal(arr.asnumpy(), want)


@pytest.mark.parametrize("name,kind,count", [
    ("nd_dict", dict, 6), ("nd_list", list, 3), ("nd_dtypes", dict, 7),
    ("nd_np_scalar", list, 1)])
def test_load_mxnet_fixture(name, kind, count, expected):
    with mx.np_shape(name == "nd_np_scalar"):     # written by mxnet under np_shape
        loaded = nd.load(fixture(name + ".params"))
    assert isinstance(loaded, kind) and len(loaded) == count
    _check(loaded, name, expected)


def test_dict_fixture_keeps_prefixes_and_order():
    keys = list(nd.load(fixture("nd_dict.params")))
    assert keys == ["arg:fc1_weight", "arg:fc1_bias", "arg:bn_gamma", "arg:bn_beta",
                    "aux:bn_moving_mean", "aux:bn_moving_var"]


def test_empty_dict_loads_as_empty_list_like_mxnet():
    assert nd.load(fixture("nd_empty.params")) == []


@pytest.mark.parametrize("name", ["nd_dict", "nd_list", "nd_dtypes", "nd_empty",
                                  "nd_np_scalar"])
def test_rewrite_is_byte_identical(name, tmp_path):
    out = tmp_path / "x.params"
    with mx.np_shape(name == "nd_np_scalar"):
        nd.save(str(out), nd.load(fixture(name + ".params")))
    assert out.read_bytes() == read(name + ".params")


def test_fresh_arrays_encode_like_mxnet(expected):
    """Arrays built here from the same values give mxnet's exact bytes."""
    names = ["float32", "float64", "float16", "int32", "int64", "uint8", "int8"]
    data = {k: nd.array(expected["nd_dtypes/" + k], dtype=k) for k in names}
    assert ndarray_io.dumps(data) == read("nd_dtypes.params")
    ckpt = {k.split("/", 1)[1]: nd.array(v) for k, v in expected.items()
            if k.startswith("nd_dict/")}
    assert ndarray_io.dumps(ckpt) == read("nd_dict.params")
    assert ndarray_io.dumps({}) == read("nd_empty.params")
    with mx.np_shape():
        assert ndarray_io.dumps(nd.array(2.5).reshape(())) == read("nd_np_scalar.params")


def test_decode_single_pickled_ndarray(expected):
    raw = read("nd_single.raw")
    arr = ndarray_io.decode_single_ndarray(raw)
    np.testing.assert_array_equal(arr.asnumpy(), expected["nd_single/0"])
    assert ndarray_io.encode_single_ndarray(arr) == raw


def test_setstate_takes_mxnets_pickled_handle(expected):
    """``NDArray.__setstate__({'handle': raw})``, as mxnet's own unpickling calls it: the
    array takes the record's values, shape and dtype (a gpu record lands on the CPU)."""
    want = expected["nd_single/0"]
    arr = mx.nd.zeros((7,), dtype="int8")
    arr.__setstate__({"handle": bytearray(read("nd_single.raw"))})
    np.testing.assert_array_equal(arr.asnumpy(), want)
    assert arr.dtype == want.dtype and arr.shape == want.shape
    back = pickle.loads(pickle.dumps(arr))          # torch's own state still round-trips
    np.testing.assert_array_equal(back.asnumpy(), want)


class _ShimUnpickler(pickle.Unpickler):
    """What an optimizer-states loader does with mxnet-written pickles."""

    def find_class(self, module, name):
        if module.startswith("mxnet.") and name == "NDArray":
            return _Shim
        return super().find_class(module, name)


class _Shim:
    def __init__(self, *args):  # mxnet's NDArray.__reduce__ passes (None,)
        self.arr = None

    def __setstate__(self, state):
        self.arr = ndarray_io.decode_single_ndarray(state["handle"])


def test_states_pickle_decodes(expected):
    with open(fixture("nd_states.pkl"), "rb") as f:
        states = _ShimUnpickler(f).load()
    np.testing.assert_array_equal(states[0].arr.asnumpy(), expected["nd_states/0"])
    np.testing.assert_array_equal(states[1][0].arr.asnumpy(), expected["nd_states/1.0"])
    np.testing.assert_array_equal(states[1][1].arr.asnumpy(), expected["nd_states/1.1"])
    assert states[2] is None


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.float16, torch.int32,
                                   torch.int64, torch.uint8, torch.int8, torch.bool,
                                   torch.bfloat16])
def test_round_trip_dtypes(dtype, tmp_path):
    src = (torch.arange(12).reshape(3, 4) % 5).to(dtype)
    f = tmp_path / "rt.params"
    nd.save(str(f), {"arg:x": src, "aux:y": src[0]})
    back = nd.load(str(f))
    assert torch_dtype(back["arg:x"]) == dtype and tuple(back["arg:x"].shape) == (3, 4)
    assert torch.equal(back["arg:x"], src) and torch.equal(back["aux:y"], src[0])


def test_round_trip_odd_shapes(tmp_path):
    f = tmp_path / "odd.params"
    nd.save(str(f), [nd.empty((0, 3)), nd.ones((1, 1, 1, 1, 2))])
    assert [tuple(a.shape) for a in nd.load(str(f))] == [(0, 3), (1, 1, 1, 1, 2)]
    with mx.np_shape():         # a 0-d array is written (and read) in numpy semantics
        nd.save(str(f), [nd.zeros((0, 3)), nd.array(7.0).reshape(())])
        back = nd.load(str(f))
    assert [tuple(a.shape) for a in back] == [(0, 3), ()]
    assert back[1].asscalar() == 7.0


def test_single_array_and_path_like(tmp_path):
    f = tmp_path / "one.params"
    nd.save(f, nd.ones((2,)))
    (back,) = nd.load(f)
    assert back.tolist() == [1.0, 1.0]
    assert nd.load_frombuffer(f.read_bytes())[0].tolist() == [1.0, 1.0]


def test_save_is_atomic_and_replaces(tmp_path):
    f = tmp_path / "ckpt.params"
    f.write_bytes(b"old")
    nd.save(str(f), {"a": nd.ones((3,))})
    assert os.listdir(tmp_path) == ["ckpt.params"]
    assert nd.load(str(f))["a"].tolist() == [1.0] * 3


def test_save_rejects_bad_data(tmp_path):
    with pytest.raises(TypeError):
        nd.save(str(tmp_path / "a"), {1: nd.ones(1)})
    with pytest.raises(TypeError):
        nd.save(str(tmp_path / "a"), [nd.ones(1), "x"])
    with pytest.raises(ValueError):
        nd.save(str(tmp_path / "a"), 3)


# ------------------------------------------------------------ corrupt files
def test_every_truncation_is_an_mxnet_error(tmp_path):
    raw = read("nd_dict.params")
    f = tmp_path / "trunc.params"
    for n in range(len(raw)):
        f.write_bytes(raw[:n])
        with pytest.raises(MXNetError, match="trunc.params"):
            nd.load(str(f))


@pytest.mark.parametrize("mutate,reason", [
    (lambda b: b"\x13" + b[1:], "header"),
    (lambda b: b + b"\0", "trailing"),
    (lambda b: b[:0x3c] + struct.pack("<i", 99) + b[0x40:], "type flag"),
    (lambda b: b[:0x1c] + struct.pack("<i", 7) + b[0x20:], "storage type"),
    (lambda b: b[:0x18] + b"\x01\x02\x03\x04" + b[0x1c:], "magic"),
])
def test_corrupt_files(mutate, reason, tmp_path):
    f = tmp_path / "bad.params"
    f.write_bytes(mutate(read("nd_list.params")))
    with pytest.raises(MXNetError, match=reason):
        nd.load(str(f))


def test_key_count_mismatch():
    raw = read("nd_list.params")[:-8] + struct.pack("<Q", 2) + struct.pack("<Q", 1) + b"a" * 1 \
        + struct.pack("<Q", 1) + b"b"
    with pytest.raises(MXNetError, match="keys"):
        ndarray_io.loads(raw)


def test_missing_file_is_an_mxnet_error(tmp_path):
    with pytest.raises(MXNetError, match="nope.params"):
        nd.load(str(tmp_path / "nope.params"))


def test_decode_single_rejects_garbage():
    with pytest.raises(MXNetError):
        ndarray_io.decode_single_ndarray(read("nd_single.raw")[:-1])


# ------------------------------------------------------------- old layouts
def test_reads_v1_and_legacy_records():
    data = np.array([1.5, -2.0], dtype=np.float32).tobytes()
    v1 = struct.pack("<Ii1qiii", 0xF993FAC8, 1, 2, 1, 0, 0) + data
    legacy = struct.pack("<I1Iiii", 1, 2, 1, 0, 0) + data
    for rec in (v1, legacy):
        assert ndarray_io.decode_single_ndarray(rec).tolist() == [1.5, -2.0]


def test_loaded_arrays_on_cpu_by_default_and_ctx_honoured():
    from runtime.context import cpu
    arr = ndarray_io.loads(read("nd_list.params"), ctx=cpu(1))[0]
    assert arr.context == cpu(1)
    assert nd.load(fixture("nd_list.params"))[0].context == cpu(0)


def test_fixture_script_is_reproducible_description():
    # the generator documents every file it writes; keep the two in step
    text = open(fixture("make_fixtures_nd.py")).read()
    for name in ["nd_dict.params", "nd_list.params", "nd_dtypes.params", "nd_empty.params",
                 "nd_np_scalar.params", "nd_single.raw", "nd_states.pkl", "nd_expected.npz"]:
        assert name in text and os.path.exists(fixture(name))
