"""What the GPU would run: every kernel of the GPU configurations, compiled to
cubin for ``cuda:90`` and ``cuda:80`` on this machine (no GPU needed), with the
registers, spilled bytes, shared memory and compile seconds of each.

Configurations (issue 12's):

- ``lstm``: the README's GPU lstm_bucketing, 2 x LSTM 200, embed 200,
  vocabulary 10,000, batch 32, buckets 10 to 60 (training and inference
  programs, and the SGD-momentum update);
- ``mlp``: 784-512-512-10 at batch 128 (training, inference, SGD update);
- ``softmax33k``: a SoftmaxOutput over 33,278 classes (wikitext-2's
  vocabulary) after a 200 -> 33,278 FullyConnected, batch 32;
- ``lenet``: mxnet's LeNet (``examples/mnist_symbols.py``) at batch 64;
- ``resnet20``: mxnet's CIFAR ResNet-20 (``symbols/resnet.py``, 3x32x32) at
  batch 128.

Usage::

    python benchmarks/gpu_kernels.py                    # all, both targets
    python benchmarks/gpu_kernels.py --config lstm --buckets 10,60 --target cuda:90
    python benchmarks/gpu_kernels.py --kernels          # one line per kernel
    python benchmarks/gpu_kernels.py --dtype float16    # the float16 programs

``--dtype`` builds the low-precision versions as a user would: the MLP's and the
image networks' data (and labels) in that dtype; the LSTM from its embedding on
(``Embedding(dtype=)``, float16 begin states, ``Cast`` to float32 before the
softmax). The ``mma`` column counts the kernels whose SASS (``cuobjdump -sass``)
holds tensor-core instructions (HMMA, HGMMA, DMMA).

The exit status is 1 when any kernel spills, uses more than 255 registers,
fails to compile, or takes longer than ``--max-seconds`` (60) to compile.
"""
from __future__ import annotations

import argparse
import os
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
if ROOT not in sys.path:
    sys.path.insert(0, ROOT)

os.environ.setdefault("TRITON_INTERPRET", "1")   # this process never runs a GPU kernel
if "--keep-triton-cache" not in sys.argv:
    # compile seconds are the point: Triton's own cache would make repeats free
    import tempfile
    os.environ["TRITON_CACHE_DIR"] = tempfile.mkdtemp(prefix="gpu-kernels-triton-")


def lstm_symbol(seq_len, num_layers=2, num_hidden=200, num_embed=200, vocab=10000,
                dtype="float32"):
    """mxnet's lstm_bucketing symbol (the model of its RNN bucketing example); in a
    low-precision ``dtype`` from the embedding to the softmax, which stays float32."""
    import module_api as mx
    stack = mx.rnn.SequentialRNNCell()
    for i in range(num_layers):
        stack.add(mx.rnn.LSTMCell(num_hidden=num_hidden, prefix="lstm_l%d_" % i))
    data = mx.sym.Variable("data")
    label = mx.sym.Variable("softmax_label")
    embed = mx.sym.Embedding(data=data, input_dim=vocab, output_dim=num_embed, name="embed",
                             dtype=dtype)
    outputs = stack.unroll(seq_len, inputs=embed, merge_outputs=True,
                           begin_state=stack.begin_state(dtype=dtype))[0]
    pred = mx.sym.Reshape(outputs, shape=(-1, num_hidden))
    pred = mx.sym.FullyConnected(data=pred, num_hidden=vocab, name="pred")
    if dtype != "float32":
        pred = mx.sym.Cast(pred, dtype="float32")
    label = mx.sym.Reshape(label, shape=(-1,))
    return mx.sym.SoftmaxOutput(data=pred, label=label, name="softmax")


def mlp_symbol():
    import module_api as mx
    x = mx.sym.Variable("data")
    for i, h in enumerate((512, 512)):
        x = mx.sym.Activation(mx.sym.FullyConnected(x, num_hidden=h, name=f"fc{i + 1}"),
                              act_type="relu")
    x = mx.sym.FullyConnected(x, num_hidden=10, name="fc3")
    return mx.sym.SoftmaxOutput(x, name="softmax")


def softmax_symbol(classes=33278):
    import module_api as mx
    x = mx.sym.FullyConnected(mx.sym.Variable("data"), num_hidden=classes, name="pred")
    return mx.sym.SoftmaxOutput(x, name="softmax")


