"""Ahead-of-time compilation: ``symtriton compile`` and ``symtriton cache``.

Workflow: compile every program a training or inference run will need on a
build machine (no GPU needed), copy the cache directory, and run on the GPU
machine with ``SYMTRITON_CACHE_DIR=<dir> SYMTRITON_OFFLINE=1``: every program
is then a cache hit (zero compiles) and a program that was not compiled fails
with an error naming its key and the ``symtriton compile`` command that adds it.

:func:`compile_aot` computes, for every (bucket, per-context slice shape,
target, mode), exactly the :func:`compiler.artifacts.compile.compile_symbol` call the
runtime's ``Executor`` makes: the same grad_req as ``DataParallelExecutorGroup``
(parameters ``write`` unless fixed, data ``null`` unless inputs need
gradients, labels ``null``), each context's slice of the batch from
``batch_slices.split_input_slice``, the forward-only program the
Executor also builds when the graph has mode-dependent operators (Dropout,
BatchNorm). For ``cuda:<arch>`` targets every kernel is also compiled to a
cubin (``compiler.triton.cubin``; no GPU needed), with the specialisation its launches
ask for (signature, 16-byte divisibility of each pointer, constexprs, warps,
stages: ``cubin.specialize`` runs Triton's own binder on stand-ins for the
runtime's arguments), into Triton's own cache layout under ``<dir>/triton``. A GPU
process using the directory points Triton's cache there (``runtime/launcher.py``),
so its launches find every kernel compiled: zero Triton compiles. A readable
copy of each cubin is stored under ``<dir>/cubin/cuda_<arch>/<hash>.cubin`` with
``<hash>.json`` beside it (num_warps, shared memory, signature, divisibility,
constexprs, Triton's entry, n_regs, n_spills).

The directory gets a self-describing ``symtriton-manifest.json`` (versions,
targets, every program key with its description and its compile inputs, the
optimizer and its parameters, the sha256 of every file), written atomically at
the end, and the symbol JSON of every program under ``symbols/``.
``symtriton cache verify`` checks it; ``--rebuild`` regenerates everything from
those inputs with :func:`build_outputs` and compares byte for byte
(:mod:`compiler.artifacts.aot_verify`).

Trust: the directory is code (``compiler.artifacts.cache_trust``). A run loads its
kernels, so a directory copied from elsewhere should pass ``symtriton cache
verify --rebuild`` first, and the runtime refuses one that others may write.
"""
from __future__ import annotations

import base64
import datetime
import hashlib
import importlib
import json
import os
import re
import shutil
import sys
import time

from . import cache, cache_entries, cache_keys, cache_trust, kernel_files
from .atomic import atomic_write_bytes, atomic_write_text
from ..frontend.batch_slices import split_input_slice
from .compile import canonical_graph_json, compile_record
from ..ir.dtypes import dtype_name
from ..errors import MXNetError
from ..symbol import is_mode_dependent

MANIFEST = "symtriton-manifest.json"
#: 2: every program records its compile inputs (``compile``) and the symbols are stored
#: under ``symbols/``, so ``symtriton cache verify --rebuild`` can regenerate everything.
FORMAT = 2
SYMBOLS = cache_entries.SYMBOLS
TRITON_DIR = kernel_files.TRITON_DIR


class AOTError(MXNetError):
    """A problem with what ``symtriton compile`` was asked to do (one line)."""


# ----------------------------------------------------------------- inputs

def load_sym_gen(spec: str):
    """``module:function`` -> the function (the current directory is importable)."""
    mod, sep, fn = spec.partition(":")
    if not sep or not mod or not fn:
        raise AOTError(f"--sym-gen {spec!r}: expected MODULE:FUNCTION such as "
                       f"mymodels:sym_gen")
    if os.getcwd() not in sys.path and "" not in sys.path:
        sys.path.insert(0, os.getcwd())
    try:
        module = importlib.import_module(mod)
    except Exception as exc:
        raise AOTError(f"--sym-gen {spec}: cannot import {mod} ({type(exc).__name__}: "
                       f"{exc})") from None
    f = getattr(module, fn, None)
    if not callable(f):
        raise AOTError(f"--sym-gen {spec}: {mod} has no function {fn}")
    return f


def parse_bucket_keys(text: str) -> list:
    keys = []
    for item in text.split(","):
        item = item.strip()
        if not item:
            continue
        try:
            keys.append(int(item))
        except ValueError:
            keys.append(item)
    if not keys:
        raise AOTError("--bucket-keys: give one or more keys such as 10,20,30")
    return keys


