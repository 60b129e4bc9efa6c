"""Operator families; importing this package fills the registry."""
from .registry import REGISTRY, OpDef, get_op, register  # noqa: F401
from . import elemwise  # noqa: F401
from . import leaky_relu  # noqa: F401
from . import indexing  # noqa: F401
from . import reduce  # noqa: F401
from . import shape  # noqa: F401
from . import matmul  # noqa: F401
from . import nn  # noqa: F401
from . import loss  # noqa: F401
from . import rnn  # noqa: F401
from . import conv  # noqa: F401
from . import pool  # noqa: F401
from . import spatial  # noqa: F401
from . import normalization  # noqa: F401
from . import selection  # noqa: F401
from . import cast  # noqa: F401
from . import sequence  # noqa: F401
from . import nn_more  # noqa: F401
from . import shape_more  # noqa: F401
from . import shape_like  # noqa: F401
from . import math  # noqa: F401
from . import random  # noqa: F401
from . import reduce_more  # noqa: F401
from . import scan  # noqa: F401
from . import creation  # noqa: F401
from . import indexing_more  # noqa: F401
from . import histogram  # noqa: F401
