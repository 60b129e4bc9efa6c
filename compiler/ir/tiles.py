"""Tile sizes, warps, pipeline stages and grid of every Triton launch: the one
table of choices per target.

A kernel's source never depends on its tiles (they are constexpr
parameters), so the same source runs with whole-array tiles in Triton's
interpreter and with small ones on a GPU. What each target gets:

- ``interpret`` (numpy per tile operation): tiles as large as Triton allows
  (``MAX_TILE_NUMEL`` elements, its ``TRITON_MAX_TENSOR_NUMEL``), so most
  kernels run as one program and one loop iteration, and rows longer than a
  tile loop over it.
- ``cuda:80`` / ``cuda:90``: tiles sized so that a program's values fit the
  register file without spilling (checked by compiling every kernel of the
  GPU configurations with ptxas: benchmarks/gpu_kernels.py and
  tests/compiler/test_cubin.py). The rows of a reduction are read in chunks
  of at most ``reduce_block`` columns, looping; matmul tiles are bounded by
  ``mm_block``; a matmul whose epilogue reduces whole rows takes the row in
  one tile (fusion allows it only up to 1,024 columns).

Every grid is one-dimensional: batches of a batched matmul fold into axis 0
(``tiles x batch``), whose limit (2**31 - 1) no shape here reaches, where
axis 1 would stop at 65,535.
"""
from __future__ import annotations

import functools

MAX_TILE_NUMEL = 1 << 20      # triton.language's TRITON_MAX_TENSOR_NUMEL

# num_stages 1: software pipelining (3 stages) made ptxas spill 16-48 bytes on a
# (32, 1024) matmul at BK 8; fp32 FMA dots gain little from it.
# per GPU target: (values a program holds in registers, reduction chunk,
# matmul (BM, BN, BK) caps, num_warps, num_stages)
# A tensor-core dot (float16 / bfloat16 operands, or float32 as TF32) keeps its
# accumulator in the MMA fragments and streams its operands through shared memory:
# ``mm_block_tc`` with ``tc_stages`` of software pipelining (cp.async prefetch).
GPU_TABLE = {
    "cuda:80": {"program_numel": 1024, "reduce_block": 1024, "mm_block": (64, 64, 8),
                "num_warps": 4, "num_stages": 1, "mm_block_tc": (64, 64, 32), "tc_stages": 3},
    "cuda:90": {"program_numel": 1024, "reduce_block": 2048, "mm_block": (64, 64, 8),
                "num_warps": 4, "num_stages": 1, "mm_block_tc": (64, 64, 32), "tc_stages": 3},
}
# operand kinds of a dot (``codegen`` writes them in a ``# dot operands:`` line)
TENSOR_CORE_DOTS = ("float16", "bfloat16", "tf32")
# the smallest tl.dot operand side Triton accepts (M and N; and K for tensor-core
# dots); an fp32 "ieee" dot runs on FMA units and takes K chunks of 8 where the
# installed Triton allows it (3.9 does; 3.6 refuses K < 16 on an H100): ``min_dot_k``
MIN_DOT = 16
MIN_FMA_K = 8
# the interpreter's (BM, BN, BK) caps for convolutions: [BM, BK] index tiles of 2**18
CONV_INTERPRET_BLOCK = (1024, 256, 256)


def np2(x: int) -> int:
    """The smallest power of two >= x (1 for x <= 1)."""
    return 1 << max(0, (int(x) - 1).bit_length())


@functools.lru_cache(maxsize=None)
def min_dot_k(target: str, dot: str) -> int:
    """The smallest K chunk of a ``tl.dot`` of ``dot`` operands on ``target``.

    Triton's own rule (its NVIDIA backend's ``min_dot_size``), which changed
    between releases: K 8 for float32 from Triton 3.9, 16 before. Never below
    ``MIN_FMA_K`` (FMA dots) or ``MIN_DOT`` (tensor-core dots).
    """
    floor = MIN_DOT if dot in TENSOR_CORE_DOTS else MIN_FMA_K
    try:
        import triton.language as tl
        from triton.backends.compiler import GPUTarget
        from triton.backends.nvidia.compiler import min_dot_size
    except ImportError:       # a Triton without the rule: the strictest known one
        return max(floor, MIN_DOT)
    elem = {"float16": tl.float16, "bfloat16": tl.bfloat16, "float64": tl.float64}.get(
        dot, tl.float32)
    arch = int(target.split(":", 1)[1])
    return max(floor, int(min_dot_size(GPUTarget("cuda", arch, 32))(elem, elem)[2]))


def gpu_params(target: str) -> dict:
    """The table row of a ``cuda:<arch>`` target (the nearest older arch listed)."""
    arch = int(target.split(":", 1)[1])
    known = sorted(int(t.split(":")[1]) for t in GPU_TABLE)
    usable = [a for a in known if a <= arch] or known[:1]
    return GPU_TABLE[f"cuda:{usable[-1]}"]


