"""The exact sampler of the sparse vector's crossing events (``_random._exceedance``).

``1{Z >= g}`` for a discrete Laplace ``Z`` is drawn by comparing the bits of a uniform
with the exact binary expansion of ``p(g) = P(Z >= g)``. Checked here: the digits
against an independent :mod:`decimal` computation; the indicators and the first
crossing against the exact probabilities (exact binomial tails, false failure below
1e-7 per assertion); and, with scripted words, every level of the comparison (the
byte, the word after it and the words beyond, for ``g >= 1`` and the complement
``g <= 0``) against the decimal expansion.
"""

from __future__ import annotations

import math
from decimal import Context, Decimal
from fractions import Fraction

import numpy as np
import pytest

from privconf_sklearn._random import NoiseSource, check_noise_source
from privconf_sklearn._random._exceedance import exceedances, tail_digits

from ._exact_sampling import ScriptedSource
from ._exact_tails import assert_counts_match

#: Rates r of P(z) proportional to exp(-r |z|): a float's exact dyadic value times
#: 3/5 (DP-APS's epsilon_2 at epsilon 1.3, share 2/5), a small one and a large one.
RATES = {
    "1.3 x 3/5": Fraction(1.3) * Fraction(3, 5),
    "1/9": Fraction(1, 9),
    "7/2": Fraction(7, 2),
}


