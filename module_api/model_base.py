"""The pieces of ``mx.model`` the Module API builds on: checkpoints and the kvstore / update
helpers (``module_api/model.py`` is the face that also exports ``FeedForward``).

The same functions, signatures and decisions as mxnet 1.9.1's
``mx.model``: ``_create_kvstore`` (no kvstore for one device
unless distributed; ``local`` with a parameter over 16M elements updates on
the workers; ``MXNET_UPDATE_ON_KVSTORE=0`` turns kvstore updates off),
``_update_params`` (optimizer index ``i * num_device + k``), and the
checkpoint layout ``prefix-symbol.json`` + ``prefix-%04d.params`` with
``arg:`` / ``aux:`` keys, written atomically.
"""
from __future__ import annotations

import contextlib
import logging
import os
import re
import time
from collections import namedtuple

import numpy as np

from compiler.artifacts.atomic import pid_alive, write_group
from compiler.errors import MXNetError
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
    if not _built_in(kvstore) and not hasattr(kvstore, "init"):
        # a store written in Python (KVStoreBase) may offer broadcast / pushpull only:
        # it starts each device from the same values (mxnet would fail on its init)
        for n, devs in zip(names, param_arrays):
            kvstore.broadcast(n, arg_params[n], out=devs)
        return
    kvstore.init(names, [arg_params[n] for n in names])
    if update_on_kvstore:       # mxnet's broadcast, for dense parameters
        pulled = [n for n in names if getattr(arg_params[n], "stype", "default") == 'default']
    elif _is_distributed(kvstore):
        pulled = names
    else:
        return
    if pulled:
        kvstore.pull(pulled, out=[param_arrays[names.index(n)] for n in pulled], priority=0)


def _built_in(kvstore) -> bool:
    return isinstance(kvstore, getattr(_kvs(), "KVStore"))


def _pushpull(kvstore, names, grad_lists, out):
    """One push-and-pull of many keys, so a distributed store reduces them in buckets;
    a store written in Python gets one key per call, as mxnet's model calls it."""
    if not _built_in(kvstore) and hasattr(kvstore, "pushpull"):
        for i, (name, grads) in enumerate(zip(names, grad_lists)):
            kvstore.pushpull(name, grads, out=None if out is None else out[i], priority=-i)
        return
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

    Each file is written atomically (a temp file, then a rename); temp files that a
    killed save left in the folder are removed first.

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
    with write_group([param_name]) as (tmp,):
        nd.save(tmp, save_dict)
    _LOG.info('Saved checkpoint to \"%s\"', param_name)


@contextlib.contextmanager
def checkpoint_writer(prefix, epoch, with_states):
    """Write one checkpoint epoch as a unit: ``.params`` and ``.states`` together.

    Yields ``(params_tmp, states_tmp)``, the temp names to write (``states_tmp`` is
    None without states). When the body returns, the old files of that epoch are
    removed, the ``.states`` is published, then the ``.params``: a process killed at
    any moment leaves either the whole new checkpoint or no ``.params`` for the epoch
    (:func:`checkpoint_files` then reports it absent), never a ``.params`` beside a
    missing or older ``.states``. A checkpoint saved without states removes an older
    ``.states`` of the same epoch. Temp files are removed when the body fails, and
    those a killed save left are swept first. Both files get the same mode (``0o666``
    less the umask).

    Parameters
    ----------
    prefix : str
    epoch : int
    with_states : bool
        Whether this checkpoint includes the optimizer states.
    """
    param_name = '%s-%04d.params' % (prefix, epoch)
    state_name = '%s-%04d.states' % (prefix, epoch)
    _sweep_legacy_temps(prefix)
    with write_group([state_name if with_states else None, param_name],
                     stale=() if with_states else (state_name,)) as (states_tmp, params_tmp):
        yield params_tmp, states_tmp


_LEGACY_TEMP_AGE_S = 3600.0


