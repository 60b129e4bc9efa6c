"""``mx.contrib.text`` (``module_api/contrib/text``): token counts, vocabularies and token
embeddings, with the indices, vectors and refusals mxnet 1.9.1 documents and its
test_contrib_text.py pins."""
from __future__ import annotations

import collections

import numpy as np
import pytest

import module_api as mx
from module_api.contrib import text

COUNTER = collections.Counter(["a", "b", "b", "c", "c", "c", "some_word$"])


def _write(path, lines, delim="\t"):
    path.write_text("".join(delim.join(map(str, line)) + "\n" for line in lines))
    return str(path)


def test_count_tokens_with_regular_expression_delimiters():
    src = "*Life*is*great*!*\n*life*is*good*.*\n"
    counts = text.utils.count_tokens_from_str(src, "\\*", "\n", to_lower=True)
    assert counts == collections.Counter({"life": 2, "is": 2, "great": 1, "!": 1, "good": 1,
                                          ".": 1})
    start = collections.Counter({"life": 2})
    same = text.utils.count_tokens_from_str(src, "\\*", "\n", counter_to_update=start)
    assert same is start and start["life"] == 3 and start["Life"] == 1


@pytest.mark.parametrize("kwargs,want", [
    (dict(), {"<unk>": 0, "c": 1, "b": 2, "a": 3, "some_word$": 4}),
    (dict(min_freq=2), {"<unk>": 0, "c": 1, "b": 2}),
    (dict(most_freq_count=3), {"<unk>": 0, "c": 1, "b": 2, "a": 3}),
    (dict(most_freq_count=1, min_freq=2, reserved_tokens=["<pad>", "b"]),
     {"<unk>": 0, "<pad>": 1, "b": 2, "c": 3}),
    (dict(reserved_tokens=["b"]), {"<unk>": 0, "b": 1, "c": 2, "a": 3, "some_word$": 4}),
    (dict(min_freq=2, unknown_token="a", reserved_tokens=["<pad>"]),
     {"a": 0, "<pad>": 1, "c": 2, "b": 3}),
])
def test_vocabulary_order(kwargs, want):
    """Unknown first, reserved next, then by count (ties by token), capped by
    most_freq_count (reserved tokens not counted) and min_freq."""
    v = text.vocab.Vocabulary(COUNTER, **kwargs)
    assert v.token_to_idx == want and len(v) == len(want)
    assert v.idx_to_token == sorted(want, key=want.get)


def test_vocabulary_lookups_and_refusals():
    v = text.vocab.Vocabulary(COUNTER, unknown_token="<unknown>")
    assert v.to_indices("c") == 1 and v.to_indices(["a", "nope", "b"]) == [3, 0, 2]
    assert v.to_tokens(1) == "c" and v.to_tokens([3, 0]) == ["a", "<unknown>"]
    with pytest.raises(ValueError):
        v.to_tokens(5)
    for bad in (dict(min_freq=0), dict(reserved_tokens=["b", "b"]),
                dict(reserved_tokens=["<unk>"])):
        with pytest.raises(AssertionError):
            text.vocab.Vocabulary(COUNTER, **bad)
    pairs = text.vocab.Vocabulary(collections.Counter([("x", 1), ("x", 1), ("y", 2)]),
                                  unknown_token=("<u>", 0))
    assert pairs.token_to_idx == {("<u>", 0): 0, ("x", 1): 1, ("y", 2): 2}


