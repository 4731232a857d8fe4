"""ExponQ: the exponential-mechanism private quantile of Angelopoulos et al.

Paper 000/001 (Angelopoulos, Bates, Zrnic, Jordan, "Private Prediction Sets"),
Algorithms 2-3, Theorems 2-3 and Appendix C, with the corrections of DESIGN.md:

- (correction 1) the utility is scaled by its sensitivity
  ``Delta_q = max(1/q, 1/(1 - q))`` (``exp(-eps * w_j / (2 Delta_q))``; optionally the
  monotone mechanism ``exp(-eps * w_j / Delta_q)``), with the strict counts the proofs
  use;
- (correction 4) an unreachable level (``q~ >= 1``) returns the top of the range
  without reading the data;
- (correction 5) the number of bins ``m*`` and ``gamma*`` are chosen deterministically
  from the public ``(n, epsilon, alpha)``;
- Theorem 3's upper bound is reported as its proof gives it
  (:func:`coverage_upper_bound`).
"""

from __future__ import annotations

import math
from functools import lru_cache

import numpy as np

from .._random import NoiseSource
from .._validation import check_in_open_interval, check_positive_finite
from ..privacy import PrivacyGuarantee
from ._base import (
    Calibration,
    CoverageCertificate,
    QuantileMechanism,
    infeasible_calibration,
)
from ._binning import bin_counts

__all__ = [
    "ExponQ",
    "exponq_parameters",
    "inflated_level",
    "optimal_gamma",
    "quantile_log_probabilities",
]

#: Candidate numbers of bins for ``n_bins="auto"``: 61 values log-spaced in [10, 10^6]
#: (paper 000 Appendix C uses 50 values in [10^2, 10^6]).
AUTO_BIN_GRID = np.unique(np.round(np.geomspace(10, 1e6, 61)).astype(np.int64))


def _slack_factor(monotone: bool) -> float:
    """Factor ``c`` of the privacy slack: 2 for the standard, 1 for the monotone mechanism."""
    return 1.0 if monotone else 2.0


#: Utility scalings of the exponential-mechanism quantile (see
#: :func:`quantile_log_probabilities`).
SCALINGS = ("tight", "paper", "monotone")


def quantile_log_probabilities(
    counts: np.ndarray, q: float, epsilon: float, *, scaling: str = "paper"
) -> np.ndarray:
    """Normalised log-probabilities of the exponential-mechanism quantile.

    Edge ``e_j`` has utility ``w_j = max(b_j / q, a_j / (1 - q))`` with the strict counts
    ``b_j = #{[s] < e_j}`` and ``a_j = #{[s] > e_j}`` (Angelopoulos et al. 2022,
    Algorithm 2) and is drawn with probability proportional to ``exp(-x_j)``:

    - ``scaling="tight"``: ``x_j = epsilon q (1 - q) w_j = epsilon max((1 - q) b_j, q a_j)``,
      epsilon-DP under replace-one and add/remove adjacency (see the user guide);
    - ``scaling="paper"``: ``x_j = epsilon w_j / (2 Delta_q)`` with the sensitivity
      ``Delta_q = max(1/q, 1/(1 - q))`` (Humbert et al. 2023, Algorithm 2);
    - ``scaling="monotone"``: ``x_j = epsilon w_j / Delta_q``, epsilon-DP under
      add/remove adjacency only (2 epsilon under replace-one).

    Parameters
    ----------
    counts : ndarray of shape (m,)
        Bin counts from :func:`~privconf_sklearn.mechanisms._binning.bin_counts`.
    q : float
        Quantile level in (0, 1), fixed from public quantities.
    epsilon : float
        Privacy parameter.
    scaling : {"tight", "paper", "monotone"}, default="paper"
        Scaling of the utility.

    Returns
    -------
    ndarray of shape (m,)
        ``log P(output = e_j)``, ``j = 1..m``.
    """
    counts = np.asarray(counts, dtype=np.float64)
    cumulative = np.cumsum(counts)
    below = cumulative - counts
    above = cumulative[-1] - cumulative
    if scaling == "tight":
        exponent = epsilon * np.maximum((1.0 - q) * below, q * above)
    else:
        utility = np.maximum(below / q, above / (1.0 - q))
        sensitivity = max(1.0 / q, 1.0 / (1.0 - q))
        factor = 2.0 if scaling == "paper" else 1.0
        exponent = (epsilon / (factor * sensitivity)) * utility
    log_weights = -exponent
    top = log_weights.max()
    return log_weights - (top + np.log(np.exp(log_weights - top).sum()))


