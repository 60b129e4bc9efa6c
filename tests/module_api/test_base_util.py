"""``mx.base`` and ``mx.util``: mxnet 1.9.1's names, and NumPy semantics refused clearly."""
import os
import threading

import numpy as np
import pytest

import module_api as mx
from compiler.errors import MXNetError


def test_base_error_is_the_project_error():
    assert mx.base.MXNetError is MXNetError is mx.MXNetError
    assert mx.base.error_types["MXNetError"] is MXNetError
    with pytest.raises(mx.base.MXNetError):
        mx.sym.Variable("x").infer_shape(y=(1, 2))


def test_not_implemented_for_symbol_message():
    def sort(x):
        return x
    err = mx.base.NotImplementedForSymbol(sort, "_sort", mx.sym.Variable("a"), 1)
    assert isinstance(err, MXNetError)
    msg = str(err)
    assert msg.startswith('Function sort (namely operator "_sort") with arguments (')
    assert msg.endswith("is not implemented for Symbol and only available in NDArray.")
    assert "NotImplementedForSymbol" in mx.base.error_types


def test_type_tuples_and_helpers():
    assert isinstance("a", mx.base.string_types)
    assert not isinstance(b"a", mx.base.string_types)
    for v in (1, 2.5, np.float32(1), np.int64(3)):
        assert isinstance(v, mx.base.numeric_types)
    for v in (1, np.int32(1), np.int64(1)):
        assert isinstance(v, mx.base.integer_types)
    assert not isinstance(1.5, mx.base.integer_types)
    assert mx.base.py_str(b"caf\xc3\xa9") == "caf\u00e9"
    assert mx.base._as_list(3) == [3]
    lst = [1, 2]
    assert mx.base._as_list(lst) is lst
    assert mx.base._as_list((1,)) == (1,)
    assert repr(mx.base._Null) == "_Null"
    assert mx.base.mx_real_t is np.float32


def test_data_dir_follows_mxnet_home(monkeypatch):
    monkeypatch.setenv("MXNET_HOME", "/tmp/some-mx-home")
    assert mx.base.data_dir() == "/tmp/some-mx-home"
    monkeypatch.delenv("MXNET_HOME")
    assert mx.base.data_dir() == os.path.join(os.path.expanduser("~"), ".mxnet")


def test_classproperty():
    class A:
        _v = 3

        @mx.base.classproperty
        def v(cls):
            return cls._v
    assert A.v == 3 and A().v == 3


def test_classproperty_setter_and_with_metaclass_like_mxnet():
    # mxnet 1.9.1: the setter runs with the class, through _MXClassPropertyMetaClass
    seen = []

    class P(mx.base.with_metaclass(mx.base._MXClassPropertyMetaClass, object)):
        _v = 1

        @mx.base.classproperty
        def v(cls):
            return cls._v

        @v.setter
        def v(cls, value):
            seen.append(cls)
            cls._v = value
    assert type(P) is mx.base._MXClassPropertyMetaClass
    assert P.v == 1 and P().v == 1
    P.v = 5
    assert seen == [P] and P.v == 5 and P._v == 5
    P.other = 3                                 # plain attributes are set as usual
    assert P.other == 3

    class R(mx.base.with_metaclass(mx.base._MXClassPropertyMetaClass, object)):
        @mx.base.classproperty
        def w(cls):
            return "w"
    with pytest.raises(MXNetError, match="cannot use the setter: R"):
        R.w = 1

    class Meta(type):
        def __new__(mcs, name, bases, namespace):
            namespace["made_by"] = "Meta"
            return super().__new__(mcs, name, bases, namespace)

    class Base:
        def hello(self):
            return "hi"

    class C(mx.base.with_metaclass(Meta, Base)):
        pass
    assert type(C) is Meta and C.__mro__ == (C, Base, object)
    assert C.made_by == "Meta" and C().hello() == "hi"


def test_not_supported_for_sparse_and_register_error():
    def dot(x):
        return x
    err = mx.base.NotSupportedForSparseNDArray(dot, "dot", 1, "a")
    assert isinstance(err, MXNetError)
    assert str(err) == ('Function dot (namely operator "dot") with arguments (<class \'int\'>, '
                        "<class 'str'>) is not supported for SparseNDArray and only available "
                        "in NDArray.")
    assert (err.function, err.alias) == ("dot", "dot")
    assert str(mx.base.NotSupportedForSparseNDArray(dot, None)) == \
        "Function dot is not supported for SparseNDArray and only available in NDArray."

    @mx.base.register_error
    class SomeError(MXNetError):
        pass
    mx.base.register_error("SomeOtherName", SomeError)
    try:
        assert mx.base.error_types["SomeError"] is SomeError
        assert mx.base.error_types["SomeOtherName"] is SomeError
    finally:
        mx.base.error_types.pop("SomeError")
        mx.base.error_types.pop("SomeOtherName")


