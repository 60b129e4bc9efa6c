"""mxnet's ``mx.optimizer``: every optimizer, ``create`` / ``register``, ``Updater``.

The base class and how its updates run (one generated multi-tensor kernel per step,
the state files) are documented in ``optimizer_base.py``; ``optimizer_common.py`` holds
SGD, NAG, Adam, AdaGrad, RMSProp and AdaDelta, ``optimizer_more.py`` and
``optimizer_layerwise.py`` mxnet's other optimizers, ``optimizer_contrib.py``
``mx.optimizer.contrib`` (GroupAdaGrad), ``updater.py`` the ``Updater``.
"""
from __future__ import annotations

import torch

from . import optimizer_contrib as contrib
from .optimizer_base import Optimizer, create, register
from .optimizer_common import SGD, AdaDelta, AdaGrad, Adam, NAG, RMSProp
from .optimizer_kernels import precompile
from .optimizer_layerwise import LAMB, LARS, LBSGD
from .optimizer_more import DCASGD, FTML, SGLD, Adamax, Ftrl, Nadam, Signum, ccSGD
from .optimizer_states import MAGIC  # noqa: F401  (the state file's first line, public)
from .updater import Updater, get_updater

__all__ = ["Optimizer", "SGD", "NAG", "Adam", "AdaGrad", "RMSProp", "AdaDelta", "Signum",
           "FTML", "Adamax", "Nadam", "Ftrl", "LAMB", "LARS", "DCASGD", "SGLD", "LBSGD",
           "ccSGD", "register", "create", "get_updater", "Updater", "aot_kernels", "contrib"]


def aot_kernels(name, params, targets, dtypes=("float32",)) -> list:
    """``symtriton compile --optimizer NAME``: the hashes of the update kernels
    ``create(name, **params)`` launches on weights of ``dtypes`` (the
    ``symtriton.aot_kernels`` entry point)."""
    return precompile(create(name, **params), dtypes=tuple(getattr(torch, d) for d in dtypes),
                      targets=targets)