def optimal_gamma(n: int, alpha: float, epsilon: float, *, monotone: bool = False) -> float:
    """The ``gamma*`` of paper 000 Appendix C, Eqs. (9)-(10).

    Setting the derivative of ``q~`` in ``gamma`` to zero gives
    ``alpha^2 g^2 - (2 alpha + (n + 1)(1 - alpha) alpha epsilon / c) g + 1 = 0`` with
    ``c = 2`` (``c = 1`` for the monotone mechanism). The product of the roots is
    ``1 / alpha^2 > 1``, so only the smaller root can lie in (0, 1); it is computed in
    the cancellation-free form ``2 / (B + sqrt(B^2 - 4 alpha^2))``. As in Eq. (10) the
    candidates are that root (if in (0, 1)) and ``1e-12``, and the one with the smaller
    ``q~`` is returned (``q~`` depends on ``m`` only through an additive constant).
    """
    c = _slack_factor(monotone)
    b = 2.0 * alpha + (n + 1) * (1.0 - alpha) * alpha * epsilon / c
    root = 2.0 / (b + math.sqrt((b - 2.0 * alpha) * (b + 2.0 * alpha)))
    candidates = [1e-12] + ([root] if 0.0 < root < 1.0 else [])
    levels = [inflated_level(n, alpha, epsilon, 1, g, monotone=monotone) for g in candidates]
    return candidates[int(np.argmin(levels))]


def inflated_level(n, alpha, epsilon, n_bins, gamma, *, monotone: bool = False):
    """The inflated quantile level ``q~`` of paper 000 Eq. (3).

    ``q~ = (n + 1)(1 - alpha) / (n (1 - gamma alpha)) + c log(m / (gamma alpha)) / (eps n)``
    with ``c = 2`` (``c = 1`` for the monotone mechanism), which is Theorem 2's level
    when ``q~ >= 1/2``. Below 1/2 (only possible for ``alpha > 1/2``) Lemma 1's slack is
    ``c max((1 - q)/q, 1) log(m / (gamma alpha)) / (eps n)``, and ``q~`` is the root of
    ``q - c (1 - q) / q * L = target``. Either way ``q~`` is the smallest level whose
    Lemma 1 lower deviation still reaches ``(n + 1)(1 - alpha) / (n (1 - gamma alpha))``;
    it is nudged up by a relative ``1e-12`` so that rounding can never place it below.

    Parameters
    ----------
    n : int
        Calibration size (public).
    alpha, epsilon : float
        Miscoverage and privacy levels.
    n_bins : int or ndarray of int
        Number of bins ``m``.
    gamma : float
        Split of the miscoverage between sampling and privacy noise, in (0, 1).
    monotone : bool, default=False
        Use the monotone mechanism's slack.

    Returns
    -------
    float or ndarray
        ``q~`` (may be >= 1, meaning the level is unreachable).
    """
    c = _slack_factor(monotone)
    target = (n + 1) * (1.0 - alpha) / (n * (1.0 - gamma * alpha))
    slack = c * np.log(np.asarray(n_bins, dtype=np.float64) / (gamma * alpha)) / (epsilon * n)
    high = target + slack
    low_b = target - slack
    low = (low_b + np.sqrt(low_b * low_b + 4.0 * slack)) / 2.0
    level = np.where(high >= 0.5, high, low) * (1.0 + 1e-12)
    return float(level) if level.ndim == 0 else level


def _truncated_geometric_mean(x: np.ndarray, length: np.ndarray) -> np.ndarray:
    """Mean of ``k`` under weights ``exp(-x k)``, ``k = 0..length-1`` (``x > 0``)."""
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        mean = 1.0 / np.expm1(x) - length / np.expm1(x * length)
    return np.where(length <= 1, 0.0, mean)


def _log_geometric_mass(x: np.ndarray, length: np.ndarray) -> np.ndarray:
    """``log sum_{k<length} exp(-x k)`` for ``x > 0``, ``length >= 1``."""
    return np.log(-np.expm1(-x * length)) - np.log(-np.expm1(-x))


