"""Exact ``Bernoulli(exp(-gamma))`` and discrete Laplace samplers.

Canonne, Kamath and Steinke, "The Discrete Gaussian for Differential Privacy" (NeurIPS
2020), Algorithms 1 and 2, vectorised over a batch of independent draws: every loop of
the algorithms runs for all the batch's pending draws at once, and a draw leaves the
loop exactly where the sequential algorithm would stop. All arithmetic is on integers
(numpy int64 while the values fit, Python ints beyond), and the only randomness is
uniform integers below a bound (:meth:`BitSource.integers_below`), so the distributions are exact.

**Algorithm 1** (``Bernoulli(exp(-gamma))``, ``gamma = n / d``). For ``gamma <= 1``:
draw ``A_k ~ Bernoulli(gamma / k)`` for ``k = 1, 2, ...`` until the first ``A_K = 0``;
output 1 iff ``K`` is odd. Then ``P(K > k) = gamma^k / k!``, so
``P(K odd) = sum_k (-gamma)^k / k! = exp(-gamma)``. Here ``Bernoulli(gamma / k)`` is the
product of independent ``Bernoulli(n / d)`` (a uniform integer below ``d`` is below
``n``) and ``Bernoulli(1 / k)`` (a uniform integer below ``k`` is 0). For
``gamma > 1``: ``floor(gamma)`` independent ``Bernoulli(exp(-1))`` and one
``Bernoulli(exp(-(gamma - floor(gamma))))`` must all be 1 (stopping at the first 0).
Expected uniform integers per draw: at most ``2 e`` for ``gamma <= 1``.

**Algorithm 2** (discrete Laplace of scale ``t / s``). Draw ``U`` uniform in
``[0, t)`` and accept it with probability ``exp(-U / t)`` (Algorithm 1), draw ``V``,
the number of ``Bernoulli(exp(-1))`` successes before the first failure; then
``X = U + t V`` has ``P(X = x)`` proportional to ``exp(-x / t)``, and ``Y = floor(X / s)``
is geometric with ``P(Y = y)`` proportional to ``exp(-y s / t)``. With a fair sign ``B``,
rejecting ``(B = 1, Y = 0)``, ``Z = (1 - 2B) Y`` has ``P(Z = z)`` proportional to
``exp(-|z| s / t)`` (their Proposition 14 and Algorithm 2). Each round accepts with
probability at least ``(1 - e^{-1}) / 2``.
"""

from __future__ import annotations

import numpy as np

from ._bits import BitSource

__all__ = ["bernoulli_exp", "discrete_laplace"]

_INT64_LIMIT = 2**63

#: Batches up to this size run the algorithms draw by draw on Python ints (the numpy
#: loops' fixed cost per round dominates small batches); larger ones are vectorised.
SCALAR_BATCH = 1000

#: Words fetched at a time by the draw-by-draw path.
_WORD_CHUNK = 64


def _compact(values: np.ndarray) -> np.ndarray:
    """Python-int object arrays as int64 when every value fits, else unchanged."""
    if values.dtype != object:
        return values
    if values.size == 0 or (-_INT64_LIMIT <= values.min() and values.max() < _INT64_LIMIT):
        return values.astype(np.int64)
    return values


#: Bits per digit of the power-of-two part of a denominator (int64 with room to spare).
_DIGIT_BITS = 62


