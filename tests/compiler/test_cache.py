"""Program cache: hits in the same process and across processes, new shapes compile,
corrupt entries rebuild, offline mode refuses to compile."""
import os
import subprocess
import sys

import pytest

import compiler
from compiler.artifacts import cache
from compiler.artifacts.compile import compile_symbol
from compiler.errors import MXNetError
from tests.models import mlp

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


@pytest.fixture
def fresh_cache(tmp_path, monkeypatch):
    monkeypatch.setenv("SYMTRITON_CACHE_DIR", str(tmp_path / "cache"))
    cache.clear_memory_cache()
    compiler.reset_cache_stats()
    yield tmp_path / "cache"
    cache.clear_memory_cache()


def _compile(shape=(4, 12)):
    s = mlp(hidden=(8,))
    return compile_symbol(s, {"data": shape, "softmax_label": (shape[0],)}, True,
                          {n: "write" for n in s.list_arguments()}, True)


def test_same_process_hit_and_new_shape_compiles(fresh_cache):
    _compile()
    assert compiler.cache_stats()["compiles"] == 1
    _compile()
    stats = compiler.cache_stats()
    assert stats["compiles"] == 1 and stats["hits"] == 1
    _compile((6, 12))
    assert compiler.cache_stats()["compiles"] == 2


def test_compiles_list_the_programs_directory_once_per_process(fresh_cache, monkeypatch):
    """Leftovers of crashed builders are swept at a process's first compile, then only for
    a key whose builder left its marker: a compile does not pay for listing a cache of
    tens of thousands of entries each time."""
    from compiler.artifacts import cache_entries
    programs = str(fresh_cache / "programs")
    dead = fresh_cache / "programs" / ".tmp-0123abcd-nohost-1-x"     # another host's, old
    dead.mkdir(parents=True)
    os.utime(dead, (0, 0))
    listed = []
    real_listdir = os.listdir
    monkeypatch.setattr(cache_entries.os, "listdir",
                        lambda p: listed.append(str(p)) or real_listdir(p))
    for shape in ((4, 12), (6, 12), (8, 12)):
        _compile(shape)
    assert compiler.cache_stats()["compiles"] == 3
    assert listed.count(programs) == 1 and not dead.exists()
    key = sorted(real_listdir(programs))[0]
    marker = fresh_cache / "locks" / f"{key}.building"     # as a crashed builder leaves it
    marker.touch()
    (fresh_cache / "programs" / key / "program.json").write_text("{ truncated")
    leftover = fresh_cache / "programs" / f".tmp-{key}-nohost-1-y"
    leftover.mkdir()
    os.utime(leftover, (0, 0))
    cache.clear_memory_cache()
    for shape in ((4, 12), (6, 12), (8, 12)):
        _compile(shape)                # the truncated entry's key is built again
    assert listed.count(programs) == 2 and not leftover.exists() and not marker.exists()


def test_disk_hit_in_new_process(fresh_cache):
    _compile()
    script = (
        "import sys; sys.path.insert(0, %r)\n"
        "import compiler\n"
        "from compiler.artifacts.compile import compile_symbol\n"
        "from tests.models import mlp\n"
        "s = mlp(hidden=(8,))\n"
        "compile_symbol(s, {'data': (4, 12), 'softmax_label': (4,)}, True,"
        " {n: 'write' for n in s.list_arguments()}, True)\n"
        "st = compiler.cache_stats()\n"
        "print(st['compiles'], st['disk_hits'])\n" % ROOT)
    env = dict(os.environ, SYMTRITON_CACHE_DIR=str(fresh_cache))
    out = subprocess.run([sys.executable, "-c", script], env=env, capture_output=True,
                         text=True, check=True)
    assert out.stdout.split() == ["0", "1"]


def test_corrupt_entry_is_rebuilt(fresh_cache):
    _compile()
    entry = next((fresh_cache / "programs").iterdir())
    body = entry / "program.json"
    body.write_bytes(body.read_bytes()[:50])
    cache.clear_memory_cache()
    compiler.reset_cache_stats()
    prog = _compile()
    stats = compiler.cache_stats()
    assert stats["corrupt_entries"] == 1 and stats["compiles"] == 1
    assert prog.stats["forward_launches"] >= 1


def test_offline_miss_names_the_key(fresh_cache, monkeypatch):
    monkeypatch.setenv("SYMTRITON_OFFLINE", "1")
    with pytest.raises(MXNetError) as err:
        _compile()
    msg = str(err.value)
    assert "SYMTRITON_OFFLINE" in msg and "data=(4, 12)" in msg and "symtriton compile" in msg


def test_kernels_shared_by_source_hash(fresh_cache):
    a = _compile()
    b = _compile((4, 12))
    assert {ln.kernel for ln in a.launches} == {ln.kernel for ln in b.launches}
    files = os.listdir(fresh_cache / "kernels")
    assert len(files) == len({ln.kernel for ln in a.launches})


def test_auto_names_do_not_change_the_key(fresh_cache):
    from compiler import symbol as sym

    def build():
        x = sym.Variable("data")
        return sym.FullyConnected(x * 2.0 + 1.0, num_hidden=3, name="fc")

    a = build()
    for _ in range(3):
        sym.Variable("junk") + 1.0   # advances the auto-name counters
    b = build()
    assert a.tojson() != b.tojson()
    compile_symbol(a, {"data": (2, 4)})
    compile_symbol(b, {"data": (2, 4)})
    assert compiler.cache_stats()["compiles"] == 1


def test_auto_named_head_does_not_change_the_key(fresh_cache, monkeypatch):
    """The head's own auto name (makeloss0 / makeloss1) is not part of the key:
    the second equal graph is a hit, also offline, and keeps its own output names."""
    from compiler import symbol as sym

    def build():
        x = sym.Variable("x")
        return sym.MakeLoss(sym.sum(x * x))

    a, b = build(), build()
    assert a.name != b.name
    pa = compile_symbol(a, {"x": (3, 4)}, True, {"x": "write"})
    monkeypatch.setenv("SYMTRITON_OFFLINE", "1")
    pb = compile_symbol(b, {"x": (3, 4)}, True, {"x": "write"})
    assert compiler.cache_stats()["compiles"] == 1
    assert [ln.kernel for ln in pa.launches] == [ln.kernel for ln in pb.launches]
    assert pa.output_names == a.list_outputs() and pb.output_names == b.list_outputs()
    assert pa.output_names != pb.output_names


def test_kernel_files_are_not_fsynced_and_a_zeroed_one_is_rebuilt(fresh_cache, monkeypatch):
    """Kernel sources are written without an fsync each (Inception-BN's 271 of them
    cost its cold start about 0.04 s): what power loss could leave, a kernel file of
    the right length full of zeros, fails the entry's manifest checksum at the next
    read, which rebuilds the entry and writes the kernel again."""
    synced = []
    real_fsync = os.fsync
    monkeypatch.setattr(os, "fsync", lambda fd: synced.append(fd) or real_fsync(fd))
    prog = _compile()
    kernels = sorted((fresh_cache / "kernels").iterdir())
    assert len(kernels) > 3
    assert len(synced) <= 3     # the entry's program.json, manifest.json and symbol only
    victim = kernels[0]
    good = victim.read_bytes()
    victim.write_bytes(b"\0" * len(good))
    cache.clear_memory_cache()
    compiler.reset_cache_stats()
    again = _compile()
    stats = compiler.cache_stats()
    assert stats["corrupt_entries"] == 1 and stats["compiles"] == 1
    assert victim.read_bytes() == good
    assert [ln.kernel for ln in again.launches] == [ln.kernel for ln in prog.launches]
