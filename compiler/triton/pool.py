"""Pooling kernels for Triton (``templates/pool.py.j2``): window loops.

The program is ``compiler/ir/pool.py``'s. A pointwise kernel's ``[BM, 1]`` column over
the flat output (forward) or data (gradient). The forward loops over the window's
positions, masked outside the data; max pooling also writes, when a gradient reads
it, the window position of the first maximum (the hidden ``mask`` output). The
gradient is a gather, without atomics: each data position loops over the at most
``ceil(k / s)`` windows per dim that hold it and adds their output gradient (divided
by the window's count for ``avg``; for ``max`` only where the window's mask names its
own position, mxnet's rule: ``unpool`` routes to the first maximum).

ROIPooling's forward scans each bin (trip counts: the largest bin of the program's tile)
and writes the output and mxnet's hidden ``maxidx``; its gradient gathers, per data
position, the output gradients of every (roi, bin) whose ``maxidx`` names it (a loop
over rois x bins, no atomics).
"""
from __future__ import annotations

from ..ir.dtypes import TL
from ..ir.index_math import index_sum, split_index
from ..ir.pool import summary
from ..ir.rendering import Rendered, environment
from ..ir.tile_program import TileProgram
from ..ops.pool import FLT_MAX
from ..ops.registry import lit, prod

__all__ = ["render_pool"]


def _offset(coords, strides):
    return index_sum(list(zip(coords, strides)))


def _tensor_coords(lines, coords):
    """Spatial coordinates as tensors: a size-1 dim's ``0`` becomes ``zero`` (``rm * 0``),
    so the window masks built from it are tensors (the interpreter rejects an int mask)."""
    if "0" in coords:
        lines.append("zero = rm * 0")
    return ["zero" if c == "0" else c for c in coords]


class _Types:
    """Dtypes of a pooling kernel: values are loaded into the compute dtype ``cdt``
    (float32, or float64 for float64 data) and stored in each tensor's own."""

    def __init__(self, prog, roles):
        dtypes = prog.dtypes or ["float32"] * len(prog.tensors)
        self.cdt = TL[prog.compute_dtype]
        self.of_role = {role: TL[dtypes[t]] for role, t in zip(roles, prog.instrs[0].args)}
        self.of_tensor = [TL[d] for d in dtypes]

    def load(self, role, text):
        return text if self.of_role[role] == self.cdt else f"{text}.to({self.cdt})"

    def store(self, t, text):
        return text if self.of_tensor[t] == self.cdt else f"({text}).to({self.of_tensor[t]})"


def _window_load(p, ptr, st, base, starts, kk, out, fill, outer_mask, ty):
    """Lines loading the data at window position ``kk`` (flat) of windows starting at
    ``starts``: coordinates ``h{i}``, the mask ``inb`` and the value ``out``."""
    nd = len(p["kernel"])
    lines, ks = split_index(kk, [f"k{i}" for i in range(nd)], p["kernel"])
    hs, masks = [], [outer_mask]
    for i in range(nd):
        lines.append(f"h{i} = {starts[i]}" + (f" + {ks[i]}" if ks[i] != "0" else ""))
        masks.append(f"(h{i} >= 0) & (h{i} < {p['x'][2 + i]})")
        hs.append(f"h{i}")
    lines.append(f"inb = {' & '.join(masks)}")
    address = " + ".join(t for t in (base, _offset(hs, st[2:])) if t != "0") or "0"
    lines.append(f"{out} = " + ty.load("x", f"tl.load({ptr} + {address}, mask=inb, other={fill})"))
    return lines


def _count_expr(p, starts):
    """avg's divisor of the windows starting at ``starts`` (mxnet's clipping)."""
    nd = len(p["kernel"])
    if all(len(set(c)) == 1 for c in p["counts"]):
        return lit(prod(c[0] for c in p["counts"]))
    factors = []
    for i in range(nd):
        x, k, pad = p["x"][2 + i], p["kernel"][i], p["pad"][i]
        lo, hi = (-pad, x + pad) if p["include_pad"] else (0, x)
        factors.append(f"(tl.minimum({starts[i]} + {k}, {hi}) - tl.maximum({starts[i]}, {lo}))")
    return " * ".join(factors) + " * 1.0"


