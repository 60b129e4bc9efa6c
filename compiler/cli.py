"""The ``symtriton`` command (also ``python -m compiler``).

``symtriton inspect SYMBOL.json --shape data=64,784 [--train] [--json]``
compiles a symbol for the given input shapes (through the normal cache) and
shows what the compiler made of it: the kernel groups with their operators
and tile configurations, the generated source of one kernel, and launch
counts and bytes moved per step beside the unfused (one kernel per operator)
figures. Subcommands share one parser so ``compile`` can join ``inspect``.

Usage errors (a malformed ``--shape``, an input the symbol does not have, a
symbol file that is not valid symbol JSON, a shape the model rejects) print
one line to stderr and exit with status 2.
"""
from __future__ import annotations

import argparse
import importlib
import json
import os
import sys

PROG = "symtriton"


class UsageError(Exception):
    """A problem with the command line or its inputs: one line, exit status 2."""


# ----------------------------------------------------------------- parsing

def parse_shape(text: str) -> tuple:
    """``NAME=D1,D2,...`` -> ``(name, (d1, d2, ...))``; dims are positive integers."""
    name, sep, dims = text.partition("=")
    name = name.strip()
    if not sep or not name:
        raise argparse.ArgumentTypeError(
            f"bad --shape {text!r}: expected NAME=D1,D2,... such as data=64,784")
    dims = dims.strip().strip("()[]").strip()
    try:
        shape = tuple(int(d) for d in dims.split(",") if d.strip() != "")
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"bad --shape {text!r}: dimensions must be integers, as in {name}=64,784") from None
    if not shape or any(d <= 0 for d in shape):
        raise argparse.ArgumentTypeError(
            f"bad --shape {text!r}: give one or more positive dimensions, as in {name}=64,784")
    return name, shape


def parse_dtype(text: str) -> tuple:
    """``NAME=DTYPE`` -> ``(name, dtype name)``, a dtype kernels are generated for."""
    from .ir.dtypes import SUPPORTED, dtype_name
    name, sep, dtype = text.partition("=")
    name, dtype = name.strip(), dtype.strip()
    if not sep or not name or not dtype:
        raise argparse.ArgumentTypeError(
            f"bad --dtype {text!r}: expected NAME=DTYPE such as data=float16")
    got = dtype_name(dtype)
    if got not in SUPPORTED:
        raise argparse.ArgumentTypeError(
            f"bad --dtype {text!r}: {dtype} is not one of {', '.join(SUPPORTED)}")
    return name, got


def parse_target(text: str) -> str:
    from .artifacts.compile import check_target
    from .errors import MXNetError
    try:
        return check_target(text)
    except MXNetError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