def resnet_cifar_symbol(num_layers=20, num_classes=10):
    """mxnet's symbols/resnet.py for CIFAR (``image_shape`` 3,32,32): pre-activation
    residual units of two 3x3 convolutions (BatchNorm, relu, conv), filters 16/32/64,
    ``(num_layers - 2) / 6`` units a stage, global average pooling, FC, softmax."""
    import module_api as mx

    def unit(x, filters, stride, dim_match, name):
        bn1 = mx.sym.BatchNorm(x, fix_gamma=False, eps=2e-5, momentum=0.9, name=name + "_bn1")
        act1 = mx.sym.Activation(bn1, act_type="relu", name=name + "_relu1")
        conv1 = mx.sym.Convolution(act1, num_filter=filters, kernel=(3, 3), stride=stride,
                                   pad=(1, 1), no_bias=True, name=name + "_conv1")
        bn2 = mx.sym.BatchNorm(conv1, fix_gamma=False, eps=2e-5, momentum=0.9,
                               name=name + "_bn2")
        act2 = mx.sym.Activation(bn2, act_type="relu", name=name + "_relu2")
        conv2 = mx.sym.Convolution(act2, num_filter=filters, kernel=(3, 3), stride=(1, 1),
                                   pad=(1, 1), no_bias=True, name=name + "_conv2")
        short = x if dim_match else mx.sym.Convolution(
            act1, num_filter=filters, kernel=(1, 1), stride=stride, no_bias=True,
            name=name + "_sc")
        return conv2 + short

    per_stage = (num_layers - 2) // 6
    filters = [16, 16, 32, 64]
    data = mx.sym.BatchNorm(mx.sym.Variable("data"), fix_gamma=True, eps=2e-5, momentum=0.9,
                            name="bn_data")
    body = mx.sym.Convolution(data, num_filter=filters[0], kernel=(3, 3), stride=(1, 1),
                              pad=(1, 1), no_bias=True, name="conv0")
    for i in range(3):
        stride = (1, 1) if i == 0 else (2, 2)
        body = unit(body, filters[i + 1], stride, False, f"stage{i + 1}_unit1")
        for j in range(per_stage - 1):
            body = unit(body, filters[i + 1], (1, 1), True, f"stage{i + 1}_unit{j + 2}")
    body = mx.sym.Activation(mx.sym.BatchNorm(body, fix_gamma=False, eps=2e-5, momentum=0.9,
                                              name="bn1"), act_type="relu", name="relu1")
    pool = mx.sym.Pooling(body, global_pool=True, kernel=(7, 7), pool_type="avg", name="pool1")
    fc = mx.sym.FullyConnected(mx.sym.Flatten(pool), num_hidden=num_classes, name="fc1")
    return mx.sym.SoftmaxOutput(fc, name="softmax")


def configurations(buckets, dtype="float32"):
    """``{name: [(symbol, input shapes, data names)]}``: the programs to compile."""
    return {
        "lstm": [(lstm_symbol(key, dtype=dtype), {"data": (32, key), "softmax_label": (32, key)},
                  ("data", "softmax_label")) for key in buckets],
        "mlp": [(mlp_symbol(), {"data": (128, 784), "softmax_label": (128,)},
                 ("data", "softmax_label"))],
        "softmax33k": [(softmax_symbol(), {"data": (32, 200), "softmax_label": (32,)},
                        ("data", "softmax_label"))],
        "lenet": [(_lenet(), {"data": (64, 1, 28, 28), "softmax_label": (64,)},
                   ("data", "softmax_label"))],
        "resnet20": [(resnet_cifar_symbol(20), {"data": (128, 3, 32, 32),
                                                "softmax_label": (128,)},
                      ("data", "softmax_label"))],
    }


def _lenet():
    from examples.mnist_symbols import lenet
    return lenet()


