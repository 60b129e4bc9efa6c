"""symtriton's runtime: contexts, the kernel launcher and executors."""
import compiler  # noqa: F401  (decides the Triton mode before triton is imported)

from . import executor  # noqa: F401,E402  (registers Symbol.bind's Executor with the compiler)
