"""Compile generated kernels to cubin without a GPU (ahead of time, and as a check).

``compile_cubin(hash_or_path, target="cuda:90")`` compiles one cached kernel
source for a CUDA target with its *GPU* tile configuration and returns the
cubin with its resource usage (registers, spill bytes, shared memory), read
with ``cuobjdump -res-usage`` from the triton wheel.

Two facts about triton 3.9 shape this module:

* In a process where ``TRITON_INTERPRET=1`` (every CPU-only process: see
  ``triton/mode.py``), ``@triton.jit`` makes ``InterpretedFunction`` objects,
  Triton's own standard library (``tl.sum``, ``tl.max``, ...) included, and
  an interpreted device-function call (our ``_tanh``) patches
  ``triton.language`` for the interpreter *without restoring it*. Code
  generation for a GPU in such a process then fails deep inside Triton
  (``'value' object has no attribute 'dtype'`` from the interpreter's
  builder). So when this process interprets, compilation runs in worker
  subprocesses started with ``TRITON_INTERPRET=0`` (this file run as a
  script with ``--worker``); a process that does not interpret (one with a GPU)
  compiles in-process. Workers also give parallelism (Triton's front end
  holds the GIL).
* ptxas: triton 3.9 picks ``ptxas-blackwell`` (CUDA 13.x) from
  ``backends/nvidia/bin`` for ``sm_90`` and newer and the legacy ``ptxas``
  (CUDA 12.9) below, and sets the PTX ``.version`` from the ptxas it picked,
  so both ``cuda:80`` and ``cuda:90`` assemble with the bundled tools
  (checked: PTX 8.8 for sm_80, 9.x for sm_90). The known failure ("the
  bundled ptxas rejects its own PTX 9.4") appears only when
  ``TRITON_PTXAS_PATH`` forces the 12.9 ptxas onto PTX made for 13.x; we therefore set no ``TRITON_PTXAS_PATH`` and
  leave an explicit user setting alone.
"""
from __future__ import annotations

import base64
import hashlib
import importlib.util
import inspect
import json
import os
import re
import subprocess
import sys
import tempfile
import threading
import time

if __package__:
    from ..errors import MXNetError
else:  # run as a script: the cubin worker, which imports triton and nothing of ours
    MXNetError = RuntimeError

_CONSTEXPRS = ("BM", "BN", "BK")
_RESULTS: dict = {}            # (source hash, target, config json) -> result dict
_RESULTS_LOCK = threading.Lock()
_HASH_RE = re.compile(r"^k_([0-9a-f]{24})\.py$")


class CubinError(MXNetError):
    """A kernel failed to compile to cubin; the message names the kernel."""


# ----------------------------------------------------------------- sources

def resolve(source_hash_or_path: str) -> tuple:
    """``(path, source hash, source text)`` of a cached kernel, verified.

    Accepts a 24-hex-digit source hash (looked up in the cache directory) or
    the path of a ``k_<hash>.py`` file. The file's sha256 must match its name,
    as ``runtime.launcher.load_kernel`` requires before importing it.
    """
    from ..artifacts import cache
    arg = os.fspath(source_hash_or_path)
    if re.fullmatch(r"[0-9a-f]{24}", arg):
        path, expected = cache.kernel_path(arg), arg
    else:
        path = arg
        m = _HASH_RE.match(os.path.basename(path))
        if not m:
            raise CubinError(f"kernel file {path} is not named k_<24 hex digits>.py")
        expected = m.group(1)
    try:
        with open(path, "rb") as f:
            data = f.read()
    except OSError as exc:
        raise CubinError(f"kernel {expected}: cannot read {path} ({exc.strerror})") from None
    if hashlib.sha256(data).hexdigest()[:24] != expected:
        raise CubinError(f"kernel file {path} does not match its checksum; refusing to load it")
    return path, expected, data.decode()


def summary_line(source: str) -> str:
    """The kernel's own comment line (``# matmul over domain (8, 10)``)."""
    m = re.search(r"^\s*# ((?:pointwise|reduce|matmul|scatter) over domain .*|fill \d+ .*|rule .*)$",
                  source, re.M)
    return m.group(1).strip() if m else "?"


