"""mxnet 1.x's ``mx.rnn``: symbolic RNN cells (convolutional ones too), the bucketing sentence
iterator and checkpoint helpers that unpack / pack fused weights."""
from . import rnn_cell  # noqa: F401
from .rnn_cell import *  # noqa: F401,F403
from . import conv_rnn_cell  # noqa: F401
from .conv_rnn_cell import *  # noqa: F401,F403
from . import rnn  # noqa: F401
from .rnn import *  # noqa: F401,F403
from . import io  # noqa: F401
from .io import *  # noqa: F401,F403
