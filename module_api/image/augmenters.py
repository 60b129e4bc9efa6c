"""``mx.image``'s augmenters and ``CreateAugmenter``, as mxnet 1.9.1's ``image/image.py``.

Each augmenter is a callable from an ``(H, W, C)`` NDArray to another; the
random ones draw from Python's ``random`` (``LightingAug``: numpy's), as
mxnet's do. The colour augmenters work on float images (``CastAug`` first,
as ``CreateAugmenter`` orders them) and, as mxnet's, change them in place.
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

_GRAY_COEF = (0.299, 0.587, 0.114)


class Augmenter(object):
    """Base class: keeps its arguments for :meth:`dumps`."""

    def __init__(self, **kwargs):
        self._kwargs = {}
        for k, v in kwargs.items():
            if isinstance(v, torch.Tensor):
                v = v.as_subclass(torch.Tensor).numpy()
            self._kwargs[k] = v.tolist() if isinstance(v, np.ndarray) else v

    def dumps(self):
        """The augmenter as a JSON string ``[name, arguments]``."""
        return json.dumps([self.__class__.__name__.lower(), self._kwargs])

    def __call__(self, src):
        raise NotImplementedError("Must override implementation.")


class SequentialAug(Augmenter):
    """Apply the augmenters ``ts`` in order."""

    def __init__(self, ts):
        super(SequentialAug, self).__init__()
        self.ts = ts

    def dumps(self):
        return [self.__class__.__name__.lower(), [x.dumps() for x in self.ts]]

    def __call__(self, src):
        for aug in self.ts:
            src = aug(src)
        return src


class RandomOrderAug(SequentialAug):
    """Apply the augmenters ``ts`` in a random order."""

    def __call__(self, src):
        random.shuffle(self.ts)
        return super(RandomOrderAug, self).__call__(src)


class ResizeAug(Augmenter):
    """Resize the shorter edge to ``size`` (:func:`resize_short`)."""

    def __init__(self, size, interp=2):
        super(ResizeAug, self).__init__(size=size, interp=interp)
        self.size, self.interp = size, interp

    def __call__(self, src):
        return resize_short(src, self.size, self.interp)


class ForceResizeAug(Augmenter):
    """Resize to ``size`` (w, h), ignoring the aspect ratio."""

    def __init__(self, size, interp=2):
        super(ForceResizeAug, self).__init__(size=size, interp=interp)
        self.size, self.interp = size, interp

    def __call__(self, src):
        sizes = (src.shape[0], src.shape[1], self.size[1], self.size[0])
        return imresize(src, *self.size, interp=_get_interp_method(self.interp, sizes))


class RandomCropAug(Augmenter):
    """A random crop of ``size`` (w, h) (:func:`random_crop`)."""

    def __init__(self, size, interp=2):
        super(RandomCropAug, self).__init__(size=size, interp=interp)
        self.size, self.interp = size, interp

    def __call__(self, src):
        return random_crop(src, self.size, self.interp)[0]


class RandomSizedCropAug(Augmenter):
    """A random crop of random area and aspect ratio, resized to ``size`` (w, h)."""

    def __init__(self, size, area, ratio, interp=2):
        super(RandomSizedCropAug, self).__init__(size=size, area=area, ratio=ratio,
                                                 interp=interp)
        self.size, self.area, self.ratio, self.interp = size, area, ratio, interp

    def __call__(self, src):
        return random_size_crop(src, self.size, self.area, self.ratio, self.interp)[0]


class CenterCropAug(Augmenter):
    """The centre crop of ``size`` (w, h) (:func:`center_crop`)."""

    def __init__(self, size, interp=2):
        super(CenterCropAug, self).__init__(size=size, interp=interp)
        self.size, self.interp = size, interp

    def __call__(self, src):
        return center_crop(src, self.size, self.interp)[0]


class BrightnessJitterAug(Augmenter):
    """Scale by ``1 + U(-brightness, brightness)``."""

    def __init__(self, brightness):
        super(BrightnessJitterAug, self).__init__(brightness=brightness)
        self.brightness = brightness

    def __call__(self, src):
        src *= 1.0 + random.uniform(-self.brightness, self.brightness)
        return src


class ContrastJitterAug(Augmenter):
    """Blend with the image's mean gray by ``alpha = 1 + U(-contrast, contrast)``."""

    def __init__(self, contrast):
        super(ContrastJitterAug, self).__init__(contrast=contrast)
        self.contrast = contrast

    def __call__(self, src):
        alpha = 1.0 + random.uniform(-self.contrast, self.contrast)
        gray = _tensor(src) * torch.tensor(_GRAY_COEF, dtype=torch_dtype(src))
        gray = (3.0 * (1.0 - alpha) / gray.numel()) * gray.sum()
        src *= alpha
        src += gray
        return src


class SaturationJitterAug(Augmenter):
    """Blend with each pixel's gray by ``alpha = 1 + U(-saturation, saturation)``."""

    def __init__(self, saturation):
        super(SaturationJitterAug, self).__init__(saturation=saturation)
        self.saturation = saturation

    def __call__(self, src):
        alpha = 1.0 + random.uniform(-self.saturation, self.saturation)
        gray = (_tensor(src) * torch.tensor(_GRAY_COEF, dtype=torch_dtype(src))).sum(2, keepdim=True)
        src *= alpha
        src += gray * (1.0 - alpha)
        return src


