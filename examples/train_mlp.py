"""Train a small MLP through symtriton's compiled path (``make demo-mlp``).

The network is written with the Symbol API, bound with ``simple_bind`` and
every forward and backward step runs the fused kernels the compiler generated
for it (on ``cpu()``: the cpu target's ATen calls; ``SYMTRITON_CPU_TARGET=interpret``
runs the Triton kernels in Triton's interpreter instead). Parameters
are updated with plain SGD in torch: the arrays in ``arg_dict`` and
``grad_dict`` are torch tensors.

The data set is synthetic and fixed by a seed: overlapping Gaussian
clusters, one per class, so the task is learnable but not trivial. Loss falls and accuracy rises over the epochs.

``--dtype float16`` / ``bfloat16`` binds the network in that dtype (``type_dict`` of
the data and label: the weights, gradients and outputs follow) and updates it as SGD
with ``multi_precision=True`` does: float32 master copies of the weights take the
step and are copied (rounded) into the low-precision weights. The default,
``float32``, is the plain run. On ``cpu()`` the kernels compute low precision in
float32 (they widen loads and narrow stores): it halves the bytes, not the time
(``benchmarks/dtypes.py``).

Run from the repository root::

    python examples/train_mlp.py [--epochs 6] [--batch 64] [--lr 0.1]
    python examples/train_mlp.py --dtype float16
"""
from __future__ import annotations

import argparse
import os
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
if ROOT not in sys.path:          # running from a checkout without `pip install -e .`
    sys.path.insert(0, ROOT)

import numpy as np   # noqa: E402
import torch         # noqa: E402

import compiler                               # noqa: E402
from compiler import symbol as sym            # noqa: E402
from runtime.context import cpu, cpu_target   # noqa: E402

NUM_IN, HIDDEN, NUM_CLASSES = 64, (128, 64), 10


def build_mlp():
    net = sym.Variable("data")
    for i, width in enumerate(HIDDEN, start=1):
        net = sym.FullyConnected(net, num_hidden=width, name=f"fc{i}")
        net = sym.Activation(net, act_type="relu", name=f"relu{i}")
    net = sym.FullyConnected(net, num_hidden=NUM_CLASSES, name=f"fc{len(HIDDEN) + 1}")
    return sym.SoftmaxOutput(net, name="softmax")


def make_dataset(n_train, n_test, seed):
    """Overlapping Gaussian clusters: one random centre per class, unit noise.

    The centres are close enough (scale 0.35 in 64 dimensions) that the
    classes overlap: the task is learnable but not solved in one epoch.
    """
    rng = np.random.default_rng(seed)
    n = n_train + n_test
    centres = 0.35 * rng.standard_normal((NUM_CLASSES, NUM_IN))
    y = rng.integers(0, NUM_CLASSES, n)
    x = (rng.standard_normal((n, NUM_IN)) + centres[y]).astype(np.float32)
    y = y.astype(np.float32)
    return (torch.from_numpy(x[:n_train]), torch.from_numpy(y[:n_train]),
            torch.from_numpy(x[n_train:]), torch.from_numpy(y[n_train:]))


def init_params(exe, seed):
    """Xavier-uniform weights, zero biases."""
    gen = torch.Generator().manual_seed(seed)
    for name, arr in exe.arg_dict.items():
        if name.endswith("_weight"):
            fan_out, fan_in = arr.shape
            bound = (6.0 / (fan_in + fan_out)) ** 0.5
            arr.copy_((torch.rand(arr.shape, generator=gen) * 2 - 1) * bound)
        elif name.endswith("_bias"):
            arr.zero_()


