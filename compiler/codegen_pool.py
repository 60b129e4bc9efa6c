"""Pooling kernels: the tile program of a pooling node and its two lowerings.

A ``Pooling`` or ``_pool_grad`` node (``compiler/ops/pool.py``) is a kernel group of its
own, as ``scatter_add`` is: no other node joins it. Its tile program holds one ``pool``
instruction whose ``extra`` is :func:`~compiler.ops.pool.pool_problem`.

* Triton (``templates/pool.py.j2``): a pointwise kernel's ``[BM, 1]`` column over the
  flat output (forward) or data (gradient). The forward loops over the window's
  positions, masked outside the data; max pooling also writes, when a gradient reads
  it, the window position of the first maximum (the hidden ``mask`` output). The
  gradient is a gather, without atomics: each data position loops over the at most
  ``ceil(k / s)`` windows per dim that hold it and adds their output gradient (divided
  by the window's count for ``avg``; for ``max`` only where the window's mask names its
  own position, mxnet's rule: ``unpool`` routes to the first maximum).
* cpu: ATen's pooling on the data padded explicitly (``constant_pad_nd`` with -inf or
  0, the right side as far as mxnet's convention reaches), so every convention is a
  floor-mode pooling without padding: ``max_pool{2,3}d_with_indices`` (ATen keeps the
  first maximum; its indices into the padded plane are the cpu target's mask) and its
  backward, ``avg_pool{2,3}d`` with ``divisor_override=1`` (a window sum) times mxnet's
  per-position reciprocal counts, and its backward, each writing its destination
  (``out=``). 1-D pooling runs as 2-D with a unit height. A mask is read only by the
  gradient kernel of the same Program, so each target keeps its own encoding.

ROIPooling (``roi_fwd`` / ``roi_bwd``) shares the family: its forward scans each bin
(trip counts: the largest bin of the program's tile) and writes the output and mxnet's
hidden ``maxidx``; its gradient gathers, per data position, the output gradients of every
(roi, bin) whose ``maxidx`` names it (a loop over rois x bins, no atomics). On the cpu
target the bins are torch index math over all rois and each bin one masked max.
"""
from __future__ import annotations

from .codegen import Rendered, _env
from .codegen_conv import index_sum, split_index
from .dtypes import TL, TORCH
from .kernel_ir import Instr, NotFusable, Store, TileProgram, _special
from .ops.pool import _FLT_MAX, POOL_KINDS, ROI_KINDS, pool_problem, roi_problem
from .ops.registry import lit, prod

# cpu target: 2-D max pooling of this many channels or more goes through ATen's
# channels-last kernel (below 8 its NCHW kernel is faster: 5x at one channel)
CHANNELS_LAST_MIN = 8

__all__ = ["POOL_KINDS", "pool_program", "render_pool", "render_pool_cpu"]


def pool_program(graph, nodes, outside_uses) -> TileProgram:
    """The tile program of a group holding one pooling node alone.

    Raises
    ------
    NotFusable
        When the group holds anything besides the pooling node.
    """
    if len(nodes) != 1:
        raise NotFusable("pooling stands alone")
    n = next(iter(nodes))
    if _special(graph, n) not in POOL_KINDS:
        raise NotFusable("not a pooling node")
    d = graph.node(n)
    ins = list(graph.inputs(n))
    in_shapes = [graph.shape(e) for e in ins]
    if _special(graph, n) in ROI_KINDS:
        problem = roi_problem(d["op"], d["attrs"], in_shapes, d["shapes"])
    else:
        problem = pool_problem(d["op"], d["attrs"], in_shapes, d["shapes"][0])
    stored = tuple(i for i in range(len(d["shapes"])) if i == 0 or (n, i) in outside_uses)
    problem = dict(problem, stored=stored)   # a mask or maxidx no gradient reads: not stored
    domain = tuple(d["shapes"][0])
    nd = len(domain)
    outs = [(n, i) for i in stored]
    instrs = [Instr("pool", "v1", tuple(range(len(ins))),
                    varies=frozenset(p for p in range(nd) if domain[p] > 1), extra=problem)]
    stores = [Store("v1", len(ins) + i, tuple((j, j) for j in range(nd)))
              for i in range(len(outs))]
    return TileProgram("pool", domain, (), tuple(range(nd)), (), instrs, stores,
                       ins + outs, ["in"] * len(ins) + ["out"] * len(outs), False,
                       frozenset([n]))


