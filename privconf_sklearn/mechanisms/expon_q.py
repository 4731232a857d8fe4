"""ExponQ: the exponential-mechanism private quantile of Angelopoulos et al. 2022.

Angelopoulos, Bates, Zrnic and Jordan, "Private Prediction Sets" (2022), Algorithms 2-3,
Lemma 1, Theorems 2-3 and Appendix C. The quantile's utility is handed to
:class:`~privconf_sklearn.privacy.ExponentialMechanism` with one of three analyses
(``scaling``):

- ``"tight"`` (default): exponent ``epsilon max((1 - q) b_j, q a_j)``, a range-bounded
  exponential mechanism (every utility change of a neighbouring pair lies in an interval
  of length 1), epsilon-DP under replace-one and add/remove adjacency; its Lemma 1 slack
  is ``log(m / (gamma alpha)) / (epsilon n q)`` (:func:`inflated_level`);
- ``"paper"``: ``exp(-epsilon w_j / (2 Delta_q))`` with the sensitivity
  ``Delta_q = max(1/q, 1/(1 - q))`` of ``w_j = max(b_j / q, a_j / (1 - q))``, the
  scaling the paper's Lemma 1 and Theorem 2 use (its printed Algorithm 2 omits
  ``Delta_q``);
- ``"monotone"``: ``exp(-epsilon w_j / Delta_q)``, epsilon-DP under add/remove only.

``b_j`` and ``a_j`` are the strict counts of discretised scores below and above edge
``e_j``. An unreachable level (``q~ >= 1``) returns the top of the range without reading
the data; the number of bins ``m*`` and ``gamma*`` are chosen deterministically from the
public ``(n, epsilon, alpha)``; Theorem 3's upper bound is reported as its proof gives it
(:func:`coverage_upper_bound`). The level is rounded up to a multiple of ``2**-30``
(:func:`exact_level`) and the edge is drawn exactly from integer penalties
(:func:`sample_quantile_edge`). The user guide has the proofs.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from fractions import Fraction
from functools import lru_cache
from numbers import Integral, Real

import numpy as np
from scipy.special import expit

from .._param_validation import Interval, StrOptions, check_alpha
from .._random import NoiseSource
from ..privacy import ExponentialMechanism, PrivacyGuarantee
from ._base import (
    Calibration,
    CoverageCertificate,
    QuantileMechanism,
    infeasible_calibration,
)
from ._binning import bin_counts
from ._grids import LogGrid
from ._shaped import (
    LOWER_SLOPES,
    Shape,
    choose_shape,
    miss_curve,
    sample_shaped,
    shaped_curve_log_probabilities,
    shaped_penalties,
    target_numerators,
    upper_coverage_bound,
)
from ._statistics import ScoreArray, ScoreStatistics

__all__ = [
    "AUTO_BIN_GRID",
    "LEVEL_BITS",
    "MAX_BINS",
    "SCALINGS",
    "ExponQ",
    "ExponQParameters",
    "bin_counts",
    "coverage_upper_bound",
    "exact_level",
    "expected_uniform_coverage",
    "exponq_parameters",
    "inflated_level",
    "optimal_gamma",
    "quantile_exponential_mechanism",
    "quantile_log_probabilities",
    "quantile_penalties",
    "quantile_utilities",
    "sample_quantile_edge",
    "shaped_log_probabilities",
]

#: Largest number of bins accepted (and tried by ``n_bins="auto"``): ``10^6`` edges cost
#: a few megabytes per calibration; beyond it ``log(m)`` only inflates ``q~``.
MAX_BINS = 10**6

#: Candidate numbers of bins for ``n_bins="auto"``: 61 values log-spaced in [10, 10^6]
#: (Angelopoulos et al. 2022, Appendix C, use 50 values in [10^2, 10^6]).
AUTO_BIN_GRID = np.unique(np.round(np.geomspace(10, MAX_BINS, 61)).astype(np.int64))

#: Utility scalings of the exponential-mechanism quantile, the default first.
SCALINGS = ("shaped", "tight", "paper", "monotone")

#: Neighbouring relations each scaling is epsilon-DP under.
_ADJACENCY = {
    "shaped": "replace-one and add/remove",
    "tight": "replace-one and add/remove",
    "paper": "replace-one and add/remove",
    "monotone": "add/remove",
}

#: Factor ``c`` of the paper's slack ``c Delta_q log(m / (gamma alpha)) / epsilon``.
_PAPER_FACTOR = {"paper": 2.0, "monotone": 1.0}

#: ``gamma`` is searched in ``[GAMMA_FLOOR, 1 - GAMMA_FLOOR]``.
_GAMMA_FLOOR = 1e-12


# ------------------------------------------------------------------ the mechanism
def quantile_exponential_mechanism(q: float, epsilon: float, scaling: str) -> ExponentialMechanism:
    """The exponential mechanism behind ExponQ at level ``q``, for a ``scaling``.

    - ``"tight"``: utility ``u_j = -max((1 - q) b_j, q a_j)``, range-bounded analysis
      with range 1. One score added at edge ``e_t`` raises ``b_j`` (``j > t``) or
      ``a_j`` (``j < t``) by one: every utility falls by at most ``max(q, 1 - q)``.
      One score moved from ``e_t`` up to ``e_t'`` lowers ``b_j`` and raises ``a_j`` for
      ``t < j <= t'`` (one or both): every change lies in ``[-q, 1 - q]``. Either way
      the changes fit in an interval of length 1.
    - ``"paper"``: utility ``-w_j`` with ``w_j = max(b_j / q, a_j / (1 - q))``, standard
      analysis with sensitivity ``Delta_q = max(1/q, 1/(1 - q))``.
    - ``"monotone"``: the same utility, monotone analysis (add/remove only: adding a
      score never decreases any ``w_j``).

    Parameters
    ----------
    q : float
        Level in (0, 1).
    epsilon : float
        Privacy parameter.
    scaling : {"tight", "paper", "monotone"}

    Returns
    -------
    ExponentialMechanism
    """
    if scaling == "tight":
        return ExponentialMechanism(
            epsilon, 1.0, analysis="range-bounded", adjacency=_ADJACENCY[scaling]
        )
    sensitivity = max(1.0 / q, 1.0 / (1.0 - q))
    analysis = "standard" if scaling == "paper" else "monotone"
    return ExponentialMechanism(
        epsilon, sensitivity, analysis=analysis, adjacency=_ADJACENCY[scaling]
    )


def quantile_utilities(counts: np.ndarray, q: float, scaling: str) -> np.ndarray:
    """Utility of every edge: ``-max((1 - q) b_j, q a_j)`` (tight) or ``-w_j``.

    ``b_j = #{[s] < e_j}`` and ``a_j = #{[s] > e_j}`` are strict counts (Angelopoulos et
    al. 2022, Algorithm 2 and Lemma 1): a score on edge ``e_j`` counts on neither side.

    Parameters
    ----------
    counts : ndarray of shape (m,)
        Bin counts (:func:`bin_counts`).
    q : float
        Level in (0, 1).
    scaling : {"tight", "paper", "monotone"}

    Returns
    -------
    ndarray of shape (m,)
    """
    counts = np.asarray(counts, dtype=np.float64)
    cumulative = np.cumsum(counts)
    below = cumulative - counts
    above = cumulative[-1] - cumulative
    if scaling == "tight":
        return -np.maximum((1.0 - q) * below, q * above)
    return -np.maximum(below / q, above / (1.0 - q))


def quantile_log_probabilities(
    counts: np.ndarray, q: float, epsilon: float, *, scaling: str = "paper"
) -> np.ndarray:
    """Normalised log-probabilities of the exponential-mechanism quantile.

    Edge ``e_j`` is drawn with probability proportional to ``exp(-x_j)``:

    - ``scaling="tight"``: ``x_j = epsilon max((1 - q) b_j, q a_j)
      = epsilon q (1 - q) w_j``, epsilon-DP under replace-one and add/remove adjacency;
    - ``scaling="paper"``: ``x_j = epsilon w_j / (2 Delta_q)`` with
      ``w_j = max(b_j / q, a_j / (1 - q))`` and ``Delta_q = max(1/q, 1/(1 - q))``
      (Humbert et al. 2023, Algorithm 2);
    - ``scaling="monotone"``: ``x_j = epsilon w_j / Delta_q``, epsilon-DP under
      add/remove adjacency only (2 epsilon under replace-one).

    ``b_j``, ``a_j`` are the strict counts of :func:`quantile_utilities`; the
    distribution is :meth:`ExponentialMechanism.log_probabilities
    <privconf_sklearn.privacy.ExponentialMechanism.log_probabilities>` of
    :func:`quantile_exponential_mechanism`.

    Parameters
    ----------
    counts : ndarray of shape (m,)
        Bin counts from :func:`bin_counts`.
    q : float
        Quantile level in (0, 1), fixed from public quantities.
    epsilon : float
        Privacy parameter.
    scaling : {"tight", "paper", "monotone"}, default="paper"
        Scaling of the utility. The default is the one of the FedCP2-QQ agents of
        Humbert et al. 2023; :class:`ExponQ` defaults to ``"tight"``.

    Returns
    -------
    ndarray of shape (m,)
        ``log P(output = e_j)``, ``j = 1..m``, at the level :func:`exact_level` ``(q)``
        that :func:`sample_quantile_edge` draws at.
    """
    q = exact_level(q)
    mechanism = quantile_exponential_mechanism(q, epsilon, scaling)
    return mechanism.log_probabilities(quantile_utilities(counts, q, scaling))


# ------------------------------------------------------------- exact sampling
#: The level is rounded up to a multiple of ``2**-LEVEL_BITS`` (:func:`exact_level`), so
#: that every exponent is an exact rational with integer numerator.
LEVEL_BITS = 30


def exact_level(q):
    """``q`` rounded up to a multiple of ``2**-30``: the level the mechanism uses exactly.

    Exact in float64 (scaling by a power of two and ``ceil`` do not round). Rounding
    up is the conservative direction for coverage: Lemma 1's lower deviation
    ``q - sigma(q) L / (epsilon n)`` increases with ``q``, so the rounded level still
    reaches the target ``T`` of :func:`inflated_level`; the privacy proofs hold for any
    level in (0, 1].
    """
    rounded = np.ceil(np.asarray(q, dtype=np.float64) * 2.0**LEVEL_BITS) / 2.0**LEVEL_BITS
    return float(rounded) if np.ndim(rounded) == 0 else rounded


def quantile_penalties(counts: np.ndarray, q: float, scaling: str) -> tuple[np.ndarray, int]:
    """Exact integer penalties ``a_j`` and denominator ``D`` of every edge's utility.

    With ``q = k / N`` (``N = 2**30``, ``q`` already rounded by :func:`exact_level`)
    and the strict counts ``b_j``, ``a_j`` of :func:`quantile_utilities`, the
    penalty is ``P_j = max((N - k) b_j, k a_j)``, an integer, and the utility handed to
    the exponential mechanism (sensitivity 1, :func:`sample_quantile_edge`) is
    ``-P_j / D``:

    - ``"tight"``: ``D = N``, so ``-P_j / D = -max((1 - q) b_j, q a_j)``;
    - ``"paper"``, ``"monotone"``: ``D = max(k, N - k)``, so ``-P_j / D = -w_j /
      Delta_q`` with ``w_j = max(b_j / q, a_j / (1 - q))`` and ``Delta_q = max(1/q,
      1/(1 - q))``, whose sensitivity is 1 because ``w_j``'s is ``Delta_q``.

    int64 when ``N n < 2**63``, Python ints beyond.

    Parameters
    ----------
    counts : ndarray of shape (m,)
        Bin counts (:func:`bin_counts`).
    q : float
        Level in (0, 1] (rounded up to a multiple of ``2**-30`` if it is not one).
    scaling : {"tight", "paper", "monotone"}

    Returns
    -------
    penalties : ndarray of shape (m,)
    denominator : int
    """
    scale = 2**LEVEL_BITS
    k = int(exact_level(q) * scale)
    counts = np.asarray(counts, dtype=np.int64)
    cumulative = np.cumsum(counts)
    below, above = cumulative - counts, cumulative[-1] - cumulative
    if int(cumulative[-1]) * scale >= 2**63:
        below, above = below.astype(object), above.astype(object)
    penalties = np.maximum((scale - k) * below, k * above)
    return penalties, scale if scaling == "tight" else max(k, scale - k)


def sample_quantile_edge(
    counts: np.ndarray, q: float, epsilon: float, scaling: str, random_state
) -> int:
    """The released edge index ``j`` (1-based), drawn exactly (no floating-point caveat).

    Candidate edge ``e_j`` has probability exactly proportional to
    ``exp(-epsilon P_j / (D R))`` with the integer penalties of
    :func:`quantile_penalties` and ``R`` the utility range of an
    :class:`~privconf_sklearn.privacy.ExponentialMechanism` of sensitivity 1
    (range-bounded for ``"tight"``, standard for ``"paper"``, monotone for
    ``"monotone"``): the distribution of :func:`quantile_log_probabilities`, at the
    level :func:`exact_level` ``(q)``.

    Parameters
    ----------
    counts : ndarray of shape (m,)
        Bin counts.
    q : float
        Level in (0, 1].
    epsilon : float
        Privacy parameter.
    scaling : {"tight", "paper", "monotone"}
    random_state : None, int, RandomState, Generator or NoiseSource
        The privacy randomness.

    Returns
    -------
    int
    """
    analysis = {"tight": "range-bounded", "paper": "standard", "monotone": "monotone"}
    mechanism = ExponentialMechanism(
        epsilon, 1.0, analysis=analysis[scaling], adjacency=_ADJACENCY[scaling]
    )
    penalties, denominator = quantile_penalties(counts, q, scaling)
    return mechanism.select_penalties(penalties, denominator, random_state) + 1


def shaped_log_probabilities(counts: np.ndarray, shape: Shape, epsilon: float) -> np.ndarray:
    """Normalised log-probabilities of the edges under the shaped utility.

    Edge ``e_j`` is drawn with probability proportional to
    ``exp(-epsilon max(s_h (B_j - k), s_l (k - C_j), 0))`` for the bin counts of the
    scores (:func:`bin_counts`), computed from the exact integer penalties of
    :func:`~privconf_sklearn.mechanisms._shaped.shaped_penalties`. ``shape`` fixes
    ``s_l``, the target (``tau = n - k``, for the public ``n``) and ``m``; the counts may
    come from another number of scores (add/remove neighbours at the parameters of
    ``n``).

    Parameters
    ----------
    counts : ndarray of shape (m,)
        Bin counts.
    shape : Shape
        The public parameters (:meth:`ExponQParameters.shape`).
    epsilon : float
        Privacy parameter.

    Returns
    -------
    ndarray of shape (m,)
    """
    return shaped_curve_log_probabilities(miss_curve(counts), shape, epsilon)


# ------------------------------------------------------------------ the inflated level
def _lower_slack_factor(q, scaling: str):
    """``sigma(q)``: Lemma 1's under-coverage slack is ``sigma(q) L / (epsilon n)``."""
    if scaling == "tight":
        return 1.0 / q
    return _PAPER_FACTOR[scaling] * np.maximum((1.0 - q) / q, 1.0)