def expected_uniform_coverage(
    n: int, epsilon: float, q, n_bins, *, offset=0.0, monotone: bool = False
):
    """Expected coverage of the mechanism's output on idealised uniform scores.

    The deterministic limit of the Monte Carlo in paper 000 Algorithm 5: ``n`` uniform
    scores spread evenly over a grid of ``m`` bins whose edges sit at positions
    ``p_j = j + offset`` (in bin units, ``0 <= offset < 1``). Edge ``j`` then has
    ``n(p_j - 1)/m`` scores strictly below and ``n(m - p_j)/m`` above, so the
    log-weights are piecewise linear in ``j`` with the kink at ``p* = mq + 1 - q``; each
    side is a truncated geometric distribution with closed-form mass and mean, and a
    fresh uniform test score is covered with probability ``p_j / m``. Cost O(1) per
    ``(q, m, offset)``.

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
    monotone : bool, default=False
        Use the monotone mechanism's scaling.

    Returns
    -------
    ndarray
        Expected coverage ``E[p_j] / m``.
    """
    q = np.asarray(q, dtype=np.float64)
    m = np.asarray(n_bins, dtype=np.float64)
    offset = np.asarray(offset, dtype=np.float64)
    scale = epsilon / (_slack_factor(monotone) * np.maximum(1.0 / q, 1.0 / (1.0 - q)))
    x_left = scale * n / (m * (1.0 - q))
    x_right = scale * n / (m * q)
    kink = np.clip(np.floor(m * q + 1.0 - q - offset), 1.0, m)
    right_length = m - kink
    # Log-weights at the blocks' inner ends: j = kink (left) and j = kink + 1 (right).
    log_left_top = -scale * n * (m - kink - offset) / (m * (1.0 - q))
    log_right_bottom = -scale * n * (kink + offset) / (m * q)
    log_mass_left = log_left_top + _log_geometric_mass(x_left, kink)
    has_right = right_length >= 1
    safe_length = np.maximum(right_length, 1.0)
    log_mass_right = np.where(
        has_right, log_right_bottom + _log_geometric_mass(x_right, safe_length), -np.inf
    )
    mean_left = kink - _truncated_geometric_mean(x_left, kink)
    mean_right = kink + 1.0 + _truncated_geometric_mean(x_right, safe_length)
    total = np.logaddexp(log_mass_left, log_mass_right)
    weight_right = np.exp(log_mass_right - total)
    mean_index = (1.0 - weight_right) * mean_left + weight_right * mean_right
    return (mean_index + offset) / m


#: Grid offsets (in bin units) the ``m*`` criterion averages over, so that no ``m`` is
#: favoured by a lucky alignment of the quantile with the grid.
_CRITERION_OFFSETS = (np.arange(16) + 0.5) / 16


def _bins_criterion(n: int, epsilon: float, levels, n_bins, monotone: bool) -> np.ndarray:
    """Expected uniform-score coverage averaged over grid offsets (lower is better)."""
    coverage = expected_uniform_coverage(
        n,
        epsilon,
        levels[:, None],
        n_bins[:, None],
        offset=_CRITERION_OFFSETS[None, :],
        monotone=monotone,
    )
    return coverage.mean(axis=1)


@lru_cache(maxsize=1024)
def exponq_parameters(
    n: int,
    alpha: float,
    epsilon: float,
    monotone: bool = False,
    n_bins: int | None = None,
    gamma: float | None = None,
):
    """Number of bins, gamma and inflated level from public quantities only.

    ``gamma=None`` uses ``gamma*`` of paper 000 Eqs. (9)-(10). ``n_bins=None`` picks
    ``m*`` minimising, over the values of :data:`AUTO_BIN_GRID` that are at least
    ``n * epsilon`` and whose level ``q~`` is below 1, the expected coverage of the
    mechanism on idealised uniform scores (:func:`expected_uniform_coverage`, averaged
    over the grid's alignment with the scores). Deterministic, no data read, cached.

    The floor ``m >= n epsilon`` is the order of Corollary 1 (``m`` proportional to
    ``n epsilon``). Uniform scores alone would favour fewer bins, but real scores pile
    up (a weak model's LAC scores crowd near 1, tree models produce atoms), and there
    one bin can hold far more than ``1/m`` of the mass: with ``m <= 300`` at ``n = 2400``,
    ``epsilon = 1``, scores distributed as ``1 - Beta(1, 40)`` get coverage 1 (full sets)
    instead of 0.92. A larger ``m`` only adds ``c log(m) / (epsilon n)`` to ``q~``
    (about 0.002 per factor 10 at ``n = 2400``). If no ``m >= n epsilon`` reaches
    ``q~ < 1``, the largest ``m`` that does is used.

    Returns
    -------
    n_bins : int or None
        ``m`` (given or ``m*``), or None when no admissible ``m`` gives ``q~ < 1``
        (infeasible request).
    gamma : float
        The ``gamma`` used.
    level : float
        ``q~``, or the smallest ``q~`` tried when infeasible.
    """
    if gamma is None:
        gamma = optimal_gamma(n, alpha, epsilon, monotone=monotone)
    if n_bins is not None:
        level = inflated_level(n, alpha, epsilon, n_bins, gamma, monotone=monotone)
        return (n_bins if level < 1.0 else None), gamma, level
    levels = inflated_level(n, alpha, epsilon, AUTO_BIN_GRID, gamma, monotone=monotone)
    feasible = levels < 1.0
    if not feasible.any():
        return None, gamma, float(levels.min())
    admissible = feasible & (AUTO_BIN_GRID >= min(n * epsilon, AUTO_BIN_GRID[-1]))
    if not admissible.any():
        largest = int(np.flatnonzero(feasible)[-1])
        return int(AUTO_BIN_GRID[largest]), gamma, float(levels[largest])
    criterion = _bins_criterion(n, epsilon, levels[admissible], AUTO_BIN_GRID[admissible], monotone)
    best = int(np.argmin(criterion))
    return int(AUTO_BIN_GRID[admissible][best]), gamma, float(levels[admissible][best])


