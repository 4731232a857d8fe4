r"""The shaped exponential mechanism over a miss curve: utility, certificate, parameters.

One release serves quantile calibration (ExponQ's default ``scaling="shaped"``, the
FedCP2-QQ agents, Mondrian groups) and private risk control. Candidates ``j = 1..m`` are
public (grid edges, or values of a risk-control parameter), ordered so that larger
``j`` is more conservative. The data enter through the **miss curve** ``S_j``: a sum
over the records of contributions in ``[0, B]`` that do not increase with ``j``. For a
quantile, ``S_j = #{i : s_i > e_j} = n - C_j`` (``B = 1``), the number of calibration
scores above edge ``e_j``; for risk control, ``S_j = sum_i L_i(lambda_j)``. ``S_0`` is the
largest possible value ``n B``.

**Utility.** With a lower slope ``s_l`` in (0, 1], ``s_h = 1 - s_l`` and a target level
``tau`` of the curve, candidate ``j`` has the penalty

.. math::

   f_j = \max\bigl(s_l (S_j - \tau),\ s_h (\tau - S_{j-1}),\ 0\bigr) / B

and is released with probability proportional to ``exp(-epsilon f_j)``. For a quantile,
with target rank ``k = n - tau`` and ``B_j = C_{j-1}`` the scores strictly below the
discretised edge, ``f_j = max(s_h (B_j - k), s_l (k - C_j), 0)``: zero on the edge that
holds the ``k``-th score, rising by ``s_l`` per missing score below it and by ``s_h``
per extra score above it.

**Privacy (range 1, both adjacencies).** Replacing one record changes every ``S_j`` by
``delta_j = g_j - h_j`` with ``g``, ``h`` non-increasing in ``[0, B]``; for ``j < j'``,
``delta_j - delta_j' = (g_j - g_j') - (h_j - h_j') <= B`` and symmetrically, so all the
``delta_j`` (and ``delta_0 = 0``) lie in one interval ``[c, c + B]``, ``-B <= c <= 0``.
The two terms of the penalty then move within ``s_l [c, c + B] / B`` and
``-s_h [c, c + B] / B``, and a maximum moves between the smallest and the largest
change of its arguments (0 included), so every ``f_j`` moves within an interval of
length ``max(s_l a, s_h b) + max(s_l b, s_h a) <= 1`` (``a = 1 + c / B``, ``b = -c / B``,
``a + b = 1``; each of the four sums is at most 1). Adding or removing a record moves
every ``delta_j`` the same way (``c = 0`` or ``c = -B``): length 1 again. The
range-bounded exponential mechanism (Durfee and Rogers 2019) with range 1 is
therefore ``epsilon``-DP under replace-one and add/remove adjacency, for every ``s_l``,
``tau`` and grid fixed from public quantities. Penalties are computed exactly, as
integers over one denominator (``s_l`` and ``tau`` are rationals).

**Certificate (integrated lower tail).** Let ``G_theta`` bound ``P(S_J > theta)`` over
the mechanism, uniformly over data sets. A candidate with ``S_j > theta`` has
``S_j >= theta + 1`` (integer curves), hence penalty at least
``s_l (theta + 1 - tau) / B``; there are at most ``m - 1`` of them (the last candidate
has ``S_m = 0``), and the first candidate with ``S_j <= tau`` has penalty 0 and is not
one of them when ``theta >= floor(tau)``. So, for ``theta >= floor(tau)``,

.. math::

   G_\theta = \frac{(m-1)\,x}{1 + (m-1)\,x},\qquad
   x = e^{-\epsilon s_l (\theta + 1 - \tau) / B},

attained by the data set with every bad candidate at ``S = theta + 1``; ``G_theta = 1``
below. The layer-cake bound of conformal risk control (Angelopoulos, Bates, Fisch, Lei
and Schuster 2024) integrated against this tail gives, for exchangeable data,

.. math::

   \mathbb E[L_{n+1}(\lambda_J)] \le
   \frac{B + \sum_{\theta \ge 0} G_\theta}{n + 1}
   = \frac{B + \lfloor\tau\rfloor + \Gamma(\varphi)}{n + 1},\qquad
   \Gamma(\varphi) = \sum_{i \ge 0} g(\varphi + i),\
   \varphi = \lfloor\tau\rfloor + 1 - \tau,

with ``g(t) = (m - 1) e^{-a t} / (1 + (m - 1) e^{-a t})``, ``a = epsilon s_l / B``
(proof in the user guide, Conformal risk control). For a quantile (``B = 1``, the
miss-coverage loss) this is ``P(Y in C(X)) >= (n - floor(tau) - Gamma(phi)) / (n + 1)``:
the whole lower tail of the release is charged at its exact worst case, instead of one
union bound at one failure probability. :func:`largest_target` returns the largest
``tau`` (the smallest target rank) meeting a level.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from fractions import Fraction
from functools import lru_cache

import numpy as np

from ..privacy import ExponentialMechanism

__all__ = [
    "LOWER_SLOPES",
    "SHAPE_BIN_GRID",
    "Shape",
    "certified_level",
    "choose_shape",
    "expected_relative_threshold",
    "largest_target",
    "lower_tail_sum",
    "miss_curve",
    "sample_shaped",
    "shaped_curve_log_probabilities",
    "shaped_penalties",
    "target_numerators",
    "upper_coverage_bound",
]

#: Denominator of the target level ``tau``: targets are multiples of 1/64.
TARGET_DENOMINATOR = 64

#: Lower slopes the automatic choice tries: 0.3, 0.4, ..., 1.0 (exact rationals).
LOWER_SLOPES = tuple(Fraction(p, 10) for p in range(3, 11))

#: Grid sizes the automatic choice tries: 2 to 10^6, about 9 per decade.
SHAPE_BIN_GRID = np.unique(
    np.concatenate([[2, 3, 4, 5, 6, 8], np.round(np.geomspace(10, 10**6, 46))]).astype(np.int64)
)

#: Public score configurations of the criterion: scores fill the bottom ``f`` of the
#: range (the rest is empty), for these ``f``, at these grid alignments.
CRITERION_FRACTIONS = (1.0, 0.5, 0.25, 0.125)
CRITERION_OFFSETS = tuple((np.arange(4) + 0.5) / 4)

#: The criterion evaluates larger budgets at this one: penalties are multiples of at
#: least 1/6400, so beyond it every edge but the plateau has probability below e^-156.
_CRITERION_EPSILON_CAP = 1e6

#: Terms of ``Gamma`` summed exactly before the integral bound of the tail.
_EXACT_TERMS = 64


@dataclass(frozen=True)
class Shape:
    """The public parameters of a shaped release.

    Parameters
    ----------
    lower_slope : Fraction
        ``s_l`` in (0, 1].
    target : Fraction
        ``tau``, the curve level of the zero-penalty plateau (for a quantile
        ``n - k``, ``k`` the target rank), a multiple of 1/64.
    n_bins : int
        Number of candidates ``m``.
    bound : int
        ``B``, the largest contribution of one record to the curve.
    """

    lower_slope: Fraction
    target: Fraction
    n_bins: int
    bound: int = 1

    @property
    def upper_slope(self) -> Fraction:
        """``s_h = 1 - s_l``."""
        return 1 - self.lower_slope


def miss_curve(counts: np.ndarray) -> np.ndarray:
    """``S_0, ..., S_m`` of a quantile from bin counts: ``S_j = n - C_j``, ``S_0 = n``."""
    cumulative = np.cumsum(np.asarray(counts, dtype=np.int64))
    return np.concatenate([[cumulative[-1]], cumulative[-1] - cumulative])


def shaped_penalties(curve: np.ndarray, shape: Shape) -> tuple[np.ndarray, int]:
    """Exact penalties ``f_j = a_j / D`` of the candidates, as integers ``a_j`` and ``D``.

    Parameters
    ----------
    curve : ndarray of int of shape (m + 1,)
        ``S_0, S_1, ..., S_m`` (``S_0 = n B``), non-increasing.
    shape : Shape

    Returns
    -------
    numerators : ndarray of int64 of shape (m,)
        ``a_j >= 0``.
    denominator : int
        ``D``; the release draws ``j`` with probability proportional to
        ``exp(-epsilon a_j / D)``.
    """
    # With s_l = a / b and tau = t / T: s_l (S_j - tau) = a (T S_j - t) / (b T) and
    # s_h (tau - S_{j-1}) = (b - a)(t - T S_{j-1}) / (b T).
    a, b = shape.lower_slope.numerator, shape.lower_slope.denominator
    t, big_t = shape.target.numerator, shape.target.denominator
    curve = np.asarray(curve, dtype=np.int64) * big_t
    below = a * (curve[1:] - t)
    above = (b - a) * (t - curve[:-1])
    return np.maximum(np.maximum(below, above), 0), b * big_t * shape.bound


def shaped_curve_log_probabilities(curve: np.ndarray, shape: Shape, epsilon: float) -> np.ndarray:
    """Normalised ``log P(J = j)`` of the shaped release over the curve ``S_0..S_m``.

    The one release behind ExponQ's ``scaling="shaped"`` (``curve = miss_curve(counts)``)
    and private conformal risk control (``curve`` the summed loss curve): the
    range-bounded exponential mechanism with range 1 over the utilities ``-f_j`` of
    :func:`shaped_penalties`. :func:`sample_shaped` draws from it.
    """
    numerators, denominator = shaped_penalties(curve, shape)
    return _shaped_log_probabilities(numerators, denominator, epsilon)


def _shaped_log_probabilities(numerators: np.ndarray, denominator: int, epsilon: float):
    mechanism = ExponentialMechanism(epsilon, 1.0, analysis="range-bounded")
    return mechanism.log_probabilities(-np.asarray(numerators, dtype=np.float64) / denominator)


def sample_shaped(numerators: np.ndarray, denominator: int, epsilon: float, noise) -> int:
    """Draw ``j`` with probability proportional to ``exp(-epsilon a_j / D)``.

    The draw of the shaped release (ExponQ's ``scaling="shaped"``, :class:`ExponCRC
    <privconf_sklearn.mechanisms.ExponCRC>`) from the exact integer penalties of
    :func:`shaped_penalties`: the range-bounded exponential mechanism with range 1 at
    the exact rate ``epsilon`` (a float is an exact dyadic rational), sampled by inverse
    CDF on an exact uniform
    (:meth:`~privconf_sklearn.privacy.ExponentialMechanism.select_penalties`), with no
    ``2**-53`` rounding in the released distribution.

    Parameters
    ----------
    numerators : ndarray of int of shape (m,)
        ``a_j >= 0``, the penalty numerators.
    denominator : int
        ``D > 0``.
    epsilon : float
        Privacy parameter (> 0).
    noise : NoiseSource, None, int, RandomState or Generator
        Source of the privacy noise (:func:`privconf_sklearn._random.check_noise_source`).

    Returns
    -------
    int
        The index ``j`` of the released candidate.
    """
    sampler = ExponentialMechanism(epsilon, 1.0, analysis="range-bounded")
    return sampler.select_penalties(numerators, denominator, noise)


def _tail_terms(t: np.ndarray, rate, n_bins) -> np.ndarray:
    """``g(t) = (m - 1) e^{-a t} / (1 + (m - 1) e^{-a t})`` for ``t >= 0`` (broadcast)."""
    with np.errstate(over="ignore"):  # a huge rate: the terms are 0
        return 1.0 / (1.0 + np.exp(rate * t - np.log(np.maximum(n_bins - 1, 1))))


def lower_tail_sum(phi, rate, n_bins) -> np.ndarray:
    """An upper bound on ``Gamma(phi) = sum_{i >= 0} g(phi + i)`` (rounded up; broadcast).

    The first :data:`_EXACT_TERMS` terms are summed; the rest is bounded by the
    integral of the decreasing ``g`` from the last summed point,
    ``log(1 + (m - 1) e^{-a t}) / a``. The result is nudged up by a relative ``1e-9``
    so that rounding never makes it smaller than the true sum. ``m = 1`` gives 0.
    """
    phi, rate, n_bins = np.broadcast_arrays(
        np.asarray(phi, np.float64), np.asarray(rate, np.float64), np.asarray(n_bins, np.float64)
    )
    points = phi[..., None] + np.arange(_EXACT_TERMS)
    head = _tail_terms(points, rate[..., None], n_bins[..., None]).sum(axis=-1)
    start = phi + (_EXACT_TERMS - 1)
    with np.errstate(over="ignore", under="ignore"):
        tail = np.log1p(np.exp(np.log(np.maximum(n_bins - 1, 1)) - rate * start)) / rate
    total = (head + tail) * (1.0 + 1e-9) + 1e-12
    return np.where(n_bins >= 2, total, 0.0)


def target_numerators(n: int, level: float, epsilon: float, slopes, sizes, bound: int = 1):
    """``64 tau`` of the largest certified target for every ``(s_l, m)``, or -1 (broadcast).

    The certificate of the module docstring: ``(B + floor(tau) + Gamma(phi)) / (n + 1)
    <= level`` (for a quantile, ``level = alpha``), ``phi = floor(tau) + 1 - tau`` in
    (0, 1]. ``room(phi) = (n + 1) level - B - Gamma(phi)`` increases with ``phi``, so the
    largest integer part is ``W = floor(room(1))``, and the largest ``tau`` with that
    integer part takes the smallest ``phi`` (a multiple of 1/64) with
    ``room(phi) >= W``, found by bisection: ``tau = W + 1 - phi``. A smaller integer
    part cannot do better (``tau < W``). -1 marks an unreachable level (``W < 0``). Exact while
    ``64 (n + 1) level < 2^53`` (the numerators are computed in float64); risk control
    keeps ``(n + 1) B <= 2^46`` curve units.
    """
    slopes, sizes = np.broadcast_arrays(
        np.asarray(slopes, dtype=np.float64), np.asarray(sizes, dtype=np.float64)
    )
    rate = epsilon * slopes / bound
    margin = 1e-9 * max(1.0, (n + 1) * level)

    def room(index):
        return (n + 1) * level - bound - lower_tail_sum(index / TARGET_DENOMINATOR, rate, sizes)

    whole = np.floor(room(np.full(slopes.shape, TARGET_DENOMINATOR)) - margin)
    low = np.zeros(slopes.shape, dtype=np.int64)  # index 0 (phi = 0) stands for "fails"
    high = np.full(slopes.shape, TARGET_DENOMINATOR, dtype=np.int64)
    while (high - low > 1).any():
        middle = (low + high) // 2
        meets = room(middle) - margin >= whole
        high = np.where(meets, middle, high)
        low = np.where(meets, low, middle)
    numerators = (whole + 1) * TARGET_DENOMINATOR - high
    return np.where(whole >= 0, numerators, -1).astype(np.int64)


def largest_target(
    n: int, level: float, epsilon: float, lower_slope: Fraction, n_bins: int, bound: int = 1
) -> Fraction | None:
    """The largest ``tau`` (a multiple of 1/64) whose certificate meets ``level``, or None.

    See :func:`target_numerators`.
    """
    numerator = int(target_numerators(n, level, epsilon, float(lower_slope), n_bins, bound))
    return None if numerator < 0 else Fraction(numerator, TARGET_DENOMINATOR)


def certified_level(n: int, epsilon: float, shape: Shape) -> float:
    """``(B + floor(tau) + Gamma(phi)) / (n + 1)``: the certified bound of a shaped release.

    In curve units per record: for risk control ``E[L_{n+1}(lambda_J)]`` is at most
    this (times the loss per curve unit); for a quantile (``B = 1``) the miscoverage.
    Rounded up like :func:`lower_tail_sum`; :func:`target_numerators` keeps it at most
    the level it was given.
    """
    tau = shape.target
    whole = math.floor(tau)
    phi = float(whole + 1 - tau)
    rate = epsilon * float(shape.lower_slope) / shape.bound
    gamma = float(lower_tail_sum(np.array(phi), rate, shape.n_bins))
    return (shape.bound + whole + gamma) / (n + 1)


def upper_coverage_bound(n: int, epsilon: float, shape: Shape) -> float:
    """Coverage upper bound of a quantile release for scores without atoms.

    ``P(Y in C(X)) <= (1 + sum_{r >= 1} H_r) / (n + 1)`` with ``H_r`` bounding
    ``P(B_J >= r)`` (``B_J`` the scores strictly below the released discretised edge):
    1 for ``r <= k`` and ``(m - 1) y / (1 + (m - 1) y)``, ``y = e^{-epsilon s_h (r - k)}``
    above (the candidates with ``B_j >= r`` have penalty at least ``s_h (r - k)``, the
    plateau candidate is not among them). Add ``p_max`` (the largest probability of one
    bin) for scores with atoms. Capped at 1.
    """
    k = n - shape.target
    s_h = float(shape.upper_slope)
    if s_h == 0.0 or shape.n_bins < 2:
        return 1.0
    first = math.floor(k) + 1  # smallest r > k
    extra = lower_tail_sum(np.array(float(first - k)), epsilon * s_h, shape.n_bins)
    return min(1.0, (1.0 + first - 1 + float(extra)) / (n + 1))


# --------------------------------------------------------------------- the criterion
def _geometric(rate, length):
    """``log sum_{t < L} e^{-rate t}`` and the mean ``t`` under those weights."""
    rate, length = np.broadcast_arrays(np.asarray(rate, float), np.asarray(length, float))
    present = length >= 1
    size = np.where(present, length, 1.0)
    magnitude = np.abs(rate)
    small = magnitude * size < 1e-6
    safe = np.where(small, 1.0, magnitude)
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        log_mass = np.log(-np.expm1(-safe * size)) - np.log(-np.expm1(-safe))
        mean = 1.0 / np.expm1(safe) - size / np.expm1(safe * size)
    log_mass = np.where(small, np.log(size) - magnitude * (size - 1) / 2, log_mass)
    mean = np.where(small, (size - 1) / 2 - magnitude * (size * size - 1) / 12, mean)
    rising = rate < 0
    log_mass = np.where(rising, log_mass + magnitude * (size - 1), log_mass)
    mean = np.where(rising, size - 1 - mean, mean)
    return np.where(present, log_mass, -np.inf), np.where(present, mean, 0.0)


def expected_relative_threshold(n, epsilon, lower_slope, n_bins, rank, fraction, offset):
    """Expected released edge over ``fraction``, for idealised scores (closed form).

    ``n`` scores spread evenly over ``[0, f]`` (``f = fraction``; the rest of the range
    is empty), edges at ``(j - 1 + offset) / m`` (``j < m``) and 1, counts taken as the
    continuous ``C_j = n min(e_j / f, 1)``. The penalty is piecewise linear in ``j``
    (falling below the target rank ``k``, zero on the plateau, rising above it, flat
    once every score is below), so each piece is a truncated geometric distribution
    with closed-form mass and mean. All arguments broadcast.
    """
    n, epsilon, s_l, m, k, f, o = np.broadcast_arrays(
        *(
            np.asarray(v, dtype=np.float64)
            for v in (n, epsilon, lower_slope, n_bins, rank, fraction, offset)
        )
    )
    s_h = 1.0 - s_l
    per_bin = n / (m * f)
    lower_end = np.clip(np.ceil(k / per_bin + 1 - o) - 1, 0, m - 1)
    upper_start = np.clip(np.floor(k / per_bin + 2 - o) + 1, lower_end + 1, m)
    full_start = np.clip(np.ceil(m * f + 2 - o), upper_start, m)
    pieces = []
    log_mass, mean = _geometric(-epsilon * s_l * per_bin, lower_end)
    pieces.append((log_mass - epsilon * s_l * (k - per_bin * o), (mean + o) / m))
    log_mass, mean = _geometric(0.0, upper_start - 1 - lower_end)
    pieces.append((log_mass, (lower_end + mean + o) / m))
    log_mass, mean = _geometric(epsilon * s_h * per_bin, full_start - upper_start)
    first_penalty = s_h * (per_bin * (upper_start - 2 + o) - k)
    pieces.append((log_mass - epsilon * first_penalty, (upper_start - 1 + mean + o) / m))
    log_mass, mean = _geometric(0.0, m - full_start)
    pieces.append((log_mass - epsilon * s_h * (n - k), (full_start - 1 + mean + o) / m))
    below_top = np.minimum(per_bin * (m - 2 + o), n)
    pieces.append((-epsilon * np.maximum(s_h * (below_top - k), 0.0), np.ones_like(n)))
    log_weights = np.stack([piece[0] for piece in pieces])
    values = np.stack([piece[1] for piece in pieces])
    weights = np.exp(log_weights - log_weights.max(axis=0))
    return np.sum(weights * values, axis=0) / weights.sum(axis=0) / f


@lru_cache(maxsize=1024)
def choose_shape(
    n: int,
    alpha: float,
    epsilon: float,
    n_bins: int | None = None,
    lower_slope: Fraction | None = None,
    bound: int = 1,
) -> Shape | None:
    """The release's ``(s_l, m, tau)`` from public quantities only (cached).

    For every candidate ``s_l`` (:data:`LOWER_SLOPES`, or the given one) and ``m``
    (:data:`SHAPE_BIN_GRID`, or the given one), :func:`largest_target` gives the
    smallest certified target rank. Among the feasible pairs the criterion picks the
    one with the smallest expected released threshold relative to the scores' range,
    :func:`expected_relative_threshold`, averaged over four public configurations in
    which the scores fill the bottom 100%, 50%, 25% or 12.5% of the public range (the
    rest empty) and over four grid alignments. The configurations with an empty top
    penalise flat utilities and loose grids (the release wanders into the empty top);
    the ones with crowded scores penalise coarse grids. Ties go to the first pair
    (smaller ``s_l``, then smaller ``m``). Returns None if no pair is feasible.

    For risk control (``bound = B > 1`` curve units per record, ``alpha`` the level in
    curve units, ``n_bins`` the public grid's size) the same criterion reads the curve
    in records, ``S_j / B``: the idealised loss curve falls linearly over the first
    fraction ``f`` of the grid, and the target rank is ``n - tau / B``.
    """
    slopes = LOWER_SLOPES if lower_slope is None else (lower_slope,)
    sizes = SHAPE_BIN_GRID if n_bins is None else np.array([n_bins], dtype=np.int64)
    slope_values = np.array([float(slope) for slope in slopes])
    numerators = target_numerators(n, alpha, epsilon, slope_values[:, None], sizes[None, :], bound)
    slope_index, size_index = np.nonzero(numerators >= 0)
    if slope_index.size == 0:
        return None
    ranks = n - numerators[slope_index, size_index] / (TARGET_DENOMINATOR * bound)
    values = expected_relative_threshold(
        n,
        min(epsilon, _CRITERION_EPSILON_CAP),
        slope_values[slope_index][:, None, None],
        sizes[size_index].astype(np.float64)[:, None, None],
        ranks[:, None, None],
        np.array(CRITERION_FRACTIONS)[None, :, None],
        np.array(CRITERION_OFFSETS)[None, None, :],
    ).mean(axis=(1, 2))
    best = int(np.argmin(values))
    return Shape(
        slopes[slope_index[best]],
        Fraction(int(numerators[slope_index[best], size_index[best]]), TARGET_DENOMINATOR),
        int(sizes[size_index[best]]),
        bound,
    )