def tile_config(kind: str, M: int, N: int, K: int, target: str, reduce_cols: bool = False,
                batch: int = 1, dot: str = "float32", heavy: bool = False) -> dict:
    """``BM``/``BN``/``BK``, ``num_warps``, ``num_stages`` and ``grid`` of one launch.

    Parameters
    ----------
    kind : str
        ``pointwise``, ``reduce``, ``matmul``, ``conv``, ``scatter`` or ``fill``.
    M, N, K : int
        Rows, columns (the reduced length for ``reduce``) and the dot's
        reduction length.
    target : str
        ``interpret``, ``cpu`` or ``cuda:<arch>``.
    reduce_cols : bool
        A matmul whose epilogue reduces over its columns (whole rows per tile).
    batch : int
        Batches of a batched matmul (folded into grid axis 0).
    dot : str
        What the dot's operands are: ``float32`` (FMA units), ``float64``, or a
        tensor-core kind (``float16``, ``bfloat16``, ``tf32``: K chunks of at least 16).
    heavy : bool
        A pointwise kernel with a very long body (``triton/codegen.HEAVY_LINES``): on a
        GPU one element a thread (4 warps), so its temporaries fit the registers.
    """
    if target == "cpu":   # torch calls over whole arrays: no tiles, one call per launch
        return {"grid": [1, 1]}
    M, N, K = max(int(M), 1), max(int(N), 1), max(int(K), 1)
    if target == "interpret":
        gpu = None
        warps, stages = 4, 1
    else:
        gpu = gpu_params(target)
        warps, stages = gpu["num_warps"], gpu["num_stages"]
    if kind == "fill":
        bm = min(np2(M), MAX_TILE_NUMEL) if gpu is None else 1024
        return _cfg(bm, 1, 1, warps, stages, -(-M // bm))
    if kind == "conv":
        # an implicit GEMM (compiler/triton/conv.py; batch = groups). On a GPU its K loop
        # is a matmul's with computed addresses: the matmul tiles below, which is also what
        # compiler/triton/cubin.py re-derives from its source. The interpreter pays a few numpy
        # calls per K step and tile: large row tiles.
        if gpu is None:
            bm, bn, bk = (max(MIN_DOT, min(np2(M), CONV_INTERPRET_BLOCK[0])),
                          max(MIN_DOT, min(np2(N), CONV_INTERPRET_BLOCK[1])),
                          max(MIN_DOT, min(np2(K), CONV_INTERPRET_BLOCK[2])))
            return _cfg(bm, bn, bk, warps, stages, -(-M // bm) * -(-N // bn) * max(int(batch), 1))
        cfg = tile_config("matmul", M, N, K, target, False, batch, dot)
        # its address arithmetic (a strided data gradient's divisibility masks) adds to
        # a matmul's registers. Checked with ptxas (cuda:90): 64 x 16 tiles over 4 warps
        # spilled 8-16 bytes, over 8 none; 64 x 64 over 8 warps spilled 8 bytes (a
        # ResNet weight gradient), over 4 none (106 registers).
        if 1024 <= cfg["BM"] * cfg["BN"] <= 2048:
            cfg["num_warps"] = 8
        return cfg
    if kind == "matmul":
        if gpu is None:
            bm, bn, bk = (max(MIN_DOT, min(np2(M), 256)), max(MIN_DOT, min(np2(N), 1024)),
                          max(MIN_DOT, min(np2(K), 1024)))
        else:
            # sized to the problem (64x64x32 on a 3x5 matmul spilled 3.8 KB a
            # thread). An fp32 ("ieee") dot runs on FMA units and holds its
            # whole BK slice of both operands in registers: 64x64 with BK 32
            # spilled 1 KB on the LSTM's summed weight gradient (ptxas,
            # cuda:90), BK 16 spilled 8-16 bytes on it or on an MLP layer
            # (4 or 8 warps); BK 8 with 4 warps takes 128 registers, no spill.
            tc = dot in TENSOR_CORE_DOTS
            cm, cn, ck = gpu["mm_block_tc" if tc else "mm_block"]
            bm, bn, bk = (max(MIN_DOT, min(np2(M), cm)), max(MIN_DOT, min(np2(N), cn)),
                          max(min_dot_k(target, dot), min(np2(K), ck)))
            if tc:
                stages = gpu["tc_stages"]
        if reduce_cols:
            bn = max(MIN_DOT, np2(N))
            if gpu is not None:
                bm = 32 if bn <= 256 else MIN_DOT
                warps = 4 if bm * bn <= 4096 else 8
        return _cfg(bm, bn, bk, warps, stages, -(-M // bm) * -(-N // bn) * max(int(batch), 1))
    if kind == "reduce":
        if gpu is None:
            bn = min(np2(N), MAX_TILE_NUMEL)
            bm = max(1, min(np2(M), MAX_TILE_NUMEL // bn))
        else:
            bn = min(np2(N), gpu["reduce_block"])
            bm = max(1, min(np2(M), gpu["program_numel"] // bn))
            warps = 4 if bm * bn <= 1024 else 8
        return _cfg(bm, bn, 1, warps, stages, -(-M // bm))
    # pointwise (a [BM, 1] column of the flattened domain) and scatter ([BM, BN])
    bn = np2(N)
    if gpu is None:
        bm = max(1, min(np2(M), MAX_TILE_NUMEL // bn))
    else:
        # 1024 elements a program (4096 with 4 warps spilled, ptxas cuda:90), over 8
        # warps: 4 a thread. With 8 a thread (4 warps) a Concat of 60 time steps (60
        # masked loads per element) spilled 3.4 KB a thread on cuda:80.
        bm = max(1, min(np2(M), max(1, gpu["program_numel"] // bn)))
        warps = 8 if bm * bn >= 1024 else 4
        if heavy:
            # a sampler's fused tries (~5,000 lines) took 255 registers and spilled
            # 104 bytes at 2 elements a thread (ptxas, cuda:90)
            bm, warps = max(1, min(bm, 128 // bn)), 4
    return _cfg(bm, bn, 1, warps, stages, -(-M // bm))


def _cfg(bm, bn, bk, warps, stages, grid0):
    return {"BM": int(bm), "BN": int(bn), "BK": int(bk), "num_warps": int(warps),
            "num_stages": int(stages), "grid": [int(grid0), 1]}
