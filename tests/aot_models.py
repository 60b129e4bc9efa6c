"""Small models for the ahead-of-time compilation tests (``symtriton compile``).

``lstm_sym_gen`` is the bucketed LSTM language model of
``examples/lstm_bucketing.py`` with tiny sizes, given to the CLI as
``tests.aot_models:lstm_sym_gen``.
"""
import module_api as mx

VOCAB = 12
NUM_HIDDEN = 8
NUM_EMBED = 8
NUM_LAYERS = 1


def lstm_sym_gen(seq_len):
    """``sym_gen(bucket_key) -> (symbol, data_names, label_names)``.

    The body runs under a fresh ``NameManager`` so automatic node names
    (``split0``, ``_plus0``...) and with them the cache key do not depend on
    how many symbols the process made before (``symtriton compile`` checks).
    """
    with mx.name.NameManager():
        return _lstm(seq_len)


def _lstm(seq_len):
    stack = mx.rnn.SequentialRNNCell()
    for i in range(NUM_LAYERS):
        stack.add(mx.rnn.LSTMCell(num_hidden=NUM_HIDDEN, prefix="lstm_l%d_" % i))
    data = mx.sym.Variable("data")
    label = mx.sym.Variable("softmax_label")
    embed = mx.sym.Embedding(data=data, input_dim=VOCAB, output_dim=NUM_EMBED, name="embed")
    stack.reset()
    outputs = stack.unroll(seq_len, inputs=embed, merge_outputs=True)[0]
    pred = mx.sym.Reshape(outputs, shape=(-1, NUM_HIDDEN))
    pred = mx.sym.FullyConnected(data=pred, num_hidden=VOCAB, name="pred")
    label = mx.sym.Reshape(label, shape=(-1,))
    pred = mx.sym.SoftmaxOutput(data=pred, label=label, name="softmax")
    return pred, ("data",), ("softmax_label",)