def shape_template(text: str) -> tuple:
    """``NAME=D1,{key},...`` -> ``(name, [dim or '{key}' ...])`` (checked)."""
    name, sep, dims = text.partition("=")
    name = name.strip()
    dims = dims.strip().strip("()[]").strip()
    if not sep or not name or not dims:
        raise AOTError(f"bad --shape {text!r}: expected NAME=D1,D2,... such as data=32,35 "
                       f"(with --sym-gen a dimension may be {{key}}: data=32,{{key}})")
    out = []
    for d in dims.split(","):
        d = d.strip()
        if d == "{key}":
            out.append(d)
        elif d.isdigit() and int(d) > 0:
            out.append(int(d))
        else:
            raise AOTError(f"bad --shape {text!r}: dimensions are positive integers or {{key}}")
    return name, out


def _expand(template, key):
    out = []
    for d in template:
        if d == "{key}":
            if not isinstance(key, int):
                raise AOTError(f"bucket key {key!r} is not an integer, so it cannot fill a "
                               f"{{key}} dimension; use --shapes-json")
            out.append(key)
        else:
            out.append(int(d))
    return tuple(out)


def bucket_shapes(templates, shapes_json, key) -> dict:
    """Input shapes of one bucket from ``--shape`` templates and/or ``--shapes-json``."""
    shapes = {name: _expand(t, key) for name, t in templates}
    if shapes_json is not None:
        entry = shapes_json.get(str(key))
        if entry is None and templates == []:
            raise AOTError(f"--shapes-json has no entry for bucket key {key!r}")
        for name, dims in (entry or {}).items():
            shapes[name] = tuple(int(d) for d in dims)
    if not shapes:
        raise AOTError("give input shapes with --shape NAME=D1,D2,... or --shapes-json")
    return shapes


def context_slices(batch_size: int, contexts: int = 1, batch_per_context=None) -> list:
    """Per-context batch sizes, as ``DataParallelExecutorGroup`` slices the batch."""
    workload = list(batch_per_context) if batch_per_context else [1] * int(contexts)
    if batch_per_context and sum(workload) != batch_size:
        raise AOTError(f"--batch-per-context {','.join(map(str, workload))} adds up to "
                       f"{sum(workload)}, not the batch size {batch_size}")
    try:
        slices = split_input_slice(batch_size, workload)
    except ValueError as exc:
        raise AOTError(f"batch size {batch_size} over {len(workload)} contexts: {exc}") from None
    return [s.stop - s.start for s in slices]


def module_grad_req(arg_names, data_names, label_names, grad_req="write", fixed=(),
                    inputs_need_grad=False, state_names=()) -> dict:
    """The grad_req ``DataParallelExecutorGroup`` gives each argument (a string grad_req)."""
    inputs = set(data_names) | set(label_names) | set(state_names)
    out = {}
    for k in arg_names:
        if k not in inputs:
            out[k] = "null" if k in fixed else grad_req
        elif k in data_names:
            out[k] = grad_req if inputs_need_grad else "null"
        else:
            out[k] = "null"
    return out


def _optimizer_kernels(optimizer, optimizer_params, targets, dtypes=("float32",)) -> list:
    """The optimizer's update kernels, made by the runtime that owns optimizers.

    The compiler does not import the runtime (imports flow compiler -> runtime):
    the runtime offers this through the ``symtriton.aot_kernels`` entry point
    ``optimizer`` (pyproject.toml), which ``pip install`` registers.
    """
    from importlib.metadata import entry_points
    found = [ep for ep in entry_points(group="symtriton.aot_kernels") if ep.name == "optimizer"]
    if not found:
        raise AOTError("--optimizer needs symtriton's runtime installed (`pip install -e .`: "
                       "it registers the symtriton.aot_kernels entry point 'optimizer')")
    try:
        return found[0].load()(optimizer, dict(optimizer_params or {}), tuple(targets),
                               tuple(dtypes))
    except MXNetError:
        raise
    except Exception as exc:
        raise AOTError(f"--optimizer {optimizer}: {type(exc).__name__}: {exc}") from None


# ----------------------------------------------------------------- compiling

def program_key(symbol, shapes, for_training, grad_req, is_train, target, dtypes=None,
                loss_scale=False):
    """The key :func:`compile_symbol` computes (same normalisation, same parts)."""
    from .compile import all_argument_shapes, all_dtypes, program_parts
    parts = program_parts(symbol, all_argument_shapes(symbol, shapes), for_training,
                          dict(grad_req or {}), is_train, target,
                          all_dtypes(symbol, dict(dtypes or {})), loss_scale)
    return cache_keys.make_key(parts), parts


