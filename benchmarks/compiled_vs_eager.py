"""symtriton's compiled training step against PyTorch eager, in one process.

Two models, each trained one step at a time (forward + backward):

* ``mlp``:  MLP 784-512-512-10 (ReLU) + SoftmaxOutput, batch 32; the data
  gets no gradient.
* ``lstm``: one LSTM layer written with raw symbols (FullyConnected i2h/h2h,
  SliceChannel, sigmoid/tanh, elementwise), unrolled ``--seq-len`` steps
  sharing its weights, then Concat of all hidden states -> FullyConnected ->
  SoftmaxOutput (a language-model style head).

For each it prints a table of:

* launches per training step: fused kernel launches (forward + backward)
  against the operator count of the same graph unfused (one kernel per
  operator), and the ATen operators PyTorch eager dispatches for the step;
* bytes moved per step: fused launches against the unfused sum;
* compile seconds: cold (fresh cache directory), warm (a second
  ``compile_symbol`` in this process: memory hit), disk hit (memory cache
  cleared), and the per-pass timings of the cold compile;
* milliseconds per training step: median over ``--steps`` steps after
  warm-up, symtriton's Executor beside PyTorch eager (``torch.nn.functional``
  with the same weights and data), and the ratio.

* host overhead per launch: at tiny shapes (where the kernels' arithmetic is
  negligible) the training step time divided by its launches, for a small MLP
  and a small unrolled LSTM (the lowest of five medians: load on a shared
  machine only adds time).

``cpu()`` contexts run the ``cpu`` target (``SYMTRITON_CPU_TARGET=interpret``
measures Triton's interpreter instead). ``--quick`` uses tiny shapes (CI smoke
test).
"""
from __future__ import annotations

import argparse
import os
import platform
import statistics
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
if ROOT not in sys.path:
    sys.path.insert(0, ROOT)



def _early_threads(argv) -> int:
    """``--threads N`` (default 1), applied before torch and numpy load their
    thread pools: the shapes here are small, and OpenMP with 2 threads on a busy
    2-core machine slows small calls down several times."""
    from benchmarks.data import set_thread_env
    return set_thread_env(argv, 1)


_THREADS = _early_threads(sys.argv[1:]) if __name__ == "__main__" else None

import torch                                   # noqa: E402
import torch.nn.functional as F                # noqa: E402
from torch.utils._python_dispatch import TorchDispatchMode  # noqa: E402


# ---------------------------------------------------------------------------- models

def mlp_symbol(sym, hidden):
    net = sym.Variable("data")
    for i, width in enumerate(hidden, start=1):
        net = sym.FullyConnected(net, num_hidden=width, name=f"fc{i}")
        net = sym.Activation(net, act_type="relu", name=f"relu{i}")
    net = sym.FullyConnected(net, num_hidden=10, name=f"fc{len(hidden) + 1}")
    return sym.SoftmaxOutput(net, name="softmax")


def mlp_eager(p, data, label, hidden):
    h = data
    for i in range(1, len(hidden) + 1):
        h = F.relu(F.linear(h, p[f"fc{i}_weight"], p[f"fc{i}_bias"]))
    n = len(hidden) + 1
    z = F.linear(h, p[f"fc{n}_weight"], p[f"fc{n}_bias"])
    # SoftmaxOutput's gradient is softmax - onehot, summed over the batch
    return F.cross_entropy(z, label, reduction="sum")


def lstm_symbol(sym, seq_len, hidden, classes):
    data = sym.Variable("data")                          # (batch, seq_len, input)
    i2h_w, i2h_b = sym.Variable("i2h_weight"), sym.Variable("i2h_bias")
    h2h_w, h2h_b = sym.Variable("h2h_weight"), sym.Variable("h2h_bias")
    h, c = sym.Variable("init_h"), sym.Variable("init_c")
    xs = sym.SliceChannel(data, num_outputs=seq_len, axis=1, squeeze_axis=True, name="steps")
    outs = []
    for t in range(seq_len):
        x = xs[t] if seq_len > 1 else xs
        gates = (sym.FullyConnected(x, weight=i2h_w, bias=i2h_b, num_hidden=4 * hidden,
                                    name=f"t{t}_i2h")
                 + sym.FullyConnected(h, weight=h2h_w, bias=h2h_b, num_hidden=4 * hidden,
                                      name=f"t{t}_h2h"))
        sl = sym.SliceChannel(gates, num_outputs=4, name=f"t{t}_slice")
        in_gate = sym.Activation(sl[0], act_type="sigmoid")
        forget = sym.Activation(sl[1], act_type="sigmoid")
        cell_in = sym.Activation(sl[2], act_type="tanh")
        out_gate = sym.Activation(sl[3], act_type="sigmoid")
        c = forget * c + in_gate * cell_in
        h = out_gate * sym.Activation(c, act_type="tanh")
        outs.append(h)
    hs = sym.Concat(*outs, dim=0)                        # (seq_len * batch, hidden)
    pred = sym.FullyConnected(hs, num_hidden=classes, name="pred")
    return sym.SoftmaxOutput(pred, sym.Variable("softmax_label"), name="softmax")


