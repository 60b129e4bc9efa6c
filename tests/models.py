"""Small models the tests share, written with the Symbol API as mxnet users write them."""
from compiler import symbol as sym


def lstm_cell(num_hidden=8, prefix="lstm_"):
    """One LSTM step as mxnet's ``rnn.LSTMCell`` writes it with raw symbols."""
    x = sym.Variable("data")
    h = sym.Variable("prev_h")
    c = sym.Variable("prev_c")
    i2h = sym.FullyConnected(x, num_hidden=4 * num_hidden, name=f"{prefix}i2h")
    h2h = sym.FullyConnected(h, num_hidden=4 * num_hidden, name=f"{prefix}h2h")
    gates = i2h + h2h
    sl = sym.SliceChannel(gates, num_outputs=4, name=f"{prefix}slice")
    in_gate = sym.Activation(sl[0], act_type="sigmoid")
    forget_gate = sym.Activation(sl[1], act_type="sigmoid")
    in_transform = sym.Activation(sl[2], act_type="tanh")
    out_gate = sym.Activation(sl[3], act_type="sigmoid")
    next_c = forget_gate * c + in_gate * in_transform
    next_h = out_gate * sym.Activation(next_c, act_type="tanh")
    return sym.Group([next_h, next_c])


def mlp(hidden=(512, 512), classes=10):
    """``data -> (FC -> relu)* -> FC -> SoftmaxOutput``."""
    y = sym.Variable("data")
    for i, h in enumerate(hidden):
        y = sym.FullyConnected(y, num_hidden=h, name=f"fc{i + 1}")
        y = sym.Activation(y, act_type="relu", name=f"relu{i + 1}")
    y = sym.FullyConnected(y, num_hidden=classes, name=f"fc{len(hidden) + 1}")
    return sym.SoftmaxOutput(y, name="softmax")
