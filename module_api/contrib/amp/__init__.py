"""``mx.contrib.amp``: automatic mixed precision (see ``amp.py`` for what works today)."""
from . import amp  # noqa: F401
from .amp import *  # noqa: F401,F403
from .loss_scaler import LossScaler  # noqa: F401