def kernels_of(entries, target, dtype="float32", lstm=False):
    """``[(kernel hash, config)]`` of the training and inference programs and the SGD
    update, deduplicated. The data (and labels) are ``dtype``, except the LSTM's token
    ids (its low precision starts at the embedding)."""
    from compiler.triton import cubin
    from compiler.artifacts.compile import compile_symbol
    from runtime.optimizer import aot_kernels
    seen, out = set(), []
    params, weights = 0, set()
    for symbol, shapes, data_names in entries:
        grad_req = {a: ("null" if a in data_names else "write") for a in symbol.list_arguments()}
        params = max(params, sum(1 for a in symbol.list_arguments() if a not in data_names))
        dtypes = {} if lstm else {n: dtype for n in data_names}
        for prog in (compile_symbol(symbol, shapes, True, grad_req, True, target, dtypes),
                     compile_symbol(symbol, shapes, False, {}, False, target, dtypes)):
            weights.update(prog.arg_dtypes[n] for n in prog.grad_names)
            for ln in prog.launches:
                cfg = dict(ln.config, aligned=cubin.launch_alignment(ln))
                key = (ln.kernel, tuple(sorted((k, v) for k, v in cfg.items() if k != "grid")))
                if key not in seen:
                    seen.add(key)
                    out.append((ln.kernel, cfg))
    opt = {"momentum": 0.9, "multi_precision": dtype in ("float16", "bfloat16")}
    for h in aot_kernels("sgd", opt, (target,), tuple(sorted(weights)) or ("float32",)):
        if (h, None) not in seen:
            seen.add((h, None))
            out.append((h, None))
    return out


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--config", action="append",
                    choices=["lstm", "mlp", "softmax33k", "lenet", "resnet20"])
    ap.add_argument("--buckets", default="10,20,30,40,50,60")
    ap.add_argument("--target", action="append", choices=["cuda:90", "cuda:80"])
    ap.add_argument("--workers", type=int, default=os.cpu_count() or 1)
    ap.add_argument("--max-seconds", type=float, default=60.0)
    ap.add_argument("--kernels", action="store_true", help="print one line per kernel")
    ap.add_argument("--dtype", default="float32", choices=["float32", "float16", "bfloat16"],
                    help="the dtype of the data (the LSTM: of its embedding on)")
    ap.add_argument("--keep-triton-cache", action="store_true",
                    help="use Triton's cache (repeats compile in no time)")
    args = ap.parse_args(argv)
    from compiler.triton import cubin
    buckets = [int(b) for b in args.buckets.split(",")]
    configs = configurations(buckets, args.dtype)
    bad = 0
    print(f"dtype {args.dtype}")
    print(f"{'config':<11} {'target':<8} {'kernels':>7} {'max regs':>8} {'spilled B':>9} "
          f"{'max shared':>10} {'mma':>4} {'max s':>6} {'total s':>7}  failures")
    for name in args.config or list(configs):
        for target in args.target or ["cuda:90", "cuda:80"]:
            t0 = time.perf_counter()
            items = kernels_of(configs[name], target, args.dtype, lstm=name == "lstm")
            t1 = time.perf_counter()
            # a worker's share may take max-seconds per kernel, then it is stopped
            raw = cubin.compile_many([(h, target, cfg) for h, cfg in items],
                                     workers=args.workers,
                                     timeout=args.max_seconds * (len(items) // args.workers + 1))
            # seconds: measured inside the worker, for that kernel alone
            results = [(r, 0.0 if isinstance(r, Exception) else r["seconds"]) for r in raw]
            ok = [(r, s) for r, s in results if not isinstance(r, Exception)]
            failed = [str(r) for r, _ in results if isinstance(r, Exception)]
            regs = max((r["n_regs"] for r, _ in ok), default=0)
            spill = sum(r["n_spills"] for r, _ in ok)
            shared = max((r["shared"] for r, _ in ok), default=0)
            slowest = max((s for _, s in results), default=0.0)
            forms = {}              # tensor-core instruction form -> count over the kernels
            mma = 0
            for r, _ in ok:
                found = cubin.tensor_core_instructions(cubin.sass(r["cubin"]))
                mma += bool(found)
                for form, count in found.items():
                    forms[form] = forms.get(form, 0) + count
            over = [r for r, s in ok if r["n_spills"] or r["n_regs"] > 255] + \
                [r for r, s in ok if s > args.max_seconds]
            bad += len(failed) + len(over)
            print(f"{name:<11} {target:<8} {len(results):>7} {regs:>8} {spill:>9} {shared:>10} "
                  f"{mma:>4} {slowest:>6.1f} {time.perf_counter() - t1:>7.1f}  "
                  f"{len(failed) + len(over)} (programs {t1 - t0:.1f}s)")
            if forms:
                print("    mma forms: " + ", ".join(f"{f} x{n}" for f, n in sorted(forms.items())))
            if args.kernels:
                for r, s in sorted(ok, key=lambda x: -x[1]):
                    c = r["config"]
                    print(f"    {r['hash']} regs={r['n_regs']:>3} spill={r['n_spills']:>5} "
                          f"shared={r['shared']:>6} {s:5.1f}s BM={c['BM']} BN={c['BN']} "
                          f"BK={c['BK']} warps={c['num_warps']}  {r['summary']}")
            for msg in failed:
                print("    FAILED " + msg[:600])
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
