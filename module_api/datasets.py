"""The data set helpers of ``mx.test_utils`` (``get_mnist``, ``get_mnist_ubyte``,
``get_mnist_iterator``, ``get_cifar10``), reading local files.

mxnet 1.9.1 downloads these files from its servers. symtriton never downloads:
it finds them on disk and says where it looked when they are not there. The
places, in order (the first that holds every file a helper needs wins):

1. the ``data_dir`` argument, when given;
2. ``./data`` (where mxnet's helpers put the files);
3. ``$SYMTRITON_DATA_DIR`` and its ``mnist`` / ``cifar`` subfolder;
4. ``$MXNET_HOME/datasets/mnist`` / ``cifar`` (``MXNET_HOME`` defaults to
   ``~/.mxnet``, as in mxnet).

MNIST files are the IDX files under their usual names
(``train-images-idx3-ubyte`` ...), gzipped (``.gz``) or not. The repository
ships the MNIST test set under ``examples/data/mnist`` (no training set).
"""
from __future__ import annotations

import gzip
import os
import shutil
import struct

import numpy as np

from compiler.errors import MXNetError

from .mnist_iter import MNISTIter

__all__ = ["get_mnist", "get_mnist_ubyte", "get_mnist_iterator", "get_cifar10",
           "data_dirs"]

MNIST_FILES = ("train-images-idx3-ubyte", "train-labels-idx1-ubyte",
               "t10k-images-idx3-ubyte", "t10k-labels-idx1-ubyte")
CIFAR_FILES = ("train.rec", "test.rec", "train.lst", "test.lst")


def data_dirs(kind, data_dir=None):
    """The folders searched for a data set, in order.

    Parameters
    ----------
    kind : str
        ``'mnist'`` or ``'cifar'``: the subfolder looked at under each root.
    data_dir : str, optional
        A folder to search first.

    Returns
    -------
    list of str
    """
    dirs = []
    if data_dir is not None:
        dirs += [data_dir, os.path.join(data_dir, kind)]
    dirs += [os.path.join("data", kind) if kind == "cifar" else "data"]
    env = os.environ.get("SYMTRITON_DATA_DIR")
    if env:
        dirs += [env, os.path.join(env, kind)]
    home = os.environ.get("MXNET_HOME", os.path.join("~", ".mxnet"))
    dirs.append(os.path.join(os.path.expanduser(home), "datasets", kind))
    seen, out = set(), []
    for d in dirs:
        key = os.path.abspath(d)
        if key not in seen:
            seen.add(key)
            out.append(d)
    return out


def _find(kind, names, data_dir, gz_ok, what):
    """``{name: path}`` from the first folder that holds all ``names``."""
    dirs = data_dirs(kind, data_dir)
    for d in dirs:
        found = {}
        for name in names:
            for candidate in ((name, name + ".gz") if gz_ok else (name,)):
                path = os.path.join(d, candidate)
                if os.path.isfile(path):
                    found[name] = path
                    break
        if len(found) == len(names):
            return found
    spelled = ", ".join(n + ("[.gz]" if gz_ok else "") for n in names)
    looked = "; ".join(os.path.abspath(d) for d in dirs)
    raise MXNetError(
        f"{what}: symtriton does not download data sets, and no folder holds all of "
        f"{spelled}. Looked in: {looked}. Put the files in one of them, pass "
        f"data_dir=DIR, or set SYMTRITON_DATA_DIR=DIR.")


def _read(path):
    with open(path, "rb") as f:
        gz = f.read(2) == b"\x1f\x8b"
    with (gzip.open if gz else open)(path, "rb") as f:
        return f.read()


def _mnist_part(images_path, labels_path):
    labels_raw, images_raw = _read(labels_path), _read(images_path)
    _, count = struct.unpack(">II", labels_raw[:8])
    label = np.frombuffer(labels_raw, dtype=np.int8, count=count, offset=8)
    _, n, rows, cols = struct.unpack(">IIII", images_raw[:16])
    image = np.frombuffer(images_raw, dtype=np.uint8, count=n * rows * cols, offset=16)
    image = image.reshape(n, 1, rows, cols).astype(np.float32) / 255
    return label, image


