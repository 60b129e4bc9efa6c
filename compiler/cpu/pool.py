"""Pooling kernels for the ``cpu`` target: ATen's pooling on explicitly padded data.

The program is ``compiler/ir/pool.py``'s. The data is padded explicitly
(with -inf or 0, the right side as far as mxnet's convention reaches), so every
convention is a floor-mode pooling without padding: ``max_pool{2,3}d_with_indices``
(ATen keeps the first maximum; its indices into the padded plane are the cpu target's
mask) and its backward, ``avg_pool{2,3}d`` with ``divisor_override=1`` (a window sum)
times mxnet's per-position reciprocal counts, and its backward, each writing its
destination (``out=``). 1-D pooling runs as 2-D with a unit height. A mask is read only
by the gradient kernel of the same Program, so each target keeps its own encoding.

2-D pooling of ``CHANNELS_LAST_MIN`` channels or more runs on channels-last copies:
ATen's NCHW pooling kernels walk each plane's windows one element at a time, its
channels-last ones vectorise over the channels. The padded channels-last input is a
buffer of the launch whose border is filled once, when the launch is bound; each run
copies the data into its interior (one copy, where ``constant_pad_nd`` and a layout
change were two). Max pooling's backward stays NCHW (its channels-last kernel is
2-4x slower there).

ROIPooling's bins are torch index math over all rois and each bin one masked max.
"""
from __future__ import annotations

from ..ir.dtypes import TORCH
from ..ir.pool import summary
from ..ir.rendering import Rendered
from ..ir.tile_program import TileProgram
from ..ops.registry import lit, prod
from .source import kernel_source

# cpu target: 2-D pooling (max and avg forward, avg backward) of this many channels
# or more goes through ATen's channels-last kernels (below 8 its NCHW kernels are
# faster: 5x at one channel for max, 4x for avg)
CHANNELS_LAST_MIN = 8

__all__ = ["render_pool_cpu"]


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
    return _rendered(prog, strides, p, bind + more, body)


def _rendered(prog, strides, p, bind, body) -> Rendered:
    params = [(t, dst) for t in range(len(prog.tensors)) for dst in range(len(strides[t]))]
    names = [f"p{t}_{dst}" for t, dst in params]
    text = summary(p)
    source, consts = kernel_source(names, ", ".join(names), text, bind, body)
    return Rendered(source, params, prod(prog.domain), 1, 0, "pointwise", consts=consts,
                    summary=text)


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
        # the same over the d-D (unit-height) padded data
        self.interior_d = (":, " if nd == 1 else "") + self.interior
        self.channels_last = d == 2 and p["x"][1] >= CHANNELS_LAST_MIN

    def padded_data(self, src, fill):
        if self.padded:
            return f"xp = torch.constant_pad_nd({src}, {self.pads}, {fill}){self.unit}"
        return f"xp = {src}{self.unit}"


_CL = "memory_format=torch.channels_last"


def _cpu_forward(p, g, dt):
    bind, rc = _rc_lines(p, dt) if p["type"] == "avg" else ([], None)
    src = "x" if p["type"] != "lp" or p["p"] == 1 else f"x.pow({p['p']})"
    fill = "float('-inf')" if p["type"] == "max" else "0.0"
    if g.channels_last:
        return _cpu_forward_channels_last(p, g, dt, bind, rc, src, fill)
    body = [g.padded_data(src, fill)]
    if p["type"] == "max":
        bind.append(f"max_pool_out = torch.ops.aten.max_pool{g.d}d_with_indices.out")
        bind.append(f"idx = torch.empty({g.y_shape}, dtype=torch.int64)")
        body.append(f"max_pool_out(xp, {g.geo}, {[1] * g.d}, False, out=w0, indices=idx)")
        return bind, body
    bind.append(f"sum_pool_out = torch.ops.aten.avg_pool{g.d}d.out")
    body.append(f"sum_pool_out(xp, {g.geo}, False, True, 1, out=w0)")   # window sums
    return bind, body + _from_window_sums(p, rc, "w0")


def _from_window_sums(p, rc, sums):
    """run() lines making the pooling's value in ``w0`` from the window sums in ``sums``
    (``w0`` itself: in place)."""
    if p["type"] == "avg":
        return [f"torch.mul({sums}, {rc}, out=w0)"]
    if p["type"] == "lp" and p["p"] == 2:
        return [f"torch.sqrt({sums}, out=w0)"]
    lines = [] if sums == "w0" else [f"w0.copy_({sums})"]
    if p["type"] == "lp" and p["p"] == 3:
        lines.append("w0.copy_(w0.sign() * w0.abs().pow_(1.0 / 3.0))")
    return lines