def symbol_file(symbol) -> str:
    """Where a compiled symbol's JSON is stored: ``symbols/<sha256 prefix>.json``."""
    return cache_entries.symbol_file(symbol.tojson(remove_amp_cast=False, indent=None))


def sha_file(path) -> str:
    """The sha256 of a file's bytes, as hex."""
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def _is_triton_kernel(source_hash: str) -> bool:
    with open(cache.kernel_path(source_hash)) as f:
        return "@triton.jit" in f.read()


def _target_dir(target: str) -> str:
    return target.replace(":", "_")


def _versions() -> dict:
    import triton
    import torch
    out = {"python": sys.version.split()[0], "triton": triton.__version__,
           "torch": torch.__version__}
    try:
        from importlib.metadata import version
        out["symtriton"] = version("symtriton")
    except Exception:
        out["symtriton"] = "checkout"
    cache_versions = getattr(cache_keys, "_versions", None)
    if cache_versions is not None:
        out["cache"] = cache_versions()
    return out


def _progress(total, desc, enabled):
    try:
        from tqdm import tqdm
    except ImportError:  # pragma: no cover
        tqdm = None
    if tqdm is None or not enabled:
        class _Null:
            def update(self, n=1):
                pass

            def close(self):
                pass
        return _Null()
    return tqdm(total=total, desc=desc, unit="kernel" if "kernel" in desc else "program",
                file=sys.stderr, leave=True, dynamic_ncols=True)


def compile_aot(symbol=None, sym_gen=None, bucket_keys=None, shapes=(), shapes_json=None,
                train=False, predict=False, grad_req="write", fixed_params=(),
                inputs_need_grad=False, optimizer=None, optimizer_params=None,
                contexts=1, batch_per_context=None, targets=("cpu",), out=None,
                workers=None, progress=True, command=None, dtypes=None) -> dict:
    """Compile everything a run needs into the cache directory; return the summary.

    ``symbol``: a Symbol (or a ``-symbol.json`` path); or ``sym_gen`` (a callable
    or ``"module:function"``) with ``bucket_keys``. ``shapes``: ``(name, template)``
    pairs (see :func:`shape_template`), ``shapes_json``: ``{bucket key: {name:
    shape}}``. ``out``: the cache directory (default :func:`cache.cache_dir`).
    ``dtypes``: ``{input name: dtype}`` (``--dtype``), the rest inferred as a Module's
    bind infers them.
    """
    saved = os.environ.get("SYMTRITON_CACHE_DIR")
    if out is not None:
        os.environ["SYMTRITON_CACHE_DIR"] = os.path.abspath(os.fspath(out))
    try:
        return _compile_aot(symbol, sym_gen, bucket_keys, shapes, shapes_json, train, predict,
                            grad_req, fixed_params, inputs_need_grad, optimizer,
                            optimizer_params, contexts, batch_per_context, targets, workers,
                            progress, command, dtypes)
    finally:
        if out is not None:
            if saved is None:
                os.environ.pop("SYMTRITON_CACHE_DIR", None)
            else:
                os.environ["SYMTRITON_CACHE_DIR"] = saved


