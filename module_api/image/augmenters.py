"""``mx.image``'s augmenters and ``CreateAugmenter``.

An augmenter is a callable taking an ``(H, W, C)`` image NDArray and returning
the augmented image. The random ones draw from Python's :mod:`random`
(``LightingAug`` from :mod:`numpy.random`) in the order mxnet 1.9.1 draws, so a
program that seeds those generators gets mxnet's crops, flips and jitter.

The colour augmenters expect float images (``CreateAugmenter`` puts a
``CastAug`` before them) and, like mxnet's, may change their input in place.
``dumps()`` gives ``'["<lower-cased class name>", {arguments}]'`` as mxnet.
"""
import json
import random

import numpy as np
import torch

from runtime.ndarray import as_ndarray, torch_dtype

from .image import (_get_interp_method, _tensor, center_crop, color_normalize, imresize,
                    random_crop, random_size_crop, resize_short)

__all__ = ["Augmenter", "SequentialAug", "ResizeAug", "ForceResizeAug", "RandomCropAug",
           "RandomSizedCropAug", "CenterCropAug", "RandomOrderAug", "BrightnessJitterAug",
           "ContrastJitterAug", "SaturationJitterAug", "HueJitterAug", "ColorJitterAug",
           "LightingAug", "ColorNormalizeAug", "RandomGrayAug", "HorizontalFlipAug", "CastAug",
           "CreateAugmenter"]

# ITU-R 601 luma weights, used by the contrast and saturation jitter
_LUMA = (0.299, 0.587, 0.114)

# RGB <-> YIQ, for rotating the hue about the luma axis
_RGB_TO_YIQ = np.array([[0.299, 0.587, 0.114],
                        [0.596, -0.274, -0.321],
                        [0.211, -0.523, 0.311]])
_YIQ_TO_RGB = np.array([[1.0, 0.956, 0.621],
                        [1.0, -0.272, -0.647],
                        [1.0, -1.107, 1.705]])

# ImageNet statistics CreateAugmenter uses: PCA of the pixel colours (float64,
# as mxnet's), mean and std (float32, as mxnet's NDArrays: dumps() shows
# 123.68000030517578)
_PCA_EIGVAL = np.array((55.46, 4.794, 1.148))
_PCA_EIGVEC = np.array(((-0.5675, 0.7192, 0.4009),
                        (-0.5808, -0.0045, -0.8140),
                        (-0.5836, -0.6948, 0.4203)))
_IMAGENET_MEAN = np.array((123.68, 116.28, 103.53), dtype=np.float32)
_IMAGENET_STD = np.array((58.395, 57.12, 57.375), dtype=np.float32)


def _jsonable(value):
    """An argument as ``dumps()`` writes it: arrays become (nested) lists."""
    if isinstance(value, torch.Tensor):
        value = value.as_subclass(torch.Tensor).numpy()
    if isinstance(value, np.ndarray):
        return value.tolist()
    return value


def _as_float_tensor(value):
    """``value`` (list, numpy array or NDArray) as a float32 tensor; ``None`` stays."""
    if value is None:
        return None
    return torch.as_tensor(np.asarray(value, np.float32))


def _matmul_channels(src, matrix):
    """``src @ matrix`` over the channel axis, in the image's dtype."""
    return as_ndarray(_tensor(src) @ torch.tensor(matrix, dtype=torch_dtype(src)))


class Augmenter(object):
    """Base class of the augmenters.

    Parameters
    ----------
    **kwargs
        The constructor's arguments, kept (arrays as lists) for :meth:`dumps`.
    """

    def __init__(self, **kwargs):
        self._kwargs = {key: _jsonable(value) for key, value in kwargs.items()}

    def _keep(self, **kwargs):
        """Record ``kwargs`` for :meth:`dumps` and as attributes of the same names."""
        Augmenter.__init__(self, **kwargs)
        for key, value in kwargs.items():
            setattr(self, key, value)

    def dumps(self):
        """The augmenter as JSON text: ``[lower-cased class name, arguments]``."""
        return json.dumps([type(self).__name__.lower(), self._kwargs])

    def __call__(self, src):
        """Augment ``src``; subclasses implement it."""
        raise NotImplementedError("Must override implementation.")


# ------------------------------------------------------------------ chains
class SequentialAug(Augmenter):
    """Run the augmenters of the list ``ts`` one after another."""

    def __init__(self, ts):
        super().__init__()
        self.ts = ts

    def dumps(self):
        """``[name, [each member's dumps()]]`` (a list, not JSON text, as mxnet)."""
        return [type(self).__name__.lower(), [member.dumps() for member in self.ts]]

    def __call__(self, src):
        out = src
        for step in self.ts:
            out = step(out)
        return out


class RandomOrderAug(SequentialAug):
    """Run the augmenters ``ts`` in a random order (``ts`` itself is shuffled)."""

    def __call__(self, src):
        random.shuffle(self.ts)
        return super().__call__(src)