def summary(p: dict) -> str:
    """The kernel's comment line: a pointwise kernel over the flat output or data, which
    is how ``compiler/cubin.py`` reads its tiles."""
    if p["type"] == "roi":
        m = prod(p["y"] if p["mode"] == "roi_fwd" else p["x"])
        what = "forward" if p["mode"] == "roi_fwd" else "data gradient"
        return (f"pointwise over domain ({m},): ROI max pooling {what}, x {p['x']} "
                f"rois {p['rois']} pooled {p['pooled']} spatial_scale {p['scale']!r}")
    nd = len(p["kernel"])
    m = prod(p["y"] if p["mode"] == "pool_fwd" else p["x"])
    what = "forward" if p["mode"] == "pool_fwd" else "data gradient"
    kind = p["type"] + (str(p["p"]) if p["type"] == "lp" else "")
    return (f"pointwise over domain ({m},): {nd}-D {kind} pooling {what}, x {p['x']} "
            f"y {p['y']} kernel {p['kernel']} stride {p['stride']} pad {p['pad']}")


# ------------------------------------------------------------------------------ Triton

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
    lines.append(f"acc = tl.zeros((BM, 1), {ty.cdt}) - {_FLT_MAX!r}")
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
    source = _env.get_template("pool.py.j2").render(k=kv)
    return Rendered(source, params, m, 1, 0, "pointwise")


# ------------------------------------------------------------------------------ cpu

def _pads(p):
    """``constant_pad_nd``'s list (last dim first) and the padded spatial sizes."""
    nd = len(p["kernel"])
    pads, sizes = [], []
    for i in range(nd):
        x, k, s, pad, y = p["x"][2 + i], p["kernel"][i], p["stride"][i], p["pad"][i], \
            p["y"][2 + i]
        right = max(0, (y - 1) * s + k - x - pad)
        pads.append((pad, right))
        sizes.append(x + pad + right)
    return [v for pr in reversed(pads) for v in pr], sizes


def _rc_lines(p, dt):
    """bind lines making ``rc``, avg's reciprocal counts over the output's spatial dims
    (a literal when every window counts the same), in the data's torch dtype ``dt``."""
    counts = p["counts"]
    nd = len(counts)
    if all(len(set(c)) == 1 for c in counts):
        return [], lit(1.0 / prod(c[0] for c in counts))
    lines = [f"rc = torch.ones((), dtype={dt})"]
    for i, c in enumerate(counts):
        shape = [len(c)] + [1] * (nd - 1 - i)
        lines.append(f"rc = rc * torch.tensor({[1.0 / v for v in c]}, dtype={dt})"
                     f".reshape({shape})")
    return lines, "rc"


