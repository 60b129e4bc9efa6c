"""The cell protocol of mxnet 1.x's ``mx.rnn`` and its three step cells.

:class:`BaseRNNCell`, :class:`RNNParams`, the helpers every cell unrolls with,
and :class:`RNNCell`, :class:`LSTMCell`, :class:`GRUCell`. The other cells build
on these in ``composite_cell.py``, ``fused_rnn_cell.py`` and ``modifier_cell.py``;
``rnn_cell.py`` gathers them all under mxnet's ``mx.rnn.rnn_cell``.

Every name a cell gives a variable or a node (``lstm_l0_i2h_weight``,
``lstm_t3_out``, ``lstm_begin_state_0`` ...) is mxnet's, and the nodes are made
in mxnet's order so that automatically numbered ones (``_plus0``, ``dropout1``)
get mxnet's numbers too: saved symbols and ``.params`` files match.

One difference from mxnet: when ``unroll`` makes the begin states itself
(``begin_state=None``), the zero states take their batch size from the inputs
(zeros broadcast from a slice of the first input) instead of being
``zeros(shape=(0, H))`` nodes whose unknown batch dim mxnet fills in by
backward shape inference.
"""
from __future__ import annotations

from compiler import symbol
from .. import initializer as init
from .. import ndarray

__all__ = ["RNNParams", "BaseRNNCell", "RNNCell", "LSTMCell", "GRUCell"]

_WRAPPED_MSG = ("After applying modifier cells (e.g. {}) the base cell cannot be called "
                "directly. Call the modifier cell instead.")


# -- sequences: one Symbol over time <-> one Symbol per step ------------------------------

def _split_steps(seq, length, axis):
    """One Symbol per step of ``seq`` (time along ``axis``, squeezed away)."""
    assert len(seq.list_outputs()) == 1, \
        "unroll doesn't allow grouped symbol as input. Please convert " \
        "to list with list(inputs) first or let unroll handle splitting."
    return list(symbol.split(seq, axis=axis, num_outputs=length, squeeze_axis=1))


def _join_steps(steps, axis):
    """The per-step Symbols ``steps`` stacked along a new time axis ``axis``."""
    return symbol.Concat(*[symbol.expand_dims(s, axis=axis) for s in steps], dim=axis)


def _normalize_sequence(length, inputs, layout, merge, in_layout=None):
    """``inputs`` (a Symbol laid out as ``in_layout``, default ``layout``, or a
    list of per-step Symbols) as one Symbol in ``layout`` (``merge`` True), as a
    list (``merge`` False) or as whichever it already is (``merge`` None).

    Returns the sequence and the time axis of ``layout``.
    """
    assert inputs is not None, \
        "unroll(inputs=None) has been deprecated. " \
        "Please create input variables outside unroll."
    time_axis = layout.find('T')
    source_axis = time_axis if in_layout is None else in_layout.find('T')
    if not isinstance(inputs, symbol.Symbol):
        assert length is None or len(inputs) == length, \
            f"unroll: got {len(inputs)} step inputs for length={length}"
        if merge is not True:
            return inputs, time_axis
        return _join_steps(inputs, time_axis), time_axis
    if merge is False:
        return _split_steps(inputs, length, source_axis), time_axis
    if source_axis != time_axis:
        inputs = symbol.swapaxes(inputs, dim1=time_axis, dim2=source_axis)
    return inputs, time_axis


# -- begin states sized from the inputs ---------------------------------------------------

def _zeros_from_batch(ref, batch_axis, name, shape, hidden_attrs):
    """Zeros of ``shape``, whose one 0 dim takes ``ref``'s size along ``batch_axis``.

    The helper nodes get explicit names so that they use up none of the automatic
    name counters of the user's own nodes.
    """
    if batch_axis != 0:
        ref = symbol.swapaxes(ref, dim1=0, dim2=batch_axis, name=name + "_swap")
    flat = symbol.Reshape(ref, shape=(0, -1), name=name + "_flat")
    column = symbol.slice_axis(flat, axis=1, begin=0, end=1, name=name + "_slice")
    column = symbol.zeros_like(column, name=name + "_zero")
    batch_dim = shape.index(0)
    as_batch = tuple(-1 if d == batch_dim else 1 for d in range(len(shape)))
    wide = [d for d, size in enumerate(shape) if d != batch_dim and size != 1]
    if not wide:
        return symbol.Reshape(column, shape=as_batch, name=name, **hidden_attrs)
    column = symbol.Reshape(column, shape=as_batch, name=name + "_expand")
    return symbol.broadcast_axis(column, axis=tuple(wide), size=tuple(shape[d] for d in wide),
                                 name=name, **hidden_attrs)


