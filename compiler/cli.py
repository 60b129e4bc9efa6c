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


def parse_target(text: str) -> str:
    from .compile import check_target
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
    p.add_argument("symbol", metavar="SYMBOL.json",
                   help="symbol file written by Symbol.save / mxnet (e.g. model-symbol.json)")
    p.add_argument("--shape", metavar="NAME=D1,D2,...", action="append", type=parse_shape,
                   default=[], required=True,
                   help="shape of one input (data, labels); repeat for each input. Every "
                        "other argument is a parameter whose shape is inferred")
    p.add_argument("--train", action="store_true",
                   help="build the training program: forward in training mode and a backward "
                        "phase with gradients (grad_req 'write') for every argument not named "
                        "by --shape, as Module.bind(for_training=True) does")
    p.add_argument("--inputs-need-grad", action="store_true",
                   help="with --train, also compute gradients for the inputs named by --shape")
    p.add_argument("--kernel", metavar="N", type=int, default=0,
                   help="index of the launch whose generated source is shown (default 0, the "
                        "first)")
    p.add_argument("--target", metavar="TARGET", type=parse_target, default="interpret",
                   help="'interpret' (Triton's interpreter: whole-tensor tiles; the default) "
                        "or 'cuda:<arch>' such as cuda:80, cuda:90 (GPU tile sizes; "
                        "compiling needs no GPU)")
    p.add_argument("--json", action="store_true",
                   help="print one JSON object (forward_launches, backward_launches, "
                        "unfused_forward_ops, unfused_backward_ops, bytes_per_step, "
                        "unfused_bytes_per_step, groups, kernel) instead of text")
    p.set_defaults(func=cmd_inspect)
    return parser


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
                  target="interpret", kernel=0) -> dict:
    """Compile and describe a model; the dict ``--json`` prints."""
    from . import cache
    from .compile import compile_symbol
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
    grad_req = {}
    if train:
        grad_req = {a: ("write" if a not in shape_map or inputs_need_grad else "null")
                    for a in args}
    try:
        prog = compile_symbol(symbol, shape_map, for_training=train, grad_req=grad_req,
                              is_train=train, target=target)
    except MXNetError as exc:
        raise UsageError(_one_line(exc)) from None
    if prog.launches and not 0 <= kernel < len(prog.launches):
        raise UsageError(f"--kernel {kernel}: the program has launches 0 to "
                         f"{len(prog.launches) - 1}")
    st = prog.stats
    groups = []
    for i, ln in enumerate(prog.launches):
        groups.append({
            "index": i, "phase": ln.phase, "kernel": ln.kernel, "summary": ln_summary(ln),
            "ops": list(prog.groups[i]) if i < len(prog.groups) else [],
            "config": dict(ln.config), "bytes_read": ln.bytes_read,
            "bytes_written": ln.bytes_written})
    chosen = None
    if prog.launches:
        ln = prog.launches[kernel]
        try:
            with open(cache.kernel_path(ln.kernel), encoding="utf-8") as f:
                source = f.read()
        except OSError as exc:
            source = None
            note = f"source not on disk ({exc.strerror}); the cache directory may be read-only"
        chosen = {"index": kernel, "hash": ln.kernel, "source": source}
        if source is None:
            chosen["note"] = note
    return {
        "symbol": os.fspath(symbol_path),
        "target": prog.target,
        "mode": "training" if train else "inference",
        "inputs": {k: list(v) for k, v in shape_map.items()},
        "forward_launches": st["forward_launches"],
        "backward_launches": st["backward_launches"],
        "unfused_forward_ops": st["unfused_forward_ops"],
        "unfused_backward_ops": st["unfused_backward_ops"],
        "bytes_per_step": st["bytes_per_step"],
        "unfused_bytes_per_step": st["unfused_bytes_per_step"],
        "groups": groups,
        "kernel": chosen,
    }


def ln_summary(ln) -> str:
    from .cubin import summary_line
    from . import cache
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
    return (f"BM={cfg.get('BM')} BN={cfg.get('BN')} BK={cfg.get('BK')} "
            f"warps={cfg.get('num_warps')} grid={tuple(cfg.get('grid', ()))}")


def _ratio(a, b) -> str:
    return f"{a / b:.2f}x" if b else "n/a"


def format_text(info: dict) -> str:
    out = []
    inputs = ", ".join(f"{k}={tuple(v)}" for k, v in info["inputs"].items())
    out.append(f"{info['symbol']}: {info['mode']}, target {info['target']}, inputs {inputs}")
    out.append("")
    out.append(f"kernel groups ({len(info['groups'])} launches):")
    for g in info["groups"]:
        out.append(f"  [{g['index']:>2}] {g['phase']}  {g['kernel']}  {g['summary']}")
        out.append(f"        ops: {', '.join(g['ops'])}")
        out.append(f"        tile: {_fmt_cfg(g['config'])}  "
                   f"bytes: {g['bytes_read']:,} read, {g['bytes_written']:,} written")
    out.append("")
    f, b = info["forward_launches"], info["backward_launches"]
    uf, ub = info["unfused_forward_ops"], info["unfused_backward_ops"]
    out.append(f"forward launches:  {f:>6}   (unfused: {uf} ops, {_ratio(f, uf)})")
    out.append(f"backward launches: {b:>6}   (unfused: {ub} ops, {_ratio(b, ub)})")
    bp, ubp = info["bytes_per_step"], info["unfused_bytes_per_step"]
    out.append(f"bytes per step:    {bp:>,}   (unfused: {ubp:,}, {_ratio(bp, ubp)})")
    k = info["kernel"]
    if k is not None:
        out.append("")
        out.append(f"kernel {k['index']} ({k['hash']}) source:")
        out.append(k["source"].rstrip("\n") if k["source"] is not None else f"  ({k['note']})")
    return "\n".join(out) + "\n"


def cmd_inspect(ns) -> int:
    info = inspect_model(ns.symbol, ns.shape, train=ns.train,
                         inputs_need_grad=ns.inputs_need_grad, target=ns.target,
                         kernel=ns.kernel)
    if ns.json:
        sys.stdout.write(json.dumps(info, sort_keys=True) + "\n")
    else:
        sys.stdout.write(format_text(info))
    return 0


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