def _lp_root(p, v):
    return {1: v, 2: f"tl.sqrt({v})",
            3: f"tl.where({v} < 0, -1.0, 1.0) * tl.exp(tl.log(tl.abs({v})) / 3.0)"}[p["p"]]


def _lp_pow(p, v):
    return {1: v, 2: f"{v} * {v}", 3: f"{v} * {v} * {v}"}[p["p"]]


def _forward_lines(p, ptr, st, ty):
    nd = len(p["kernel"])
    y = p["y"]
    lines, (n, c, *os_) = split_index("rm", ["n", "c"] + [f"o{i}" for i in range(nd)], y)
    os_ = _tensor_coords(lines, os_)
    base = _offset([n, c], st["x"][:2])
    starts = []
    for i in range(nd):
        lines.append(f"w{i} = {index_sum([(os_[i], p['stride'][i])])} - {p['pad'][i]}")
        starts.append(f"w{i}")
    fill = "float('-inf')" if p["type"] == "max" else "0.0"
    lines.append(f"acc = tl.zeros((BM, 1), {ty.cdt}) + {fill}")
    if p["type"] == "max":
        lines.append("bi = tl.zeros((BM, 1), tl.int32)")
    lines.append(f"for kk in range(0, {prod(p['kernel'])}):")
    body = _window_load(p, ptr["x"], st["x"], base, starts, "kk", "v", fill, "mrow", ty)
    if p["type"] == "max":    # strict: the first maximum stays (mxnet skips NaN)
        body += ["take = v > acc", "acc = tl.where(take, v, acc)", "bi = tl.where(take, kk, bi)"]
    elif p["type"] == "lp":
        body.append(f"acc += {_lp_pow(p, 'v')}")
    else:
        body.append("acc += v")
    lines += ["    " + ln for ln in body]
    if p["type"] == "avg":
        lines.append(f"acc = acc / ({_count_expr(p, starts)})")
    elif p["type"] == "lp":
        lines.append(f"acc = {_lp_root(p, 'acc')}")
    return lines, [n, c, *os_], ["acc", f"bi.to({ty.cdt})"]