def _batch_zeros(ref, batch_axis):
    """A ``begin_state`` ``func`` making zero states sized from ``ref``; a shape
    with no unknown (0) dim gives a plain ``zeros`` node."""
    def make(name=None, shape=None, **kwargs):
        shape = tuple(int(size) for size in (shape or ()))
        if 0 not in shape:
            return symbol.zeros(name=name, shape=shape, **kwargs)
        hidden_attrs = {k: v for k, v in kwargs.items() if k.startswith("__")}
        return _zeros_from_batch(ref, batch_axis, name, shape, hidden_attrs)
    return make


def _default_begin_state(cell, inputs, layout):
    """``cell.begin_state()`` with its zero states sized from ``inputs``."""
    if isinstance(inputs, symbol.Symbol):
        return cell.begin_state(func=_batch_zeros(inputs, layout.find('N')))
    return cell.begin_state(func=_batch_zeros(inputs[0], 0))


# -- the cell protocol ---------------------------------------------------------------------

class RNNParams(object):
    """Variables shared between cells, created on first use.

    Parameters
    ----------
    prefix : str, default ''
        Put in front of every variable name this container makes.
    """

    def __init__(self, prefix=''):
        self._prefix = prefix
        self._params = {}

    def get(self, name, **kwargs):
        """The variable ``prefix + name``; the first call creates it with
        ``symbol.Variable(prefix + name, **kwargs)``."""
        full_name = self._prefix + name
        if full_name not in self._params:
            self._params[full_name] = symbol.Variable(full_name, **kwargs)
        return self._params[full_name]


