"""Fuzzing the file loaders: a malformed file is an MXNetError naming it, nothing else.

Seeded mutations of real files of each kind are written to disk and loaded the way
users load them:

* ``mx.nd.load`` on ``.params`` files (mxnet 1.9.1 fixtures),
* ``mx.sym.load`` on ``-symbol.json`` files, raw bytes (non-UTF-8 included),
* ``.states`` files in symtriton's format (built here) and in mxnet's pickle format
  (fixtures, through the restricted unpickler), checked against bound weights.

Every outcome must be a result or an :class:`MXNetError` whose message names the
file; any other exception, or a load slower than ``SLOW_S``, fails. The mutations
include the header values that once made the loaders allocate from a corrupt
header or raise foreign errors: sizes of ``2**62``, ``-1``, ``2**64 - 1``, keys that
are not UTF-8, JSON nested 100,000 deep.

Loading never imports a module (a pickle naming any global but the allowed ones is
refused): the set of imported modules is the same after every load.

``SYMTRITON_FUZZ_EXAMPLES`` sets the number of mutations per file kind (the suite runs
300 per kind, seeded; issue 27's acceptance run used 2,500: 11,148 mutations in all,
the header mutator exhausting its choices at 1,148, with no other outcome than a
result or an MXNetError, no import, and every load under 10 s).
"""
import json
import os
import struct
import sys
import time

import pytest
import torch
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import module_api as mx
from compiler.errors import MXNetError
from runtime import optimizer as opt
from runtime import optimizer_states
from runtime.updater import load_states_file

# the codecs pickle's text opcodes use, which Python imports on first use: loaded here so
# that "no module was imported by a load" holds for what a file could choose
import encodings.latin_1  # noqa: E402,F401
import encodings.raw_unicode_escape  # noqa: E402,F401
import encodings.utf_8  # noqa: E402,F401

FIXTURES = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "fixtures")
EXAMPLES = int(os.environ.get("SYMTRITON_FUZZ_EXAMPLES", "300"))
SLOW_S = 10.0

HOSTILE_INTS = [0, 1, 2, 7, 255, 2 ** 31 - 1, 2 ** 31, 2 ** 32 - 1, 2 ** 62, 2 ** 63 - 1,
                2 ** 64 - 1, -1, -2 ** 31, -2 ** 63]


def _read(name):
    with open(os.path.join(FIXTURES, name), "rb") as f:
        return f.read()


def _symtriton_states():
    """An Adam updater's states (multi_precision float16 and float32 weights) and the
    optimizer's settings, in symtriton's format, with the weights they belong to."""
    up = opt.get_updater(opt.create("adam", multi_precision=True, learning_rate=0.01))
    weights = {0: torch.ones(3, 4, dtype=torch.float16), 1: torch.ones(5),
               2: torch.ones(2, 2, 2)}
    for k, w in weights.items():
        up(k, torch.full_like(w, 0.5), w)
    return up.get_states(dump_optimizer=True), weights


SYM_STATES, SYM_WEIGHTS = _symtriton_states()

SEEDS = {
    "params": [_read(n) for n in ("mlp-0001.params", "nd_dtypes.params", "nd_list.params",
                                  "nd_np_scalar.params", "mxstates-0002.params")],
    "symbol": [_read(n) for n in ("mlp-symbol.json", "lstm_cell-symbol.json")],
    "states": [SYM_STATES],
    "mxnet_states": [_read(n) for n in ("mxstates-0002.states", "mxopt_lamb_dump.states",
                                        "mp_sgd-0003.states")],
}


def _pack(value, width):
    return (value % (1 << (8 * width))).to_bytes(width, "little")


