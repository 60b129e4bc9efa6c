"""``mx.image`` and ``mx.io.ImageRecordIter`` against mxnet 1.9.1 (``make_io_fixtures.py``).

Pixels: PNG decoding and nearest resizing are exact; bilinear / bicubic resizing may
differ from OpenCV's fixed point by 1 (checked: at most 1, and on few pixels).
"""
import logging
import os
import random
import sys

import numpy as np
import pytest

import module_api as mx
from compiler.errors import MXNetError

FIX = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "fixtures", "io")
sys.path.insert(0, os.path.dirname(FIX))
import make_io_fixtures as mf  # noqa: E402

ORACLE = np.load(os.path.join(FIX, "oracle.npz"))
PNG = mf.png_bytes(mf.images()[0])
JPEG = np.load(os.path.join(FIX, "inputs.npz"))["jpeg"].tobytes()
REC = os.path.join(FIX, "images.rec")


def _close(got, key, tol=0, share=1.0):
    got = got.asnumpy() if hasattr(got, "asnumpy") else np.asarray(got)
    want = ORACLE[key]
    assert got.shape == want.shape and got.dtype == want.dtype, (key, got.shape, want.shape)
    diff = np.abs(got.astype(np.float64) - want)
    assert diff.max() <= tol, (key, diff.max())
    assert (diff > 0).mean() <= share, (key, (diff > 0).mean())


def test_imdecode_as_mxnet():
    _close(mx.image.imdecode(PNG), "png_rgb")
    _close(mx.image.imdecode(PNG, flag=0), "png_gray")
    _close(mx.image.imdecode(PNG, to_rgb=0), "png_bgr")
    # JPEG: decoders may round differently (equal here, allowed 2)
    _close(mx.image.imdecode(JPEG), "jpeg_rgb", tol=2)
    with pytest.raises(MXNetError, match="cannot decode"):
        mx.image.imdecode(b"not an image")


@pytest.mark.parametrize("interp", [0, 1, 2])
@pytest.mark.parametrize("size", [(8, 6), (24, 20), (13, 7)])
def test_imresize_as_opencv(interp, size):
    src = mx.image.imdecode(PNG)
    got = mx.image.imresize(src, *size, interp=interp)
    _close(got, f"resize_{interp}_{size[0]}x{size[1]}", tol=0 if interp == 0 else 1, share=0.2)


def test_resize_short_crops_and_normalize():
    src = mx.image.imdecode(PNG)
    _close(mx.image.resize_short(src, 8, interp=1), "resize_short_8", tol=1, share=0.2)
    out, box = mx.image.center_crop(src, (6, 4))
    _close(out, "center_crop_6x4")
    assert box == tuple(ORACLE["center_crop_box"])
    _close(mx.image.center_crop(src, (20, 14), interp=1)[0], "center_crop_up", tol=1, share=0.2)
    norm = mx.image.color_normalize(src.astype("float32"), mx.nd.array([100, 110, 120]),
                                    mx.nd.array([50, 60, 70]))
    np.testing.assert_allclose(norm.asnumpy(), ORACLE["color_normalize"], rtol=1e-6)
    random.seed(3)
    crop, (x0, y0, w, h) = mx.image.random_crop(src, (5, 4))
    np.testing.assert_array_equal(crop.asnumpy(), src.asnumpy()[y0:y0 + h, x0:x0 + w])
    assert mx.image.scale_down((10, 6), (8, 8)) == (6, 6)