def run_batches(exe, x, y, batch, train, lr, params, perm=None, masters=None):
    """One pass over (x, y); returns (mean cross-entropy, accuracy).

    ``masters``: float32 copies of low-precision weights (multi-precision SGD): they
    take the step, the weights get their rounded values."""
    n = (x.shape[0] // batch) * batch
    order = perm if perm is not None else torch.arange(x.shape[0])
    loss_sum, correct = 0.0, 0
    for start in range(0, n, batch):
        idx = order[start:start + batch]
        xb, yb = x[idx], y[idx]
        exe.arg_dict["data"].copy_(xb)
        exe.arg_dict["softmax_label"].copy_(yb)
        exe.forward(is_train=train)
        prob = exe.outputs[0].float()      # (float32: the output itself)
        labels = yb.long()
        # statistics before the update, from the softmax the kernels computed
        loss_sum += -torch.log(prob[torch.arange(batch), labels].clamp_min(1e-12)).sum().item()
        correct += int((prob.argmax(dim=1) == labels).sum())
        if train:
            exe.backward()
            with torch.no_grad():
                for name in params:
                    # SoftmaxOutput's gradient is summed over the batch
                    # (normalization='null'), so divide by the batch size here.
                    if masters is None:
                        exe.arg_dict[name].sub_(exe.grad_dict[name], alpha=lr / batch)
                    else:
                        masters[name].sub_(exe.grad_dict[name].float(), alpha=lr / batch)
                        exe.arg_dict[name].copy_(masters[name])
    return loss_sum / n, correct / n


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--epochs", type=int, default=6)
    ap.add_argument("--batch", type=int, default=64)
    ap.add_argument("--lr", type=float, default=0.1)
    ap.add_argument("--train-size", type=int, default=2048)
    ap.add_argument("--test-size", type=int, default=512)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--dtype", default="float32", choices=("float32", "float16", "bfloat16"),
                    help="dtype of the data, label, weights and outputs; low precision "
                         "keeps float32 master weights (multi_precision)")
    args = ap.parse_args(argv)

    t_start = time.perf_counter()
    x_tr, y_tr, x_te, y_te = make_dataset(args.train_size, args.test_size, args.seed)
    net = build_mlp()
    grad_req = {n: ("null" if n in ("data", "softmax_label") else "write")
                for n in net.list_arguments()}
    params = [n for n, r in grad_req.items() if r == "write"]

    compiler.reset_cache_stats()
    t0 = time.perf_counter()
    low = args.dtype != "float32"
    type_dict = {"data": args.dtype, "softmax_label": args.dtype} if low else None
    exe = net.simple_bind(cpu(), grad_req=grad_req, type_dict=type_dict,
                          data=(args.batch, NUM_IN))
    bind_s = time.perf_counter() - t0
    init_params(exe, args.seed)
    # multi_precision: float32 master weights for low-precision ones
    masters = {n: exe.arg_dict[n].float().clone() for n in params} if low else None

    prog = exe.programs[0]
    st = prog.stats
    fused = st["forward_launches"] + st["backward_launches"]
    unfused = st["unfused_forward_ops"] + st["unfused_backward_ops"]
    print(f"symtriton demo: MLP {NUM_IN}-{'-'.join(map(str, HIDDEN))}-{NUM_CLASSES} + SoftmaxOutput, "
          f"batch {args.batch}, SGD lr {args.lr}, "
          f"cpu() target {cpu_target()}"
          + (f", {args.dtype} (float32 master weights)" if low else ""))
    print(f"data: {args.train_size} train / {args.test_size} test samples, "
          f"{NUM_CLASSES} overlapping Gaussian clusters (seed {args.seed})")
    print(f"bind + compile: {bind_s:.2f} s; launches per training step: {fused} "
          f"({st['forward_launches']} forward + {st['backward_launches']} backward) "
          f"vs {unfused} operators unfused")

    gen = torch.Generator().manual_seed(args.seed + 1)
    loss0, acc0 = run_batches(exe, x_tr, y_tr, args.batch, False, args.lr, params)
    print(f"epoch  0  train loss {loss0:.4f}  (before training, accuracy {acc0:.3f})")
    history = [loss0]
    for epoch in range(1, args.epochs + 1):
        t0 = time.perf_counter()
        perm = torch.randperm(x_tr.shape[0], generator=gen)
        loss, acc = run_batches(exe, x_tr, y_tr, args.batch, True, args.lr, params, perm,
                                masters)
        te_loss, te_acc = run_batches(exe, x_te, y_te, args.batch, False, args.lr, params)
        history.append(loss)
        print(f"epoch {epoch:2d}  train loss {loss:.4f}  acc {acc:.3f}  |  "
              f"test loss {te_loss:.4f}  acc {te_acc:.3f}  ({time.perf_counter() - t0:.1f} s)")

    stats = compiler.cache_stats()
    print("compile cache:", ", ".join(f"{k}={v:.2f}" if isinstance(v, float) else f"{k}={v}"
                                      for k, v in stats.items()))
    print(f"total {time.perf_counter() - t_start:.1f} s")
    if not history[-1] < history[0]:
        print("ERROR: the training loss did not fall", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