def _upper_slack_factor(q, scaling: str):
    """``tau(q)``: Lemma 1's over-coverage slack is ``tau(q) L / (epsilon n)``."""
    if scaling == "tight":
        return 1.0 / (1.0 - q)
    return _PAPER_FACTOR[scaling] * np.maximum(q / (1.0 - q), 1.0)


def inflated_level(n, alpha, epsilon, n_bins, gamma, *, scaling: str = "tight"):
    """The inflated quantile level ``q~``.

    With ``T = (n + 1)(1 - alpha) / (n (1 - gamma alpha))`` and
    ``L = log(m / (gamma alpha))``, ``q~`` is the smallest level whose Lemma 1 lower
    deviation still reaches ``T``, i.e. the root of ``q - sigma(q) L / (epsilon n) = T``:

    - ``"tight"``: ``sigma(q) = 1/q``, so
      ``q~ = (T + sqrt(T^2 + 4 L / (epsilon n))) / 2`` for every ``alpha``;
    - ``"paper"`` (``c = 2``) and ``"monotone"`` (``c = 1``):
      ``sigma(q) = c max((1 - q)/q, 1)``, so ``q~ = T + c L / (epsilon n)`` when that is
      at least 1/2 (Eq. (3) of Angelopoulos et al. 2022), and otherwise (only possible
      for ``alpha > 1/2``) the root of ``q - c (1 - q) / q L / (epsilon n) = T``.

    The result is nudged up by a relative ``1e-12`` so that rounding can never place it
    below the root.

    Parameters
    ----------
    n : int
        Calibration size (public).
    alpha, epsilon : float
        Miscoverage and privacy levels.
    n_bins : int or ndarray of int
        Number of bins ``m``.
    gamma : float or ndarray
        Split of the miscoverage between sampling and privacy noise, in (0, 1);
        broadcast against ``n_bins``.
    scaling : {"tight", "paper", "monotone"}, default="tight"

    Returns
    -------
    float or ndarray
        ``q~`` (may be >= 1, meaning the level is unreachable).
    """
    target = (n + 1) * (1.0 - alpha) / (n * (1.0 - np.asarray(gamma) * alpha))
    with np.errstate(over="ignore"):
        slack = np.log(np.asarray(n_bins, dtype=np.float64) / (gamma * alpha)) / (epsilon * n)
    if scaling == "tight":
        level = (target + np.sqrt(target * target + 4.0 * slack)) / 2.0
    else:
        c_slack = _PAPER_FACTOR[scaling] * slack
        high = target + c_slack
        low_b = target - c_slack
        low = (low_b + np.sqrt(low_b * low_b + 4.0 * c_slack)) / 2.0
        level = np.where(high >= 0.5, high, low)
    level = level * (1.0 + 1e-12)
    return float(level) if np.ndim(level) == 0 else level


