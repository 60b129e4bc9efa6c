"""``mx.gluon.utils``: mxnet 1.9.1's array helpers, for Module API programs.

``clip_global_norm`` rescales arrays in place (a Module's
``_exec_group.grad_arrays``, as mxnet's word_lm RNN example does);
``split_data`` / ``split_and_load`` cut a batch over contexts; ``check_sha1``
and ``download`` handle data files.
"""
from __future__ import annotations

import hashlib
import os
import shutil
import tempfile
import urllib.error
import urllib.request
import warnings

import numpy as np
import torch

from compiler.errors import MXNetError
from runtime.context import Context
from runtime.ndarray import NDArray, as_ndarray

from .. import ndarray as nd
from runtime.ndarray import torch_dtype

__all__ = ["split_data", "split_and_load", "clip_global_norm", "check_sha1", "download"]


def split_data(data, num_slice, batch_axis=0, even_split=True):
    """Split an NDArray into ``num_slice`` slices along ``batch_axis``.

    Parameters
    ----------
    data : NDArray
        A batch of data.
    num_slice : int
        How many slices.
    batch_axis : int
        The axis to cut (default 0).
    even_split : bool
        Require every slice to be the same size (default True); otherwise the
        first ``size % num_slice`` slices get one element more.

    Returns
    -------
    list of NDArray
        ``num_slice`` slices (a list also for one slice). Slices along axis 0
        share memory with ``data``; along another axis they are copies.

    Raises
    ------
    ValueError
        If ``even_split`` and ``num_slice`` does not divide the axis.
    """
    size = data.shape[batch_axis]
    if even_split and size % num_slice != 0:
        raise ValueError(
            f"data with shape {data.shape} cannot be evenly split into {num_slice} slices "
            f"along axis {batch_axis}. Use a batch size that's multiple of {num_slice} or "
            f"set even_split=False to allow uneven partitioning of data.")
    each, extra = divmod(size, num_slice)
    bounds = np.cumsum([0] + [each + 1] * extra + [each] * (num_slice - extra))
    ctx = getattr(data, "context", None)
    out = []
    for lo, hi in zip(bounds[:-1], bounds[1:]):
        part = data.narrow(batch_axis, int(lo), int(hi - lo))
        out.append(as_ndarray(part if batch_axis == 0 else part.contiguous(), ctx))
    return out


def split_and_load(data, ctx_list, batch_axis=0, even_split=True):
    """Split ``data`` along ``batch_axis`` and put slice ``i`` on ``ctx_list[i]``.

    Parameters
    ----------
    data : NDArray or array_like
        A batch of data; anything else becomes an NDArray (float32 by default)
        on ``ctx_list[0]`` first.
    ctx_list : list of Context
        One context per slice.
    batch_axis : int
        The axis to cut (default 0).
    even_split : bool
        Require equal slices (default True).

    Returns
    -------
    list of NDArray
        One per context.
    """
    if not isinstance(data, NDArray):
        data = nd.array(data, ctx=ctx_list[0])
    if len(ctx_list) == 1:
        return [data.as_in_context(ctx_list[0])]
    slices = split_data(data, len(ctx_list), batch_axis, even_split)
    return [part.as_in_context(ctx) for part, ctx in zip(slices, ctx_list)]