def _compile_aot(symbol, sym_gen, bucket_keys, shapes, shapes_json, train, predict, grad_req,
                 fixed_params, inputs_need_grad, optimizer, optimizer_params, contexts,
                 batch_per_context, targets, workers, progress, command, dtypes=None):
    from .. import symbol as sym_mod
    from .compile import check_target
    t_start = time.perf_counter()
    root = cache.cache_dir()
    if cache.offline():
        raise AOTError("SYMTRITON_OFFLINE=1 is set: unset it to compile")
    targets = [check_target(t) for t in (targets or ["cpu"])]
    targets = list(dict.fromkeys(targets))
    modes = []
    if train:
        modes.append("train")
    if predict or not train:
        modes.append("predict")
    if inputs_need_grad and not train:
        raise AOTError("--inputs-need-grad needs --train")
    shapes = [s if isinstance(s[1], list) else (s[0], list(s[1])) for s in shapes]
    dtypes = {str(k): dtype_name(v) for k, v in dict(dtypes or {}).items()}

    # ---- the symbols, one per bucket
    if sym_gen is not None:
        gen = load_sym_gen(sym_gen) if isinstance(sym_gen, str) else sym_gen
        if not bucket_keys:
            raise AOTError("--sym-gen needs --bucket-keys such as 10,20,30")
        buckets = []
        for key in bucket_keys:
            res = gen(key)
            if not (isinstance(res, tuple) and len(res) == 3):
                raise AOTError(f"sym_gen({key!r}) must return (symbol, data_names, "
                               f"label_names)")
            s, dn, ln = res
            again = gen(key)[0]
            # keys ignore operator node names (auto names vary between calls), but a
            # sym_gen whose structure or variable names vary cannot be compiled ahead
            if canonical_graph_json(again) != canonical_graph_json(s):
                raise AOTError(
                    f"sym_gen({key!r}) builds a different graph on each call (its structure, "
                    f"attributes or variable names change), so the programs compiled here "
                    f"would not match the ones a run computes")
            buckets.append((key, s, list(dn or ()), list(ln or ())))
        source = {"sym_gen": sym_gen if isinstance(sym_gen, str) else
                  f"{gen.__module__}:{gen.__qualname__}"}
    else:
        if symbol is None:
            raise AOTError("give a SYMBOL.json or --sym-gen MODULE:FUNCTION")
        source = {"symbol": os.fspath(symbol) if not hasattr(symbol, "tojson") else "<symbol>"}
        if not hasattr(symbol, "tojson"):
            try:
                symbol = sym_mod.load(os.fspath(symbol))
            except OSError as exc:
                raise AOTError(f"cannot read symbol file {symbol}: "
                               f"{exc.strerror or exc}") from None
        names = [n for n, _ in shapes] + list((shapes_json or {}).get("None", {}) or {})
        labels = [n for n in names if n.endswith("label")]
        buckets = [(None, symbol, [n for n in names if n not in labels], labels)]

    # ---- plan: (bucket, context slice, target, mode) -> compile_symbol arguments
    jobs, seen = [], {}
    for key, s, data_names, label_names in buckets:
        bshapes = bucket_shapes(shapes, shapes_json, key)
        args = s.list_arguments()
        for name in bshapes:
            if name not in args:
                raise AOTError(f"--shape {name}: the symbol{'' if key is None else f' of bucket {key!r}'} "
                               f"has no argument '{name}' (arguments: {', '.join(args)})")
        for name in dtypes:
            if name not in args:
                raise AOTError(f"--dtype {name}: the symbol{'' if key is None else f' of bucket {key!r}'} "
                               f"has no argument '{name}' (arguments: {', '.join(args)})")
        for name in data_names + label_names:
            if name not in bshapes:
                raise AOTError(f"no shape for input '{name}'"
                               f"{'' if key is None else f' of bucket {key!r}'}: add "
                               f"--shape {name}=...")
        batch = {bshapes[n][0] for n in data_names + label_names if n in bshapes}
        if len(batch) != 1:
            raise AOTError(f"inputs of bucket {key!r} have different batch sizes (axis 0): "
                           f"{', '.join(f'{n}={bshapes[n]}' for n in bshapes)}")
        batch = batch.pop()
        sizes = context_slices(batch, contexts, batch_per_context)
        for name in fixed_params:
            if name not in args:
                raise AOTError(f"--fixed-param {name}: the symbol has no argument '{name}'")
        gr = module_grad_req(args, data_names, label_names, grad_req, fixed_params,
                             inputs_need_grad)
        mode_dep = is_mode_dependent(s)
        sym_file = symbol_file(s)
        for ctx_i, n in enumerate(sizes):
            sl = {k: ((n,) + tuple(v[1:]) if k in data_names + label_names else tuple(v))
                  for k, v in bshapes.items()}
            for target in targets:
                for mode in modes:
                    calls = []
                    if mode == "train":
                        calls.append(("train", True, gr, True))
                        if mode_dep:
                            calls.append(("train-forward-only", False, {}, False))
                    else:
                        calls.append(("predict", False, {}, False))
                    for mname, ft, g, it in calls:
                        pkey, parts = program_key(s, sl, ft, g, it, target, dtypes)
                        if pkey in seen:
                            seen[pkey]["contexts"].append(ctx_i)
                            continue
                        job = {"key": pkey, "bucket": key, "contexts": [ctx_i], "target": target,
                               "mode": mname, "inputs": {k: list(v) for k, v in sl.items()},
                               "description": cache_keys.describe_key(parts),
                               "compile": compile_record(sym_file, sl, ft, g, it, target,
                                                         dtypes),
                               "_call": (s, sl, ft, g, it, target, dtypes)}
                        seen[pkey] = job
                        jobs.append(job)

    if optimizer and not train:
        raise AOTError("--optimizer needs --train")
    stats0 = cache.cache_stats()
    opt_kernels, cubins = build_outputs(root, jobs, optimizer, optimizer_params, targets,
                                        workers, progress)
    stats1 = cache.cache_stats()

    # ---- manifest
    manifest = {
        "format": FORMAT,
        "tool": "symtriton compile",
        "created": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
        "command": command,
        "versions": _versions(),
        "source": source,
        "targets": targets,
        "modes": modes,
        "contexts": int(contexts) if not batch_per_context else len(batch_per_context),
        "batch_per_context": list(batch_per_context) if batch_per_context else None,
        "bucket_keys": [b[0] for b in buckets] if sym_gen is not None else None,
        "optimizer": ({"name": optimizer, "params": dict(optimizer_params or {}),
                       "kernels": opt_kernels} if optimizer else None),
        "programs": jobs,
        "cubins": {f"{t}/{h}": {k: v for k, v in meta.items() if k != "path"}
                   for (h, t), meta in sorted(cubins.items())},
    }
    manifest["files"] = _collect_files(root, jobs, opt_kernels, cubins)
    atomic_write_text(os.path.join(root, MANIFEST),
                      json.dumps(manifest, indent=1, sort_keys=True) + "\n", cache_trust.FILE_MODE)
    total = time.perf_counter() - t_start
    return {"dir": root, "manifest": manifest, "programs_compiled":
            stats1["compiles"] - stats0["compiles"],
            "programs_cached": len(jobs) - (stats1["compiles"] - stats0["compiles"]),
            "seconds": total}


