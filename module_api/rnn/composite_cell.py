"""Cells made of cells, from mxnet 1.x's ``mx.rnn``: :class:`SequentialRNNCell`
(a stack) and :class:`BidirectionalCell` (forward and backward in time), and the
stateless :class:`DropoutCell` put between stacked layers.

A composite cell shares variables with its children through one
:class:`RNNParams`, and its states are its children's, in order.
"""
from __future__ import annotations

from compiler import symbol
from .base_cell import BaseRNNCell, _default_begin_state, _normalize_sequence

__all__ = ["SequentialRNNCell", "BidirectionalCell", "DropoutCell"]


def _adopt_params(parent, children, name):
    """Share variables between a composite cell and its ``children``: the parent's
    own container (if it was given one) seeds theirs, theirs fill the parent's."""
    if parent._override_cell_params:
        assert all(child._own_params for child in children), \
            f"Either specify params for {name} or child cells, not both."
        for child in children:
            child.params._params.update(parent.params._params)
    for child in children:
        parent.params._params.update(child.params._params)


def _chunk_states(cells, states):
    """``states`` cut into one list per cell, by each cell's number of states."""
    chunks, start = [], 0
    for cell in cells:
        stop = start + len(cell.state_info)
        chunks.append(states[start:stop])
        start = stop
    return chunks


class _CellGroup(BaseRNNCell):
    """State, begin-state and weight handling shared by the composite cells."""

    @property
    def state_info(self):
        return [info for cell in self._cells for info in cell.state_info]

    def begin_state(self, **kwargs):  # pylint: disable=arguments-differ
        self._check_not_wrapped(self._wrapper_example)
        return [state for cell in self._cells for state in cell.begin_state(**kwargs)]

    def unpack_weights(self, args):
        for cell in self._cells:
            args = cell.unpack_weights(args)
        return args

    def pack_weights(self, args):
        for cell in self._cells:
            args = cell.pack_weights(args)
        return args


class SequentialRNNCell(_CellGroup):
    """A stack of cells: each cell's output is the next cell's input.

    Parameters
    ----------
    params : RNNParams, optional
        Variables for the whole stack; then the cells added must own theirs.
    """

    _wrapper_example = 'ZoneoutCell'

    def __init__(self, params=None):
        super().__init__(prefix='', params=params)
        self._override_cell_params = params is not None
        self._cells = []

    def add(self, cell):
        """Put ``cell`` on top of the stack."""
        self._cells.append(cell)
        _adopt_params(self, [cell], 'SequentialRNNCell')

    def __call__(self, inputs, states):
        self._counter += 1
        next_states = []
        for cell, own in zip(self._cells, _chunk_states(self._cells, states)):
            assert not isinstance(cell, BidirectionalCell), \
                "a BidirectionalCell in a SequentialRNNCell cannot be stepped; use unroll"
            inputs, own = cell(inputs, own)
            next_states.extend(own)
        return inputs, next_states

    def unroll(self, length, inputs, begin_state=None, layout='NTC', merge_outputs=None):
        self.reset()
        if begin_state is None:
            begin_state = _default_begin_state(self, inputs, layout)
        last = len(self._cells) - 1
        final_states = []
        for n, (cell, own) in enumerate(zip(self._cells,
                                            _chunk_states(self._cells, begin_state))):
            inputs, own = cell.unroll(length, inputs=inputs, begin_state=own, layout=layout,
                                      merge_outputs=merge_outputs if n == last else None)
            final_states.extend(own)
        return inputs, final_states


class DropoutCell(BaseRNNCell):
    """Dropout on the sequence; no state.

    Parameters
    ----------
    dropout : float
        Fraction of the elements zeroed in training.
    prefix : str, default 'dropout_'
    params : RNNParams, optional
    """

    def __init__(self, dropout, prefix='dropout_', params=None):
        super().__init__(prefix, params)
        assert isinstance(dropout, (int, float)), "dropout probability must be a number"
        self.dropout = dropout

    @property
    def state_info(self):
        return []

    def __call__(self, inputs, states):
        if self.dropout > 0:
            inputs = symbol.Dropout(data=inputs, p=self.dropout)
        return inputs, states

    def unroll(self, length, inputs, begin_state=None, layout='NTC', merge_outputs=None):
        self.reset()
        inputs, _ = _normalize_sequence(length, inputs, layout, merge_outputs)
        if not isinstance(inputs, symbol.Symbol):
            return super().unroll(length, inputs, begin_state=begin_state, layout=layout,
                                  merge_outputs=merge_outputs)
        # a whole sequence at once: one Dropout node
        return self(inputs, [])


class BidirectionalCell(_CellGroup):
    """Two cells over the sequence, ``l_cell`` forward and ``r_cell`` backward in
    time, their outputs concatenated along the feature axis. Unroll only.

    Parameters
    ----------
    l_cell : BaseRNNCell
        The forward cell.
    r_cell : BaseRNNCell
        The backward cell.
    params : RNNParams, optional
    output_prefix : str, default 'bi_'
        Prefix of the output nodes' names.
    """

    _wrapper_example = 'DropoutCell'

    def __init__(self, l_cell, r_cell, params=None, output_prefix='bi_'):
        super().__init__('', params=params)
        self._output_prefix = output_prefix
        self._override_cell_params = params is not None
        _adopt_params(self, [l_cell, r_cell], 'BidirectionalCell')
        self._cells = [l_cell, r_cell]

    def __call__(self, inputs, states):
        raise NotImplementedError("Bidirectional cannot be stepped. Please use unroll")

    def unroll(self, length, inputs, begin_state=None, layout='NTC', merge_outputs=None):
        self.reset()
        steps, axis = _normalize_sequence(length, inputs, layout, False)
        if begin_state is None:
            begin_state = _default_begin_state(self, steps, layout)
        forward_cell, backward_cell = self._cells
        forward_begin, backward_begin = _chunk_states(self._cells, begin_state)
        fwd, fwd_states = forward_cell.unroll(length, inputs=steps, begin_state=forward_begin,
                                              layout=layout, merge_outputs=merge_outputs)
        bwd, bwd_states = backward_cell.unroll(length, inputs=steps[::-1],
                                               begin_state=backward_begin, layout=layout,
                                               merge_outputs=merge_outputs)
        if merge_outputs is None:
            merge_outputs = isinstance(fwd, symbol.Symbol) and isinstance(bwd, symbol.Symbol)
            if not merge_outputs:
                fwd, bwd = (self._as_steps(part, length, axis) for part in (fwd, bwd))
        if merge_outputs:
            outputs = symbol.Concat(fwd, symbol.reverse(bwd, axis=axis), dim=2,
                                    name=self._output_prefix + 'out')
        else:
            outputs = [symbol.Concat(f, b, dim=1, name='%st%d' % (self._output_prefix, t))
                       for t, (f, b) in enumerate(zip(fwd, bwd[::-1]))]
        return outputs, [fwd_states, bwd_states]

    @staticmethod
    def _as_steps(outputs, length, axis):
        if not isinstance(outputs, symbol.Symbol):
            return outputs
        return list(symbol.SliceChannel(outputs, axis=axis, num_outputs=length, squeeze_axis=1))
