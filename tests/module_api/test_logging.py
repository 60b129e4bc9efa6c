"""The library never configures the root logger, and filelock's DEBUG lines stay out
of a user's log.

Each case runs a small program in a fresh process (the root logger is process-wide,
and pytest's own handlers sit on it here): the mxnet example pattern of making a
``MNISTIter(silent=False)`` *before* ``logging.basicConfig(level=...)``, then ``fit``,
must still print fit's ``Epoch[..]`` lines.
"""
import os
import struct
import subprocess
import sys
import textwrap

import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def _run(tmp_path, body):
    env = dict(os.environ, PYTHONPATH=ROOT, SYMTRITON_CACHE_DIR=str(tmp_path / "cache"))
    proc = subprocess.run([sys.executable, "-c", textwrap.dedent(body)], capture_output=True,
                          text=True, env=env, cwd=str(tmp_path), timeout=300)
    assert proc.returncode == 0, proc.stderr
    return proc.stderr


def _idx_files(tmp_path):
    rs = np.random.RandomState(0)
    images = rs.randint(0, 256, (40, 2, 3)).astype(np.uint8)
    labels = rs.randint(0, 3, 40).astype(np.uint8)
    (tmp_path / "images").write_bytes(struct.pack(">IIII", 2051, 40, 2, 3) + images.tobytes())
    (tmp_path / "labels").write_bytes(struct.pack(">II", 2049, 40) + labels.tobytes())


FIT = """
    import logging
    import module_api as mx
    train = mx.io.MNISTIter(image="images", label="labels", data_shape=(6,), batch_size=10,
                            flat=True, silent=False)
    assert logging.getLogger().handlers == [], logging.getLogger().handlers
    logging.basicConfig(level=logging.{level})
    net = mx.sym.SoftmaxOutput(mx.sym.FullyConnected(mx.sym.var("data"), num_hidden=3),
                               name="softmax")
    mod = mx.mod.Module(net)
    mod.fit(train, num_epoch=2, eval_data=train)
"""


def test_basic_config_after_the_iterator_still_shows_fit(tmp_path):
    _idx_files(tmp_path)
    err = _run(tmp_path, FIT.format(level="INFO"))
    assert "Epoch[0] Train-accuracy=" in err and "Epoch[1] Validation-accuracy=" in err
    # the iterator's line came before logging was configured: mxnet prints it, here it
    # went to a module logger with no handler yet (dropped, as logging drops INFO)
    assert "MNISTIter: load" not in err


def test_filelock_stays_out_of_a_debug_log(tmp_path):
    _idx_files(tmp_path)
    err = _run(tmp_path, FIT.format(level="DEBUG"))
    assert "Epoch[1] Train-accuracy=" in err
    assert "filelock" not in err
    # a user who asks for filelock's lines gets them
    err = _run(tmp_path, FIT.format(level="DEBUG").replace(
        "logging.basicConfig(level=logging.DEBUG)",
        "logging.basicConfig(level=logging.DEBUG); "
        "logging.getLogger('filelock').setLevel(logging.DEBUG)").replace(
        'mx.sym.var("data"), num_hidden=3', 'mx.sym.var("data"), num_hidden=4'))
    assert "DEBUG:filelock:" in err
