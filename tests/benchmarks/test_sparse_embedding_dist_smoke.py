"""Smoke test: ``benchmarks/sparse_embedding_dist.py`` at tiny sizes on 2 workers: the
row_sparse table sends fewer bytes per step than the dense one."""
from benchmarks import sparse_embedding_dist


def test_sparse_embedding_dist_tiny(capsys):
    res = sparse_embedding_dist.main(["--rows", "5000", "--dim", "8", "--batch", "32",
                                      "--steps", "2", "--dense-steps", "1", "--warmup", "1"])
    sparse, dense = res["sparse"][0]["bytes"], res["dense"][0]["bytes"]
    # dense: the 5000 x 8 float32 table all-reduced whole (and the head's parameters)
    assert dense >= 5000 * 8 * 4
    # row_sparse: at most the 128 ids' rows and ids, the counts and the head
    assert 0 < sparse < 128 * (8 * 4 + 8) + 1000
    assert "RESULT sparse_embedding_dist" in capsys.readouterr().out