def _sweep_legacy_temps(prefix):
    """Remove the temp files earlier symtriton versions left beside ``prefix``'s
    checkpoints when killed mid-save: ``.tmp-XXXXXXXX-<name>-NNNN.params`` (``mkstemp``;
    removed when an hour old) and ``<name>-NNNN.states.tmp.<pid>`` (removed when that
    process is gone)."""
    folder, name = os.path.split(os.path.abspath(prefix))
    mkstemp_style = re.compile(r"\.tmp-[A-Za-z0-9_]{8}-" + re.escape(name) +
                               r"-\d{4}\.(params|states)")
    pid_style = re.compile(re.escape(name) + r"-\d{4}\.states\.tmp\.(\d+)")
    try:
        names = os.listdir(folder)
    except OSError:
        return
    now = time.time()
    for n in names:
        path = os.path.join(folder, n)
        try:
            if mkstemp_style.fullmatch(n):
                stale = now - os.stat(path).st_mtime > _LEGACY_TEMP_AGE_S
            else:
                m = pid_style.fullmatch(n)
                stale = m is not None and int(m.group(1)) != os.getpid() and \
                    not pid_alive(int(m.group(1)))
            if stale:
                os.unlink(path)
        except OSError:
            pass


    return True


def checkpoint_files(prefix, epoch, load_optimizer_states=False, symbol=True):
    """The files of checkpoint ``prefix`` / ``epoch``, checked before anything is read.

    Parameters
    ----------
    prefix : str
    epoch : int
    load_optimizer_states : bool
        Whether the ``.states`` file is needed too.
    symbol : bool
        Whether ``prefix-symbol.json`` is needed (a BucketingModule's checkpoint has
        one symbol file per bucket instead).

    Returns
    -------
    (str, str)
        The ``.params`` and ``.states`` paths.

    Raises
    ------
    MXNetError
        Naming every file that is missing and what to do.
    """
    param_name = '%s-%04d.params' % (prefix, epoch)
    state_name = '%s-%04d.states' % (prefix, epoch)
    symbol_name = '%s-symbol.json' % prefix
    have = {p: os.path.exists(p) for p in (symbol_name, param_name, state_name)}
    missing = [p for p in ((symbol_name,) if symbol else ()) + (param_name,) if not have[p]]
    if load_optimizer_states and not have[state_name]:
        missing.append(state_name)
    if not missing:
        return param_name, state_name
    if not have[param_name]:
        why = ("its optimizer states are there without it: a save_checkpoint that was "
               "interrupted leaves this, and the epoch is not a checkpoint; load an "
               "earlier epoch" if have[state_name] else
               "no checkpoint was saved for this epoch under this prefix")
    elif symbol and not have[symbol_name]:
        why = "the symbol is written by save_checkpoint beside the parameters"
    else:
        why = ("the checkpoint was saved without optimizer states "
               "(save_optimizer_states=False, or mxnet's do_checkpoint, which saves the "
               "parameters only); load it with load_optimizer_states=False to start the "
               "optimizer afresh")
    raise MXNetError(f"checkpoint {prefix!r} epoch {epoch} is incomplete: "
                     f"{' and '.join(repr(p) for p in missing)} "
                     f"{'is' if len(missing) == 1 else 'are'} missing ({why})")


def _on_cpu(v):
    if hasattr(v, "as_in_context"):
        return v.as_in_context(cpu())
    return v.detach().cpu() if hasattr(v, "detach") else v


def load_params(prefix, epoch):
    """Load ``prefix-%04d.params`` into ``(arg_params, aux_params)``."""
    fname = "%s-%04d.params" % (prefix, epoch)
    save_dict = nd.load(fname)
    arg_params = {}
    aux_params = {}
    if not save_dict:
        _LOG.warning("Params file '%s' is empty", fname)
        return (arg_params, aux_params)
    if not isinstance(save_dict, dict):
        raise MXNetError(f"{fname!r} holds {len(save_dict)} arrays without names: a "
                         f"checkpoint's parameters are saved with 'arg:' / 'aux:' keys")
    for k, v in save_dict.items():
        if ":" not in k:
            raise MXNetError(f"{fname!r}: key {k!r} has no 'arg:' or 'aux:' prefix, so it "
                             f"is not a checkpoint's parameter file")
        tp, name = k.split(":", 1)
        if tp == "arg":
            arg_params[name] = v
        if tp == "aux":
            aux_params[name] = v
    return (arg_params, aux_params)


def load_checkpoint(prefix, epoch):
    """Load a checkpoint: ``(symbol, arg_params, aux_params)``."""
    from compiler import symbol as sym
    checkpoint_files(prefix, epoch)
    symbol = sym.load('%s-symbol.json' % prefix)
    arg_params, aux_params = load_params(prefix, epoch)
    return (symbol, arg_params, aux_params)
