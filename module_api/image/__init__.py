"""``mx.image``: image decoding, transforms, augmenters and ``ImageIter`` as mxnet 1.9.1's."""
from .image import *  # noqa: F401,F403
from .image import _get_interp_method  # noqa: F401
from .augmenters import *  # noqa: F401,F403,E402
from .image_iter import ImageIter  # noqa: F401,E402
