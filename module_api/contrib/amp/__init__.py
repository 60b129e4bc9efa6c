"""``mx.contrib.amp``: automatic mixed precision for Symbol / Module programs (see ``amp.py``)."""
from . import amp, lists  # noqa: F401
from .amp import *  # noqa: F401,F403
from .loss_scaler import LossScaler  # noqa: F401