def build_outputs(root, jobs, optimizer, optimizer_params, targets, workers=None,
                  progress=False) -> tuple:
    """Write into ``root`` everything ``jobs`` compile to; return ``(optimizer kernel
    hashes, cubins)``.

    ``root`` must be the current :func:`cache.cache_dir`. Writes the symbol files
    (``symbols/<hash>.json``), the program entries and kernels, the optimizer's update
    kernels and, for cuda targets, the cubins. Each job is a manifest ``programs`` item
    plus ``_call``, its :func:`compile_symbol` arguments; the job gets its kernels,
    launch counts and bytes per step. ``symtriton compile`` and ``symtriton cache verify
    --rebuild`` both call this, so a rebuild makes exactly the files a compile made.
    """
    from ..triton import cubin as cubin_mod
    from .compile import compile_symbol
    # the in-memory map is keyed by program key alone: a Program compiled earlier in
    # this process for another cache directory would be a hit with no entry in root
    cache.clear_memory_cache()
    texts = {job["compile"]["symbol"]: job["_call"][0].tojson(remove_amp_cast=False, indent=None)
             for job in jobs}
    for rel, text in texts.items():
        path = os.path.join(root, rel)
        cache_trust.make_dirs(os.path.dirname(path))
        atomic_write_text(path, text, cache_trust.FILE_MODE)
    bar = _progress(len(jobs), "programs", progress)
    param_dtypes = set()          # the optimizer updates weights of these dtypes
    for job in jobs:
        s, sl, ft, g, it, target, dtypes, *rest = job.pop("_call")
        prog = compile_symbol(s, sl, for_training=ft, grad_req=g, is_train=it, target=target,
                              dtypes=dtypes, loss_scale=bool(rest and rest[0]))
        st = prog.stats
        param_dtypes.update(prog.arg_dtypes[n] for n in prog.grad_names)
        kernel_launches = prog.kernel_launches()     # extern launches: no file, no compile
        job.update(kernels=list(dict.fromkeys(ln.kernel for ln in kernel_launches)),
                   launches=len(prog.launches), forward_launches=st["forward_launches"],
                   backward_launches=st["backward_launches"],
                   bytes_per_step=st["bytes_per_step"],
                   # one compile per kernel and pointer alignment: Triton specialises on it
                   _configs={(ln.kernel, cubin_mod.launch_alignment(ln)): dict(ln.config)
                             for ln in kernel_launches})
        bar.update(1)
    bar.close()
    opt_kernels = (_optimizer_kernels(optimizer, optimizer_params, targets,
                                      sorted(param_dtypes) or ["float32"])
                   if optimizer else [])
    cubin_items = []
    for target in [t for t in targets if t.startswith("cuda:")]:
        wanted = {}
        for job in jobs:
            if job["target"] == target:
                for (h, aligned), cfg in job["_configs"].items():
                    wanted.setdefault((h, aligned), cfg)
        for h in opt_kernels:
            if _is_triton_kernel(h):     # the cpu target's foreach function has no cubin
                wanted.setdefault((h, ""), None)
        cubin_items += [(h, target, cfg and dict(cfg, aligned=aligned))
                        for (h, aligned), cfg in wanted.items()]
    cubins = _compile_cubins(root, cubin_items, workers, progress) if cubin_items else {}
    for job in jobs:
        job.pop("_configs", None)
    return opt_kernels, cubins