def test_custom_embedding_loads_and_looks_up(tmp_path):
    path = _write(tmp_path / "e.txt", [["a", 0.1, 0.2, 0.3], ["b", 0.6, 0.7, 0.8],
                                       ["a", 9, 9, 9], ["<unk>", 1, 2, 3]])
    with pytest.warns(UserWarning, match="duplicate"):
        e = text.embedding.CustomEmbedding(path, "\t")
    assert e.token_to_idx == {"<unk>": 0, "a": 1, "b": 2} and e.vec_len == 3
    np.testing.assert_allclose(e.idx_to_vec.asnumpy(), [[1, 2, 3], [0.1, 0.2, 0.3],
                                                        [0.6, 0.7, 0.8]], rtol=1e-6)
    np.testing.assert_allclose(e.get_vecs_by_tokens("A", lower_case_backup=True).asnumpy(),
                               [0.1, 0.2, 0.3], rtol=1e-6)
    np.testing.assert_allclose(e.get_vecs_by_tokens(["A", "b"]).asnumpy(),
                               [[1, 2, 3], [0.6, 0.7, 0.8]], rtol=1e-6)
    bad = _write(tmp_path / "bad.txt", [["a", 1, 2], ["b", 1]])
    with pytest.warns(UserWarning, match="header"):      # one number: a header, skipped
        assert len(text.embedding.CustomEmbedding(bad, "\t")) == 2
    with pytest.raises(AssertionError, match="dimension"):
        text.embedding.CustomEmbedding(_write(tmp_path / "b2.txt", [["a", 1, 2],
                                                                    ["b", 1, 2, 3]]), "\t")


def test_embedding_for_a_vocabulary_and_updates(tmp_path):
    path = _write(tmp_path / "e.txt", [["a", 0.1, 0.2], ["b", 0.6, 0.7]])
    v = text.vocab.Vocabulary(COUNTER, reserved_tokens=["<pad>"])
    e = text.embedding.CustomEmbedding(path, "\t", init_unknown_vec=mx.nd.ones, vocabulary=v)
    assert e.idx_to_token == ["<unk>", "<pad>", "c", "b", "a", "some_word$"]
    want = np.ones((6, 2), np.float32)
    want[3], want[4] = [0.6, 0.7], [0.1, 0.2]
    np.testing.assert_allclose(e.idx_to_vec.asnumpy(), want, rtol=1e-6)
    e.update_token_vectors(["a", "b"], mx.nd.array([[2, 2], [3, 3]]))
    e.update_token_vectors("<unk>", mx.nd.array([5, 5]))
    want[3], want[4], want[0] = 3, 2, 5
    np.testing.assert_allclose(e.idx_to_vec.asnumpy(), want)
    with pytest.raises(ValueError, match="unknown"):
        e.update_token_vectors("zzz", mx.nd.array([0, 0]))
    with pytest.raises(AssertionError):
        e.update_token_vectors("<unk>", mx.nd.array([[0, 0], [0, 0]]))


def test_composite_embedding_concatenates(tmp_path):
    one = text.embedding.CustomEmbedding(
        _write(tmp_path / "1.txt", [["a", 0.1, 0.2], ["b", 0.6, 0.7]]), "\t",
        init_unknown_vec=mx.nd.ones)
    two = text.embedding.CustomEmbedding(
        _write(tmp_path / "2.txt", [["a", 0.01, 0.02], ["c", 0.06, 0.07]]), "\t")
    v = text.vocab.Vocabulary(COUNTER, reserved_tokens=["<pad>"])
    ce = text.embedding.CompositeEmbedding(v, [one, two])
    assert ce.vec_len == 4 and ce.idx_to_token == v.idx_to_token
    got = ce.idx_to_vec.asnumpy()
    np.testing.assert_allclose(got[0], [1, 1, 0, 0])               # each one's unknown
    np.testing.assert_allclose(got[v.token_to_idx["c"]], [1, 1, 0.06, 0.07], rtol=1e-6)
    np.testing.assert_allclose(got[v.token_to_idx["a"]], [0.1, 0.2, 0.01, 0.02], rtol=1e-6)


def test_registry_of_embedding_classes(tmp_path):
    @text.embedding.register
    class Mine(text.embedding._TokenEmbedding):
        pretrained_file_name_sha1 = {"mine.vec": "0" * 40}

        def __init__(self, embedding_root=str(tmp_path), **kwargs):
            super().__init__(**kwargs)
            self._load_embedding(Mine._get_pretrained_file(embedding_root, "mine.vec"), " ",
                                 mx.nd.zeros)

    assert text.embedding.get_pretrained_file_names("mine") == ["mine.vec"]
    with pytest.raises(KeyError):
        text.embedding.get_pretrained_file_names("nothing$$")
    with pytest.raises(ValueError, match="downloads nothing"):
        text.embedding.create("mine")