RECORD_ITER_CASES = {
    "plain": dict(data_shape=(3, 8, 8), batch_size=2),
    "norm": dict(data_shape=(3, 9, 9), batch_size=3, mean_r=120, mean_g=110, mean_b=100,
                 std_r=60, std_g=50, std_b=40, scale=0.5, mirror=True),
    "resize": dict(data_shape=(3, 6, 6), batch_size=3, resize=7, round_batch=False),
    # augmentations whose random draws cannot change the result
    "rotate": dict(data_shape=(3, 10, 10), batch_size=5, rotate=90, fill_value=7),
    "scale": dict(data_shape=(3, 4, 4), batch_size=5, max_random_scale=0.5,
                  min_random_scale=0.5),
    "cropsize": dict(data_shape=(3, 6, 6), batch_size=5, max_crop_size=8, min_crop_size=8),
    "hls": dict(data_shape=(3, 8, 8), batch_size=5, random_h=1, random_s=1, random_l=1),
    "uint8": dict(data_shape=(3, 8, 8), batch_size=5, dtype="uint8", mirror=True),
    "int8": dict(data_shape=(3, 8, 8), batch_size=5, dtype="int8", mean_r=100.4,
                 mean_g=20, mean_b=200.6),
    "mean": dict(data_shape=(3, 8, 8), batch_size=5, mean_img=os.path.join(FIX, "mean.bin"),
                 mirror=True),                        # the mean image file mxnet made
}
# largest pixel difference allowed: bilinear resizes round as OpenCV's fixed point to 1,
# the 8-bit HLS round trip to 2; the rest is exact
TOLERANCE = {"resize": 1.0, "rotate": 1.0, "cropsize": 1.0, "hls": 2.0}


@pytest.mark.parametrize("name", sorted(RECORD_ITER_CASES))
def test_image_record_iter_batches_as_mxnet(name):
    it = mx.io.ImageRecordIter(path_imgrec=REC, label_width=2, preprocess_threads=2,
                               **RECORD_ITER_CASES[name])
    assert it.provide_data[0].shape == tuple(ORACLE[f"iter_{name}_data_shape"])
    assert it.provide_label[0].shape == tuple(ORACLE[f"iter_{name}_label_shape"])
    for epoch in range(2):
        if epoch:
            it.reset()
        batches = list(it)
        assert len(batches) == len({k.rsplit("_", 1)[0] for k in ORACLE
                                    if k.startswith(f"iter_{name}_e{epoch}_")})
        for b, batch in enumerate(batches):
            key = f"iter_{name}_e{epoch}_b{b}"
            # mxnet 1.9.1 reports pad 0 for an unrounded last batch (its rows are stale
            # there); this iterator counts them, so only the real rows are compared
            real = it.batch_size - batch.pad if name == "resize" else it.batch_size
            if name != "resize":
                assert batch.pad == int(ORACLE[key + "_pad"])
            data, want = batch.data[0].asnumpy()[:real], ORACLE[key + "_data"][:real]
            assert data.dtype == want.dtype, key
            data, want = data.astype(np.float64), want.astype(np.float64)
            assert np.abs(data - want).max() <= TOLERANCE.get(name, 1e-5), key
            np.testing.assert_array_equal(batch.label[0].asnumpy()[:real],
                                          ORACLE[key + "_label"][:real])
    assert [len(list(it)) for _ in range(1)] == [0]        # ended until reset


def test_image_record_iter_random_crop_mirror_shuffle_and_parts():
    imgs = mf.images()
    kwargs = dict(path_imgrec=REC, path_imgidx=REC[:-3] + "idx", data_shape=(3, 8, 8),
                  batch_size=5, label_width=2, rand_crop=True, rand_mirror=True, shuffle=True,
                  seed=11)
    it = mx.io.ImageRecordIter(**kwargs)
    batch = it.next()
    order = batch.label[0].asnumpy()[:, 1].astype(int)
    assert sorted(order) == list(range(5))
    for data, k in zip(batch.data[0].asnumpy(), order):
        img = imgs[k].astype(np.float32)
        windows = [np.ascontiguousarray(v[y:y + 8, x:x + 8].transpose(2, 0, 1))
                   for v in (img, img[:, ::-1]) for y in range(img.shape[0] - 7)
                   for x in range(img.shape[1] - 7)]
        assert any(np.array_equal(data, w) for w in windows), k
    again = mx.io.ImageRecordIter(**kwargs).next()
    np.testing.assert_array_equal(again.data[0].asnumpy(), batch.data[0].asnumpy())
    parts = [mx.io.ImageRecordIter(path_imgrec=REC, data_shape=(3, 8, 8), batch_size=1,
                                   label_width=2, num_parts=2, part_index=i, round_batch=False)
             for i in range(2)]
    ids = [[int(b.label[0].asnumpy()[0, 1]) for b in p] for p in parts]
    assert ids == [[0, 1], [2, 3, 4]]