def _cubin_stem(h, cfg) -> str:
    """File stem of a kernel's cubin: its hash, plus its pointer alignment when a
    launch passes a pointer that is not 16-byte aligned (a different binary)."""
    aligned = (cfg or {}).get("aligned") or ""
    return h if "0" not in aligned else f"{h}-a{aligned}"


def triton_entry(root, triton_hash: str) -> str:
    """The directory of Triton's cache entry ``triton_hash`` under ``<root>/triton``
    (Triton names entries by the base32 of their key's sha256)."""
    name = base64.b32encode(bytes.fromhex(triton_hash)).decode().rstrip("=")
    return os.path.join(root, TRITON_DIR, name)


def _compile_cubins(root, items, workers, progress) -> dict:
    """Compile ``(hash, target, config)`` items in chunks (for the progress bar); store them.

    Each kernel is compiled with the specialisation its launches ask for
    (``cubin.specialize``), into Triton's own cache layout under ``<root>/triton``,
    where a GPU process using ``root`` finds it with no compile; the cubin and its
    resource usage are also stored under ``cubin/<target>/`` for reading.
    """
    from ..triton import cubin as cubin_mod
    out = {}
    todo = []
    for h, target, cfg in items:
        stem = _cubin_stem(h, cfg)
        meta_path = os.path.join(root, "cubin", _target_dir(target), f"{stem}.json")
        bin_path = os.path.join(root, "cubin", _target_dir(target), f"{stem}.cubin")
        try:   # already there and whole, Triton's entry included: keep it
            with open(meta_path) as f:
                meta = json.load(f)
            if sha_file(bin_path) == meta["sha256"] and \
                    os.path.isdir(triton_entry(root, meta["triton_hash"])):
                meta["path"] = bin_path
                out[(stem, target)] = meta
                continue
        except (OSError, ValueError, KeyError):
            pass
        todo.append((h, target, cfg))
    bar = _progress(len(items), "kernels (cubin)", progress)
    bar.update(len(items) - len(todo))
    n = max(1, workers or os.cpu_count() or 1)
    chunk = max(n * 2, 8)
    errors = []
    triton_cache = os.path.join(root, TRITON_DIR)
    cache_trust.make_dirs(triton_cache)
    for i in range(0, len(todo), chunk):
        part = todo[i:i + chunk]
        results = cubin_mod.compile_many(part, workers=n, triton_cache=triton_cache)
        for (h, target, cfg), r in zip(part, results):
            if isinstance(r, Exception):
                errors.append(str(r))
                continue
            stem = _cubin_stem(h, cfg)
            folder = os.path.join(root, "cubin", _target_dir(target))
            cache_trust.make_dirs(folder)
            bin_path = os.path.join(folder, f"{stem}.cubin")
            atomic_write_bytes(bin_path, r["cubin"], cache_trust.FILE_MODE)
            with open(cache.kernel_path(h)) as f:
                declared = cubin_mod.declared_signature(f.read())
            constexprs = declared[1] if declared is not None else \
                {k: r["config"][k] for k in ("BM", "BN", "BK")}
            meta = {"hash": h, "target": target, "name": r.get("name"),
                    "num_warps": r["config"]["num_warps"], "shared": r["shared"],
                    "config": r["config"], "constexprs": constexprs,
                    "signature": r["specialization"]["signature"],
                    "divisible_by_16": r["specialization"]["divisible_by_16"],
                    "triton_hash": r["triton_hash"],
                    "n_regs": r["n_regs"], "n_spills": r["n_spills"],
                    "summary": r.get("summary"), "sha256": hashlib.sha256(r["cubin"]).hexdigest()}
            atomic_write_text(os.path.join(folder, f"{stem}.json"),
                              json.dumps(meta, indent=1, sort_keys=True) + "\n",
                              cache_trust.FILE_MODE)
            meta["path"] = bin_path
            out[(stem, target)] = meta
        bar.update(len(part))
    bar.close()
    if errors:
        raise AOTError(f"{len(errors)} kernel(s) failed to compile to cubin; first: {errors[0]}")
    return out


def _collect_files(root, jobs, opt_kernels, cubins) -> dict:
    files = {}

    def add(path):
        rel = os.path.relpath(path, root)
        if rel not in files:
            files[rel] = sha_file(path)

    for job in jobs:
        add(os.path.join(root, job["compile"]["symbol"]))
        entry = os.path.join(root, "programs", job["key"])
        for name in sorted(os.listdir(entry)):
            add(os.path.join(entry, name))
    for h in {h for job in jobs for h in job["kernels"]} | set(opt_kernels):
        add(os.path.join(root, "kernels", f"k_{h}.py"))
    for (stem, target), meta in cubins.items():
        add(meta["path"])
        add(os.path.join(os.path.dirname(meta["path"]), f"{stem}.json"))
        entry = triton_entry(root, meta["triton_hash"])
        for name in sorted(os.listdir(entry)):
            add(os.path.join(entry, name))
    return dict(sorted(files.items()))


