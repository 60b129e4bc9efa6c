"""What a cold compile saves after the tile programs: twin groups render once, kernel
files are written while the rest renders, and a kernel this process wrote is imported
from its own bytes (not read back)."""
import hashlib
import os

import pytest

import compiler
from compiler.artifacts import cache, kernel_files, program
from compiler.artifacts.compile import compile_symbol
from compiler.ir.expr import ops
from compiler.ir.tile_program import Instr, Store, TileProgram
from runtime import launcher
from tests.models import mlp


@pytest.fixture
def fresh_cache(tmp_path, monkeypatch):
    monkeypatch.setenv("SYMTRITON_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setattr(launcher, "_MODULES", {})     # no kernel imported yet
    cache.clear_memory_cache()
    compiler.reset_cache_stats()
    yield tmp_path / "cache"
    cache.clear_memory_cache()


def _group(origin, scale=2.0):
    """A one-load, one-multiply, one-store pointwise program computing for ``origin``."""
    mul = ops.mul(ops.value("v0"), ops.const(scale))
    instrs = [Instr("load", "v0", (0,), extra={"dims": (0,)}, origin=origin),
              Instr("expr", "v1", ("v0",), mul, frozenset({0}), origin=origin)]
    return TileProgram("pointwise", (8,), (), (0,), (), instrs, [Store("v1", 1, ((0, 0),))],
                       [(origin, 0), (origin + "_out", 0)], ["in", "out"],
                       dtypes=["float32", "float32"])


def _key(prog):
    return program._render_key(prog, [[(1,)], [(1,)]], [(8,), (8,)],
                               [[("buf", "0")], [("buf", "1")]], "cpu", "ieee")


def test_render_key_leaves_out_which_node_an_instruction_computes():
    assert _key(_group("operator 'x' (node 'bn_1')")) == \
        _key(_group("operator 'x' (node 'bn_2')"))
    assert _key(_group("a", 2.0)) != _key(_group("a", 3.0))


def test_render_key_tells_apart_whatever_a_renderer_reads():
    """Programs differing in one thing a renderer reads get different keys: a
    constant's value or type, a store's place, what a value varies along, a load's
    dims, a dtype, the layouts, and which destinations share an array."""
    import dataclasses
    import numpy as np
    base = _group("a")
    variants = [_group("a", 3.0), _group("a", 2)]
    prog = _group("a")
    prog.stores = [Store("v1", 1, ((0, 1),))]
    variants.append(prog)
    prog = _group("a")
    prog.instrs[1] = dataclasses.replace(prog.instrs[1], varies=frozenset())
    variants.append(prog)
    prog = _group("a")
    prog.instrs[0] = dataclasses.replace(prog.instrs[0], extra={"dims": (None,)})
    variants.append(prog)
    prog = _group("a")
    prog.dtypes = ["float16", "float32"]
    variants.append(prog)
    keys = [_key(p) for p in [base] + variants]
    keys.append(program._render_key(base, [[(2,)], [(1,)]], [(8,), (8,)],
                                    [[("buf", "0")], [("buf", "1")]], "cpu", "ieee"))
    keys.append(program._render_key(base, [[(1,)], [(1,)]], [(8,), (8,)],
                                    [[("buf", "0")], [("buf", "0")]], "cpu", "ieee"))
    keys.append(program._render_key(base, [[(1,)], [(1,)]], [(8,), (8,)],
                                    [[("buf", "0")], [("buf", "1")]], "interpret", "ieee"))
    assert len(set(keys)) == len(keys)
    # a value marshal cannot write (a numpy scalar in an instruction's facts) still
    # keys the program, twins alike and others apart
    odd = [_group("a"), _group("b"), _group("a")]
    for prog, k in zip(odd, (1, 1, 2)):
        prog.instrs[0] = dataclasses.replace(prog.instrs[0],
                                             extra={"dims": (0,), "k": np.int64(k)})
    assert _key(odd[0]) == _key(odd[1]) != _key(odd[2])


def _compile():
    s = mlp(hidden=(8,))
    return compile_symbol(s, {"data": (4, 12), "softmax_label": (4,)}, True,
                          {n: "write" for n in s.list_arguments()}, True)


def test_kernel_files_written_and_imported_from_the_bytes_written(fresh_cache):
    prog = _compile()
    kernels = sorted({ln.kernel for ln in prog.kernel_launches()})
    assert kernels
    for h in kernels:
        with open(fresh_cache / "kernels" / f"k_{h}.py", "rb") as f:
            assert hashlib.sha256(f.read()).hexdigest()[:24] == h
        assert kernel_files.generated_here(h)
    # each kernel is imported once from the bytes this process wrote, then forgotten
    assert all(h in kernel_files._FRESH for h in kernels)
    for h in kernels:
        assert launcher.load_module(h).bind
        assert h not in kernel_files._FRESH
    assert compiler.cache_stats()["kernels_compiled"] == len(kernels)


def test_a_kernel_not_written_here_is_read_back_and_checked(fresh_cache):
    prog = _compile()
    h = prog.kernel_launches()[0].kernel
    cache.clear_memory_cache()           # forgets the bytes written: the file is read
    path = fresh_cache / "kernels" / f"k_{h}.py"
    os.chmod(path, 0o644)
    with open(path, "ab") as f:
        f.write(b"# changed\n")
    with pytest.raises(compiler.errors.MXNetError, match="does not match its checksum"):
        launcher.load_module(h)


def test_a_failed_build_waits_for_the_writes_it_started(fresh_cache):
    sources = kernel_files.KernelSources()
    sources["0" * 24] = "x = 1\n"
    sources["0" * 24] = "x = 1\n"        # the same kernel again: one write
    done = sources.close()
    assert [outcome for *_, outcome in done] == ["written"]
    assert (fresh_cache / "kernels" / f"k_{'0' * 24}.py").read_text() == "x = 1\n"
    assert sources.close() == []