def test_image_record_iter_arguments(caplog):
    with pytest.raises(MXNetError, match="data_shape must be"):
        mx.io.ImageRecordIter(path_imgrec=REC, data_shape=(5, 8, 8), batch_size=2)
    with pytest.raises(MXNetError, match="conflicts"):
        mx.io.ImageRecordIter(path_imgrec=REC, data_shape=(3, 8, 8), batch_size=2,
                              random_resized_crop=True, rand_crop=True,
                              max_random_area=0.5).next()
    with caplog.at_level(logging.WARNING, logger="module_api.image_record_iter"):
        mx.io.ImageRecordIter(path_imgrec=REC, data_shape=(3, 8, 8), batch_size=2,
                              label_width=2, and_mirror=False)    # (a typo mxnet's tests make)
    assert "and_mirror" in caplog.text
    with pytest.raises(MXNetError, match="does not exist"):
        mx.io.ImageRecordIter(path_imgrec="nowhere.rec", data_shape=(3, 8, 8), batch_size=2)
    gray = mx.io.ImageRecordIter(path_imgrec=REC, data_shape=(1, 8, 8), batch_size=2,
                                 label_width=2, preprocess_threads=4, prefetch_buffer=2,
                                 verbose=False)
    batch = gray.next()
    assert batch.data[0].shape == (2, 1, 8, 8) and batch.label[0].shape == (2, 2)
    with pytest.raises(MXNetError, match="2-dimensional label but label_width is set to 1"):
        mx.io.ImageRecordIter(path_imgrec=REC, data_shape=(3, 8, 8), batch_size=2).next()


def test_image_record_iter_imglist_labels_and_reset_mid_epoch(tmp_path):
    lst = tmp_path / "l.lst"
    lst.write_text("".join(f"{k}\t{10 + k}\timg{k}.png\n" for k in range(5)))
    it = mx.io.ImageRecordIter(path_imgrec=REC, path_imglist=str(lst), data_shape=(3, 8, 8),
                               batch_size=2)
    assert [b.label[0].asnumpy().tolist() for b in it] == [[10, 11], [12, 13], [14, 10]]
    fresh = [b.label[0].asnumpy().tolist() for b in
             mx.io.ImageRecordIter(path_imgrec=REC, path_imglist=str(lst), data_shape=(3, 8, 8),
                                   batch_size=2, round_batch=False)]
    it = mx.io.ImageRecordIter(path_imgrec=REC, path_imglist=str(lst), data_shape=(3, 8, 8),
                               batch_size=2, round_batch=False)
    it.next()                       # the next batch is being prepared meanwhile
    it.reset()
    assert [b.label[0].asnumpy().tolist()[:2 - b.pad] for b in it] == \
        [f[:2 - p] for f, p in zip(fresh, [0, 0, 1])]


def test_image_iter_center_crop_and_augmenters():
    it = mx.image.ImageIter(batch_size=2, data_shape=(3, 8, 8), label_width=2,
                            path_imgrec=REC, path_imgidx=REC[:-3] + "idx")
    batches = list(it)
    assert [b.pad for b in batches] == [0, 0, 1]
    sequential = mx.image.ImageIter(batch_size=2, data_shape=(3, 8, 8), label_width=2,
                                    path_imgrec=REC)              # no index: read in order
    assert [b.label[0].asnumpy().tolist() for b in sequential] == \
        [b.label[0].asnumpy().tolist() for b in batches]
    first = batches[0].data[0].asnumpy()
    img = mf.images()[0]
    np.testing.assert_array_equal(first[0], img[2:10, 4:12].transpose(2, 0, 1))
    assert batches[2].label[0].asnumpy().tolist() == [[1.0, 4.0], [0.0, 0.0]]
    augs = mx.image.CreateAugmenter((3, 8, 8), resize=9, rand_crop=True, rand_mirror=True,
                                    mean=True, std=True, brightness=0.1, contrast=0.1,
                                    saturation=0.1, hue=0.1, pca_noise=0.1, rand_gray=0.5)
    names = [type(a).__name__ for a in augs]
    assert names == ["ResizeAug", "RandomCropAug", "HorizontalFlipAug", "CastAug",
                     "ColorJitterAug", "HueJitterAug", "LightingAug", "RandomGrayAug",
                     "ColorNormalizeAug"]
    out = mx.image.imdecode(PNG)
    for aug in augs:
        out = aug(out)
    assert out.shape == (8, 8, 3) and out.dtype == np.float32
    assert np.isfinite(out.asnumpy()).all()