def coverage_upper_bound(n, alpha, epsilon, n_bins, gamma, level, *, monotone=False):
    """Theorem 3 of paper 000 for scores without atoms, as its proof gives it.

    With ``L = log(m / (gamma alpha))`` and ``q' = q~ + c max(q~/(1 - q~), 1) L / (eps n)``,
    Lemma 1 gives ``#{[s] < s_hat} <= n q'`` with probability ``1 - gamma alpha``, hence
    ``s_hat <= Z_(floor(n q') + 1)`` and, with Lemma 2,
    ``P(cover) <= gamma alpha + (1 - gamma alpha) ((n q' + 1) / (n + 1) + p_max)``.
    The printed statement drops the ``+1`` of the ceiling and counts ``p_max`` twice;
    the bound here is the proof's (see docs, "Corrections"). Returns
    ``(bound at p_max = 0, slope in p_max)``, the bound capped at 1.
    """
    c = _slack_factor(monotone)
    log_term = math.log(n_bins / (gamma * alpha))
    upper_level = level + c * max(level / (1.0 - level), 1.0) * log_term / (epsilon * n)
    bound = gamma * alpha + (1.0 - gamma * alpha) * (n * upper_level + 1.0) / (n + 1)
    return min(1.0, bound), 1.0 - gamma * alpha


