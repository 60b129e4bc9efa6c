"""mxnet 1.x's wrapping cells (``mx.rnn.ModifierCell``, ``ZoneoutCell``,
``ResidualCell``): each one changes what a base cell computes and stands in for
it. A wrapped base cell is marked ``_modified`` and refuses direct use of its
``begin_state``; call the wrapper instead.
"""
from __future__ import annotations

from compiler import symbol
from .fused_rnn_cell import FusedRNNCell
from .composite_cell import BidirectionalCell, SequentialRNNCell
from .base_cell import BaseRNNCell, _normalize_sequence

__all__ = ["ModifierCell", "ZoneoutCell", "ResidualCell"]


class _Unwrapped(object):
    """Context manager lifting a base cell's ``_modified`` mark for a while."""

    def __init__(self, cell):
        self._cell = cell

    def __enter__(self):
        self._cell._modified = False
        return self._cell

    def __exit__(self, *exc):
        self._cell._modified = True


class ModifierCell(BaseRNNCell):
    """Base class of the cells that wrap a base cell.

    Parameters
    ----------
    base_cell : BaseRNNCell
        The wrapped cell; from now on use it only through the wrapper.
    """

    def __init__(self, base_cell):
        super().__init__()
        base_cell._modified = True
        self.base_cell = base_cell

    @property
    def params(self):
        self._own_params = False
        return self.base_cell.params

    @property
    def state_info(self):
        return self.base_cell.state_info

    def begin_state(self, init_sym=symbol.zeros, **kwargs):  # pylint: disable=arguments-differ
        """The base cell's begin states, made with ``init_sym`` (or ``func``,
        the keyword the other cells take)."""
        self._check_not_wrapped()
        make = kwargs.pop('func', init_sym)
        with _Unwrapped(self.base_cell) as base:
            return base.begin_state(func=make, **kwargs)

    def unpack_weights(self, args):
        return self.base_cell.unpack_weights(args)

    def pack_weights(self, args):
        return self.base_cell.pack_weights(args)

    def __call__(self, inputs, states):
        raise NotImplementedError(f"{type(self).__name__}: a modifier cell subclass must "
                                  f"define __call__(inputs, states)")


def _check_zoneout_base(cell):
    """Zoneout needs a cell that can be stepped."""
    assert not isinstance(cell, FusedRNNCell), \
        "FusedRNNCell doesn't support zoneout. Please unfuse first."
    assert not isinstance(cell, BidirectionalCell), \
        "BidirectionalCell doesn't support zoneout since it doesn't support step. " \
        "Please add ZoneoutCell to the cells underneath instead."
    stacked = cell._cells if isinstance(cell, SequentialRNNCell) else []
    assert not any(isinstance(child, BidirectionalCell) for child in stacked), \
        "Bidirectional SequentialRNNCell doesn't support zoneout. " \
        "Please add ZoneoutCell to the cells underneath instead."


def _keep_mask(p, like):
    """Ones shaped like ``like``, dropped out with probability ``p`` in training."""
    return symbol.Dropout(symbol.ones_like(like), p=p)


class ZoneoutCell(ModifierCell):
    """Zoneout (Krueger et al., 2016): in training, each element of the output
    and of the states keeps its previous value with probability
    ``zoneout_outputs`` / ``zoneout_states``.

    Parameters
    ----------
    base_cell : BaseRNNCell
        A cell that can be stepped (not fused, not bidirectional).
    zoneout_outputs, zoneout_states : float, default 0
        Probabilities of keeping the previous output / state element.
    """

    def __init__(self, base_cell, zoneout_outputs=0., zoneout_states=0.):
        _check_zoneout_base(base_cell)
        super().__init__(base_cell)
        self.zoneout_outputs, self.zoneout_states = zoneout_outputs, zoneout_states
        self.prev_output = None

    def reset(self):
        super().reset()
        self.prev_output = None

    def __call__(self, inputs, states):
        new_output, new_states = self.base_cell(inputs, states)
        # before the first step the previous output is zero (mxnet: a zeros((0, 0))
        # node shaped by backward inference; the values are the same)
        old_output = self.prev_output
        if old_output is None:
            old_output = symbol.zeros_like(new_output)
        output = new_output
        if self.zoneout_outputs != 0.:
            output = symbol.where(_keep_mask(self.zoneout_outputs, new_output),
                                  new_output, old_output)
        if self.zoneout_states != 0.:
            new_states = [symbol.where(_keep_mask(self.zoneout_states, new), new, old)
                          for new, old in zip(new_states, states)]
        self.prev_output = output
        return output, new_states


def _add_residual(output, inputs):
    return symbol.elemwise_add(output, inputs, name="%s_plus_residual" % output.name)


class ResidualCell(ModifierCell):
    """Adds the input to the base cell's output (Wu et al., 2016).

    Parameters
    ----------
    base_cell : BaseRNNCell
        Its output must have the input's shape.
    """

    def __call__(self, inputs, states):
        step_output, next_states = self.base_cell(inputs, states)
        return _add_residual(step_output, inputs), next_states

    def unroll(self, length, inputs, begin_state=None, layout='NTC', merge_outputs=None):
        self.reset()
        with _Unwrapped(self.base_cell) as base:
            outputs, states = base.unroll(length, inputs=inputs, layout=layout,
                                          begin_state=begin_state, merge_outputs=merge_outputs)
        # add the inputs in the form the outputs came in
        merged = isinstance(outputs, symbol.Symbol) if merge_outputs is None else merge_outputs
        sequence, _ = _normalize_sequence(length, inputs, layout, merged)
        if merged:
            return _add_residual(outputs, sequence), states
        return [_add_residual(out, step) for out, step in zip(outputs, sequence)], states
