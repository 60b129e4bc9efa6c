"""``mx.contrib.text.vocab.Vocabulary``: tokens indexed by frequency (mxnet 1.9.1's)."""
from __future__ import annotations

UNKNOWN_IDX = 0


class Vocabulary:
    """Index tokens: the unknown token at 0, the reserved tokens next in their order,
    then the tokens of ``counter`` most frequent first (equal counts in token order),
    each counted at least ``min_freq`` times, at most ``most_freq_count`` of them.

    Parameters
    ----------
    counter : collections.Counter or None
        Token counts (tokens are any hashable objects: strings, tuples ...).
    most_freq_count : int or None
        How many counted tokens to index at most (the unknown and reserved tokens
        not counted); None: all.
    min_freq : int
        The least count of an indexed token (at least 1).
    unknown_token : hashable
        What every token outside the vocabulary is indexed as.
    reserved_tokens : list or None
        Tokens always indexed, after the unknown one; unique, without it.
    """

    def __init__(self, counter=None, most_freq_count=None, min_freq=1, unknown_token="<unk>",
                 reserved_tokens=None):
        assert min_freq > 0, "`min_freq` must be set to a positive value."
        if reserved_tokens is not None:
            reserved = set(reserved_tokens)
            assert unknown_token not in reserved, \
                "`reserved_token` cannot contain `unknown_token`."
            assert len(reserved) == len(reserved_tokens), \
                "`reserved_tokens` cannot contain duplicate reserved tokens."
        self._unknown_token = unknown_token
        self._reserved_tokens = list(reserved_tokens) if reserved_tokens is not None else None
        self._idx_to_token = [unknown_token] + list(reserved_tokens or [])
        self._token_to_idx = {t: i for i, t in enumerate(self._idx_to_token)}
        if counter is not None:
            self._index_counted(counter, most_freq_count, min_freq)

    def _index_counted(self, counter, most_freq_count, min_freq):
        taken = set(self._idx_to_token)
        by_token = sorted(counter.items(), key=lambda kv: kv[0])
        by_count = sorted(by_token, key=lambda kv: kv[1], reverse=True)    # stable: ties
        room = len(counter) if most_freq_count is None else most_freq_count
        for token, count in by_count:
            if count < min_freq or room <= 0:
                break
            if token in taken:
                continue
            self._token_to_idx[token] = len(self._idx_to_token)
            self._idx_to_token.append(token)
            taken.add(token)
            room -= 1

    def __len__(self):
        return len(self._idx_to_token)

    @property
    def token_to_idx(self):
        """dict: each indexed token's index."""
        return self._token_to_idx

    @property
    def idx_to_token(self):
        """list: the indexed tokens, by index."""
        return self._idx_to_token

    @property
    def unknown_token(self):
        return self._unknown_token

    @property
    def reserved_tokens(self):
        return self._reserved_tokens

    def to_indices(self, tokens):
        """The index of a token (the unknown token's, 0, for one not indexed), or a list of
        indices for a list of tokens."""
        if isinstance(tokens, list):
            return [self._token_to_idx.get(t, UNKNOWN_IDX) for t in tokens]
        return self._token_to_idx.get(tokens, UNKNOWN_IDX)

    def to_tokens(self, indices):
        """The token of an index, or a list of tokens for a list of indices.

        Raises
        ------
        ValueError
            For an index outside ``[0, len(self))``.
        """
        single = not isinstance(indices, list)
        tokens = []
        for i in ([indices] if single else indices):
            if not isinstance(i, int) or not 0 <= i < len(self._idx_to_token):
                raise ValueError(f"Token index {i} in the provided `indices` is invalid: the "
                                 f"vocabulary indexes 0 to {len(self._idx_to_token) - 1}")
            tokens.append(self._idx_to_token[i])
        return tokens[0] if single else tokens