def _decimal_digits(rate: Fraction, g: int, n_bits: int) -> int:
    """``floor(P(Z >= g) 2^n_bits)`` from decimal arithmetic (not the library's).

    Every operation goes through one context, 100 digits beyond the expansion and the
    scale of the tail ``P(Z >= g)`` or ``1 - P(Z >= g)`` (``e^{-r |g - 1|}`` at least).
    """
    exponent = rate * abs(g - 1)  # a tail of e^-exponent: 0.43 exponent digits
    context = Context(prec=100 + n_bits // 3 + int(exponent) // 2, Emin=-(10**9))
    rate_decimal = context.divide(Decimal(rate.numerator), Decimal(rate.denominator))
    t = context.exp(rate_decimal.copy_negate())
    tail = context.divide(context.power(t, g if g >= 1 else 1 - g), context.add(1, t))
    p = tail if g >= 1 else context.subtract(1, tail)
    scaled = context.multiply(p, context.power(Decimal(2), n_bits))
    return int(scaled.to_integral_value(rounding="ROUND_FLOOR"))


def _p(rate: Fraction, g: int) -> float:
    t = math.exp(-float(rate))
    return t**g / (1 + t) if g >= 1 else 1 - t ** (1 - g) / (1 + t)


@pytest.mark.parametrize("rate", list(RATES.values()), ids=list(RATES))
def test_digits_are_the_exact_binary_expansion(rate):
    for g in (-300, -7, -1, 0, 1, 2, 9, 60, 400):
        for n_bits in (8, 72, 136, 300):
            assert tail_digits(rate, g, n_bits) == _decimal_digits(rate, g, n_bits), (g, n_bits)


@pytest.mark.parametrize("n_bits", [72, 1032])
@pytest.mark.parametrize("rate", list(RATES.values()), ids=list(RATES))
def test_digits_around_the_vanishing_tail_are_exact(rate, n_bits):
    """Digits known to be 0 once ``r g >= 0.7 n`` (``> n ln 2``) are read without arithmetic.

    Every ``g`` from one with nonzero digits (``p(g) > e^{-r g} / 2 >= 2^-n`` for
    ``r g <= (n - 1) ln 2``) to past that cut matches the decimal expansion, so the cut
    never drops a nonzero digit.
    """
    nonzero = math.floor((n_bits - 1) * math.log(2) / rate)
    cut = math.ceil(Fraction(7 * n_bits, 10) / rate)
    digits = [tail_digits(rate, g, n_bits) for g in range(nonzero, cut + 3)]
    expected = [_decimal_digits(rate, g, n_bits) for g in range(nonzero, cut + 3)]
    assert digits == expected
    assert expected[0] > 0 and expected[-1] == 0


@pytest.mark.parametrize("rate", list(RATES.values()), ids=list(RATES))
def test_indicators_have_the_exact_probabilities(rate):
    """Mixed thresholds around 0 and in the tail; 30,000 independent draws of each."""
    levels = np.array([-6, -2, -1, 0, 1, 2, 3, 8, 30])
    gaps = np.tile(levels, 30_000)
    hits = exceedances(check_noise_source(int(rate * 100)), rate, gaps)
    assert hits.dtype == bool and hits.shape == gaps.shape
    for g in levels:
        successes = int(hits[gaps == g].sum())
        p = _p(rate, int(g))
        assert_counts_match([successes, 30_000 - successes], [p, 1 - p])


def test_indicators_in_the_tail_have_the_exact_probabilities():
    """Every p(g) below 2^-8 (the leading bytes of p are 0): decided by the second level."""
    rate = Fraction(1, 2)
    gaps = np.full(400_000, 12)  # p = 0.0015: about 600 successes
    hits = exceedances(check_noise_source(5), rate, gaps)
    p = _p(rate, 12)
    assert p < 2**-8
    assert_counts_match([int(hits.sum()), int((~hits).sum())], [p, 1 - p])


@pytest.mark.parametrize("scale", [Fraction(5, 3), 0.7, 4])
def test_first_crossing_has_the_exact_law(scale):
    """P(first = b) = prod_{j < b} (1 - p_j) p_b, and P(none) the product of all 1 - p_j."""
    values = np.array([0, 1, 1, 3, 4, 4, 6, 9])
    level = 6
    rate = 1 / Fraction(scale)
    p = np.array([_p(rate, level - int(v)) for v in values])
    survive = np.r_[1.0, np.cumprod(1 - p)]
    probabilities = np.r_[survive[:-1] * p, survive[-1]]
    noise = check_noise_source(int(Fraction(scale) * 10))
    draws = [noise.discrete_laplace_first_crossing(scale, values, level) for _ in range(6000)]
    assert_counts_match(np.bincount(draws, minlength=values.size + 1), probabilities)


class _CountingSource(NoiseSource):
    """A seeded noise source that counts the words it gives."""

    def __init__(self, seed: int):
        super().__init__(np.random.default_rng(seed))
        self.words_drawn = 0

    def random_words(self, size: int) -> np.ndarray:
        self.words_drawn += int(size)
        return super().random_words(size)


def test_first_crossing_spans_blocks_and_stops_at_the_first():
    """Bins that (almost) cannot cross, then (almost) certain ones: blocks of 1024, 2048..."""
    values = np.r_[np.zeros(2500, dtype=np.int64), np.full(500, 10**6 + 50)]
    # p(10^6) < 2^-700000 below, p(-50) > 1 - 1e-11 from bin 2500 on
    draws = [
        _CountingSource(seed).discrete_laplace_first_crossing(2, values, 10**6) for seed in range(5)
    ]
    assert draws == [2500] * 5
    source = _CountingSource(0)
    assert source.discrete_laplace_first_crossing(2, values[:2500], 10**6) == 2500
    # A crossing at bin 100 of 100,000: only the first block (1024 bins) is drawn.
    source = _CountingSource(1)
    far = np.r_[np.zeros(100, dtype=np.int64), np.full(99_900, 10**6 + 50)]
    assert source.discrete_laplace_first_crossing(2, far, 10**6) == 100
    assert 1024 // 8 <= source.words_drawn < 1024 // 8 + 20


def _expected(rate: Fraction, g: int, bits: int, n_bits: int) -> bool:
    """``U < p(g)`` for ``U = bits / 2^n_bits`` exactly (then zero bits)."""
    return bits <= _decimal_digits(rate, g, n_bits)  # p 2^n is not an integer


@pytest.mark.parametrize("g", [-40, -2, 0, 1, 3, 25, 90])
@pytest.mark.parametrize("extra_words", [0, 1, 2])
def test_every_level_of_the_comparison_decides_on_the_exact_side(g, extra_words):
    """``U`` one unit below or above ``p(g)``'s first ``8 + 64 (k + 1)`` bits.

    The first word's low byte is ``U``'s first 8 bits, the next words its next 64 bits
    each; ``U`` below ``p`` is a success, above a failure, decided at the depth where
    the bits first differ (the last one, unless the unit borrows or carries).
    """
    rate = RATES["1.3 x 3/5"]
    n_bits = 8 + 64 * (extra_words + 1)
    exact = _decimal_digits(rate, g, n_bits)
    for offset in (-1, 1):
        bits = exact + offset
        if not 0 <= bits < 2**n_bits:
            continue  # p's bits all 0 (or all 1) to that depth: no U below (above) them
        words = [(bits >> (64 * (extra_words - i))) & (2**64 - 1) for i in range(extra_words + 1)]
        source = ScriptedSource([(bits >> (n_bits - 8)) | (0xAB << 8), *words])
        assert bool(exceedances(source, rate, [g])[0]) is _expected(rate, g, bits, n_bits)
        if bits >> 64 == exact >> 64:  # same bits above the last word: decided there
            assert source.words_drawn == 2 + extra_words


def test_ties_far_in_the_tail_read_further_words():
    """p(400) < 2^-72: its first 72 bits are 0, so U = 0.000... ties until a nonzero word."""
    rate = RATES["1.3 x 3/5"]
    source = ScriptedSource([0, 0, 1])  # U about 2^-136, far above p(400) ~ e^-312
    assert not exceedances(source, rate, [400])[0]
    assert source.words_drawn == 3
    source = ScriptedSource([])  # zeros: U = 0 < p(400), found once p's bits are nonzero
    assert exceedances(source, rate, [400])[0]
    assert source.words_drawn == 2 + math.ceil((312 / math.log(2) - 72) / 64)
