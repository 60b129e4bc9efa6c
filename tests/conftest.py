"""Test set-up: decide the Triton mode before anything imports triton, and give
every test session its own kernel cache directory."""
import os
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
if ROOT not in sys.path:
    sys.path.insert(0, ROOT)

os.environ.setdefault("SYMTRITON_CACHE_DIR", tempfile.mkdtemp(prefix="symtriton-test-cache-"))
os.environ.pop("SYMTRITON_OFFLINE", None)

import compiler  # noqa: E402,F401  (sets TRITON_INTERPRET=1 when there is no GPU)
