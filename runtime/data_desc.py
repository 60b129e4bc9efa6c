"""``DataDesc``: the name, shape, dtype and layout of one data or label input.

It lives in the runtime because the executor group slices batches by it, and
imports flow compiler -> runtime -> module_api; ``mx.io.DataDesc`` is this class.
"""
from collections import namedtuple

import numpy as np

_mx_real_t = np.float32


class DataDesc(namedtuple('DataDesc', ['name', 'shape'])):
    """Name, shape, dtype and layout of one data or label input.

    A ``(name, shape)`` namedtuple with extra attributes ``dtype`` (default
    ``numpy.float32``) and ``layout`` (default ``'NCHW'``); ``N`` in the
    layout marks the batch axis.
    """

    def __new__(cls, name, shape, dtype=_mx_real_t, layout='NCHW'):
        ret = super(DataDesc, cls).__new__(cls, name, shape)
        ret.dtype = dtype
        ret.layout = layout
        return ret

    def __repr__(self):
        return "DataDesc[%s,%s,%s,%s]" % (self.name, self.shape, self.dtype, self.layout)

    @staticmethod
    def get_batch_axis(layout):
        """Axis of the batch dimension in ``layout`` (0 when ``layout`` is None,
        -1 when it has no ``N``)."""
        if layout is None:
            return 0
        return layout.find('N')

    @staticmethod
    def get_list(shapes, types):
        """DataDesc list from ``[(name, shape)]`` and optional ``[(name, dtype)]``."""
        if types is not None:
            type_dict = dict(types)
            return [DataDesc(x[0], x[1], type_dict[x[0]]) for x in shapes]
        return [DataDesc(x[0], x[1]) for x in shapes]