@st.composite
def byte_mutation(draw, data):
    """One mutation of ``data``: hostile integers written over 4 or 8 bytes, flipped or
    replaced bytes, an insertion, a deletion, a duplication or a truncation."""
    data = bytearray(data)
    kind = draw(st.sampled_from(["int", "int", "int", "flip", "bytes", "insert", "delete",
                                 "dup", "truncate", "utf8"]))
    pos = draw(st.integers(0, max(0, len(data) - 1)))
    if kind == "int":
        width = draw(st.sampled_from([4, 8]))
        data[pos:pos + width] = _pack(draw(st.sampled_from(HOSTILE_INTS)), width)
    elif kind == "flip":
        if data:
            data[pos] ^= 1 << draw(st.integers(0, 7))
    elif kind == "bytes":
        new = draw(st.binary(min_size=1, max_size=8))
        data[pos:pos + len(new)] = new
    elif kind == "insert":
        data[pos:pos] = draw(st.binary(min_size=1, max_size=16))
    elif kind == "delete":
        del data[pos:pos + draw(st.integers(1, 32))]
    elif kind == "dup":
        n = draw(st.integers(1, 64))
        data[pos:pos] = data[pos:pos + n]
    elif kind == "truncate":
        del data[pos:]
    else:       # bytes that are not UTF-8
        data[pos:pos] = draw(st.sampled_from([b"\xff", b"\xfe\xff", b"\xc3", b"\xed\xa0\x80",
                                              b"\x80\x80"]))
    return bytes(data)


def _header_and_body(data):
    pos = len(optimizer_states.MAGIC)
    _, hlen = struct.unpack_from("<IQ", data, pos)
    start = pos + 12
    return json.loads(data[start:start + hlen]), data[start + hlen:]


def _with_header(header, body, text=None):
    hjson = (text if text is not None else json.dumps(header)).encode("utf-8")
    return (optimizer_states.MAGIC + struct.pack("<IQ", 1, len(hjson)) + hjson + body)


@st.composite
def states_header_mutation(draw, data):
    """A mutation of the JSON header of a symtriton ``.states`` file."""
    header, body = _header_and_body(data)
    arrays = header["arrays"]
    i = draw(st.integers(0, len(arrays) - 1))
    kind = draw(st.sampled_from(["shape", "dim", "offset", "nbytes", "dtype", "deep",
                                 "state_ref", "state_kind", "key", "optimizer"]))
    if kind == "shape":
        arrays[i]["shape"] = draw(st.sampled_from(
            [[2 ** 62, 4], [-1, -1], [2 ** 64], [1] * 40, "3", None, [1.5], [True]]))
    elif kind == "dim":
        if arrays[i]["shape"]:
            arrays[i]["shape"][0] = draw(st.sampled_from(HOSTILE_INTS))
    elif kind in ("offset", "nbytes"):
        arrays[i][kind] = draw(st.sampled_from(HOSTILE_INTS + ["0", None, 1.0]))
    elif kind == "dtype":
        arrays[i]["dtype"] = draw(st.sampled_from(["float128", "object", "", None, 3]))
    elif kind == "deep":
        depth = draw(st.sampled_from([40, 5000, 100000]))
        where = draw(st.sampled_from(["state", "optimizer", "arrays"]))
        if where == "state":
            nested = '{"tuple": [' * depth + "null" + "]}" * depth
            text = json.dumps(dict(header, states=["@@"])).replace('"@@"', f'[{{"int": 0}}, '
                                                                         f'{nested}]')
        elif where == "optimizer":
            text = json.dumps(dict(header, optimizer="@@")).replace(
                '"@@"', '{"class": "adam", "attrs": {"x": ' + "[" * depth + "]" * depth + "}}")
        else:
            text = json.dumps(dict(header, arrays="@@")).replace('"@@"',
                                                                 "[" * depth + "]" * depth)
        return _with_header(None, body, text)
    elif kind == "state_ref":
        entry = draw(st.sampled_from(header["states"]))
        entry[1] = {"array": draw(st.sampled_from(HOSTILE_INTS + ["0", None]))}
    elif kind == "state_kind":
        entry = draw(st.sampled_from(header["states"]))
        entry[1] = draw(st.sampled_from([{"set": []}, {"value": {"a": 1}}, [], "x", 3,
                                         {"tuple": 3}, {"array": 0, "tuple": []}]))
    elif kind == "key":
        entry = draw(st.sampled_from(header["states"]))
        entry[0] = draw(st.sampled_from([{"int": 99}, {"str": "nope"}, {"float": 1.0},
                                         {"int": "0"}, 7, None]))
    else:
        header["optimizer"] = draw(st.sampled_from([
            {"class": "nope"}, {"class": "adam", "attrs": 3},
            {"class": "adam", "attrs": {"lr_scheduler": {"__scheduler__": "nope",
                                                         "attrs": {}}}},
            {"class": "adam", "attrs": {"lr_scheduler": {"__scheduler__": "FactorScheduler",
                                                         "attrs": 3}}},
            {"class": "adam", "attrs": {"d": {"__dict__": [[[1], 2], 3]}}}, [], "adam"]))
    return _with_header(header, body)


