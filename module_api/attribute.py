"""``mx.attribute``: mxnet's module of ``AttrScope`` (``from mxnet.attribute import
AttrScope``), kept in ``compiler/frontend/attribute.py``."""
from compiler.frontend.attribute import AttrScope, current  # noqa: F401

__all__ = ["AttrScope"]
