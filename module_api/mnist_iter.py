"""``mx.io.MNISTIter``: mxnet 1.9.1's C++ MNIST iterator, in Python.

What it does, as mxnet does it:

* reads an IDX image file (magic, count, rows, cols, then one byte per pixel) and an
  IDX label file (magic, count, then one byte per label);
* keeps part ``part_index`` of ``num_parts`` (``start = int(count / num_parts *
  part_index)`` in double precision, as mxnet computes it);
* scales pixels by ``1 / 256`` (not 255) to float32;
* shuffles once, when it is made (``shuffle=True``, the default), never on ``reset``;
* hands out ``(batch_size, 1, rows, cols)`` data (``(batch_size, rows * cols)``
  with ``flat=True``) and ``(batch_size,)`` float32 labels, named ``data`` and
  ``softmax_label`` (``data_name`` / ``label_name``);
* drops a last batch that would be incomplete (``pad`` is always 0).

* shuffles in exactly mxnet's order: ``std::shuffle`` over ``std::mt19937(seed)``
  as the libstdc++ of mxnet 1.9.1's wheel implements it (one division-based
  ``uniform_int_distribution`` draw per position; checked against mxnet on 60,000
  examples), so a seed gives the batches mxnet gives.

Differences, written down: files may also be gzipped (``.gz``, read as mxnet reads
the uncompressed files); ``prefetch_buffer`` and ``ctx`` are accepted and have
nothing to do (the whole part is in memory); ``dtype`` must be float32 like every
array here.
"""
from __future__ import annotations

import gzip
import logging
import os
import struct

import numpy as np
import torch

from runtime.data_desc import DataDesc
from runtime.ndarray import as_ndarray

from .data_iter import DataBatch, DataIter

_IMAGE_MAGIC, _LABEL_MAGIC = 2051, 2049
_LOG = logging.getLogger(__name__)

# Parameters of mxnet 1.9.1's C++ iterators (src/io: the image, batch, normalize and
# prefetch parameter structs). mxnet's MNISTIter reads its parameters with
# ``InitAllowUnknown``, so it takes any keyword and ignores those it does not use; the
# example programs pass some of these (``data_shape``). They are ignored here quietly;
# any other name is ignored too, with a warning, since it is most likely a typo.
_CPP_ITER_PARAMS = frozenset(
    "data_shape label_width path_imglist path_imgrec path_imgidx aug_seq "
    "preprocess_threads verbose device_id shuffle_chunk_size shuffle_chunk_seed seed_aug "
    "round_batch mirror rand_mirror rand_crop mean_img mean_r mean_g mean_b mean_a std_r "
    "std_g std_b std_a scale max_random_contrast max_random_illumination resize "
    "inter_method max_rotate_angle max_aspect_ratio min_aspect_ratio max_shear_ratio "
    "max_crop_size min_crop_size max_random_scale min_random_scale fill_value pad "
    "random_h random_s random_l rotate rotate_list input_shape label_shape".split())


def _ignore_arguments(kwargs):
    """Accept keyword arguments MNISTIter has no use for, as mxnet does.

    Parameters
    ----------
    kwargs : dict
        The extra keyword arguments. Names that mxnet's other C++ iterators
        declare are ignored quietly; others are ignored with a warning on this
        module's logger.
    """
    unknown = sorted(k for k in kwargs if k not in _CPP_ITER_PARAMS)
    if unknown:
        _LOG.warning("MNISTIter: ignoring argument(s) %s, which it does not take (mxnet "
                     "ignores unknown iterator arguments too)", unknown)


def _read_idx(path, magic, what):
    """The header integers and the payload bytes of an IDX file (gzipped or not)."""
    if not os.path.exists(path):
        raise FileNotFoundError(
            f"MNISTIter: the {what} file {path!r} does not exist; pass {what}=PATH to an "
            f"IDX file such as t10k-{'images-idx3' if what == 'image' else 'labels-idx1'}"
            f"-ubyte (gzipped or not)")
    with open(path, "rb") as f:
        head = f.read(2)
    opener = gzip.open if head == b"\x1f\x8b" else open
    with opener(path, "rb") as f:
        data = f.read()
    n_ints = 4 if magic == _IMAGE_MAGIC else 2
    if len(data) < 4 * n_ints:
        raise ValueError(f"MNISTIter: {path} is too short for an IDX {what} file")
    ints = struct.unpack(">" + "I" * n_ints, data[:4 * n_ints])
    if ints[0] != magic:
        raise ValueError(f"MNISTIter: {path} is not an IDX {what} file (magic {ints[0]}, "
                         f"expected {magic}); did you swap image= and label=?")
    return ints[1:], data[4 * n_ints:]


def _part(count, num_parts, part_index):
    """``[start, end)`` of one part, with mxnet's double-precision arithmetic."""
    return (int(count / num_parts * part_index), int(count / num_parts * (part_index + 1)))


def std_shuffle_order(n: int, seed: int) -> np.ndarray:
    """The permutation ``std::shuffle(first, first + n, std::mt19937(seed))`` leaves
    ``[0, n)`` in, as mxnet 1.9.1's wheel (its libstdc++) computes it.

    ``mt19937`` is numpy's legacy ``RandomState`` (the same generator and seeding);
    each position ``i = 1 .. n-1`` swaps with ``j`` drawn from ``[0, i]`` by
    ``uniform_int_distribution``'s downscaling: ``scaling = (2**32 - 1) // (i + 1)``,
    redraw while ``r >= (i + 1) * scaling``, ``j = r // scaling``.
    """
    rs = np.random.RandomState(int(seed) & 0xFFFFFFFF)
    draws, k = [], 0
    order = list(range(n))
    for i in range(1, n):
        scaling = 0xFFFFFFFF // (i + 1)
        past = (i + 1) * scaling
        while True:
            if k == len(draws):
                draws, k = rs.randint(0, 2 ** 32, size=4096, dtype=np.uint64).tolist(), 0
            r = draws[k]
            k += 1
            if r < past:
                break
        j = r // scaling
        order[i], order[j] = order[j], order[i]
    return np.asarray(order, dtype=np.int64)


