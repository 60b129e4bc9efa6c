"""symtriton's runtime: contexts, the kernel launcher and executors."""
import compiler  # noqa: F401  (decides the Triton mode before triton is imported)

from . import binding  # noqa: F401,E402  (registers Symbol.bind's executors with the compiler)
from . import ndarray_sparse  # noqa: F401,E402  (registers NDArray.tostype's sparse casts)
from . import imperative  # noqa: F401,E402  (NDArray's operator methods run through it)
