"""``mx.image.ImageIter``: batches of decoded, augmented images, as mxnet 1.9.1's.

Sources: a RecordIO file (``path_imgrec``, with ``path_imgidx`` for random
access, shuffling and parts), an image list file (``path_imglist``: lines of
``index<TAB>label(s)<TAB>path`` under ``path_root``), or ``imglist`` (a list
of ``[label(s), path]``). Data is ``(batch_size, C, H, W)`` float32; labels
``(batch_size,)`` or ``(batch_size, label_width)``. ``last_batch_handle``:
``'pad'`` (the last batch is completed from the start; ``pad`` counts those),
``'discard'`` or ``'roll_over'`` (the rest opens the next epoch's first
batch). Shuffling (``random.shuffle`` on each reset) and the augmenters draw
from Python's ``random``, as mxnet's.
"""
import logging
import os
import random

import numpy as np
import torch

from runtime.data_desc import DataDesc
from runtime.ndarray import as_ndarray

from .. import recordio
from ..data_iter import DataBatch, DataIter
from .augmenters import CreateAugmenter
from .image import imdecode

_LOG = logging.getLogger(__name__)


def _labels_of_list(imglist, dtype):
    """``{key: (label array, path)}`` and the keys in order, from ``[label(s), path]`` items."""
    result, keys = {}, []
    for index, img in enumerate(imglist, start=1):
        if len(img) > 2:
            label = np.array(img[:-1], dtype=dtype)
        elif isinstance(img[0], (int, float, np.number)):
            label = np.array([img[0]], dtype=dtype)
        else:
            label = np.array(img[0], dtype=dtype)
        result[str(index)] = (label, img[-1])
        keys.append(str(index))
    return result, keys


def _read_list_file(path, dtype):
    result, keys = {}, []
    with open(path) as fin:
        for line in fin:
            fields = line.strip().split("\t")
            key = int(fields[0])
            result[key] = (np.array(fields[1:-1], dtype=dtype), fields[-1])
            keys.append(key)
    return result, keys