def lstm_eager(p, data, label, seq_len):
    h, c = p["init_h"], p["init_c"]
    outs = []
    for t in range(seq_len):
        gates = (F.linear(data[:, t, :], p["i2h_weight"], p["i2h_bias"])
                 + F.linear(h, p["h2h_weight"], p["h2h_bias"]))
        i, f, g, o = gates.chunk(4, dim=1)
        c = torch.sigmoid(f) * c + torch.sigmoid(i) * torch.tanh(g)
        h = torch.sigmoid(o) * torch.tanh(c)
        outs.append(h)
    z = F.linear(torch.cat(outs, 0), p["pred_weight"], p["pred_bias"])
    return F.cross_entropy(z, label, reduction="sum")


# ---------------------------------------------------------------------------- helpers

class _CountOps(TorchDispatchMode):
    """Counts the ATen operators PyTorch eager dispatches (its kernel calls)."""

    def __init__(self):
        super().__init__()
        self.count = 0

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        self.count += 1
        return func(*args, **(kwargs or {}))


def _median_ms(fn, warmup, steps):
    for _ in range(warmup):
        fn()
    times = []
    for _ in range(steps):
        t0 = time.perf_counter()
        fn()
        times.append((time.perf_counter() - t0) * 1e3)
    return statistics.median(times)


def _fmt_bytes(n):
    for unit in ("B", "KB", "MB", "GB"):
        if abs(n) < 1024 or unit == "GB":
            return f"{n:.1f} {unit}" if unit != "B" else f"{n} B"
        n /= 1024.0