def source_shape(source: str) -> dict:
    """The tiling facts ``render.render`` baked into a source: kind, M, N, K.

    Mirrors the templates: ``mrow = rm < M`` / ``mcol = rn < N``, the dot
    loops ``for k0 in range(0, K, BK)``, the ``# <kind> over domain`` line
    (``# fill M elements`` for fills), and ``tl.<op>(..., axis=1)[:, None]``
    row reductions (a matmul with one needs a tile spanning every column).
    """
    summary = summary_line(source)
    kind = summary.split(" ", 1)[0]
    if kind == "matmul" and "implicit-GEMM" in summary:    # compiler/triton/conv.py
        kind = "conv"
    if kind == "fill":
        M, N = int(summary.split()[1]), 1
    else:
        mm = re.search(r"^\s*mrow = rm < (\d+)\s*$", source, re.M)
        mn = re.search(r"^\s*mcol = rn < (\d+)\s*$", source, re.M)
        if kind == "?" or not mm or not mn:
            raise CubinError(f"cannot read the tile shape of kernel source ({summary})")
        M, N = int(mm.group(1)), int(mn.group(1))
    ks = [int(k) for k in re.findall(r"range\(0, (\d+), BK\)", source)]
    reduce_cols = kind == "matmul" and re.search(r"axis=1\)\[:, None\]", source) is not None
    dot = re.search(r"^\s*# dot operands: (\w+)\s*$", source, re.M)
    return {"kind": kind, "M": M, "N": N, "K": max(ks, default=0), "reduce_cols": reduce_cols,
            "dot": dot.group(1) if dot else "float32"}


def pointer_dtypes(source: str):
    """The dtypes of a tile kernel's pointer parameters, from its ``# pointers:`` line
    (``codegen.dot_operands`` writes it), or None for a kernel without one (all float32)."""
    m = re.search(r"^\s*# pointers: (.*)$", source, re.M)
    return m.group(1).split() if m else None


def declared_signature(source: str):
    """A ``# signature: name=type ... NAME=value`` line: kernels that are not tiles
    (the multi-tensor optimizer update) declare their GPU signature themselves."""
    m = re.search(r"^\s*# signature: (.*)$", source, re.M)
    if not m:
        return None
    signature, constexprs = {}, {}
    for item in m.group(1).split():
        name, kind = item.split("=", 1)
        if kind.lstrip("-").isdigit():
            signature[name] = "constexpr"
            constexprs[name] = int(kind)
        else:
            signature[name] = kind
    return signature, constexprs


def gpu_config(source: str, target: str = "cuda:90") -> dict:
    """Tile sizes and warps ``codegen.tile_config`` gives ``source`` on ``target``."""
    from .codegen import tile_config
    from ..ir.rendering import Rendered
    if declared_signature(source) is not None:
        return {"BM": 0, "BN": 0, "BK": 0, "num_warps": 4}
    s = source_shape(source)
    r = Rendered(source, [], s["M"], s["N"], s["K"], s["kind"], dot=s["dot"])
    return tile_config(r, target, s["reduce_cols"])


def program_gpu_launches(program, target: str = "cuda:90"):
    """Yield ``(kernel hash, GPU config)`` for every launch of ``program``.

    A Program built for ``target`` already holds its GPU configs; one built
    for another target (``interpret``: whole-tensor tiles) has them
    re-derived from each kernel's source, exactly as ``tile_config`` would.
    """
    from ..artifacts import cache
    for ln in program.kernel_launches():       # extern launches have no kernel
        if program.target == target:
            yield ln.kernel, dict(ln.config)
        else:
            with open(cache.kernel_path(ln.kernel)) as f:
                yield ln.kernel, gpu_config(f.read(), target)


# ----------------------------------------------------------------- compiling

def _arch(target: str) -> int:
    if not target.startswith("cuda:") or not target[5:].isdigit():
        raise CubinError(f"cubin target must be 'cuda:<arch>' such as cuda:90, not {target!r}")
    return int(target[5:])


def _config_key(cfg: dict) -> str:
    return json.dumps(_config_fields(cfg), sort_keys=True)


def _config_fields(cfg: dict) -> dict:
    """The compile-relevant part of a launch config (Triton's default 3 stages if unset)."""
    out = {k: int(cfg.get(k, 3) if k == "num_stages" else cfg[k])
           for k in ("BM", "BN", "BK", "num_warps", "num_stages")}
    if cfg.get("aligned"):                # which pointers are 16-byte aligned, if not all
        out["aligned"] = str(cfg["aligned"])
    return out