# ----------------------------------------------------------------- summary text

def format_summary(result: dict) -> str:
    m = result["manifest"]
    progs = m["programs"]
    kernels = {h for p in progs for h in p["kernels"]}
    out = [f"cache directory: {result['dir']}",
           f"targets: {', '.join(m['targets'])}; modes: {', '.join(m['modes'])}; "
           f"contexts: {m['contexts']}",
           f"programs: {len(progs)} ({result['programs_compiled']} compiled, "
           f"{result['programs_cached']} already cached)",
           f"kernels: {len(kernels)} program kernels"
           + (f" + {len(m['optimizer']['kernels'])} optimizer kernel(s) "
              f"({m['optimizer']['name']})" if m.get("optimizer") else ""),
           "", "per program (bucket, contexts, target, mode: launches/step, bytes/step, key):"]
    for p in progs:
        out.append(f"  bucket {p['bucket']!s:>5}  ctx {','.join(map(str, p['contexts'])):<5} "
                   f"{p['target']:<10} {p['mode']:<8} {p['launches']:>5} launches "
                   f"{p['bytes_per_step']:>12,} bytes  {p['key']}")
    if m["cubins"]:
        out.append("")
        out.append("cubins (target/kernel: registers, spill bytes, shared memory, warps):")
        for name, c in sorted(m["cubins"].items()):
            flag = "  SPILLS" if c["n_spills"] else ""
            out.append(f"  {name}  regs {c['n_regs']:>3}  spills {c['n_spills']:>4}  "
                       f"shared {c['shared']:>6}  warps {c['num_warps']}  "
                       f"{c.get('summary') or ''}{flag}")
        regs = [c["n_regs"] for c in m["cubins"].values()]
        spills = sum(1 for c in m["cubins"].values() if c["n_spills"])
        out.append(f"  {len(regs)} cubins, max registers {max(regs)}, {spills} with spills")
    out.append("")
    out.append(f"files: {len(m['files'])} (checksums in {MANIFEST})")
    out.append(f"total compile time: {result['seconds']:.1f} s")
    out.append(f"run offline with: SYMTRITON_CACHE_DIR={result['dir']} SYMTRITON_OFFLINE=1")
    return "\n".join(out) + "\n"


# ----------------------------------------------------------------- reading a directory

def read_manifest(root) -> dict:
    path = os.path.join(root, MANIFEST)
    try:
        with open(path) as f:
            return json.load(f)
    except FileNotFoundError:
        raise AOTError(f"{root} has no {MANIFEST} (not written by symtriton compile)") from None
    except (OSError, ValueError) as exc:
        raise AOTError(f"cannot read {path}: {exc}") from None


def describe_dir(root) -> str:
    """``symtriton inspect --from-cache DIR``: the manifest's summary, as text."""
    m = read_manifest(root)
    v = m.get("versions", {})
    progs = m.get("programs", [])
    out = [f"{root}: written by {m.get('tool')} on {m.get('created')}",
           f"versions: symtriton {v.get('symtriton')}, triton {v.get('triton')}, "
           f"torch {v.get('torch')}, python {v.get('python')}",
           f"source: {json.dumps(m.get('source'))}",
           f"targets: {', '.join(m.get('targets', []))}; modes: {', '.join(m.get('modes', []))}"
           f"; contexts: {m.get('contexts')}",
           ]
    if m.get("bucket_keys"):
        out.append(f"bucket keys: {', '.join(map(str, m['bucket_keys']))}")
    if m.get("optimizer"):
        o = m["optimizer"]
        out.append(f"optimizer: {o['name']} {o['params']} ({len(o['kernels'])} kernel(s))")
    out.append(f"programs: {len(progs)}; kernels: "
               f"{len({h for p in progs for h in p['kernels']})}; cubins: "
               f"{len(m.get('cubins', {}))}; files: {len(m.get('files', {}))}")
    for p in progs:
        out.append(f"  {p['key']}  {p['launches']:>4} launches  {p['description']}")
    if m.get("command"):
        out.append(f"command: {m['command']}")
    return "\n".join(out) + "\n"