def _load(kind, path):
    if kind == "params":
        # read under the shape semantics its first record was written in (V3: numpy's)
        with open(path, "rb") as f:
            head = f.read(28)
        with mx.np_shape(head[24:28] == b"\xca\xfa\x93\xf9"):
            return mx.nd.load(path)
    if kind == "symbol":
        return mx.sym.load(path)
    up = opt.get_updater(opt.create("adam", multi_precision=True))
    if kind == "states":
        bound = {k: (f"w{k}", w) for k, w in SYM_WEIGHTS.items()}
        return load_states_file(up, path, bound=bound)
    return load_states_file(up, path, allow_pickle=True)


def check_file(kind, data, tmp_dir):
    """Load ``data`` as a file of ``kind``: a result, or an MXNetError naming the file."""
    path = os.path.join(tmp_dir, f"fuzzed-{kind}.bin")
    with open(path, "wb") as f:
        f.write(data)
    modules = set(sys.modules)
    t0 = time.monotonic()
    try:
        _load(kind, path)
    except MXNetError as exc:
        assert path in str(exc), f"the error does not name the file: {exc}"
    finally:
        elapsed = time.monotonic() - t0
    assert elapsed < SLOW_S, f"loading took {elapsed:.1f} s"
    assert set(sys.modules) == modules, f"loading imported {set(sys.modules) - modules}"


def _fuzz_settings():
    return settings(max_examples=EXAMPLES, deadline=None, derandomize=True, database=None,
                    suppress_health_check=list(HealthCheck))


@pytest.mark.parametrize("kind", sorted(SEEDS))
def test_unmutated_seeds_load(kind, tmp_path):
    """The harness itself: every seed file loads without an error."""
    for data in SEEDS[kind]:
        path = os.path.join(tmp_path, "seed")
        with open(path, "wb") as f:
            f.write(data)
        _load(kind, path)


@pytest.mark.parametrize("kind", sorted(SEEDS))
def test_mutated_files_load_or_fail_with_an_mxnet_error(kind, tmp_path):
    @_fuzz_settings()
    @given(st.data())
    def run(draw):
        data = draw.draw(st.sampled_from(SEEDS[kind]))
        for _ in range(draw.draw(st.integers(1, 3))):
            data = draw.draw(byte_mutation(data))
        check_file(kind, data, str(tmp_path))

    run()


def test_mutated_states_headers_load_or_fail_with_an_mxnet_error(tmp_path):
    @_fuzz_settings()
    @given(st.data())
    def run(draw):
        check_file("states", draw.draw(states_header_mutation(SYM_STATES)), str(tmp_path))

    run()


# ---------------------------------------------------------------- the cases of issue 27
def _params_file(shape, key=b"arg:w", data=b""):
    head = struct.pack("<QQQ", 0x112, 0, 1)
    arr = struct.pack(f"<Iii{len(shape)}q", 0xF993FAC9, 0, len(shape), *shape)
    arr += struct.pack("<iii", 1, 0, 0) + data
    return head + arr + struct.pack("<QQ", 1, len(key)) + key


def test_nd_load_refuses_a_shape_whose_size_wraps_around(tmp_path):
    path = tmp_path / "wrap.params"
    path.write_bytes(_params_file((2 ** 62, 4)))        # int64 product: 2**64 == 0
    with pytest.raises(MXNetError) as err:
        mx.nd.load(str(path))
    msg = str(err.value)
    assert str(path) in msg and "(4611686018427387904, 4)" in msg
    assert "too large for any array" in msg
    path.write_bytes(_params_file((2 ** 40, 4)))        # 16 TiB asked of an 85-byte file
    with pytest.raises(MXNetError) as err:
        mx.nd.load(str(path))
    assert "needs 17592186044416 bytes, 21 left" in str(err.value)


