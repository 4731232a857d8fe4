"""Exact sampling of the exponential mechanism: inverse CDF with lazily refined precision.

Candidate ``j`` has weight ``w_j = exp(-r d_j)``, ``d_j = a_j - min(a)``, for integer
penalties ``a_j`` and an exact rational ``r = rate / D``. With ``F_j = w_0 + ... + w_j``
and ``Z = F_{m-1}``, the draw is the ``j`` with ``F_{j-1} <= U Z < F_j`` for a uniform
``U`` on [0, 1) whose binary expansion is the random words, in order, read lazily:
after ``k`` bits ``U`` is known to lie in ``[A / 2^k, (A + 1) / 2^k)``. An index is
returned only once that interval lies, provably, between the boundaries ``F_{j-1} / Z``
and ``F_j / Z``. This is the inverse-CDF rule applied to an exact uniform, so ``j`` has
probability exactly ``w_j / Z``: no ``2**-53`` rounding enters the distribution.

**Float pass** (almost always the only one). The first word gives ``U`` to 53 bits.
Weights are ``exp(-x_j)`` in float64 with ``x_j = fl(fl(d_j / D) fl(rate))``, within
``6 u x_j`` of ``r d_j`` (``u = 2**-53``: at most five correctly rounded operations on
normal numbers; the pass is skipped when a factor is subnormal or overflows). For
``x_j <= 700`` the weight is then within a relative ``2**-40`` (numpy's ``exp`` is
assumed accurate to ``2**-44``, 2^9 times its documented error of a few ulp); beyond,
both the weight and its float are below ``2**-1000``. Recursive summation adds at most
``gamma_m = m u / (1 - m u)`` relatively (Higham 2002, Eq. (4.4)), and the candidate of
smallest penalty has weight exactly 1, so ``Z >= 1`` and every prefix sum satisfies
``|fl(F_j) - F_j| <= E = 1.02 (2**-40 + 1.02 m u + 2**-900) fl(Z)``. The draw is decided
when the interval of ``U Z`` clears both neighbouring boundaries by that margin (plus
``8 u fl(Z)`` for the rounding of the comparison itself), that is except with
probability at most ``2 (2 E / Z + 2**-53)``: about ``2**-37`` for small ``m``,
``5 m 2**-53`` for large ``m`` (``6e-10`` at ``m = 10^6``).

**Refinement** (otherwise). At precision ``p`` (96 bits, then doubled), weights with
``r d_j >= ceil((p + 8 + log2 m) ln 2) + 1`` are bounded by ``[0, 2**-(p + 8 + log2 m)]``;
the others get integer fixed-point bounds ``[lo_j, hi_j] / 2^F``: ``exp(-r)`` from
:meth:`decimal.Context.exp` (correctly rounded to nearest, then widened by one unit in
the last place) and ``exp(-r d)`` by repeated squaring and multiplication, rounded down
for the lower and up for the upper bounds, along the sorted distinct ``d``. Prefix sums
of these integers bound every ``F_j`` and every ``Z - F_j``, and ``U`` gets whole words
up to ``p + 64`` bits. A boundary ``L / (L + R)`` is then compared with ``U`` in
integers: ``(A + 1) R_hi <= (2^k - A - 1) L_lo`` proves ``U < L / (L + R)`` and
``A R_lo >= (2^k - A) L_hi`` proves ``U >= L / (L + R)``, in a binary search over the
boundaries; if neither holds near ``U``, the precision doubles. The bounds' width is at
most ``2**-(p + 8)`` relative to ``Z``, so a level fails with probability about
``2**-(p - 2)``: the expected number of refinements per draw is the float pass's
failure probability times ``1 + 2**-94``. Each refinement costs ``O(m)`` integer
operations (a fraction of a second at ``m = 10^6``).

Random bits per draw: 64 (one word), plus, in a refinement, whole words up to
``p + 64`` bits at the last precision reached.
"""

from __future__ import annotations

import math
import numbers
import sys
from decimal import (
    MAX_EMAX,
    MIN_EMIN,
    ROUND_CEILING,
    ROUND_FLOOR,
    ROUND_HALF_EVEN,
    Context,
    Decimal,
)
from fractions import Fraction

import numpy as np

from ._bits import BitSource

__all__ = ["check_penalties", "sample_exponential_mechanism"]

#: Unit roundoff of float64.
_UNIT = 2.0**-53

#: Relative error of a float64 weight, from its exponent and numpy's exp (module docstring).
_WEIGHT_ERROR = 2.0**-40

#: First precision of the refinement, in bits.
_FIRST_PRECISION = 96

_INT64_LIMIT = 2**63


def check_penalties(penalties) -> np.ndarray:
    """The penalties as a one-dimensional array of non-negative integers.

    Returns int64 when every value fits, else an object array of Python ints.

    Raises
    ------
    ValueError
        If ``penalties`` is empty, not one-dimensional, or holds anything but
        non-negative integers (bools and floats included).
    """
    values = np.asarray(penalties)
    message = "penalties must be a non-empty one-dimensional array of non-negative integers"
    if values.ndim != 1 or values.size == 0:
        raise ValueError(f"{message}; got shape {values.shape}.")
    if values.dtype.kind in "iu":
        if values.dtype.kind == "i" and values.min() < 0:
            raise ValueError(f"{message}; got {values.min()}.")
        if values.dtype.kind == "u" and values.max() >= _INT64_LIMIT:
            return values.astype(object)
        return values.astype(np.int64, copy=False)
    if values.dtype != object:
        raise ValueError(f"{message}; got dtype {values.dtype}.")
    return _python_integers(values, message)