# ---------------------------------------------------------------- geometry
class _SizeInterpAug(Augmenter):
    """An augmenter configured by a target ``size`` and an ``interp`` method."""

    def __init__(self, size, interp=2):
        self._keep(size=size, interp=interp)


class ResizeAug(_SizeInterpAug):
    """Resize so that the shorter edge is ``size`` (:func:`resize_short`)."""

    def __call__(self, src):
        return resize_short(src, self.size, self.interp)


class ForceResizeAug(_SizeInterpAug):
    """Resize to ``size`` = (width, height), whatever the aspect ratio."""

    def __call__(self, src):
        width, height = self.size
        method = _get_interp_method(self.interp, (src.shape[0], src.shape[1], height, width))
        return imresize(src, width, height, interp=method)


class RandomCropAug(_SizeInterpAug):
    """Crop ``size`` = (width, height) at a random place (:func:`random_crop`)."""

    def __call__(self, src):
        cropped, _box = random_crop(src, self.size, self.interp)
        return cropped


class CenterCropAug(_SizeInterpAug):
    """Crop ``size`` = (width, height) from the centre (:func:`center_crop`)."""

    def __call__(self, src):
        cropped, _box = center_crop(src, self.size, self.interp)
        return cropped


class RandomSizedCropAug(Augmenter):
    """Crop a random ``area`` share with a random aspect ``ratio``, resized to ``size``.

    See :func:`random_size_crop` for ``area`` (a minimum or a range) and ``ratio``.
    """

    def __init__(self, size, area, ratio, interp=2):
        self._keep(size=size, area=area, ratio=ratio, interp=interp)

    def __call__(self, src):
        cropped, _box = random_size_crop(src, self.size, self.area, self.ratio, self.interp)
        return cropped


class HorizontalFlipAug(Augmenter):
    """Mirror left-right with probability ``p``."""

    def __init__(self, p):
        self._keep(p=p)

    def __call__(self, src):
        if random.random() >= self.p:
            return src
        return as_ndarray(torch.flip(_tensor(src), dims=[1]))


class CastAug(Augmenter):
    """Convert to the dtype ``typ`` (float32 unless told)."""

    def __init__(self, typ="float32"):
        super().__init__(type=typ)   # mxnet's dumps() names it "type"
        self.typ = typ

    def __call__(self, src):
        target = getattr(torch, str(np.dtype(self.typ)))
        return as_ndarray(_tensor(src).to(target))


# ------------------------------------------------------------------ colour
class BrightnessJitterAug(Augmenter):
    """Multiply by ``1 + u``, ``u`` uniform in ``[-brightness, brightness]``."""

    def __init__(self, brightness):
        self._keep(brightness=brightness)

    def __call__(self, src):
        factor = 1.0 + random.uniform(-self.brightness, self.brightness)
        src *= factor
        return src


class ContrastJitterAug(Augmenter):
    """Blend with the image's mean luma: ``alpha * src + (1 - alpha) * mean gray``.

    ``alpha = 1 + u`` with ``u`` uniform in ``[-contrast, contrast]``.
    """

    def __init__(self, contrast):
        self._keep(contrast=contrast)

    def __call__(self, src):
        alpha = 1.0 + random.uniform(-self.contrast, self.contrast)
        weighted = _tensor(src) * torch.tensor(_LUMA, dtype=torch_dtype(src))
        # the luma summed over all pixels, as a per-pixel mean over the 3 channels
        offset = (3.0 * (1.0 - alpha) / weighted.numel()) * weighted.sum()
        src *= alpha
        src += offset
        return src


class SaturationJitterAug(Augmenter):
    """Blend each pixel with its own luma: ``alpha * src + (1 - alpha) * gray``.

    ``alpha = 1 + u`` with ``u`` uniform in ``[-saturation, saturation]``.
    """

    def __init__(self, saturation):
        self._keep(saturation=saturation)

    def __call__(self, src):
        alpha = 1.0 + random.uniform(-self.saturation, self.saturation)
        luma = _tensor(src) * torch.tensor(_LUMA, dtype=torch_dtype(src))
        luma = luma.sum(2, keepdim=True)
        src *= alpha
        src += luma * (1.0 - alpha)
        return src


class HueJitterAug(Augmenter):
    """Rotate the hue by ``u * pi``, ``u`` uniform in ``[-hue, hue]`` (in YIQ space)."""

    def __init__(self, hue):
        self._keep(hue=hue)

    def __call__(self, src):
        angle = random.uniform(-self.hue, self.hue) * np.pi
        cos, sin = np.cos(angle), np.sin(angle)
        rotate_iq = np.array([[1.0, 0.0, 0.0],
                              [0.0, cos, -sin],
                              [0.0, sin, cos]])
        # rows of the image are pixels, so the colour transform is applied transposed
        transform = np.dot(np.dot(_YIQ_TO_RGB, rotate_iq), _RGB_TO_YIQ).T
        return _matmul_channels(src, transform)


