"""``mx.mod`` / ``mx.module``: BaseModule, Module, SequentialModule, BucketingModule,
PythonModule and PythonLossModule."""
import sys as _sys

from runtime import executor_group  # noqa: F401  (mxnet.module.executor_group)

from .base_module import BaseModule  # noqa: F401
from .module import Module  # noqa: F401
from .sequential_module import SequentialModule  # noqa: F401
from .bucketing_module import BucketingModule  # noqa: F401
from .python_module import PythonModule, PythonLossModule  # noqa: F401

# ``from mxnet.module.executor_group import DataParallelExecutorGroup`` keeps working
_sys.modules.setdefault(__name__ + ".executor_group", executor_group)