def _backward_lines(p, ptr, st, ty):
    nd = len(p["kernel"])
    x, y = p["x"], p["y"]
    k, s, pad = p["kernel"], p["stride"], p["pad"]
    lines, (n, c, *xs) = split_index("rm", ["n", "c"] + [f"x{i}" for i in range(nd)], x)
    xs = _tensor_coords(lines, xs)
    cands = [-(-k[i] // s[i]) for i in range(nd)]
    for i in range(nd):
        shifted = xs[i] if pad[i] == 0 else f"({xs[i]} + {pad[i]})"
        lines.append(f"q{i} = {shifted} // {s[i]}" if s[i] > 1 else f"q{i} = {shifted}")
    if p["type"] == "lp" and p["p"] > 1:
        lines.append("xv = " + ty.load("x", f"tl.load({ptr['x']} + {_offset([n, c, *xs], st['x'])}, "
                                          f"mask=mrow, other=0.0)"))
    lines.append(f"acc = tl.zeros((BM, 1), {ty.cdt})")
    lines.append(f"for jj in range(0, {prod(cands)}):")
    body, js = split_index("jj", [f"j{i}" for i in range(nd)], cands)
    oks, starts, rel = ["mrow"], [], []
    for i in range(nd):
        body.append(f"o{i} = q{i}" + (f" - {js[i]}" if js[i] != "0" else ""))
        body.append(f"w{i} = {index_sum([(f'o{i}', s[i])])} - {pad[i]}")
        body.append(f"r{i} = {xs[i]} - w{i}")        # the position inside window o
        oks.append(f"(o{i} >= 0) & (o{i} < {y[2 + i]}) & (r{i} < {k[i]})")
        starts.append(f"w{i}")
        rel.append(f"r{i}")
    body.append(f"ok = {' & '.join(oks)}")
    at = [n, c] + [f"o{i}" for i in range(nd)]
    body.append("g = " + ty.load("dy", f"tl.load({ptr['dy']} + {_offset(at, st['dy'])}, mask=ok, "
                                      f"other=0.0)"))
    if p["type"] == "avg":
        # g is 0 outside; the count of a window that does not exist may be 0 or less
        body.append(f"acc += g / tl.maximum({_count_expr(p, starts)}, 1.0)")
    elif p["type"] == "sum" or (p["type"] == "lp" and p["p"] == 1):
        body.append("acc += g")
    elif p["type"] == "lp":
        body.append("yv = " + ty.load("y", f"tl.load({ptr['y']} + {_offset(at, st['y'])}, mask=ok, "
                                           f"other=1.0)"))
        body.append("acc += g * xv / yv" if p["p"] == 2 else "acc += g * xv * xv / (yv * yv)")
    else:   # max: the gradient goes where window o's mask says its first maximum is
        body.append("m = " + ty.load("mask", f"tl.load({ptr['mask']} + {_offset(at, st['mask'])}, "
                                             f"mask=ok, other=-1.0)"))
        me = index_sum([(rel[i], prod(k[i + 1:])) for i in range(nd)])
        body.append(f"acc += tl.where(ok & (m == ({me}).to({ty.cdt})), g, 0.0)")
    lines += ["    " + ln for ln in body]
    return lines, [n, c, *xs], ["acc"]


def _round_half_away(v):
    """C's ``round`` (half away from zero), as an int32 tensor."""
    return f"tl.where({v} >= 0, tl.floor({v} + 0.5), -tl.floor(0.5 - {v})).to(tl.int32)"


def _roi_forward_lines(p, ptr, st, ty):
    """Per output (roi r, channel c, bin i, j): the roi's corners, its bin (mxnet's float32
    floor / ceil), then a scan of the bin, rows then columns, keeping the first maximum.
    The scan's trip counts are the largest bin of the program's tile."""
    n_, ch, height, width = p["x"]
    ph, pw = p["pooled"]
    lines, coords = split_index("rm", ["r", "c", "i", "j"], p["y"])
    r, c, i, j = _tensor_coords(lines, coords)
    lines.append(f"rb = {ptr['rois']} + {index_sum([(r, st['rois'][0])])}")
    lines.append("bi = tl.load(rb, mask=mrow, other=0.0).to(tl.int32)")
    for k, name in enumerate(("sw", "sh", "ew", "eh")):
        v = ty.load("rois", f"tl.load(rb + {(k + 1) * st['rois'][1]}, mask=mrow, other=0.0)")
        v = f"{v} * {p['scale']!r}"
        lines.append(f"{name}f = {v}")
        lines.append(f"{name} = {_round_half_away(f'{name}f')}")
    for axis, pos, start, end, n, size in (("h", i, "sh", "eh", ph, height),
                                           ("w", j, "sw", "ew", pw, width)):
        lines.append(f"b{axis} = tl.maximum({end} - {start} + 1, 1).to(tl.float32) / {float(n)!r}")
        lines.append(f"{axis}s = tl.minimum(tl.maximum(tl.floor({pos}.to(tl.float32) * b{axis})"
                     f".to(tl.int32) + {start}, 0), {size})")
        lines.append(f"{axis}e = tl.minimum(tl.maximum(tl.ceil(({pos} + 1).to(tl.float32) * "
                     f"b{axis}).to(tl.int32) + {start}, 0), {size})")
        lines.append(f"m{axis} = tl.max(tl.max(tl.where(mrow, {axis}e - {axis}s, 0), axis=1), "
                     f"axis=0)")
    lines.append(f"acc = tl.zeros((BM, 1), {ty.cdt}) - {FLT_MAX!r}")
    lines.append("ai = tl.zeros((BM, 1), tl.float32) - 1.0")
    base = index_sum([("bi", st["x"][0]), (c, st["x"][1])])
    lines.append("for dh in range(0, mh):")
    lines.append("    h = hs + dh")
    lines.append("    for dw in range(0, mw):")
    lines.append("        w = ws + dw")
    lines.append("        inb = mrow & (h < he) & (w < we)")
    hw = index_sum([("h", st["x"][2]), ("w", st["x"][3])])
    lines.append("        v = " + ty.load("x", f"tl.load({ptr['x']} + {base} + {hw}, mask=inb, "
                                             f"other=float('-inf'))"))
    lines.append("        take = inb & (v > acc)")
    lines.append("        acc = tl.where(take, v, acc)")
    lines.append(f"        ai = tl.where(take, (h * {width} + w).to(tl.float32), ai)")
    lines.append("empty = (he <= hs) | (we <= ws)")
    lines.append("acc = tl.where(empty, 0.0, acc)")
    lines.append("ai = tl.where(empty, -1.0, ai)")
    return lines, [r, c, i, j], ["acc", "ai"]


def _roi_backward_lines(p, ptr, st, ty):
    """Per data position: the output gradients of every (roi, bin) whose maximum it was
    (maxidx == h * W + w, in the roi's image), a gather over rois and bins."""
    _, _, height, width = p["x"]
    ph, pw = p["pooled"]
    lines, coords = split_index("rm", ["b", "c", "h", "w"], p["x"])
    b, c, h, w = _tensor_coords(lines, coords)
    lines.append(f"me = ({index_sum([(h, width), (w, 1)])}).to(tl.float32)")
    lines.append(f"acc = tl.zeros((BM, 1), {ty.cdt})")
    lines.append(f"for kk in range(0, {p['rois'][0] * ph * pw}):")
    body, (r, i, j) = split_index("kk", ["r", "i", "j"], (p["rois"][0], ph, pw))
    body.append(f"rbatch = tl.load({ptr['rois']} + {index_sum([(r, st['rois'][0])])}).to(tl.int32)")
    at = [r, c, i, j]
    body.append("m = " + ty.load("idx", f"tl.load({ptr['idx']} + {_offset(at, st['idx'])}, "
                                        f"mask=mrow, other=-1.0)"))
    body.append("g = " + ty.load("dy", f"tl.load({ptr['dy']} + {_offset(at, st['dy'])}, mask=mrow, "
                                       f"other=0.0)"))
    body.append(f"acc += tl.where((rbatch == {b}) & (m == me), g, 0.0)")
    lines += ["    " + ln for ln in body]
    return lines, [b, c, h, w], ["acc"]


_MODES = {"pool_fwd": _forward_lines, "pool_bwd": _backward_lines,
          "roi_fwd": _roi_forward_lines, "roi_bwd": _roi_backward_lines}


def render_pool(prog: TileProgram, strides: list, shapes: list) -> Rendered:
    """Triton source of a pooling tile program (``templates/pool.py.j2``): values loaded
    into the compute dtype, stored in each output's own."""
    ins = prog.instrs[0]
    p = ins.extra
    roles = p["roles"][:len(ins.args)]
    ptr = {role: f"p{t}_0" for role, t in zip(roles, ins.args)}
    st = {role: strides[t][0] for role, t in zip(roles, ins.args)}
    ty = _Types(prog, roles)
    lines, coords, values = _MODES[p["mode"]](p, ptr, st, ty)
    for k, i in enumerate(p["stored"]):          # the node's outputs it writes, in order
        out_t = len(ins.args) + k
        value = ty.store(out_t, values[i])
        for dst, dst_strides in enumerate(strides[out_t]):
            lines.append(f"tl.store(p{out_t}_{dst} + {_offset(coords, dst_strides)}, {value}, "
                         f"mask=mrow)")
    params = [(t, dst) for t in range(len(prog.tensors)) for dst in range(len(strides[t]))]
    m = prod(prog.domain)
    dtypes = prog.dtypes or ["float32"] * len(prog.tensors)
    kv = {"params": ", ".join(f"p{t}_{dst}" for t, dst in params), "summary": summary(p),
          "M": m, "body_lines": lines, "pointers": " ".join(dtypes[t] for t, _ in params)}
    source = environment.get_template("pool.py.j2").render(k=kv)
    return Rendered(source, params, m, 1, 0, "pointwise")