def test_nd_load_refuses_a_key_that_is_not_utf8(tmp_path):
    path = tmp_path / "key.params"
    path.write_bytes(_params_file((2,), key=b"arg:\xff\xfe", data=b"\0" * 8))
    with pytest.raises(MXNetError, match=r"key 0 is not UTF-8") as err:
        mx.nd.load(str(path))
    assert str(path) in str(err.value)
    # the same file with a good key loads: the test above fails for the key alone
    path.write_bytes(_params_file((2,), data=b"\0" * 8))
    assert list(mx.nd.load(str(path))) == ["arg:w"]


def test_sym_load_refuses_a_file_that_is_not_utf8(tmp_path):
    path = tmp_path / "net-symbol.json"
    path.write_bytes(b"\xff\xfe" + _read("mlp-symbol.json"))
    with pytest.raises(MXNetError, match="is not UTF-8") as err:
        mx.sym.load(str(path))
    assert str(path) in str(err.value)
    path.write_bytes(b'{"nodes": [}')
    with pytest.raises(MXNetError, match="not valid JSON") as err:
        mx.sym.load(str(path))
    assert str(path) in str(err.value)
    with pytest.raises(MXNetError, match="cannot read symbol file"):
        mx.sym.load(str(tmp_path / "missing-symbol.json"))


def _states_with_shape(shape):
    header, body = _header_and_body(SYM_STATES)
    header["arrays"][0]["shape"] = shape
    return _with_header(header, body)


@pytest.mark.parametrize("shape, words", [
    ([2 ** 62, 4], ["too large for any array"]),
    ([2 ** 40, 4], ["needs 17592186044416 bytes"]),
    ([-1, -1], ["invalid shape [-1, -1]"]),
])
def test_states_header_with_absurd_shapes(tmp_path, shape, words):
    path = tmp_path / "bad.states"
    path.write_bytes(_states_with_shape(shape))
    up = opt.get_updater(opt.create("adam"))
    with pytest.raises(MXNetError) as err:
        load_states_file(up, str(path))
    for w in [str(path), "array 0"] + words:
        assert w in str(err.value), (w, str(err.value))
    assert up.states == {}          # nothing was installed


def test_states_header_nested_100000_deep(tmp_path):
    header, body = _header_and_body(SYM_STATES)
    text = json.dumps(dict(header, states="@@")).replace(
        '"@@"', '[[{"int": 0}, ' + '{"tuple": [' * 100000 + "null" + "]}" * 100000 + "]]")
    path = tmp_path / "deep.states"
    path.write_bytes(_with_header(None, body, text))
    with pytest.raises(MXNetError, match="nested") as err:
        load_states_file(opt.get_updater(opt.create("adam")), str(path))
    assert str(path) in str(err.value)


def test_a_pickle_cannot_make_the_loader_allocate_from_an_integer(tmp_path):
    """``bytearray(n)`` in an mxnet ``.states`` pickle would allocate n bytes."""
    import pickle
    payload = b"\x80\x02}q\x00K\x00c__builtin__\nbytearray\nq\x01J\x00\x00\x00\x40\x85Rq\x02s."
    assert len(pickle.loads(payload.replace(b"J\x00\x00\x00\x40", b"K\x10"))[0]) == 16
    path = tmp_path / "alloc.states"
    path.write_bytes(payload)
    with pytest.raises(MXNetError, match="refusing bytes") as err:
        load_states_file(opt.get_updater(opt.create("sgd")), str(path), allow_pickle=True)
    assert str(path) in str(err.value)


def test_an_empty_array_with_an_absurd_dimension(tmp_path):
    """(0, 2**62): no data to read, but no array can have those strides."""
    path = tmp_path / "empty.params"
    path.write_bytes(_params_file((0, 2 ** 62)))
    with pytest.raises(MXNetError, match=r"too large for any array") as err:
        mx.nd.load(str(path))
    assert str(path) in str(err.value)
    path.write_bytes(_states_with_shape([0, 2 ** 62]))
    with pytest.raises(MXNetError, match=r"too large for any array"):
        load_states_file(opt.get_updater(opt.create("adam")), str(path))
