"""mxnet's legacy Python operators: ``PythonOp``, ``NumpyOp`` and ``NDArrayOp``.

mxnet 1.9.1 still ships them (deprecated in favour of ``CustomOp``), and older
mxnet programs build layers with them (a numpy softmax loss, say): subclass
``NumpyOp`` (numpy arrays in and out) or ``NDArrayOp`` (NDArrays), define
``forward(in_data, out_data)``, ``backward(out_grad, in_data, out_data, in_grad)``,
``infer_shape``, ``list_arguments`` / ``list_outputs``, and call ``get_symbol(*args,
name=...)`` (or the instance) on symbols.

Here each instance becomes a ``CustomOp`` type of its own, registered under a name
made from the instance (``_legacy_<class>_<n>``), so it runs where any Python
operator runs (``runtime/custom_op.py``: the executor cuts the graph around it). As
mxnet's, an instance is kept alive by the class (``PythonOp._ref_holder``) once it
has made a symbol. A symbol holding one saves to JSON as a ``Custom`` node that only
this process can load back, as mxnet's ``_Native`` node holds a pointer.
"""
from __future__ import annotations

import itertools
import warnings

import numpy as np

from .operator_base import CustomOp, CustomOpProp, register

__all__ = ["PythonOp", "NumpyOp", "NDArrayOp"]

_COUNT = itertools.count()


class PythonOp:
    """Base class of operators written in Python (deprecated: use ``CustomOp``).

    Parameters
    ----------
    need_top_grad : bool
        What the default :meth:`need_top_grad` returns: False for a loss layer, whose
        backward reads no output gradient.
    """
    _ref_holder: list = []

    def __init__(self, need_top_grad=True):
        self.info_ = None
        self.need_top_grad_ = need_top_grad
        warnings.warn("PythonOp has been deprecated. Please use CustomOp")

    def __call__(self, *args, **kwargs):
        return self.get_symbol(*args, **kwargs)

    def get_symbol(self, *args, **kwargs):
        """The operator applied to symbols ``args`` (``name=`` names the node)."""
        raise NotImplementedError("Must override this")

    def forward(self, in_data, out_data):
        """Compute ``out_data`` from ``in_data`` (override it; the default copies)."""
        out_data[0][:] = in_data[0]

    def backward(self, out_grad, in_data, out_data, in_grad):
        """Compute ``in_grad`` (override it; the default writes 1)."""
        in_grad[0][:] = 1.0

    def infer_shape(self, in_shape):
        """``(in_shape, out_shape)`` from the argument shapes (default: every output
        has the first argument's shape)."""
        return in_shape, [in_shape[0]]

    def list_outputs(self):
        """Output names (default ``['output']``)."""
        return ["output"]

    def list_arguments(self):
        """Argument names (default ``['data']``)."""
        return ["data"]

    def need_top_grad(self):
        """Whether ``backward`` reads the output gradients."""
        return self.need_top_grad_

    def _symbol(self, as_numpy, args, kwargs):
        from compiler import symbol
        op_type = f"_legacy_{type(self).__name__}_{next(_COUNT)}"
        register(op_type)(_prop_for(self, as_numpy))
        PythonOp._ref_holder.append(self)
        return symbol.Custom(*args, op_type=op_type, **kwargs)


class NumpyOp(PythonOp):
    """A Python operator over numpy arrays (float32 copies of the inputs; what it
    writes into ``out_data`` / ``in_grad`` is copied back)."""

    def __init__(self, need_top_grad=True):
        super().__init__(need_top_grad)
        warnings.warn("NumpyOp has been deprecated. Please use CustomOp")

    def get_symbol(self, *args, **kwargs):
        return self._symbol(True, args, kwargs)


class NDArrayOp(PythonOp):
    """A Python operator over NDArrays (it writes the outputs and gradients in place)."""

    def __init__(self, need_top_grad=True):
        super().__init__(need_top_grad)
        warnings.warn("NDArrayOp has been deprecated. Please use CustomOp")

    def get_symbol(self, *args, **kwargs):
        return self._symbol(False, args, kwargs)

    def declare_backward_dependency(self, out_grad, in_data, out_data):
        """The values ``backward`` reads (mxnet's default: all of them, the output
        gradients only if :meth:`need_top_grad`)."""
        deps = list(out_grad) if self.need_top_grad() else []
        return deps + list(in_data) + list(out_data)


def _prop_for(op, as_numpy):
    """The ``CustomOpProp`` class of one legacy operator instance."""

    class LegacyProp(CustomOpProp):
        def __init__(self):
            super().__init__(need_top_grad=op.need_top_grad())

        def list_arguments(self):
            return list(op.list_arguments())

        def list_outputs(self):
            return list(op.list_outputs())

        def infer_shape(self, in_shape):
            ishape, oshape = op.infer_shape([list(s) for s in in_shape])
            return ishape, oshape, []

        def declare_backward_dependency(self, out_grad, in_data, out_data):
            if hasattr(op, "declare_backward_dependency"):
                return op.declare_backward_dependency(out_grad, in_data, out_data)
            return super().declare_backward_dependency(out_grad, in_data, out_data)

        def create_operator(self, ctx, in_shapes, in_dtypes):
            return _LegacyCompute(op, as_numpy)

    return LegacyProp


class _LegacyCompute(CustomOp):
    """Runs a legacy operator's forward and backward inside ``CustomOp``'s calls."""

    def __init__(self, op, as_numpy):
        super().__init__()
        self.op, self.as_numpy = op, as_numpy

    def forward(self, is_train, req, in_data, out_data, aux):
        if not self.as_numpy:
            self.op.forward(in_data=in_data, out_data=out_data)
            return
        outs = [np.zeros(o.shape, dtype=np.float32) for o in out_data]
        self.op.forward(in_data=_numpy(in_data), out_data=outs)
        for dst, r, src in zip(out_data, req, outs):
            self.assign(dst, r, src)

    def backward(self, req, out_grad, in_data, out_data, in_grad, aux):
        if not self.as_numpy:
            self.op.backward(out_grad=out_grad, in_data=in_data, out_data=out_data,
                             in_grad=in_grad)
            return
        grads = [np.zeros(g.shape, dtype=np.float32) for g in in_grad]
        self.op.backward(out_grad=_numpy(out_grad), in_data=_numpy(in_data),
                         out_data=_numpy(out_data), in_grad=grads)
        for dst, r, src in zip(in_grad, req, grads):
            self.assign(dst, r, src)


def _numpy(arrays):
    return [a.asnumpy().astype(np.float32, copy=False) for a in arrays]
