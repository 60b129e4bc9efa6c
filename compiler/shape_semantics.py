"""mxnet's two shape conventions, as a per-thread switch.

mxnet 1.x reads shapes in one of two ways, chosen per thread:

* legacy (the default): ``()`` and a ``0`` dim mean *unknown* to shape inference;
* NumPy shape semantics (``mx.np_shape()``, ``mx.use_np_shape``): ``()`` is the
  shape of a scalar, ``0`` a zero size, ``-1`` an unknown dim and ``None`` an
  unknown shape.

The compiler's partial inference (``passes/infer_unknown_dims.py``) works in the
legacy spelling, 0 for an unknown dim. Under NumPy semantics shapes are spelled into
it (``to_legacy``: -1 becomes 0) and its answers back (``to_numpy``), and a 0 that
is not spelled from -1 is a real zero size (``zero_is_size``, for the few shape rules
where a 0 reads as unknown). The one case the two spellings cannot
both hold, a -1 and a 0 in the shapes of one question, is refused by name
(:func:`check_unmixed`).
"""
from __future__ import annotations

import contextlib
import threading

from .errors import MXNetError

_STATE = threading.local()


def is_np_shape() -> bool:
    """Whether this thread reads shapes with NumPy semantics."""
    return getattr(_STATE, "active", False)


def set_np_shape(active) -> bool:
    """Turn this thread's NumPy shape semantics on or off; return the previous state."""
    previous = is_np_shape()
    _STATE.active = bool(active)
    return previous


def zero_is_size() -> bool:
    """Whether a 0 dim met by a shape rule now is a size: under NumPy semantics, except
    while inference reads unknown dims in the legacy spelling (:func:`reading_unknowns`).
    A rule where 0 reads as "unknown" (``where``'s condition) asks this."""
    return is_np_shape() and not getattr(_STATE, "unknowns", False)


@contextlib.contextmanager
def reading_unknowns():
    """Within: 0 dims are unknown ones for the shape rules, whatever the semantics."""
    previous = getattr(_STATE, "unknowns", False)
    _STATE.unknowns = True
    try:
        yield
    finally:
        _STATE.unknowns = previous


def unknown_whole_shape(shape) -> bool:
    """Whether an operator's own ``shape`` attribute (a sampler's, a constant's) leaves
    its output shape to inference: None, or ``()`` under legacy semantics, where mxnet
    reads a rank-0 shape as unknown (``sym.random.normal(shape=()) + x`` takes ``x``'s
    shape; under NumPy semantics it is a scalar)."""
    return shape is None or (tuple(shape) == () and not is_np_shape())


def to_legacy(shape):
    """A NumPy-semantics shape in the legacy spelling of inference: -1 dims become 0."""
    if shape is None:
        return None
    return tuple(0 if int(x) == -1 else int(x) for x in shape)


def to_numpy(shape):
    """A partial answer in NumPy spelling: 0 (unknown) dims become -1, an unknown
    shape (None, or legacy ``()``) stays None."""
    if shape is None:
        return None
    return tuple(-1 if x == 0 else x for x in shape)


def check_unmixed(shapes, what="infer_shape"):
    """Refuse, under NumPy semantics, shapes holding both -1 (unknown) and 0 (zero size).

    Parameters
    ----------
    shapes : dict of str -> tuple
        The shapes of one question, by variable name (hints included).
    what : str
        The call asking, for the message.

    Returns
    -------
    bool
        Whether some shape holds a -1 (an unknown dim to infer).
    """
    unknown = sorted(k for k, s in shapes.items() if s is not None and -1 in tuple(s))
    zero = sorted(k for k, s in shapes.items() if s is not None and 0 in tuple(s))
    if unknown and zero:
        raise MXNetError(
            f"{what}: under NumPy shape semantics {unknown[0]} {tuple(shapes[unknown[0]])} "
            f"has an unknown (-1) dim and {zero[0]} {tuple(shapes[zero[0]])} a zero-size "
            f"(0) dim; inference here takes one or the other in one call. Give the "
            f"unknown dims, or infer the zero-size shapes apart")
    return bool(unknown)
