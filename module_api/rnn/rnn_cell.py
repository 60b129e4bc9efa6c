"""``mx.rnn.rnn_cell``: the symbolic RNN cells of mxnet 1.x, under one name.

A face over the files that hold them: ``base_cell.py`` (:class:`RNNParams`,
:class:`BaseRNNCell` and the step cells :class:`RNNCell`, :class:`LSTMCell`,
:class:`GRUCell`), ``composite_cell.py`` (:class:`SequentialRNNCell`,
:class:`BidirectionalCell`, :class:`DropoutCell`), ``fused_rnn_cell.py``
(:class:`FusedRNNCell` and the ``FusedRNN`` initializer of its packed weights)
and ``modifier_cell.py`` (:class:`ModifierCell`, :class:`ZoneoutCell`,
:class:`ResidualCell`). Those import ``base_cell``, never this module.
"""
from .base_cell import BaseRNNCell, GRUCell, LSTMCell, RNNCell, RNNParams
from .composite_cell import BidirectionalCell, DropoutCell, SequentialRNNCell
from .fused_rnn_cell import FusedRNN, FusedRNNCell  # noqa: F401  (mx.rnn.rnn_cell.FusedRNN)
from .modifier_cell import ModifierCell, ResidualCell, ZoneoutCell

__all__ = ["RNNParams", "BaseRNNCell", "RNNCell", "LSTMCell", "GRUCell", "FusedRNNCell",
           "SequentialRNNCell", "BidirectionalCell", "DropoutCell", "ModifierCell",
           "ZoneoutCell", "ResidualCell"]
