"""Statistical checks of random generators, as ``mx.test_utils`` offers them.

mxnet 1.9.1's ``test_random.py`` (and user tests written after it) check a
sampler by bucketing a million draws and running Pearson's chi-square test
against the distribution's probabilities (``verify_generator``), or by
bounding the sample mean and variance (``mean_check``, ``var_check``). The
signatures and return values are mxnet's.

One difference, on purpose: mxnet's ``chi_square_check`` truncates the
expected frequencies to integers and ignores draws that fall in no bucket;
recent SciPy refuses frequencies whose totals disagree. Here the expected
frequencies stay exact, and draws outside every bucket form one more cell
("the rest"), expected with the probability the buckets leave uncovered. A
generator that puts mass where the distribution has none therefore fails
instead of passing unseen. SciPy is needed only for the chi-square p value
(mxnet's tests import it anyway); without it the call says so.
"""
from __future__ import annotations

import numpy as np

__all__ = ["gen_buckets_probs_with_ppf", "mean_check", "var_check", "chi_square_check",
           "verify_generator"]


def gen_buckets_probs_with_ppf(ppf, nbuckets):
    """Equal-probability buckets of a distribution, from its quantile function.

    Parameters
    ----------
    ppf : callable
        The quantile function (inverse cdf): a probability to a value.
    nbuckets : int
        How many buckets; each holds probability ``1 / nbuckets``.

    Returns
    -------
    buckets : list of tuple
        ``(ppf(i / n), ppf((i + 1) / n))`` for each bucket ``i``.
    probs : list of float
        The probability of each bucket.
    """
    if nbuckets <= 0:
        raise ValueError(f"gen_buckets_probs_with_ppf: nbuckets must be positive, got {nbuckets}")
    probs = [1.0 / nbuckets] * nbuckets
    buckets = [(ppf(i / float(nbuckets)), ppf((i + 1) / float(nbuckets)))
               for i in range(nbuckets)]
    return buckets, probs


def mean_check(generator, mu, sigma, nsamples=1000000):
    """Whether the mean of ``generator(nsamples)`` lies within ``mu +- 3 sigma / sqrt(n)``.

    Parameters
    ----------
    generator : callable
        ``generator(n)`` returns ``n`` i.i.d. samples.
    mu, sigma : float
        The distribution's mean and standard deviation.
    nsamples : int

    Returns
    -------
    bool
    """
    mean = np.asarray(generator(nsamples), dtype=np.float64).mean()
    half_width = 3 * sigma / np.sqrt(nsamples)
    return bool(mu - half_width < mean < mu + half_width)


def var_check(generator, sigma, nsamples=1000000):
    """Whether the sample variance lies within ``sigma^2 +- 3 sqrt(2 sigma^4 / (n - 1))``.

    Parameters
    ----------
    generator : callable
        ``generator(n)`` returns ``n`` i.i.d. samples.
    sigma : float
        The distribution's standard deviation.
    nsamples : int

    Returns
    -------
    bool
    """
    var = np.asarray(generator(nsamples), dtype=np.float64).var(ddof=1)
    half_width = 3 * np.sqrt(2 * sigma ** 4 / (nsamples - 1))
    return bool(sigma ** 2 - half_width < var < sigma ** 2 + half_width)


def _observed_counts(samples, buckets):
    """Draws per bucket: ``[low, high)`` ranges for a continuous law, values otherwise.

    The last range also holds its upper edge, so ``[0, 1]`` buckets count a draw of 1.
    """
    samples = np.asarray(samples).ravel()
    if isinstance(buckets[0], (list, tuple)):
        edges = np.asarray(buckets, dtype=np.float64)
        lows, highs = edges[:, 0], edges[:, 1]
        if np.any(lows > highs) or np.any(lows[1:] < highs[:-1]):
            raise ValueError("chi_square_check: buckets must be ascending, non-overlapping "
                             f"(low, high) ranges, got {buckets}")
        values = samples.astype(np.float64)
        ids = np.searchsorted(lows, values, side="right") - 1
        safe = np.clip(ids, 0, len(buckets) - 1)
        inside = (ids >= 0) & ((values < highs[safe]) |
                               ((ids == len(buckets) - 1) & (values == highs[-1])))
        return np.bincount(ids[inside], minlength=len(buckets))
    return np.array([(samples == value).sum() for value in buckets], dtype=np.int64)


def chi_square_check(generator, buckets, probs, nsamples=1000000):
    """Pearson's chi-square test of ``generator(nsamples)`` against bucket probabilities.

    Parameters
    ----------
    generator : callable
        ``generator(n)`` returns ``n`` i.i.d. samples.
    buckets : list
        ``(low, high)`` ranges in ascending order for a continuous distribution, or
        the values a discrete one takes.
    probs : sequence of float
        The probability of each bucket.
    nsamples : int

    Returns
    -------
    p : float
        The test's p value; small when the draws do not follow ``probs``.
    obs_freq : numpy.ndarray
        Draws counted in each bucket.
    expected_freq : numpy.ndarray
        ``nsamples * probs``.
    """
    try:
        from scipy import stats
    except ImportError as err:
        raise ImportError("chi_square_check needs SciPy for the chi-square p value: "
                          "pip install scipy") from err
    if not isinstance(buckets, list) or len(buckets) != len(probs):
        raise ValueError(f"chi_square_check: buckets must be a list as long as probs "
                         f"({len(probs)}), got {buckets!r}")
    samples = np.asarray(generator(nsamples))
    obs = _observed_counts(samples, buckets)
    expected = nsamples * np.asarray(probs, dtype=np.float64)
    rest_obs = samples.size - obs.sum()
    rest_expected = max(samples.size - expected.sum(), 0.0)
    cells_obs, cells_expected = obs, expected
    if rest_obs > 0 or rest_expected > 1e-6 * samples.size:
        if rest_expected == 0:
            return 0.0, obs, expected
        cells_obs = np.append(obs, rest_obs)
        cells_expected = np.append(expected, rest_expected)
    # the totals differ only by the probabilities' rounding: scale it away
    cells_expected = cells_expected * (cells_obs.sum() / cells_expected.sum())
    _, p = stats.chisquare(f_obs=cells_obs, f_exp=cells_expected)
    return float(p), obs, expected


def verify_generator(generator, buckets, probs, nsamples=1000000, nrepeat=5, success_rate=0.2,
                     alpha=0.05):
    """Repeat ``chi_square_check``; fail unless enough repeats have ``p > alpha``.

    Parameters
    ----------
    generator, buckets, probs, nsamples
        As ``chi_square_check``.
    nrepeat : int
        How many independent tests to run.
    success_rate : float
        The share of tests that must pass.
    alpha : float
        The p value below which one test fails.

    Returns
    -------
    list of float
        The p value of each test.

    Raises
    ------
    AssertionError
        With every p value and frequency, when too few tests pass.
    """
    results = [chi_square_check(generator, buckets, probs, nsamples) for _ in range(nrepeat)]
    p_values = [p for p, _, _ in results]
    if (np.array(p_values) > alpha).sum() < nrepeat * success_rate:
        raise AssertionError(
            f"Generator test fails, Chi-square p={p_values}, "
            f"obs_freq={[obs.tolist() for _, obs, _ in results]}, "
            f"expected_freq={[exp.tolist() for _, _, exp in results]}.\n"
            f"buckets={buckets}, probs={list(probs)}")
    return p_values
