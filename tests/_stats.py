"""Tolerances for statistical tests, derived from exact binomial quantiles.

Each statistical assertion is allowed a false-failure probability of
``FALSE_FAILURE`` = 1e-7; with fewer than 1000 such assertions in the suite the whole
suite fails spuriously with probability below 1e-4 (union bound).
"""

from __future__ import annotations

from scipy.stats import binom

FALSE_FAILURE = 1e-7


def binomial_lower_limit(trials: int, p: float, false_failure: float = FALSE_FAILURE) -> int:
    """Smallest count ``c`` with ``P(Binomial(trials, p) < c) <= false_failure``.

    A test that asserts ``count >= c`` for a count distributed as
    ``Binomial(trials, p')`` with ``p' >= p`` fails with probability at most
    ``false_failure``.
    """
    return int(binom.ppf(false_failure, trials, p))


def binomial_upper_limit(trials: int, p: float, false_failure: float = FALSE_FAILURE) -> int:
    """Largest count ``c`` with ``P(Binomial(trials, p) > c) <= false_failure``.

    A test that asserts ``count <= c`` for a count distributed as
    ``Binomial(trials, p')`` with ``p' <= p`` fails with probability at most
    ``false_failure``.
    """
    return int(binom.isf(false_failure, trials, p))