def _python_integers(values: np.ndarray, message: str) -> np.ndarray:
    """An object array of non-negative integers as Python ints (int64 when they fit)."""
    for value in values:
        if not isinstance(value, numbers.Integral) or isinstance(value, bool) or value < 0:
            raise ValueError(f"{message}; got {value!r}.")
    values = np.array([int(value) for value in values], dtype=object)
    return values.astype(np.int64) if values.max() < _INT64_LIMIT else values


def sample_exponential_mechanism(
    source: BitSource, penalties, denominator: int, rate: Fraction
) -> int:
    """Index ``j`` with probability exactly proportional to ``exp(-rate a_j / D)``.

    Parameters
    ----------
    source : BitSource
        The random words.
    penalties : array-like of shape (m,)
        Non-negative integers ``a_j``.
    denominator : int
        ``D >= 1``.
    rate : Fraction
        ``> 0``.

    Returns
    -------
    int
    """
    values = check_penalties(penalties)
    offsets = values - values.min()
    word = int(source.random_words(1)[0])
    index = _float_pass(offsets, denominator, rate, word)
    return _refined(source, offsets, rate / denominator, word) if index is None else index


# ------------------------------------------------------------------ float pass
def _to_float(value: int | Fraction) -> float:
    """Correctly rounded float of an int or Fraction; inf when it overflows."""
    try:
        return float(value)
    except OverflowError:
        return math.inf


def _quotient(numerator: int, denominator: int) -> float:
    """``numerator / denominator`` correctly rounded; inf when it overflows."""
    try:
        return numerator / denominator
    except OverflowError:
        return math.inf


def _exponents(offsets: np.ndarray, denominator: int, rate: Fraction) -> np.ndarray | None:
    """``x_j = fl(fl(d_j / D) fl(rate))``, each within ``6 u x_j`` of ``r d_j``.

    None when no such relative bound holds: ``rate`` or a quotient ``d_j / D`` outside
    the normal range (only possible for huge denominators or penalties).
    """
    rate_float = _to_float(rate)
    if rate_float < sys.float_info.min:
        return None
    if offsets.dtype != object and denominator < 2**1022:  # d / D >= 1 / D is normal
        exponents = offsets.astype(np.float64)
        if denominator > 1:
            exponents /= float(denominator)
    else:
        exponents = np.array([_quotient(int(d), denominator) for d in offsets])
        positive = exponents[exponents > 0.0]
        if positive.size and not sys.float_info.min <= positive.min() <= positive.max() < math.inf:
            return None
    if math.isinf(rate_float):  # r d_j is beyond the float range for every d_j >= 1
        return np.where(exponents > 0.0, math.inf, 0.0)
    with np.errstate(over="ignore"):  # an overflow to inf is a weight of 0: still exact
        exponents *= rate_float
    return exponents


def _float_pass(offsets: np.ndarray, denominator: int, rate: Fraction, word: int) -> int | None:
    """The draw from one word and float64 weights, or None if not provably decided."""
    m = offsets.shape[0]
    if m == 1:
        return 0
    exponents = _exponents(offsets, denominator, rate)
    if exponents is None:
        return None
    np.negative(exponents, out=exponents)
    np.exp(exponents, out=exponents)
    cumulative = np.cumsum(exponents, out=exponents)
    total = float(cumulative[-1])
    error = 1.02 * (_WEIGHT_ERROR + 1.02 * m * _UNIT + 2.0**-900) * total
    margin = error + 8.0 * _UNIT * total
    top = word >> 11
    low = top * _UNIT * total - margin
    high = (top + 1) * _UNIT * total + margin
    index = int(np.searchsorted(cumulative, low, side="right"))
    if index > 0 and not cumulative[index - 1] + margin <= low:
        return None
    if index < m - 1 and not high + margin <= cumulative[index]:
        return None
    return index


