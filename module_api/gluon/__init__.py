"""``mx.gluon``: only ``gluon.utils``, the array helpers Module API programs use
(``clip_global_norm`` on a Module's gradient arrays, ``split_and_load`` ...).

symtriton implements mxnet's symbolic Module API, not Gluon: any other name of
``mx.gluon`` (``nn``, ``Block``, ``HybridBlock``, ``Trainer``, ``loss``, ``data``
...) raises an ``MXNetError`` that says so. ``from mxnet import gluon`` itself
works, so programs and test files that import it for ``gluon.utils`` run.
"""
from compiler.errors import MXNetError

from . import utils  # noqa: F401

__all__ = ["utils"]


def __getattr__(name):
    """Any name but ``utils``: Gluon is not implemented, say so."""
    if name.startswith("__") and name.endswith("__"):
        raise AttributeError(name)      # dunder look-ups (copy, pickle, doctest) stay quiet
    raise MXNetError(
        f"mx.gluon.{name}: symtriton implements mxnet's Module API (mx.sym, mx.mod), not "
        f"Gluon; only mx.gluon.utils (clip_global_norm, split_data, split_and_load, "
        f"check_sha1, download) is available. Write the network as a Symbol and train it "
        f"with mx.mod.Module.")
