"""mxnet 1.x's ``mx.rnn.FusedRNNCell``: a whole (multi-layer, optionally
bidirectional) RNN as one ``RNN`` op with all of its weights in one flat vector,
the ``{prefix}parameters`` variable, and the ``FusedRNN`` initializer of that
vector.

The vector holds, in order, every weight matrix and then every bias (cuDNN's
layout): layer by layer, direction by direction ('l' forward, 'r' backward),
the i2h pieces of each gate, then the h2h pieces of each gate. Unpacked, each
piece is named like the matching unfused cell's per-gate array,
``{prefix}{l|r}{layer}_{i2h|h2h}{gate}_{weight|bias}``.
"""
from __future__ import annotations

import warnings

import torch

from compiler import symbol
from .. import initializer as _initializer
from .. import ndarray
from .composite_cell import BidirectionalCell, DropoutCell, SequentialRNNCell
from .base_cell import (BaseRNNCell, GRUCell, LSTMCell, RNNCell, _default_begin_state,
                       _normalize_sequence)

__all__ = ["FusedRNN", "FusedRNNCell"]

# gate suffixes per mode, in the order the RNN op packs them
_MODE_GATES = {'rnn_relu': [''], 'rnn_tanh': [''], 'lstm': ['_i', '_f', '_c', '_o'],
               'gru': ['_r', '_z', '_o']}


def _element_count(arr):
    return int(arr.numel()) if isinstance(arr, torch.Tensor) else int(arr.size)


@_initializer.register
class FusedRNN(_initializer.Initializer):
    """Initializer of a fused RNN's packed vector, piece by piece: weights with
    ``init`` (the global initializer if None), biases with zeros, and the LSTM
    forget-gate biases with ``forget_bias``.

    Parameters
    ----------
    init : Initializer or str or None
        For the weight pieces; a string is an initializer's ``dumps()``.
    num_hidden, num_layers : int
    mode : str
        'rnn_relu', 'rnn_tanh', 'lstm' or 'gru'.
    bidirectional : bool, default False
    forget_bias : float, default 1.0
    """

    def __init__(self, init, num_hidden, num_layers, mode, bidirectional=False,
                 forget_bias=1.0):
        if isinstance(init, str):
            init = _initializer.create(init)
        super().__init__(
            init=None if init is None else init.dumps(), num_hidden=num_hidden,
            num_layers=num_layers, mode=mode, bidirectional=bidirectional,
            forget_bias=forget_bias)
        self._init = init
        self._num_hidden = num_hidden
        self._num_layers = num_layers
        self._mode = mode
        self._bidirectional = bidirectional
        self._forget_bias = forget_bias

    def _init_piece(self, desc, name, piece):
        piece_desc = _initializer.InitDesc(name, global_init=getattr(desc, "global_init", None))
        if self._mode == 'lstm' and name.endswith("_f_bias"):
            piece[:] = self._forget_bias
        elif self._init is not None:
            self._init(piece_desc, piece)
        else:
            desc.global_init(piece_desc, piece)

    def _init_weight(self, desc, arr):
        layout = FusedRNNCell(self._num_hidden, self._num_layers, self._mode,
                              self._bidirectional, forget_bias=self._forget_bias, prefix='')
        pieces = layout.unpack_weights({'parameters': arr})
        for name, piece in pieces.items():
            self._init_piece(desc, name, piece)
        with torch.no_grad():
            arr[:] = layout.pack_weights(pieces)['parameters']


