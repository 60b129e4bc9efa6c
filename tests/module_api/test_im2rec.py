"""``python -m module_api.tools.im2rec``: lists and packs images as mxnet's ``tools/im2rec.py``."""
import os
import random

import numpy as np

import module_api as mx
from module_api import _imagecodec
from module_api.tools import im2rec


def _images(root):
    rng = np.random.RandomState(0)
    made = {}
    for label, cls in enumerate(["cats", "dogs"]):
        os.makedirs(root / cls)
        for k in range(3):
            img = rng.randint(0, 255, size=(10 + k, 12, 3)).astype(np.uint8)
            name = f"{cls}/img{k}.png"
            (root / name).write_bytes(_imagecodec.encode(img, ".png"))
            made[name] = (img, label)
    (root / "notes.txt").write_text("not an image")
    return made


def test_list_then_pack_reads_back_through_image_record_iter(tmp_path):
    made = _images(tmp_path / "imgs")
    prefix = str(tmp_path / "data")
    assert im2rec.main([prefix, str(tmp_path / "imgs"), "--list", "--recursive"]) == 0
    lines = [line.split("\t") for line in open(prefix + ".lst").read().splitlines()]
    # mxnet's order: the files in name order, shuffled by random.seed(100)
    in_order = sorted(made)
    random.seed(100)
    random.shuffle(in_order)
    assert [p for *_, p in lines] == in_order
    assert all(float(lab) == made[p][1] for _, lab, p in lines)
    assert im2rec.main([prefix, str(tmp_path / "imgs"), "--encoding", ".png",
                        "--num-thread", "2"]) == 0
    it = mx.io.ImageRecordIter(path_imgrec=prefix + ".rec", path_imgidx=prefix + ".idx",
                               data_shape=(3, 10, 12), batch_size=6)
    batch = it.next()
    for row, (idx, lab, path) in enumerate(lines):
        img, label = made[path]
        assert batch.label[0].asnumpy()[row] == label
        y = (img.shape[0] - 10) // 2            # ImageRecordIter's centre crop
        np.testing.assert_array_equal(batch.data[0].asnumpy()[row],
                                      img[y:y + 10].transpose(2, 0, 1).astype(np.float32))
    rec = mx.recordio.MXIndexedRecordIO(prefix + ".idx", prefix + ".rec", "r")
    assert sorted(rec.keys) == list(range(6))
    header, _ = mx.recordio.unpack(rec.read_idx(int(lines[0][0])))
    assert header.id == int(lines[0][0])


def test_resize_center_crop_pass_through_and_missing_list(tmp_path):
    made = _images(tmp_path / "imgs")
    prefix = str(tmp_path / "d")
    im2rec.main([prefix, str(tmp_path / "imgs"), "--list", "--recursive", "--no-shuffle"])
    im2rec.main([prefix, str(tmp_path / "imgs"), "--center-crop", "--resize", "6",
                 "--encoding", ".png"])
    rec = mx.recordio.MXRecordIO(prefix + ".rec", "r")
    for _ in made:
        _, img = mx.recordio.unpack_img(rec.read())
        assert img.shape == (6, 6, 3)
    im2rec.main([prefix, str(tmp_path / "imgs"), "--pass-through"])
    rec = mx.recordio.MXRecordIO(prefix + ".rec", "r")
    first = sorted(made)[0]
    _, raw = mx.recordio.unpack(rec.read())
    assert raw == (tmp_path / "imgs" / first).read_bytes()
    assert im2rec.main([str(tmp_path / "nolist"), str(tmp_path / "imgs")]) == 1


def test_module_trains_on_an_im2rec_record_file(tmp_path):
    # the image-classification examples' path: images -> im2rec -> ImageRecordIter -> fit
    rng = np.random.RandomState(1)
    for label, cls in enumerate(["dark", "light"]):
        os.makedirs(tmp_path / "imgs" / cls)
        for k in range(24):
            base = 60 + 120 * label
            img = np.clip(base + rng.randint(-50, 50, size=(10, 10, 3)), 0, 255).astype(np.uint8)
            (tmp_path / "imgs" / cls / f"{k}.png").write_bytes(_imagecodec.encode(img, ".png"))
    prefix = str(tmp_path / "train")
    im2rec.main([prefix, str(tmp_path / "imgs"), "--list", "--recursive"])
    im2rec.main([prefix, str(tmp_path / "imgs"), "--encoding", ".png"])
    train = mx.io.ImageRecordIter(path_imgrec=prefix + ".rec", path_imgidx=prefix + ".idx",
                                  data_shape=(3, 8, 8), batch_size=8, shuffle=True,
                                  rand_crop=True, rand_mirror=True, mean_r=128, mean_g=128,
                                  mean_b=128, std_r=64, std_g=64, std_b=64,
                                  preprocess_threads=2)
    data = mx.sym.Variable("data")
    net = mx.sym.FullyConnected(mx.sym.Flatten(data), num_hidden=2, name="fc")
    net = mx.sym.SoftmaxOutput(net, name="softmax")
    mod = mx.mod.Module(net, context=mx.cpu())
    mod.fit(train, num_epoch=3, optimizer="sgd",
            optimizer_params={"learning_rate": 0.05}, initializer=mx.init.Xavier())
    val = mx.io.ImageRecordIter(path_imgrec=prefix + ".rec", data_shape=(3, 8, 8),
                                batch_size=8, mean_r=128, mean_g=128, mean_b=128, std_r=64,
                                std_g=64, std_b=64)
    assert dict(mod.score(val, "acc"))["accuracy"] >= 0.95