class ExponQ(QuantileMechanism):
    """Private conformal calibration with the exponential-mechanism quantile.

    Paper 000/001 (Angelopoulos, Bates, Zrnic, Jordan, "Private Prediction Sets"),
    Algorithm 3, with the sensitivity correction of DESIGN.md. Scores in [0, 1] are
    rounded up to a uniform grid of ``m`` bins and the exponential mechanism picks a
    grid edge near the inflated empirical quantile

    ``q~ = (n + 1)(1 - alpha) / (n (1 - gamma alpha)) + c log(m / (gamma alpha)) / (eps n)``

    (Eq. (3), ``c = 2``; ``c = 1`` with ``monotone=True``).

    Guarantees: pure ``epsilon``-DP of the calibration scores (Proposition 1 with the
    sensitivity-scaled utility) and marginal coverage at least ``1 - alpha``
    (Theorem 2), for any score distribution. Theorem 3 (as its proof gives it) bounds
    coverage from above; see :attr:`Calibration.coverage_upper_bound`.

    Parameters
    ----------
    epsilon : float
        Privacy budget of the calibration, > 0 and finite.
    n_bins : int or "auto", default="auto"
        Number of uniform bins ``m >= 2``. ``"auto"`` picks ``m*`` deterministically
        from ``(n, epsilon, alpha)`` (see :func:`exponq_parameters`).
    gamma : float or "auto", default="auto"
        Share of ``alpha`` given to the mechanism's failure probability, in (0, 1).
        ``"auto"`` uses ``gamma*`` of paper 000 Appendix C.
    monotone : bool, default=False
        Use the monotone exponential mechanism: halves the privacy slack in ``q~``. It
        is epsilon-DP under add/remove adjacency with ``n`` public, but only
        2 epsilon-DP under replace-one adjacency; the default scaling is epsilon-DP
        under both. See the user guide for the proof.

    Examples
    --------
    >>> import numpy as np
    >>> from privconf_sklearn.mechanisms import ExponQ
    >>> scores = np.random.default_rng(0).uniform(size=5000)
    >>> cal = ExponQ(epsilon=1.0).calibrate(scores, alpha=0.1, random_state=0)
    >>> cal.privacy.epsilon, cal.coverage_lower_bound
    (1.0, 0.9)
    >>> bool(0.9 < cal.threshold < 0.96)
    True
    """

    def __init__(
        self, epsilon: float = 1.0, *, n_bins="auto", gamma="auto", monotone: bool = False
    ):
        self.epsilon = epsilon
        self.n_bins = n_bins
        self.gamma = gamma
        self.monotone = monotone

    def _check_params(self) -> None:
        check_positive_finite(self.epsilon, "epsilon")
        if not (isinstance(self.n_bins, str) and self.n_bins == "auto"):
            if (
                not isinstance(self.n_bins, int | np.integer)
                or isinstance(self.n_bins, bool)
                or self.n_bins < 2
            ):
                raise ValueError(f"n_bins must be an integer >= 2 or 'auto'; got {self.n_bins!r}.")
        if not (isinstance(self.gamma, str) and self.gamma == "auto"):
            check_in_open_interval(self.gamma, "gamma")
        if not isinstance(self.monotone, bool | np.bool_):
            raise ValueError(f"monotone must be a bool; got {self.monotone!r}.")

    def privacy_guarantee(self) -> PrivacyGuarantee:
        """Pure epsilon-DP (see ``monotone`` for the adjacency)."""
        self._check_params()
        if self.monotone:
            return PrivacyGuarantee.pure(
                self.epsilon,
                adjacency="add/remove",
                description=(
                    "Monotone exponential mechanism over bin edges; 2*epsilon under replace-one."
                ),
            )
        return PrivacyGuarantee.pure(
            self.epsilon,
            adjacency="replace-one and add/remove",
            description="Exponential mechanism over bin edges with sensitivity-scaled utility.",
        )

    def resolve_parameters(self, n: int, alpha: float):
        """The ``(n_bins, gamma, q~)`` this mechanism uses for public ``(n, alpha)``.

        Returns ``n_bins = None`` when no admissible ``m`` reaches ``q~ < 1``.
        """
        self._check_params()
        return exponq_parameters(
            int(n),
            float(alpha),
            float(self.epsilon),
            bool(self.monotone),
            None if isinstance(self.n_bins, str) else int(self.n_bins),
            None if isinstance(self.gamma, str) else float(self.gamma),
        )

    def coverage_certificate(self, n_samples: int, alpha: float) -> CoverageCertificate:
        """``1 - alpha`` (Theorem 2) when ``q~ < 1``; infeasible otherwise."""
        n_bins, _, level = self.resolve_parameters(n_samples, alpha)
        if n_bins is None:
            return CoverageCertificate(
                1.0, feasible=False, reason=self._unreachable(n_samples, alpha, level)
            )
        return CoverageCertificate(1.0 - alpha)

    def _unreachable(self, n: int, alpha: float, level: float) -> str:
        return (
            f"the inflated level q~ = {level:.4f} >= 1 for n = {n}, epsilon = "
            f"{self.epsilon}, alpha = {alpha}: more calibration data or a larger "
            "epsilon is needed."
        )

    def _calibrate(
        self, scores: np.ndarray, alpha: float, groups, noise: NoiseSource
    ) -> Calibration:
        n = scores.shape[0]
        n_bins, gamma, level = self.resolve_parameters(n, alpha)
        if n_bins is None:
            return infeasible_calibration(
                type(self).__name__,
                n,
                alpha,
                self._unreachable(n, alpha, level),
                q_tilde=level,
                gamma=gamma,
                n_bins=None if isinstance(self.n_bins, str) else int(self.n_bins),
            )
        counts = bin_counts(scores, n_bins)
        log_probabilities = quantile_log_probabilities(
            counts,
            level,
            float(self.epsilon),
            scaling="monotone" if self.monotone else "paper",
        )
        edge = noise.categorical_from_log_weights(log_probabilities) + 1
        upper, slope = coverage_upper_bound(
            n, alpha, float(self.epsilon), n_bins, gamma, level, monotone=bool(self.monotone)
        )
        return Calibration(
            mechanism=type(self).__name__,
            threshold=edge / n_bins,
            n_samples=n,
            alpha=alpha,
            privacy=self.privacy_guarantee(),
            coverage_lower_bound=1.0 - alpha,
            coverage_upper_bound=upper,
            upper_bound_atom_slope=slope,
            target_level=level,
            details={
                "q_tilde": level,
                "n_bins": n_bins,
                "gamma": gamma,
                "monotone": bool(self.monotone),
                "n_bins_auto": isinstance(self.n_bins, str),
                "gamma_auto": isinstance(self.gamma, str),
            },
        )
