"""mxnet's ``contrib.amp.lists``: the operator lists of each AMP target dtype."""
from . import symbol_bf16, symbol_fp16  # noqa: F401
