"""Data the benchmarks share."""
import numpy as np


def make_data(n, dim, classes, seed=0):
    """Overlapping Gaussian blobs: ``n`` rows of ``dim`` features in ``classes`` classes,
    hard enough that accuracy stays informative after a few epochs."""
    rng = np.random.RandomState(seed)
    centers = rng.randn(classes, dim).astype(np.float32) * 0.35
    y = rng.randint(0, classes, n)
    x = centers[y] + rng.randn(n, dim).astype(np.float32)
    return x.astype(np.float32), y.astype(np.float32)
