"""Values and calls of the cpu lowering (``lower.py``, ``matmul.py``), and the
planning (``codegen.plan``) that decides where each call writes."""
from __future__ import annotations

from dataclasses import dataclass, field


@dataclass(eq=False)
class Val:
    """One value of the kernel: a view of memory, a temporary, a scalar or a constant."""
    name: str
    shape: tuple
    dtype: str = "f"            # f (float32) | b (bool) | i (integer)
    kind: str = "temp"          # view | temp | scalar | const
    slot: object = None         # views: the array they read
    scalar: object = None       # scalars: the Python number
    stored: bool = False
    op: object = None           # temps: the Op that makes them
    chain: list = field(default_factory=list)   # a matmul sum: its mm/addmm ops in order


@dataclass(eq=False)
class Op:
    """One torch call producing ``out``; ``fmt`` has ``{a0}``.. for arguments and ``{out}``."""
    kind: str                   # ew | reduce | mm | addmm | cat | gather | cast | custom
    fmt: str
    args: list
    out: Val
    reads: list = field(default_factory=list)   # views read besides ``args``
    inplace: object = None      # the argument whose buffer ``out`` reuses
    dest: object = None         # the store view ``out`` is written to directly, if any
    dest_value: object = None   # that store's domain-shaped view (differs for N-D matmuls)
    mm2d: tuple = ()            # mm/addmm: (M, N) when the domain is not already 2-D
    stack: tuple = None         # mm/addmm: each operand's (view, K dim, transposed), and K
    fn: str = ""                # the torch function, for rewrites that look for a pattern
    dims: tuple = ()            # reductions: the reduced dims


def broadcast(shapes, nd):
    """The domain-shaped broadcast of value shapes (each dim 1 or the domain's size,
    which may be 0: a zero-size domain under NumPy shape semantics)."""
    out = [1] * nd
    for s in shapes:
        for p, x in enumerate(s):
            if x != 1:
                out[p] = x
    return tuple(out)
