"""``mx.io.ImageRecordIter``: mxnet 1.9.1's image RecordIO iterator in Python.

What it does, as mxnet's C++ iterator and its default augmenter do:

* reads image records (``mx.recordio.pack`` / ``im2rec``);
* decodes (3 channels, or gray for ``data_shape[0] == 1``) and augments as
  mxnet's default augmenter (:mod:`module_api.image_record_aug`): shorter-edge
  ``resize``, the affine warp (rotation, shear, scale, aspect), ``pad`` with
  ``fill_value``, the crops (``data_shape`` from the centre or at random with
  ``rand_crop``, after enlarging a small image; ``min/max_crop_size``;
  ``random_resized_crop``), colour jitter, HSL shifts and PCA noise;
* mirrors (``mirror``; at random with ``rand_mirror``), then writes
  ``(pixel - mean) * scale / std`` per channel (``mean_r/g/b``, ``std_r/g/b``,
  ``scale``; ``max_random_contrast`` / ``max_random_illumination`` as mxnet)
  in RGB order, ``(batch_size, C, H, W)`` float32;
* batches as mxnet's batch loader (:mod:`module_api.batch_loader`):
  ``round_batch`` completes the last batch from the start and the next epoch
  starts after the wrap;
* decodes a batch's images in ``preprocess_threads`` threads (Pillow decodes
  outside the GIL) while the previous batch is in use (one batch ahead);
* takes labels from ``path_imglist`` (``index label ... path`` lines, by the
  record's id) when given, else from the record: an array of exactly
  ``label_width`` values, or a scalar with ``label_width == 1``.

Differences, written down: pixels are Pillow's decoding and this module's
resizing (:mod:`module_api.image`: equal to mxnet's, or within a unit or two
for JPEG and bilinear / bicubic rounding); the random crops, mirrors and the
``shuffle`` order draw from numpy seeded by ``seed`` (same seed, same
batches; not mxnet's sequence); ``num_parts`` / ``part_index`` split the
records evenly by count (mxnet splits the file by bytes); without
``round_batch`` the last batch's ``pad`` counts its missing rows (mxnet 1.9.1
reports 0 there); unknown arguments are ignored with a warning.
"""
import logging
import os
from concurrent.futures import ThreadPoolExecutor

import numpy as np
import torch

from compiler.errors import MXNetError
from runtime import ndarray_io
from runtime.data_desc import DataDesc
from runtime.ndarray import as_ndarray

from . import _imagecodec, recordio
from .batch_loader import BatchLoader, batch_shape
from .data_iter import DataBatch, DataIter
from .image_record_aug import RecordAugmenter
from .mnist_iter import _CPP_ITER_PARAMS

_LOG = logging.getLogger(__name__)

_DEFAULTS = dict(
    path_imgrec="", path_imgidx="", path_imglist="", label_width=1, shuffle=False, seed=0,
    round_batch=True, preprocess_threads=4, num_parts=1, part_index=0, resize=-1,
    rand_crop=False, rand_mirror=False, mirror=False, mean_r=0.0, mean_g=0.0, mean_b=0.0,
    mean_a=0.0, std_r=1.0, std_g=1.0, std_b=1.0, std_a=1.0, scale=1.0, pad=0,
    fill_value=255, inter_method=1, max_random_contrast=0.0, max_random_illumination=0.0,
    data_name="data", label_name="softmax_label", dtype="float32", mean_img="", seed_aug=None,
    max_rotate_angle=0, max_shear_ratio=0.0, rotate=-1, rotate_list=(),
    max_random_scale=1.0, min_random_scale=1.0, max_aspect_ratio=0.0, min_aspect_ratio=None,
    max_img_size=1e10, min_img_size=0.0, random_resized_crop=False, max_random_area=1.0,
    min_random_area=1.0, max_crop_size=-1, min_crop_size=-1, brightness=0.0, contrast=0.0,
    saturation=0.0, pca_noise=0.0, random_h=0, random_s=0, random_l=0)
# accepted, with nothing to do here (threads, prefetching, devices, logging, chunked shuffle)
_IGNORED = {"prefetch_buffer", "ctx", "device_id", "verbose", "shuffle_chunk_size",
            "shuffle_chunk_seed", "aug_seq"}
