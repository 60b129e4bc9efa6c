"""The pieces of ``mx.model`` the Module API builds on: checkpoints and the kvstore / update
helpers (``module_api/model.py`` is the face that also exports ``FeedForward``).

The same functions, signatures and decisions as mxnet 1.9.1's
``python/mxnet/model.py``: ``_create_kvstore`` (no kvstore for one device
unless distributed; ``local`` with a parameter over 16M elements updates on
the workers; ``MXNET_UPDATE_ON_KVSTORE=0`` turns kvstore updates off),
``_update_params`` (optimizer index ``i * num_device + k``), and the
checkpoint layout ``prefix-symbol.json`` + ``prefix-%04d.params`` with
``arg:`` / ``aux:`` keys, written atomically.
"""
from __future__ import annotations

import logging
import os
from collections import namedtuple

import numpy as np

from runtime.context import cpu

from . import ndarray as nd

_LOG = logging.getLogger(__name__)

BatchEndParam = namedtuple('BatchEndParams', ['epoch', 'nbatch', 'eval_metric', 'locals'])


def _kvs():
    from runtime import kvstore as kvs
    return kvs


def _kvstore_types():
    kvs = _kvs()
    return tuple(t for t in (getattr(kvs, "KVStoreBase", None), getattr(kvs, "KVStore", None))
                 if t is not None)


def _can_optimize(kv):
    """``kv.is_capable(KVStoreBase.OPTIMIZER)``; True for stores that cannot say."""
    if not hasattr(kv, "is_capable"):
        return True
    base = getattr(_kvs(), "KVStoreBase", None)
    cap = getattr(base, "OPTIMIZER", "optimizer") if base is not None else "optimizer"
    return bool(kv.is_capable(cap))


def _create_kvstore(kvstore, num_device, arg_params):
    """Create a kvstore (or none) and decide ``update_on_kvstore``.

    Parameters
    ----------
    kvstore : KVStore or str or None
    num_device : int
        Number of devices.
    arg_params : dict of str to NDArray
        Model parameters; the largest decides ``local``'s update place.

    Returns
    -------
    (kvstore, update_on_kvstore)
    """
    update_on_kvstore = bool(int(os.getenv('MXNET_UPDATE_ON_KVSTORE', "1")))
    if kvstore is None:
        kv = None
    elif isinstance(kvstore, str):
        if num_device == 1 and 'dist' not in kvstore:
            # no need to use kv for single device and single machine
            kv = None
        else:
            kv = _kvs().create(kvstore)
            if kvstore == 'local':
                # automatically select a proper local
                max_size = max(int(np.prod(param.shape)) for param in arg_params.values())
                if max_size > 1024 * 1024 * 16:
                    update_on_kvstore = False
    elif isinstance(kvstore, _kvstore_types()) or hasattr(kvstore, "pushpull") or \
            hasattr(kvstore, "push"):
        kv = kvstore
    else:
        raise TypeError('kvstore must be KVStore, str or None')

    if kv is None:
        update_on_kvstore = False
    else:
        update_on_kvstore &= _can_optimize(kv)
        if "async" in str(getattr(kv, "type", "")) and not update_on_kvstore:
            raise ValueError("kvstore 'dist_async' applies each worker's gradients on the "
                             "store, so it needs update_on_kvstore; unset "
                             "MXNET_UPDATE_ON_KVSTORE=0 or use 'dist_sync'")
    return (kv, update_on_kvstore)


def _is_distributed(kvstore):
    return "dist" in str(getattr(kvstore, "type", ""))


def _initialize_kvstore(kvstore, param_arrays, arg_params, param_names, update_on_kvstore):
    """Initialize the kvstore with the parameters, all keys in one call.

    When the kvstore updates, the stored values are pulled back into every
    device's arrays (mxnet's ``broadcast``). A distributed kvstore takes rank
    0's values, and is pulled from even when the workers update, so every worker
    starts from the same parameters (mxnet leaves that to equal random seeds).
    """
    names = list(param_names[:len(param_arrays)])
    kvstore.init(names, [arg_params[n] for n in names])
    if update_on_kvstore:       # mxnet's broadcast, for dense parameters
        pulled = [n for n in names if getattr(arg_params[n], "stype", "default") == 'default']
    elif _is_distributed(kvstore):
        pulled = names
    else:
        return
    if pulled:
        kvstore.pull(pulled, out=[param_arrays[names.index(n)] for n in pulled], priority=0)


