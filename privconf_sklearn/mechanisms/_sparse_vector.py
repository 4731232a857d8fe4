r"""AboveThreshold over the cumulative counts of a public grid: DP-APS's default release.

The contract-cards paper's DP-APS ("Contract Cards for Auditable Private Conformal
Prediction", 2026, Sec. 5) adds independent Laplace noise of scale ``B / epsilon`` to
all ``B`` cumulative counts, so its offset grows like ``B log(B)``. Its Sec. 5 notes that
the mechanism "was chosen for transparency rather than efficiency; stronger private
quantile mechanisms could be substituted if they expose comparable contract-facing
quantities". This module is that substitute: the sparse vector technique's
AboveThreshold (Dwork and Roth 2014, Algorithm 1; Lyu, Su and Li 2017 for monotone
queries) releases

.. math::

   \hat b = \min\{b : N_b + \nu_b \ge k + \lambda + \rho\}
   \quad (\text{else } B),

with integer noises ``rho ~ DLap(1 / epsilon_1)`` on the threshold and
``nu_b ~ DLap(1 / epsilon_2)`` on every count (``P(z) proportional to
exp(-epsilon_i |z|)``), ``epsilon_1 + epsilon_2 = epsilon``. The offset ``lambda`` is the
smallest integer whose **exact** worst-case failure probability is at most ``beta``
(:func:`failure_probability`): it grows like ``log(B) / epsilon_2``, not ``B``.

**Privacy (monotone AboveThreshold).** Adding, removing or replacing one score moves
every ``N_b`` by at most one and all in the same direction (a replaced score moving up
lowers the counts between its two positions, and only those). If the counts go up,
shift ``rho`` by +1: the events "``N_j + nu_j < T + rho``" for ``j < b`` stay true, and
"``N_b + nu_b >= T + rho``" needs ``nu_b`` one larger at most; if they go down, keep
``rho``: the "below" events stay true and "``nu_b``" needs at most one more. The density
of ``rho`` changes by ``e^{epsilon_1}`` under the shift, and the discrete Laplace
survival function satisfies ``P(nu >= x + 1) >= e^{-epsilon_2} P(nu >= x)`` for every
integer ``x`` (it is log-concave with limiting ratio ``e^{-epsilon_2}``), so every output
probability changes by a factor at most ``e^{epsilon_1 + epsilon_2} = e^{epsilon}``, in
both directions (the user guide has the full proof). The integers keep the shifts
exact, and the noises are drawn exactly at the exact rational scales ``1 / epsilon_1``
and ``1 / epsilon_2``, with ``epsilon`` the exact rational value of the float given and
``epsilon_1 + epsilon_2 = epsilon`` exactly (:func:`noise_rates`): ``rho`` with
Canonne, Kamath and Steinke (2020), Algorithm 2, and of the ``nu_b`` only what the
release reads, the independent events ``nu_b >= T + rho - N_b`` up to the first that
occurs, as Bernoulli variables whose probabilities are compared bit by bit with uniform
bits (:func:`first_crossing`): the same law, and no floating-point noise. The distribution
functions (offsets, :func:`first_crossing_log_probabilities`) evaluate the exact
formulas in float64 at those rates correctly rounded (:func:`float_rates`).

**Certificate.** A grid point with ``N_b <= k - 1`` crosses only if
``nu_b - rho >= lambda + 1``; at most ``B - 1`` points are below ``k`` (the top has
``N_B = n``), and the worst case puts all of them at ``k - 1``, so

.. math::

   P(N_{\hat b} < k) \le \sum_\rho P(\rho)\,\bigl(1 - F_\nu(\lambda + \rho)^{B-1}\bigr),

computed exactly (sum over ``rho`` with bounded tails). With probability ``1 - beta``
the threshold is therefore at least the grid quantile ``t_{q(k)}``, and coverage is at
least ``k / (n + 1) - beta`` (the paper's Theorem 5.1 form). On the other side the first
grid point with ``N_b >= k + lambda + u`` crosses unless ``nu_b - rho < -u``
(probability at most ``beta``): the release lies in ``[t_{q(k)}, t_{q(k + lambda + u)}]``
with probability at least ``1 - 2 beta`` (Proposition 5.2's certificate interval).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from fractions import Fraction
from functools import lru_cache

import numpy as np
from scipy.signal import fftconvolve
from scipy.special import logsumexp

from .._random import NoiseSource

__all__ = [
    "MIN_BETA",
    "THRESHOLD_SHARES",
    "SparseVectorPlan",
    "choose_plan",
    "discrete_laplace_log_cdf",
    "discrete_laplace_log_pmf",
    "discrete_laplace_log_sf",
    "failure_probability",
    "first_crossing",
    "first_crossing_log_probabilities",
    "float_rates",
    "noise_rates",
    "offsets",
]

#: Shares ``epsilon_1 / epsilon`` of the threshold noise the automatic plan tries (and 0
#: for a grid of two points, where the release is one noisy comparison of ``N_1``).
THRESHOLD_SHARES = tuple(Fraction(p, 10) for p in range(1, 10))

#: Largest number of noise values the exact sums may use; beyond it (budgets so small
#: that the noise spans millions of counts) the offsets come from a conservative closed
#: form and the exact distribution is not computed.
MAX_EXACT_POINTS = 2**21

#: Mass of ``rho`` left outside the summation window (bounded conservatively).
_WINDOW_MASS = 1e-20

#: Smallest ``beta`` the certificate accepts: every failure probability it computes
#: adds :data:`_WINDOW_MASS`, so no offset certifies a smaller ``beta``; twice that mass
#: leaves half of ``beta`` to the noise, and the offset is then at most the union
#: bound's of :func:`_offset_ceiling`.
MIN_BETA = 2 * _WINDOW_MASS


#: The log-probabilities of the noises overflow to ``-inf`` at rates near the largest
#: float (``epsilon`` above about 1e305): the exact limit, a probability of 0 in float64
#: (the true one is below ``e^{-10^305}``), so numpy's overflow warning is silenced.
_OVERFLOW_TO_INFINITY = np.errstate(over="ignore")


# --------------------------------------------------------------- discrete Laplace
def noise_rates(epsilon: float, share: Fraction) -> tuple[Fraction, Fraction]:
    """``(epsilon_1, epsilon_2)``, exactly: ``share epsilon`` and ``(1 - share) epsilon``.

    ``epsilon`` is taken at its exact rational value (a float is a dyadic rational), so
    ``epsilon_1 + epsilon_2 = epsilon`` holds exactly and the noises drawn at the scales
    ``1 / epsilon_1`` and ``1 / epsilon_2`` spend exactly the stated budget.
    """
    exact = Fraction(epsilon)
    return exact * share, exact * (1 - share)


def float_rates(epsilon: float, share: Fraction) -> tuple[float, float]:
    """:func:`noise_rates` correctly rounded to float64, for the distribution functions."""
    rate_threshold, rate_query = noise_rates(epsilon, share)
    return float(rate_threshold), float(rate_query)


def _log_one_minus(log_x):
    """``log(1 - x)`` from ``log x`` (``log x <= 0``), accurately near both ends."""
    log_x = np.asarray(log_x, dtype=np.float64)
    with np.errstate(divide="ignore"):
        return np.where(
            log_x > -math.log(2.0),
            np.log(-np.expm1(np.minimum(log_x, 0.0))),
            np.log1p(-np.exp(log_x)),
        )


def discrete_laplace_log_pmf(z, rate: float) -> np.ndarray:
    """``log P(Z = z)`` for ``P(z) = (1 - t) / (1 + t) t^{|z|}``, ``t = e^{-rate}``."""
    z = np.abs(np.asarray(z, dtype=np.float64))
    return np.log(-np.expm1(-rate)) - np.log1p(math.exp(-rate)) - rate * z


def discrete_laplace_log_cdf(x, rate: float) -> np.ndarray:
    """``log P(Z <= x)`` at integers ``x``: ``t^{-x} / (1 + t)`` below 0, else its complement."""
    x = np.asarray(x, dtype=np.float64)
    log_tail = -rate * np.abs(np.where(x < 0, x, x + 1)) - np.log1p(math.exp(-rate))
    return np.where(x < 0, log_tail, _log_one_minus(log_tail))


def discrete_laplace_log_sf(x, rate: float) -> np.ndarray:
    """``log P(Z >= x)`` at integers ``x`` (by symmetry, ``P(Z <= -x)``)."""
    return discrete_laplace_log_cdf(-np.asarray(x, dtype=np.float64), rate)


def _window(rate: float) -> int:
    """Half-width ``R`` with ``P(|rho| > R) <= _WINDOW_MASS``."""
    return math.ceil(-math.log(_WINDOW_MASS) / rate) + 1


# --------------------------------------------------------------- the certificate
def _rho_grid(rate_threshold: float) -> tuple[np.ndarray, np.ndarray]:
    """Integers ``|rho| <= R`` with ``P(|rho| > R) <= _WINDOW_MASS``, and their log-pmf."""
    if rate_threshold == 0.0:  # no threshold noise (a grid of two points: one query)
        return np.zeros(1, dtype=np.int64), np.zeros(1)
    radius = _window(rate_threshold)
    rho = np.arange(-radius, radius + 1)
    return rho, discrete_laplace_log_pmf(rho, rate_threshold)


def failure_probability(offset, n_bins, rate_threshold: float, rate_query: float):
    """Exact worst case of ``P(N_b_hat < k)``: ``sum_rho P(rho) (1 - F(offset + rho)^{B-1})``.

    The sum runs over ``|rho| <= R`` with ``P(|rho| > R) <= 1e-20``, and that mass is
    added (as if those ``rho`` always failed): the result is an upper bound, exact to
    that mass. ``offset`` and ``n_bins`` broadcast.
    """
    rho, log_pmf = _rho_grid(rate_threshold)
    offset, n_bins = np.broadcast_arrays(np.asarray(offset), np.asarray(n_bins))
    log_miss = (n_bins[..., None] - 1) * discrete_laplace_log_cdf(
        offset[..., None] + rho, rate_query
    )
    log_terms = log_pmf + _log_one_minus(log_miss)
    return np.exp(logsumexp(log_terms, axis=-1)) + _WINDOW_MASS


def _below_probability(offset, rate_threshold: float, rate_query: float):
    """``P(nu - rho <= -offset - 1)``: one grid point fails to cross ``offset`` above it."""
    rho, log_pmf = _rho_grid(rate_threshold)
    offset = np.asarray(offset)
    log_terms = log_pmf + discrete_laplace_log_cdf(rho - offset[..., None] - 1, rate_query)
    return np.exp(logsumexp(log_terms, axis=-1)) + _WINDOW_MASS


def _tail(x, rate: float):
    """``P(Z >= x)`` of ``DLap(1 / rate)`` for integers ``x >= 1``: ``t^x / (1 + t)``."""
    return np.exp(-rate * np.asarray(x, dtype=np.float64) - math.log1p(math.exp(-rate)))


#: An offset above every calibration size the library plans for (10^15 < 2^53): the
#: plan is infeasible whatever its exact value, which floats could no longer resolve.
_UNREACHABLE_OFFSET = 2**53


def _conservative_offset(rate_threshold: float, rate_query: float, count: int, beta: float) -> int:
    """Smallest ``lambda`` with ``count (P(nu >= a) + P(-rho >= lambda + 2 - a)) <= beta``.

    ``nu - rho >= lambda + 1`` needs ``nu >= a`` or ``-rho >= lambda + 2 - a`` (integers),
    so this bounds ``count`` such failures from above, for the split ``a`` that balances
    the two tails. With no threshold noise it is exact: ``count P(nu >= lambda + 1)``.
    Used for the lower offset (``count = B - 1``) and the upper one (``count = 1``) when
    the exact sums would need more than :data:`MAX_EXACT_POINTS` values.
    """
    if rate_threshold == 0.0:
        needed = (math.log(count / beta) - math.log1p(math.exp(-rate_query))) / rate_query
        if needed > _UNREACHABLE_OFFSET:  # beyond any calibration size: no rounding fix
            return math.ceil(needed * (1.0 + 1e-9)) + 1
        value = max(0, math.ceil(needed) - 1)
        while count * float(_tail(value + 1, rate_query)) > beta:
            value += 1
        while value > 0 and count * float(_tail(value, rate_query)) <= beta:
            value -= 1
        return value

    def fails(value: int) -> bool:
        split = rate_threshold / (rate_threshold + rate_query)
        first = max(1, math.ceil((value + 2) * split))
        second = max(1, value + 2 - first)
        bound = _tail(first, rate_query) + _tail(second, rate_threshold)
        return count * float(bound) > beta

    high = 1
    while fails(high):
        high *= 2
        if high > _UNREACHABLE_OFFSET:  # beyond any calibration size (a vanishing budget)
            return high
    low = -1
    while high - low > 1:
        middle = (low + high) // 2
        low, high = (middle, high) if fails(middle) else (low, middle)
    return high


def _exact_is_affordable(
    rate_threshold: float, rate_query: float, n_bins: int, beta: float
) -> bool:
    """Whether the exact sums stay within :data:`MAX_EXACT_POINTS` values."""
    radius = 0 if rate_threshold == 0.0 else _window(rate_threshold)
    span = (math.log(max(n_bins, 2) / beta) + 1) / rate_query + 2 * radius
    return span + 2 * radius < MAX_EXACT_POINTS


def offset_lower_bound(rate_threshold: float, rate_query: float, beta: float) -> float:
    """A lower bound on ``lambda`` for any grid: ``P(rho <= 0) P(nu >= lambda + 1) <= beta``.

    ``P(rho <= 0) >= 1/2``, so ``lambda + 1 >= log(1 / (2 beta (1 + t))) / rate``: a quick
    test that a request is infeasible, before any sum.
    """
    half = 0.5 if rate_threshold > 0 else 1.0
    return (math.log(half / beta) - math.log1p(math.exp(-rate_query))) / rate_query - 1


def _smallest_offsets(rate_threshold: float, rate_query: float, sizes, beta: float):
    """Smallest ``lambda >= 0`` with :func:`failure_probability` at most ``beta``, per size.

    The failure probability of every ``lambda`` at once is a correlation of the
    ``rho`` pmf with ``1 - F(x)^{B-1}`` (``scipy.signal.fftconvolve``); the answer is then
    confirmed with the exact sums at ``lambda`` and ``lambda - 1``, moving by one step
    where rounding of the transform misplaced it.
    """
    rho, log_pmf = _rho_grid(rate_threshold)
    radius = rho[-1]
    span = _offset_ceiling(rate_threshold, rate_query, int(np.max(sizes)), beta)
    x = np.arange(-radius, span + radius + 1)
    log_cdf = discrete_laplace_log_cdf(x, rate_query)
    fails = -np.expm1((np.asarray(sizes)[:, None] - 1) * log_cdf[None, :])
    table = fftconvolve(fails, np.exp(log_pmf)[None, ::-1], mode="valid", axes=1)
    table = table[:, : span + 1] + _WINDOW_MASS
    found = np.argmax(table <= beta, axis=1)
    return np.where((table <= beta).any(axis=1), found, span).astype(np.int64)


def _offset_ceiling(rate_threshold: float, rate_query: float, n_bins: int, beta: float) -> int:
    """An offset with :func:`failure_probability` below ``beta`` on ``n_bins`` points.

    The union bound with ``rho`` pinned at its window edge ``-R``: at this ``lambda``,
    ``(B - 1) P(nu >= lambda + 1 - R) <= (B - 1) e^{-r (lambda + 1 - R)} < beta / e``,
    so the failure probability is below ``beta / e + _WINDOW_MASS < beta`` for
    ``beta >= MIN_BETA``: the smallest offset is never above it.
    """
    radius = 0 if rate_threshold == 0.0 else _window(rate_threshold)
    return math.ceil((math.log(n_bins / beta) + 1) / rate_query) + 2 * radius + 2


def _confirmed(value: int, probability, beta: float, ceiling: int) -> int:
    """The smallest integer with ``probability(.) <= beta``, moving from ``value`` by steps.

    ``ceiling`` (:func:`_offset_ceiling`) bounds the answer, and so the steps up.

    Raises
    ------
    ValueError
        If no integer up to ``ceiling`` has ``probability(.) <= beta`` (a ``beta`` below
        :data:`MIN_BETA`).
    """
    while probability(value) > beta:
        if value >= ceiling:
            raise ValueError(
                f"no offset up to {ceiling} certifies beta = {beta}: beta must be at least "
                f"{MIN_BETA} (the certificate's omitted mass is {_WINDOW_MASS})."
            )
        value += 1
    while value > 0 and probability(value - 1) <= beta:
        value -= 1
    return value


def _upper_offset(rate_threshold: float, rate_query: float, beta: float) -> int:
    """Smallest ``u`` with ``P(nu - rho <= -u - 1) <= beta`` (exact sums, bisection)."""

    def fails(value: int) -> bool:
        return float(_below_probability(value, rate_threshold, rate_query)) > beta

    high = 1
    while fails(high):
        high *= 2
        if high > _UNREACHABLE_OFFSET:  # beyond any calibration size (a vanishing budget)
            return high
    low = -1
    while high - low > 1:
        middle = (low + high) // 2
        low, high = (middle, high) if fails(middle) else (low, middle)
    return high


@_OVERFLOW_TO_INFINITY
def offsets(n_bins: int, epsilon: float, share: Fraction, beta: float) -> tuple[int, int]:
    """``(lambda, u)`` for a grid of ``n_bins`` points: the exact offsets for ``beta``.

    ``lambda`` is the smallest integer with :func:`failure_probability` at most
    ``beta``, ``u`` the smallest with ``P(nu - rho <= -u - 1) <= beta``; both checked
    with the exact sums.
    """
    rate_threshold, rate_query = float_rates(epsilon, share)
    if not _exact_is_affordable(rate_threshold, rate_query, n_bins, beta):
        return (
            _conservative_offset(rate_threshold, rate_query, n_bins - 1, beta),
            _conservative_offset(rate_threshold, rate_query, 1, beta),
        )
    guess = int(_smallest_offsets(rate_threshold, rate_query, np.array([n_bins]), beta)[0])
    lower = _confirmed(
        guess,
        lambda value: float(failure_probability(value, n_bins, rate_threshold, rate_query)),
        beta,
        _offset_ceiling(rate_threshold, rate_query, n_bins, beta),
    )
    return lower, _upper_offset(rate_threshold, rate_query, beta)


@dataclass(frozen=True)
class SparseVectorPlan:
    """The public parameters of an AboveThreshold release.

    Parameters
    ----------
    n_bins : int
        Grid size ``B``.
    threshold_share : Fraction
        ``epsilon_1 / epsilon``, the share of the budget spent on the threshold noise.
    offset : int
        ``lambda``.
    upper_offset : int
        ``u``.
    """

    n_bins: int
    threshold_share: Fraction
    offset: int
    upper_offset: int


#: Grid sizes the automatic plan tries: 2 to 10^6, about 9 per decade.
SPARSE_GRID = np.unique(
    np.concatenate([np.arange(2, 10), np.round(np.geomspace(10, 10**6, 46))]).astype(np.int64)
)


@lru_cache(maxsize=1024)
@_OVERFLOW_TO_INFINITY
def choose_plan(
    n: int, rank: int, epsilon: float, beta: float, n_bins: int | None = None
) -> SparseVectorPlan | None:
    """``B``, the threshold share and the offsets, from public quantities (cached).

    Among the grid sizes (:data:`SPARSE_GRID`, or the given one) and shares
    (:data:`THRESHOLD_SHARES`) with ``k + lambda <= n`` (a count below the top of the
    grid can reach the target), minimise the level certified on scores spread
    uniformly, ``(k + lambda + u) / n + 1 / B`` (the width of Proposition 5.2's
    certificate interval plus one grid cell). The search uses the offsets of a Fourier
    transform; the chosen plan's are recomputed with the exact sums (and, should that
    make it infeasible, the two-point grid, the most lenient plan, is tried). None
    when no plan is feasible.
    """
    if rank > n:
        return None
    sizes = SPARSE_GRID if n_bins is None else np.array([n_bins], dtype=np.int64)
    best, best_level = None, math.inf
    for share in (Fraction(0), *THRESHOLD_SHARES):
        rate_threshold, rate_query = float_rates(epsilon, share)
        candidates = sizes if share > 0 else sizes[sizes == 2]
        if candidates.size == 0 or rank + offset_lower_bound(rate_threshold, rate_query, beta) > n:
            continue  # no grid can be feasible with this share
        if _exact_is_affordable(rate_threshold, rate_query, int(candidates.max()), beta):
            lower = _smallest_offsets(rate_threshold, rate_query, candidates, beta)
            upper = _upper_offset(rate_threshold, rate_query, beta)
        else:
            lower = np.array(
                [_conservative_offset(rate_threshold, rate_query, b - 1, beta) for b in candidates]
            )
            upper = _conservative_offset(rate_threshold, rate_query, 1, beta)
        usable = rank + lower <= n
        levels = np.where(usable, (rank + lower + upper) / n + 1.0 / candidates, np.inf)
        index = int(np.argmin(levels))
        if levels[index] < best_level:
            best_level, best = float(levels[index]), (int(candidates[index]), share)
    fallback = [(2, Fraction(0))] if 2 in sizes.tolist() else []
    for size, share in ([best] if best is not None else []) + fallback:
        lower, upper = offsets(size, epsilon, share, beta)  # exact sums
        if rank + lower <= n:
            return SparseVectorPlan(size, share, lower, upper)
    return None


# --------------------------------------------------------------- the release
def first_crossing(
    counts: np.ndarray, target: int, epsilon: float, share: Fraction, noise: NoiseSource
) -> int:
    """Draw ``b_hat`` (1-based): the first ``N_b + nu_b >= target + rho``, else ``B``.

    ``rho`` is drawn exactly (:meth:`NoiseSource.discrete_laplace
    <privconf_sklearn._random.NoiseSource.discrete_laplace>`) at the exact scale
    ``1 / epsilon_1`` of :func:`noise_rates`. The ``nu_b`` enter only through the
    independent events ``nu_b >= target + rho - N_b`` up to the first that occurs, and
    the top point is released when none of the ``B - 1`` below it crosses: those events
    are drawn exactly at the scale ``1 / epsilon_2``, in order, stopping at the first
    (:meth:`NoiseSource.discrete_laplace_first_crossing
    <privconf_sklearn._random.NoiseSource.discrete_laplace_first_crossing>`), which
    is the same law as drawing every ``nu_b``.
    """
    rate_threshold, rate_query = noise_rates(epsilon, share)
    rho = int(noise.discrete_laplace(1 / rate_threshold, 1)[0]) if rate_threshold > 0 else 0
    return noise.discrete_laplace_first_crossing(1 / rate_query, counts[:-1], target + rho) + 1


@_OVERFLOW_TO_INFINITY
def first_crossing_log_probabilities(
    counts: np.ndarray, target: int, epsilon: float, share: Fraction, *, relative: bool = True
) -> np.ndarray:
    """Exact ``log P(b_hat = b)``, ``b = 1..B``, summed over the threshold noise.

    ``P(b_hat = b) = sum_rho P(rho) prod_{j<b} F(T + rho - N_j - 1)
    (1 - F(T + rho - N_b - 1))`` for ``b < B`` and the remaining mass for ``B``. The sum
    runs over every ``rho`` within ``R`` (``P(|rho| > R) <= 1e-20``) of the values
    ``N_b - T`` where the terms peak, so the omitted mass is below ``1e-20`` times the
    number of grid points, and every term is computed in log space. With
    ``relative=False`` only the ``rho`` of probability above ``1e-20`` are summed: every
    probability is then exact to an absolute ``1e-20`` (enough for forecasts), and the
    cost no longer grows with ``n``.
    """
    counts = np.asarray(counts, dtype=np.int64)
    rate_threshold, rate_query = float_rates(epsilon, share)
    radius = _window(min(rate_threshold, rate_query) if rate_threshold > 0 else rate_query)
    width = 2 * radius + (int(counts.max() - counts.min()) if relative else 0)
    if width * counts.shape[0] > 64 * MAX_EXACT_POINTS:
        raise ValueError(
            f"the exact distribution of this release needs {width} x {counts.shape[0]} terms "
            "(the noise spans too many counts at this epsilon): not computed."
        )
    if rate_threshold == 0.0:  # no threshold noise: rho = 0
        low = high = 0
    elif relative:
        low = int(counts.min()) - target - radius
        high = int(counts.max()) - target + radius
    else:  # absolute accuracy only: the values of rho with probability above 1e-20
        low, high = -radius, radius
    rho = np.arange(low, high + 1)[:, None]
    gaps = target + rho - counts[None, :] - 1  # crossing at b needs nu_b > gaps
    log_below = discrete_laplace_log_cdf(gaps, rate_query)
    log_cross = discrete_laplace_log_sf(gaps + 1, rate_query)
    prefix = np.concatenate([np.zeros((rho.shape[0], 1)), np.cumsum(log_below, axis=1)[:, :-1]], 1)
    log_terms = prefix + log_cross
    log_terms[:, -1] = prefix[:, -1]
    if rate_threshold > 0:
        log_terms += discrete_laplace_log_pmf(rho, rate_threshold)
    return logsumexp(log_terms, axis=0)
