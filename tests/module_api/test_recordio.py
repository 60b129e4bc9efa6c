"""``mx.recordio`` against files mxnet 1.9.1 wrote (``tests/fixtures/make_io_fixtures.py``)."""
import os
import pickle
import sys

import numpy as np
import pytest

import module_api as mx
from compiler.errors import MXNetError

FIX = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "fixtures", "io")
sys.path.insert(0, os.path.dirname(FIX))
import make_io_fixtures as mf  # noqa: E402  (the payloads and images the fixtures hold)

recordio = mx.recordio


def _expected_payloads():
    jpeg = np.load(os.path.join(FIX, "inputs.npz"))["jpeg"].tobytes()
    return mf.raw_records() + [
        recordio.pack(recordio.IRHeader(0, 3.5, 17, 0), b"scalar"),
        recordio.pack(recordio.IRHeader(0, [1.0, 2.5, -4.0], 18, 5), b"arr"),
        recordio.pack(recordio.IRHeader(0, 1.0, 19, 0), jpeg)]


def test_reads_mxnet_records_in_order_and_by_index():
    want = _expected_payloads()
    rec = recordio.MXRecordIO(os.path.join(FIX, "records.rec"), "r")
    got = [rec.read() for _ in range(len(want))]
    assert got == want and rec.read() is None
    rec.reset()
    assert rec.read() == want[0]
    rec.close()
    idx = recordio.MXIndexedRecordIO(os.path.join(FIX, "records.idx"),
                                     os.path.join(FIX, "records.rec"), "r")
    assert idx.keys == list(range(len(want)))
    for k in (7, 3, 0, len(want) - 1):
        assert idx.read_idx(k) == want[k]


def test_writes_the_bytes_mxnet_writes(tmp_path):
    rec_path, idx_path = tmp_path / "r.rec", tmp_path / "r.idx"
    rec = recordio.MXIndexedRecordIO(str(idx_path), str(rec_path), "w")
    for i, p in enumerate(_expected_payloads()):
        rec.write_idx(i, p)
    rec.close()
    assert rec_path.read_bytes() == open(os.path.join(FIX, "records.rec"), "rb").read()
    assert idx_path.read_text() == open(os.path.join(FIX, "records.idx")).read()
    seq = tmp_path / "s.rec"
    w = recordio.MXRecordIO(str(seq), "w")
    for p in _expected_payloads():
        w.write(p)
    w.close()
    assert seq.read_bytes() == rec_path.read_bytes()


def test_record_layout_magic_length_and_padding(tmp_path):
    path = tmp_path / "one.rec"
    w = recordio.MXRecordIO(str(path), "w")
    w.write(b"abcde")
    w.close()
    raw = path.read_bytes()
    assert raw[:4] == bytes.fromhex("0a23d7ce") and raw[4:8] == (5).to_bytes(4, "little")
    assert raw[8:] == b"abcde\0\0\0"


def test_pack_unpack_headers():
    header, payload = recordio.unpack(_expected_payloads()[-2])
    assert header.flag == 3 and header.id == 18 and header.id2 == 5 and payload == b"arr"
    np.testing.assert_array_equal(header.label, np.float32([1.0, 2.5, -4.0]))
    header, payload = recordio.unpack(_expected_payloads()[-3])
    assert header == recordio.IRHeader(0, 3.5, 17, 0) and payload == b"scalar"


def test_image_records_of_mxnet_decode_as_bgr():
    idx = recordio.MXIndexedRecordIO(os.path.join(FIX, "images.idx"),
                                     os.path.join(FIX, "images.rec"), "r")
    for k, img in enumerate(mf.images()):
        header, bgr = recordio.unpack_img(idx.read_idx(k))
        assert header.id == k and list(header.label) == [float(k % 3), float(k)]
        np.testing.assert_array_equal(bgr, img[:, :, ::-1])      # PNG: exact
        _, gray = recordio.unpack_img(idx.read_idx(k), iscolor=0)
        assert gray.shape == img.shape[:2]


def test_pack_img_round_trip(tmp_path):
    bgr = mf.images()[1][:, :, ::-1]
    s = recordio.pack_img(recordio.IRHeader(0, 2.0, 4, 0), bgr, img_fmt=".png")
    header, back = recordio.unpack_img(s, iscolor=1)
    assert header.label == 2.0 and header.id == 4
    np.testing.assert_array_equal(back, bgr)
    s = recordio.pack_img(recordio.IRHeader(0, 2.0, 4, 0), bgr, quality=95)
    _, back = recordio.unpack_img(s)
    assert np.abs(back.astype(int) - bgr).max() <= 40 and np.abs(back.astype(int) - bgr).mean() < 8


def test_pickle_reopens_and_errors(tmp_path):
    idx = recordio.MXIndexedRecordIO(os.path.join(FIX, "records.idx"),
                                     os.path.join(FIX, "records.rec"), "r")
    clone = pickle.loads(pickle.dumps(idx))
    assert clone.read_idx(2) == b"abc"
    with pytest.raises(MXNetError, match="cannot open"):
        recordio.MXRecordIO(str(tmp_path / "missing.rec"), "r")
    with pytest.raises(ValueError, match="Invalid flag"):
        recordio.MXRecordIO(str(tmp_path / "x.rec"), "a")
    bad = tmp_path / "bad.rec"
    bad.write_bytes(b"\0" * 12)
    with pytest.raises(MXNetError, match="Invalid RecordIO File"):
        recordio.MXRecordIO(str(bad), "r").read()