def _smaller_gamma_root(n, alpha, slope):
    """Smaller root of ``alpha^2 g^2 - (2 alpha + (n + 1)(1 - alpha) alpha slope) g + 1``.

    The product of the roots is ``1 / alpha^2 > 1``, so only the smaller one can lie in
    (0, 1); computed in the cancellation-free form ``2 / (B + sqrt(B^2 - 4 alpha^2))``.
    """
    with np.errstate(over="ignore"):
        b = 2.0 * alpha + (n + 1) * (1.0 - alpha) * alpha * slope
        return 2.0 / (b + np.sqrt((b - 2.0 * alpha) * (b + 2.0 * alpha)))


def optimal_gamma(n, alpha, epsilon, n_bins, *, scaling: str = "tight"):
    """``gamma*``, the ``gamma`` minimising ``q~`` for ``m = n_bins``.

    - ``"paper"``, ``"monotone"``: Appendix C, Eqs. (9)-(10) of Angelopoulos et al.
      2022. Setting the derivative of ``q~ = T + c L / (epsilon n)`` in ``gamma`` to
      zero gives ``alpha^2 g^2 - (2 alpha + (n + 1)(1 - alpha) alpha epsilon / c) g + 1
      = 0``; as in Eq. (10) the candidates are its smaller root (if in (0, 1)) and
      ``1e-12``, and the one with the smaller ``q~`` is returned. It does not depend on
      ``m``.
    - ``"tight"``: differentiating ``q - L / (epsilon n q) = T`` in ``gamma``,
      ``dq~ / dgamma = 0`` exactly when ``(1 - gamma alpha)^2 =
      gamma alpha (n + 1)(1 - alpha) epsilon q~``: the same quadratic with
      ``epsilon / c`` replaced by ``epsilon q~``. ``gamma*`` is its fixed point
      (``gamma -> smaller root at q~(gamma)``), iterated from ``q~ = 1`` until ``q~``
      stops moving; the map's derivative vanishes at the optimum, so a handful of
      steps suffice. It depends on ``m`` through ``q~``.

    Parameters
    ----------
    n : int
        Calibration size.
    alpha, epsilon : float
        Miscoverage and privacy levels.
    n_bins : int or ndarray of int
        Number of bins ``m`` (unused by the paper's scalings).
    scaling : {"tight", "paper", "monotone"}, default="tight"

    Returns
    -------
    float or ndarray
        ``gamma*`` in ``[1e-12, 1 - 1e-12]``, shaped like ``n_bins`` for ``"tight"``.
    """
    if scaling != "tight":
        root = float(_smaller_gamma_root(n, alpha, epsilon / _PAPER_FACTOR[scaling]))
        candidates = [_GAMMA_FLOOR] + ([root] if _GAMMA_FLOOR < root < 1.0 else [])
        levels = [inflated_level(n, alpha, epsilon, 1, g, scaling=scaling) for g in candidates]
        return candidates[int(np.argmin(levels))]
    level = np.ones(np.shape(n_bins))
    for _ in range(100):
        gamma = np.clip(
            _smaller_gamma_root(n, alpha, epsilon * level), _GAMMA_FLOOR, 1.0 - _GAMMA_FLOOR
        )
        updated = np.asarray(inflated_level(n, alpha, epsilon, n_bins, gamma, scaling="tight"))
        converged = np.all(np.abs(updated - level) <= 4e-16 * np.abs(updated))
        level = updated
        if converged:
            break
    return float(gamma) if gamma.ndim == 0 else gamma


