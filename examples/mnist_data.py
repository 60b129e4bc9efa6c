"""The MNIST split the MNIST example and benchmark train on: the official test set
(``examples/data/mnist``, see its PROVENANCE.md), images 0-7,999 for training and
8,000-9,999 for validation, written as uncompressed IDX files, which is what
mxnet's ``MNISTIter`` reads (symtriton's reads gzipped files too), so mxnet and
symtriton read the very same files."""
from __future__ import annotations

import gzip
import os
import struct

DEFAULT_DIR = os.path.join(os.path.dirname(os.path.abspath(__file__)), "data", "mnist")
IMAGES, LABELS = "t10k-images-idx3-ubyte.gz", "t10k-labels-idx1-ubyte.gz"
TRAIN_EXAMPLES = 8000


def split_files(data_dir: str = DEFAULT_DIR, out_dir: str = None) -> dict:
    """Write (once) and return the paths of the split's four IDX files.

    Parameters
    ----------
    data_dir : str
        Holds ``t10k-images-idx3-ubyte.gz`` and ``t10k-labels-idx1-ubyte.gz``.
    out_dir : str, optional
        Where the split goes (default ``<data_dir>/split``).

    Returns
    -------
    dict with ``train_images``, ``train_labels``, ``val_images``, ``val_labels``.
    """
    out_dir = out_dir or os.path.join(data_dir, "split")
    paths = {f"{part}_{kind}": os.path.join(out_dir, f"{part}-{kind}-idx{3 if kind == 'images' else 1}-ubyte")
             for part in ("train", "val") for kind in ("images", "labels")}
    if all(os.path.exists(p) for p in paths.values()):
        return paths
    for name in (IMAGES, LABELS):
        if not os.path.exists(os.path.join(data_dir, name)):
            raise FileNotFoundError(f"{os.path.join(data_dir, name)} is missing: pass "
                                    f"--data-dir DIR holding {IMAGES} and {LABELS}")
    with gzip.open(os.path.join(data_dir, IMAGES), "rb") as f:
        magic, count, rows, cols = struct.unpack(">IIII", f.read(16))
        pixels = f.read()
    with gzip.open(os.path.join(data_dir, LABELS), "rb") as f:
        lmagic, lcount = struct.unpack(">II", f.read(8))
        labels = f.read()
    if (magic, lmagic) != (2051, 2049) or count != lcount or count <= TRAIN_EXAMPLES:
        raise ValueError(f"{data_dir}: not the MNIST test set's IDX files")
    os.makedirs(out_dir, exist_ok=True)
    size = rows * cols
    for part, lo, hi in (("train", 0, TRAIN_EXAMPLES), ("val", TRAIN_EXAMPLES, count)):
        _write(paths[f"{part}_images"], struct.pack(">IIII", 2051, hi - lo, rows, cols)
               + pixels[lo * size:hi * size])
        _write(paths[f"{part}_labels"], struct.pack(">II", 2049, hi - lo) + labels[lo:hi])
    return paths


def _write(path, data):
    tmp = f"{path}.tmp-{os.getpid()}"      # whole files only, also with two writers
    with open(tmp, "wb") as f:
        f.write(data)
    os.replace(tmp, path)
