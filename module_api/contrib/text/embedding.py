"""Token embeddings of ``mx.contrib.text`` (mxnet 1.9.1's ``text.embedding``).

An embedding is a :class:`~.vocab.Vocabulary` whose indexed tokens each have a vector:
``idx_to_vec`` (an NDArray, one row per index; row 0 is the unknown token's). Vectors
come from a pre-trained file of lines ``token<delim>v1<delim>v2...``:

* a token seen again is skipped (with a warning), and so is a line of one number (a
  header, as fastText files start with);
* the unknown token's vector is the file's line for it when there is one, else
  ``init_unknown_vec(shape=vec_len)``;
* lines of differing lengths, or without a vector, are refused (``AssertionError``).

With a ``vocabulary``, the embedding indexes that vocabulary's tokens instead, each with
the file's vector for it (the unknown vector where the file has none).
:class:`CompositeEmbedding` concatenates several embeddings' vectors for a vocabulary.
"""
from __future__ import annotations

import logging
import os
import warnings

import numpy as np

from ... import ndarray as nd
from ... import registry
from . import vocab

UNKNOWN_IDX = vocab.UNKNOWN_IDX


class _TokenEmbedding(vocab.Vocabulary):
    """The base class of token embeddings (register subclasses with :func:`register`).

    A subclass for hosted files names them in ``pretrained_file_name_sha1`` (file name
    -> SHA-1) and loads one with ``_load_embedding``; ``_get_pretrained_file`` finds it
    under ``embedding_root/<class name in lower case>/`` and refuses a missing or
    altered file (this project downloads nothing; put the file there).
    """

    pretrained_file_name_sha1: dict = {}

    def __init__(self, **kwargs):
        super().__init__(**kwargs)
        self._vec_len = None
        self._idx_to_vec = None

    @classmethod
    def _check_pretrained_file_names(cls, pretrained_file_name):
        if pretrained_file_name not in cls.pretrained_file_name_sha1:
            raise KeyError(f"Cannot find pretrained file {pretrained_file_name} for token "
                           f"embedding {cls.__name__.lower()}; valid names: "
                           f"{sorted(cls.pretrained_file_name_sha1)}")

    @classmethod
    def _get_pretrained_file(cls, embedding_root, pretrained_file_name):
        from ...gluon.utils import check_sha1
        path = os.path.join(os.path.expanduser(embedding_root), cls.__name__.lower(),
                            pretrained_file_name)
        expected = cls.pretrained_file_name_sha1[pretrained_file_name]
        if not os.path.isfile(path) or not check_sha1(path, expected):
            raise ValueError(f"{path}: the pre-trained file is missing or its SHA-1 is not "
                             f"{expected}. This project downloads nothing: place the file "
                             f"there, or load it with CustomEmbedding")
        return path

    def _load_embedding(self, pretrained_file_path, elem_delim, init_unknown_vec,
                        encoding="utf8"):
        """Index the tokens of a pre-trained file and load their vectors (module doc)."""
        path = os.path.expanduser(pretrained_file_path)
        if not os.path.isfile(path):
            raise ValueError("`pretrained_file_path` must be a valid path to the pre-trained "
                             "token embedding file.")
        logging.info("Loading pre-trained token embedding vectors from %s", path)
        rows, unknown_row, seen = [], None, set()
        with open(path, "r", encoding=encoding) as f:
            for line_num, line in enumerate(f, 1):
                elems = line.rstrip().split(elem_delim)
                assert len(elems) > 1, (f"At line {line_num} of the pre-trained text embedding "
                                        f"file: the data format of the pre-trained token "
                                        f"embedding file {path} is unexpected.")
                token, values = elems[0], [float(v) for v in elems[1:]]
                if token == self.unknown_token and unknown_row is None:
                    unknown_row = values
                    seen.add(token)
                elif token in seen:
                    warnings.warn(f"At line {line_num} of the pre-trained token embedding file: "
                                  f"the embedding vector for token {token} has been loaded and "
                                  f"a duplicate embedding for the same token is skipped.")
                elif len(values) == 1:
                    warnings.warn(f"At line {line_num} of the pre-trained text embedding file: "
                                  f"token {token} with 1-dimensional vector {values} is likely "
                                  f"a header and is skipped.")
                else:
                    assert not rows or len(values) == len(rows[0]), (
                        f"At line {line_num} of the pre-trained token embedding file: the "
                        f"dimension of token {token} is {len(values)} but the dimension of "
                        f"previous tokens is {len(rows[0])}. Dimensions of all the tokens must "
                        f"be the same.")
                    rows.append(values)
                    self._token_to_idx[token] = len(self._idx_to_token)
                    self._idx_to_token.append(token)
                    seen.add(token)
        self._vec_len = len(rows[0]) if rows else \
            (len(unknown_row) if unknown_row is not None else 0)
        vecs = np.zeros((len(self._idx_to_token), self._vec_len), np.float32)
        first = len(self._idx_to_token) - len(rows)
        if rows:
            vecs[first:] = np.asarray(rows, np.float32)
        self._idx_to_vec = nd.array(vecs)
        unknown = nd.array(unknown_row) if unknown_row is not None else \
            init_unknown_vec(shape=self._vec_len)
        self._idx_to_vec[UNKNOWN_IDX] = unknown

    def _index_tokens_from_vocabulary(self, vocabulary):
        self._token_to_idx = dict(vocabulary.token_to_idx)
        self._idx_to_token = list(vocabulary.idx_to_token)
        self._unknown_token = vocabulary.unknown_token
        self._reserved_tokens = list(vocabulary.reserved_tokens) \
            if vocabulary.reserved_tokens is not None else None

    def _set_idx_to_vec_by_embeddings(self, token_embeddings, vocab_len, vocab_idx_to_token):
        """Each vocabulary token's vector: the embeddings' vectors for it, concatenated
        (row 0 from each embedding's unknown vector)."""
        parts = []
        for embed in token_embeddings:
            rows = [embed.idx_to_vec[UNKNOWN_IDX].reshape((1, embed.vec_len))]
            if vocab_len > 1:
                rows.append(embed.get_vecs_by_tokens(list(vocab_idx_to_token[1:])))
            parts.append(nd.concat(*rows, dim=0) if len(rows) > 1 else rows[0])
        self._idx_to_vec = nd.concat(*parts, dim=1) if len(parts) > 1 else parts[0]
        self._vec_len = sum(embed.vec_len for embed in token_embeddings)

    def _build_embedding_for_vocabulary(self, vocabulary):
        if vocabulary is not None:
            assert isinstance(vocabulary, vocab.Vocabulary), \
                "The argument `vocabulary` must be an instance of " \
                "mxnet.contrib.text.vocab.Vocabulary."
            self._set_idx_to_vec_by_embeddings([self], len(vocabulary), vocabulary.idx_to_token)
            self._index_tokens_from_vocabulary(vocabulary)

    @property
    def vec_len(self):
        """int: the length of each vector."""
        return self._vec_len

    @property
    def idx_to_vec(self):
        """NDArray ``(len(self), vec_len)``: each indexed token's vector."""
        return self._idx_to_vec

    def _indices(self, tokens, lower_case_backup):
        if not lower_case_backup:
            return [self._token_to_idx.get(t, UNKNOWN_IDX) for t in tokens]
        return [self._token_to_idx[t] if t in self._token_to_idx else
                self._token_to_idx.get(t.lower(), UNKNOWN_IDX) for t in tokens]

    def get_vecs_by_tokens(self, tokens, lower_case_backup=False):
        """The vector of a token (1-D), or of each token of a list (2-D).

        Parameters
        ----------
        tokens : str or list of str
        lower_case_backup : bool
            Look a token not indexed up again in lower case.
        """
        single = not isinstance(tokens, list)
        indices = self._indices([tokens] if single else tokens, lower_case_backup)
        vecs = nd.Embedding(nd.array(indices), self._idx_to_vec, self._idx_to_vec.shape[0],
                            self._idx_to_vec.shape[1])
        return vecs[0] if single else vecs

    def update_token_vectors(self, tokens, new_vectors):
        """Set the vectors of indexed tokens.

        Parameters
        ----------
        tokens : str or list of str
            Indexed tokens (the unknown token by its name); an unknown one is refused.
        new_vectors : NDArray
            ``(len(tokens), vec_len)``; for one token also ``(vec_len,)``.
        """
        assert self._idx_to_vec is not None, "The property `idx_to_vec` has not been properly set."
        if not isinstance(tokens, list) or len(tokens) == 1:
            assert isinstance(new_vectors, nd.NDArray) and len(new_vectors.shape) in (1, 2), \
                "`new_vectors` must be a 1-D or 2-D NDArray if `tokens` is a singleton."
            tokens = tokens if isinstance(tokens, list) else [tokens]
            if len(new_vectors.shape) == 1:
                new_vectors = new_vectors.reshape((1, -1))
        else:
            assert isinstance(new_vectors, nd.NDArray) and len(new_vectors.shape) == 2, \
                "`new_vectors` must be a 2-D NDArray if `tokens` is a list of multiple strings."
        assert tuple(new_vectors.shape) == (len(tokens), self.vec_len), \
            "The length of new_vectors must be equal to the number of tokens and the width " \
            "of new_vectors must be equal to the dimension of embeddings of the glossary."
        indices = []
        for token in tokens:
            if token not in self._token_to_idx:
                raise ValueError(f"Token {token} is unknown. To update the embedding vector for "
                                 f"an unknown token, please specify it explicitly as the "
                                 f"`unknown_token` {self._idx_to_token[UNKNOWN_IDX]} in "
                                 f"`tokens`. This is to avoid unintended updates.")
            indices.append(self._token_to_idx[token])
        for row, i in enumerate(indices):
            self._idx_to_vec[i] = new_vectors[row]