# -------------------------------------------------------------- the m* criterion
def _truncated_geometric_mean(x: np.ndarray, length: np.ndarray) -> np.ndarray:
    """Mean of ``k`` under weights ``exp(-x k)``, ``k = 0..length-1`` (``x > 0``)."""
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        mean = 1.0 / np.expm1(x) - length / np.expm1(x * length)
    return np.where(length <= 1, 0.0, mean)


def _log_geometric_mass(x: np.ndarray, length: np.ndarray) -> np.ndarray:
    """``log sum_{k<length} exp(-x k)`` for ``x > 0``, ``length >= 1``."""
    return np.log(-np.expm1(-x * length)) - np.log(-np.expm1(-x))


def _weight_scale(epsilon: float, q, scaling: str):
    """Coefficient of ``w_j = max(b_j / q, a_j / (1 - q))`` in each scaling's exponent."""
    if scaling == "tight":
        return epsilon * q * (1.0 - q)
    return epsilon / (_PAPER_FACTOR[scaling] * np.maximum(1.0 / q, 1.0 / (1.0 - q)))


def expected_uniform_coverage(
    n: int, epsilon: float, q, n_bins, *, offset=0.0, scaling: str = "tight"
):
    """Expected coverage of the mechanism's output on idealised uniform scores.

    The deterministic limit of the Monte Carlo of Angelopoulos et al. 2022, Algorithm 5:
    ``n`` uniform scores spread evenly over a grid of ``m`` bins whose edges sit at
    positions ``p_j = j + offset`` (in bin units, ``0 <= offset < 1``). Edge ``j`` then
    has ``n(p_j - 1)/m`` scores strictly below and ``n(m - p_j)/m`` above, so the
    log-weights are piecewise linear in ``j`` with the kink at ``p* = mq + 1 - q``; each
    side is a truncated geometric distribution with closed-form mass and mean, and a
    fresh uniform test score is covered with probability ``p_j / m``. Cost O(1) per
    ``(q, m, offset)``. The two blocks' relative weight is computed from the difference
    of their log-weights, so a huge epsilon gives a limit, never NaN.

    Parameters
    ----------
    n : int
        Calibration size.
    epsilon : float
        Privacy parameter.
    q : float or ndarray
        Level(s) in (0, 1).
    n_bins : int or ndarray
        Number(s) of bins, broadcast against ``q``.
    offset : float or ndarray, default=0.0
        Position of the score distribution relative to the grid, in bin units.
    scaling : {"tight", "paper", "monotone"}, default="tight"

    Returns
    -------
    ndarray
        Expected coverage ``E[p_j] / m``.
    """
    q = np.asarray(q, dtype=np.float64)
    m = np.asarray(n_bins, dtype=np.float64)
    offset = np.asarray(offset, dtype=np.float64)
    scale = _weight_scale(epsilon, q, scaling)
    kink = np.clip(np.floor(m * q + 1.0 - q - offset), 1.0, m)
    right_length = m - kink
    has_right = right_length >= 1
    safe_length = np.maximum(right_length, 1.0)
    with np.errstate(over="ignore"):
        x_left = scale * (n / (m * (1.0 - q)))
        x_right = scale * (n / (m * q))
        # log-weight at j = kink + 1 (right block) minus that at j = kink (left block).
        gap = (kink + offset) / (m * q) - (m - kink - offset) / (m * (1.0 - q))
        right_minus_left = -scale * (n * gap)
        log_ratio = (
            right_minus_left
            + _log_geometric_mass(x_right, safe_length)
            - _log_geometric_mass(x_left, kink)
        )
    weight_right = np.where(has_right, expit(log_ratio), 0.0)
    mean_left = kink - _truncated_geometric_mean(x_left, kink)
    mean_right = kink + 1.0 + _truncated_geometric_mean(x_right, safe_length)
    mean_index = (1.0 - weight_right) * mean_left + weight_right * mean_right
    return (mean_index + offset) / m