def get_mnist(data_dir=None):
    """MNIST as numpy arrays, as mxnet's ``test_utils.get_mnist`` returns them.

    Parameters
    ----------
    data_dir : str, optional
        A folder to search first (see the module docstring for the others).

    Returns
    -------
    dict
        ``train_data`` / ``test_data``: float32 ``(N, 1, 28, 28)`` in ``[0, 1]``
        (pixels / 255); ``train_label`` / ``test_label``: int8 ``(N,)``.

    Raises
    ------
    MXNetError
        If no folder holds the four IDX files; the message lists the folders.
    """
    files = _find("mnist", MNIST_FILES, data_dir, True, "get_mnist")
    train_lbl, train_img = _mnist_part(files[MNIST_FILES[0]], files[MNIST_FILES[1]])
    test_lbl, test_img = _mnist_part(files[MNIST_FILES[2]], files[MNIST_FILES[3]])
    return {'train_data': train_img, 'train_label': train_lbl,
            'test_data': test_img, 'test_label': test_lbl}


def get_mnist_ubyte(data_dir=None):
    """Make sure ``./data`` holds MNIST's four uncompressed IDX files, as mxnet's
    ``get_mnist_ubyte`` does (it downloads them; this copies them, unzipping
    ``.gz`` files, from the first folder that holds them all).

    Parameters
    ----------
    data_dir : str, optional
        A folder to search first.

    Raises
    ------
    MXNetError
        If no folder holds the four files.
    """
    if all(os.path.isfile(os.path.join("data", n)) for n in MNIST_FILES):
        return
    files = _find("mnist", MNIST_FILES, data_dir, True, "get_mnist_ubyte")
    os.makedirs("data", exist_ok=True)
    for name, path in files.items():
        target = os.path.join("data", name)
        if os.path.abspath(path) == os.path.abspath(target):
            continue
        tmp = f"{target}.tmp-{os.getpid()}"
        with open(tmp, "wb") as f:
            f.write(_read(path))
        os.replace(tmp, target)


def get_mnist_iterator(batch_size, input_shape, num_parts=1, part_index=0, data_dir=None):
    """Training and validation ``MNISTIter`` over ``./data``, as mxnet's helper.

    Parameters
    ----------
    batch_size : int
        Examples per batch.
    input_shape : tuple
        ``(1, 28, 28)`` for images, anything of another length (``(784,)``) for
        flat rows.
    num_parts, part_index : int
        The part of the data to read (distributed training).
    data_dir : str, optional
        A folder to search first for the files (see ``get_mnist_ubyte``).

    Returns
    -------
    tuple of MNISTIter
        ``(train, val)``, both shuffled once as ``MNISTIter`` does by default
        (mxnet's helper passes ``shuffle=True`` for training only).
    """
    get_mnist_ubyte(data_dir)
    flat = len(input_shape) != 3
    train = MNISTIter(image="data/train-images-idx3-ubyte", label="data/train-labels-idx1-ubyte",
                      input_shape=input_shape, batch_size=batch_size, shuffle=True, flat=flat,
                      num_parts=num_parts, part_index=part_index)
    val = MNISTIter(image="data/t10k-images-idx3-ubyte", label="data/t10k-labels-idx1-ubyte",
                    input_shape=input_shape, batch_size=batch_size, flat=flat,
                    num_parts=num_parts, part_index=part_index)
    return train, val


def get_cifar10(data_dir=None):
    """Make sure ``./data/cifar`` holds CIFAR-10's RecordIO files (``train.rec``,
    ``test.rec``, ``train.lst``, ``test.lst``), as mxnet's ``get_cifar10`` does
    (it downloads them; this copies them from the first folder that holds them).

    Parameters
    ----------
    data_dir : str, optional
        A folder to search first.

    Raises
    ------
    MXNetError
        If no folder holds the four files.
    """
    target_dir = os.path.join("data", "cifar")
    if all(os.path.isfile(os.path.join(target_dir, n)) for n in CIFAR_FILES):
        return
    files = _find("cifar", CIFAR_FILES, data_dir, False, "get_cifar10")
    os.makedirs(target_dir, exist_ok=True)
    for name, path in files.items():
        target = os.path.join(target_dir, name)
        if os.path.abspath(path) != os.path.abspath(target):
            shutil.copyfile(path, target + ".tmp")
            os.replace(target + ".tmp", target)
