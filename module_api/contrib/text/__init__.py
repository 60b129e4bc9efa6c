"""``mx.contrib.text``: token counting, vocabularies and token embeddings, as mxnet 1.9.1's.

``utils.count_tokens_from_str`` counts the tokens of a string; ``vocab.Vocabulary``
indexes tokens by frequency (index 0 is the unknown token, then the reserved tokens,
then the counted ones, most frequent first, ties in token order); ``embedding`` loads
pre-trained vectors from a file (``CustomEmbedding``), concatenates several for a
vocabulary (``CompositeEmbedding``), and keeps a registry of embedding classes
(``register``, ``create``, ``get_pretrained_file_names``).

Not built: mxnet's ``GloVe`` and ``FastText`` classes, which download their files from
mxnet's repository and check them against a table of 337 file names and SHA-1 sums;
register a ``_TokenEmbedding`` subclass of your own for such files, or load them with
``CustomEmbedding``.
"""
from . import embedding, utils, vocab  # noqa: F401
