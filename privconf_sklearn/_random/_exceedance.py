r"""Exact indicators ``1{Z_b >= g_b}`` of independent discrete Laplace noises, lazily.

AboveThreshold (DP-APS's default release) reads its noises ``Z_b`` only through the
events ``Z_b >= g_b`` for integers ``g_b`` known in advance, and only up to the first
that occurs. Those events are independent ``Bernoulli(p(g_b))`` with

.. math::

   p(g) = P(Z \ge g) = \frac{t^g}{1 + t} \ (g \ge 1), \qquad
   p(g) = 1 - p(1 - g) \ (g \le 0), \qquad t = e^{-r},

for ``P(Z = z)`` proportional to ``e^{-r |z|}`` (sum the geometric tail), so they can
be drawn without drawing ``Z_b``.

**The draw.** ``1{U < p}`` for a uniform ``U`` on ``[0, 1)`` is ``Bernoulli(p)``. Its
binary expansion is read lazily and compared with ``p``'s: after ``n`` bits, with
``A = floor(U 2^n)`` (the bits read) and ``D = floor(p 2^n)``, ``A < D`` proves
``U < (A + 1) / 2^n <= D / 2^n <= p`` (a success), ``A > D`` proves
``U >= (D + 1) / 2^n > p`` (a failure), and ``A = D`` reads more bits. ``p`` is
irrational (``t = e^{-r}`` is transcendental for rational ``r > 0`` by the
Lindemann-Weierstrass theorem, and ``p = c`` rational would make ``t`` a root of
``x^g - c x - c`` or of ``(1 - c) x - c``), so ``p 2^n`` is never an integer and the
comparison ends with probability one, after ``8 + 64 k`` bits with probability
``2^{-(8 + 64 (k - 1))}`` at most. The first 8 bits of ``U_b`` are byte ``b`` of the
random words (little-endian order within a word), the next 64 one word per bin still
tied, in the order of the bins, and further words (probability ``2^{-72}`` per bin)
one at a time. Every ``U_b`` is uniform and independent of the others, so the
indicators are independent ``Bernoulli(p(g_b))``: exactly the law of
``1{Z_b >= g_b}``.

**The digits** ``floor(p 2^n)`` are exact integers: interval arithmetic on fixed-point
integers, with rigorous bounds of ``t`` (``_exponential._exp_bounds``, correctly
rounded :mod:`decimal` exponentials widened by one unit), powers by repeated squaring
rounded outward, and the quotient by ``1 + t`` rounded outward; if the two bounds do not
share their floor the precision doubles. For ``g <= 0``,
``floor((1 - q) 2^n) = 2^n - 1 - floor(q 2^n)`` (``q 2^n`` is not an integer): the
digits of ``p(g)`` are the complement of those of ``p(1 - g)``. For ``g >= 1`` with
``r g >= c = ceil(7 n / 10)`` the digits are 0 without any bound of ``t``: ``ln 2 < 0.7``
gives ``c > n ln 2``, so ``p(g) = t^g / (1 + t) < t^g = e^{-r g} <= e^{-c} < 2^{-n}``
and ``floor(p(g) 2^n) = 0`` exactly (the test ``r g >= c`` is on the exact rational
``r``). This is the answer the bounds would give, so the draws are unchanged; it only
spares building ``exp(-r)`` to about ``1.44 r`` bits (a :mod:`decimal` exponential whose
exact fraction has a denominator near ``10^{0.43 r}``: seconds at ``r = 10^7`` and
without end at ``epsilon = 10^300``). The bounds are only computed for ``r < 0.7 n``,
where ``exp(-r) > 2^{-1.01 n}`` is of the size of the precision in use. The first 72
bits of ``p(g)``, ``g >= 1``, are zero beyond the last ``g`` with ``p(g) >= 2^{-72}``
(``G``, about ``50 / r``) and are cached per rate for ``g <= G``.
"""

from __future__ import annotations

from fractions import Fraction
from functools import lru_cache

import numpy as np

from ._bits import BitSource
from ._exponential import _exp_bounds

