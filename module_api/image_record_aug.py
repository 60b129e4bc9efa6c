"""ImageRecordIter's augmenter: mxnet 1.9.1's C++ ``DefaultImageAugmenter``, in Python.

On numpy ``(H, W, C)`` uint8 RGB images, in mxnet's order: shorter-edge
``resize``; an affine warp (``max_rotate_angle`` / ``rotate`` / ``rotate_list``,
``max_shear_ratio``, ``min/max_random_scale``, aspect ratios, ``min/max_img_size``;
bilinear, borders ``fill_value``); ``pad``; one crop (``random_resized_crop``,
``min/max_crop_size`` then a resize, or a ``data_shape`` crop after enlarging a
small image); brightness / contrast / saturation in a random order; HSL shifts
(``random_h/s/l``, OpenCV's 8-bit HLS); PCA lighting noise (``pca_noise``).

As in mxnet, the contrast and saturation grays weigh the channels as OpenCV's
``RGB2GRAY`` applied to mxnet's BGR pixels (0.299 on blue, 0.114 on red). Random
draws come from a numpy ``Generator`` per image (see ImageRecordIter), not mxnet's.
"""
import numpy as np
import torch

from compiler.errors import MXNetError

from .image.image import _get_interp_method, imresize

_EIGVEC = np.array([[55.46 * -0.5675, 4.794 * 0.7192, 1.148 * 0.4009],
                    [55.46 * -0.5808, 4.794 * -0.0045, 1.148 * -0.8140],
                    [55.46 * -0.5836, 4.794 * -0.6948, 1.148 * 0.4203]], np.float32)


def _sat(x):
    """OpenCV's ``saturate_cast<uchar>``: round to nearest, clip to [0, 255]."""
    return np.clip(np.rint(x), 0, 255).astype(np.uint8)


def _gray_of_bgr_as_rgb(img):
    """OpenCV ``RGB2GRAY`` of mxnet's BGR pixels, from our RGB image (rounded fixed point)."""
    r, g, b = (img[:, :, k].astype(np.int64) for k in range(3))
    return ((4899 * b + 9617 * g + 1868 * r + 8192) >> 14).astype(np.float32)


def _rgb_to_hls(img):
    """OpenCV's 8-bit HLS (H in [0, 180), L and S in [0, 255]) of an RGB uint8 image."""
    rgb = img.astype(np.float32) / 255.0
    r, g, b = rgb[..., 0], rgb[..., 1], rgb[..., 2]
    vmax, vmin = rgb.max(-1), rgb.min(-1)
    diff, total = vmax - vmin, vmax + vmin
    lum = total * 0.5
    safe = np.where(diff > np.finfo(np.float32).eps, diff, 1.0)
    sat = np.where(lum < 0.5, diff / np.maximum(total, 1e-12), diff / np.maximum(2 - total, 1e-12))
    hue = np.where(vmax == r, (g - b) * 60 / safe,
                   np.where(vmax == g, (b - r) * 60 / safe + 120, (r - g) * 60 / safe + 240))
    hue = np.where(hue < 0, hue + 360, hue)
    flat = diff <= np.finfo(np.float32).eps
    hue, sat = np.where(flat, 0, hue), np.where(flat, 0, sat)
    return np.stack([_sat(hue * 0.5), _sat(lum * 255), _sat(sat * 255)], -1)


def _hls_to_rgb(hls):
    """RGB uint8 of OpenCV's 8-bit HLS."""
    h = hls[..., 0].astype(np.float32) * 2.0
    lum, sat = hls[..., 1].astype(np.float32) / 255, hls[..., 2].astype(np.float32) / 255
    p2 = np.where(lum <= 0.5, lum * (1 + sat), lum + sat - lum * sat)
    p1 = 2 * lum - p2
    h = h / 60.0
    h = np.where(h < 0, h + 6, np.where(h >= 6, h - 6, h))
    sector = np.floor(h).astype(np.int64) % 6
    frac = h - np.floor(h)
    tab = np.stack([p2, p1, p1 + (p2 - p1) * (1 - frac), p1 + (p2 - p1) * frac], -1)
    order = np.array([[1, 3, 0], [1, 0, 2], [3, 0, 1], [0, 2, 1], [0, 1, 3], [2, 1, 0]])
    bgr = np.take_along_axis(tab, order[sector], -1)
    rgb = np.where((sat == 0)[..., None], lum[..., None], bgr[..., ::-1])
    return _sat(rgb * 255)


