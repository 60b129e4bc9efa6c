"""Text utilities of ``mx.contrib.text`` (mxnet 1.9.1's ``text.utils``)."""
from __future__ import annotations

import collections
import re


def count_tokens_from_str(source_str, token_delim=" ", seq_delim="\n", to_lower=False,
                          counter_to_update=None):
    """Count the tokens of ``source_str``.

    Parameters
    ----------
    source_str : str
        Tokens separated by ``token_delim``, sequences by ``seq_delim``.
    token_delim, seq_delim : str
        Regular expressions (``'\\\\*'`` for a literal star); empty pieces between
        delimiters are not tokens.
    to_lower : bool
        Count the lower-cased tokens.
    counter_to_update : collections.Counter, optional
        Updated with the counts and returned; a new Counter when None.

    Returns
    -------
    collections.Counter
    """
    tokens = [t for t in re.split(token_delim + "|" + seq_delim, source_str) if t]
    if to_lower:
        tokens = [t.lower() for t in tokens]
    if counter_to_update is None:
        return collections.Counter(tokens)
    counter_to_update.update(tokens)
    return counter_to_update
