"""``python -m module_api.tools.im2rec``: mxnet 1.9.1's ``tools/im2rec.py``, with Pillow.

Two steps, as mxnet's tool:

* ``--list PREFIX ROOT`` writes ``PREFIX.lst``: one ``index<TAB>label<TAB>path``
  line per image under ``ROOT`` (``--recursive``: one label per folder), in a
  shuffled order (``random.seed(100)``, as mxnet's, so the same files give the
  same list), split by ``--chunks`` / ``--train-ratio`` / ``--test-ratio``;
* ``PREFIX ROOT`` packs every ``PREFIX*.lst`` into ``.rec`` + ``.idx`` files
  (``mx.recordio`` format): each image read, optionally centre-cropped to a
  square and its shorter edge resized (bilinear), encoded (``--encoding``
  ``.jpg`` / ``.png``, ``--quality``), or copied as it is (``--pass-through``).

Records are written in list order (``--num-thread`` encodes in threads). The
files read back in mxnet's ``ImageRecordIter``; their image bytes are
Pillow's encoding, not OpenCV's, so they differ from mxnet-made files by
encoder rounding.
"""
import argparse
import os
import random
import sys
from concurrent.futures import ThreadPoolExecutor

import numpy as np
import torch

from .. import _imagecodec, recordio
from ..image.image import imresize


def list_image(root, recursive, exts):
    """``(index, relative path, label)`` of each image file under ``root``, in name order."""
    i = 0
    if recursive:
        cat = {}
        for path, dirs, files in os.walk(root, followlinks=True):
            dirs.sort()
            for fname in sorted(files):
                fpath = os.path.join(path, fname)
                if os.path.isfile(fpath) and os.path.splitext(fname)[1].lower() in exts:
                    cat.setdefault(path, len(cat))
                    yield (i, os.path.relpath(fpath, root), cat[path])
                    i += 1
        for k, v in sorted(cat.items(), key=lambda x: x[1]):
            print(os.path.relpath(k, root), v)
        return
    for fname in sorted(os.listdir(root)):
        fpath = os.path.join(root, fname)
        if os.path.isfile(fpath) and os.path.splitext(fname)[1].lower() in exts:
            yield (i, os.path.relpath(fpath, root), 0)
            i += 1


def write_list(path_out, image_list):
    """Write ``index<TAB>label(s)<TAB>path`` lines."""
    with open(path_out, "w") as fout:
        for item in image_list:
            fout.write("%d\t" % item[0] + "".join("%f\t" % j for j in item[2:])
                       + "%s\n" % item[1])


def make_list(args):
    """Write the ``.lst`` file(s) of ``args.root``."""
    image_list = list(list_image(args.root, args.recursive, args.exts))
    if args.shuffle:
        random.seed(100)
        random.shuffle(image_list)
    n = len(image_list)
    chunk_size = (n + args.chunks - 1) // args.chunks
    for i in range(args.chunks):
        chunk = image_list[i * chunk_size:(i + 1) * chunk_size]
        suffix = "_%d" % i if args.chunks > 1 else ""
        sep, sep_test = int(chunk_size * args.train_ratio), int(chunk_size * args.test_ratio)
        if args.train_ratio == 1.0:
            write_list(args.prefix + suffix + ".lst", chunk)
            continue
        if args.test_ratio:
            write_list(args.prefix + suffix + "_test.lst", chunk[:sep_test])
        if args.train_ratio + args.test_ratio < 1.0:
            write_list(args.prefix + suffix + "_val.lst", chunk[sep_test + sep:])
        write_list(args.prefix + suffix + "_train.lst", chunk[sep_test:sep_test + sep])


def read_list(path_in):
    """``[index, path, label, ...]`` items of a ``.lst`` file (bad lines reported, skipped)."""
    with open(path_in) as fin:
        for line in fin:
            fields = [f.strip() for f in line.strip().split("\t")]
            if len(fields) < 3:
                print("lst should have at least has three parts, but only has %s parts for %s"
                      % (len(fields), fields))
                continue
            try:
                yield [int(fields[0])] + [fields[-1]] + [float(f) for f in fields[1:-1]]
            except ValueError as err:
                print("Parsing lst met error for %s, detail: %s" % (fields, err))