__all__ = ["exceedances", "first_exceedance"]

#: Bits of ``U_b`` read for every bin (one byte).
LEAD_BITS = 8

#: Bits read per further step (one word).
WORD_BITS = 64

#: Bits of ``p(g)`` held in the cache: the byte and the first word.
_CACHED_BITS = LEAD_BITS + WORD_BITS

_LEAD_MASK = (1 << LEAD_BITS) - 1
_WORD_MASK = (1 << WORD_BITS) - 1

#: Bins drawn at once by :func:`first_exceedance`: the first block, and the largest.
FIRST_BLOCK = 1024
LARGEST_BLOCK = 1 << 16


_cached_exp_bounds = lru_cache(maxsize=64)(_exp_bounds)


def _power_bounds(low: int, high: int, exponent: int, bits: int) -> tuple[int, int]:
    """Fixed-point bounds of ``x^exponent`` from ``low <= x 2^bits <= high``, rounded outward."""
    one = 1 << bits
    power_low = power_high = one
    while exponent:
        if exponent & 1:
            power_low = (power_low * low) >> bits
            power_high = -((-power_high * high) >> bits)
        exponent >>= 1
        if exponent:
            low = (low * low) >> bits
            high = -((-high * high) >> bits)
    return power_low, power_high


def _vanishing_exponent(n_bits: int) -> int:
    """``c = ceil(7 n_bits / 10) > n_bits ln 2`` (``ln 2 < 0.7``): ``e^{-c} < 2^{-n_bits}``."""
    return -(-7 * n_bits // 10)


def tail_digits(rate: Fraction, g: int, n_bits: int) -> int:
    """``floor(p(g) 2^n_bits)`` exactly, for ``p(g) = P(Z >= g)`` and any integer ``g``.

    Parameters
    ----------
    rate : Fraction
        ``r > 0``: ``P(Z = z)`` proportional to ``exp(-r |z|)``.
    g : int
        The threshold.
    n_bits : int
        Number of bits of the expansion.
    """
    if g <= 0:  # 1 - p(1 - g): the complement of its digits (p(1 - g) 2^n is no integer)
        return (1 << n_bits) - 1 - tail_digits(rate, 1 - g, n_bits)
    if rate * g >= _vanishing_exponent(n_bits):  # p(g) < 2^-n_bits: no bound of t needed
        return 0
    bits = n_bits + 192  # fixed per n_bits, so the bounds of t are cached
    while True:
        one = 1 << bits
        t_low, t_high = _cached_exp_bounds(rate, bits)
        power_low, power_high = _power_bounds(t_low, t_high, g, bits)
        low = (power_low << bits) // (one + t_high)
        high = -((-power_high << bits) // (one + t_low))
        shift = bits - n_bits
        if low >> shift == high >> shift:
            return low >> shift
        bits *= 2


class _TailCache:
    """The first 72 bits of ``p(g)``, ``g >= 1``, computed on demand and kept.

    ``last`` is ``G``, the largest ``g`` whose 72 bits are not all zero, and
    ``lead_last`` the largest whose first byte is not zero (``p`` decreases in ``g``).
    """

    def __init__(self, rate: Fraction):
        self.rate = rate
        self.last = self._last_nonzero(_CACHED_BITS)
        self.lead_last = self._last_nonzero(LEAD_BITS)
        self._digits: dict[int, tuple[int, int]] = {}

    def _last_nonzero(self, n_bits: int) -> int:
        """The largest ``g >= 1`` with ``floor(p(g) 2^n_bits) >= 1``, 0 if none."""
        high = 1
        while tail_digits(self.rate, high, n_bits):
            high *= 2
        low = high // 2  # nonzero digits (or 0 when high = 1, below the range)
        while high - low > 1:
            middle = (low + high) // 2
            nonzero = tail_digits(self.rate, middle, n_bits) > 0
            low, high = (middle, high) if nonzero else (low, middle)
        return low

    def digits(self, gaps: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """The byte and the word after it of ``p(gaps)``, as uint8 and uint64.

        For ``g <= 0``, the complement of those of ``p(1 - g)``.
        """
        upper = gaps >= 1
        index = np.where(upper, gaps, 1 - gaps)
        values = np.unique(index[index <= self.last])
        for g in values.tolist():
            if g not in self._digits:
                digits = tail_digits(self.rate, g, _CACHED_BITS)
                self._digits[g] = (digits >> WORD_BITS, digits & _WORD_MASK)
        known = [self._digits[g] for g in values.tolist()] + [(0, 0)]
        position = np.searchsorted(values, np.minimum(index, self.last + 1))
        lead = np.array([pair[0] for pair in known], dtype=np.uint8)[position]
        word = np.array([pair[1] for pair in known], dtype=np.uint64)[position]
        return (
            np.where(upper, lead, np.uint8(_LEAD_MASK) - lead),
            np.where(upper, word, np.uint64(_WORD_MASK) - word),
        )


@lru_cache(maxsize=16)
def _tail_cache(rate: Fraction) -> _TailCache:
    return _TailCache(rate)


def _leading_bytes(source: BitSource, size: int) -> np.ndarray:
    """``size`` uniform bytes: the bytes of ``ceil(size / 8)`` words, little-endian."""
    words = source.random_words(-(-size // 8))
    return words.astype("<u8", copy=False).view(np.uint8)[:size]


def _deep_comparison(source: BitSource, rate: Fraction, g: int) -> bool:
    """``U < p(g)`` when ``U``'s first 72 bits equal ``p(g)``'s: one word at a time."""
    n_bits = _CACHED_BITS
    while True:
        n_bits += WORD_BITS
        digit = tail_digits(rate, g, n_bits) & _WORD_MASK
        word = int(source.random_words(1)[0])
        if word != digit:
            return word < digit


def exceedances(source: BitSource, rate: Fraction, gaps) -> np.ndarray:
    """Independent ``1{Z_b >= gaps[b]}`` for ``Z_b`` with ``P(z)`` proportional to ``e^{-r|z|}``.

    Exactly (module docstring), without drawing the ``Z_b``.

    Parameters
    ----------
    source : BitSource
        The random words.
    rate : Fraction
        ``r > 0``.
    gaps : array-like of int, shape (m,)
        The thresholds ``g_b`` (int64).

    Returns
    -------
    ndarray of shape (m,), dtype bool
    """
    gaps = np.asarray(gaps, dtype=np.int64)
    cache = _tail_cache(rate)
    drawn = _leading_bytes(source, gaps.shape[0])
    if gaps.shape[0] and gaps.min() > cache.lead_last:  # every first byte of p is 0
        result = np.zeros(gaps.shape[0], dtype=bool)
        tied = np.flatnonzero(drawn == 0)
    else:
        lead, _word = cache.digits(gaps)
        result = drawn < lead
        tied = np.flatnonzero(drawn == lead)
    if tied.size:
        _lead, word = cache.digits(gaps[tied])
        drawn_words = source.random_words(tied.size)
        result[tied] = drawn_words < word
        for b in tied[drawn_words == word].tolist():
            result[b] = _deep_comparison(source, rate, int(gaps[b]))
    return result


def first_exceedance(source: BitSource, rate: Fraction, values, level: int) -> int:
    """The first ``b`` with ``values[b] + Z_b >= level`` (independent ``Z_b``), ``m`` if none.

    The indicators of :func:`exceedances` at ``g_b = level - values[b]``, drawn block
    by block in the order of the bins (1024 bins, then doubling up to 65,536), stopping
    at the first block holding a success: the bins after it are never drawn, and the
    index has the law of the first ``b`` with ``Z_b >= g_b``.
    """
    values = np.asarray(values, dtype=np.int64)
    start, size = 0, FIRST_BLOCK
    while start < values.shape[0]:
        block = exceedances(source, rate, level - values[start : start + size])
        if block.any():
            return start + int(np.argmax(block))
        start += size
        size = min(2 * size, LARGEST_BLOCK)
    return int(values.shape[0])