class _Parser(argparse.ArgumentParser):
    """argparse, but usage errors are one line on stderr (status 2)."""

    def error(self, message):
        sys.stderr.write(f"{self.prog}: error: {message}\n")
        sys.exit(2)


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(
        prog=PROG,
        description="Compile MXNet symbol graphs into fused Triton kernels and look at the "
                    "result.",
        epilog="Run 'symtriton COMMAND --help' for the options of one command.")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=_Parser)
    sub.required = True

    p = sub.add_parser(
        "inspect", help="show the kernel groups, generated source, launch counts and bytes "
                        "moved for a model",
        description="Compile SYMBOL.json for the given input shapes and show the fused kernel "
                    "groups (phase, operators, tile configuration), the generated Triton "
                    "source of one kernel, and launch counts and bytes moved per step beside "
                    "the unfused graph's (one kernel per operator). Programs go through the "
                    "normal cache (SYMTRITON_CACHE_DIR).",
        epilog="example: symtriton inspect mlp-symbol.json --shape data=64,784 "
               "--shape softmax_label=64 --train")
    p.add_argument("symbol", metavar="SYMBOL.json", nargs="?",
                   help="symbol file written by Symbol.save / mxnet (e.g. model-symbol.json)")
    p.add_argument("--from-cache", metavar="DIR",
                   help="instead of compiling a symbol, describe a directory written by "
                        "'symtriton compile' (its symtriton-manifest.json: versions, targets, "
                        "program keys)")
    p.add_argument("--shape", metavar="NAME=D1,D2,...", action="append", type=parse_shape,
                   default=[],
                   help="shape of one input (data, labels); repeat for each input. Every "
                        "other argument is a parameter whose shape is inferred")
    p.add_argument("--dtype", metavar="NAME=DTYPE", action="append", type=parse_dtype,
                   default=[],
                   help="dtype of one input (float16, bfloat16, float32, float64, integer "
                        "types), as type_dict / DataDesc(dtype=) give it; the others are "
                        "inferred with mxnet's rules (float32 where nothing decides)")
    p.add_argument("--train", action="store_true",
                   help="build the training program: forward in training mode and a backward "
                        "phase with gradients (grad_req 'write') for every argument not named "
                        "by --shape, as Module.bind(for_training=True) does")
    p.add_argument("--inputs-need-grad", action="store_true",
                   help="with --train, also compute gradients for the inputs named by --shape")
    p.add_argument("--import", dest="imports", metavar="MODULE", action="append", default=[],
                   help="import a Python module first (repeatable): one that registers the "
                        "CustomOpProp classes (mx.operator.register) of the symbol's Custom "
                        "nodes")
    p.add_argument("--kernel", metavar="N", type=int, default=0,
                   help="index of the launch whose generated source is shown (default 0, the "
                        "first)")
    p.add_argument("--target", metavar="TARGET", type=parse_target, default="interpret",
                   help="'interpret' (the Triton kernels, with the interpreter's "
                        "whole-tensor tiles; the default), 'cpu' (the torch code cpu() "
                        "contexts run) or 'cuda:<arch>' such as cuda:80, cuda:90 (GPU tile "
                        "sizes; compiling needs no GPU)")
    p.add_argument("--json", action="store_true",
                   help="print one JSON object (forward_launches, backward_launches, "
                        "unfused_forward_ops, unfused_backward_ops, bytes_per_step, "
                        "unfused_bytes_per_step, groups, kernel) instead of text")
    p.set_defaults(func=cmd_inspect)
    _add_compile(sub)
    _add_cache(sub)
    _add_ops(sub)
    return parser


AOT_WORKFLOW = """\
workflow (ahead of time):
  1. on any machine (no GPU needed), compile every program the run will use:
       symtriton compile --sym-gen mymodels:sym_gen --bucket-keys 10,20,30 \\
           --shape data=32,{key} --shape softmax_label=32,{key} --train \\
           --optimizer sgd --optimizer-param momentum=0.9 --contexts 2 \\
           --target interpret --target cuda:90 --out ./symtriton-cache
  2. copy the directory to the GPU machine (it is self-describing:
     symtriton-manifest.json lists versions, targets, keys, compile inputs
     and checksums). A cache directory is code: check it there with
       symtriton cache verify --rebuild ./symtriton-cache
     (regenerates everything and compares byte for byte) and keep it
     writable by you only: a directory or file that others may write is
     refused at load time.
  3. run there with SYMTRITON_CACHE_DIR=./symtriton-cache SYMTRITON_OFFLINE=1:
     every program is a cache hit (zero compiles); a shape that was not
     compiled fails with an error naming its key and the symtriton compile
     command that adds it.
The runtime, the symtriton version, triton and the compiler sources must
match between the two machines (the key includes them).
"""


def parse_kv(text: str) -> tuple:
    """``k=v`` with v parsed as JSON where it can be (numbers, true/false), else a string."""
    k, sep, v = text.partition("=")
    if not sep or not k.strip():
        raise argparse.ArgumentTypeError(f"bad --optimizer-param {text!r}: expected KEY=VALUE "
                                         f"such as momentum=0.9")
    try:
        value = json.loads(v)
    except ValueError:
        value = v
    return k.strip(), value


def parse_int_list(text: str) -> list:
    try:
        out = [int(x) for x in text.split(",") if x.strip()]
    except ValueError:
        out = []
    if not out or any(x <= 0 for x in out):
        raise argparse.ArgumentTypeError(f"bad list {text!r}: expected positive integers "
                                         f"such as 16,16")
    return out


