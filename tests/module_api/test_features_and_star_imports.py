"""``mx.runtime`` (build features) and the top-level and star-import names mxnet's own
test files take from mxnet: ``mx.use_np_shape`` and its kin at the top level,
``from mxnet.autograd import *`` giving ``NDArray``, ``from mxnet.test_utils import *``
giving ``mx``. Names and messages from mxnet 1.9.1
(``tests/fixtures/make_feature_names.py``)."""
import json
import os

import pytest
import torch

import module_api as mx

with open(os.path.join(os.path.dirname(os.path.dirname(__file__)), "fixtures",
                       "mxnet_feature_names.json")) as f:
    MXNET = json.load(f)


def test_features_are_mxnets_names_in_its_order_and_answer_for_this_process():
    features = mx.runtime.Features()
    assert list(features) == MXNET["names"]
    assert mx.runtime.Features() is features                # one per process
    assert [f.name for f in mx.runtime.feature_list()] == MXNET["names"]
    assert features.is_enabled("mkldnn") == torch.backends.mkldnn.is_available()
    assert features.is_enabled("OPENMP") == torch.backends.openmp.is_available()
    assert features.is_enabled("CUDA") == (torch.version.cuda is not None)
    assert features.is_enabled("PROFILER") and not features.is_enabled("CUDNN")
    on, off = features["PROFILER"], features["TVM_OP"]
    assert repr(on).split(" ") == [MXNET["repr_on"], "PROFILER"]
    assert repr(off).split(" ") == [MXNET["repr_off"], "TVM_OP"]
    with pytest.raises(RuntimeError) as err:
        features.is_enabled("no_such_feature")
    assert str(err.value) == MXNET["unknown"]


def test_import_mxnet_runtime_forms():
    import module_api.runtime as runtime
    from module_api import runtime as same
    assert runtime is same is mx.runtime


def test_numpy_shape_names_at_the_top_level():
    assert mx.is_np_shape() is False and mx.is_np_array() is False

    @mx.use_np_shape
    def uses_numpy_shapes():
        return mx.is_np_shape()
    assert uses_numpy_shapes() is True
    with mx.np_shape(True):
        assert mx.is_np_shape()
        with mx.np_shape(False):
            assert not mx.is_np_shape()
    assert mx.set_np_shape(False) is False
    with pytest.raises(mx.MXNetError, match="NumPy array semantics"):
        mx.util.set_np()


def test_star_imports_give_what_mxnets_test_files_read():
    autograd_names, utils_names = {}, {}
    exec("from module_api.autograd import *", autograd_names)
    exec("from module_api.test_utils import *", utils_names)
    assert autograd_names["NDArray"] is mx.nd.NDArray
    assert autograd_names["Symbol"] is mx.sym.Symbol
    assert autograd_names["record"] is mx.autograd.record
    assert utils_names["mx"] is mx