def test_np_shape_is_off_by_default_and_scopes_restore_it():
    assert mx.util.is_np_shape() is False
    assert mx.util.is_np_array() is False
    with mx.util.np_shape():
        assert mx.util.is_np_shape() is True
        with mx.util.np_shape(False):
            assert not mx.util.is_np_shape()
        assert mx.util.is_np_shape() is True
    assert mx.util.is_np_shape() is False
    with pytest.raises(KeyError):       # the scope is restored when its body raises
        with mx.util.np_shape():
            raise KeyError("x")
    assert mx.util.is_np_shape() is False
    assert mx.util.set_np_shape(True) is False
    try:
        assert mx.util.set_np_shape(True) is True       # the previous state
    finally:
        mx.util.set_np_shape(False)
    mx.util.set_np(shape=True, array=False)
    assert mx.util.is_np_shape()
    mx.util.reset_np()
    assert not mx.util.is_np_shape()


def test_np_shape_is_per_thread():
    seen = []
    with mx.util.np_shape():
        t = threading.Thread(target=lambda: seen.append(mx.util.is_np_shape()))
        t.start()
        t.join()
        assert mx.util.is_np_shape()
    assert seen == [False]


def test_np_array_on_raises_naming_what_is_unsupported():
    with pytest.raises(MXNetError, match="NumPy array semantics"):
        with mx.util.np_array(True):
            pass
    with pytest.raises(MXNetError):
        mx.util.set_np()
    with pytest.raises(ValueError, match="required"):
        mx.util.set_np(shape=False, array=True)
    with mx.util.np_array(False):
        assert not mx.util.is_np_array()
    assert not mx.util.is_np_shape()


def test_use_np_decorators():
    @mx.util.use_np_shape
    def f():
        """doc of f"""
        return mx.util.is_np_shape()

    @mx.util.use_np
    class Block:
        def forward(self):
            return 2
    assert f() is True and f.__name__ == "f" and f.__doc__ == "doc of f"
    assert not mx.util.is_np_shape()
    with pytest.raises(MXNetError, match="NumPy array semantics"):
        Block().forward()
    with pytest.raises(TypeError):
        mx.util.use_np_shape(3)


def test_getenv_setenv():
    name = "SYMTRITON_TEST_UTIL_VAR"
    assert mx.util.getenv(name) is None
    mx.util.setenv(name, "abc")
    try:
        assert mx.util.getenv(name) == "abc" == os.environ[name]
    finally:
        mx.util.setenv(name, None)
    assert name not in os.environ


def test_misc_util():
    @mx.util.set_module("mxnet.numpy")
    def g():
        pass
    assert g.__module__ == "mxnet.numpy"
    assert mx.util.get_gpu_count() >= 0
    with pytest.raises(ValueError, match="gpu context"):
        mx.util.get_cuda_compute_capability(mx.cpu())


def test_use_np_array_on_a_class_wraps_methods_and_property_getters():
    calls = []

    class Base:
        def inherited(self):
            calls.append("inherited")

    class Net(Base):
        def forward(self):
            calls.append("forward")

        @property
        def size(self):
            calls.append("size")
            return 3

        @size.setter
        def size(self, value):
            calls.append(("set", value))

    assert mx.util.use_np_array(Net) is Net          # the class itself, decorated in place
    net = Net()
    for use in (net.forward, net.inherited, lambda: net.size):
        with pytest.raises(MXNetError, match="NumPy array semantics"):
            use()
    assert Net.forward.__name__ == "forward"
    net.size = 5                                      # only the getter enters the scope
    assert calls == [("set", 5)]

    @mx.util.use_np_array
    def f():
        calls.append("f")
    with pytest.raises(MXNetError, match="NumPy array semantics"):
        f()
    assert f.__name__ == "f" and calls == [("set", 5)]   # the body never ran
    with mx.util.np_shape(None), mx.util.np_array(None):   # None: leave the state alone
        assert not mx.util.is_np_shape()
    with mx.util.np_shape(1):                         # any true value turns it on
        with mx.util.np_shape(None):
            assert mx.util.is_np_shape()
    assert not mx.util.is_np_shape()


def test_sanity_check_params_names_the_first_unsupported_parameter():
    mx.util._sanity_check_params("f", ["out", "where"], {"x": 1})
    with pytest.raises(NotImplementedError, match="function f does not support parameter out"):
        mx.util._sanity_check_params("f", ["out", "where"], {"where": 1, "out": 2})
