"""The MXNet-compatible surface: ``import module_api as mx``.

This issue's part is the Symbol API, contexts and executors; the Module
API (modules, io, metrics, optimizers ...) is built on top of them.
"""
import sys

from . import _worker_env  # noqa: F401,E402  (before torch is imported: a worker's log defaults)
from compiler import symbol  # noqa: F401,E402
from compiler import symbol as sym  # noqa: F401
from compiler.frontend.attribute import AttrScope  # noqa: F401
from compiler.frontend import name  # noqa: F401
from compiler.errors import MXNetError  # noqa: F401
from runtime import context  # noqa: F401
from runtime.context import Context, cpu, gpu, current_context, num_gpus  # noqa: F401
from runtime import executor  # noqa: F401
from . import ndarray, ndarray as nd  # noqa: F401,E402
from . import io, metric, callback, model, test_utils  # noqa: F401,E402
from . import initializer, initializer as init  # noqa: F401,E402
from . import monitor, monitor as mon  # noqa: F401,E402
from . import module, module as mod  # noqa: F401,E402
from runtime import kvstore, kvstore as kv  # noqa: F401,E402
from runtime import optimizer, optimizer as opt  # noqa: F401,E402
from runtime import lr_scheduler  # noqa: F401,E402
from . import rnn  # noqa: F401,E402
from . import operator  # noqa: F401,E402  (mx.operator: CustomOp)
from . import autograd  # noqa: F401,E402  (mx.autograd: record, backward)
from . import base, util, profiler, viz, gluon, registry, engine, attribute  # noqa: F401,E402
from . import recordio, image, image as img  # noqa: F401,E402  (mxnet's mx.img alias)
# mxnet's top-level names for its NumPy semantics: turning them on is refused with what
# to do (module_api/util.py), and a module that only decorates with them still imports
from .util import is_np_shape, set_np_shape, np_shape, use_np_shape  # noqa: F401,E402
from .util import is_np_array, np_array, use_np_array, use_np  # noqa: F401,E402
from . import features as runtime  # noqa: F401,E402  (mx.runtime: build features)
from . import contrib  # noqa: F401,E402  (mx.contrib.ndarray / .symbol: imported, as mxnet)

__version__ = "1.9.1"

# mxnet's test_utils imports mxnet as mx, and test files take it from
# ``from mxnet.test_utils import *`` (its test_autograd.py does); set here, not imported
# there: test_utils importing the package would be an import circle
test_utils.mx = sys.modules[__name__]


class random:  # noqa: N801  (mxnet's module name)
    """``mx.random``: ``seed(n)`` seeds numpy, torch and the project's generators;
    ``uniform`` / ``normal`` / ``randint`` are ``mx.nd.random``'s samplers, as in mxnet."""

    uniform = staticmethod(nd.random.uniform)
    normal = staticmethod(nd.random.normal)
    randint = staticmethod(nd.random.randint)
    seed = staticmethod(nd.random.seed)


def _register_submodule_aliases():
    """``import mxnet.optimizer as opt`` / ``from mxnet.kvstore import KVStore``: the
    modules re-exported here from ``compiler`` and ``runtime`` (and the short names
    ``nd``, ``sym``, ``kv`` ...) import as ``module_api.X`` too, as mxnet's do."""
    import sys
    import types
    for alias in ("context", "executor", "init", "kv", "kvstore", "lr_scheduler", "mod",
                  "mon", "name", "nd", "opt", "optimizer", "runtime", "sym", "symbol"):
        module = globals()[alias]
        assert isinstance(module, types.ModuleType), alias
        sys.modules.setdefault(f"{__name__}.{alias}", module)
        # a package's submodules too: ``import module_api.nd.sparse`` must find the
        # loaded ``module_api.ndarray.sparse``, not load the file again under a second name
        for name in [n for n in sys.modules if n.startswith(module.__name__ + ".")]:
            sys.modules.setdefault(f"{__name__}.{alias}{name[len(module.__name__):]}",
                                   sys.modules[name])


_register_submodule_aliases()