register = registry.get_register_func(_TokenEmbedding, "token embedding")
create = registry.get_create_func(_TokenEmbedding, "token embedding")


def get_pretrained_file_names(embedding_name=None):
    """The pre-trained file names a registered embedding class knows: a list for
    ``embedding_name``, or a dict of every registered name's list when None.

    Raises
    ------
    KeyError
        For a name no class is registered under.
    """
    table = registry.get_registry(_TokenEmbedding)
    if embedding_name is None:
        return {name: list(cls.pretrained_file_name_sha1) for name, cls in table.items()}
    if embedding_name not in table:
        raise KeyError(f"Cannot find `embedding_name` {embedding_name}. Use "
                       f"`get_pretrained_file_names(embedding_name=None).keys()` to get all the "
                       f"valid embedding names.")
    return list(table[embedding_name].pretrained_file_name_sha1)


class CustomEmbedding(_TokenEmbedding):
    """Vectors loaded from a pre-trained file (module docstring).

    Parameters
    ----------
    pretrained_file_path : str
    elem_delim : str
        What separates a line's token and values.
    encoding : str
    init_unknown_vec : callable
        ``f(shape=vec_len)``: the unknown token's vector where the file has none.
    vocabulary : Vocabulary, optional
        Index this vocabulary's tokens, each with the file's vector (or the unknown one).
    **kwargs
        ``Vocabulary``'s (``unknown_token``, ``reserved_tokens``).
    """

    def __init__(self, pretrained_file_path, elem_delim=" ", encoding="utf8",
                 init_unknown_vec=nd.zeros, vocabulary=None, **kwargs):
        super().__init__(**kwargs)
        self._load_embedding(pretrained_file_path, elem_delim, init_unknown_vec, encoding)
        if vocabulary is not None:
            self._build_embedding_for_vocabulary(vocabulary)


class CompositeEmbedding(_TokenEmbedding):
    """A vocabulary's tokens, each with the concatenated vectors of ``token_embeddings``.

    Parameters
    ----------
    vocabulary : Vocabulary
    token_embeddings : _TokenEmbedding or list of them
    """

    def __init__(self, vocabulary, token_embeddings):
        assert isinstance(vocabulary, vocab.Vocabulary), \
            "The argument `vocabulary` must be an instance of " \
            "mxnet.contrib.text.indexer.Vocabulary."
        if not isinstance(token_embeddings, list):
            token_embeddings = [token_embeddings]
        for embed in token_embeddings:
            assert isinstance(embed, _TokenEmbedding), \
                "The argument `token_embeddings` must be an instance or a list of instances " \
                "of `mxnet.contrib.text.embedding.TextEmbedding`."
        super().__init__()
        self._index_tokens_from_vocabulary(vocabulary)
        self._set_idx_to_vec_by_embeddings(token_embeddings, len(self), self.idx_to_token)