def run_model(name, title, symbol, input_shapes, labels_range, eager_fn, args):
    from compiler.artifacts import cache as ccache
    from compiler.artifacts.compile import compile_symbol
    from runtime.context import cpu

    no_grad = {"data", "softmax_label", "init_h", "init_c"}
    arg_names = symbol.list_arguments()
    grad_req = {n: ("null" if n in no_grad else "write") for n in arg_names}
    arg_shapes, _, _ = symbol.infer_shape(**input_shapes)
    shapes = {n: tuple(s) for n, s in zip(arg_names, arg_shapes)}   # as the Executor keys it

    # -- compile: cold, then warm (memory hit), then disk hit
    ccache.reset_cache_stats()
    t0 = time.perf_counter()
    prog = compile_symbol(symbol, shapes, True, grad_req, True)
    cold_s = time.perf_counter() - t0
    cold_stats = ccache.cache_stats()
    t0 = time.perf_counter()
    prog2 = compile_symbol(symbol, shapes, True, grad_req, True)
    warm_s = time.perf_counter() - t0
    ccache.clear_memory_cache()
    t0 = time.perf_counter()
    prog3 = compile_symbol(symbol, shapes, True, grad_req, True)
    disk_s = time.perf_counter() - t0
    after = ccache.cache_stats()
    assert prog2 is prog, "second compile_symbol did not hit the memory cache"
    assert cold_stats["compiles"] == 1 and after["compiles"] == 1 and after["disk_hits"] == 1, \
        f"unexpected cache behaviour: {after}"
    prog = prog3

    # -- bind (must hit the cache) and fill with the same values as the eager peer
    exe = symbol.simple_bind(cpu(), grad_req=grad_req, **input_shapes)
    assert ccache.cache_stats()["compiles"] == 1, "simple_bind compiled again"
    gen = torch.Generator().manual_seed(0)
    values = {}
    for n in arg_names:
        shape = shapes[n]
        if n == "softmax_label":
            v = torch.randint(0, labels_range, shape, generator=gen).float()
        elif n in ("init_h", "init_c") or n.endswith("_bias"):
            v = torch.zeros(shape)
        elif n == "data":
            v = torch.randn(shape, generator=gen)
        else:
            fan_out, fan_in = shape
            v = (torch.rand(shape, generator=gen) * 2 - 1) * (6.0 / (fan_in + fan_out)) ** 0.5
        exe.arg_dict[n].copy_(v)
        values[n] = v

    def sym_step():
        exe.forward(is_train=True)
        exe.backward()

    t0 = time.perf_counter()
    sym_step()
    first_ms = (time.perf_counter() - t0) * 1e3

    # -- the eager peer: same weights, same data
    leaves = {n: v.clone().requires_grad_(grad_req[n] == "write") for n, v in values.items()}
    data, label = leaves.pop("data"), leaves.pop("softmax_label").long()

    def eager_step():
        for t in leaves.values():
            t.grad = None
        eager_fn(leaves, data, label).backward()

    eager_step()
    # agreement check: symtriton's gradients against eager's, same step
    worst = max((exe.grad_dict[n] - leaves[n].grad).abs().max().item() /
                max(1e-6, leaves[n].grad.abs().max().item())
                for n in leaves if grad_req[n] == "write")
    with _CountOps() as counter:
        eager_step()
    eager_ops = counter.count

    sym_ms = _median_ms(sym_step, args.warmup, args.steps)
    eager_ms = _median_ms(eager_step, args.warmup, max(args.steps, args.eager_steps))

    st = prog.stats
    fused_f, fused_b = st["forward_launches"], st["backward_launches"]
    unf_f, unf_b = st["unfused_forward_ops"], st["unfused_backward_ops"]
    fused, unfused = fused_f + fused_b, unf_f + unf_b
    by, unf_by = st["bytes_per_step"], st["unfused_bytes_per_step"]

    rows = [
        ("launches / step", f"{fused} ({fused_f}+{fused_b})", f"{unfused} ({unf_f}+{unf_b})",
         "unfused ops", f"{fused / unfused:.2f}x"),
        ("", "", f"{eager_ops}", "eager ATen ops", f"{fused / max(1, eager_ops):.2f}x"),
        ("bytes moved / step", _fmt_bytes(by), _fmt_bytes(unf_by), "unfused sum",
         f"{by / unf_by:.2f}x"),
        ("compile (cold)", f"{cold_s:.3f} s", "-", "", ""),
        ("compile (warm, memory hit)", f"{warm_s * 1e3:.2f} ms", f"{cold_s:.3f} s", "cold compile",
         f"{warm_s / cold_s:.1e}x"),
        ("compile (disk hit)", f"{disk_s * 1e3:.2f} ms", f"{cold_s:.3f} s", "cold compile",
         f"{disk_s / cold_s:.1e}x"),
        ("ms / train step (median)", f"{sym_ms:.2f}", f"{eager_ms:.3f}", "PyTorch eager",
         f"{sym_ms / eager_ms:.1f}x"),
        ("ms first step (kernel load)", f"{first_ms:.1f}", "-", "", ""),
    ]
    print(f"\n== {name}: {title} ==")
    header = ("figure", "symtriton", "peer", "peer is", "ratio sym/peer")
    widths = [30, 16, 16, 16, 14]
    print("  ".join(h.ljust(w) for h, w in zip(header, widths)))
    print("  ".join("-" * w for w in widths))
    for r in rows:
        print("  ".join(str(c).ljust(w) for c, w in zip(r, widths)))
    passes = ", ".join(f"{k} {v:.3f}" for k, v in st["pass_seconds"].items())
    print(f"cold compile passes (s): {passes}")
    print(f"agreement: max relative gradient difference vs eager {worst:.1e}")
    # one machine-readable line per model (tests parse it)
    print(f"RESULT {name} fused_launches={fused} unfused_ops={unfused} eager_ops={eager_ops} "
          f"bytes={by} unfused_bytes={unf_by} compile_cold_s={cold_s:.4f} "
          f"compile_warm_s={warm_s:.6f} compile_disk_s={disk_s:.4f} sym_ms={sym_ms:.3f} "
          f"eager_ms={eager_ms:.4f} ratio={sym_ms / eager_ms:.2f} grad_rel_err={worst:.2e}")
    return worst