_DTYPES = {"float32": np.float32, "uint8": np.uint8, "int8": np.int8}


def _check_arguments(kwargs):
    """mxnet's C++ iterators take any keyword (``InitAllowUnknown``); a name none of them
    declares is most likely a typo, so it is ignored with a warning."""
    known = set(_DEFAULTS) | _IGNORED | {"data_shape", "batch_size"} | _CPP_ITER_PARAMS
    unknown = sorted(set(kwargs) - known)
    if unknown:
        _LOG.warning("ImageRecordIter: ignoring argument(s) %s, which it does not take (mxnet "
                     "ignores unknown iterator arguments too)", unknown)


def _as_bool(value):
    return value.lower() in ("1", "true") if isinstance(value, str) else bool(value)


def _parse_arguments(kwargs):
    """The parameters (defaults filled in), ``data_shape`` and ``batch_size``, checked."""
    _check_arguments(kwargs)
    for key in ("data_shape", "batch_size"):
        if key not in kwargs:
            raise MXNetError(f"ImageRecordIter: the argument {key} is required")
    p = dict(_DEFAULTS)
    p.update({k: v for k, v in kwargs.items() if k in _DEFAULTS})
    for key in ("shuffle", "round_batch", "rand_crop", "rand_mirror", "mirror",
                "random_resized_crop"):
        p[key] = _as_bool(p[key])
    if p["dtype"] not in _DTYPES:
        raise MXNetError(f"ImageRecordIter: dtype {p['dtype']!r} is not one of "
                         f"{sorted(_DTYPES)}")
    data_shape = tuple(int(s) for s in kwargs["data_shape"])
    if len(data_shape) != 3 or data_shape[0] not in (1, 3):
        raise MXNetError(f"ImageRecordIter: data_shape must be (C, H, W) with C 1 or 3, "
                         f"got {data_shape}")
    return p, data_shape, int(kwargs["batch_size"])


