"""mxnet 1.x's convolutional RNN cells (``mx.rnn.ConvRNNCell``, ``ConvLSTMCell``,
``ConvGRUCell``): the gates of RNNCell / LSTMCell / GRUCell computed by two
Convolutions (input-to-state and state-to-state) instead of FullyConnected layers,
with mxnet 1.9.1's parameter names, node names, defaults and state shapes.

The state-to-state convolution keeps the state's spatial size (odd kernels, "same"
padding for its dilation); the state shape is the input-to-state convolution's output
shape with an unknown (0) batch dim.
"""
from __future__ import annotations

import functools

from compiler import symbol
from .rnn_cell import BaseRNNCell

__all__ = ["BaseConvRNNCell", "ConvRNNCell", "ConvLSTMCell", "ConvGRUCell"]

_LEAKY = functools.partial(symbol.LeakyReLU, act_type='leaky', slope=0.2)


class BaseConvRNNCell(BaseRNNCell):
    """Abstract base class of the convolutional RNN cells.

    Parameters
    ----------
    input_shape : tuple of int
        Shape of one step's input, batch included (``(N, C, H, W)`` for NCHW).
    num_hidden : int
        Channels of the state (per gate).
    h2h_kernel, h2h_dilate : tuple of int
        Kernel (odd sizes only) and dilation of the state-to-state convolution.
    i2h_kernel, i2h_stride, i2h_pad, i2h_dilate : tuple of int
        The input-to-state convolution.
    i2h_weight_initializer, h2h_weight_initializer : str or Initializer, optional
    i2h_bias_initializer, h2h_bias_initializer : str or Initializer
    activation : str or callable
        An ``Activation`` act_type, or a function of ``(symbol, name=...)``.
    prefix : str
    params : RNNParams, optional
    conv_layout : str, default ``'NCHW'``
    """
    def __init__(self, input_shape, num_hidden, h2h_kernel, h2h_dilate, i2h_kernel,
                 i2h_stride, i2h_pad, i2h_dilate, i2h_weight_initializer,
                 h2h_weight_initializer, i2h_bias_initializer, h2h_bias_initializer,
                 activation, prefix='', params=None, conv_layout='NCHW'):
        super(BaseConvRNNCell, self).__init__(prefix=prefix, params=params)
        if any(k % 2 == 0 for k in h2h_kernel):
            raise ValueError(f"{type(self).__name__} '{prefix}': h2h_kernel={tuple(h2h_kernel)} "
                             f"must have odd sizes (the state keeps its spatial size)")
        self._h2h_kernel, self._h2h_dilate = tuple(h2h_kernel), tuple(h2h_dilate)
        self._h2h_pad = tuple(d * (k - 1) // 2 for k, d in zip(h2h_kernel, h2h_dilate))
        self._i2h_kernel, self._i2h_stride = tuple(i2h_kernel), tuple(i2h_stride)
        self._i2h_pad, self._i2h_dilate = tuple(i2h_pad), tuple(i2h_dilate)
        self._num_hidden = num_hidden
        self._input_shape = tuple(input_shape)
        self._conv_layout = conv_layout
        self._activation = activation
        self._state_shape = (0,) + tuple(self._i2h_output_shape()[1:])
        self._iW = self.params.get('i2h_weight', init=i2h_weight_initializer)
        self._hW = self.params.get('h2h_weight', init=h2h_weight_initializer)
        self._iB = self.params.get('i2h_bias', init=i2h_bias_initializer)
        self._hB = self.params.get('h2h_bias', init=h2h_bias_initializer)

    def _i2h_output_shape(self):
        probe = symbol.Convolution(data=symbol.Variable('data'), num_filter=self._num_hidden,
                                   kernel=self._i2h_kernel, stride=self._i2h_stride,
                                   pad=self._i2h_pad, dilate=self._i2h_dilate,
                                   layout=self._conv_layout)
        _, out_shapes, _ = probe.infer_shape(data=self._input_shape)
        if out_shapes is None:
            raise ValueError(f"{type(self).__name__} '{self._prefix}': input_shape="
                             f"{self._input_shape} does not fit the i2h convolution")
        return out_shapes[0]

    @property
    def _num_gates(self):
        return len(self._gate_names)

    @property
    def state_info(self):
        return [{'shape': self._state_shape, '__layout__': self._conv_layout}]

    def _conv_forward(self, inputs, states, name):
        """The input-to-state and state-to-state convolutions of one step."""
        filters = self._num_hidden * self._num_gates
        i2h = symbol.Convolution(name='%si2h' % name, data=inputs, num_filter=filters,
                                 kernel=self._i2h_kernel, stride=self._i2h_stride,
                                 pad=self._i2h_pad, dilate=self._i2h_dilate,
                                 weight=self._iW, bias=self._iB, layout=self._conv_layout)
        h2h = symbol.Convolution(name='%sh2h' % name, data=states[0], num_filter=filters,
                                 kernel=self._h2h_kernel, dilate=self._h2h_dilate,
                                 pad=self._h2h_pad, stride=(1, 1), weight=self._hW,
                                 bias=self._hB, layout=self._conv_layout)
        return i2h, h2h

    def __call__(self, inputs, states):
        raise NotImplementedError("BaseConvRNNCell is the abstract base of the "
                                  "convolutional RNN cells")


def _conv_cell_init(cls, default_prefix):
    """The keyword defaults every convolutional cell shares (mxnet's), for ``cls``."""
    def __init__(self, input_shape, num_hidden, h2h_kernel=(3, 3), h2h_dilate=(1, 1),
                 i2h_kernel=(3, 3), i2h_stride=(1, 1), i2h_pad=(1, 1), i2h_dilate=(1, 1),
                 i2h_weight_initializer=None, h2h_weight_initializer=None,
                 i2h_bias_initializer='zeros', h2h_bias_initializer='zeros',
                 activation=_LEAKY, prefix=default_prefix, params=None, conv_layout='NCHW'):
        BaseConvRNNCell.__init__(
            self, input_shape, num_hidden, h2h_kernel, h2h_dilate, i2h_kernel, i2h_stride,
            i2h_pad, i2h_dilate, i2h_weight_initializer, h2h_weight_initializer,
            i2h_bias_initializer, h2h_bias_initializer, activation, prefix=prefix,
            params=params, conv_layout=conv_layout)
    __init__.__doc__ = f"See :class:`BaseConvRNNCell`; prefix defaults to '{default_prefix}'."
    cls.__init__ = __init__
    return cls


class ConvRNNCell(BaseConvRNNCell):
    """Convolutional Elman cell: ``out = act(conv_i(x) + conv_h(h))`` (one gate)."""

    @property
    def _gate_names(self):
        return ('',)

    def __call__(self, inputs, states):
        self._counter += 1
        name = '%st%d_' % (self._prefix, self._counter)
        i2h, h2h = self._conv_forward(inputs, states, name)
        output = self._get_activation(i2h + h2h, self._activation, name='%sout' % name)
        return output, [output]


class ConvLSTMCell(BaseConvRNNCell):
    """Convolutional LSTM cell (Shi et al., NIPS 2015): gates i, f, c, o split along
    the channel axis; the cell transform and the output use ``activation``."""

    @property
    def _gate_names(self):
        return ['_i', '_f', '_c', '_o']

    @property
    def state_info(self):
        return [{'shape': self._state_shape, '__layout__': self._conv_layout}] * 2

    def __call__(self, inputs, states):
        self._counter += 1
        name = '%st%d_' % (self._prefix, self._counter)
        i2h, h2h = self._conv_forward(inputs, states, name)
        gates = symbol.SliceChannel(i2h + h2h, num_outputs=4,
                                    axis=self._conv_layout.find('C'), name='%sslice' % name)
        in_gate = symbol.Activation(gates[0], act_type='sigmoid', name='%si' % name)
        forget_gate = symbol.Activation(gates[1], act_type='sigmoid', name='%sf' % name)
        in_transform = self._get_activation(gates[2], self._activation, name='%sc' % name)
        out_gate = symbol.Activation(gates[3], act_type='sigmoid', name='%so' % name)
        next_c = symbol._plus(forget_gate * states[1], in_gate * in_transform,
                              name='%sstate' % name)
        next_h = symbol._mul(out_gate, self._get_activation(next_c, self._activation),
                             name='%sout' % name)
        return next_h, [next_h, next_c]


class ConvGRUCell(BaseConvRNNCell):
    """Convolutional GRU cell, gates r, z, o as :class:`GRUCell`:
    ``h' = (1 - z) * act(x_o + r * h_o) + z * h``."""

    @property
    def _gate_names(self):
        return ['_r', '_z', '_o']

    def __call__(self, inputs, states):
        self._counter += 1
        name = '%st%d_' % (self._prefix, self._counter)
        i2h, h2h = self._conv_forward(inputs, states, name)
        i2h_r, i2h_z, i2h = symbol.SliceChannel(i2h, num_outputs=3, name='%s_i2h_slice' % name)
        h2h_r, h2h_z, h2h = symbol.SliceChannel(h2h, num_outputs=3, name='%s_h2h_slice' % name)
        reset_gate = symbol.Activation(i2h_r + h2h_r, act_type='sigmoid',
                                       name='%s_r_act' % name)
        update_gate = symbol.Activation(i2h_z + h2h_z, act_type='sigmoid',
                                        name='%s_z_act' % name)
        next_h_tmp = self._get_activation(i2h + reset_gate * h2h, self._activation,
                                          name='%s_h_act' % name)
        next_h = symbol._plus((1. - update_gate) * next_h_tmp, update_gate * states[0],
                              name='%sout' % name)
        return next_h, [next_h]


_conv_cell_init(ConvRNNCell, 'ConvRNN_')
_conv_cell_init(ConvLSTMCell, 'ConvLSTM_')
_conv_cell_init(ConvGRUCell, 'ConvGRU_')
