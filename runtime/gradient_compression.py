"""mxnet's 2-bit gradient compression with error feedback (``set_gradient_compression``).

Each element of a pushed gradient is added to a residual kept by the sender
(per key and device, or per key on a worker); a residual at or above
``threshold`` sends ``+threshold`` and keeps the rest, one at or below
``-threshold`` sends ``-threshold``, anything between sends 0. The receiver sums
the dequantized values. The same order of float32 operations as mxnet's
``quantize_2bit`` kernel, so values match it exactly.

Where mxnet compresses, and so where this does:

* ``device`` stores: every device's gradient, before the merge;
* ``dist_*`` stores: the worker's sum over its devices, before it leaves the
  worker (device-to-device sums on one worker are not compressed).

Here the quantized values travel as float32 (the 16-values-per-float packing
saves bandwidth on a wire that is not the bottleneck here); the arithmetic,
and so the training, is mxnet's.
"""
from __future__ import annotations

import torch

from compiler.errors import MXNetError
from .ndarray import torch_dtype

TYPES = ("2bit",)


class TwoBitCompression:
    """Quantizer with per-sender residuals.

    Parameters
    ----------
    threshold : float
        Positive; mxnet's default is 0.5.
    """

    def __init__(self, threshold=0.5):
        self.threshold = float(threshold)
        self._residuals = {}

    @classmethod
    def from_params(cls, compression_params):
        """Validate mxnet's ``{'type': '2bit', 'threshold': t}`` dict."""
        if not isinstance(compression_params, dict):
            raise MXNetError(f"compression_params must be a dict like {{'type': '2bit', "
                             f"'threshold': 0.5}}, got {compression_params!r}")
        params = dict(compression_params)
        kind = params.pop("type", None)
        if kind not in TYPES:
            raise MXNetError(f"Unknown type for gradient compression {kind}: supported types "
                             f"are {list(TYPES)}")
        threshold = float(params.pop("threshold", 0.5))
        if params:
            raise MXNetError(f"unknown gradient compression parameters {sorted(params)}; "
                             f"2bit takes 'threshold'")
        if not threshold > 0:
            raise MXNetError(f"threshold must be greater than 0, got {threshold}")
        return cls(threshold)

    def quantize(self, sender, grad):
        """The values ``grad`` sends from ``sender`` (a hashable: key and device),
        updating that sender's residual."""
        residual = self._residuals.get(sender)
        g = grad.detach().as_subclass(torch.Tensor)
        if residual is None or residual.shape != g.shape or residual.device != g.device:
            residual = torch.zeros(g.shape, dtype=torch.float32, device=g.device)
            self._residuals[sender] = residual
        t = self.threshold
        with torch.no_grad():
            residual.add_(g.to(torch.float32))
            sent = torch.where(residual >= t, t, torch.where(residual <= -t, -t, 0.0))
            residual.sub_(sent)
        return sent.to(torch_dtype(g))
