"""``mxnet`` as an alias of ``module_api``: ``import mxnet.X`` gives ``module_api.X``.

Only an alias: every name comes from module_api. Used to run mxnet 1.9.1's own
unit tests unchanged (see README.md beside this folder).
"""
import importlib
import importlib.abc
import importlib.util
import sys

import module_api


class _Alias(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    def find_spec(self, name, path=None, target=None):
        if name.startswith("mxnet."):
            try:
                real = importlib.import_module("module_api" + name[len("mxnet"):])
            except ModuleNotFoundError:
                return None
            spec = importlib.util.spec_from_loader(name, self)
            spec._real = real
            return spec
        return None

    def create_module(self, spec):
        return spec._real

    def exec_module(self, module):
        # module_from_spec pointed __spec__ at the alias: give the module its own back
        module.__spec__ = importlib.util.find_spec(module.__name__)


sys.meta_path.insert(0, _Alias())
sys.modules[__name__] = module_api