def _pushpull(kvstore, names, grad_lists, out):
    """One push-and-pull of many keys, so a distributed store reduces them in buckets."""
    if hasattr(kvstore, "pushpull"):
        kvstore.pushpull(names, grad_lists, out=out, priority=0)
    else:
        kvstore.push(names, grad_lists, priority=0)
        kvstore.pull(names, out=out if out is not None else grad_lists, priority=0)


def _with_grads(param_arrays, grad_arrays, param_names):
    """(names, weight lists, grad lists, indices) of the parameters that have gradients."""
    picked = [(param_names[i], w, g, i) for i, (w, g) in enumerate(zip(param_arrays, grad_arrays))
              if g[0] is not None]
    return [list(x) for x in zip(*picked)] if picked else ([], [], [], [])


def _update_params_on_kvstore(param_arrays, grad_arrays, kvstore, param_names):
    """Push every gradient to the kvstore (which updates) and pull the weights back,
    in one call for all parameters."""
    names, weights, grads, _ = _with_grads(param_arrays, grad_arrays, param_names)
    if names:
        _pushpull(kvstore, names, grads, weights)


def _update_params(param_arrays, grad_arrays, updater, num_device,
                   kvstore=None, param_names=None):
    """Update on the workers: optionally sum gradients over the kvstore (one call for
    all parameters, summed in place), then one ``updater(indices, grads, weights)``
    call per device (index ``i*num_device + k``).
    """
    names, weights, grads, indices = _with_grads(param_arrays, grad_arrays,
                                                 param_names or [None] * len(param_arrays))
    if kvstore and names:
        _pushpull(kvstore, names, grads, None)
    updates = [[] for _ in range(num_device)]
    for index, arg_list, grad_list in zip(indices, weights, grads):
        for k, (w, g) in enumerate(zip(arg_list, grad_list)):
            # faked an index here, to make optimizer create diff
            # state for the same index but on diff devs
            updates[k].append((index * num_device + k, g, w))
    for dev_updates in updates:
        if dev_updates:
            i, g, w = zip(*dev_updates)
            updater(list(i), list(g), list(w))


def save_checkpoint(prefix, epoch, symbol, arg_params, aux_params, remove_amp_cast=True):
    """Checkpoint the model: ``prefix-symbol.json`` and ``prefix-%04d.params``.

    Parameters
    ----------
    prefix : str
    epoch : int
    symbol : Symbol or None
        Not written when None.
    arg_params, aux_params : dict of str to NDArray
    remove_amp_cast : bool
        Accepted for mxnet compatibility.
    """
    if symbol is not None:
        symbol.save('%s-symbol.json' % prefix, remove_amp_cast=remove_amp_cast)
    save_dict = {('arg:%s' % k): _on_cpu(v) for k, v in arg_params.items()}
    save_dict.update({('aux:%s' % k): _on_cpu(v) for k, v in aux_params.items()})
    param_name = '%s-%04d.params' % (prefix, epoch)
    nd.save(param_name, save_dict)
    _LOG.info('Saved checkpoint to \"%s\"', param_name)


def _on_cpu(v):
    if hasattr(v, "as_in_context"):
        return v.as_in_context(cpu())
    return v.detach().cpu() if hasattr(v, "detach") else v


def load_params(prefix, epoch):
    """Load ``prefix-%04d.params`` into ``(arg_params, aux_params)``."""
    save_dict = nd.load("%s-%04d.params" % (prefix, epoch))
    arg_params = {}
    aux_params = {}
    if not save_dict:
        _LOG.warning("Params file '%s' is empty", '%s-%04d.params' % (prefix, epoch))
        return (arg_params, aux_params)
    for k, v in save_dict.items():
        tp, name = k.split(":", 1)
        if tp == "arg":
            arg_params[name] = v
        if tp == "aux":
            aux_params[name] = v
    return (arg_params, aux_params)


def load_checkpoint(prefix, epoch):
    """Load a checkpoint: ``(symbol, arg_params, aux_params)``."""
    from compiler import symbol as sym
    symbol = sym.load('%s-symbol.json' % prefix)
    arg_params, aux_params = load_params(prefix, epoch)
    return (symbol, arg_params, aux_params)
