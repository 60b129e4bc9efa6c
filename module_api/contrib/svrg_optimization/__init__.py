"""``mx.contrib.svrg_optimization``: mxnet's SVRG optimization for the Module API
(``SVRGModule`` and the optimizers it installs)."""
from . import svrg_module, svrg_optimizer  # noqa: F401
from .svrg_module import SVRGModule  # noqa: F401