def _add_compile(sub):
    p = sub.add_parser(
        "compile", help="compile every program (and cubin) a run will need into a cache "
                        "directory, ahead of time",
        formatter_class=argparse.RawDescriptionHelpFormatter,
        description="Compile a model ahead of time for every (bucket, per-context slice shape, "
                    "target, mode) and store the programs, kernel sources and (for cuda "
                    "targets) cubins in a cache directory with a self-describing "
                    "symtriton-manifest.json. Needs no GPU.",
        epilog=AOT_WORKFLOW)
    p.add_argument("symbol", metavar="SYMBOL.json", nargs="?",
                   help="symbol file (model-symbol.json); or use --sym-gen")
    p.add_argument("--sym-gen", metavar="MODULE:FUNCTION",
                   help="a BucketingModule sym_gen: FUNCTION(bucket_key) -> (symbol, "
                        "data_names, label_names), imported from MODULE (the current "
                        "directory is on the path)")
    p.add_argument("--bucket-keys", metavar="K1,K2,...",
                   help="with --sym-gen: the bucket keys to compile, e.g. 10,20,30")
    p.add_argument("--shape", metavar="NAME=D1,D2,...", action="append", default=[],
                   help="whole-batch shape of one input (batch on axis 0); repeat for each. "
                        "With --sym-gen a dimension may be {key}, e.g. data=32,{key}. "
                        "Inputs ending in 'label' are labels (SYMBOL.json)")
    p.add_argument("--shapes-json", metavar="FILE",
                   help="JSON mapping each bucket key to {input name: shape}")
    p.add_argument("--dtype", metavar="NAME=DTYPE", action="append", type=parse_dtype,
                   default=[],
                   help="dtype of one input, as the run's DataDesc(dtype=) gives it "
                        "(float16, bfloat16, float64, ...); the others are inferred "
                        "(float32 where nothing decides); repeatable")
    p.add_argument("--train", action="store_true",
                   help="the training programs (Module.bind(for_training=True))")
    p.add_argument("--predict", action="store_true",
                   help="the inference programs (the default without --train; with --train, "
                        "both)")
    p.add_argument("--grad-req", default="write", choices=("write", "add", "null"),
                   help="grad_req of the parameters (default write)")
    p.add_argument("--fixed-param", metavar="NAME", action="append", default=[],
                   help="a parameter with no gradient (Module's fixed_param_names); repeatable")
    p.add_argument("--inputs-need-grad", action="store_true",
                   help="with --train, gradients for the data inputs too")
    p.add_argument("--optimizer", metavar="NAME",
                   help="also compile this optimizer's update kernel(s): sgd, nag, adam, "
                        "adagrad, rmsprop, adadelta")
    p.add_argument("--optimizer-param", metavar="KEY=VALUE", action="append", type=parse_kv,
                   default=[], help="optimizer argument, e.g. momentum=0.9 or "
                                    "clip_gradient=5 (selects the kernel variant); repeatable")
    g = p.add_mutually_exclusive_group()
    g.add_argument("--contexts", metavar="N", type=int, default=1,
                   help="number of devices the batch is split over, as "
                        "DataParallelExecutorGroup slices it (default 1)")
    g.add_argument("--batch-per-context", metavar="B1,B2,...", type=parse_int_list,
                   help="the batch share of each device (the Module's work_load_list)")
    p.add_argument("--target", metavar="TARGET", action="append", type=parse_target,
                   help="'cpu' (cpu() contexts), 'interpret' (cpu() contexts with "
                        "SYMTRITON_CPU_TARGET=interpret) or 'cuda:<arch>' (gpu contexts, e.g. "
                        "cuda:80, cuda:90; cubins are compiled too); repeat for several "
                        "(default cpu)")
    p.add_argument("--out", metavar="DIR",
                   help="the cache directory to fill (same layout as SYMTRITON_CACHE_DIR; "
                        "default: SYMTRITON_CACHE_DIR or the per-user cache)")
    p.add_argument("--workers", metavar="N", type=int,
                   help="processes compiling cubins (default: CPU count)")
    p.add_argument("--no-progress", action="store_true", help="no progress bars")
    p.add_argument("--json", action="store_true", help="print the manifest as JSON")
    p.set_defaults(func=cmd_compile)


_CACHE_ACTIONS = {
    "ls": "list the entries and what they are",
    "verify": "check every checksum, every manifest path (none may lead outside DIR) and "
              "who may write the files, in a directory 'symtriton compile' wrote or one "
              "filled at run time; exit status 1 and one BAD line per problem",
    "clear": "remove symtriton's entries (programs, kernels, cubins, symbols, locks, manifest)",
    "prune": "remove entries the manifest does not list (or, with --days, entries unused "
             "for that long)",
}