def test_image_record_iter_random_augmentations_as_common_data_py():
    # the augmentation levels of mxnet's image-classification example's common data setup
    kwargs = dict(path_imgrec=REC, data_shape=(3, 8, 8), batch_size=5, label_width=2,
                  rand_crop=True, rand_mirror=True, random_h=36, random_s=50, random_l=50,
                  max_rotate_angle=10, max_shear_ratio=0.1, max_aspect_ratio=0.25,
                  brightness=0.4, contrast=0.4, saturation=0.4, pca_noise=0.1,
                  max_random_scale=1.1, min_random_scale=0.9, fill_value=127, seed=5)
    first = mx.io.ImageRecordIter(**kwargs).next().data[0].asnumpy()
    again = mx.io.ImageRecordIter(**kwargs).next().data[0].asnumpy()
    np.testing.assert_array_equal(first, again)           # same seed, same batch
    assert first.shape == (5, 3, 8, 8) and first.min() >= 0 and first.max() <= 255
    plain = mx.io.ImageRecordIter(path_imgrec=REC, data_shape=(3, 8, 8), batch_size=5,
                                  label_width=2).next().data[0].asnumpy()
    assert not np.array_equal(first, plain)
    sized = mx.io.ImageRecordIter(path_imgrec=REC, data_shape=(3, 8, 8), batch_size=5,
                                  label_width=2, random_resized_crop=True, max_random_area=1,
                                  min_random_area=0.3, max_aspect_ratio=4 / 3,
                                  min_aspect_ratio=3 / 4, seed=2).next()
    assert sized.data[0].shape == (5, 3, 8, 8)


def test_image_iter_over_files_and_last_batch_handles(tmp_path):
    imgs = mf.images()
    lines = []
    for k, img in enumerate(imgs):
        (tmp_path / f"i{k}.png").write_bytes(mf.png_bytes(img))
        lines.append(f"{k}\t{float(k)}\ti{k}.png\n")
    (tmp_path / "x.lst").write_text("".join(lines))
    np.testing.assert_array_equal(mx.image.imread(str(tmp_path / "i1.png")).asnumpy(), imgs[1])

    def labels(handle, epochs=2):
        it = mx.image.ImageIter(batch_size=2, data_shape=(3, 8, 8), path_root=str(tmp_path),
                                path_imglist=str(tmp_path / "x.lst"), last_batch_handle=handle)
        out = []
        for _ in range(epochs):
            out.append([(b.label[0].asnumpy().tolist(), b.pad) for b in it])
            it.reset()
        return out
    assert labels("pad") == [[([0, 1], 0), ([2, 3], 0), ([4, 0], 1)]] * 2
    assert labels("discard") == [[([0, 1], 0), ([2, 3], 0)]] * 2
    # roll_over: the leftover example opens the next epoch's first batch
    assert labels("roll_over") == [[([0, 1], 0), ([2, 3], 0)],
                                   [([4, 0], 1), ([1, 2], 0), ([3, 4], 0)]]
    it = mx.image.ImageIter(batch_size=3, data_shape=(3, 8, 8),
                            imglist=[[7.0, "i0.png"], [8.0, "i2.png"]], path_root=str(tmp_path))
    batch = it.next()
    assert batch.label[0].asnumpy().tolist() == [7.0, 8.0, 7.0] and batch.pad == 1
    np.testing.assert_array_equal(batch.data[0].asnumpy()[1],
                                  imgs[2][1:9, 1:9].transpose(2, 0, 1).astype(np.float32))