class MNISTIter(DataIter):
    """Iterating on the MNIST dataset (IDX files), as ``mx.io.MNISTIter``.

    Parameters
    ----------
    image : str
        The IDX image file (default ``./train-images-idx3-ubyte``); may be gzipped.
    label : str
        The IDX label file (default ``./train-labels-idx1-ubyte``); may be gzipped.
    batch_size : int
        Examples per batch (default 128). A last incomplete batch is dropped.
    shuffle : bool
        Shuffle the examples once, when the iterator is made (default True).
    flat : bool
        Hand out ``(batch, rows * cols)`` instead of ``(batch, 1, rows, cols)``.
    seed : int
        Seed of the shuffle.
    silent : bool
        Do not log what was loaded.
    num_parts, part_index : int
        Read part ``part_index`` of ``num_parts`` equal contiguous parts (one per
        worker in distributed training).
    data_name, label_name : str
        Names of the data and label (``data``, ``softmax_label``).
    prefetch_buffer, ctx : optional
        Accepted, as mxnet's prefetcher takes them; everything is in memory.
    dtype : str
        ``float32`` (the only dtype here).
    **kwargs
        Accepted and ignored, as mxnet ignores arguments its MNIST iterator does
        not use (``data_shape=(784,)`` in mxnet's examples); a name no mxnet
        iterator declares is logged as a warning.
    """

    def __init__(self, image="./train-images-idx3-ubyte", label="./train-labels-idx1-ubyte",
                 batch_size=128, shuffle=True, flat=False, seed=0, silent=False, num_parts=1,
                 part_index=0, data_name="data", label_name="softmax_label",
                 prefetch_buffer=4, ctx="cpu", dtype=None, **kwargs):
        _ignore_arguments(kwargs)
        if dtype not in (None, "float32", np.float32):
            raise ValueError(f"MNISTIter: dtype={dtype!r}: symtriton computes in float32 "
                             f"only for now; leave dtype unset")
        batch_size, num_parts, part_index = int(batch_size), int(num_parts), int(part_index)
        super().__init__(batch_size)
        if batch_size < 1:
            raise ValueError(f"MNISTIter: batch_size must be at least 1, got {batch_size}")
        if num_parts < 1 or not 0 <= part_index < num_parts:
            raise ValueError(f"MNISTIter: need num_parts >= 1 and 0 <= part_index < "
                             f"num_parts, got num_parts={num_parts}, part_index={part_index}")
        (count, rows, cols), pixels = _read_idx(image, _IMAGE_MAGIC, "image")
        (n_labels,), labels = _read_idx(label, _LABEL_MAGIC, "label")
        lo, hi = _part(count, num_parts, part_index)
        llo, lhi = _part(n_labels, num_parts, part_index)
        if hi - lo != lhi - llo:
            raise ValueError(f"MNISTIter: {image} holds {count} images and {label} {n_labels} "
                             f"labels; they must describe the same examples")
        size = rows * cols
        if len(pixels) < hi * size or len(labels) < lhi:
            raise ValueError(f"MNISTIter: {image} or {label} is shorter than its header says")
        img = np.frombuffer(pixels, dtype=np.uint8, count=(hi - lo) * size, offset=lo * size)
        img = img.reshape(hi - lo, rows, cols).astype(np.float32) * np.float32(1.0 / 256.0)
        lab = np.frombuffer(labels, dtype=np.uint8, count=lhi - llo, offset=llo)
        lab = lab.astype(np.float32)
        if shuffle:
            order = std_shuffle_order(len(lab), seed)
            img, lab = img[order], lab[order]
        shape = (batch_size, size) if flat else (batch_size, 1, rows, cols)
        self._images = torch.from_numpy(np.ascontiguousarray(img).reshape((-1,) + shape[1:]))
        self._labels = torch.from_numpy(np.ascontiguousarray(lab))
        self.batch_size = batch_size
        self._loc = 0
        self.provide_data = [DataDesc(data_name, shape, np.float32, "NCHW")]
        self.provide_label = [DataDesc(label_name, (batch_size,), np.float32, "NCHW")]
        if not silent:
            # mxnet's line (its shapes print without spaces), on this module's logger
            _LOG.info("MNISTIter: load %d images, shuffle=%d, shape=(%s)", len(lab),
                      int(bool(shuffle)), ",".join(str(d) for d in shape))

    def reset(self):
        """Rewind to the first batch (the order stays: mxnet shuffles only once)."""
        self._loc = 0

    def iter_next(self):
        """Move to the next batch; False when a whole batch is no longer left."""
        if self._loc + self.batch_size > len(self._labels):
            return False
        self._loc += self.batch_size
        return True

    def next(self):
        """The next ``DataBatch``; raises StopIteration at the end of the part."""
        if not self.iter_next():
            raise StopIteration
        return DataBatch(data=self.getdata(), label=self.getlabel(), pad=0, index=None,
                         provide_data=self.provide_data, provide_label=self.provide_label)

    def getdata(self):
        lo = self._loc - self.batch_size
        return [as_ndarray(self._images[lo:self._loc].clone())]

    def getlabel(self):
        lo = self._loc - self.batch_size
        return [as_ndarray(self._labels[lo:self._loc].clone())]

    def getpad(self):
        return 0

    def getindex(self):
        return None