def _tools_dir() -> str:
    import triton
    return os.path.join(os.path.dirname(triton.__file__), "backends", "nvidia", "bin")


def _cuobjdump(cubin: bytes, flag: str) -> str:
    """What ``cuobjdump FLAG`` prints for the cubin (written to a temporary file)."""
    tool = os.path.join(_tools_dir(), "cuobjdump")
    fd, path = tempfile.mkstemp(suffix=".cubin")
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(cubin)
        return subprocess.run([tool, flag, path], capture_output=True, text=True,
                              check=True).stdout
    finally:
        os.unlink(path)


def resource_usage(cubin: bytes) -> dict:
    """Registers, stack/local bytes and static shared memory of the cubin's kernel."""
    out = _cuobjdump(cubin, "-res-usage")
    fields = {}
    for line in out.splitlines():
        if "REG:" in line:
            fields = {k: int(v) for k, v in re.findall(r"(\w+)(?:\[\d+\])?:(\d+)", line)}
            break
    return {"n_regs": fields.get("REG", -1), "stack": fields.get("STACK", 0),
            "local": fields.get("LOCAL", 0), "static_shared": fields.get("SHARED", 0)}


def sass(cubin: bytes) -> str:
    """The cubin's machine code as ``cuobjdump -sass`` prints it."""
    return _cuobjdump(cubin, "-sass")


# Matrix instructions in SASS: HMMA (mma.sync on half, bfloat16 and TF32 inputs), HGMMA
# (sm_90's warpgroup wgmma), DMMA (float64), IMMA (integers)
_MMA = re.compile(r"\b(HMMA|HGMMA|DMMA|IMMA)(\.[A-Za-z0-9.]+)?")


def tensor_core_instructions(sass_text: str) -> dict:
    """Count of each tensor-core instruction form (``HMMA.16816.F32`` ...) in SASS text."""
    counts = {}
    for m in _MMA.finditer(sass_text):
        counts[m.group(0)] = counts.get(m.group(0), 0) + 1
    return counts


def launch_kwargs(cfg: dict) -> dict:
    """The keyword arguments ``runtime.launcher`` passes when it launches a tile kernel
    with ``Launch.config`` ``cfg``: its constexpr tile sizes, warps and stages.

    One place for both sides: the ahead-of-time compile specialises each kernel
    with exactly these, so a GPU process finds Triton's cache entry under the
    same key (see :func:`specialize`)."""
    return dict(BM=cfg["BM"], BN=cfg["BN"], BK=cfg["BK"], num_warps=cfg["num_warps"],
                num_stages=cfg.get("num_stages", 3))


def pointer_alignment(args, dtypes=None) -> str:
    """Which arguments of a launch are 16-byte aligned, as ``'1'``/``'0'`` per argument.

    ``args`` are a ``Launch.args`` list (``[kind, name, element offset, numel]``),
    ``dtypes`` the kernel's pointer dtypes (:func:`pointer_dtypes`; float32 if None).
    Every array and buffer the runtime binds is an allocation of its own (CUDA's
    are 256-byte aligned), so a pointer is aligned when its element offset times
    its element size is a multiple of 16. Triton specialises a kernel on this
    (``tt.divisibility``), so it is part of what the ahead-of-time compile must match.
    """
    from ..ir.dtypes import ITEMSIZE
    sizes = [ITEMSIZE[d] for d in dtypes] if dtypes else [4] * len(args)
    return "".join("1" if int(a[2]) * size % 16 == 0 else "0" for a, size in zip(args, sizes))


def launch_alignment(launch) -> str:
    """:func:`pointer_alignment` of a Program's launch (its kernel's pointer dtypes read
    from the kernel file in the cache)."""
    from ..artifacts import cache
    with open(cache.kernel_path(launch.kernel)) as f:
        return pointer_alignment(launch.args, pointer_dtypes(f.read()))