class HueJitterAug(Augmenter):
    """Rotate the hue by ``U(-hue, hue) * pi`` in YIQ space."""

    _TYIQ = np.array([[0.299, 0.587, 0.114], [0.596, -0.274, -0.321], [0.211, -0.523, 0.311]])
    _ITYIQ = np.array([[1.0, 0.956, 0.621], [1.0, -0.272, -0.647], [1.0, -1.107, 1.705]])

    def __init__(self, hue):
        super(HueJitterAug, self).__init__(hue=hue)
        self.hue = hue

    def __call__(self, src):
        alpha = random.uniform(-self.hue, self.hue)
        u, w = np.cos(alpha * np.pi), np.sin(alpha * np.pi)
        bt = np.array([[1.0, 0.0, 0.0], [0.0, u, -w], [0.0, w, u]])
        t = np.dot(np.dot(self._ITYIQ, bt), self._TYIQ).T
        return as_ndarray(_tensor(src) @ torch.tensor(t, dtype=torch_dtype(src)))


class ColorJitterAug(RandomOrderAug):
    """Brightness, contrast and saturation jitter in a random order."""

    def __init__(self, brightness, contrast, saturation):
        ts = [cls(v) for cls, v in [(BrightnessJitterAug, brightness),
                                    (ContrastJitterAug, contrast),
                                    (SaturationJitterAug, saturation)] if v > 0]
        super(ColorJitterAug, self).__init__(ts)


class LightingAug(Augmenter):
    """AlexNet-style PCA lighting noise: add ``eigvec @ (N(0, alphastd) * eigval)``."""

    def __init__(self, alphastd, eigval, eigvec):
        super(LightingAug, self).__init__(alphastd=alphastd, eigval=eigval, eigvec=eigvec)
        self.alphastd, self.eigval, self.eigvec = alphastd, eigval, eigvec

    def __call__(self, src):
        alpha = np.random.normal(0, self.alphastd, size=(3,))
        rgb = np.dot(self.eigvec * alpha, self.eigval)
        src += torch.tensor(rgb, dtype=torch_dtype(src))
        return src


class ColorNormalizeAug(Augmenter):
    """``(src - mean) / std`` (:func:`color_normalize`)."""

    def __init__(self, mean, std):
        super(ColorNormalizeAug, self).__init__(mean=mean, std=std)
        self.mean = None if mean is None else torch.as_tensor(np.asarray(mean, np.float32))
        self.std = None if std is None else torch.as_tensor(np.asarray(std, np.float32))

    def __call__(self, src):
        return color_normalize(src, self.mean, self.std)


class RandomGrayAug(Augmenter):
    """With probability ``p``, replace every channel by a gray (0.21 R + 0.72 G + 0.07 B)."""

    _MAT = ((0.21, 0.21, 0.21), (0.72, 0.72, 0.72), (0.07, 0.07, 0.07))

    def __init__(self, p):
        super(RandomGrayAug, self).__init__(p=p)
        self.p = p

    def __call__(self, src):
        if random.random() < self.p:
            src = as_ndarray(_tensor(src) @ torch.tensor(self._MAT, dtype=torch_dtype(src)))
        return src


class HorizontalFlipAug(Augmenter):
    """With probability ``p``, mirror left-right."""

    def __init__(self, p):
        super(HorizontalFlipAug, self).__init__(p=p)
        self.p = p

    def __call__(self, src):
        if random.random() < self.p:
            src = as_ndarray(torch.flip(_tensor(src), dims=[1]))
        return src


class CastAug(Augmenter):
    """Cast to ``typ`` (float32 by default)."""

    def __init__(self, typ="float32"):
        super(CastAug, self).__init__(type=typ)
        self.typ = typ

    def __call__(self, src):
        return as_ndarray(_tensor(src).to(getattr(torch, str(np.dtype(self.typ)))))


def CreateAugmenter(data_shape, resize=0, rand_crop=False, rand_resize=False,  # noqa: N802
                    rand_mirror=False, mean=None, std=None, brightness=0, contrast=0,
                    saturation=0, hue=0, pca_noise=0, rand_gray=0, inter_method=2):
    """mxnet's standard augmenter list for ``data_shape`` (C, H, W).

    Resize (``resize`` > 0), a crop to ``data_shape`` (random-sized with
    ``rand_resize``, random with ``rand_crop``, else centred), a mirror
    (``rand_mirror``), a cast to float32, colour jitter, hue, PCA noise, random
    gray, then normalization (``mean`` / ``std``: ``True`` for ImageNet's).

    Returns
    -------
    list of Augmenter
    """
    auglist = []
    if resize > 0:
        auglist.append(ResizeAug(resize, inter_method))
    crop_size = (data_shape[2], data_shape[1])
    if rand_resize:
        assert rand_crop
        auglist.append(RandomSizedCropAug(crop_size, 0.08, (3.0 / 4.0, 4.0 / 3.0), inter_method))
    elif rand_crop:
        auglist.append(RandomCropAug(crop_size, inter_method))
    else:
        auglist.append(CenterCropAug(crop_size, inter_method))
    if rand_mirror:
        auglist.append(HorizontalFlipAug(0.5))
    auglist.append(CastAug())
    if brightness or contrast or saturation:
        auglist.append(ColorJitterAug(brightness, contrast, saturation))
    if hue:
        auglist.append(HueJitterAug(hue))
    if pca_noise > 0:
        eigval = np.array([55.46, 4.794, 1.148])
        eigvec = np.array([[-0.5675, 0.7192, 0.4009], [-0.5808, -0.0045, -0.8140],
                           [-0.5836, -0.6948, 0.4203]])
        auglist.append(LightingAug(pca_noise, eigval, eigvec))
    if rand_gray > 0:
        auglist.append(RandomGrayAug(rand_gray))
    if mean is True:
        mean = np.array([123.68, 116.28, 103.53])
    if std is True:
        std = np.array([58.395, 57.12, 57.375])
    if mean is not None or std is not None:
        auglist.append(ColorNormalizeAug(mean, std))
    return auglist