def _roi_cpu(p, outs, cdt):
    """ROIPooling for the cpu target: the bins as torch index math over all rois, then one
    masked max per bin over the rois' images (columns first, then rows: the first
    maximum in mxnet's row-major scan); the gradient one ``index_put_`` that adds."""
    n_, ch, height, width = p["x"]
    ph, pw = p["pooled"]
    bind = [f"ar_h = torch.arange({height})", f"ar_w = torch.arange({width})"]
    if p["mode"] == "roi_bwd":
        bind.append(f"chan = torch.arange({ch}).reshape(1, {ch}, 1, 1)")
        bind.append(f"acc = torch.zeros({n_ * ch * height * width}, dtype={cdt})")
        dx = outs[0]
        body = ["bi = rois[:, 0].long().reshape(-1, 1, 1, 1)",
                f"flat = (bi * {ch} + chan) * {height * width} + idx.long()",
                "keep = idx >= 0",
                "acc.zero_()",
                "acc.index_put_((flat[keep],), dy[keep], accumulate=True)"]
        body += [f"{o}.copy_(acc.view({tuple(p['x'])}))" for o in dx]
        return bind, body
    body = [f"sc = rois[:, 1:5] * {p['scale']!r}",
            "cr = (sc.sign() * (sc.abs() + 0.5).floor()).long()",
            "xb = x[rois[:, 0].long()]"]
    for axis, a, b_, n, size in (("h", 1, 3, ph, height), ("w", 0, 2, pw, width)):
        body += [f"b{axis} = (cr[:, {b_}] - cr[:, {a}] + 1).clamp(min=1).float() / {float(n)!r}",
                 f"k{axis} = torch.arange({n}, dtype=torch.float32).reshape(1, {n})",
                 f"{axis}s = ((k{axis} * b{axis}[:, None]).floor().long() + cr[:, {a}:{a + 1}])"
                 f".clamp(0, {size})",
                 f"{axis}e = (((k{axis} + 1) * b{axis}[:, None]).ceil().long() + "
                 f"cr[:, {a}:{a + 1}]).clamp(0, {size})",
                 f"m{axis} = (ar_{axis} >= {axis}s[:, :, None]) & "
                 f"(ar_{axis} < {axis}e[:, :, None])"]
    y, idx = outs[0], outs[1]
    body += [f"for i in range({ph}):",
             f"    for j in range({pw}):",
             "        v = xb.masked_fill(~(mh[:, i, None, :, None] & mw[:, j, None, None, :]), "
             "float('-inf'))",
             "        vw, iw = v.max(3)",
             "        vh, ih = vw.max(2)",
             "        iw = iw.gather(2, ih[:, :, None])[:, :, 0]",
             "        empty = ((he[:, i] <= hs[:, i]) | (we[:, j] <= ws[:, j]))[:, None]"]
    body += [f"        {o}[:, :, i, j] = torch.where(empty, 0.0, vh)" for o in y]
    body += [f"        {o}[:, :, i, j] = torch.where(empty, -1.0, (ih * {width} + iw).float())"
             for o in idx]
    return bind, body


def render_pool_cpu(prog: TileProgram, strides: list, shapes: list, slots: list) -> Rendered:
    """Python/ATen source of a pooling tile program for the cpu target: ATen writes the
    first destination itself (``out=`` / ``grad_input=``), others copy it."""
    ins = prog.instrs[0]
    p = ins.extra
    if p["type"] == "roi":
        return _render_roi_cpu(prog, strides, shapes)
    cdt = TORCH[prog.compute_dtype]
    bind, views, widened = _cpu_views(prog, strides, shapes, cdt)
    g = _CpuGeometry(p)
    out_t = len(ins.args)
    if _torch_dtype(prog, out_t) == cdt:
        bind.append(f"w0 = o0{g.unit}")          # the destination as ATen's d-D tensor
    else:   # float16 / bfloat16: pooled in float32 (as the Triton kernel), stored narrow
        bind.append(f"t0 = torch.empty({tuple(shapes[out_t])}, dtype={cdt})")
        bind.append(f"w0 = t0{g.unit}")
    more, body = (_cpu_forward if p["mode"] == "pool_fwd" else _cpu_backward)(p, g, cdt)
    body = widened + body
    if _torch_dtype(prog, out_t) != cdt:
        body.append("o0.copy_(t0)")
    if "m0" in views:   # max pooling's mask: ATen's flat index in the padded plane
        body.append(f"m0.copy_(idx{'.squeeze(2)' if g.unit else ''})")
    body += [f"{v}.copy_({v[0]}0)" for v in views if v[1:] != "0"]
    params = [(t, dst) for t in range(len(prog.tensors)) for dst in range(len(strides[t]))]
    source = _env.get_template("cpu_kernel.py.j2").render(k={
        "params": ", ".join(f"p{t}_{dst}" for t, dst in params), "summary": summary(p),
        "bind_lines": bind + more, "body_lines": body})
    return Rendered(source, params, prod(prog.domain), 1, 0, "pointwise")