def test_image_record_iter_mean_img_made_saved_and_used(tmp_path):
    mean_file = tmp_path / "mean.bin"
    args = dict(path_imgrec=REC, data_shape=(3, 8, 8), batch_size=5, label_width=2)
    plain = mx.io.ImageRecordIter(**args).next().data[0].asnumpy()
    it = mx.io.ImageRecordIter(mean_img=str(mean_file), **args)
    saved = mx.nd.load(str(mean_file))
    assert list(saved) == ["mean_img"]
    # mxnet made its file with mirror=True: the mean of the mirrored images
    mxnet_made = mx.nd.load(os.path.join(FIX, "mean.bin"))["mean_img"].asnumpy()
    mx.io.ImageRecordIter(mean_img=str(tmp_path / "m2.bin"), mirror=True, **args)
    np.testing.assert_allclose(mx.nd.load(str(tmp_path / "m2.bin"))["mean_img"].asnumpy(),
                               mxnet_made, rtol=1e-6)
    np.testing.assert_allclose(saved["mean_img"].asnumpy(), plain.mean(0), rtol=1e-6)
    np.testing.assert_allclose(it.next().data[0].asnumpy(), plain - plain.mean(0), atol=1e-4)
    mirrored = mx.io.ImageRecordIter(mean_img=str(mean_file), mirror=True, **args).next()
    np.testing.assert_allclose(mirrored.data[0].asnumpy(),
                               (plain - plain.mean(0))[..., ::-1], atol=1e-4)


def test_image_record_iter_seed_aug_repeats_per_record():
    args = dict(path_imgrec=REC, data_shape=(3, 8, 8), batch_size=5, label_width=2,
                rand_crop=True, rand_mirror=True, max_rotate_angle=10, random_h=10)
    a = mx.io.ImageRecordIter(seed_aug=3, **args)
    first = a.next().data[0].asnumpy()
    a.reset()
    np.testing.assert_array_equal(a.next().data[0].asnumpy(), first)
    other = mx.io.ImageRecordIter(seed_aug=4, **args).next().data[0].asnumpy()
    assert not np.array_equal(first, other)


def test_copy_make_border_types_and_mx_img_alias():
    src = mx.nd.array(np.arange(12).reshape(2, 2, 3), dtype="uint8")
    row = lambda out: out.asnumpy()[1, :, 0].tolist()  # noqa: E731
    # OpenCV's border types on the row [0, 3] padded by 2 on the left and 1 on the right
    assert row(mx.img.copyMakeBorder(src, 1, 0, 2, 1, type=1)) == [0, 0, 0, 3, 3]
    assert row(mx.img.copyMakeBorder(src, 1, 0, 2, 1, type=2)) == [3, 0, 0, 3, 3]
    assert row(mx.img.copyMakeBorder(src, 1, 0, 2, 1, type=3)) == [0, 3, 0, 3, 0]
    assert row(mx.img.copyMakeBorder(src, 1, 0, 2, 1, type=4)) == [0, 3, 0, 3, 0]
    const = mx.image.copyMakeBorder(src, 1, 1, 1, 1, type=0, values=(7, 8, 9)).asnumpy()
    assert const.shape == (4, 4, 3) and const[0, 0].tolist() == [7, 8, 9]
    np.testing.assert_array_equal(const[1:3, 1:3], src.asnumpy())
    assert mx.image.copyMakeBorder(src, 1, 0, 0, 0, value=5).asnumpy()[0, 0].tolist() == [5] * 3