def _cpu_forward_channels_last(p, g, dt, bind, rc, src, fill):
    """:func:`_cpu_forward` on channels-last copies (module doc): the same values, and
    for max pooling the same indices (into each NCHW plane). With the copies in and
    out it is 3-5x faster from 8 channels up, one thread or two (LeNet's first max
    pooling: 4.6 ms -> 1.5 ms on one thread; Inception-BN's 3x3 average poolings of
    576 channels at 14 x 14: 1.26 -> 0.22 ms)."""
    bind += [f"xcl = torch.empty({g.xp_shape}, dtype={dt}, {_CL}).fill_({fill})",
             f"xin = xcl[..., {g.interior_d}]" if g.padded else "xin = xcl",
             f"ycl = torch.empty({g.y_shape}, dtype={dt}, {_CL})"]
    body = [f"xin.copy_({src}{g.unit})"]       # the border keeps its fill
    if p["type"] == "max":
        bind += [f"max_pool_out = torch.ops.aten.max_pool{g.d}d_with_indices.out",
                 f"idx = torch.empty({g.y_shape}, dtype=torch.int64, {_CL})"]
        body += [f"max_pool_out(xcl, {g.geo}, [1, 1], False, out=ycl, indices=idx)",
                 "w0.copy_(ycl)"]
        return bind, body
    bind.append(f"sum_pool_out = torch.ops.aten.avg_pool{g.d}d.out")
    body.append(f"sum_pool_out(xcl, {g.geo}, False, True, 1, out=ycl)")   # window sums
    return bind, body + _from_window_sums(p, rc, "ycl")


def _avg_gradient(p, g, dy, rc):
    """The window sums' incoming gradient of an avg, sum or lp pooling (an expression)."""
    if p["type"] == "lp":
        y = f"y{g.unit}"
        return {1: dy, 2: f"{dy} / {y}", 3: f"{dy} / ({y} * {y})"}[p["p"]]
    return {"avg": f"{dy} * {rc}", "sum": dy}[p["type"]]


def _cpu_backward(p, g, dt):
    bind, rc = _rc_lines(p, dt) if p["type"] == "avg" else ([], None)
    dy, body = f"dy{g.unit}", []
    if g.channels_last and p["type"] != "max":
        return _cpu_backward_channels_last(p, g, dt, bind, rc, dy)
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
        body.append(f"unpool({_avg_gradient(p, g, dy, rc)}, shape_of_xp, {g.geo}, False, "
                    f"True, 1, grad_input={target})")
    if g.padded:
        body.append(f"w0.copy_(dxp[..., {g.interior}])")
    return bind, body + _lp_chain(p, g)


def _lp_chain(p, g):
    """The lp pooling's gradient: the window sums' times the derivative of x ** p."""
    if p["type"] == "lp" and p["p"] > 1:
        return [f"w0.mul_({'x' if p['p'] == 2 else 'x * x'}{g.unit})"]
    return []


def _cpu_backward_channels_last(p, g, dt, bind, rc, dy):
    """:func:`_cpu_backward` of an avg, sum or lp pooling on channels-last copies
    (Inception-BN's 3x3 average poolings of 576 channels at 14 x 14: 1.10 -> 0.27 ms)."""
    bind += [f"unpool = torch.ops.aten.avg_pool{g.d}d_backward.grad_input",
             f"dycl = torch.empty({g.y_shape}, dtype={dt}, {_CL})",
             f"dxcl = torch.empty({g.xp_shape}, dtype={dt}, {_CL})",
             f"shape_of_xp = torch.empty({g.xp_shape}, dtype={dt}, {_CL})"]  # shape, layout
    if p["type"] == "avg":
        body = [f"torch.mul({dy}, {rc}, out=dycl)"]
    else:
        body = [f"dycl.copy_({_avg_gradient(p, g, dy, rc)})"]
    body += [f"unpool(dycl, shape_of_xp, {g.geo}, False, True, 1, grad_input=dxcl)",
             f"w0.copy_(dxcl[..., {g.interior_d}])" if g.padded else "w0.copy_(dxcl)"]
    return bind, body + _lp_chain(p, g)


def _render_roi_cpu(prog, strides, shapes):
    p = prog.instrs[0].extra
    cdt = TORCH[prog.compute_dtype]
    bind, views, widened = _cpu_views(prog, strides, shapes, cdt)
    outs = [[v for v in views if v[0] == "o"], [v for v in views if v[0] == "i"]]
    more, body = _roi_cpu(p, outs, cdt)
    body = widened + body
    return _rendered(prog, strides, p, bind + more, body)