def image_encode(args, item):
    """The packed record of one list item, or ``None`` (the error printed) if it fails."""
    fullpath = os.path.join(args.root, item[1])
    label = item[2:] if len(item) > 3 and args.pack_label else item[2]
    header = recordio.IRHeader(0, label, item[0], 0)
    try:
        with open(fullpath, "rb") as fin:
            raw = fin.read()
        if args.pass_through:
            return recordio.pack(header, raw)
        img = _imagecodec.decode(raw, args.color)
    except Exception as err:  # noqa: BLE001  (as mxnet's tool: report, skip the image)
        print("imread error trying to load file: %s (%s)" % (fullpath, err))
        return None
    img = _transform(img, args)
    return recordio.pack(header, _imagecodec.encode(img, args.encoding, args.quality))


def _transform(img, args):
    if args.center_crop:
        rows, cols = img.shape[:2]
        margin = abs(rows - cols) // 2
        img = img[margin:margin + cols] if rows > cols else img[:, margin:margin + rows]
    if args.resize:
        rows, cols = img.shape[:2]
        if rows > cols:
            size = (args.resize, rows * args.resize // cols)
        else:
            size = (cols * args.resize // rows, args.resize)
        img = imresize(torch.from_numpy(np.ascontiguousarray(img)), *size, interp=1)
        img = img.as_subclass(torch.Tensor).numpy()
    return img


def make_record(args, lst_path, working_dir):
    """Pack the images of one ``.lst`` file into ``.rec`` / ``.idx`` beside it."""
    base = os.path.splitext(os.path.basename(lst_path))[0]
    record = recordio.MXIndexedRecordIO(os.path.join(working_dir, base + ".idx"),
                                        os.path.join(working_dir, base + ".rec"), "w")
    items = list(read_list(lst_path))
    with ThreadPoolExecutor(max(1, args.num_thread)) as pool:
        for count, (item, s) in enumerate(zip(items, pool.map(
                lambda it: image_encode(args, it), items))):
            if s is not None:
                record.write_idx(item[0], s)
            if count % 1000 == 0:
                print("count:", count)
    record.close()


def parse_args(argv=None):
    """mxnet's ``im2rec.py`` arguments."""
    parser = argparse.ArgumentParser(
        formatter_class=argparse.ArgumentDefaultsHelpFormatter,
        description="Create an image list or make a record database by reading from an "
                    "image list")
    parser.add_argument("prefix", help="prefix of input/output lst and rec files.")
    parser.add_argument("root", help="path to folder containing images.")
    cgroup = parser.add_argument_group("Options for creating image lists")
    cgroup.add_argument("--list", action="store_true", help="make a list (PREFIX.lst)")
    cgroup.add_argument("--exts", nargs="+", default=[".jpeg", ".jpg", ".png"])
    cgroup.add_argument("--chunks", type=int, default=1)
    cgroup.add_argument("--train-ratio", type=float, default=1.0)
    cgroup.add_argument("--test-ratio", type=float, default=0)
    cgroup.add_argument("--recursive", action="store_true")
    cgroup.add_argument("--no-shuffle", dest="shuffle", action="store_false")
    rgroup = parser.add_argument_group("Options for creating database")
    rgroup.add_argument("--pass-through", action="store_true")
    rgroup.add_argument("--resize", type=int, default=0)
    rgroup.add_argument("--center-crop", action="store_true")
    rgroup.add_argument("--quality", type=int, default=95)
    rgroup.add_argument("--num-thread", type=int, default=1)
    rgroup.add_argument("--color", type=int, default=1, choices=[-1, 0, 1])
    rgroup.add_argument("--encoding", type=str, default=".jpg", choices=[".jpg", ".png"])
    rgroup.add_argument("--pack-label", action="store_true")
    args = parser.parse_args(argv)
    args.prefix, args.root = os.path.abspath(args.prefix), os.path.abspath(args.root)
    return args


def main(argv=None):
    """Run the tool; 0 on success, 1 when no ``.lst`` file matched the prefix."""
    args = parse_args(argv)
    if args.list:
        make_list(args)
        return 0
    working_dir = args.prefix if os.path.isdir(args.prefix) else os.path.dirname(args.prefix)
    lists = sorted(os.path.join(working_dir, f) for f in os.listdir(working_dir)
                   if os.path.join(working_dir, f).startswith(args.prefix)
                   and f.endswith(".lst"))
    for lst in lists:
        print("Creating .rec file from", lst, "in", working_dir)
        make_record(args, lst, working_dir)
    if not lists:
        print("Did not find and list file with prefix %s" % args.prefix)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
