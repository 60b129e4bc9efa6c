"""The project's error type.

Every error a user can cause (bad symbol, bad attribute, shapes that do not
agree, a missing cache entry offline) is raised as :class:`MXNetError`, the
name mxnet users already catch. It subclasses ``ValueError`` so code written
against plain Python conventions catches it too.
"""


class MXNetError(ValueError):
    """Error raised for invalid symbols, attributes, shapes or cache state."""


class NotImplementedForSymbol(MXNetError):
    """A function that works on NDArrays only was given a Symbol.

    Parameters
    ----------
    function : callable
        The function that was called.
    alias : str or None
        The operator name it stands for.
    *args
        The arguments it was given (their types are reported).
    """

    def __init__(self, function, alias, *args):
        super().__init__()
        self.function = function.__name__
        self.alias = alias
        self.args = [str(type(a)) for a in args]

    def __str__(self):
        msg = f"Function {self.function}"
        if self.alias:
            msg += f' (namely operator "{self.alias}")'
        if self.args:
            msg += f" with arguments ({', '.join(self.args)})"
        return msg + " is not implemented for Symbol and only available in NDArray."