def _add_cache(sub):
    p = sub.add_parser("cache", help="list, verify, clear or prune a cache directory",
                       description="Manage a symtriton cache directory (one written by "
                                   "'symtriton compile' or used as SYMTRITON_CACHE_DIR).",
                       formatter_class=argparse.RawDescriptionHelpFormatter,
                       epilog=AOT_WORKFLOW)
    # one sub-parser per action, so options may come before DIR (verify --rebuild DIR)
    actions = p.add_subparsers(dest="action", metavar="ACTION", parser_class=_Parser)
    actions.required = True
    for name, text in _CACHE_ACTIONS.items():
        a = actions.add_parser(name, help=text, description=text[0].upper() + text[1:] + ".")
        a.add_argument("dir", metavar="DIR", nargs="?",
                       help="the directory (default: SYMTRITON_CACHE_DIR or the per-user "
                            "cache)")
        a.set_defaults(func=cmd_cache, days=None, rebuild=False, repair=False)
    actions.choices["prune"].add_argument(
        "--days", type=float, help="entries unused for this many days")
    actions.choices["verify"].add_argument(
        "--rebuild", action="store_true",
        help="also regenerate every program, kernel and cubin from the compile inputs the "
             "manifest records (symbols, shapes, grad_req, mode, targets, optimizer) and "
             "compare byte for byte; report every file that differs, is missing, or that "
             "the rebuild does not produce. Nothing in DIR is imported or run. Use it "
             "before trusting a directory from another machine. Works on a directory "
             "filled at run time (SYMTRITON_CACHE_DIR) too: each entry records its inputs")
    actions.choices["verify"].add_argument(
        "--repair", action="store_true",
        help="with --rebuild (implied): replace every file that differs from the rebuild or "
             "is missing by the rebuilt one, in a directory that belongs to you; files the "
             "rebuild does not produce are reported, never removed (see prune)")


def _aot_errors():
    from .errors import MXNetError
    return MXNetError


def cmd_compile(ns) -> int:
    from .artifacts import aot
    shapes_json = None
    if ns.shapes_json:
        try:
            with open(ns.shapes_json) as f:
                shapes_json = {str(k): v for k, v in json.load(f).items()}
        except (OSError, ValueError) as exc:
            raise UsageError(f"--shapes-json {ns.shapes_json}: {exc}") from None
    if ns.symbol and ns.sym_gen:
        raise UsageError("give either SYMBOL.json or --sym-gen, not both")
    try:
        shapes = [aot.shape_template(s) for s in ns.shape]
        if not ns.sym_gen and any("{key}" in t for _, t in shapes):
            raise UsageError("{key} in --shape needs --sym-gen")
        keys = aot.parse_bucket_keys(ns.bucket_keys) if ns.bucket_keys else None
        result = aot.compile_aot(
            symbol=ns.symbol, sym_gen=ns.sym_gen, bucket_keys=keys, shapes=shapes,
            shapes_json=shapes_json, train=ns.train, predict=ns.predict, grad_req=ns.grad_req,
            fixed_params=ns.fixed_param, inputs_need_grad=ns.inputs_need_grad,
            optimizer=ns.optimizer, optimizer_params=dict(ns.optimizer_param),
            contexts=ns.contexts, batch_per_context=ns.batch_per_context,
            targets=ns.target or ["cpu"], out=ns.out, workers=ns.workers,
            progress=not ns.no_progress, command=" ".join([PROG] + sys.argv[1:]),
            dtypes=dict(ns.dtype))
    except _aot_errors() as exc:
        raise UsageError(_one_line(exc)) from None
    if ns.json:
        sys.stdout.write(json.dumps(result["manifest"], sort_keys=True) + "\n")
    else:
        sys.stdout.write(aot.format_summary(result))
    return 0