#: Grid offsets (in bin units) the ``m*`` criterion averages over, so that no ``m`` is
#: favoured by a lucky alignment of the quantile with the grid.
_CRITERION_OFFSETS = (np.arange(16) + 0.5) / 16


def _bins_criterion(n: int, epsilon: float, levels, n_bins, scaling: str) -> np.ndarray:
    """Expected uniform-score coverage averaged over grid offsets (lower is better)."""
    coverage = expected_uniform_coverage(
        n,
        epsilon,
        levels[:, None],
        n_bins[:, None],
        offset=_CRITERION_OFFSETS[None, :],
        scaling=scaling,
    )
    return coverage.mean(axis=1)


@lru_cache(maxsize=1024)
def exponq_parameters(
    n: int,
    alpha: float,
    epsilon: float,
    scaling: str = "tight",
    n_bins: int | None = None,
    gamma: float | None = None,
) -> tuple[int | None, float, float]:
    """Number of bins, gamma and inflated level from public quantities only.

    ``gamma=None`` uses :func:`optimal_gamma` (for each candidate ``m`` with the tight
    scaling). ``n_bins=None`` picks ``m*`` minimising, over the values of
    :data:`AUTO_BIN_GRID` that are at least ``n * epsilon`` and whose level ``q~`` is
    below 1, the expected coverage of the mechanism on idealised uniform scores
    (:func:`expected_uniform_coverage`, averaged over the grid's alignment with the
    scores). Deterministic, no data read, cached.

    The floor ``m >= n epsilon`` is the order of Corollary 1 (``m`` proportional to
    ``n epsilon``). Uniform scores alone would favour fewer bins, but real scores pile
    up (a weak model's LAC scores crowd near 1, tree models produce atoms), and there
    one bin can hold far more than ``1/m`` of the mass: with ``m <= 300`` at ``n = 2400``,
    ``epsilon = 1``, scores distributed as ``1 - Beta(1, 40)`` get coverage 1 (full sets)
    instead of 0.92. A larger ``m`` only adds about ``log(m) / (epsilon n)`` to ``q~``
    (about 0.001 per factor 10 at ``n = 2400`` with the tight scaling). If no
    ``m >= n epsilon`` reaches ``q~ < 1``, the largest ``m`` that does is used.

    Returns
    -------
    n_bins : int or None
        ``m`` (given or ``m*``), or None when no admissible ``m`` gives ``q~ < 1``
        (infeasible request).
    gamma : float
        The ``gamma`` used.
    level : float
        ``q~`` rounded up to a multiple of ``2**-30`` (:func:`exact_level`, the level the
        sampler uses exactly), or the smallest such level tried when infeasible.
    """
    grid = AUTO_BIN_GRID if n_bins is None else np.array([n_bins], dtype=np.int64)
    gammas = np.broadcast_to(
        optimal_gamma(n, alpha, epsilon, grid, scaling=scaling) if gamma is None else gamma,
        grid.shape,
    )
    levels = np.asarray(
        exact_level(inflated_level(n, alpha, epsilon, grid, gammas, scaling=scaling))
    )
    feasible = levels < 1.0
    if not feasible.any():
        best = int(np.argmin(levels))
        return None, float(gammas[best]), float(levels[best])
    admissible = feasible & (grid >= min(n * epsilon, float(grid[-1])))
    if not admissible.any():
        chosen = int(np.flatnonzero(feasible)[-1])
    else:
        candidates = np.flatnonzero(admissible)
        criterion = _bins_criterion(n, epsilon, levels[candidates], grid[candidates], scaling)
        chosen = int(candidates[np.argmin(criterion)])
    return int(grid[chosen]), float(gammas[chosen]), float(levels[chosen])


def coverage_upper_bound(n, alpha, epsilon, n_bins, gamma, level, *, scaling="tight"):
    """Theorem 3 of Angelopoulos et al. 2022 for scores without atoms, as its proof gives it.

    With ``L = log(m / (gamma alpha))`` and ``q' = q~ + tau(q~) L / (epsilon n)``
    (``tau(q) = 1 / (1 - q)`` for the tight scaling, ``c max(q / (1 - q), 1)`` for the
    paper's), Lemma 1 gives ``#{[s] < s_hat} <= n q'`` with probability
    ``1 - gamma alpha``, hence ``s_hat <= Z_(floor(n q') + 1)`` and, with Lemma 2,
    ``P(cover) <= gamma alpha + (1 - gamma alpha) ((n q' + 1) / (n + 1) + p_max)``.
    The printed statement drops the ``+1`` of the ceiling and counts ``p_max`` twice;
    the bound here is the proof's (see the user guide, "Corrections"). Returns
    ``(bound at p_max = 0, slope in p_max)``, the bound capped at 1.
    """
    log_term = math.log(n_bins / (gamma * alpha))
    upper_level = level + _upper_slack_factor(level, scaling) * log_term / (epsilon * n)
    bound = gamma * alpha + (1.0 - gamma * alpha) * (n * upper_level + 1.0) / (n + 1)
    return min(1.0, float(bound)), 1.0 - gamma * alpha