class _Ratios:
    """Integers ``n_i`` below ``d = odd 2^shift``, as digits in a mixed radix.

    The radices are ``odd`` then powers of two of at most 62 bits whose product is
    ``2^shift``; the digits of a uniform integer below ``d`` are independent and uniform
    below their radices. Floats make ``d`` a large power of two times a small odd
    number, so every digit is an int64 where ``d`` itself is not.
    """

    def __init__(self, digits: list[np.ndarray], radices: list[int]):
        self.digits = digits
        self.radices = radices

    @classmethod
    def of(cls, numerators: np.ndarray, denominator: int) -> _Ratios:
        """The digits of ``numerators`` (each below ``denominator``)."""
        shift = (denominator & -denominator).bit_length() - 1
        if shift >= 63:
            numerators = numerators.astype(object)
        widths = [_DIGIT_BITS] * (shift // _DIGIT_BITS)
        if shift % _DIGIT_BITS:
            widths.insert(0, shift % _DIGIT_BITS)
        digits, below = [_compact(numerators >> shift)], shift
        for width in widths:
            below -= width
            digits.append(_compact((numerators >> below) & ((1 << width) - 1)))
        return cls(digits, [denominator >> shift] + [1 << width for width in widths])

    @classmethod
    def uniform(cls, source: BitSource, denominator: int, size: int) -> _Ratios:
        """``size`` uniform integers below ``denominator``, digit by digit."""
        radices = cls.of(np.zeros(0, dtype=np.int64), denominator).radices
        return cls([source.integers_below(radix, size) for radix in radices], radices)

    def __len__(self) -> int:
        return self.digits[0].shape[0]

    def take(self, index: np.ndarray) -> _Ratios:
        return _Ratios([digit[index] for digit in self.digits], self.radices)

    def bernoulli(self, source: BitSource) -> np.ndarray:
        """Independent ``Bernoulli(n_i / d)``: a uniform integer below ``d`` is below ``n_i``.

        The uniform integer's digits are drawn from the most significant one, and only
        while they tie with ``n_i``'s.
        """
        less = np.zeros(len(self), dtype=bool)
        tied = np.arange(len(self))
        for digit, radix in zip(self.digits, self.radices, strict=True):
            draw = source.integers_below(radix, tied.size)
            target = digit[tied]
            less[tied[np.asarray(draw < target, dtype=bool)]] = True
            tied = tied[np.asarray(draw == target, dtype=bool)]
            if not tied.size:
                break
        return less

    def values(self, exact: bool) -> np.ndarray:
        """The integers (int64, or Python ints when ``exact``)."""
        value = self.digits[0].astype(object) if exact else self.digits[0]
        for digit, radix in zip(self.digits[1:], self.radices[1:], strict=True):
            value = value * radix + (digit.astype(object) if exact else digit)
        return value


class _WordStream:
    """Uniform integers below a bound, one at a time, from buffered random words."""

    def __init__(self, source: BitSource):
        self._source = source
        self._words: list[int] = []

    def _word(self) -> int:
        if not self._words:
            self._words = self._source.random_words(_WORD_CHUNK).tolist()
        return self._words.pop()

    def below(self, bound: int) -> int:
        """A uniform integer in ``[0, bound)`` (rejection on the top bits of fresh words)."""
        n_bits = (bound - 1).bit_length()
        if n_bits <= 64:
            if n_bits == 0:
                return 0
            shift = 64 - n_bits
            while True:
                value = self._word() >> shift
                if value < bound:
                    return value
        n_words = -(-n_bits // 64)
        while True:
            value = 0
            for _ in range(n_words):
                value = (value << 64) | self._word()
            value >>= 64 * n_words - n_bits
            if value < bound:
                return value

    def bernoulli_exp_at_most_one(self, numerator: int, denominator: int) -> bool:
        """``Bernoulli(exp(-numerator / denominator))`` for a ratio in ``[0, 1]``."""
        k = 1
        while self.below(denominator) < numerator and (k == 1 or self.below(k) == 0):
            k += 1
        return k % 2 == 1

    def bernoulli_exp_minus_one(self) -> bool:
        """``Bernoulli(exp(-1))``: the case ``numerator = denominator`` (``A_1 = 1``)."""
        k = 2
        while self.below(k) == 0:
            k += 1
        return k % 2 == 1

    def bernoulli_exp(self, numerator: int, denominator: int) -> bool:
        """``Bernoulli(exp(-numerator / denominator))`` for any ratio ``>= 0``."""
        whole, fractional = divmod(numerator, denominator)
        for _ in range(whole):
            if not self.bernoulli_exp_minus_one():
                return False
        return self.bernoulli_exp_at_most_one(fractional, denominator)

    def discrete_laplace(self, t: int, s: int) -> int:
        """One draw with ``P(Z = z)`` proportional to ``exp(-|z| s / t)``."""
        while True:
            u = self.below(t)
            if not self.bernoulli_exp_at_most_one(u, t):
                continue
            v = 0
            while self.bernoulli_exp_minus_one():
                v += 1
            y = (u + t * v) // s
            negative = self.below(2) == 1
            if not (negative and y == 0):
                return -y if negative else y


def _bernoulli_exp_at_most_one(source: BitSource, ratios: _Ratios) -> np.ndarray:
    """``Bernoulli(exp(-gamma_i))`` for the ratios ``gamma_i`` in ``[0, 1]`` (Algorithm 1)."""
    result = np.zeros(len(ratios), dtype=bool)
    active = np.arange(len(ratios))
    k = 1
    while active.size:
        keep = ratios.take(active).bernoulli(source)  # Bernoulli(gamma)
        if k > 1:
            kept = np.flatnonzero(keep)
            keep[kept] = source.integers_below(k, kept.size) == 0  # Bernoulli(1 / k)
        result[active[~keep]] = k % 2 == 1
        active = active[keep]
        k += 1
    return result


def _bernoulli_exp_minus_one(source: BitSource, size: int) -> np.ndarray:
    """``size`` independent ``Bernoulli(exp(-1))``."""
    return _bernoulli_exp_at_most_one(source, _Ratios.of(np.ones(size, dtype=np.int64), 1))


def bernoulli_exp(source: BitSource, numerators: np.ndarray, denominator: int) -> np.ndarray:
    """Independent ``Bernoulli(exp(-numerators[i] / denominator))``, exactly (Algorithm 1).

    Parameters
    ----------
    source : BitSource
        The random words.
    numerators : ndarray of shape (n,)
        Non-negative integers (int64 or Python ints).
    denominator : int
        Positive integer.

    Returns
    -------
    ndarray of shape (n,), dtype bool
    """
    if len(numerators) <= SCALAR_BATCH:
        stream = _WordStream(source)
        return np.array([stream.bernoulli_exp(int(n), denominator) for n in numerators], dtype=bool)
    numerators = _compact(np.asarray(numerators))
    if denominator >= _INT64_LIMIT:
        numerators = numerators.astype(object)
    whole = _compact(numerators // denominator)
    fractional = numerators % denominator
    result = np.ones(numerators.shape[0], dtype=bool)
    remaining = whole.copy()
    active = np.flatnonzero(np.asarray(remaining > 0, dtype=bool))
    while active.size:  # floor(gamma) Bernoulli(exp(-1)), stopping at the first 0
        success = _bernoulli_exp_minus_one(source, active.size)
        result[active[~success]] = False
        remaining[active] -= 1
        active = active[success & np.asarray(remaining[active] > 0, dtype=bool)]
    last = np.flatnonzero(result)
    result[last] = _bernoulli_exp_at_most_one(source, _Ratios.of(fractional[last], denominator))
    return result


def _successes_before_failure(source: BitSource, size: int) -> np.ndarray:
    """``V``: the number of ``Bernoulli(exp(-1))`` successes before the first failure."""
    counts = np.zeros(size, dtype=np.int64)
    active = np.arange(size)
    while active.size:
        active = active[_bernoulli_exp_minus_one(source, active.size)]
        counts[active] += 1
    return counts


def _floor_scaled(u: _Ratios, v: np.ndarray, t: int, s: int) -> np.ndarray:
    """``floor((U + t V) / s)``, exactly (int64 when no intermediate can overflow)."""
    if s < _INT64_LIMIT and t * (int(v.max(initial=0)) + 1) < _INT64_LIMIT:
        return (u.values(exact=False) + t * v) // s
    return _compact((u.values(exact=True) + t * v.astype(object)) // s)


def discrete_laplace(source: BitSource, t: int, s: int, size: int) -> np.ndarray:
    """``size`` independent draws with ``P(Z = z)`` proportional to ``exp(-|z| s / t)``.

    Algorithm 2 of Canonne, Kamath and Steinke (2020), scale ``t / s`` (positive
    integers of any size).

    Returns
    -------
    ndarray of shape (size,)
        int64, or an object array of Python ints if a draw does not fit in int64.
    """
    if size <= SCALAR_BATCH:
        stream = _WordStream(source)
        return _compact(
            np.array([stream.discrete_laplace(t, s) for _ in range(size)], dtype=object)
        )
    out = np.zeros(size, dtype=np.int64)
    pending = np.arange(size)
    while pending.size:
        u = _Ratios.uniform(source, t, pending.size)
        accepted = _bernoulli_exp_at_most_one(source, u)  # Bernoulli(exp(-U / t))
        rejected, pending, u = pending[~accepted], pending[accepted], u.take(accepted)
        v = _successes_before_failure(source, pending.size)
        y = _floor_scaled(u, v, t, s)
        negative = source.integers_below(2, pending.size) == 1
        keep = ~(negative & np.asarray(y == 0, dtype=bool))
        z = _compact(np.where(negative, -y, y)[keep])
        if z.dtype == object and out.dtype != object:
            out = out.astype(object)
        out[pending[keep]] = z
        pending = np.concatenate([rejected, pending[~keep]])
    return out
