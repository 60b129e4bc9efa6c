"""AMP's float16 operator lists under mxnet's names (data: ``compiler/passes/amp_lists.py``)."""
from compiler.passes import amp_lists as _lists

FP16_FUNCS = list(_lists.FP16_FUNCS)
FP16_FP32_FUNCS = list(_lists.FP16_FP32_FUNCS)
FP32_FUNCS = list(_lists.FP16_TARGET_FP32_FUNCS)
CONDITIONAL_FP32_FUNCS = [(op, attr, list(values))
                          for op, attr, values in _lists.FP16_CONDITIONAL_FP32_FUNCS]
WIDEST_TYPE_CASTS = list(_lists.FP16_WIDEST_TYPE_CASTS)
LOSS_OUTPUT_FUNCTIONS = list(_lists.FP16_LOSS_OUTPUT_FUNCTIONS)