class ImageIter(DataIter):
    """Batches of images from RecordIO or image files, through augmenters.

    Parameters
    ----------
    batch_size : int
    data_shape : tuple
        ``(3, H, W)``.
    label_width : int
    path_imgrec, path_imgidx, path_imglist, path_root : str, optional
    shuffle : bool
    part_index, num_parts : int
        Keep part ``part_index`` of ``num_parts`` (needs an index or a list).
    aug_list : list of Augmenter, optional
        Default: ``CreateAugmenter(data_shape, **kwargs)``.
    imglist : list, optional
    data_name, label_name : str
    dtype : str
        The labels' type.
    last_batch_handle : str
        ``'pad'``, ``'discard'`` or ``'roll_over'``.
    """

    def __init__(self, batch_size, data_shape, label_width=1, path_imgrec=None,
                 path_imglist=None, path_root=None, path_imgidx=None, shuffle=False,
                 part_index=0, num_parts=1, aug_list=None, imglist=None, data_name="data",
                 label_name="softmax_label", dtype="float32", last_batch_handle="pad", **kwargs):
        super(ImageIter, self).__init__(batch_size)
        assert path_imgrec or path_imglist or (isinstance(imglist, list))
        assert dtype in ["int32", "float32", "int64", "float64"], dtype + " label not supported"
        self.imgrec, self.imgidx, imgkeys = None, None, None
        if path_imgrec:
            if path_imgidx:
                self.imgrec = recordio.MXIndexedRecordIO(path_imgidx, path_imgrec, "r")
                self.imgidx = list(self.imgrec.keys)
            else:
                self.imgrec = recordio.MXRecordIO(path_imgrec, "r")
        self.imglist = None
        if path_imglist:
            self.imglist, imgkeys = _read_list_file(path_imglist, dtype)
        elif isinstance(imglist, list):
            self.imglist, imgkeys = _labels_of_list(imglist, dtype)
        self.path_root = path_root
        self.check_data_shape(data_shape)
        self.data_shape, self.label_width, self.shuffle = tuple(data_shape), label_width, shuffle
        label_shape = (batch_size, label_width) if label_width > 1 else (batch_size,)
        self.provide_data = [DataDesc(data_name, (batch_size,) + self.data_shape)]
        self.provide_label = [DataDesc(label_name, label_shape)]
        self.label_dtype = dtype
        self.seq = self._sequence(imgkeys, shuffle, num_parts, part_index, path_imgidx)
        self.auglist = CreateAugmenter(data_shape, **kwargs) if aug_list is None else aug_list
        self.last_batch_handle = last_batch_handle
        self.num_image = len(self.seq) if self.seq is not None else None
        self.cur, self._allow_read, self._cache = 0, True, None
        self.reset()

    def _sequence(self, imgkeys, shuffle, num_parts, part_index, path_imgidx):
        if self.imgrec is None:
            seq = imgkeys
        elif shuffle or num_parts > 1 or path_imgidx:
            assert self.imgidx is not None, "shuffle and num_parts > 1 need path_imgidx"
            seq = self.imgidx
        else:
            return None
        if num_parts > 1:
            assert part_index < num_parts
            count = len(seq) // num_parts
            seq = seq[part_index * count:(part_index + 1) * count]
        return list(seq)

    def reset(self):
        """Rewind (and reshuffle with ``shuffle``); a rolled-over rest is kept for the next
        epoch's first batch."""
        if self.seq is not None and self.shuffle:
            random.shuffle(self.seq)
        if self.last_batch_handle != "roll_over" or self._cache is None:
            if self.imgrec is not None:
                self.imgrec.reset()
            self.cur = 0
            self._allow_read = True

    def hard_reset(self):
        """Rewind (reshuffling) and drop a rolled-over rest."""
        if self.seq is not None and self.shuffle:
            random.shuffle(self.seq)
        if self.imgrec is not None:
            self.imgrec.reset()
        self.cur = 0
        self._allow_read = True
        self._cache = None

    def next_sample(self):
        """The next ``(label, encoded image)``; StopIteration at the end (rewound, as mxnet)."""
        if not self._allow_read:
            raise StopIteration
        if self.seq is None:
            s = self.imgrec.read()
            if s is None:
                if self.last_batch_handle != "discard":
                    self.imgrec.reset()
                raise StopIteration
            header, img = recordio.unpack(s)
            return header.label, img
        if self.cur >= self.num_image:
            if self.last_batch_handle != "discard":
                self.cur = 0
            raise StopIteration
        idx = self.seq[self.cur]
        self.cur += 1
        if self.imgrec is not None:
            header, img = recordio.unpack(self.imgrec.read_idx(idx))
            return (header.label if self.imglist is None else self.imglist[idx][0]), img
        label, fname = self.imglist[idx]
        return label, self.read_image(fname)

    def _batchify(self, batch_data, batch_label, start=0):
        i = start
        try:
            while i < self.batch_size:
                label, s = self.next_sample()
                try:
                    data = self.imdecode(s)
                    self.check_valid_image(data)
                except RuntimeError as err:
                    _LOG.debug("Invalid image, skipping: %s", err)
                    continue
                data = self.augmentation_transform(data)
                batch_data[i] = self.postprocess_data(data)
                batch_label[i] = torch.as_tensor(np.asarray(label, np.float64)
                                                 ).reshape(batch_label[i].shape)
                i += 1
        except StopIteration:
            if not i:
                raise
        return i

    def next(self):
        """The next DataBatch."""
        if self._cache is not None:
            batch_data, batch_label, i = self._cache
        else:
            batch_data = torch.zeros((self.batch_size,) + self.data_shape)
            batch_label = torch.zeros(self.provide_label[0].shape,
                                      dtype=getattr(torch, self.label_dtype))
            i = self._batchify(batch_data, batch_label)
        pad = self.batch_size - i
        if pad:
            if self.last_batch_handle == "discard":
                raise StopIteration
            if self.last_batch_handle == "roll_over" and self._cache is None:
                self._cache = (batch_data, batch_label, i)
                raise StopIteration
            self._batchify(batch_data, batch_label, i)
            if self.last_batch_handle == "pad":
                self._allow_read = False
            else:
                self._cache = None
        return DataBatch([as_ndarray(batch_data)], [as_ndarray(batch_label)], pad=pad)

    def check_data_shape(self, data_shape):
        """``data_shape`` must be ``(3, H, W)``."""
        if not len(data_shape) == 3:
            raise ValueError("data_shape should have length 3, with dimensions CxHxW")
        if not data_shape[0] == 3:
            raise ValueError("This iterator expects inputs to have 3 channels.")

    def check_valid_image(self, data):
        """An image must have pixels."""
        if len(data.shape) == 0 or data.shape[0] == 0:
            raise RuntimeError("Data shape is wrong")

    def imdecode(self, s):
        """Decode an image (a RuntimeError names the image that is broken)."""
        try:
            return imdecode(s)
        except Exception as err:  # noqa: BLE001  (as mxnet: any decoding failure skips)
            raise RuntimeError(f"Broken image at position {self.cur}: {err}") from None

    def read_image(self, fname):
        """The bytes of ``path_root/fname``."""
        with open(os.path.join(self.path_root or "", fname), "rb") as fin:
            return fin.read()

    def augmentation_transform(self, data):
        """Apply the augmenters in order."""
        for aug in self.auglist:
            data = aug(data)
        return data

    def postprocess_data(self, datum):
        """HWC -> CHW."""
        return datum.as_subclass(torch.Tensor).permute(2, 0, 1)