class ImageRecordIter(DataIter):
    """Batches of images from a RecordIO file, decoded, augmented and normalized.

    Parameters
    ----------
    path_imgrec : str
        The ``.rec`` file.
    data_shape : tuple of int
        ``(C, H, W)`` of one image (C 3, or 1 for gray).
    batch_size : int
    path_imgidx : str, optional
        Its ``.idx`` file (record offsets; without it the file is scanned once).
    label_width : int
    shuffle : bool
        A new order each epoch (from ``seed``).
    round_batch : bool
    resize, pad, fill_value, inter_method, rand_crop, rand_mirror, mirror :
        Augmentation, as mxnet (see the module docstring).
    mean_r, mean_g, mean_b, std_r, std_g, std_b, scale : float
        Normalization: ``(pixel - mean) * scale / std``.
    preprocess_threads : int
        Threads that decode and augment.
    num_parts, part_index : int
        Read part ``part_index`` of ``num_parts`` (distributed training).
    data_name, label_name : str
    """

    def __init__(self, **kwargs):
        p, self.data_shape, batch_size = _parse_arguments(kwargs)
        super(ImageRecordIter, self).__init__(batch_size)
        self.p = p
        self._offsets = self._part(self._record_offsets(p), p)
        self._rng = np.random.RandomState(int(p["seed"]))
        self._augment = RecordAugmenter(p, self.data_shape)
        width, dtype = int(p["label_width"]), _DTYPES[p["dtype"]]
        dshape = (batch_size,) + self.data_shape
        lshape = batch_shape(batch_size, (width,))
        self._loader = BatchLoader(len(self._offsets), batch_size, p["round_batch"],
                                   [dshape[1:], lshape[1:]], [dtype, np.float32],
                                   "ImageRecordIter")
        self._pool = ThreadPoolExecutor(max(1, int(p["preprocess_threads"])))
        self._producer = ThreadPoolExecutor(1)          # prepares the next batch
        self._ahead, self._pad = None, None
        self._label_map = self._read_label_map(p["path_imglist"], width)
        self.provide_data = [DataDesc(p["data_name"], dshape, dtype, "NCHW")]
        self.provide_label = [DataDesc(p["label_name"], lshape, np.float32, "NCHW")]
        self._mean_img = None
        self._mean_img = self._mean_image()
        self._new_epoch()
        _LOG.info("ImageRecordIter: %s, %d images, %d threads for decoding", p["path_imgrec"],
                  len(self._offsets), int(p["preprocess_threads"]))

    @staticmethod
    def _record_offsets(p):
        path = p["path_imgrec"]
        if not path or not os.path.exists(path):
            raise MXNetError(f"ImageRecordIter: path_imgrec {path!r} does not exist")
        if p["path_imgidx"]:
            idx = recordio.MXIndexedRecordIO(p["path_imgidx"], path, "r")
            offsets = sorted(idx.idx.values())
            idx.close()
            return offsets
        return recordio._record_offsets(path)

    @staticmethod
    def _part(offsets, p):
        parts, index = int(p["num_parts"]), int(p["part_index"])
        if not 0 <= index < parts:
            raise MXNetError(f"ImageRecordIter: part_index {index} is not in [0, {parts})")
        n = len(offsets)
        return offsets[n * index // parts:n * (index + 1) // parts]

    def _new_epoch(self):
        order = self._rng.permutation(len(self._offsets)) if self.p["shuffle"] else None
        self._loader.reset(order)

    def reset(self):
        if self._ahead is not None:
            # a batch prepared but never handed out does not count: not even a wrapped one
            if self._ahead.result() is not None:
                self._loader.overflow = False
            self._ahead = None
        self._new_epoch()

    def _fetch(self, examples):
        with open(self.p["path_imgrec"], "rb") as f:
            records = []
            for i in examples:
                f.seek(self._offsets[i])
                records.append(recordio._read_record(f, self.p["path_imgrec"]))
        results = list(self._pool.map(self._one, records, self._seeds(examples)))
        labels = np.stack([r[1] for r in results])
        return (np.stack([r[0] for r in results]),
                labels.reshape((len(results),) + self._loader.buffers[1].shape[1:]))

    def _seeds(self, examples):
        """One generator seed per example: with ``seed_aug`` fixed per record (the same
        augmentation every epoch, as mxnet's re-seeding), else drawn from ``seed``'s."""
        if self.p["seed_aug"] is not None:
            return [(int(self.p["seed_aug"]) + int(i)) % 2 ** 32 for i in examples]
        return self._rng.randint(0, 2 ** 31, size=len(examples)).tolist()

    def _mean_image(self):
        """``mean_img``: the ``(C, H, W)`` mean image of that file (``mx.nd.save`` format),
        made from every image of this part (augmented, as mxnet does) and saved when the
        file does not exist."""
        path = self.p["mean_img"]
        if not path:
            return None
        if os.path.exists(path):
            arrays = ndarray_io.load(path)
            arrays = list(arrays.values()) if isinstance(arrays, dict) else list(arrays)
            if len(arrays) != 1 or len(arrays[0].shape) != 3:
                raise MXNetError(f"ImageRecordIter: Invalid mean image file format in "
                                 f"{path!r}: one (C, H, W) array expected")
            return arrays[0].as_subclass(torch.Tensor).numpy().astype(np.float32)
        _LOG.info("ImageRecordIter: cannot find %s: create mean image", path)
        total = np.zeros(self.data_shape, np.float64)
        for start in range(0, len(self._offsets), 256):
            chunk = list(range(start, min(start + 256, len(self._offsets))))
            total += self._fetch(chunk)[0].astype(np.float64).sum(0)
        mean = (total / max(1, len(self._offsets))).astype(np.float32)
        ndarray_io.save(path, {"mean_img": torch.from_numpy(mean)})
        return mean

    def _one(self, record, seed):
        """Decode, augment and normalize one record: ``(C, H, W)`` data and its label."""
        rng = np.random.default_rng(seed)       # a Generator: made in microseconds
        header, payload = recordio.unpack(record)
        channels = self.data_shape[0]
        img = _imagecodec.decode(payload, 1 if channels == 3 else 0)
        img = self._augment(img, rng)
        return self._normalize(img, rng), self._label(header)

    def _normalize(self, img, rng):
        """float32: ``(pixel - mean) * scale / std`` (with random contrast / illumination);
        uint8: the pixels; int8: ``pixel - round(mean)``, saturated. Then the mirror."""
        p, f32 = self.p, np.float32
        names = "rgb" if img.shape[2] == 3 else "r"
        mean = np.array([p["mean_" + c] for c in names], f32)
        if self._mean_img is not None:
            mean = self._mean_img.transpose(1, 2, 0)    # per pixel, before the mirror
        if p["dtype"] == "uint8":
            out = img
        elif p["dtype"] == "int8":
            out = np.clip(img.astype(np.int64) - np.rint(mean).astype(np.int64), -128, 127)
        else:
            contrast = (f32(rng.uniform()) * f32(p["max_random_contrast"]) * 2
                        - f32(p["max_random_contrast"]) + 1) * f32(p["scale"])
            illumination = (f32(rng.uniform()) * f32(p["max_random_illumination"]) * 2
                            - f32(p["max_random_illumination"])) * f32(p["scale"])
            std = np.array([p["std_" + c] for c in names], f32)
            out = (img.astype(f32) - mean) * (f32(contrast) / std) + f32(illumination) / std
        if p["mirror"] or (p["rand_mirror"] and rng.integers(0, 2)):
            out = out[:, ::-1]
        return np.ascontiguousarray(out.transpose(2, 0, 1))

    def _label(self, header):
        width = int(self.p["label_width"])
        if self._label_map is not None:
            if header.id not in self._label_map:
                raise MXNetError(f"ImageRecordIter: image id {header.id} is not in "
                                 f"path_imglist {self.p['path_imglist']!r}")
            return self._label_map[header.id]
        if header.flag > 0:
            if header.flag != width:
                raise MXNetError(f"ImageRecordIter: rec file provide {header.flag}-dimensional "
                                 f"label but label_width is set to {width}")
            return np.asarray(header.label, np.float32)
        if width != 1:
            raise MXNetError("ImageRecordIter: label_width must be 1 unless an imglist is "
                             "provided or the rec file is packed with multi dimensional label")
        return np.float32([header.label])

    @staticmethod
    def _read_label_map(path, width):
        """``{image index: labels}`` of an image list (``index label ... path`` lines)."""
        if not path:
            return None
        table = {}
        with open(path) as f:
            for n, line in enumerate(f):
                fields = line.split()
                if not fields:
                    continue
                if len(fields) < width + 1:
                    raise MXNetError(f"ImageRecordIter: Bad ImageList format: {path!r} line "
                                     f"{n + 1} has fewer than label_width={width} labels")
                table[int(fields[0])] = np.float32([float(v) for v in fields[1:width + 1]])
        return table

    # -- batches: the next one is prepared in the background while this one is used ---------

    def _produce(self):
        pad = self._loader.next_batch(self._fetch)
        if pad is None:
            return None
        return pad, [b.copy() for b in self._loader.buffers], self._loader.index.copy()

    def iter_next(self):
        ahead = self._ahead or self._producer.submit(self._produce)
        self._ahead = None
        result = ahead.result()
        if result is None:
            self._pad = None
            return False
        self._pad, self._batch, self._index = result
        self._ahead = self._producer.submit(self._produce)
        return True

    def next(self):
        if not self.iter_next():
            raise StopIteration
        return DataBatch(data=[self.getdata()], label=[self.getlabel()], pad=self._pad,
                         index=self.getindex(), provide_data=self.provide_data,
                         provide_label=self.provide_label)

    # as mxnet's C++ iterators (MXDataIter): one array each, not a list
    def getdata(self):
        return as_ndarray(torch.from_numpy(self._batch[0]))

    def getlabel(self):
        return as_ndarray(torch.from_numpy(self._batch[1]))

    def getindex(self):
        return self._index

    def getpad(self):
        return self._pad


def ImageRecordUInt8Iter(**kwargs):  # noqa: N802  (mxnet's name)
    """Deprecated in mxnet: ``ImageRecordIter(dtype='uint8')``."""
    return ImageRecordIter(**dict(kwargs, dtype="uint8"))


def ImageRecordInt8Iter(**kwargs):  # noqa: N802  (mxnet's name)
    """Deprecated in mxnet: ``ImageRecordIter(dtype='int8')``."""
    return ImageRecordIter(**dict(kwargs, dtype="int8"))