def cmd_cache(ns) -> int:
    from .artifacts import aot, aot_verify, cache
    root = ns.dir or cache.cache_dir()
    if not os.path.isdir(root):
        raise UsageError(f"{root} is not a directory")
    try:
        if ns.action == "ls":
            sys.stdout.write(aot.list_dir(root))
        elif ns.action == "verify":
            rebuild = ns.rebuild or ns.repair
            repaired = []
            problems = aot_verify.verify_dir(root, rebuild=rebuild, repair=ns.repair,
                                             repaired=repaired)
            for r in repaired:
                sys.stdout.write(f"REPAIRED {r}\n")
            for pr in problems:
                sys.stdout.write(f"BAD {pr}\n")
            if problems:
                sys.stdout.write(f"{root}: {len(problems)} bad entr"
                                 f"{'y' if len(problems) == 1 else 'ies'}\n")
                if not ns.repair:
                    sys.stdout.write(f"to replace what differs from a rebuild (in a directory "
                                     f"you own): {PROG} cache verify --rebuild --repair "
                                     f"{root}\n")
                return 1
            whole = os.path.lexists(os.path.join(root, aot.MANIFEST))
            sys.stdout.write(f"{root}: every checksum matches"
                             + ((", and a rebuild from the recorded compile inputs gives "
                                 "every file byte for byte, and no other" if whole else
                                 ", and a rebuild of every entry from its recorded compile "
                                 "inputs gives its files byte for byte") if rebuild else "")
                             + (f" ({len(repaired)} file(s) repaired)" if repaired else "")
                             + "\n")
        elif ns.action == "clear":
            n = aot.clear_dir(root)
            sys.stdout.write(f"{root}: removed {n} files\n")
        else:
            removed = aot.prune_dir(root, ns.days)
            for r in removed:
                sys.stdout.write(f"removed {r}\n")
            sys.stdout.write(f"{root}: pruned {len(removed)} entries\n")
    except _aot_errors() as exc:
        raise UsageError(_one_line(exc)) from None
    return 0


# ----------------------------------------------------------------- inspect

def _load_symbol(path):
    from . import symbol as sym
    from .errors import MXNetError
    try:
        return sym.load(path)
    except OSError as exc:
        raise UsageError(f"cannot read symbol file {path}: {exc.strerror or exc}") from None
    except UnicodeDecodeError:
        raise UsageError(f"symbol file {path} is not UTF-8 text") from None
    except MXNetError as exc:
        raise UsageError(f"{path}: {_one_line(exc)}") from None


def _one_line(exc) -> str:
    return " ".join(str(exc).split())


def inspect_model(symbol_path, shapes, train=False, inputs_need_grad=False,
                  target="interpret", kernel=0, dtypes=()) -> dict:
    """Compile and describe a model; the dict ``--json`` prints."""
    from .artifacts import cache
    from .artifacts.compile import compile_symbol
    from .artifacts.segments import compile_segments, custom_node_ids
    from .errors import MXNetError
    symbol = _load_symbol(symbol_path)
    args = symbol.list_arguments()
    shape_map = {}
    for name, shape in shapes:
        if name not in args:
            raise UsageError(f"--shape {name}: the symbol has no argument '{name}' "
                             f"(arguments: {', '.join(args)})")
        if name in shape_map:
            raise UsageError(f"--shape {name} is given twice")
        shape_map[name] = shape
    if inputs_need_grad and not train:
        raise UsageError("--inputs-need-grad needs --train")
    dtype_map = dict(dtypes)
    for name in dtype_map:
        if name not in args:
            raise UsageError(f"--dtype {name}: the symbol has no argument '{name}' "
                             f"(arguments: {', '.join(args)})")
    grad_req = {}
    if train:
        grad_req = {a: ("write" if a not in shape_map or inputs_need_grad else "null")
                    for a in args}
    try:
        if custom_node_ids(symbol):      # Python operators: the Programs around them
            parts = compile_segments(symbol, shape_map, train, grad_req, train, target,
                                     dtype_map)
        else:
            parts = [(None, compile_symbol(symbol, shape_map, for_training=train,
                                           grad_req=grad_req, is_train=train, target=target,
                                           dtypes=dtype_map))]
    except MXNetError as exc:
        raise UsageError(_one_line(exc)) from None
    progs = [p for _, p in parts if p is not None]
    launches = [ln for p in progs for ln in p.launches]
    if launches and not 0 <= kernel < len(launches):
        raise UsageError(f"--kernel {kernel}: the program has launches 0 to "
                         f"{len(launches) - 1}")
    groups, custom = _inspect_groups(parts)
    prog = progs[0] if progs else None
    st = {k: sum(p.stats[k] for p in progs) for k in
          ("forward_launches", "backward_launches", "unfused_forward_ops",
           "unfused_backward_ops", "bytes_per_step", "unfused_bytes_per_step")}
    chosen = None
    if launches:
        ln = launches[kernel]
        source, note = _launch_source(ln)
        chosen = {"index": kernel, "hash": ln.kernel, "source": source}
        if "consts" in ln.config:         # the cpu kernel's numbers: bind()'s first argument
            chosen["consts"] = list(ln.config["consts"])
        if source is None:
            chosen["note"] = note
    if len(parts) > 1 or prog is None:
        dtypes = _symbol_dtypes(symbol, dtype_map)
    else:
        dtypes = {"arguments": dict(prog.arg_dtypes), "auxiliary": dict(prog.aux_dtypes),
                  "outputs": list(prog.output_dtypes)}
    return {
        "symbol": os.fspath(symbol_path),
        "target": target if prog is None else prog.target,
        "mode": "training" if train else "inference",
        "inputs": {k: list(v) for k, v in shape_map.items()},
        "dtypes": dtypes,
        "custom_nodes": custom,
        "forward_launches": st["forward_launches"],
        "backward_launches": st["backward_launches"],
        "extern_launches": sum(1 for ln in launches if ln.is_extern),
        "unfused_forward_ops": st["unfused_forward_ops"],
        "unfused_backward_ops": st["unfused_backward_ops"],
        "bytes_per_step": st["bytes_per_step"],
        "unfused_bytes_per_step": st["unfused_bytes_per_step"],
        "groups": groups,
        "kernel": chosen,
    }