def _warp_affine(img, m, width, height, fill):
    """OpenCV ``warpAffine`` (bilinear, constant border) of ``img`` by the 2x3 matrix ``m``."""
    inv = np.linalg.inv(np.vstack([m, [0, 0, 1]]).astype(np.float64))[:2]
    ys, xs = np.mgrid[0:height, 0:width].astype(np.float64)
    sx = inv[0, 0] * xs + inv[0, 1] * ys + inv[0, 2]
    sy = inv[1, 0] * xs + inv[1, 1] * ys + inv[1, 2]
    x0, y0 = np.floor(sx).astype(np.int64), np.floor(sy).astype(np.int64)
    fx, fy = (sx - x0)[..., None], (sy - y0)[..., None]
    padded = np.pad(img.astype(np.float64), ((1, 2), (1, 2), (0, 0)), constant_values=fill)
    rows, cols = img.shape[:2]

    def at(y, x):
        inside = (y >= -1) & (y <= rows) & (x >= -1) & (x <= cols)
        val = padded[np.clip(y + 1, 0, rows + 2), np.clip(x + 1, 0, cols + 2)]
        return np.where(inside[..., None], val, fill)
    out = (at(y0, x0) * (1 - fx) * (1 - fy) + at(y0, x0 + 1) * fx * (1 - fy)
           + at(y0 + 1, x0) * (1 - fx) * fy + at(y0 + 1, x0 + 1) * fx * fy)
    return _sat(out)