def test_image_iter_as_mxnet_resize_crop_normalize():
    it = mx.image.ImageIter(batch_size=2, data_shape=(3, 8, 8), label_width=2,
                            path_imgrec=REC, path_imgidx=REC[:-3] + "idx", resize=9, mean=True,
                            std=True)
    batches = list(it)
    assert len(batches) == len([k for k in ORACLE if k.startswith("imageiter_") and
                                k.endswith("_pad")])
    for b, batch in enumerate(batches):
        key = f"imageiter_b{b}"
        assert batch.pad == int(ORACLE[key + "_pad"])
        np.testing.assert_array_equal(batch.label[0].asnumpy(), ORACLE[key + "_label"])
        # bicubic resizing may round 1 unit apart: 1 / std (about 0.0175) after normalizing
        diff = np.abs(batch.data[0].asnumpy() - ORACLE[key + "_data"])
        assert diff.max() <= 1.0 / 57.0 + 1e-5, (key, diff.max())


# mxnet 1.9.1's augmenters on AUG_IMG after random.seed(s) and np.random.seed(s), s = 1, 2
# (rounded to 3 decimals): the draws come in mxnet's order and from mxnet's distributions
AUG_IMG = np.array([[[10., 200., 30.], [40., 50., 160.], [70., 80., 90.]],
                    [[250., 5., 120.], [130., 140., 15.], [60., 220., 180.]]], np.float32)
PCA_EIGVAL = np.array([55.46, 4.794, 1.148])
PCA_EIGVEC = np.array([[-0.5675, 0.7192, 0.4009], [-0.5808, -0.0045, -0.8140],
                       [-0.5836, -0.6948, 0.4203]])
MXNET_AUGMENTED = {
    "bright": (lambda: mx.image.BrightnessJitterAug(0.3), [
        [[[7.806, 156.124, 23.419], [31.225, 39.031, 124.899], [54.643, 62.449, 70.256]],
         [[195.155, 3.903, 93.674], [101.48, 109.287, 11.709], [46.837, 171.736, 140.511]]],
        [[[12.736, 254.724, 38.209], [50.945, 63.681, 203.779], [89.153, 101.89, 114.626]],
         [[318.405, 6.368, 152.834], [165.571, 178.307, 19.104], [76.417, 280.197, 229.252]]]]),
    "contrast": (lambda: mx.image.ContrastJitterAug(0.3), [
        [[[31.325, 179.643, 46.938], [54.744, 62.55, 148.418], [78.162, 85.968, 93.775]],
         [[218.674, 27.422, 117.193], [124.999, 132.806, 35.228], [70.356, 195.255, 164.03]]],
        [[[-16.598, 225.39, 8.875], [21.611, 34.347, 174.446], [59.82, 72.556, 85.292]],
         [[289.071, -22.966, 123.501], [136.237, 148.973, -10.229], [47.084, 250.863, 199.918]]]]),
    "sat": (lambda: mx.image.SaturationJitterAug(0.3), [
        [[[34.968, 183.285, 50.58], [44.289, 52.095, 137.963], [71.788, 79.594, 87.4]],
         [[215.198, 23.947, 113.718], [128.412, 136.218, 38.641], [83.605, 208.504, 177.28]]],
        [[[-21.141, 220.847, 4.332], [34.651, 47.387, 187.485], [67.77, 80.506, 93.242]],
         [[293.406, -18.631, 127.835], [131.981, 144.717, -14.485], [30.558, 234.338, 183.393]]]]),
    "hue": (lambda: mx.image.HueJitterAug(0.3), [
        [[[2.478, 174.658, 180.157], [80.261, 29.696, 159.069], [76.033, 75.7, 96.335]],
         [[223.858, 54.558, -66.643], [89.811, 157.322, 31.094], [88.913, 182.222, 298.742]]],
        [[[89.525, 182.997, -91.273], [4.215, 80.142, 98.639], [67.908, 84.02, 74.772]],
         [[182.894, -0.401, 324.134], [173.421, 108.748, 62.025], [92.328, 232.591, 30.171]]]]),
    "jitter": (lambda: mx.image.ColorJitterAug(0.1, 0.2, 0.3), [
        [[[19.605, 188.794, 37.414], [46.162, 55.066, 153.018], [72.921, 81.826, 90.731]],
         [[233.238, 15.073, 117.477], [126.458, 135.363, 24.054], [64.235, 206.71, 171.092]]],
        [[[7.368, 206.697, 28.35], [50.137, 60.628, 176.029], [78.34, 88.832, 99.323]],
         [[264.856, 7.826, 128.472], [133.444, 143.935, 12.798], [52.125, 219.981, 178.017]]]]),
    "light": (lambda: mx.image.LightingAug(0.1, PCA_EIGVAL, PCA_EIGVEC), [
        [[[4.652, 194.818, 24.921], [34.652, 44.818, 154.921], [64.652, 74.818, 84.921]],
         [[244.652, -0.182, 114.921], [124.652, 134.818, 9.921], [54.652, 214.818, 174.921]]],
        [[[11.194, 201.542, 31.265], [41.194, 51.542, 161.265], [71.194, 81.542, 91.265]],
         [[251.194, 6.542, 121.265], [131.194, 141.542, 16.265], [61.194, 221.542, 181.265]]]]),
    "gray": (lambda: mx.image.RandomGrayAug(0.5), [
        [[[148.2] * 3, [55.6] * 3, [78.6] * 3], [[64.5] * 3, [129.15] * 3, [183.6] * 3]],
        AUG_IMG.tolist()]),
    "flip": (lambda: mx.image.HorizontalFlipAug(0.5), [AUG_IMG[:, ::-1].tolist(),
                                                       AUG_IMG.tolist()]),
    "crop": (lambda: mx.image.RandomCropAug((2, 1), 0), [AUG_IMG[:1, :2].tolist()] * 2),
    "sized": (lambda: mx.image.RandomSizedCropAug((2, 2), 0.3, (0.5, 2.0), 0), [
        [AUG_IMG[1, :2].tolist()] * 2, [AUG_IMG[0, :2].tolist(), AUG_IMG[1, :2].tolist()]]),
}