# ------------------------------------------------------------------ the estimator
@dataclass(frozen=True)
class ExponQParameters:
    """What :class:`ExponQ` uses for a public ``(n, alpha)``, from public quantities only.

    Parameters
    ----------
    scaling : str
        The utility scaling.
    n_bins : int or None
        Number of bins ``m``; None when the level is unreachable (infeasible request).
    level : float
        The empirical quantile level aimed at: ``k / n`` for ``"shaped"`` (``k`` the
        target rank), ``q~`` otherwise; at least 1 when unreachable.
    gamma : float or None
        Share of ``alpha`` given to the noise (``"tight"``, ``"paper"``, ``"monotone"``).
    lower_slope : Fraction or None
        ``s_l`` (``"shaped"``).
    target_rank : Fraction or None
        ``k`` (``"shaped"``), a multiple of 1/64.
    """

    scaling: str
    n_bins: int | None
    level: float
    gamma: float | None = None
    lower_slope: Fraction | None = None
    target_rank: Fraction | None = None

    @property
    def feasible(self) -> bool:
        """Whether the level is reachable (the release reads the data)."""
        return self.n_bins is not None

    def shape(self, n: int) -> Shape:
        """The :class:`~privconf_sklearn.mechanisms._shaped.Shape` of a shaped release."""
        assert self.lower_slope is not None and self.target_rank is not None
        assert self.n_bins is not None
        return Shape(self.lower_slope, n - self.target_rank, self.n_bins)


def _lower_slope_fraction(value) -> Fraction:
    """A ``lower_slope`` given as a number, as the exact rational it denotes (multiple of 0.01)."""
    fraction = Fraction(repr(float(value))).limit_denominator(100)
    if float(fraction) != float(value) or 100 % fraction.denominator:
        raise ValueError(
            f"lower_slope must be 'auto' or a multiple of 0.01 in (0, 1]; got {value!r}."
        )
    return fraction


