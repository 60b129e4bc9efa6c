"""The tile table (compiler/ir/tiles.py): the rules each target's choices keep."""
import itertools

import pytest

from compiler.ir.tiles import GPU_TABLE, MAX_TILE_NUMEL, MIN_DOT, gpu_params, np2, tile_config

SIZES = [1, 3, 16, 33, 100, 1000, 4096, 33278, 2_097_152]
KINDS = ["pointwise", "reduce", "matmul", "scatter", "fill"]


@pytest.mark.parametrize("target", ["interpret", "cuda:80", "cuda:90"])
def test_every_tile_fits_triton_and_covers_the_problem(target):
    for kind, M, N in itertools.product(KINDS, SIZES, SIZES[:7]):
        if kind in ("pointwise", "fill"):
            N = 1
        cfg = tile_config(kind, M, N, 64, target)
        bm, bn, bk = cfg["BM"], cfg["BN"], cfg["BK"]
        for v in (bm, bn, bk):
            assert v == np2(v), (kind, M, N, cfg)          # powers of two
        assert bm * bn <= MAX_TILE_NUMEL, (kind, M, N, cfg)
        assert cfg["grid"][1] == 1 and 1 <= cfg["grid"][0] < 2 ** 31
        if kind == "matmul":
            assert min(bm, bn) >= MIN_DOT and bk >= 8
            assert cfg["grid"][0] == -(-M // bm) * -(-N // bn)
        else:
            assert cfg["grid"][0] == -(-M // bm)
        if kind == "reduce":
            # the loop covers the row; on a GPU the chunk is bounded
            assert bn >= min(np2(N), bn)
            if target != "interpret":
                assert bn <= gpu_params(target)["reduce_block"]
                assert bm * bn <= max(gpu_params(target)["program_numel"], bn)


def test_interpreter_takes_whole_rows_up_to_tritons_limit():
    assert tile_config("reduce", 3, 33278, 0, "interpret")["BN"] == 65536    # one iteration
    big = tile_config("reduce", 1, 2_097_152, 0, "interpret")
    assert big["BN"] == MAX_TILE_NUMEL and big["BM"] == 1                   # two iterations


def test_gpu_matmul_tiles_keep_fp32_dots_in_registers():
    """BK 8 (an FMA dot holds its BK slice of both operands), 4 warps at 64x64."""
    for target in GPU_TABLE:
        cfg = tile_config("matmul", 800, 200, 32, target)
        assert (cfg["BM"], cfg["BN"], cfg["BK"], cfg["num_warps"]) == (64, 64, 8, 4)
        small = tile_config("matmul", 3, 5, 7, target)
        assert (small["BM"], small["BN"], small["BK"], small["num_warps"]) == (16, 16, 8, 4)
        assert cfg["num_stages"] == GPU_TABLE[target]["num_stages"]


def test_batches_fold_into_grid_axis_zero():
    """100,000 batches exceed CUDA's 65,535 limit of grid axis 1; axis 0 takes them."""
    cfg = tile_config("matmul", 100, 33, 20, "cuda:90", batch=100_000)
    assert (cfg["BM"], cfg["BN"]) == (64, 64)
    assert cfg["grid"] == [2 * 1 * 100_000, 1]


def test_newer_archs_use_the_nearest_row():
    assert gpu_params("cuda:100") is GPU_TABLE["cuda:90"]
    assert gpu_params("cuda:86") is GPU_TABLE["cuda:80"]
    assert gpu_params("cuda:75") is GPU_TABLE["cuda:80"]


def test_cpu_target_has_no_tiles():
    assert tile_config("matmul", 100, 100, 100, "cpu") == {"grid": [1, 1]}


@pytest.mark.parametrize("target", ["cuda:80", "cuda:90"])
@pytest.mark.parametrize("dot", ["float32", "float16", "bfloat16", "tf32", "float64"])
def test_matmul_k_chunk_is_one_the_installed_triton_accepts(target, dot):
    """A dot's K chunk is at least what the installed Triton's NVIDIA backend accepts for
    its operands (Triton 3.6 refused an fp32 dot with K 8 on an H100; 3.9 takes it)."""
    import triton.language as tl
    from triton.backends.compiler import GPUTarget
    from triton.backends.nvidia.compiler import min_dot_size
    elem = {"float16": tl.float16, "bfloat16": tl.bfloat16, "float64": tl.float64}.get(
        dot, tl.float32)
    rule = min_dot_size(GPUTarget("cuda", int(target.split(":")[1]), 32))(elem, elem)
    for m, n, k in [(3, 5, 4), (2, 2, 1), (128, 64, 7), (64, 64, 200)]:
        cfg = tile_config("matmul", m, n, k, target, dot=dot)
        assert cfg["BK"] >= rule[2] and cfg["BM"] >= rule[0] and cfg["BN"] >= rule[1], cfg
