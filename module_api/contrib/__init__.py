"""``mx.contrib``: the parts of mxnet's contrib namespace that scripts import.

``mx.contrib.ndarray`` and ``mx.contrib.symbol`` (and their short names ``nd`` and
``sym``) are ``mx.nd.contrib`` and ``mx.sym.contrib``, as in mxnet;
``mx.contrib.autograd`` is mxnet's first autograd interface (``autograd.py``),
``mx.contrib.amp`` its mixed precision, ``mx.contrib.svrg_optimization`` its
SVRG-trained Module and ``mx.contrib.text`` its vocabularies and token embeddings."""
from compiler import symbol as _symbol

from .. import ndarray as _ndarray
from . import amp, autograd, svrg_optimization, text  # noqa: F401

ndarray = nd = _ndarray.contrib
symbol = sym = _symbol.contrib
