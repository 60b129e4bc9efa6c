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