def _launch_source(ln):
    """``(source, note)`` of a launch's kernel file; an extern launch has none."""
    from .artifacts import cache
    if ln.is_extern:
        return None, f"an extern launch: calls ATen ({ln.config['op']}), no kernel source"
    try:
        with open(cache.kernel_path(ln.kernel), encoding="utf-8") as f:
            return f.read(), None
    except OSError as exc:
        return None, (f"source not on disk ({exc.strerror}); the cache directory may be "
                      f"read-only")


def _inspect_groups(parts) -> tuple:
    """Every launch of the segments' Programs in run order (index counted across
    them), and the Custom nodes that run in Python between them."""
    groups, custom = [], []
    for s, (seg, prog) in enumerate(parts):
        if prog is None:
            node = seg.symbol._outputs[0][0]
            custom.append({"segment": s, "name": node.name, "op_type": node.attrs.get(
                "op_type"), "inputs": [src.name for src, _ in node.inputs],
                "outputs": seg.symbol.list_outputs()})
            continue
        for i, ln in enumerate(prog.launches):
            groups.append({
                "index": len(groups), "phase": ln.phase, "kind": ln.kind, "kernel": ln.kernel,
                "summary": ln_summary(ln), "segment": s,
                "ops": list(prog.groups[i]) if i < len(prog.groups) else [],
                "config": dict(ln.config), "bytes_read": ln.bytes_read,
                "bytes_written": ln.bytes_written})
    return groups, custom


def _symbol_dtypes(symbol, given) -> dict:
    """The dtypes of a symbol's arguments, auxiliary states and outputs (mxnet's rules)."""
    from .artifacts.compile import all_dtypes
    from .ir.dtypes import dtype_name
    found = all_dtypes(symbol, given)
    _, outs, _ = symbol.infer_type(**found)
    aux = set(symbol.list_auxiliary_states())
    return {"arguments": {k: v for k, v in found.items() if k not in aux},
            "auxiliary": {k: v for k, v in found.items() if k in aux},
            "outputs": [dtype_name(t) for t in outs]}


def ln_summary(ln) -> str:
    from .triton.cubin import summary_line
    from .artifacts import cache
    if ln.is_extern or "consts" in ln.config:
        # a cpu kernel's file is shared by sizes (its comment names its constants):
        # the launch's own summary has its numbers
        return ln.summary
    # Launch.summary is the text after the source's second "# "; read the
    # kernel's own "# <kind> over domain" line instead where the file is there.
    try:
        with open(cache.kernel_path(ln.kernel), encoding="utf-8") as f:
            s = summary_line(f.read())
        if s != "?":
            return s
    except OSError:
        pass
    return ln.summary


