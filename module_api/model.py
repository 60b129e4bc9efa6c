"""``mx.model``: checkpoints, the kvstore / update helpers the Module API uses
(``model_base.py``), and the deprecated ``FeedForward`` model (``feedforward.py``,
built on ``Module``)."""
from .feedforward import FeedForward  # noqa: F401
from .model_base import (  # noqa: F401
    BatchEndParam, _create_kvstore, _initialize_kvstore, _update_params,
    _update_params_on_kvstore, checkpoint_files, checkpoint_writer, load_checkpoint, load_params,
    save_checkpoint)
from .model_base import (  # noqa: F401  (less used helpers, kept reachable as in mxnet)
    _can_optimize, _is_distributed, _kvstore_types, _pushpull, _with_grads)