def _load_jit_fn(path: str, source_hash: str):
    """The ``@triton.jit`` function of a kernel file, imported from the checked bytes.

    Mirrors ``runtime.launcher.load_module``: the bytes must hash to the file's name
    (a worker must not trust the file either), no bytecode is read or written, and
    the result is the module's own ``JITFunction``, so its cache key (source and
    starting line) is the one the runtime's launch computes.

    The code is compiled under the kernel's path relative to the cache directory
    (``kernels/k_<hash>.py``, its lines given to ``linecache``): Triton writes the
    file name into the line information of the PTX and cubin, and what
    ``symtriton compile`` writes must not depend on where the directory was (a
    rebuild elsewhere compares byte for byte). The cache key holds no file name."""
    import importlib.machinery
    import linecache
    from triton.runtime.jit import JITFunction

    virtual = f"kernels/k_{source_hash}.py"

    with open(path, "rb") as f:
        data = f.read()
    if hashlib.sha256(data).hexdigest()[:24] != source_hash:
        raise CubinError(f"kernel file {path} does not match its checksum; refusing to "
                         f"load it")

    class _Checked(importlib.machinery.SourceFileLoader):
        def path_stats(self, p):
            raise OSError("no bytecode for kernel files")

        def get_data(self, p):
            if p != self.path:
                raise OSError(f"{p}: only {self.path} is read")
            return data

        def set_data(self, p, d, *, _mode=0o666):
            pass

        def source_to_code(self, d, p, *, _optimize=-1):
            return compile(d, virtual, "exec", dont_inherit=True, optimize=_optimize)

    text = data.decode()
    linecache.cache[virtual] = (len(data), None, text.splitlines(True), virtual)
    name = f"symtriton_cubin_{source_hash}"
    spec = importlib.util.spec_from_file_location(name, path, loader=_Checked(name, path))
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    k = module.kernel
    return k if isinstance(k, JITFunction) else JITFunction(getattr(k, "fn", k))


_TORCH_DTYPES = {"*fp32": "float32", "*i64": "int64", "*i32": "int32", "*fp16": "float16",
                 "*bf16": "bfloat16", "*fp64": "float64", "*u8": "uint8"}


def _launch_arguments(jit_fn, declared, cfg: dict, dtypes=None) -> tuple:
    """Stand-ins for the arguments the runtime passes: ``(args, kwargs)``.

    Pointers are host tensors of the right dtype (``dtypes``, the kernel's
    :func:`pointer_dtypes`), 16-byte aligned or one element off as ``cfg["aligned"]``
    says; Triton's binder reads nothing else from them.
    Declared kernels (the optimizer update) take their declared scalars and
    constexprs, tile kernels the pointers and :func:`launch_kwargs`.
    """
    import torch

    def pointer(kind, aligned=True):
        base = torch.empty(64, dtype=getattr(torch, _TORCH_DTYPES.get(kind, kind)))
        return base if aligned else base[1:]

    params = [p for p in jit_fn.params if not p.is_constexpr]
    if declared is not None:
        signature, constexprs = declared
        args = []
        for p in params:
            kind = signature[p.name]
            if kind.startswith("*"):
                args.append(pointer(kind))
            elif kind.startswith("fp"):
                args.append(1.5)            # floats are not specialised on their value
            else:
                raise CubinError(f"kernel parameter {p.name}: cannot stand in for a "
                                 f"{kind} argument; declare pointers and floats only")
        return args, dict(constexprs)
    aligned = cfg.get("aligned") or "1" * len(params)
    if len(aligned) != len(params):
        raise CubinError(f"the launch passes {len(aligned)} pointers, the kernel takes "
                         f"{len(params)}")
    dtypes = dtypes or ["float32"] * len(params)
    return [pointer(d, a == "1") for d, a in zip(dtypes, aligned)], launch_kwargs(cfg)