def _fmt_cfg(cfg: dict) -> str:
    if "views" in cfg:        # an extern launch
        return f"extern: ATen call of {cfg['op']} (no kernel)"
    if "BM" not in cfg:       # the cpu target: torch calls over whole arrays
        return "whole arrays (torch calls)"
    return (f"BM={cfg.get('BM')} BN={cfg.get('BN')} BK={cfg.get('BK')} "
            f"warps={cfg.get('num_warps')} grid={tuple(cfg.get('grid', ()))}")


def _ratio(a, b) -> str:
    return f"{a / b:.2f}x" if b else "n/a"


def format_text(info: dict) -> str:
    out = []
    inputs = ", ".join(f"{k}={tuple(v)}" for k, v in info["inputs"].items())
    out.append(f"{info['symbol']}: {info['mode']}, target {info['target']}, inputs {inputs}")
    kinds = {}
    for name, t in info["dtypes"]["arguments"].items():
        kinds.setdefault(t, []).append(name)
    out.append("dtypes: " + "; ".join(f"{t}: {', '.join(names)}" for t, names in kinds.items())
               + f"; outputs {', '.join(info['dtypes']['outputs'])}")
    out.append("")
    out.append(f"kernel groups ({len(info['groups'])} launches):")
    python = {c["segment"]: c for c in info.get("custom_nodes", [])}
    segment = None
    for g in info["groups"]:
        if g.get("segment") != segment:
            segment = g.get("segment")
            out += _custom_lines([c for s, c in sorted(python.items()) if s < segment])
            python = {s: c for s, c in python.items() if s > segment}
        out.append(f"  [{g['index']:>2}] {g['phase']}  {g['kernel']}  {g['summary']}")
        out.append(f"        ops: {', '.join(g['ops'])}")
        out.append(f"        tile: {_fmt_cfg(g['config'])}  "
                   f"bytes: {g['bytes_read']:,} read, {g['bytes_written']:,} written")
    out += _custom_lines([c for _, c in sorted(python.items())])
    out.append("")
    f, b = info["forward_launches"], info["backward_launches"]
    uf, ub = info["unfused_forward_ops"], info["unfused_backward_ops"]
    out.append(f"forward launches:  {f:>6}   (unfused: {uf} ops, {_ratio(f, uf)})")
    out.append(f"backward launches: {b:>6}   (unfused: {ub} ops, {_ratio(b, ub)})")
    if info.get("extern_launches"):
        out.append(f"extern launches:   {info['extern_launches']:>6}   (ATen calls, counted "
                   f"above)")
    bp, ubp = info["bytes_per_step"], info["unfused_bytes_per_step"]
    out.append(f"bytes per step:    {bp:>,}   (unfused: {ubp:,}, {_ratio(bp, ubp)})")
    k = info["kernel"]
    if k is not None:
        out.append("")
        out.append(f"kernel {k['index']} ({k['hash']}) source:")
        out.append(k["source"].rstrip("\n") if k["source"] is not None else f"  ({k['note']})")
        if k.get("consts"):
            out.append(f"constants (_consts, _c0 first): {k['consts']}")
    return "\n".join(out) + "\n"


def _custom_lines(nodes) -> list:
    """A Custom node between the kernel groups: Python, not a kernel."""
    return [f"  [py] Custom '{c['name']}' (op_type {c['op_type']}): CustomOp.forward / "
            f"backward in Python between compiled segments; inputs {', '.join(c['inputs'])}"
            for c in nodes]


def cmd_inspect(ns) -> int:
    if ns.from_cache:
        from .artifacts import aot
        if ns.symbol:
            raise UsageError("give either SYMBOL.json or --from-cache DIR, not both")
        try:
            sys.stdout.write(aot.describe_dir(ns.from_cache))
        except _aot_errors() as exc:
            raise UsageError(_one_line(exc)) from None
        return 0
    if not ns.symbol:
        raise UsageError("give SYMBOL.json (or --from-cache DIR)")
    if not ns.shape:
        raise UsageError("the following arguments are required: --shape")
    if ns.imports and os.getcwd() not in sys.path:
        sys.path.insert(0, os.getcwd())   # a module beside the symbol file, as python -m does
    for module in ns.imports:
        importlib.import_module(module)
    info = inspect_model(ns.symbol, ns.shape, train=ns.train,
                         inputs_need_grad=ns.inputs_need_grad, target=ns.target,
                         kernel=ns.kernel, dtypes=ns.dtype)
    if ns.json:
        sys.stdout.write(json.dumps(info, sort_keys=True) + "\n")
    else:
        sys.stdout.write(format_text(info))
    return 0


