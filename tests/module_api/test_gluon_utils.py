"""``mx.gluon``: ``from mxnet import gluon`` imports, ``gluon.utils`` behaves as mxnet
1.9.1's (values below were printed by mxnet 1.9.1 for the same inputs), and the rest
of Gluon says that symtriton implements the Module API."""
import hashlib
import socket
import warnings

import numpy as np
import pytest

import module_api as mx
from module_api import gluon
from module_api.gluon.utils import check_sha1, clip_global_norm, download, split_data


def _arrays():
    rs = np.random.RandomState(0)
    return (rs.normal(size=(3, 4)).astype(np.float32), rs.normal(size=(5,)).astype(np.float32))


MXNET_NORM = 4.479896545410156          # mxnet's clip_global_norm of _arrays()


@pytest.mark.parametrize("max_norm", [1.0, 2.0, 100.0])
def test_clip_global_norm_as_mxnet(max_norm):
    a, b = _arrays()
    x, y = mx.nd.array(a), mx.nd.array(b)
    norm = gluon.utils.clip_global_norm([x, y], max_norm)
    assert isinstance(norm, np.float32)
    assert norm == pytest.approx(MXNET_NORM, rel=1e-6)
    scale = min(1.0, max_norm / (MXNET_NORM + 1e-8))
    np.testing.assert_allclose(x.asnumpy(), a * scale, rtol=1e-6)    # rescaled in place
    np.testing.assert_allclose(y.asnumpy(), b * scale, rtol=1e-6)
    if max_norm == 1.0:       # mxnet's first value, printed
        assert x.asnumpy()[0, 0] == pytest.approx(0.3937707841396332, rel=1e-6)


def test_clip_global_norm_unchecked_returns_an_ndarray():
    a, b = _arrays()
    norm = clip_global_norm([mx.nd.array(a), mx.nd.array(b)], 2.0, check_isfinite=False)
    assert isinstance(norm, mx.nd.NDArray) and norm.shape == (1,)
    assert norm.asnumpy()[0] == pytest.approx(MXNET_NORM, rel=1e-6)


def test_clip_global_norm_warns_on_inf():
    x = mx.nd.array([np.inf, 1.0])
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        norm = clip_global_norm([x], 1.0)
    assert np.isinf(norm)
    assert [str(w.message) for w in caught] == \
        ['nan or inf is detected. Clipping results will be undefined.']
    assert np.isnan(x.asnumpy()[0]) and x.asnumpy()[1] == 0.0     # inf * 0, as in mxnet


def test_clip_global_norm_on_a_modules_gradients():
    """mxnet's word_lm RNN example clips the Module's gradient arrays, then updates."""
    net = mx.sym.LinearRegressionOutput(
        mx.sym.FullyConnected(mx.sym.var("data"), num_hidden=3, name="fc"), name="lro")
    mod = mx.mod.Module(net, label_names=["lro_label"])
    mod.bind(data_shapes=[("data", (4, 5))], label_shapes=[("lro_label", (4, 3))])
    mod.init_params(mx.init.Constant(0.5))
    mod.init_optimizer(optimizer="sgd", optimizer_params={"learning_rate": 1.0,
                                                          "rescale_grad": 1.0})
    batch = mx.io.DataBatch(data=[mx.nd.ones((4, 5)) * 3], label=[mx.nd.zeros((4, 3))])
    mod.forward_backward(batch)
    grads = [g for per_param in mod._exec_group.grad_arrays for g in per_param]
    before = [g.asnumpy().copy() for g in grads]
    want = np.sqrt(sum(float((g.astype(np.float64) ** 2).sum()) for g in before))
    norm = clip_global_norm(grads, 0.1)
    assert norm == pytest.approx(want, rel=1e-5) and want > 0.1
    after = [g.asnumpy() for g in mod._exec_group.grad_arrays[0]]
    np.testing.assert_allclose(after[0], before[0] * (0.1 / want), rtol=1e-5)
    w0 = mod.get_params()[0]["fc_weight"].asnumpy()
    mod.update()           # the update reads the clipped gradient
    np.testing.assert_allclose(mod.get_params()[0]["fc_weight"].asnumpy(),
                               w0 - before[0] * (0.1 / want), rtol=1e-5)


def test_split_data_and_split_and_load_as_mxnet():
    d = mx.nd.arange(10).reshape((5, 2))
    assert [s.asnumpy().tolist() for s in split_data(d, 3, even_split=False)] == \
        [[[0.0, 1.0], [2.0, 3.0]], [[4.0, 5.0], [6.0, 7.0]], [[8.0, 9.0]]]
    assert [s.asnumpy().tolist() for s in split_data(mx.nd.arange(12).reshape((2, 6)), 3,
                                                      batch_axis=1)] == \
        [[[0.0, 1.0], [6.0, 7.0]], [[2.0, 3.0], [8.0, 9.0]], [[4.0, 5.0], [10.0, 11.0]]]
    with pytest.raises(ValueError) as err:
        split_data(d, 3)
    assert str(err.value) == (
        "data with shape (5, 2) cannot be evenly split into 3 slices along axis 0. Use a "
        "batch size that's multiple of 3 or set even_split=False to allow uneven "
        "partitioning of data.")
    parts = gluon.utils.split_and_load(np.arange(8).reshape(4, 2), [mx.cpu(0), mx.cpu(1)])
    assert [(p.asnumpy().tolist(), str(p.context), p.asnumpy().dtype) for p in parts] == [
        ([[0.0, 1.0], [2.0, 3.0]], "cpu(0)", np.float32),
        ([[4.0, 5.0], [6.0, 7.0]], "cpu(1)", np.float32)]
    (one,) = gluon.utils.split_and_load(mx.nd.arange(4), [mx.cpu(0)])
    assert one.asnumpy().tolist() == [0.0, 1.0, 2.0, 3.0] and str(one.context) == "cpu(0)"


def test_check_sha1_and_download_of_a_present_file(tmp_path):
    f = tmp_path / "data.bin"
    f.write_bytes(b"symtriton")
    digest = hashlib.sha1(b"symtriton").hexdigest()
    assert check_sha1(str(f), digest) and not check_sha1(str(f), "0" * 40)
    # present (and matching): no network needed, the path comes back
    assert download("http://example.invalid/data.bin", path=str(tmp_path)) == str(f)
    assert download("http://example.invalid/x", path=str(f), sha1_hash=digest) == str(f)


def _closed_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]        # nothing listens there once closed


def test_download_offline_is_a_clear_error(tmp_path):
    url = f"http://127.0.0.1:{_closed_port()}/train.txt"
    with pytest.raises(mx.MXNetError) as err:
        download(url, path=str(tmp_path), retries=1)
    msg = str(err.value)
    assert url in msg and "offline" in msg and str(tmp_path / "train.txt") in msg
    assert list(tmp_path.iterdir()) == []          # no partial file left
    # a present file whose hash does not match is fetched again, hence the same error
    (tmp_path / "train.txt").write_bytes(b"old")
    with pytest.raises(mx.MXNetError, match="SHA-1 " + "1" * 40):
        download(url, path=str(tmp_path), sha1_hash="1" * 40, retries=0)


def test_the_rest_of_gluon_says_module_api():
    from module_api.gluon import utils   # noqa: F401  (the one part there is)
    for name in ("nn", "Block", "HybridBlock", "Trainer", "loss", "data", "Parameter"):
        with pytest.raises(mx.MXNetError, match="implements mxnet's Module API .* not Gluon"):
            getattr(mx.gluon, name)
    with pytest.raises(mx.MXNetError, match="not Gluon"):
        from module_api.gluon import nn   # noqa: F401
