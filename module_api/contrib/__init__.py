"""``mx.contrib``: the parts of mxnet's contrib namespace that scripts import.

``mx.contrib.ndarray`` and ``mx.contrib.symbol`` (and their short names ``nd`` and
``sym``) are ``mx.nd.contrib`` and ``mx.sym.contrib``, as in mxnet."""
from compiler import symbol as _symbol

from .. import ndarray as _ndarray
from . import amp  # noqa: F401

ndarray = nd = _ndarray.contrib
symbol = sym = _symbol.contrib