def specialize(jit_fn, backend, args, kwargs) -> tuple:
    """``(ASTSource, options)`` of a launch ``jit_fn[grid](*args, **kwargs)``, computed
    as ``JITFunction.run`` computes them in triton 3.9 (its binder, then
    ``_pack_args``), for ``backend``'s target instead of the current device.

    ``triton.compile`` of the result is the compile (and the cache key) a GPU
    process's launch asks for; ``tests/compiler/test_aot_triton_cache.py`` runs the
    runtime's launches through Triton's own ``JITFunction.run`` to check it.
    """
    from triton import knobs
    from triton.compiler import ASTSource
    from triton.runtime.jit import create_function_from_signature

    kwargs = dict(kwargs)
    kwargs["debug"] = kwargs.get("debug", jit_fn.debug) or knobs.runtime.debug
    kwargs["instrumentation_mode"] = knobs.compilation.instrumentation_mode
    # triton 3.9's run passes this knob; 3.6 (an H100 image's) has no such knob
    if hasattr(knobs.compilation, "fpsan_homomorphic_casts"):
        kwargs["fpsan_homomorphic_casts"] = knobs.compilation.fpsan_homomorphic_casts
    binder = create_function_from_signature(jit_fn.signature, jit_fn.params, backend)
    bound_args, specialization, options = binder(*args, **kwargs)
    options, signature, constexprs, attrs = jit_fn._pack_args(
        backend, kwargs, bound_args, specialization, options)
    return ASTSource(jit_fn, signature, constexprs, attrs), options


_MANAGER = []


def relocatable_cache_manager():
    """Triton's ``FileCacheManager``, with each entry's files found beside its group file.

    Triton's own group files (``__grp__<name>.json``) record the absolute paths of
    an entry's files, so a cache directory copied to another path or machine
    misses and recompiles. This manager writes bare file names and looks every
    child up in the entry's own directory (absolute paths written by plain
    Triton still resolve, by their base name). ``symtriton compile`` writes
    ``<dir>/triton`` with it and the runtime reads that directory with it.
    """
    if _MANAGER:
        return _MANAGER[0]
    from triton.runtime.cache import FileCacheManager

    class RelocatableCacheManager(FileCacheManager):
        def get_group(self, filename):
            grp = f"__grp__{filename}"
            if not self.has_file(grp):
                return None
            try:
                with open(self._make_path(grp)) as f:
                    children = json.load(f)["child_paths"]
            except (OSError, ValueError, KeyError, TypeError):
                return None
            out = {}
            for child in children:
                path = self._make_path(os.path.basename(child))
                if not os.path.exists(path):
                    return None
                out[os.path.basename(child)] = path
            return out

        def put_group(self, filename, group):
            body = json.dumps({"child_paths": sorted(os.path.basename(p) for p in group)})
            return self.put(body, f"__grp__{filename}", binary=False)

        # Triton creates entries with the umask's modes: group-writable under the common
        # umask 002, which symtriton's trust check (compiler/artifacts/cache_trust.py) then refuses.
        # Entries this user owns are made writable by the owner only.
        def __init__(self, key, override=False, dump=False):
            super().__init__(key, override, dump)
            if self.cache_dir and not (override or dump):
                _owner_only(self.cache_dir)

        def put(self, data, filename, binary=True):
            path = super().put(data, filename, binary)
            _owner_only(path)
            return path

    _MANAGER.append(RelocatableCacheManager)
    return RelocatableCacheManager


def _owner_only(path):
    """Drop group and world write from ``path`` if this user owns it."""
    try:
        st = os.stat(path)
        if hasattr(os, "getuid") and st.st_uid == os.getuid() and st.st_mode & 0o022:
            os.chmod(path, st.st_mode & ~0o022)
    except OSError:
        pass


def use_triton_cache(path: str):
    """Make Triton keep its compiled kernels in ``path``, relocatably (see
    :func:`relocatable_cache_manager`)."""
    from triton import knobs
    knobs.cache.dir = path
    knobs.cache.manager_class = relocatable_cache_manager()


def _compile_here(path: str, source_hash: str, target: str, cfg: dict,
                  triton_cache: str = None) -> dict:
    import triton
    from triton.backends.compiler import GPUTarget
    from triton.compiler import make_backend

    started = time.perf_counter()
    jit_fn = _load_jit_fn(path, source_hash)
    with open(path) as f:
        source = f.read()
    args, kwargs = _launch_arguments(jit_fn, declared_signature(source), cfg,
                                     pointer_dtypes(source))
    backend = make_backend(GPUTarget("cuda", _arch(target), 32))
    src, options = specialize(jit_fn, backend, args, kwargs)
    if triton_cache:
        use_triton_cache(triton_cache)
    compiled = triton.compile(src, target=backend.target, options=options.__dict__)
    cubin = compiled.asm["cubin"]
    usage = resource_usage(cubin)
    return {"hash": source_hash, "target": target,
            "config": _config_fields(cfg),
            "cubin": cubin, "n_regs": usage["n_regs"],
            # bytes of per-thread local memory (stack frame + local arrays): where
            # ptxas puts spilled registers; what the driver reports as n_spills
            "n_spills": usage["stack"] + usage["local"],
            "shared": int(compiled.metadata.shared), "name": compiled.metadata.name,
            # Triton's cache entry (a directory under triton_cache named by it)
            "triton_hash": compiled.hash,
            "specialization": {"signature": {k: str(v) for k, v in src.signature.items()},
                               "divisible_by_16": sorted(
                                   list(k) for k, v in src.attrs.items()
                                   if ["tt.divisibility", 16] in [list(x) for x in v])},
            # Triton front end, LLVM and ptxas for this kernel alone
            "seconds": round(time.perf_counter() - started, 3)}