class ExponQ(QuantileMechanism):
    """Private conformal calibration with the exponential-mechanism quantile.

    Angelopoulos, Bates, Zrnic and Jordan, "Private Prediction Sets" (2022),
    Algorithm 3, with a shaped utility by default. Scores in [0, 1] are rounded up to a
    uniform grid of ``m`` bins and the exponential mechanism picks a grid edge near a
    target rank ``k``. With the default ``scaling="shaped"`` edge ``e_j`` is drawn with
    probability proportional to

    ``exp(-epsilon max(s_h (B_j - k), s_l (k - C_j), 0))``,

    ``C_j`` and ``B_j`` the numbers of scores at most ``e_j`` and strictly below it
    (after rounding), ``s_l + s_h = 1``: the utility falls by ``s_l`` per score missing
    below the target and by ``s_h`` per extra score above it, instead of ``q~`` and
    ``1 - q~`` (about 0.97 and 0.03) for the paper's utility, so the release no longer
    wanders over the part of the range above the quantile. ``s_l``, ``m`` and ``k``
    come from the public ``(n, epsilon, alpha)`` (:func:`~._shaped.choose_shape`):
    ``k`` is the smallest rank whose integrated lower-tail certificate gives coverage
    ``1 - alpha``; ``(s_l, m)`` minimise the expected released threshold over four
    public score configurations with an empty top of the range.

    Guarantees: pure ``epsilon``-DP of the calibration scores under replace-one and
    add/remove adjacency for ``"shaped"``, ``"tight"`` and ``"paper"`` (range-bounded
    exponential mechanism; proofs in the user guide) and marginal coverage at least
    ``1 - alpha`` for any score distribution, with no failure probability. The budget
    has no default: it is always a visible choice.

    Parameters
    ----------
    epsilon : float
        Privacy budget of the calibration, > 0 and finite.
    n_bins : int or "auto", default="auto"
        Number of uniform bins ``m``, an integer in ``[2, 10^6]``, or ``"auto"``
        (chosen from ``(n, epsilon, alpha)``).
    lower_slope : float or "auto", default="auto"
        ``s_l`` of the shaped utility, a multiple of 0.01 in (0, 1], or ``"auto"``.
        Only with ``scaling="shaped"``.
    gamma : float or "auto", default="auto"
        Share of ``alpha`` given to the mechanism's failure probability, in (0, 1),
        for the paper's utility (``"tight"``, ``"paper"``, ``"monotone"``); ``"auto"``
        minimises ``q~`` (:func:`optimal_gamma`). The shaped utility has no such split
        (its certificate integrates the whole lower tail) and takes only ``"auto"``.
    grid : "uniform" or LogGrid, default="uniform"
        The public grid of candidate thresholds: ``j / m``, or a
        :class:`~privconf_sklearn.mechanisms.LogGrid` (finer near 0, for regression
        scores under loose bounds). The privacy and coverage analyses count edges, so
        they hold for either grid; the parameters are chosen as for the uniform grid.
    scaling : {"shaped", "tight", "paper", "monotone"}, default="shaped"
        ``"shaped"``: the shaped utility above. ``"tight"``: the paper's utility
        ``-max((1 - q~) b_j, q~ a_j)`` with the range-bounded analysis, epsilon-DP
        under both adjacencies. ``"paper"``: ``exp(-epsilon w_j / (2 Delta_q))``, the
        scaling of Angelopoulos et al.'s Lemma 1 (for reproductions); epsilon-DP under
        both adjacencies. ``"monotone"``: ``exp(-epsilon w_j / Delta_q)``, epsilon-DP
        under add/remove adjacency only (2 epsilon under replace-one).

    Examples
    --------
    >>> import numpy as np
    >>> from privconf_sklearn.mechanisms import ExponQ
    >>> scores = np.random.default_rng(0).uniform(size=5000)
    >>> cal = ExponQ(epsilon=1.0).calibrate(scores, alpha=0.1, random_state=0)
    >>> cal.privacy.epsilon, cal.coverage_lower_bound
    (1.0, 0.9)
    >>> bool(0.9 < cal.threshold < 0.92)
    True
    """

    #: The exact distribution costs one pass over the scores: used at every size.
    _exact_forecast_limit = 10**7

    _parameter_constraints = {
        "epsilon": [Interval(Real, 0, None, closed="neither")],
        "n_bins": [StrOptions({"auto"}), Interval(Integral, 2, MAX_BINS, closed="both")],
        "lower_slope": [StrOptions({"auto"}), Interval(Real, 0, 1, closed="right")],
        "gamma": [StrOptions({"auto"}), Interval(Real, 0, 1, closed="neither")],
        "scaling": [StrOptions(set(SCALINGS))],
        "grid": [StrOptions({"uniform"}), LogGrid],
    }

    def __init__(
        self,
        epsilon,
        *,
        n_bins="auto",
        lower_slope="auto",
        gamma="auto",
        scaling="shaped",
        grid="uniform",
    ):
        self.epsilon = epsilon
        self.n_bins = n_bins
        self.lower_slope = lower_slope
        self.gamma = gamma
        self.scaling = scaling
        self.grid = grid

    def _validated_params(self) -> dict:
        """The parameters, with the checks between them (slope and gamma per scaling)."""
        params = super()._validated_params()
        if params["scaling"] == "shaped":
            if params["gamma"] != "auto":
                raise ValueError(
                    "gamma is the noise share of the paper's utility; scaling='shaped' has "
                    f"none (its certificate integrates the lower tail): got gamma={self.gamma!r}."
                )
            if params["lower_slope"] != "auto":
                params["lower_slope"] = _lower_slope_fraction(params["lower_slope"])
        elif params["lower_slope"] != "auto":
            raise ValueError(
                f"lower_slope is a parameter of scaling='shaped'; got lower_slope="
                f"{self.lower_slope!r} with scaling={params['scaling']!r}."
            )
        if params["grid"] != "uniform":
            params["grid"].edges(2)  # validates the resolution
        return params

    def _privacy_guarantee(self, params: dict) -> PrivacyGuarantee:
        """Pure epsilon-DP, under both adjacencies except for ``scaling="monotone"``."""
        scaling = params["scaling"]
        return PrivacyGuarantee.pure(
            params["epsilon"], adjacency=_ADJACENCY[scaling], description=_DESCRIPTIONS[scaling]
        )

    def resolve_parameters(self, n: int, alpha: float) -> ExponQParameters:
        """The parameters this mechanism uses for public ``(n, alpha)``.

        ``n_bins`` is None when the level is unreachable.
        """
        alpha = check_alpha(alpha, self._method("resolve_parameters"))
        return self._resolve(self._validated_params(), n, alpha)

    def _resolve(self, params: dict, n: int, alpha: float) -> ExponQParameters:
        n_bins = None if params["n_bins"] == "auto" else params["n_bins"]
        if params["scaling"] == "shaped":
            slope = params["lower_slope"]
            shape = choose_shape(
                int(n), float(alpha), params["epsilon"], n_bins, None if slope == "auto" else slope
            )
            if shape is None:
                return ExponQParameters("shaped", None, 1.0)
            rank = int(n) - shape.target
            return ExponQParameters(
                "shaped", shape.n_bins, float(rank) / n, None, shape.lower_slope, rank
            )
        chosen, gamma, level = exponq_parameters(
            int(n),
            float(alpha),
            params["epsilon"],
            params["scaling"],
            n_bins,
            None if params["gamma"] == "auto" else params["gamma"],
        )
        return ExponQParameters(params["scaling"], chosen, level, gamma)

    def _coverage_certificate(
        self, params: dict, n_samples: int, alpha: float
    ) -> CoverageCertificate:
        """``1 - alpha`` (marginal) when the level is reachable; infeasible otherwise."""
        if not self._feasible(params, n_samples, alpha):
            return CoverageCertificate(
                1.0, feasible=False, reason=self._unreachable(params, n_samples, alpha)
            )
        return CoverageCertificate(1.0 - alpha)

    def _feasible(self, params: dict, n_samples: int, alpha: float) -> bool:
        """Fast for ``"shaped"``: the most lenient slope and grid decide."""
        if params["scaling"] != "shaped":
            return self._resolve(params, n_samples, alpha).feasible
        slope = params["lower_slope"]
        slope = max(LOWER_SLOPES) if slope == "auto" else slope
        n_bins = 2 if params["n_bins"] == "auto" else params["n_bins"]
        target = target_numerators(
            int(n_samples), float(alpha), params["epsilon"], float(slope), n_bins
        )
        return bool(target >= 0)

    def _unreachable(self, params: dict, n: int, alpha: float) -> str:
        if params["scaling"] == "shaped":
            what = (
                f"no certified target rank is at most n = {n} (epsilon = {params['epsilon']}, "
                f"alpha = {alpha})"
            )
        else:
            level = self._resolve(params, n, alpha).level
            what = (
                f"the inflated level q~ = {level:.6g} >= 1 for n = {n}, epsilon = "
                f"{params['epsilon']}, alpha = {alpha}"
            )
        needed = self._needed_samples(params, alpha)
        return f"{what}: {needed} are needed at this epsilon, or a larger epsilon."

    def edges(self, n_bins: int) -> np.ndarray:
        """The public grid's ``m`` edges: ``j / m`` (uniform) or :meth:`LogGrid.edges`."""
        return _edges(self._validated_params()["grid"], n_bins)

    def _counts(self, params: dict, statistics: ScoreStatistics, n_bins: int) -> np.ndarray:
        if params["grid"] == "uniform":
            return statistics.bin_counts(n_bins)
        return statistics.edge_counts(params["grid"].edges(n_bins))

    def _log_probabilities(self, params: dict, counts: np.ndarray, parameters, n: int):
        """Normalised log-probabilities of the edges given the bin counts."""
        if parameters.scaling == "shaped":
            return shaped_log_probabilities(counts, parameters.shape(n), params["epsilon"])
        return quantile_log_probabilities(
            counts, parameters.level, params["epsilon"], scaling=parameters.scaling
        )

    def _sample_edge(self, params: dict, counts: np.ndarray, parameters, n: int, noise) -> int:
        """The released edge index (1-based), drawn exactly from the integer penalties."""
        if parameters.scaling == "shaped":
            numerators, denominator = shaped_penalties(miss_curve(counts), parameters.shape(n))
            return sample_shaped(numerators, denominator, params["epsilon"], noise) + 1
        return sample_quantile_edge(
            counts, parameters.level, params["epsilon"], parameters.scaling, noise
        )

    def threshold_distribution(self, scores, alpha: float) -> tuple[np.ndarray, np.ndarray]:
        """The exact distribution of the threshold :meth:`calibrate` releases.

        For audits and tests: it reads the scores, spends no budget and is **not**
        private. The released threshold is ``values[j]`` with probability
        ``exp(log_probabilities[j])``.

        Parameters
        ----------
        scores : array-like of shape (n_samples,)
            Calibration scores in [0, 1].
        alpha : float
            Miscoverage level in (0, 1).

        Returns
        -------
        values : ndarray
            The grid's edges (``[1.0]`` when the level is unreachable).
        log_probabilities : ndarray
            ``log P(threshold = values[j])``.
        """
        scores, alpha, params = self._check_calibration_input(
            scores, alpha, "threshold_distribution"
        )
        return self._threshold_distribution(params, scores, alpha)

    def _threshold_distribution(self, params: dict, scores: np.ndarray, alpha: float):
        n = scores.shape[0]
        parameters = self._resolve(params, n, alpha)
        n_bins = parameters.n_bins
        if n_bins is None:  # infeasible: the constant top of the range
            return np.ones(1), np.zeros(1)
        counts = self._counts(params, ScoreArray._checked(scores), n_bins)
        log_probabilities = self._log_probabilities(params, counts, parameters, n)
        return _edges(params["grid"], n_bins), log_probabilities

    def _upper_bound(self, params: dict, n: int, alpha: float, parameters: ExponQParameters):
        """Coverage upper bound at ``p_max = 0`` and its slope in ``p_max``."""
        if parameters.scaling == "shaped":
            return upper_coverage_bound(n, params["epsilon"], parameters.shape(n)), 1.0
        return coverage_upper_bound(
            n,
            alpha,
            params["epsilon"],
            parameters.n_bins,
            parameters.gamma,
            parameters.level,
            scaling=parameters.scaling,
        )

    def _calibrate_from_statistics(
        self, params: dict, statistics: ScoreStatistics, alpha: float, noise: NoiseSource
    ) -> Calibration:
        n = statistics.n_samples
        parameters = self._resolve(params, n, alpha)
        n_bins = parameters.n_bins
        if n_bins is None:  # infeasible: no data read
            return infeasible_calibration(
                type(self).__name__,
                n,
                alpha,
                self._unreachable(params, n, alpha),
                **_public_details(parameters, params),
            )
        counts = self._counts(params, statistics, n_bins)
        edge = self._sample_edge(params, counts, parameters, n, noise)
        upper, slope = self._upper_bound(params, n, alpha, parameters)
        reason = ""
        if edge == n_bins:
            reason = (
                f"the exponential mechanism released the top edge 1.0 of its "
                f"{n_bins} bins: the scores' target quantile lies in the top bin, "
                "or the privacy noise moved the release there."
            )
        return Calibration(
            mechanism=type(self).__name__,
            threshold=float(_edges(params["grid"], n_bins)[edge - 1]),
            n_samples=n,
            alpha=alpha,
            privacy=self._privacy_guarantee(params),
            coverage_lower_bound=1.0 - alpha,
            coverage_upper_bound=upper,
            upper_bound_atom_slope=slope,
            target_level=parameters.level,
            reason=reason,
            details=_public_details(parameters, params),
        )