# ------------------------------------------------------------------ refinement
def _refined(source: BitSource, offsets: np.ndarray, rate: Fraction, word: int) -> int:
    """The draw by exact integer comparisons at doubling precision (rarely reached)."""
    numerator, n_bits = word, 64
    precision = _FIRST_PRECISION
    while True:
        extra = -(-(precision + 64 - n_bits) // 64)  # U's next words, in order
        if extra > 0:
            numerator = (numerator << (64 * extra)) | source.random_bits(64 * extra)
            n_bits += 64 * extra
        low, high = _prefix_bounds(offsets, rate, precision)
        index = _search(low, high, numerator, n_bits)
        if index is not None:
            return index
        precision *= 2


def _scaled_floor(value: Decimal, bits: int) -> int:
    numerator, denominator = value.as_integer_ratio()
    return (numerator << bits) // denominator


def _scaled_ceil(value: Decimal, bits: int) -> int:
    numerator, denominator = value.as_integer_ratio()
    return -((-numerator << bits) // denominator)


def _exp_bounds(rate: Fraction, bits: int) -> tuple[int, int]:
    """Integers ``lo <= exp(-rate) 2^bits <= hi`` (``hi <= 2^bits``)."""
    digits = math.ceil(bits * 0.30103) + 12
    nearest = Context(prec=digits, rounding=ROUND_HALF_EVEN, Emin=MIN_EMIN, Emax=MAX_EMAX)
    down = Context(prec=digits, rounding=ROUND_FLOOR, Emin=MIN_EMIN, Emax=MAX_EMAX)
    up = Context(prec=digits, rounding=ROUND_CEILING, Emin=MIN_EMIN, Emax=MAX_EMAX)
    numerator, denominator = Decimal(rate.numerator), Decimal(rate.denominator)
    rate_low = down.divide(numerator, denominator)
    rate_high = up.divide(numerator, denominator)
    # exp is correctly rounded to nearest: one step outward bounds the exact value.
    upper = nearest.next_plus(nearest.exp(rate_low.copy_negate()))
    lower = nearest.next_minus(nearest.exp(rate_high.copy_negate()))
    return max(_scaled_floor(lower, bits), 0), min(_scaled_ceil(upper, bits), 1 << bits)


def _power_bounds(values: list[int], rate: Fraction, bits: int) -> tuple[list[int], list[int]]:
    """Fixed-point bounds of ``exp(-rate v)`` for sorted distinct ``values`` (from 0).

    Products rounded down (lower bounds) and up (upper bounds) keep every bound valid;
    consecutive values are reached by multiplying by ``exp(-rate (v' - v))``, itself by
    repeated squaring of the bounds of ``exp(-rate)``.
    """
    one = 1 << bits
    base = _exp_bounds(rate, bits) if len(values) > 1 else (one, one)
    steps: dict[int, tuple[int, int]] = {}

    def power(exponent: int) -> tuple[int, int]:
        if exponent not in steps:
            low = high = one
            square_low, square_high = base
            remaining = exponent
            while remaining:
                if remaining & 1:
                    low = (low * square_low) >> bits
                    high = -((-high * square_high) >> bits)
                remaining >>= 1
                if remaining:
                    square_low = (square_low * square_low) >> bits
                    square_high = -((-square_high * square_high) >> bits)
            steps[exponent] = (low, high)
        return steps[exponent]

    lows, highs = [], []
    previous, low, high = 0, one, one
    for value in values:
        if value != previous:
            step_low, step_high = power(value - previous)
            low = (low * step_low) >> bits
            high = -((-high * step_high) >> bits)
            previous = value
        lows.append(low)
        highs.append(high)
    return lows, highs


def _prefix_bounds(offsets: np.ndarray, rate: Fraction, precision: int):
    """Integer bounds ``low[j] <= F_j 2^F <= high[j]`` (object arrays), width ``2**-p`` of Z."""
    m = offsets.shape[0]
    guard = precision + 8 + m.bit_length()
    cut_exponent = math.ceil(guard * math.log(2.0)) + 1  # exp(-cut_exponent) < 2**-guard
    cut = math.ceil(Fraction(cut_exponent) / rate)  # r d >= cut_exponent for d >= cut
    if offsets.dtype != object and cut >= _INT64_LIMIT:
        band = np.ones(m, dtype=bool)
    else:
        band = np.asarray(offsets < cut, dtype=bool)
    values = np.unique(offsets[band])  # sorted; holds 0
    distinct = [int(value) for value in values]
    bits = guard + (4 * distinct[-1] + len(distinct) + 8).bit_length() + 2
    lows, highs = _power_bounds(distinct, rate, bits)
    position = np.searchsorted(values, offsets[band])
    low = np.zeros(m, dtype=object)
    high = np.full(m, 1 << (bits - guard), dtype=object)  # the tail's bound 2**-guard
    low[band] = np.array(lows, dtype=object)[position]
    high[band] = np.array(highs, dtype=object)[position]
    return np.cumsum(low), np.cumsum(high)


def _search(low: np.ndarray, high: np.ndarray, numerator: int, n_bits: int) -> int | None:
    """Smallest ``j`` with ``U < F_j / Z`` (``m - 1`` if none), or None if undecided.

    ``U`` lies in ``[A / 2^k, (A + 1) / 2^k)`` with ``A = numerator``, ``k = n_bits``.
    """
    scale = 1 << n_bits
    total_low, total_high = low[-1], high[-1]
    first, last = 0, low.shape[0] - 1
    while first < last:
        middle = (first + last) // 2
        left_low, left_high = low[middle], high[middle]
        right_low, right_high = total_low - left_low, total_high - left_high
        if (numerator + 1) * right_high <= (scale - numerator - 1) * left_low:
            last = middle  # U < F_middle / Z
        elif numerator * right_low >= (scale - numerator) * left_high:
            first = middle + 1  # U >= F_middle / Z
        else:
            return None
    return first