def _add_ops(sub):
    p = sub.add_parser("ops", help="list the mxnet operators symtriton implements",
                       description="The operator registry: every mxnet operator name this "
                                   "project implements, with its aliases, inputs and kind.")
    p.add_argument("name", nargs="?", help="only operators whose name or alias contains this")
    p.add_argument("--json", action="store_true", help="print the list as JSON")
    p.add_argument("--markdown", action="store_true",
                   help="print the README's operator table: the operators grouped by how "
                        "they run on the Triton targets and on the cpu target")
    p.set_defaults(func=cmd_ops)


def cmd_ops(ns) -> int:
    """``symtriton ops``: the registry, one operator per line."""
    from .ops import registry
    seen, rows = set(), []
    for opdef in registry.REGISTRY.values():
        if id(opdef) in seen or opdef.name.startswith("_backward"):
            continue
        seen.add(id(opdef))
        names = (opdef.name, *opdef.aliases)
        if ns.name and not any(ns.name.lower() in n.lower() for n in names):
            continue
        args = opdef.arguments if not callable(opdef.arguments) else ("...",)
        aux = opdef.aux if not callable(opdef.aux) else ()
        triton, cpu = registry.how_it_runs(opdef)
        rows.append({"name": opdef.name, "aliases": list(opdef.aliases),
                     "inputs": list(args) + list(aux), "pattern": opdef.pattern,
                     "triton": triton, "cpu": cpu})
    rows.sort(key=lambda r: r["name"].lstrip("_").lower())
    if ns.json:
        sys.stdout.write(json.dumps(rows, indent=1) + "\n")
        return 0
    if ns.markdown:
        sys.stdout.write(operator_table_markdown(rows))
        return 0
    for r in rows:
        alias = f"  (also {', '.join(r['aliases'])})" if r["aliases"] else ""
        sys.stdout.write(f"{r['name']:<28} {r['pattern']:<10} "
                         f"inputs: {', '.join(r['inputs']) or '-'}{alias}  "
                         f"[triton: {r['triton']}; cpu: {r['cpu']}]\n")
    sys.stdout.write(f"{len(rows)} operators\n")
    return 0


def _public_names(names) -> list:
    """The names users write: those without a leading underscore, then a namespace
    member's ``linalg.syevd`` for ``_linalg_syevd`` (mxnet's operator namespaces)."""
    from .ops.registry import NAMESPACE_PREFIXES
    public = [n for n in names if not n.startswith("_")]
    for space, prefix in NAMESPACE_PREFIXES.items():
        public += [f"{space}.{n[len(prefix):]}" for n in names
                   if n.startswith(prefix) and len(n) > len(prefix)]
    return public


def operator_table_markdown(rows) -> str:
    """The public operators (no leading underscore, or members of an mxnet operator
    namespace such as ``linalg.syevd``) grouped by how they run: one markdown row per
    (Triton, cpu) pair, its operators (aliases in parentheses)."""
    groups = {}
    for r in rows:
        names = _public_names([r["name"], *r["aliases"]])
        if not names:
            continue
        entry = names[0] + (f" ({', '.join(names[1:])})" if names[1:] else "")
        groups.setdefault((r["triton"], r["cpu"]), []).append(entry)
    out = ["| Triton (`interpret`, `cuda:<arch>`) | `cpu` | operators |", "| --- | --- | --- |"]
    for (triton, cpu), names in sorted(groups.items(), key=lambda kv: -len(kv[1])):
        out.append(f"| {triton} | {cpu} | {', '.join(sorted(names, key=str.lower))} |")
    return "\n".join(out) + "\n"


# ----------------------------------------------------------------- entry point

def main(argv=None) -> int:
    """Console entry point ``symtriton``; returns the exit status."""
    parser = build_parser()
    ns = parser.parse_args(argv)
    try:
        return ns.func(ns)
    except UsageError as exc:
        sys.stderr.write(f"{PROG} {ns.command}: error: {exc}\n")
        return 2
    except BrokenPipeError:   # `symtriton inspect ... | head`
        return 0


if __name__ == "__main__":
    sys.exit(main())