def _edges(grid, n_bins: int) -> np.ndarray:
    """``j / m`` (uniform) or the :class:`LogGrid`'s edges."""
    if grid == "uniform":
        return np.arange(1, n_bins + 1) / n_bins
    return grid.edges(n_bins)


#: What each scaling's guarantee says it is.
_DESCRIPTIONS = {
    "shaped": "Range-bounded exponential mechanism over bin edges with the shaped utility "
    "(utility changes within an interval of length 1).",
    "tight": "Range-bounded exponential mechanism over bin edges (utility changes within an "
    "interval of length 1).",
    "paper": "Exponential mechanism over bin edges with sensitivity-scaled utility.",
    "monotone": "Monotone exponential mechanism over bin edges; 2*epsilon under replace-one.",
}


def _public_details(parameters: ExponQParameters, params: dict) -> dict:
    """The public parameters of a release, for ``Calibration.details``."""
    grid = params["grid"]
    details: dict = {
        "grid": "uniform" if grid == "uniform" else f"log (resolution {grid.resolution!r})",
        "scaling": parameters.scaling,
        "n_bins": parameters.n_bins,
        "n_bins_auto": params["n_bins"] == "auto",
    }
    if parameters.scaling == "shaped":
        details.update(
            lower_slope=None if parameters.lower_slope is None else float(parameters.lower_slope),
            target_rank=None if parameters.target_rank is None else float(parameters.target_rank),
            lower_slope_auto=params["lower_slope"] == "auto",
        )
    else:
        details.update(
            q_tilde=parameters.level, gamma=parameters.gamma, gamma_auto=params["gamma"] == "auto"
        )
    return details