def clip_global_norm(arrays, max_norm, check_isfinite=True):
    """Rescale ``arrays`` in place so that their joint 2-norm is at most ``max_norm``.

    The norm is ``sqrt(sum over arrays of sum(x * x))``; every array is
    multiplied by ``min(1, max_norm / (norm + 1e-8))``.

    Parameters
    ----------
    arrays : list of NDArray
        The arrays (for a Module: the gradients in ``_exec_group.grad_arrays``).
    max_norm : float
        The largest joint norm left.
    check_isfinite : bool
        Warn if the norm is nan or inf, and return it as a Python-side float
        (default True); otherwise return it as an NDArray of shape ``(1,)``.

    Returns
    -------
    numpy.float32 or NDArray
        The joint norm before rescaling.
    """
    assert len(arrays) > 0
    ctx = arrays[0].context
    first = arrays[0]
    squares = [torch.dot(a.reshape(-1), a.reshape(-1)).to(first.device) for a in arrays]
    total = torch.sqrt(torch.stack(squares).sum()).reshape(1)
    if check_isfinite and not bool(torch.isfinite(total)):
        warnings.warn(UserWarning('nan or inf is detected. Clipping results will be '
                                  'undefined.'), stacklevel=2)
    scale = torch.clamp(max_norm / (total + 1e-8), max=1.0)
    with torch.no_grad():
        for a in arrays:
            a.mul_(scale.to(device=a.device, dtype=torch_dtype(a)))
    if check_isfinite:
        return total.detach().cpu().numpy()[0]       # a numpy scalar, as asscalar() gives
    return as_ndarray(total, ctx)


def check_sha1(filename, sha1_hash):
    """Whether a file's SHA-1 is ``sha1_hash``.

    Parameters
    ----------
    filename : str
        The file.
    sha1_hash : str
        The expected SHA-1, in hexadecimal digits.

    Returns
    -------
    bool
    """
    digest = hashlib.sha1()
    with open(filename, 'rb') as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest() == sha1_hash


def download(url, path=None, overwrite=False, sha1_hash=None, retries=5, verify_ssl=True):
    """Download ``url`` to a file, unless the file is already there (and matches).

    Parameters
    ----------
    url : str
        What to download.
    path : str, optional
        The file, or a directory to put it in under the URL's last part
        (default: that name in the current directory).
    overwrite : bool
        Download even if the file exists.
    sha1_hash : str, optional
        The expected SHA-1: an existing file that does not match is downloaded
        again, and a download that does not match is an error.
    retries : int
        Further attempts after a failed one.
    verify_ssl : bool
        Check the server's certificate (default True).

    Returns
    -------
    str
        The file's path.

    Raises
    ------
    MXNetError
        If the file is not there and cannot be downloaded (no network: the
        message names the URL and where to put the file by hand).
    """
    if path is None:
        fname = url.split('/')[-1]
        assert fname, "Can't construct file-name from this URL. Please set the `path` " \
            "option manually."
    else:
        path = os.path.expanduser(path)
        fname = os.path.join(path, url.split('/')[-1]) if os.path.isdir(path) else path
    assert retries >= 0, f"Number of retries should be at least 0, currently it's {retries}"
    if not verify_ssl:
        warnings.warn('Unverified HTTPS request is being made (verify_ssl=False). Adding '
                      'certificate verification is strongly advised.')
    if not (overwrite or not os.path.exists(fname)
            or (sha1_hash and not check_sha1(fname, sha1_hash))):
        return fname
    folder = os.path.dirname(os.path.abspath(fname))
    os.makedirs(folder, exist_ok=True)
    context = None
    if not verify_ssl:
        import ssl
        context = ssl._create_unverified_context()  # noqa: S323  (the caller asked)
    last = None
    for _ in range(retries + 1):
        fd, tmp = tempfile.mkstemp(dir=folder, prefix=".download-")
        try:
            with os.fdopen(fd, "wb") as out, \
                    urllib.request.urlopen(url, timeout=60, context=context) as response:
                shutil.copyfileobj(response, out)
            if sha1_hash and not check_sha1(tmp, sha1_hash):
                raise MXNetError(f"download: {url} was downloaded, but its content's SHA-1 "
                                 f"is not {sha1_hash}: the file on the server may have "
                                 f"changed")
            os.replace(tmp, fname)
            return fname
        except (urllib.error.URLError, OSError) as err:
            last = err
        finally:
            if os.path.exists(tmp):
                os.remove(tmp)
    raise MXNetError(f"download: cannot fetch {url} ({last}); this machine may be offline. "
                     f"Put the file at {os.path.abspath(fname)} by hand"
                     + (f" (SHA-1 {sha1_hash})" if sha1_hash else "") + " and run again.")