def host_overhead(sym, steps):
    """Microseconds per launch at tiny shapes: median step time / launches per step."""
    from runtime.context import cpu
    from runtime.launcher import LaunchCounter
    out = {}
    models = {"mlp": (mlp_symbol(sym, (16, 16)), {"data": (4, 16)}, 10),
              "lstm": (lstm_symbol(sym, 10, 8, 8), {"data": (2, 10, 8), "init_h": (2, 8),
                                                    "init_c": (2, 8),
                                                    "softmax_label": (20,)}, 8)}
    for name, (symbol, shapes, classes) in models.items():
        req = {n: ("null" if n in ("data", "softmax_label", "init_h", "init_c") else "write")
               for n in symbol.list_arguments()}
        exe = symbol.simple_bind(cpu(), grad_req=req, **shapes)
        exe.arg_dict["softmax_label"][:] = torch.randint(0, classes, exe.arg_dict[
            "softmax_label"].shape)

        def step():
            exe.forward(is_train=True)
            exe.backward()
        step()
        LaunchCounter.reset()
        step()
        launches = LaunchCounter.total
        # a shared machine only ever adds time: the lowest of several medians
        ms = min(_median_ms(step, 5, steps) for _ in range(5))
        out[name] = (ms * 1e3 / launches, launches, ms)
    return out


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--quick", action="store_true", help="tiny shapes, 2 steps (CI smoke)")
    ap.add_argument("--steps", type=int, default=None,
                    help="timed symtriton steps per model (default 5; --quick 2)")
    ap.add_argument("--eager-steps", type=int, default=50,
                    help="timed eager steps (at least --steps)")
    ap.add_argument("--warmup", type=int, default=1)
    ap.add_argument("--models", default="mlp,lstm", help="comma list of mlp, lstm")
    ap.add_argument("--batch", type=int, default=None, help="MLP batch (default 32)")
    ap.add_argument("--seq-len", type=int, default=None, help="LSTM steps (default 35)")
    ap.add_argument("--hidden", type=int, default=None, help="LSTM hidden size (default 64)")
    ap.add_argument("--lstm-batch", type=int, default=None, help="LSTM batch (default 8)")
    ap.add_argument("--threads", type=int, default=1,
                    help="torch / BLAS threads for both sides (default 1: the shapes are small)")
    ap.add_argument("--cache-dir", default=None,
                    help="kernel cache directory (default: a fresh temporary one, so the "
                         "cold compile is cold)")
    args = ap.parse_args(argv)

    torch.set_num_threads(args.threads)
    q = args.quick
    args.steps = args.steps or (2 if q else 5)
    if q:
        args.eager_steps = min(args.eager_steps, 10)
    mlp_hidden = (32, 32) if q else (512, 512)
    mlp_in = 64 if q else 784
    batch = args.batch or (8 if q else 32)
    seq_len = args.seq_len or (4 if q else 35)
    hidden = args.hidden or (16 if q else 64)
    lstm_batch = args.lstm_batch or (4 if q else 8)
    lstm_in, classes = hidden, 32

    os.environ["SYMTRITON_CACHE_DIR"] = args.cache_dir or tempfile.mkdtemp(prefix="symtriton-bench-")
    os.environ.pop("SYMTRITON_OFFLINE", None)
    from compiler import symbol as sym
    from runtime.context import cpu_target

    print("symtriton compiled training step vs PyTorch eager (same process)")
    print(f"machine: {platform.machine()} {os.cpu_count()}-core CPU; cpu() target "
          f"{cpu_target()}; torch {torch.__version__} ({torch.get_num_threads()} threads)")
    print(f"cache dir: {os.environ['SYMTRITON_CACHE_DIR']}; timed steps: symtriton {args.steps}, "
          f"eager {max(args.steps, args.eager_steps)}, warm-up {args.warmup}"
          f"{'; QUICK shapes' if q else ''}")

    models = [m.strip() for m in args.models.split(",") if m.strip()]
    worst = 0.0
    t_all = time.perf_counter()
    for m in models:
        if m == "mlp":
            title = (f"MLP {mlp_in}-{'-'.join(map(str, mlp_hidden))}-10 + SoftmaxOutput, "
                     f"batch {batch}")
            worst = max(worst, run_model(
                "mlp", title, mlp_symbol(sym, mlp_hidden), {"data": (batch, mlp_in)}, 10,
                lambda p, d, l: mlp_eager(p, d, l, mlp_hidden), args))
        elif m == "lstm":
            title = (f"LSTM unrolled {seq_len} steps, hidden {hidden}, input {lstm_in}, "
                     f"batch {lstm_batch}, FC {classes} + SoftmaxOutput over all steps")
            shapes = {"data": (lstm_batch, seq_len, lstm_in), "init_h": (lstm_batch, hidden),
                      "init_c": (lstm_batch, hidden), "softmax_label": (seq_len * lstm_batch,)}
            worst = max(worst, run_model(
                "lstm", title, lstm_symbol(sym, seq_len, hidden, classes), shapes, classes,
                lambda p, d, l: lstm_eager(p, d, l, seq_len), args))
        else:
            ap.error(f"unknown model {m!r}")
    ho = host_overhead(sym, 50 if q else 300)
    print("\n== host overhead per launch, tiny shapes (step / launches; best of 5 medians) ==")
    for name, (us, launches, ms) in ho.items():
        print(f"  {name}: {us:.1f} us per launch ({launches} launches, {ms * 1e3:.0f} us "
              f"per training step)")
    print("RESULT host_overhead " + " ".join(f"{n}_us_per_launch={v[0]:.2f}"
                                             for n, v in ho.items()))
    print(f"\ntotal benchmark time {time.perf_counter() - t_all:.1f} s")
    if worst > 1e-3:
        print(f"ERROR: symtriton's gradients differ from eager's (max relative {worst:.1e})",
              file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
