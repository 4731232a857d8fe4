"""Goodness-of-fit checks with exact tails (no chi-square asymptotics).

- :func:`assert_counts_match`: observed counts of a finite distribution against its
  exact probabilities, one exact two-sided binomial test per cell (each cell's count is
  exactly Binomial(draws, p_j)), Bonferroni-split over the cells.
- :func:`dkw_radius`: the Dvoretzky-Kiefer-Wolfowitz band with Massart's constant,
  ``P(sup |F_n - F| > r) <= 2 exp(-2 n r^2)`` for any continuous ``F``.

Each assertion fails spuriously with probability at most ``FALSE_FAILURE`` (1e-7).
"""

from __future__ import annotations

import math

import numpy as np
from scipy.stats import binom

from ._stats import FALSE_FAILURE


def assert_counts_match(observed, probabilities, false_failure: float = FALSE_FAILURE) -> None:
    """Assert that ``observed`` counts are plausible under ``probabilities``.

    Parameters
    ----------
    observed : array-like of int, shape (k,)
        Counts of each outcome in ``draws = observed.sum()`` independent draws.
    probabilities : array-like of float, shape (k,)
        Exact probabilities of the outcomes (summing to 1).
    false_failure : float
        Probability that the assertion fails although the draws follow
        ``probabilities``: each of the ``2k`` one-sided tails gets
        ``false_failure / (2k)``.
    """
    observed = np.asarray(observed, dtype=np.int64)
    probabilities = np.asarray(probabilities, dtype=np.float64)
    assert observed.shape == probabilities.shape
    assert math.isclose(float(probabilities.sum()), 1.0, rel_tol=1e-9)
    draws = int(observed.sum())
    tail = false_failure / (2 * observed.size)
    impossible = probabilities <= 0.0
    assert not observed[impossible].any(), "an outcome of probability 0 was drawn"
    low = binom.cdf(observed, draws, probabilities)  # P(X <= observed)
    high = binom.sf(observed - 1, draws, probabilities)  # P(X >= observed)
    worst = int(np.argmin(np.minimum(low, high)))
    assert low[worst] > tail and high[worst] > tail, (
        f"cell {worst}: {observed[worst]} of {draws} draws, expected "
        f"{draws * probabilities[worst]:.1f} (tails {low[worst]:.2e}, {high[worst]:.2e})"
    )


def dkw_radius(n: int, false_failure: float = FALSE_FAILURE) -> float:
    """``r`` with ``P(sup_x |F_n(x) - F(x)| > r) <= false_failure`` for ``n`` draws."""
    return math.sqrt(math.log(2.0 / false_failure) / (2.0 * n))


def assert_sample_follows(sample, cdf, false_failure: float = FALSE_FAILURE) -> None:
    """Assert the empirical CDF of ``sample`` lies in the DKW band around ``cdf``."""
    sample = np.sort(np.asarray(sample, dtype=np.float64))
    n = sample.size
    values = cdf(sample)
    upper = np.arange(1, n + 1) / n - values
    lower = values - np.arange(n) / n
    assert max(upper.max(), lower.max()) <= dkw_radius(n, false_failure)
