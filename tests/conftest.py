"""Test set-up: decide the Triton mode before anything imports triton, and give
every test session its own kernel cache directory."""
import os
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
if ROOT not in sys.path:
    sys.path.insert(0, ROOT)

os.environ.setdefault("SYMTRITON_CACHE_DIR", tempfile.mkdtemp(prefix="symtriton-test-cache-"))
# The suite binds cpu() contexts, which run in Triton's interpreter; the
# interpreter also runs kernels on CUDA tensors (copying through the host).
# On a GPU machine, SYMTRITON_TEST_GPU=1 runs it with kernels compiled for
# the GPU instead (then only gpu() contexts can launch).
if os.environ.get("SYMTRITON_TEST_GPU", "0") in ("", "0"):
    os.environ.setdefault("TRITON_INTERPRET", "1")
os.environ.pop("SYMTRITON_OFFLINE", None)

import compiler  # noqa: E402,F401  (sets TRITON_INTERPRET=1 when there is no GPU)

import pytest  # noqa: E402

# tests/mxnet_unittest/test_mxnet_1_9_1.py runs mxnet 1.9.1's own unit tests from the
# checkout MXNET_SOURCE names, in a process of their own. Its shim (a package named
# `mxnet` that aliases module_api) and nose harness are only for that process: never
# imported into this one.
collect_ignore = ["mxnet_unittest/shim", "mxnet_unittest/harness"]


@pytest.fixture(params=["cpu", "interpret"])
def cpu_target(request, monkeypatch):
    """Run the test on both targets of cpu() contexts: ``cpu`` (torch calls) and
    ``interpret`` (the Triton kernels a GPU runs, in Triton's interpreter)."""
    monkeypatch.setenv("SYMTRITON_CPU_TARGET", request.param)
    return request.param


def assert_same_launches_on_cpu_targets(exe):
    """The ``cpu`` and ``interpret`` Programs of an executor's symbol have the same
    launches (phase and what each computes): one fusion, two lowerings. The one
    difference by design, chains of LSTMCell steps as oneDNN layers on the ``cpu``
    target, is switched off for the comparison (``SYMTRITON_LSTM_LAYERS=0``;
    ``tests/compiler/test_fuse_lstm_layers.py`` checks the layers)."""
    from compiler.artifacts.compile import compile_symbol
    train, infer = exe.programs
    calls = []
    if train is not None:
        calls.append((True, exe._grad_req, True))
    if infer is not None and infer is not train:
        calls.append((False, {}, False))
    saved = os.environ.get("SYMTRITON_LSTM_LAYERS")
    os.environ["SYMTRITON_LSTM_LAYERS"] = "0"
    try:
        for ft, req, it in calls:
            got = {t: [(ln.phase, ln.summary) for ln in compile_symbol(
                exe._symbol, exe._input_shapes, ft, req, it, t).launches]
                for t in ("cpu", "interpret")}
            assert got["cpu"] == got["interpret"], got
    finally:
        if saved is None:
            del os.environ["SYMTRITON_LSTM_LAYERS"]
        else:
            os.environ["SYMTRITON_LSTM_LAYERS"] = saved
