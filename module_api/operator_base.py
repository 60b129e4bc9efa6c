"""mxnet's Python operator classes, ``CustomOp`` and ``CustomOpProp``, and ``register``:
the base that ``module_api/operator.py`` (``mx.operator``) and the legacy Python
operators (``module_api/python_op.py``) both build on.
"""
from __future__ import annotations

from compiler.ops import custom as _custom

__all__ = ["CustomOp", "CustomOpProp", "register"]


class CustomOp:
    """Base class of a Python operator's computation."""

    def __init__(self):
        pass

    def forward(self, is_train, req, in_data, out_data, aux):
        """Compute ``out_data`` from ``in_data`` (override it).

        Parameters
        ----------
        is_train : bool
            Whether this is a training pass.
        req : list of str
            How to assign each output: ``'null'``, ``'write'``, ``'inplace'`` or
            ``'add'`` (:meth:`assign` honours it).
        in_data, out_data, aux : list of NDArray
            Inputs, outputs, auxiliary states.
        """

    def backward(self, req, out_grad, in_data, out_data, in_grad, aux):
        """Compute ``in_grad`` (override it).

        Parameters
        ----------
        req : list of str
            How to assign each input gradient (see :meth:`forward`).
        out_grad, in_data, out_data, in_grad, aux : list of NDArray
        """

    def assign(self, dst, req, src):
        """Store ``src`` into ``dst`` as ``req`` says.

        Parameters
        ----------
        dst : NDArray
        req : str
            ``'null'`` (nothing), ``'write'`` or ``'inplace'`` (overwrite), ``'add'``
            (accumulate).
        src : NDArray, numpy array or number
        """
        if req == "null":
            return
        if req in ("write", "inplace"):
            dst[:] = src
        elif req == "add":
            dst[:] += src
        else:
            raise ValueError(f"assign: req must be 'null', 'write', 'inplace' or 'add', "
                             f"got {req!r}")


class CustomOpProp:
    """Base class of a Python operator's properties.

    Parameters
    ----------
    need_top_grad : bool
        Whether ``backward`` reads the gradient of the outputs (False for a loss).
    """

    def __init__(self, need_top_grad=True):
        self.need_top_grad_ = need_top_grad

    def infer_shape(self, in_shape):
        """Argument, output and auxiliary shapes from the argument shapes.

        Parameters
        ----------
        in_shape : list of list of int
            In ``list_arguments`` order.

        Returns
        -------
        tuple
            ``(in_shape, out_shape[, aux_shape])``; by default every output has the
            first argument's shape.
        """
        return in_shape, (in_shape[0],) * len(self.list_outputs()), ()

    def infer_type(self, in_type):
        """Argument, output and auxiliary dtypes (numpy types) from the arguments'.

        Returns
        -------
        tuple
            ``(in_type, out_type[, aux_type])``; by default all the first argument's.
        """
        return in_type, [in_type[0]] * len(self.list_outputs()), \
            [in_type[0]] * len(self.list_auxiliary_states())

    def infer_storage_type(self, in_stype):
        """Storage types: dense only here (mxnet's default)."""
        for i, stype in enumerate(in_stype):
            if stype != "default":
                raise ValueError(f"infer_storage_type: in_stype[{i}] is {stype!r}; only "
                                 f"'default' storage exists in symtriton")
        return in_stype, ["default"] * len(self.list_outputs()), \
            ["default"] * len(self.list_auxiliary_states())

    def list_outputs(self):
        """Output names (default ``['output']``)."""
        return ["output"]

    def list_arguments(self):
        """Argument names (default ``['data']``)."""
        return ["data"]

    def list_auxiliary_states(self):
        """Auxiliary state names (default none)."""
        return []

    def declare_backward_dependency(self, out_grad, in_data, out_data):
        """The values ``backward`` reads: the output gradients (if ``need_top_grad``),
        the inputs and the outputs, as mxnet's default."""
        deps = []
        if self.need_top_grad_:
            deps.extend(out_grad)
        deps.extend(in_data)
        deps.extend(out_data)
        return deps

    def create_operator(self, ctx, in_shapes, in_dtypes):
        """The :class:`CustomOp` that computes this operator (override it).

        Parameters
        ----------
        ctx : Context
        in_shapes : list of list of int
            Shapes of the arguments and auxiliary states.
        in_dtypes : list of int
            mxnet's dtype codes of the same (0 float32, 1 float64, 2 float16, ...).
        """
        return CustomOp()


def register(reg_name):
    """Decorator registering a :class:`CustomOpProp` subclass as ``op_type=reg_name``.

    Parameters
    ----------
    reg_name : str
    """
    def do_register(prop_cls):
        if not (isinstance(prop_cls, type) and issubclass(prop_cls, CustomOpProp)):
            raise TypeError(f"register('{reg_name}'): {prop_cls!r} is not a CustomOpProp "
                            f"subclass")
        _custom.register_prop(reg_name, prop_cls)
        return prop_cls
    return do_register