def _must_use_workers() -> bool:
    from .mode import interpreting
    return interpreting()


def _run_workers(jobs: list, workers: int, timeout: float = None) -> list:
    """Compile ``jobs`` in ``workers`` subprocesses without the interpreter."""
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    env = dict(os.environ)
    env["TRITON_INTERPRET"] = "0"
    env.setdefault("TRITON_DEFAULT_FP_FUSION", "1")
    chunks = [jobs[i::workers] for i in range(workers)]
    procs = []
    for chunk in chunks:
        if not chunk:
            continue
        # run as a script, not `-m compiler.triton.cubin`: importing the package costs
        # seconds (torch); the worker needs the standard library and triton only
        p = subprocess.Popen([sys.executable, os.path.abspath(__file__), "--worker"],
                             stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                             stderr=subprocess.PIPE, env=env, cwd=root, text=True)
        procs.append((p, chunk))
    results = []
    # communicate() per process in threads: every worker runs while we wait
    outs = [None] * len(procs)

    def talk(i, p, chunk):
        try:
            outs[i] = p.communicate(json.dumps(chunk), timeout=timeout)
        except subprocess.TimeoutExpired:
            p.kill()   # our own worker, by its handle
            out, err = p.communicate()
            outs[i] = (out, err + f"\n[timed out after {timeout}s]")

    threads = [threading.Thread(target=talk, args=(i, p, c)) for i, (p, c) in enumerate(procs)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    for (p, chunk), (out, err) in zip(procs, outs):
        done, started = {}, set()
        for line in out.splitlines():
            if line.startswith("{"):
                r = json.loads(line)
                if r.get("started"):
                    started.add(r["job"])
                else:
                    done[r["job"]] = r
        timed_out = "[timed out after" in err
        for job in chunk:
            r = done.get(job["job"])
            if r is None:
                if job["job"] not in started:
                    why = ("not compiled: its worker ran out of time first" if timed_out else
                           f"not compiled: its worker stopped (exit {p.returncode}) before it: "
                           f"{err.strip()[-2000:]}")
                elif timed_out:
                    why = f"did not finish compiling before the {timeout}s limit"
                else:
                    why = f"the cubin worker died compiling it (exit {p.returncode}): " \
                          f"{err.strip()[-2000:]}"
                r = {"job": job["job"], "error": why}
            results.append(r)
    return results


def _worker_main():
    """``python compiler/triton/cubin.py --worker``: JSON jobs on stdin, JSON lines out."""
    jobs = json.loads(sys.stdin.read())
    for job in jobs:
        sys.stdout.write(json.dumps({"job": job["job"], "started": True}) + "\n")
        sys.stdout.flush()
        try:
            r = _compile_here(job["path"], job["hash"], job["target"], job["config"],
                              job.get("triton_cache"))
            r["cubin"] = base64.b64encode(r["cubin"]).decode()
            r["job"] = job["job"]
        except Exception as exc:  # reported per kernel, the worker carries on
            msg = str(exc)
            r = {"job": job["job"], "error": f"{type(exc).__name__}: {msg[-4000:]}"}
        sys.stdout.write(json.dumps(r) + "\n")
        sys.stdout.flush()


def compile_many(items, workers: int = None, timeout: float = None,
                 triton_cache: str = None) -> list:
    """Compile many kernels; ``items`` are ``(hash_or_path, target, config or None)``.

    Returns one entry per item, in order: a result dict as
    :func:`compile_cubin` returns, or a :class:`CubinError` naming the kernel
    (hash and summary line). Results are cached in-process by (source hash,
    target, config), so repeated sources compile once. ``workers``: worker
    processes (default: CPU count); ``timeout``: seconds each worker may take
    for its share (when this process interprets; default no limit).
    ``triton_cache``: a directory where Triton keeps each compiled kernel under the
    key a GPU process's launch computes (:func:`use_triton_cache`); default
    Triton's own cache. A config's ``aligned`` (:func:`pointer_alignment`) says
    which pointers the launch passes 16-byte aligned.
    """
    prepared, out = [], []
    for arg, target, cfg in items:
        _arch(target)
        path, h, source = resolve(arg)
        cfg = dict(cfg) if cfg else gpu_config(source, target)
        key = (h, target, _config_key(cfg), triton_cache)
        prepared.append((key, path, h, source, target, cfg))
    todo = {}
    with _RESULTS_LOCK:
        for key, path, h, source, target, cfg in prepared:
            if key not in _RESULTS and key not in todo:
                todo[key] = {"job": len(todo), "path": path, "hash": h, "target": target,
                             "config": cfg, "triton_cache": triton_cache,
                             "_summary": summary_line(source)}
    if todo:
        jobs = list(todo.values())
        if _must_use_workers():
            n = max(1, min(workers or os.cpu_count() or 1, len(jobs)))
            raw = _run_workers([{k: v for k, v in j.items() if k != "_summary"} for j in jobs], n,
                               timeout)
            by_job = {r["job"]: r for r in raw}
        else:
            by_job = {}
            for j in jobs:
                try:
                    by_job[j["job"]] = _compile_here(j["path"], j["hash"], j["target"],
                                                     j["config"], triton_cache)
                except Exception as exc:
                    by_job[j["job"]] = {"error": f"{type(exc).__name__}: {str(exc)[-4000:]}"}
        with _RESULTS_LOCK:
            for key, j in todo.items():
                r = by_job[j["job"]]
                if "error" in r:
                    _RESULTS[key] = CubinError(
                        f"kernel {j['hash']} ({j['_summary']}) failed to compile for "
                        f"{j['target']} with {_config_key(j['config'])}: {r['error']}")
                else:
                    r = dict(r)
                    r.pop("job", None)
                    if isinstance(r["cubin"], str):
                        r["cubin"] = base64.b64decode(r["cubin"])
                    r["summary"] = j["_summary"]
                    _RESULTS[key] = r
    with _RESULTS_LOCK:
        for key, *_ in prepared:
            out.append(_RESULTS[key])
    return out


def compile_cubin(source_hash_or_path, target: str = "cuda:90", config: dict = None) -> dict:
    """Compile one generated kernel to cubin for ``target`` without needing a GPU.

    Parameters
    ----------
    source_hash_or_path : str
        A kernel's source hash (looked up in the cache directory) or the path
        of a cached ``k_<hash>.py`` file; its content must match its hash.
    target : str
        ``cuda:<arch>``, e.g. ``cuda:80`` or ``cuda:90``.
    config : dict, optional
        ``BM``/``BN``/``BK``/``num_warps`` (a ``Launch.config`` of a Program
        built for ``target``). By default the GPU tile configuration is
        re-derived from the source with ``codegen.tile_config``.

    Returns
    -------
    dict with ``cubin`` (bytes), ``n_regs``, ``n_spills`` (local-memory bytes
    per thread), ``shared`` (bytes of shared memory), ``name`` (the kernel
    symbol), ``seconds`` (compile time of this kernel), plus ``hash``,
    ``target``, ``config`` and ``summary``.
    Raises :class:`CubinError` naming the kernel if Triton or ptxas fails.
    """
    r = compile_many([(source_hash_or_path, target, config)], workers=1)[0]
    if isinstance(r, Exception):
        raise r
    return r


if __name__ == "__main__":
    # the script's folder (compiler/triton/) is sys.path[0]: keep its modules from
    # shadowing anything triton imports
    if sys.path and os.path.abspath(sys.path[0] or ".") == os.path.dirname(os.path.abspath(__file__)):
        del sys.path[0]
    if sys.argv[1:] == ["--worker"]:
        _worker_main()
    else:
        sys.exit("usage: python compiler/triton/cubin.py --worker  (internal; see compile_cubin)")