@pytest.mark.parametrize("name", sorted(MXNET_AUGMENTED))
def test_seeded_augmenters_draw_as_mxnet(name):
    make, wanted = MXNET_AUGMENTED[name]
    for seed, want in zip((1, 2), wanted):
        random.seed(seed)
        np.random.seed(seed)
        got = make()(mx.nd.array(AUG_IMG)).asnumpy()
        np.testing.assert_allclose(got, np.array(want, np.float32), atol=2e-3, rtol=0)


def test_create_augmenter_dumps_as_mxnet():
    augs = mx.image.CreateAugmenter((3, 8, 8), resize=9, rand_crop=True, rand_resize=True,
                                    rand_mirror=True, mean=True, std=True, brightness=0.1,
                                    contrast=0.1, saturation=0.1, hue=0.1, pca_noise=0.1,
                                    rand_gray=0.5, inter_method=1)
    assert [a.dumps() for a in augs] == [      # printed by mxnet 1.9.1
        '["resizeaug", {"size": 9, "interp": 1}]',
        '["randomsizedcropaug", {"size": [8, 8], "area": 0.08, "ratio": [0.75, '
        '1.3333333333333333], "interp": 1}]',
        '["horizontalflipaug", {"p": 0.5}]', '["castaug", {"type": "float32"}]',
        ['colorjitteraug', ['["brightnessjitteraug", {"brightness": 0.1}]',
                            '["contrastjitteraug", {"contrast": 0.1}]',
                            '["saturationjitteraug", {"saturation": 0.1}]']],
        '["huejitteraug", {"hue": 0.1}]',
        '["lightingaug", {"alphastd": 0.1, "eigval": [55.46, 4.794, 1.148], "eigvec": '
        '[[-0.5675, 0.7192, 0.4009], [-0.5808, -0.0045, -0.814], [-0.5836, -0.6948, 0.4203]]}]',
        '["randomgrayaug", {"p": 0.5}]',
        '["colornormalizeaug", {"mean": [123.68000030517578, 116.27999877929688, '
        '103.52999877929688], "std": [58.39500045776367, 57.119998931884766, 57.375]}]']
    with pytest.raises(AssertionError):
        mx.image.CreateAugmenter((3, 8, 8), rand_resize=True)     # needs rand_crop
