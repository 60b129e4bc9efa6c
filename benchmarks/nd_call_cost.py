"""Per-call cost of ``mx.nd`` operators against the same torch call (the cpu target).

    python benchmarks/nd_call_cost.py
    python benchmarks/nd_call_cost.py --calls 200 --rounds 3 --mxnet-python .mxnet-venv/bin/python

``mx.nd.X`` runs the registry entry compiled for the inputs' context
(``runtime/imperative.py``): a cached one-operator Program whose bound launches
are the generated ATen calls on the ``cpu`` target. Each row times one operator
on small arrays (where the per-call cost shows) as the best over ``--rounds``
(a shared machine only ever adds time) of the mean over ``--calls`` calls, the
``mx.nd`` and torch rounds alternating so that both meet the same load, after a warm-up call that compiles and binds:

* ``mx.nd``: the ``mx.nd`` call, result included (a new NDArray each call);
* ``torch``: the equivalent ATen call on plain tensors (eager PyTorch);
* ``above torch``: the difference, the price of ``mx.nd``'s dispatch;
* ``mxnet 1.9.1`` (with ``--mxnet-python``): the same ``mx.nd`` call under mxnet,
  ``wait_to_read`` included (its engine runs the call asynchronously).

One ``RESULT nd_call_cost op=...`` line per row for scripts.
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
if ROOT not in sys.path:
    sys.path.insert(0, ROOT)

# name: (shapes of the inputs, mx.nd call source, torch call source)
CASES = {
    "broadcast_add": ([(8, 16), (1, 16)], "nd.broadcast_add(a, b)", "torch.add(a, b)"),
    "relu": ([(8, 16)], "nd.relu(a)", "torch.relu(a)"),
    "sum axis=1": ([(8, 16)], "nd.sum(a, axis=1)", "torch.sum(a, dim=1)"),
    "softmax": ([(8, 16)], "nd.softmax(a)", "torch.softmax(a, dim=-1)"),
    "FullyConnected": ([(8, 16), (4, 16), (4,)], "nd.FullyConnected(a, b, c, num_hidden=4)",
                       "torch.addmm(c, a, b.t())"),
    "dot": ([(8, 16), (16, 4)], "nd.dot(a, b)", "torch.mm(a, b)"),
    "transpose": ([(8, 16)], "nd.transpose(a)", "a.t().contiguous()"),
    "slice_axis": ([(8, 16)], "nd.slice_axis(a, axis=1, begin=2, end=10)",
                   "a[:, 2:10].contiguous()"),
    "elemwise_mul 256x256": ([(256, 256), (256, 256)], "nd.elemwise_mul(a, b)",
                             "torch.mul(a, b)"),
}


def _round(fn, calls):
    t0 = time.perf_counter()
    for _ in range(calls):
        fn()
    return (time.perf_counter() - t0) / calls * 1e6


def _time(fn, calls, rounds):
    fn()
    return min(_round(fn, calls) for _ in range(rounds))


def _time_pair(fn_a, fn_b, calls, rounds):
    """Best round of each, the rounds alternating so both sides meet the same load."""
    fn_a(), fn_b()
    a, b = [], []
    for _ in range(rounds):
        a.append(_round(fn_a, calls))
        b.append(_round(fn_b, calls))
    return min(a), min(b)


def _inputs(lib, shapes):
    import numpy as np
    rng = np.random.RandomState(0)
    return [lib(rng.standard_normal(s).astype(np.float32)) for s in shapes]


def measure_symtriton(calls, rounds):
    """``{op: (mx.nd us, torch us)}`` on this process's cpu target."""
    import torch
    import module_api as mx
    torch.set_num_threads(1)
    out = {}
    for name, (shapes, nd_src, torch_src) in CASES.items():
        arrs = _inputs(mx.nd.array, shapes)
        plain = [a.as_subclass(torch.Tensor).clone() for a in arrs]
        env_nd = {"nd": mx.nd, **dict(zip("abc", arrs))}
        env_t = {"torch": torch, **dict(zip("abc", plain))}
        nd_fn = eval(f"lambda: {nd_src}", env_nd)          # noqa: S307 (fixed sources above)
        t_fn = eval(f"lambda: {torch_src}", env_t)          # noqa: S307
        out[name] = _time_pair(nd_fn, t_fn, calls, rounds)
    return out


def measure_mxnet(calls, rounds):
    """``{op: us}`` of the same ``mx.nd`` calls under mxnet (run under its interpreter)."""
    import mxnet as mx
    out = {}
    for name, (shapes, nd_src, _) in CASES.items():
        arrs = _inputs(mx.nd.array, shapes)
        env = {"nd": mx.nd, **dict(zip("abc", arrs))}
        fn = eval(f"lambda: {nd_src}.wait_to_read()", env)  # noqa: S307
        out[name] = _time(fn, calls, rounds)
    return out


def _mxnet_column(python, calls, rounds):
    if not python:
        return {}
    env = dict(os.environ, OMP_NUM_THREADS="1", MXNET_ENGINE_TYPE="NaiveEngine")
    proc = subprocess.run([python, os.path.abspath(__file__), "--mxnet-probe",
                           "--calls", str(calls), "--rounds", str(rounds)],
                          capture_output=True, text=True, env=env, timeout=600)
    if proc.returncode != 0:
        print(f"mxnet probe failed: {proc.stderr.strip()[-400:]}")
        return {}
    return json.loads(proc.stdout.strip().splitlines()[-1])


def print_table(rows, mxnet):
    head = f"{'operator':<22} {'mx.nd (us)':>11} {'torch (us)':>11} {'above torch':>12}"
    head += f" {'mxnet 1.9.1 (us)':>17}" if mxnet else ""
    print(head)
    for name, (nd_us, t_us) in rows.items():
        line = f"{name:<22} {nd_us:>11.1f} {t_us:>11.1f} {nd_us - t_us:>12.1f}"
        if mxnet:
            line += f" {mxnet.get(name, float('nan')):>17.1f}"
        print(line)
    for name, (nd_us, t_us) in rows.items():
        extra = f" mxnet_us={mxnet[name]:.2f}" if name in mxnet else ""
        print(f"RESULT nd_call_cost op={name.replace(' ', '_')} nd_us={nd_us:.2f} "
              f"torch_us={t_us:.2f} above_us={nd_us - t_us:.2f}{extra}")


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--calls", type=int, default=2000, help="calls per round")
    p.add_argument("--rounds", type=int, default=5, help="rounds; the best is shown")
    p.add_argument("--mxnet-python", default="", help="mxnet 1.9.1's interpreter")
    p.add_argument("--mxnet-probe", action="store_true", help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    if args.mxnet_probe:
        print(json.dumps(measure_mxnet(args.calls, args.rounds)))
        return
    rows = measure_symtriton(args.calls, args.rounds)
    print_table(rows, _mxnet_column(args.mxnet_python, args.calls, args.rounds))


if __name__ == "__main__":
    main()