def _torch_dtype(prog, t):
    return TORCH[prog.dtypes[t]] if prog.dtypes else "torch.float32"


def _cpu_views(prog, strides, shapes, cdt="torch.float32"):
    """bind lines viewing each tensor: inputs by role, destination ``d`` of the output
    as ``o<d>`` (max pooling's mask ``m<d>``, ROIPooling's maxidx ``i<d>``); the
    destinations' names; and the run() lines giving inputs stored in another dtype
    than ``cdt`` their role's name in ``cdt``."""
    ins = prog.instrs[0]
    p = ins.extra
    names = list(p["roles"][:len(ins.args)])
    names += [{"y": "o", "dx": "o", "mask": "m", "idx": "i"}[p["roles"][len(ins.args) + i]]
              for i in p["stored"]]
    bind, views, widened = [], [], []
    for t, name in enumerate(names):
        for dst, dst_strides in enumerate(strides[t]):
            view = name if t < len(ins.args) else f"{name}{dst}"
            if t < len(ins.args) and _torch_dtype(prog, t) != cdt:
                widened.append(f"{view} = {view}_stored.to({cdt})")
                view = f"{view}_stored"
            bind.append(f"{view} = p{t}_{dst}.as_strided({tuple(shapes[t])}, "
                        f"{tuple(dst_strides)})")
            if t >= len(ins.args):
                views.append(view)
    return bind, views, widened


class _CpuGeometry:
    """What the ATen calls of a pooling take: 1-D as 2-D with a unit height (``unit``
    views), the explicit padding (``pads``) and the padded data's shape."""

    def __init__(self, p):
        nd = len(p["kernel"])
        self.d = d = max(nd, 2)
        self.unit = ".unsqueeze(2)" if nd == 1 else ""
        kernel = [1] * (d - nd) + list(p["kernel"])
        stride = [1] * (d - nd) + list(p["stride"])
        self.geo = f"{kernel}, {stride}, {[0] * d}"
        self.pads, sizes = _pads(p)
        self.padded = any(self.pads)
        self.xp_shape = tuple(p["x"][:2]) + (1,) * (d - nd) + tuple(sizes)
        self.y_shape = tuple(p["y"][:2]) + (1,) * (d - nd) + tuple(p["y"][2:])
        self.interior = ", ".join(f"{p['pad'][i]}:{p['pad'][i] + p['x'][2 + i]}"
                                  for i in range(nd))

    def padded_data(self, src, fill):
        if self.padded:
            return f"xp = torch.constant_pad_nd({src}, {self.pads}, {fill}){self.unit}"
        return f"xp = {src}{self.unit}"


