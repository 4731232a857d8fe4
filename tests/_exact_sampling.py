"""Helpers for the exact-sampler tests: scripted random words and exact boundaries.

- :class:`ScriptedSource`: a noise source whose words are given (then zeros), so a test
  can place the sampler's uniform ``U`` anywhere, for example just below or above a
  boundary of the inverse CDF, or exactly on it.
- :func:`words_of`: the 64-bit words of the binary expansion of a dyadic ``U``.
- :func:`exponential_boundaries`: the inverse-CDF boundaries ``F_j / Z`` of the
  exponential mechanism, computed independently of the library with :mod:`decimal`.
"""

from __future__ import annotations

import itertools
import math
from decimal import Context, Decimal
from fractions import Fraction

import numpy as np

from privconf_sklearn._random import NoiseSource


class ScriptedSource(NoiseSource):
    """A :class:`NoiseSource` that returns the given words, then zeros; counts the draws."""

    def __init__(self, words):
        super().__init__(np.random.default_rng(0))  # unused: every word is scripted
        self._script = [int(word) for word in words]
        self.words_drawn = 0

    def random_words(self, size: int) -> np.ndarray:
        out = np.zeros(int(size), dtype=np.uint64)
        for i in range(int(size)):
            if self.words_drawn < len(self._script):
                out[i] = self._script[self.words_drawn]
            self.words_drawn += 1
        return out


def words_of(u: Fraction, n_words: int) -> list[int]:
    """The first ``n_words`` 64-bit words of ``u`` in [0, 1) (``floor(u 2^(64 n))``)."""
    value = math.floor(u * 2 ** (64 * n_words))
    return [(value >> (64 * (n_words - 1 - i))) & (2**64 - 1) for i in range(n_words)]


def exponential_boundaries(penalties, denominator, rate, digits: int = 120) -> list[Fraction]:
    """``F_j / Z`` for ``j = 0..m-2``, weights ``exp(-rate a_j / D)``, to ``digits`` digits.

    Returned as Fractions of the Decimal values (relative error about 10^-digits).
    """
    context = Context(prec=digits + 20)
    rate = Fraction(rate) / denominator
    base = min(int(a) for a in penalties)
    weights = [
        context.exp(
            context.divide(
                Decimal(rate.numerator * (int(a) - base)), Decimal(rate.denominator)
            ).copy_negate()
        )
        for a in penalties
    ]
    total = Decimal(0)
    for weight in weights:
        total = context.add(total, weight)
    boundaries, running = [], Decimal(0)
    for weight in weights[:-1]:
        running = context.add(running, weight)
        boundaries.append(Fraction(context.divide(running, total)))
    return boundaries


def exponential_probabilities(penalties, denominator, rate, digits: int = 60) -> np.ndarray:
    """Exact-to-``digits`` probabilities of the exponential mechanism (float64 out)."""
    bounds = [
        Fraction(0),
        *exponential_boundaries(penalties, denominator, rate, digits),
        Fraction(1),
    ]
    return np.array([float(b - a) for a, b in itertools.pairwise(bounds)])
