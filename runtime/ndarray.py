"""``NDArray``: a ``torch.Tensor`` subclass with mxnet's array methods.

Every array the API hands out is one of these, so it can go straight into
torch code, and mxnet code can call ``asnumpy()`` on it.
"""
from __future__ import annotations

import numpy as np
import torch

from .context import Context, cpu


class NDArray(torch.Tensor):
    """A torch tensor that also speaks mxnet (``asnumpy``, ``context``, ``copyto`` ...)."""

    @property
    def context(self) -> Context:
        dev = self.device
        return Context("gpu", dev.index or 0) if dev.type == "cuda" else \
            getattr(self, "_mx_ctx", None) or cpu(0)

    ctx = context

    @property
    def stype(self):
        return "default"

    @property
    def T(self):
        return self.t() if self.dim() == 2 else self.permute(*reversed(range(self.dim())))

    def asnumpy(self) -> np.ndarray:
        """A numpy copy of the array."""
        return self.detach().cpu().numpy().copy()

    def asscalar(self):
        if self.numel() != 1:
            raise ValueError("The current array is not a scalar")
        return self.asnumpy().reshape(()).item()

    def wait_to_read(self):
        if self.device.type == "cuda":
            torch.cuda.synchronize(self.device)

    def copyto(self, other):
        """Copy into an NDArray (returns it) or onto a Context (returns a new array)."""
        if isinstance(other, Context):
            out = torch.empty(self.shape, dtype=self.dtype,
                              device=other.torch_device).as_subclass(NDArray)
            out.copy_(self)
            out._mx_ctx = other
            return out
        other.copy_(self)
        return other

    def as_in_context(self, ctx: Context):
        if ctx == self.context:
            return self
        return self.copyto(ctx)


def as_ndarray(t: torch.Tensor, ctx: Context = None) -> NDArray:
    out = t.as_subclass(NDArray) if not isinstance(t, NDArray) else t
    if ctx is not None:
        out._mx_ctx = ctx
    return out


def empty(shape, ctx: Context = None, dtype=torch.float32) -> NDArray:
    ctx = ctx or cpu(0)
    return as_ndarray(torch.zeros(tuple(shape), dtype=dtype, device=ctx.torch_device), ctx)
