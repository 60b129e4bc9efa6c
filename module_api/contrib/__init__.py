"""``mx.contrib``: the parts of mxnet's contrib namespace that scripts import."""
from . import amp  # noqa: F401