class FusedRNNCell(BaseRNNCell):
    """A multi-layer RNN as one fused ``RNN`` op (cuDNN style). Unroll only.

    Parameters
    ----------
    num_hidden : int
        Size of each layer's state.
    num_layers : int, default 1
    mode : str, default 'lstm'
        'rnn_relu', 'rnn_tanh', 'lstm' or 'gru'.
    bidirectional : bool, default False
    dropout : float, default 0.
        Dropout between the layers in training.
    get_next_state : bool, default False
        Whether ``unroll`` returns the final states as well.
    forget_bias : float, default 1.0
        Initial LSTM forget-gate bias.
    prefix : str, optional
        ``'{mode}_'`` if None.
    params : RNNParams, optional
    """

    def __init__(self, num_hidden, num_layers=1, mode='lstm', bidirectional=False,
                 dropout=0., get_next_state=False, forget_bias=1.0,
                 prefix=None, params=None):
        super().__init__(
            prefix='%s_' % mode if prefix is None else prefix, params=params)
        self._num_hidden = num_hidden
        self._num_layers = num_layers
        self._mode = mode
        self._bidirectional = bidirectional
        self._dropout = dropout
        self._get_next_state = get_next_state
        self._directions = ['l', 'r'] if bidirectional else ['l']
        vector_init = FusedRNN(None, num_hidden, num_layers, mode, bidirectional, forget_bias)
        self._parameter = self.params.get('parameters', init=vector_init)

    @property
    def state_info(self):
        layers = len(self._directions) * self._num_layers
        count = 2 if self._mode == 'lstm' else 1
        return [{'shape': (layers, 0, self._num_hidden), '__layout__': 'LNC'}
                for _ in range(count)]

    @property
    def _gate_names(self):
        return _MODE_GATES[self._mode]

    @property
    def _num_gates(self):
        return len(self._gate_names)

    # -- the packed vector's layout ------------------------------------------------------

    def _pieces(self, num_input):
        """``(name, shape)`` of each piece of the packed vector, in vector order."""
        hidden = self._num_hidden
        layer_inputs = [num_input] + [len(self._directions) * hidden] * (self._num_layers - 1)
        for kind in ('weight', 'bias'):
            for layer, in_width in enumerate(layer_inputs):
                for direction in self._directions:
                    for group, width in (('i2h', in_width), ('h2h', hidden)):
                        shape = (hidden, width) if kind == 'weight' else (hidden,)
                        for gate in self._gate_names:
                            name = '%s%s%d_%s%s_%s' % (self._prefix, direction, layer, group,
                                                       gate, kind)
                            yield name, shape

    def _packed_size(self, num_input):
        return sum(_shape_count(shape) for _, shape in self._pieces(num_input))

    def _input_size(self, packed_size):
        """The input width that makes a packed vector of ``packed_size`` elements."""
        dirs, hidden = len(self._directions), self._num_hidden
        per_row = packed_size // (dirs * hidden * self._num_gates)
        upper_layers = (self._num_layers - 1) * (hidden + dirs * hidden + 2)
        return per_row - upper_layers - hidden - 2

    def _slice_weights(self, arr, num_input):
        """Views into the packed vector ``arr`` by piece name, for inputs
        ``num_input`` wide."""
        views, offset = {}, 0
        for name, shape in self._pieces(num_input):
            count = _shape_count(shape)
            views[name] = arr[offset:offset + count].reshape(shape)
            offset += count
        assert offset == _element_count(arr), \
            "Invalid parameters size for FusedRNNCell: %d elements, the layout needs %d " \
            "(input width %d)" % (_element_count(arr), offset, num_input)
        return views

    def unpack_weights(self, args):
        """Replace ``{prefix}parameters`` in ``args`` with its per-gate pieces
        (copies); returns a new dict."""
        unpacked = dict(args)
        packed = unpacked.pop(self._parameter.name)
        num_input = self._input_size(_element_count(packed))
        views = self._slice_weights(packed, num_input)
        unpacked.update((name, view.clone()) for name, view in views.items())
        return unpacked

    def pack_weights(self, args):
        """Undo :meth:`unpack_weights`: gather the per-gate pieces of ``args`` into
        a new ``{prefix}parameters`` vector."""
        packed = dict(args)
        first = packed['%sl0_i2h%s_weight' % (self._prefix, self._gate_names[0])]
        num_input = first.shape[1]
        vector = ndarray.zeros((self._packed_size(num_input),),
                               ctx=getattr(first, "context", None), dtype=first.dtype)
        with torch.no_grad():
            for name, view in self._slice_weights(vector, num_input).items():
                view[:] = packed.pop(name)
        packed[self._parameter.name] = vector
        return packed

    # -- graph -----------------------------------------------------------------------------

    def __call__(self, inputs, states):
        raise NotImplementedError("FusedRNNCell cannot be stepped. Please use unroll")

    def _rnn_op(self, data, begin_state):
        state_args = {'state': begin_state[0]}
        if self._mode == 'lstm':
            state_args['state_cell'] = begin_state[1]
        return symbol.RNN(data=data, parameters=self._parameter, state_size=self._num_hidden,
                          num_layers=self._num_layers, bidirectional=self._bidirectional,
                          p=self._dropout, state_outputs=self._get_next_state,
                          mode=self._mode, name=self._prefix + 'rnn', **state_args)

    def _split_result(self, rnn):
        """``(outputs, final states)`` of the RNN node; the states tagged 'LNC'."""
        if not self._get_next_state:
            return rnn, []
        states = [rnn[n] for n in range(1, 3 if self._mode == 'lstm' else 2)]
        for state in states:
            state._set_attr(__layout__='LNC')
        return rnn[0], states

    def unroll(self, length, inputs, begin_state=None, layout='NTC', merge_outputs=None):
        self.reset()
        data, time_axis = _normalize_sequence(length, inputs, layout, True)
        if time_axis == 1:
            warnings.warn("NTC layout detected. Consider using "
                          "TNC for FusedRNNCell for faster speed")
            data = symbol.swapaxes(data, dim1=0, dim2=1)
        else:
            assert time_axis == 0, "Unsupported layout %s" % layout
        if begin_state is None:
            begin_state = _default_begin_state(self, data, 'TNC')
        outputs, states = self._split_result(self._rnn_op(data, begin_state))
        if time_axis == 1:
            outputs = symbol.swapaxes(outputs, dim1=0, dim2=1)
        outputs, _ = _normalize_sequence(length, outputs, layout, merge_outputs)
        return outputs, states

    def _unfused_layer_cell(self, prefix):
        if self._mode == 'lstm':
            return LSTMCell(self._num_hidden, prefix=prefix)
        if self._mode == 'gru':
            return GRUCell(self._num_hidden, prefix=prefix)
        if self._mode in ('rnn_relu', 'rnn_tanh'):
            return RNNCell(self._num_hidden, activation=self._mode[4:], prefix=prefix)
        raise KeyError(self._mode)

    def unfuse(self):
        """The same network as a :class:`SequentialRNNCell` of step cells, whose
        variables are named as :meth:`unpack_weights` names the pieces."""
        stack = SequentialRNNCell()
        for layer in range(self._num_layers):
            forward = self._unfused_layer_cell('%sl%d_' % (self._prefix, layer))
            if self._bidirectional:
                backward = self._unfused_layer_cell('%sr%d_' % (self._prefix, layer))
                stack.add(BidirectionalCell(forward, backward,
                                            output_prefix='%sbi_l%d_' % (self._prefix, layer)))
            else:
                stack.add(forward)
            if self._dropout > 0 and layer != self._num_layers - 1:
                # mxnet's name, two underscores included
                stack.add(DropoutCell(self._dropout,
                                      prefix='%s_dropout%d_' % (self._prefix, layer)))
        return stack


def _shape_count(shape):
    count = 1
    for size in shape:
        count *= size
    return count
