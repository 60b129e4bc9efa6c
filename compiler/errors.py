"""The project's error type.

Every error a user can cause (bad symbol, bad attribute, shapes that do not
agree, a missing cache entry offline) is raised as :class:`MXNetError`, the
name mxnet users already catch. It subclasses ``ValueError`` so code written
against plain Python conventions catches it too.
"""


class MXNetError(ValueError):
    """Error raised for invalid symbols, attributes, shapes or cache state."""