class BaseRNNCell(object):
    """Base class of the symbolic RNN cells.

    A cell makes one time step with ``cell(inputs, states)`` and a whole sequence
    with :meth:`unroll`. Its variables come from an :class:`RNNParams`.

    Parameters
    ----------
    prefix : str, default ''
        Put in front of the names of the cell's nodes (and of its variables
        when ``params`` is None).
    params : RNNParams, optional
        Variables to share with other cells; a new container if None.
    """

    def __init__(self, prefix='', params=None):
        self._own_params = params is None
        self._prefix = prefix
        self._params = RNNParams(prefix) if params is None else params
        self._modified = False
        self.reset()

    def reset(self):
        """Restart the step and begin-state numbering (before building a new graph)."""
        self._init_counter = -1
        self._counter = -1
        for child in getattr(self, '_cells', ()):
            child.reset()

    def __call__(self, inputs, states):
        """One time step: ``(output, next_states)``."""
        raise NotImplementedError(f"{type(self).__name__} defines no step: an RNN cell "
                                  f"subclass must define __call__(inputs, states)")

    @property
    def params(self):
        """The cell's :class:`RNNParams` (once handed out, no longer the cell's own)."""
        self._own_params = False
        return self._params

    @property
    def state_info(self):
        """One dict per state: its ``'shape'`` (0 for the batch) and ``'__layout__'``."""
        raise NotImplementedError(f"{type(self).__name__} must define state_info")

    @property
    def state_shape(self):
        """The shape of each state."""
        return [info['shape'] for info in self.state_info]

    @property
    def _gate_names(self):
        """Suffixes of the gates packed in the i2h / h2h weights, in packing order."""
        return ()

    def _check_not_wrapped(self, example='DropoutCell'):
        assert not self._modified, _WRAPPED_MSG.format(example)

    def begin_state(self, func=symbol.zeros, **kwargs):
        """The states before the first step.

        Parameters
        ----------
        func : callable, default ``symbol.zeros``
            Called as ``func(name='{prefix}begin_state_{n}', shape=...,
            __layout__=..., **kwargs)`` for each state; ``symbol.Variable`` makes
            states to feed in. ``n`` counts on over calls until :meth:`reset`.
        **kwargs
            Passed on to ``func``.

        Returns
        -------
        list of Symbol
        """
        self._check_not_wrapped()
        states = []
        for info in self.state_info:
            self._init_counter += 1
            if info is not None:
                kwargs.update(info)   # like mxnet: a None entry reuses the previous info
            name = '%sbegin_state_%d' % (self._prefix, self._init_counter)
            states.append(func(name=name, **kwargs))
        return states

    def _gate_array_name(self, group, gate, kind):
        return '%s%s%s_%s' % (self._prefix, group, gate, kind)

    def unpack_weights(self, args):
        """Split each packed ``i2h`` / ``h2h`` weight and bias in ``args`` into one
        array per gate (``{prefix}i2h_f_weight`` ...); returns a new dict."""
        unpacked = dict(args)
        if not self._gate_names:
            return unpacked
        width = self._num_hidden
        for group in ('i2h', 'h2h'):
            weight = unpacked.pop(self._gate_array_name(group, '', 'weight'))
            bias = unpacked.pop(self._gate_array_name(group, '', 'bias'))
            for n, gate in enumerate(self._gate_names):
                rows = slice(n * width, (n + 1) * width)
                unpacked[self._gate_array_name(group, gate, 'weight')] = weight[rows].clone()
                unpacked[self._gate_array_name(group, gate, 'bias')] = bias[rows].clone()
        return unpacked

    def pack_weights(self, args):
        """Undo :meth:`unpack_weights`: concatenate the per-gate arrays again."""
        packed = dict(args)
        if not self._gate_names:
            return packed
        for group in ('i2h', 'h2h'):
            weights, biases = [], []
            for gate in self._gate_names:
                weights.append(packed.pop(self._gate_array_name(group, gate, 'weight')))
                biases.append(packed.pop(self._gate_array_name(group, gate, 'bias')))
            packed[self._gate_array_name(group, '', 'weight')] = ndarray.concatenate(weights)
            packed[self._gate_array_name(group, '', 'bias')] = ndarray.concatenate(biases)
        return packed

    def unroll(self, length, inputs, begin_state=None, layout='NTC', merge_outputs=None):
        """Run the cell over ``length`` steps.

        Parameters
        ----------
        length : int
            Number of steps.
        inputs : Symbol or list of Symbol
            One Symbol laid out as ``layout``, or one Symbol per step (``(N, C)``).
        begin_state : list of Symbol, optional
            The first states; zeros (sized from ``inputs``) if None.
        layout : str, default 'NTC'
            'NTC' or 'TNC'.
        merge_outputs : bool, optional
            True: one output Symbol laid out as ``layout``; False: a list of
            per-step Symbols; None: whichever form is at hand.

        Returns
        -------
        outputs : Symbol or list of Symbol
        states : list of Symbol
            The states after the last step.
        """
        self.reset()
        steps, _ = _normalize_sequence(length, inputs, layout, False)
        states = begin_state
        if states is None:
            states = _default_begin_state(self, steps, layout)
        outputs = []
        for t in range(length):
            out, states = self(steps[t], states)
            outputs.append(out)
        outputs, _ = _normalize_sequence(length, outputs, layout, merge_outputs)
        return outputs, states

    def _get_activation(self, inputs, activation, **kwargs):
        """``activation`` applied to ``inputs``: an ``Activation`` act_type name,
        or a function called as ``activation(inputs, **kwargs)``."""
        if not isinstance(activation, str):
            return activation(inputs, **kwargs)
        return symbol.Activation(inputs, act_type=activation, **kwargs)


# -- step cells ----------------------------------------------------------------------------

class _DenseStepCell(BaseRNNCell):
    """A step cell of gates computed by two FullyConnected layers (input and state)."""

    _num_states = 1
    # the order the variables are made in (that of mxnet's cells)
    _param_order = ('i2h_weight', 'i2h_bias', 'h2h_weight', 'h2h_bias')

    def __init__(self, num_hidden, prefix, params, **param_attrs):
        super().__init__(prefix=prefix, params=params)
        self._num_hidden = num_hidden
        made = {key: self.params.get(key, **param_attrs.get(key, {}))
                for key in self._param_order}
        self._iW, self._iB = made['i2h_weight'], made['i2h_bias']
        self._hW, self._hB = made['h2h_weight'], made['h2h_bias']

    @property
    def state_info(self):
        return [{'shape': (0, self._num_hidden), '__layout__': 'NC'}
                for _ in range(self._num_states)]

    def _step_name(self):
        """Count a step and give its node-name prefix ``{prefix}t{step}_``."""
        self._counter += 1
        return '%st%d_' % (self._prefix, self._counter)

    def _projections(self, inputs, state, stem):
        """The FullyConnected layers ``{stem}i2h`` and ``{stem}h2h``, one slab per gate."""
        width = self._num_hidden * len(self._gate_names)
        from_input = symbol.FullyConnected(data=inputs, weight=self._iW, bias=self._iB,
                                           num_hidden=width, name=stem + 'i2h')
        from_state = symbol.FullyConnected(data=state, weight=self._hW, bias=self._hB,
                                           num_hidden=width, name=stem + 'h2h')
        return from_input, from_state