def list_dir(root) -> str:
    try:
        m = read_manifest(root)
    except AOTError:
        m = None
    keys = {p["key"]: p for p in (m or {}).get("programs", [])}
    progs = os.path.join(root, "programs")
    names = sorted(n for n in os.listdir(progs) if not n.startswith(".")) \
        if os.path.isdir(progs) else []
    out = [f"{root}: {len(names)} program entries"
           + (f", manifest lists {len(keys)}" if m else f" (no {MANIFEST})")]
    for n in names:
        p = keys.get(n)
        out.append(f"  {n}  {_dir_size(os.path.join(progs, n)):>9,} B  "
                   + (p["description"] if p else "(not in the manifest)"))
    for sub in ("kernels", "cubin"):
        path = os.path.join(root, sub)
        if os.path.isdir(path):
            count = sum(len(f) for _, _, f in os.walk(path))
            out.append(f"{sub}/: {count} files, {_dir_size(path):,} B")
    return "\n".join(out) + "\n"


def _dir_size(path) -> int:
    total = 0
    for folder, _, files in os.walk(path):
        for f in files:
            try:
                total += os.path.getsize(os.path.join(folder, f))
            except OSError:
                pass
    return total


_OURS = ("programs", "kernels", "cubin", "locks", SYMBOLS, TRITON_DIR)


def clear_dir(root) -> int:
    """Remove symtriton's entries (programs/, kernels/, cubin/, locks/, symbols/,
    triton/, the manifest) only."""
    n = 0
    for sub in _OURS:
        path = os.path.join(root, sub)
        if os.path.isdir(path):
            n += sum(len(f) for _, _, f in os.walk(path))
            shutil.rmtree(path)
    man = os.path.join(root, MANIFEST)
    if os.path.exists(man):
        os.unlink(man)
        n += 1
    return n


def prune_dir(root, days=None) -> list:
    """Remove program entries not in the manifest (or, with ``days``, not used for that
    long), then kernels and cubins no remaining entry or manifest refers to."""
    try:
        m = read_manifest(root)
    except AOTError:
        m = None
    if m is None and days is None:
        raise AOTError(f"{root} has no {MANIFEST}: give --days N to prune by age")
    keep = {p["key"] for p in m["programs"]} if m else None
    removed = []
    progs = os.path.join(root, "programs")
    now = time.time()
    for name in sorted(os.listdir(progs)) if os.path.isdir(progs) else []:
        if name.startswith("."):
            continue
        path = os.path.join(progs, name)
        old = days is not None and now - _last_used(path) > days * 86400
        if (keep is not None and name not in keep) or old:
            shutil.rmtree(path, ignore_errors=True)
            removed.append(f"programs/{name}")
    # kernels referenced by what is left
    used = set((m or {}).get("optimizer", {}) and m["optimizer"]["kernels"] or [])
    for name in os.listdir(progs) if os.path.isdir(progs) else []:
        try:
            with open(os.path.join(progs, name, "manifest.json")) as f:
                used |= {k.split(":", 1)[1] for k in json.load(f)["files"] if k.startswith("kernel:")}
        except (OSError, ValueError, KeyError):
            pass
    kdir = os.path.join(root, "kernels")
    for name in sorted(os.listdir(kdir)) if os.path.isdir(kdir) else []:
        mm = re.fullmatch(r"k_([0-9a-f]+)\.py", name)
        if mm and mm.group(1) not in used:
            path = os.path.join(kdir, name)
            if m is not None or (days is not None and now - _last_used(path) > days * 86400):
                os.unlink(path)
                removed.append(f"kernels/{name}")
    cdir = os.path.join(root, "cubin")
    kept_triton = set()
    for folder, _, files in os.walk(cdir):
        for name in sorted(files):
            h = name.split(".", 1)[0].split("-", 1)[0]     # <hash>[-a<alignment>].<ext>
            path = os.path.join(folder, name)
            if h not in used:
                os.unlink(path)
                removed.append(os.path.relpath(path, root))
            elif name.endswith(".json"):
                try:
                    with open(path) as f:
                        kept_triton.add(os.path.basename(triton_entry(root, json.load(f)["triton_hash"])))
                except (OSError, ValueError, KeyError):
                    pass
    tdir = os.path.join(root, TRITON_DIR)
    for name in sorted(os.listdir(tdir)) if os.path.isdir(tdir) else []:
        path = os.path.join(tdir, name)
        old = days is not None and now - _last_used(path) > days * 86400
        if (m is not None and name not in kept_triton) or old:
            shutil.rmtree(path, ignore_errors=True)
            removed.append(f"{TRITON_DIR}/{name}")
    return removed


def _last_used(path) -> float:
    st = os.stat(path)
    return max(st.st_mtime, st.st_atime)
