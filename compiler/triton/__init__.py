"""The Triton target (``interpret``, ``cuda:<arch>``): TileProgram -> Triton source.

Importing this package does not import triton: ``mode`` decides, before triton's first
import, whether kernels run in Triton's interpreter.
"""