def _cpu_forward(p, g, dt):
    bind, rc = _rc_lines(p, dt) if p["type"] == "avg" else ([], None)
    src = "x" if p["type"] != "lp" or p["p"] == 1 else f"x.pow({p['p']})"
    body = [g.padded_data(src, "float('-inf')" if p["type"] == "max" else "0.0")]
    if p["type"] == "max":
        bind.append(f"max_pool_out = torch.ops.aten.max_pool{g.d}d_with_indices.out")
        if g.d == 2 and p["x"][1] >= CHANNELS_LAST_MIN:
            # ATen's NCHW max pooling walks each plane's windows one element at a
            # time; its channels-last kernel vectorises over the channels. With the
            # copy in and out it is 3-4.5x faster from 8 channels up, one thread or
            # two (LeNet's first pooling: 4.6 ms -> 1.5 ms on one thread), and gives
            # the same values and the same indices (into each NCHW plane).
            cl = "memory_format=torch.channels_last"
            bind += [f"xcl = torch.empty({g.xp_shape}, dtype={dt}, {cl})",
                     f"ycl = torch.empty({g.y_shape}, dtype={dt}, {cl})",
                     f"idx = torch.empty({g.y_shape}, dtype=torch.int64, {cl})"]
            body += ["xcl.copy_(xp)",
                     f"max_pool_out(xcl, {g.geo}, [1, 1], False, out=ycl, indices=idx)",
                     "w0.copy_(ycl)"]
            return bind, body
        bind.append(f"idx = torch.empty({g.y_shape}, dtype=torch.int64)")
        body.append(f"max_pool_out(xp, {g.geo}, {[1] * g.d}, False, out=w0, indices=idx)")
        return bind, body
    bind.append(f"sum_pool_out = torch.ops.aten.avg_pool{g.d}d.out")
    body.append(f"sum_pool_out(xp, {g.geo}, False, True, 1, out=w0)")   # window sums
    if p["type"] == "avg":
        body.append(f"w0.mul_({rc})")
    elif p["type"] == "lp" and p["p"] == 2:
        body.append("w0.sqrt_()")
    elif p["type"] == "lp" and p["p"] == 3:
        body.append("w0.copy_(w0.sign() * w0.abs().pow_(1.0 / 3.0))")
    return bind, body


def _cpu_backward(p, g, dt):
    bind, rc = _rc_lines(p, dt) if p["type"] == "avg" else ([], None)
    dy, body = f"dy{g.unit}", []
    target = "dxp" if g.padded else "w0"
    if g.padded:
        bind.append(f"dxp = torch.empty({g.xp_shape}, dtype={dt})")
    if p["type"] == "max":   # the forward's mask: ATen's indices into the padded plane
        bind += [f"unpool = torch.ops.aten.max_pool{g.d}d_with_indices_backward.grad_input",
                 f"shape_of_xp = torch.empty({g.xp_shape}, dtype={dt})"]    # its shape only
        body.append(f"unpool({dy}, shape_of_xp, {g.geo}, {[1] * g.d}, False, "
                    f"mask{g.unit}.long(), grad_input={target})")
    else:
        bind += [f"unpool = torch.ops.aten.avg_pool{g.d}d_backward.grad_input",
                 f"shape_of_xp = torch.empty({g.xp_shape}, dtype={dt})"]    # its shape only
        grad = {"avg": f"{dy} * {rc}", "sum": dy}.get(p["type"])
        if p["type"] == "lp":
            y = f"y{g.unit}"
            grad = {1: dy, 2: f"{dy} / {y}", 3: f"{dy} / ({y} * {y})"}[p["p"]]
        body.append(f"unpool({grad}, shape_of_xp, {g.geo}, False, True, 1, "
                    f"grad_input={target})")
    if g.padded:
        body.append(f"w0.copy_(dxp[..., {g.interior}])")
    if p["type"] == "lp" and p["p"] > 1:
        body.append(f"w0.mul_({'x' if p['p'] == 2 else 'x * x'}{g.unit})")
    return bind, body


def _render_roi_cpu(prog, strides, shapes):
    p = prog.instrs[0].extra
    cdt = TORCH[prog.compute_dtype]
    bind, views, widened = _cpu_views(prog, strides, shapes, cdt)
    outs = [[v for v in views if v[0] == "o"], [v for v in views if v[0] == "i"]]
    more, body = _roi_cpu(p, outs, cdt)
    body = widened + body
    params = [(t, dst) for t in range(len(prog.tensors)) for dst in range(len(strides[t]))]
    source = _env.get_template("cpu_kernel.py.j2").render(k={
        "params": ", ".join(f"p{t}_{dst}" for t, dst in params), "summary": summary(p),
        "bind_lines": bind + more, "body_lines": body})
    return Rendered(source, params, prod(prog.domain), 1, 0, "pointwise")
