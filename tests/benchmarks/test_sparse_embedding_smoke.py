"""Smoke test: ``benchmarks/sparse_embedding.py`` at tiny sizes runs every configuration
and prints its table (the figures come from full runs, benchmarks/README.md)."""
import torch

from benchmarks import sparse_embedding


def test_sparse_embedding_tiny(capsys):
    threads = torch.get_num_threads()
    try:
        med, mxm = sparse_embedding.main([
            "--rows", "3000", "--small-rows", "100", "--dim", "8", "--batch", "16",
            "--steps", "2", "--warmup", "1", "--rounds", "1", "--threads", "1"])
    finally:
        torch.set_num_threads(threads)      # main sets the count for the whole process
    assert set(med) == {"sparse:3000", "sparse:100", "dense:3000", "dense:100"}
    assert all(v > 0 for v in med.values()) and mxm == {}
    out = capsys.readouterr().out
    assert "sparse 3000 / 100 rows step ratio" in out and "RESULT sparse_embedding" in out


def test_sparse_embedding_updater_beside_a_busy_loop(capsys):
    """The Module's own Updater configuration, with one busy loop beside it."""
    threads = torch.get_num_threads()
    try:
        med, _ = sparse_embedding.main([
            "--rows", "3000", "--small-rows", "100", "--dim", "8", "--batch", "16",
            "--steps", "2", "--warmup", "1", "--rounds", "1", "--threads", "1",
            "--configs", "updater:rows", "--busy", "1"])
    finally:
        torch.set_num_threads(threads)
    assert set(med) == {"updater:3000"} and med["updater:3000"] > 0
    assert "1 busy loop(s) beside both sides" in capsys.readouterr().out
