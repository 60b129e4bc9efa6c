"""mxnet 1.x's convolutional RNN cells (``mx.rnn.ConvRNNCell``, ``ConvLSTMCell``,
``ConvGRUCell``): the gates of RNNCell / LSTMCell / GRUCell computed by two
Convolutions (input-to-state and state-to-state) instead of FullyConnected layers,
with mxnet 1.9.1's parameter names, node names, defaults and state shapes.

The state-to-state convolution keeps the state's spatial size (odd kernels, "same"
padding for its dilation); the state shape is the input-to-state convolution's output
shape with an unknown (0) batch dim.

Nodes are made in mxnet's order, unnamed ones included (the arithmetic between
gates, the shape probe of the constructor), so that automatically numbered nodes
(``_plus3``, ``leakyrelu1``, ``convolution0``) get mxnet's numbers.
"""
from __future__ import annotations

import functools

from compiler import symbol
from .base_cell import BaseRNNCell

__all__ = ["BaseConvRNNCell", "ConvRNNCell", "ConvLSTMCell", "ConvGRUCell"]

# mxnet's default activation of every convolutional cell
_LEAKY = functools.partial(symbol.LeakyReLU, act_type='leaky', slope=0.2)


def _same_padding(kernel, dilate):
    """Padding that keeps the spatial size under an odd ``kernel`` dilated by ``dilate``."""
    return tuple(d * (k - 1) // 2 for k, d in zip(kernel, dilate))


class BaseConvRNNCell(BaseRNNCell):
    """Abstract base class of the convolutional RNN cells.

    A subclass names its gates (``_gate_names``) and builds a step in ``__call__``
    from :meth:`_conv_forward`, which stacks every gate along the channel axis.

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
        super().__init__(prefix=prefix, params=params)
        if any(size % 2 == 0 for size in h2h_kernel):
            raise ValueError(f"{type(self).__name__} '{prefix}': h2h_kernel={tuple(h2h_kernel)} "
                             f"must have odd sizes (the state keeps its spatial size)")
        # mxnet's attribute names: subclasses written for mxnet read them
        self._num_hidden, self._input_shape = num_hidden, tuple(input_shape)
        self._conv_layout, self._activation = conv_layout, activation
        self._h2h_kernel, self._h2h_dilate = tuple(h2h_kernel), tuple(h2h_dilate)
        self._h2h_pad = _same_padding(self._h2h_kernel, self._h2h_dilate)
        self._i2h_kernel, self._i2h_stride = tuple(i2h_kernel), tuple(i2h_stride)
        self._i2h_pad, self._i2h_dilate = tuple(i2h_pad), tuple(i2h_dilate)
        self._state_shape = (0,) + tuple(self._i2h_output_shape()[1:])
        weights_and_biases = [('i2h_weight', i2h_weight_initializer),
                              ('h2h_weight', h2h_weight_initializer),
                              ('i2h_bias', i2h_bias_initializer),
                              ('h2h_bias', h2h_bias_initializer)]
        self._iW, self._hW, self._iB, self._hB = [
            self.params.get(key, init=initializer) for key, initializer in weights_and_biases]

    def _i2h_geometry(self):
        return dict(kernel=self._i2h_kernel, stride=self._i2h_stride, pad=self._i2h_pad,
                    dilate=self._i2h_dilate)

    def _i2h_output_shape(self):
        """Shape of the input-to-state convolution's output for ``input_shape``.

        The probe is an unnamed node, as in mxnet: it takes one number of the
        automatic ``convolution`` names.
        """
        probe = symbol.Convolution(data=symbol.Variable('data'), num_filter=self._num_hidden,
                                   **self._i2h_geometry(), layout=self._conv_layout)
        _, shapes, _ = probe.infer_shape(data=self._input_shape)
        if shapes is None:
            raise ValueError(f"{type(self).__name__} '{self._prefix}': input_shape="
                             f"{self._input_shape} does not fit the i2h convolution")
        return shapes[0]

    @property
    def _num_gates(self):
        return len(self._gate_names)

    @property
    def state_info(self):
        return [{'shape': self._state_shape, '__layout__': self._conv_layout}]

    def _step_name(self):
        """Count a step and give its node-name prefix ``{prefix}t{step}_``."""
        self._counter += 1
        return '%st%d_' % (self._prefix, self._counter)

    def _conv_forward(self, inputs, states, name):
        """The two convolutions of a step, ``{name}i2h`` over ``inputs`` and
        ``{name}h2h`` over the first state, each ``num_hidden`` channels per gate."""
        channels = self._num_hidden * self._num_gates
        # keyword order is mxnet's: the saved JSON lists the attributes in it
        from_input = symbol.Convolution(
            name=name + 'i2h', data=inputs, num_filter=channels, **self._i2h_geometry(),
            weight=self._iW, bias=self._iB, layout=self._conv_layout)
        from_state = symbol.Convolution(
            name=name + 'h2h', data=states[0], num_filter=channels, kernel=self._h2h_kernel,
            dilate=self._h2h_dilate, pad=self._h2h_pad, stride=(1, 1), weight=self._hW,
            bias=self._hB, layout=self._conv_layout)
        return from_input, from_state

    def __call__(self, inputs, states):
        raise NotImplementedError("BaseConvRNNCell is the abstract base of the "
                                  "convolutional RNN cells")


def _with_mxnet_defaults(default_prefix):
    """Class decorator: give a convolutional cell mxnet's constructor, whose keyword
    defaults all three cells share apart from ``prefix``."""
    def install(cls):
        def __init__(self, input_shape, num_hidden, h2h_kernel=(3, 3), h2h_dilate=(1, 1),
                     i2h_kernel=(3, 3), i2h_stride=(1, 1), i2h_pad=(1, 1), i2h_dilate=(1, 1),
                     i2h_weight_initializer=None, h2h_weight_initializer=None,
                     i2h_bias_initializer='zeros', h2h_bias_initializer='zeros',
                     activation=_LEAKY, prefix=default_prefix, params=None,
                     conv_layout='NCHW'):
            BaseConvRNNCell.__init__(
                self, input_shape, num_hidden, h2h_kernel, h2h_dilate, i2h_kernel,
                i2h_stride, i2h_pad, i2h_dilate, i2h_weight_initializer,
                h2h_weight_initializer, i2h_bias_initializer, h2h_bias_initializer,
                activation, prefix=prefix, params=params, conv_layout=conv_layout)
        __init__.__doc__ = f"See :class:`BaseConvRNNCell`; prefix defaults to '{default_prefix}'."
        __init__.__qualname__ = f"{cls.__name__}.__init__"
        cls.__init__ = __init__
        return cls
    return install


@_with_mxnet_defaults('ConvRNN_')
class ConvRNNCell(BaseConvRNNCell):
    """Convolutional Elman cell: ``out = act(conv_i(x) + conv_h(h))`` (one gate)."""

    @property
    def _gate_names(self):
        return ('',)

    def __call__(self, inputs, states):
        stem = self._step_name()
        from_input, from_state = self._conv_forward(inputs, states, stem)
        hidden = self._get_activation(from_input + from_state, self._activation,
                                      name=stem + 'out')
        return hidden, [hidden]


@_with_mxnet_defaults('ConvLSTM_')
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
        stem = self._step_name()
        from_input, from_state = self._conv_forward(inputs, states, stem)
        slabs = symbol.SliceChannel(from_input + from_state, num_outputs=4,
                                    axis=self._conv_layout.find('C'), name=stem + 'slice')
        write = symbol.Activation(slabs[0], act_type='sigmoid', name=stem + 'i')
        forget = symbol.Activation(slabs[1], act_type='sigmoid', name=stem + 'f')
        candidate = self._get_activation(slabs[2], self._activation, name=stem + 'c')
        emit = symbol.Activation(slabs[3], act_type='sigmoid', name=stem + 'o')
        cell = symbol._plus(forget * states[1], write * candidate, name=stem + 'state')
        # the cell's squashing node is unnamed in mxnet (an automatic number)
        hidden = symbol._mul(emit, self._get_activation(cell, self._activation),
                             name=stem + 'out')
        return hidden, [hidden, cell]


@_with_mxnet_defaults('ConvGRU_')
class ConvGRUCell(BaseConvRNNCell):
    """Convolutional GRU cell, gates r, z, o as :class:`GRUCell`:
    ``h' = (1 - z) * act(x_o + r * h_o) + z * h``."""

    @property
    def _gate_names(self):
        return ['_r', '_z', '_o']

    def __call__(self, inputs, states):
        stem = self._step_name()
        prev = states[0]
        from_input, from_state = self._conv_forward(inputs, states, stem)
        # per source, its r, z, o slabs; mxnet slices on the default axis (1)
        # whatever the layout
        (x_r, x_z, x_o), (h_r, h_z, h_o) = [
            symbol.SliceChannel(conv, num_outputs=3, name=f'{stem}_{source}_slice')
            for source, conv in (('i2h', from_input), ('h2h', from_state))]
        reset, update = [
            symbol.Activation(x + h, act_type='sigmoid', name=f'{stem}_{gate}_act')
            for gate, x, h in (('r', x_r, h_r), ('z', x_z, h_z))]
        candidate = self._get_activation(x_o + reset * h_o, self._activation,
                                         name=stem + '_h_act')
        hidden = symbol._plus((1. - update) * candidate, update * prev, name=stem + 'out')
        return hidden, [hidden]
