"""``mx.contrib.amp.amp``: mxnet's AMP entry points.

Mixed precision needs float16 / bfloat16 kernels; symtriton generates float32
kernels only for now, so every entry point that would change a dtype raises an
:class:`MXNetError` saying so (never a silent float32 "conversion"). The module
exists so that scripts and tests that import it (mxnet's own
``tests/python/train/test_bucketing.py`` does) load; the dynamic
:class:`~.loss_scaler.LossScaler` works today.
"""
from __future__ import annotations

from compiler.errors import MXNetError

__all__ = ['init', 'init_trainer', 'scale_loss', 'unscale', 'convert_model',
           'convert_hybrid_block', 'list_lp16_ops', 'list_fp32_ops',
           'list_lp16_fp32_ops', 'list_conditional_fp32_ops',
           'list_widest_type_cast', 'list_loss_output_functions', 'list_lp16_use_fp32_params',
           'convert_symbol', 'convert_bucketing_module']


def _no_low_precision(what):
    def refuse(*args, **kwargs):
        raise MXNetError(
            f"amp.{what}: mixed precision needs float16/bfloat16 kernels, and symtriton "
            f"generates float32 kernels only for now; train in float32 (leave AMP off)")
    refuse.__name__ = what
    refuse.__doc__ = f"mxnet's ``amp.{what}``; raises until low-precision kernels exist."
    return refuse


for _name in __all__:
    globals()[_name] = _no_low_precision(_name)
del _name