class RNNCell(_DenseStepCell):
    """Elman RNN cell: ``h' = act(W_x x + b_x + W_h h + b_h)``.

    Parameters
    ----------
    num_hidden : int
        Size of the state.
    activation : str or callable, default 'tanh'
    prefix : str, default 'rnn_'
    params : RNNParams, optional
    """

    def __init__(self, num_hidden, activation='tanh', prefix='rnn_', params=None):
        super().__init__(num_hidden, prefix, params)
        self._activation = activation

    @property
    def _gate_names(self):
        return ('',)

    def __call__(self, inputs, states):
        name = self._step_name()
        from_input, from_state = self._projections(inputs, states[0], name)
        hidden = self._get_activation(from_input + from_state, self._activation,
                                      name=name + 'out')
        return hidden, [hidden]


class LSTMCell(_DenseStepCell):
    """Long short-term memory cell; the packed gates are in the order i, f, c, o.

    Parameters
    ----------
    num_hidden : int
        Size of the hidden and cell states.
    prefix : str, default 'lstm_'
    params : RNNParams, optional
    forget_bias : float, default 1.0
        Initial value of the forget gate's part of ``i2h_bias`` (``init.LSTMBias``).
    """

    _num_states = 2
    _param_order = ('i2h_weight', 'h2h_weight', 'i2h_bias', 'h2h_bias')

    def __init__(self, num_hidden, prefix='lstm_', params=None, forget_bias=1.0):
        forget_init = init.LSTMBias(forget_bias=forget_bias)
        super().__init__(num_hidden, prefix, params, i2h_bias={'init': forget_init})

    @property
    def _gate_names(self):
        return ['_i', '_f', '_c', '_o']

    def __call__(self, inputs, states):
        name = self._step_name()
        from_input, from_state = self._projections(inputs, states[0], name)
        slabs = symbol.SliceChannel(from_input + from_state, num_outputs=4,
                                    name=name + 'slice')
        acts = [symbol.Activation(slabs[n], act_type=kind, name=name + gate)
                for n, (gate, kind) in enumerate((('i', 'sigmoid'), ('f', 'sigmoid'),
                                                  ('c', 'tanh'), ('o', 'sigmoid')))]
        write, forget, candidate, emit = acts
        cell = symbol._plus(forget * states[1], write * candidate, name=name + 'state')
        hidden = symbol._mul(emit, symbol.Activation(cell, act_type='tanh'), name=name + 'out')
        return hidden, [hidden, cell]


class GRUCell(_DenseStepCell):
    """Gated recurrent unit, cuDNN's variant (packed gates r, z, o):
    ``h' = (1 - z) * tanh(x_o + r * h_o) + z * h``.

    Parameters
    ----------
    num_hidden : int
        Size of the state.
    prefix : str, default 'gru_'
    params : RNNParams, optional
    """

    def __init__(self, num_hidden, prefix='gru_', params=None):
        super().__init__(num_hidden, prefix, params)

    @property
    def _gate_names(self):
        return ['_r', '_z', '_o']

    def __call__(self, inputs, states):
        name = self._step_name()
        prev = states[0]
        # mxnet names these nodes '{prefix}t{n}__i2h' ... (two underscores)
        from_input, from_state = self._projections(inputs, prev, name + '_')
        x_r, x_z, x_o = symbol.SliceChannel(from_input, num_outputs=3,
                                            name=name + '_i2h_slice')
        h_r, h_z, h_o = symbol.SliceChannel(from_state, num_outputs=3,
                                            name=name + '_h2h_slice')
        reset = symbol.Activation(x_r + h_r, act_type='sigmoid', name=name + '_r_act')
        update = symbol.Activation(x_z + h_z, act_type='sigmoid', name=name + '_z_act')
        candidate = symbol.Activation(x_o + reset * h_o, act_type='tanh',
                                      name=name + '_h_act')
        hidden = symbol._plus((1. - update) * candidate, update * prev, name=name + 'out')
        return hidden, [hidden]