class RecordAugmenter(object):
    """mxnet's default augmenter with parameters ``p`` for ``data_shape`` (C, H, W)."""

    def __init__(self, p, data_shape):
        self.p, self.shape = p, data_shape
        if p["min_aspect_ratio"] is not None:
            self.aspect = (float(p["min_aspect_ratio"]), float(p["max_aspect_ratio"]))
        else:
            self.aspect = (1 - float(p["max_aspect_ratio"]), 1 + float(p["max_aspect_ratio"]))

    def resize(self, img, w, h, rng):
        """``cv::resize`` with ``inter_method`` (9 / 10 chosen as mxnet)."""
        method = self.p["inter_method"]
        if method == 10:
            method = int(rng.integers(0, 5))
        sizes = (img.shape[0], img.shape[1], h, w)
        out = imresize(torch.from_numpy(np.ascontiguousarray(img)), w, h,
                       interp=_get_interp_method(method, sizes))
        return out.as_subclass(torch.Tensor).numpy()

    def __call__(self, img, rng):
        p = self.p
        if p["resize"] > 0:
            rows, cols = img.shape[:2]
            if rows > cols:
                img = self.resize(img, p["resize"], p["resize"] * rows // cols, rng)
            else:
                img = self.resize(img, p["resize"] * cols // rows, p["resize"], rng)
        if self._affine_wanted():
            img = self._affine(img, rng)
        if p["pad"] > 0:
            k = p["pad"]
            img = np.pad(img, ((k, k), (k, k), (0, 0)), constant_values=p["fill_value"])
        img = self._crop(img, rng)
        img = self._color(img, rng)
        return img

    def _affine_wanted(self):
        p = self.p
        return (p["max_rotate_angle"] > 0 or p["max_shear_ratio"] > 0 or p["rotate"] > 0
                or len(p["rotate_list"]) > 0 or p["max_random_scale"] != 1
                or p["min_random_scale"] != 1
                or (not p["random_resized_crop"] and self.aspect != (1.0, 1.0))
                or p["max_img_size"] != 1e10 or p["min_img_size"] != 0)

    def _affine(self, img, rng):
        p, f32 = self.p, np.float32
        shear = f32(rng.uniform()) * f32(p["max_shear_ratio"]) * 2 - f32(p["max_shear_ratio"])
        angle = int(rng.integers(-p["max_rotate_angle"], p["max_rotate_angle"] + 1))
        if p["rotate"] > 0:
            angle = p["rotate"]
        if len(p["rotate_list"]):
            angle = p["rotate_list"][rng.integers(0, len(p["rotate_list"]))]
        a, b = np.cos(angle / 180.0 * np.pi), np.sin(angle / 180.0 * np.pi)
        scale = ratio = 1.0
        if not p["random_resized_crop"]:
            scale = rng.uniform() * (p["max_random_scale"] - p["min_random_scale"]) \
                + p["min_random_scale"]
            ratio = rng.uniform() * (self.aspect[1] - self.aspect[0]) + self.aspect[0]
        hs = 2 * scale / (1 + ratio)
        ws = ratio * hs
        rows, cols = img.shape[:2]
        new_w = max(p["min_img_size"], min(p["max_img_size"], scale * cols))
        new_h = max(p["min_img_size"], min(p["max_img_size"], scale * rows))
        m = np.array([[hs * a - shear * b * ws, hs * b + shear * a * ws, 0],
                      [-b * ws, a * ws, 0]], np.float32)
        m[0, 2] = (new_w - (m[0, 0] * cols + m[0, 1] * rows)) / 2
        m[1, 2] = (new_h - (m[1, 0] * cols + m[1, 1] * rows)) / 2
        return _warp_affine(img, m, int(new_w), int(new_h), p["fill_value"])

    def _crop(self, img, rng):
        p, (_, out_h, out_w) = self.p, self.shape
        if p["random_resized_crop"]:
            out = self._random_resized_crop(img, rng)
            if out is not None:
                return out
        elif p["max_crop_size"] != -1 or p["min_crop_size"] != -1:
            return self._crop_size_crop(img, rng)
        rows, cols = img.shape[:2]
        if rows < out_h:
            img = self.resize(img, int(np.float32(out_h) / np.float32(rows) * np.float32(cols)),
                              out_h, rng)
        rows, cols = img.shape[:2]
        if cols < out_w:
            img = self.resize(img, out_w,
                              int(np.float32(out_w) / np.float32(cols) * np.float32(rows)), rng)
        y, x = img.shape[0] - out_h, img.shape[1] - out_w
        if p["rand_crop"]:
            y, x = int(rng.integers(0, y + 1)), int(rng.integers(0, x + 1))
        else:
            y, x = y // 2, x // 2
        return img[y:y + out_h, x:x + out_w]

    def _random_resized_crop(self, img, rng):
        p, (_, out_h, out_w) = self.p, self.shape
        if p["rand_crop"] or p["max_crop_size"] != -1 or p["min_crop_size"] != -1 \
                or p["max_random_scale"] != 1 or p["min_random_scale"] != 1:
            raise MXNetError("ImageRecordIter: setting random_resized_crop to true conflicts "
                             "with min_random_scale, max_random_scale, min_crop_size, "
                             "max_crop_size, and rand_crop")
        if (p["max_random_area"], p["min_random_area"]) == (1, 1) and self.aspect == (1, 1):
            return None
        rows, cols = img.shape[:2]
        for _ in range(10):
            target = rows * cols * rng.uniform(p["min_random_area"], p["max_random_area"])
            ratio = rng.uniform(*self.aspect)
            y_area = int(round(np.sqrt(target / ratio)))
            x_area = int(round(np.sqrt(target * ratio)))
            if rng.uniform() > 0.5:
                y_area, x_area = x_area, y_area
            if y_area <= rows and x_area <= cols:
                y, x = rng.integers(0, rows - y_area + 1), rng.integers(0, cols - x_area + 1)
                return self.resize(img[y:y + y_area, x:x + x_area], out_w, out_h, rng)
        return None

    def _crop_size_crop(self, img, rng):
        p, (_, out_h, out_w) = self.p, self.shape
        rows, cols = img.shape[:2]
        lo, hi = p["min_crop_size"], p["max_crop_size"]
        if not (cols >= hi and rows >= hi and hi >= lo):
            raise MXNetError(f"ImageRecordIter: input image size {cols}x{rows} smaller than "
                             f"max_crop_size={hi} (or min_crop_size={lo} > max_crop_size)")
        size = int(rng.integers(lo, hi + 1))
        y, x = rows - size, cols - size
        if p["rand_crop"]:
            y, x = int(rng.integers(0, y + 1)), int(rng.integers(0, x + 1))
        else:
            y, x = y // 2, x // 2
        return self.resize(img[y:y + size, x:x + size], out_w, out_h, rng)

    def _color(self, img, rng):
        p = self.p
        if img.shape[2] == 3 and (p["brightness"] > 0 or p["contrast"] > 0
                                  or p["saturation"] > 0):
            alphas = [1.0 + rng.uniform(-p[k], p[k]) for k in ("brightness", "contrast",
                                                                 "saturation")]
            for i in rng.permutation(3):
                img = self._jitter(img, int(i), np.float32(alphas[i]))
        if img.shape[2] == 3 and (p["random_h"] or p["random_s"] or p["random_l"]):
            img = self._hsl(img, rng)
        if img.shape[2] == 3 and p["pca_noise"] > 0:
            alpha = rng.normal(0, p["pca_noise"], size=3).astype(np.float32)
            shift = _EIGVEC @ alpha                       # (r, g, b)
            moved = np.trunc(img.astype(np.float32) + shift.astype(np.float32))   # C's int +=
            img = np.clip(moved, 0, 255).astype(np.uint8)
        return img

    @staticmethod
    def _jitter(img, which, alpha):
        pix = img.astype(np.float32)
        if which == 0:
            return _sat(pix * alpha)
        gray = _gray_of_bgr_as_rgb(img)
        if which == 1:
            return _sat(pix * alpha + (1 - alpha) * np.float32(gray.mean()))
        return _sat(pix * alpha + gray[..., None] * (1 - alpha))

    def _hsl(self, img, rng):
        p = self.p
        draws = [(rng.uniform() + 4 * rng.uniform()) / 5 for _ in range(3)]
        h, s, lum = (int(r * p[k] * 2 - p[k]) for r, k in zip(draws, ("random_h", "random_s",
                                                                     "random_l")))
        hls = _rgb_to_hls(img).astype(np.int64) + np.array([h, lum, s])
        hls = np.clip(hls, 0, [180, 255, 255]).astype(np.uint8)
        return _hls_to_rgb(hls)
