"""AMP's bfloat16 operator lists under mxnet's names (data: ``compiler/passes/amp_lists.py``)."""
from compiler.passes import amp_lists as _lists

BF16_FUNCS = list(_lists.BF16_FUNCS)
BF16_FP32_FUNCS = list(_lists.BF16_FP32_FUNCS)
BF16_USE_FP32_PARAMS = {op: list(names) for op, names in _lists.BF16_USE_FP32_PARAMS.items()}
FP32_FUNCS = list(_lists.BF16_TARGET_FP32_FUNCS)
CONDITIONAL_FP32_FUNCS = [(op, attr, list(values))
                          for op, attr, values in _lists.BF16_CONDITIONAL_FP32_FUNCS]
WIDEST_TYPE_CASTS = list(_lists.BF16_WIDEST_TYPE_CASTS)
LOSS_OUTPUT_FUNCTIONS = list(_lists.BF16_LOSS_OUTPUT_FUNCTIONS)