class ColorJitterAug(RandomOrderAug):
    """Brightness, contrast and saturation jitter (those > 0), in a random order."""

    def __init__(self, brightness, contrast, saturation):
        wanted = ((BrightnessJitterAug, brightness), (ContrastJitterAug, contrast),
                  (SaturationJitterAug, saturation))
        super().__init__([klass(amount) for klass, amount in wanted if amount > 0])


class LightingAug(Augmenter):
    """AlexNet's PCA colour noise: add ``eigvec @ (a * eigval)``, ``a ~ N(0, alphastd)``."""

    def __init__(self, alphastd, eigval, eigvec):
        self._keep(alphastd=alphastd, eigval=eigval, eigvec=eigvec)

    def __call__(self, src):
        weights = np.random.normal(0, self.alphastd, size=(3,))
        shift = np.dot(self.eigvec * weights, self.eigval)
        src += torch.tensor(shift, dtype=torch_dtype(src))
        return src


class RandomGrayAug(Augmenter):
    """With probability ``p``, set every channel to ``0.21 R + 0.72 G + 0.07 B``."""

    _TO_GRAY = ((0.21, 0.21, 0.21), (0.72, 0.72, 0.72), (0.07, 0.07, 0.07))

    def __init__(self, p):
        self._keep(p=p)

    def __call__(self, src):
        if random.random() >= self.p:
            return src
        return _matmul_channels(src, self._TO_GRAY)


class ColorNormalizeAug(Augmenter):
    """Subtract ``mean`` and divide by ``std`` per channel (:func:`color_normalize`)."""

    def __init__(self, mean, std):
        super().__init__(mean=mean, std=std)
        self.mean = _as_float_tensor(mean)
        self.std = _as_float_tensor(std)

    def __call__(self, src):
        return color_normalize(src, self.mean, self.std)


# ----------------------------------------------------------------- factory
def _geometry_augs(data_shape, resize, rand_crop, rand_resize, rand_mirror, interp):
    """Resize, crop to ``data_shape`` (C, H, W), maybe mirror."""
    steps = [ResizeAug(resize, interp)] if resize > 0 else []
    size = (data_shape[2], data_shape[1])            # (width, height)
    if rand_resize:
        assert rand_crop, "CreateAugmenter: rand_resize=True needs rand_crop=True as well"
        steps.append(RandomSizedCropAug(size, 0.08, (3.0 / 4.0, 4.0 / 3.0), interp))
    elif rand_crop:
        steps.append(RandomCropAug(size, interp))
    else:
        steps.append(CenterCropAug(size, interp))
    if rand_mirror:
        steps.append(HorizontalFlipAug(0.5))
    return steps


def _colour_augs(brightness, contrast, saturation, hue, pca_noise, rand_gray):
    """The jitter steps that were asked for, in mxnet's order."""
    steps = []
    if any((brightness, contrast, saturation)):
        steps.append(ColorJitterAug(brightness, contrast, saturation))
    if hue:
        steps.append(HueJitterAug(hue))
    if pca_noise > 0:
        steps.append(LightingAug(pca_noise, _PCA_EIGVAL.copy(), _PCA_EIGVEC.copy()))
    if rand_gray > 0:
        steps.append(RandomGrayAug(rand_gray))
    return steps


def CreateAugmenter(data_shape, resize=0, rand_crop=False, rand_resize=False,  # noqa: N802
                    rand_mirror=False, mean=None, std=None, brightness=0, contrast=0,
                    saturation=0, hue=0, pca_noise=0, rand_gray=0, inter_method=2):
    """The standard augmenter list for images of ``data_shape`` (C, H, W).

    In order: a shorter-edge resize (``resize`` > 0); a crop to ``data_shape``
    (random area and aspect with ``rand_resize``, random place with
    ``rand_crop``, else the centre); a left-right mirror half the time
    (``rand_mirror``); a cast to float32; colour jitter (``brightness``,
    ``contrast``, ``saturation``, random order), ``hue``, PCA noise
    (``pca_noise``), random gray (``rand_gray``); then ``(x - mean) / std``.

    Parameters
    ----------
    data_shape : tuple of int
        ``(channels, height, width)`` of the output.
    mean, std : array-like, True or None
        ``True`` stands for ImageNet's RGB statistics.
    inter_method : int
        The interpolation of resizes and crops (see :func:`imresize`).

    Returns
    -------
    list of Augmenter
    """
    steps = _geometry_augs(data_shape, resize, rand_crop, rand_resize, rand_mirror,
                           inter_method)
    steps.append(CastAug())
    steps += _colour_augs(brightness, contrast, saturation, hue, pca_noise, rand_gray)
    if mean is True:
        mean = _IMAGENET_MEAN.copy()
    if std is True:
        std = _IMAGENET_STD.copy()
    if mean is not None or std is not None:
        steps.append(ColorNormalizeAug(mean, std))
    return steps
