"""DP-APS: discrete Laplace noise on cumulative counts over a public grid.

"Contract Cards for Auditable Private Conformal Prediction" (anonymous authors, 2026):
the calibration backend of its Sec. 5, Theorem 5.1 (privacy and coverage),
Proposition 5.2 (the threshold-inflation certificate) and Remark 5.3. No public code
exists; this is an implementation from the paper, claiming no parity. The counts are
integers, so the noise is the integer-valued
:class:`~privconf_sklearn.privacy.DiscreteLaplaceMechanism` with l1 sensitivity ``B``
(``P(Z = z)`` proportional to ``exp(-epsilon |z| / B)``, sampled exactly), in place of
the paper's continuous Laplace noise; the grid size ``B`` is chosen from public
quantities by default (:func:`auto_n_bins`).
"""

from __future__ import annotations

import math
from fractions import Fraction
from functools import lru_cache
from numbers import Integral, Real

import numpy as np

from .._param_validation import Interval, StrOptions, check_alpha
from .._random import NoiseSource
from .._validation import split_conformal_rank
from ..privacy import DiscreteLaplaceMechanism, PrivacyGuarantee
from ._base import (
    Calibration,
    CoverageCertificate,
    QuantileMechanism,
    infeasible_calibration,
    monte_carlo_distribution,
)
from ._binning import bin_counts
from ._sparse_vector import (
    _OVERFLOW_TO_INFINITY,
    MIN_BETA,
    SparseVectorPlan,
    choose_plan,
    first_crossing,
    first_crossing_log_probabilities,
    offsets,
)
from ._statistics import ScoreStatistics

__all__ = [
    "DPAPS",
    "MAX_GRID_SIZE",
    "RELEASES",
    "SparseVectorPlan",
    "auto_n_bins",
    "certified_level",
    "choose_plan",
    "cumulative_counts",
    "dp_aps_offset",
    "first_crossing",
    "first_crossing_log_probabilities",
    "grid_quantile_index",
    "vector_crossing_log_probabilities",
    "vector_first_crossing",
]

#: Largest grid size ``B`` accepted: ``B`` noise draws and counts per calibration,
#: and an offset ``B log(B / beta) / epsilon`` that exceeds any realistic ``n`` long
#: before.
MAX_GRID_SIZE = 10**6


def cumulative_counts(scores: np.ndarray, n_bins: int) -> np.ndarray:
    """Cumulative counts ``N_b = #{i : s_i <= t_b}`` on the grid ``t_b = b / B``.

    Computed as the running sum of the bin counts of
    :func:`~privconf_sklearn.mechanisms.expon_q.bin_counts`, whose bin index agrees
    exactly with the floating-point test ``s <= b / B``.

    Parameters
    ----------
    scores : ndarray of shape (n,)
        Scores in [0, 1].
    n_bins : int
        Grid size ``B``.

    Returns
    -------
    ndarray of shape (n_bins,), dtype int64
        ``N_1, ..., N_B`` (``N_B = n``).
    """
    return np.cumsum(bin_counts(scores, n_bins))


def _count_noise(n_bins: int, epsilon: float) -> DiscreteLaplaceMechanism:
    """The discrete Laplace mechanism on the ``B`` cumulative counts (l1 sensitivity ``B``).

    Adding, removing or replacing one score changes each ``N_b`` by at most one, so the
    vector moves by at most ``B`` in l1 norm (Theorem 5.1, point 1).
    """
    return DiscreteLaplaceMechanism(epsilon, l1_sensitivity=n_bins)


def dp_aps_offset(n_bins: int, epsilon: float, beta: float) -> int:
    """Offset ``lambda``: the smallest integer with ``B P(|Z| > lambda) <= beta`` (Sec. 5).

    All ``B`` noises then stay within ``lambda`` with probability at least ``1 - beta``
    (union bound, proof of Theorem 5.1;
    :meth:`~privconf_sklearn.privacy.DiscreteLaplaceMechanism.tail_bound`). About the
    paper's ``B log(B / beta) / epsilon`` for continuous Laplace noise.
    """
    return _count_noise(n_bins, epsilon).tail_bound(beta, n_bins)


def certified_level(n: int, alpha: float, epsilon: float, beta: float, n_bins) -> np.ndarray:
    """Level certified by Proposition 5.2 on uniform scores: ``(k + 2 lambda) / n + 1 / B``.

    With probability ``1 - beta`` the threshold is at most ``t_q(ceil(k + 2 lambda))``,
    the first grid point with ``k + 2 lambda`` scores below it; on scores spread
    uniformly that is the empirical level ``(k + 2 lambda) / n`` plus at most one grid
    cell ``1 / B``. The offset grows like ``B log B``, the cell shrinks like ``1 / B``:
    :func:`auto_n_bins` minimises the sum. ``lambda`` is taken here in its continuous
    form ``B log(B / beta) / epsilon`` (smooth in ``B``), within one count of the
    integer :func:`dp_aps_offset` the mechanism uses.

    Parameters
    ----------
    n : int
        Calibration size.
    alpha, epsilon, beta : float
        Miscoverage, privacy and failure levels.
    n_bins : int or ndarray of int
        Grid size(s) ``B``.

    Returns
    -------
    ndarray
    """
    bins = np.asarray(n_bins, dtype=np.float64)
    offset = bins * np.log(bins / beta) / epsilon
    return (split_conformal_rank(n, alpha) + 2.0 * offset) / n + 1.0 / bins


def _largest_feasible_n_bins(n: int, rank: int, epsilon: float, beta: float) -> int | None:
    """Largest ``B`` in ``[2, MAX_GRID_SIZE]`` with ``k + lambda(B) <= n``, or None."""
    if rank + dp_aps_offset(2, epsilon, beta) > n:
        return None
    low, high = 2, MAX_GRID_SIZE
    if rank + dp_aps_offset(high, epsilon, beta) <= n:
        return high
    while high - low > 1:  # lambda(B) increases with B
        middle = (low + high) // 2
        if rank + dp_aps_offset(middle, epsilon, beta) <= n:
            low = middle
        else:
            high = middle
    return low


@lru_cache(maxsize=1024)
def auto_n_bins(n: int, alpha: float, epsilon: float, beta: float) -> int | None:
    """The grid size ``B`` of ``n_bins="auto"``, from public quantities only.

    ``B`` minimises :func:`certified_level` ``(k + 2 lambda(B)) / n + 1 / B`` over the
    integers ``B >= 2`` with ``k + lambda(B) <= n`` (the feasible grids, on which a noisy
    count can cross before the top of the grid). The objective is convex in ``B``
    (``B log B`` and ``1 / B`` are), so its continuous minimiser, the root of
    ``2 (log(B / beta) + 1) / (epsilon n) = 1 / B^2`` (found by bisection), is
    rounded to the better neighbouring integer and clipped to the feasible range.
    Roughly ``B ~ sqrt(n epsilon / (2 log(B / beta)))``: 11 at ``n = 2400``,
    ``epsilon = 1``, ``alpha = 0.1``. Deterministic and cached.

    Returns
    -------
    int or None
        ``B``, or None when even ``B = 2`` has ``k + lambda > n`` (infeasible).
    """
    rank = split_conformal_rank(n, alpha)
    largest = _largest_feasible_n_bins(n, rank, epsilon, beta)
    if largest is None:
        return None

    def slope(b: float) -> float:
        return 2.0 * (math.log(b / beta) + 1.0) / (epsilon * n) - 1.0 / (b * b)

    low, high = 1.0, float(MAX_GRID_SIZE)
    if slope(high) < 0.0:
        low = high
    while high - low > 1e-6 * high:
        middle = 0.5 * (low + high)
        if slope(middle) < 0.0:
            low = middle
        else:
            high = middle
    candidates = sorted({min(max(b, 2), largest) for b in (math.floor(low), math.ceil(low))})
    levels = certified_level(n, alpha, epsilon, beta, np.array(candidates))
    return int(candidates[int(np.argmin(levels))])


def vector_first_crossing(noisy_counts: np.ndarray, target: float) -> np.ndarray:
    """``b_hat = min{b : noisy N_b >= target}``, or ``B`` if there is none.

    Parameters
    ----------
    noisy_counts : ndarray of shape (..., B)
        Noisy cumulative counts; the last axis is the grid (any leading axes are
        independent runs).
    target : float
        ``k + lambda``.

    Returns
    -------
    ndarray of shape (...), dtype int
        1-based grid index ``b_hat``; the threshold is ``b_hat / B``.
    """
    reached = noisy_counts >= target
    first = np.argmax(reached, axis=-1) + 1
    return np.where(reached.any(axis=-1), first, noisy_counts.shape[-1])


@_OVERFLOW_TO_INFINITY
def vector_crossing_log_probabilities(
    counts: np.ndarray, target: float, noise: DiscreteLaplaceMechanism
) -> np.ndarray:
    """Exact ``log P(b_hat = b)``, ``b = 1..B``, of :func:`first_crossing`.

    With independent integer noises ``Z_b`` and gaps ``g_b = target - N_b``,
    ``P(b_hat = b) = prod_{j<b} P(Z_j < g_j) P(Z_b >= g_b)`` for ``b < B``, and
    ``b = B`` takes the remaining mass ``prod_{j<B} P(Z_j < g_j)``; for integer noise
    ``P(Z < g) = P(Z <= ceil(g) - 1)`` and ``P(Z >= g) = P(Z > ceil(g) - 1)``.

    Parameters
    ----------
    counts : ndarray of shape (B,)
        Exact cumulative counts.
    target : float
        ``k + lambda``.
    noise : DiscreteLaplaceMechanism
        The mechanism that adds the noise.

    Returns
    -------
    ndarray of shape (B,)
    """
    below_gaps = np.ceil(target - np.asarray(counts, dtype=np.float64)) - 1.0
    log_miss = noise.noise_log_cdf(below_gaps)
    log_reach = noise.noise_log_sf(below_gaps)
    prefix = np.r_[0.0, np.cumsum(log_miss[:-1])]
    log_probabilities = prefix + log_reach
    log_probabilities[-1] = prefix[-1]
    return log_probabilities


def grid_quantile_index(counts: np.ndarray, rank: float) -> int:
    """``q(r) = min{b : N_b >= r}``, or ``B`` if there is none (Proposition 5.2)."""
    index = int(np.searchsorted(counts, rank, side="left")) + 1
    return min(index, counts.shape[0])


#: Releases of :class:`DPAPS`, the default first.
RELEASES = ("sparse_vector", "vector")


class DPAPS(QuantileMechanism):
    """Private conformal calibration from the cumulative counts of a public grid (DP-APS).

    "Contract Cards for Auditable Private Conformal Prediction" (2026), Sec. 5: on the
    public grid ``t_b = b / B`` (``b = 1..B``) with cumulative counts
    ``N_b = #{s_i <= t_b}`` and ``k = ceil((n + 1)(1 - alpha))``, the threshold is the
    first ``t_b`` whose noisy count reaches ``k`` plus an offset ``lambda``, else
    ``t_B = 1``. Two releases of the noisy counts:

    - ``release="sparse_vector"`` (default): AboveThreshold with integer noises,
      ``b_hat = min{b : N_b + nu_b >= k + lambda + rho}``, ``rho ~ DLap(1 / epsilon_1)``
      and ``nu_b ~ DLap(1 / epsilon_2)``, ``epsilon_1 + epsilon_2 = epsilon``
      (:mod:`~privconf_sklearn.mechanisms._sparse_vector`; Lyu, Su and Li 2017 for
      monotone queries). ``lambda`` is the smallest integer whose exact worst-case
      failure probability is at most ``beta``; it grows like ``log(B) / epsilon``, so
      fine grids are affordable.
    - ``release="vector"``: the paper's release with integer noise, independent discrete
      Laplace noise of scale ``B / epsilon`` on all ``B`` counts (l1 sensitivity ``B``;
      the integer counterpart of the paper's Laplace(``B / epsilon``)) and the
      union-bound offset ``lambda``, the smallest integer with
      ``B P(|Z| > lambda) <= beta`` (about ``B log(B / beta) / epsilon``, growing like
      ``B log(B)``).

    Both releases draw their noise exactly
    (:class:`~privconf_sklearn.privacy.DiscreteLaplaceMechanism`, no floating-point
    sampling), so the privacy proofs hold for the released threshold itself.

    **Privacy.** Pure ``epsilon``-DP of the threshold under replace-one and add/remove
    adjacency, for either release (the counts move by at most one each, all in the same
    direction; proofs in the user guide). ``n`` is treated as public.

    **Coverage.** With probability at least ``1 - beta`` over the noise the threshold
    has ``N_b >= k``, so it is at least the ``k``-th smallest score and
    ``P(cover) >= k / (n + 1) - beta >= (1 - alpha) - beta`` marginally (Theorem 5.1).
    The reported ``coverage_lower_bound`` is ``k / (n + 1) - beta``.

    **Infeasible requests.** If ``k + lambda > n`` no noisy count below the top of the
    grid can be expected to reach the target: the threshold is 1, the data are not read
    (zero privacy loss) and ``reason`` says so. :meth:`min_informative_samples` gives
    the smallest ``n`` that avoids it.

    **Grid size.** ``n_bins="auto"`` (default) chooses ``B`` (and, for the sparse vector
    release, the threshold share ``epsilon_1 / epsilon``) from ``(n, epsilon, alpha,
    beta)`` to minimise the level certified by Proposition 5.2 on uniform scores;
    ``n_bins=20`` is the paper's grid.

    **Owner diagnostics (NOT covered by epsilon).** ``Calibration.owner_diagnostics``
    records the certificate width ``W = t_{q(r)} - t_{q(k)}`` of Proposition 5.2 (the
    threshold lies in ``[t_{q(k)}, t_{q(r)}]`` with high probability; ``r = k + lambda
    + u`` for the sparse vector, ``ceil(k + 2 lambda)`` for the vector release), the
    non-private grid threshold ``t_{q(k)}`` and the observed inflation. They are
    computed from the exact counts: releasing any of them is an additional,
    unaccounted disclosure (the paper's Sec. 5 and Sec. 8). ``Calibration.details``
    holds only public quantities.

    Parameters
    ----------
    epsilon : float
        Privacy budget of the calibration, > 0 and finite. No default: the budget is
        always a visible choice.
    n_bins : int or "auto", default="auto"
        Grid size ``B``, an integer in ``[2, 10^6]``, or ``"auto"``.
    beta : float, default=1e-3
        Failure probability of the noise bound, in ``[2e-20, 1)``; the coverage guarantee
        loses ``beta``. The sparse vector certificate adds the mass ``1e-20`` of the
        threshold noise it leaves out of its exact sums, so it reaches no ``beta`` below
        that; the bound ``2e-20``
        (:data:`~privconf_sklearn.mechanisms._sparse_vector.MIN_BETA`) keeps half of
        ``beta`` for the noise.
    release : {"sparse_vector", "vector"}, default="sparse_vector"
        How the counts are privatised (above).

    Examples
    --------
    >>> import numpy as np
    >>> from privconf_sklearn.mechanisms import DPAPS
    >>> scores = np.random.default_rng(0).uniform(size=20000)
    >>> cal = DPAPS(epsilon=1.0).calibrate(scores, alpha=0.1, random_state=0)
    >>> cal.privacy.epsilon, round(cal.coverage_lower_bound, 4), cal.details["n_bins"]
    (1.0, 0.899, 12915)
    >>> bool(0.89 <= cal.threshold < 0.91)
    True
    """

    _parameter_constraints = {
        "epsilon": [Interval(Real, 0, None, closed="neither")],
        "n_bins": [StrOptions({"auto"}), Interval(Integral, 2, MAX_GRID_SIZE, closed="both")],
        "beta": [Interval(Real, MIN_BETA, 1, closed="left")],
        "release": [StrOptions(set(RELEASES))],
    }

    def __init__(self, epsilon, *, n_bins="auto", beta: float = 1e-3, release="sparse_vector"):
        self.epsilon = epsilon
        self.n_bins = n_bins
        self.beta = beta
        self.release = release

    _DESCRIPTIONS = {
        "sparse_vector": "AboveThreshold (sparse vector technique, monotone queries) over the "
        "cumulative counts of a public grid, with discrete Laplace noise sampled exactly. "
        "Covers the threshold only: the certificate-width owner diagnostics are computed "
        "from exact counts.",
        "vector": "Discrete Laplace noise of scale B/epsilon on the B cumulative counts of a "
        "public grid (l1 sensitivity B), sampled exactly. Covers the threshold only: the "
        "certificate-width owner diagnostics are computed from exact counts and are not "
        "covered.",
    }

    def _privacy_guarantee(self, params: dict) -> PrivacyGuarantee:
        """Pure epsilon-DP of the threshold (Theorem 5.1); diagnostics are not covered."""
        return PrivacyGuarantee.pure(
            params["epsilon"],
            adjacency="replace-one and add/remove",
            description=self._DESCRIPTIONS[params["release"]],
        )

    def resolve_plan(self, n: int, alpha: float) -> SparseVectorPlan | None:
        """The public plan ``(B, share, lambda, u)`` for ``(n, alpha)``; None if infeasible.

        For ``release="vector"``: the share is 0 and ``lambda``, ``u`` are 0 (the
        offset is the integer union bound :func:`dp_aps_offset`, the certificate
        rank ``ceil(k + 2 lambda)``).
        """
        alpha = check_alpha(alpha, self._method("resolve_plan"))
        return self._plan(self._validated_params(), n, alpha)

    def _plan(self, params: dict, n: int, alpha: float) -> SparseVectorPlan | None:
        epsilon, beta = params["epsilon"], params["beta"]
        rank = split_conformal_rank(n, alpha)
        fixed = None if params["n_bins"] == "auto" else params["n_bins"]
        if params["release"] == "sparse_vector":
            return choose_plan(int(n), rank, epsilon, beta, fixed)
        n_bins = auto_n_bins(int(n), float(alpha), epsilon, beta) if fixed is None else fixed
        if n_bins is None or rank + dp_aps_offset(n_bins, epsilon, beta) > n:
            return None
        return SparseVectorPlan(n_bins, Fraction(0), 0, 0)

    def resolve_n_bins(self, n: int, alpha: float) -> int | None:
        """The grid size ``B`` used for public ``(n, alpha)``; None when infeasible."""
        alpha = check_alpha(alpha, self._method("resolve_n_bins"))
        plan = self._plan(self._validated_params(), n, alpha)
        return None if plan is None else plan.n_bins

    def _feasible(self, params: dict, n_samples: int, alpha: float) -> bool:
        """Fast for the automatic sparse vector grid: two points, one query, decide."""
        if params["release"] != "sparse_vector" or params["n_bins"] != "auto":
            return self._plan(params, n_samples, alpha) is not None
        # B = 2 with no threshold noise has the smallest offset of all plans.
        lower, _upper = offsets(2, params["epsilon"], Fraction(0), params["beta"])
        return split_conformal_rank(n_samples, alpha) + lower <= n_samples

    def _unreachable(self, params: dict, n: int, alpha: float) -> str:
        """Why ``(n, alpha)`` is infeasible."""
        k = split_conformal_rank(n, alpha)
        needed = self._needed_samples(params, alpha)
        if k > n:
            return (
                f"the conformal rank k = ceil((n + 1)(1 - alpha)) = {k} exceeds n = {n} for "
                f"alpha = {alpha}: {needed} are needed."
            )
        return (
            f"k + lambda exceeds n = {n} (k = {k}) for every grid: the noisy counts would "
            f"essentially never reach the target before the top of the grid. "
            f"{needed[0].upper()}{needed[1:]} are needed at epsilon = {params['epsilon']}, or "
            "a larger epsilon."
        )

    def _coverage_certificate(
        self, params: dict, n_samples: int, alpha: float
    ) -> CoverageCertificate:
        """``k / (n + 1) - beta >= (1 - alpha) - beta`` (Theorem 5.1).

        Infeasible if ``k + lambda > n`` (including ``k > n``).
        """
        if not self._feasible(params, n_samples, alpha):
            return CoverageCertificate(
                1.0, feasible=False, reason=self._unreachable(params, n_samples, alpha)
            )
        k = split_conformal_rank(n_samples, alpha)
        return CoverageCertificate(max(0.0, k / (n_samples + 1) - params["beta"]))

    def _target(self, params: dict, n: int, alpha: float, plan: SparseVectorPlan) -> float:
        """``k + lambda``, an integer: the sparse vector's offset or the union bound's."""
        k = split_conformal_rank(n, alpha)
        if params["release"] == "sparse_vector":
            return float(k + plan.offset)
        return float(k + dp_aps_offset(plan.n_bins, params["epsilon"], params["beta"]))

    def threshold_distribution(self, scores, alpha: float) -> tuple[np.ndarray, np.ndarray]:
        """The exact distribution of the threshold :meth:`calibrate` releases.

        For audits and tests: it reads the scores, spends no budget and is **not**
        private. For the sparse vector release the sum over the threshold noise is
        exact up to an omitted mass below ``1e-20`` per grid point
        (:func:`~._sparse_vector.first_crossing_log_probabilities`).

        Returns
        -------
        values : ndarray
            The grid points ``b / B`` (``[1.0]`` when the request is infeasible).
        log_probabilities : ndarray
            ``log P(threshold = values[b])``.
        """
        scores, alpha, params = self._check_calibration_input(
            scores, alpha, "threshold_distribution"
        )
        return self._threshold_distribution(params, scores, alpha)

    def _threshold_distribution(self, params: dict, scores: np.ndarray, alpha: float):
        return self._distribution(params, scores, alpha, relative=True)

    def _forecast_distribution(self, params: dict, scores: np.ndarray, alpha: float):
        """:meth:`threshold_distribution` to an absolute ``1e-20``, at a cost free of ``n``."""
        try:
            return self._distribution(params, scores, alpha, relative=False)
        except ValueError:  # too large to sum: a seeded Monte Carlo of the release
            return monte_carlo_distribution(self, params, scores, alpha)

    def _distribution(self, params: dict, scores: np.ndarray, alpha: float, *, relative: bool):
        n = scores.shape[0]
        plan = self._plan(params, n, alpha)
        if plan is None:
            return np.ones(1), np.zeros(1)
        counts = cumulative_counts(scores, plan.n_bins)
        target = self._target(params, n, alpha, plan)
        if params["release"] == "sparse_vector":
            log_probabilities = first_crossing_log_probabilities(
                counts, int(target), params["epsilon"], plan.threshold_share, relative=relative
            )
        else:
            noise = _count_noise(plan.n_bins, params["epsilon"])
            log_probabilities = vector_crossing_log_probabilities(counts, target, noise)
        return np.arange(1, plan.n_bins + 1) / plan.n_bins, log_probabilities

    def _release_index(
        self, params: dict, counts, target, plan: SparseVectorPlan, noise: NoiseSource
    ) -> int:
        if params["release"] == "sparse_vector":
            return first_crossing(
                counts, int(target), params["epsilon"], plan.threshold_share, noise
            )
        count_noise = _count_noise(plan.n_bins, params["epsilon"])
        return int(vector_first_crossing(count_noise.randomise(counts, noise), target))

    def _certificate_rank(self, params: dict, n: int, alpha: float, plan: SparseVectorPlan) -> int:
        k = split_conformal_rank(n, alpha)
        if params["release"] == "sparse_vector":
            return k + plan.offset + plan.upper_offset
        return math.ceil(2.0 * self._target(params, n, alpha, plan) - k)

    def _calibrate_from_statistics(
        self, params: dict, statistics: ScoreStatistics, alpha: float, noise: NoiseSource
    ) -> Calibration:
        n = statistics.n_samples
        beta = params["beta"]
        k = split_conformal_rank(n, alpha)
        plan = self._plan(params, n, alpha)
        if plan is None:
            # No data read: nothing data-dependent in the record.
            return infeasible_calibration(
                type(self).__name__,
                n,
                alpha,
                self._unreachable(params, n, alpha),
                rank=k,
                n_bins=None if params["n_bins"] == "auto" else params["n_bins"],
                beta=beta,
                release=params["release"],
            )
        target = self._target(params, n, alpha, plan)
        counts = np.cumsum(statistics.bin_counts(plan.n_bins))  # cumulative_counts
        index = self._release_index(params, counts, target, plan, noise)
        threshold = index / plan.n_bins
        certificate_rank = self._certificate_rank(params, n, alpha, plan)
        grid_threshold = grid_quantile_index(counts, k) / plan.n_bins
        upper_threshold = grid_quantile_index(counts, certificate_rank) / plan.n_bins
        reason = ""
        if index == plan.n_bins:
            reason = (
                f"no noisy cumulative count below the top of the {plan.n_bins}-point grid "
                f"reached k + lambda = {target:.1f}: the threshold is the top of the range."
            )
        return Calibration(
            mechanism=type(self).__name__,
            threshold=threshold,
            n_samples=n,
            alpha=alpha,
            privacy=self._privacy_guarantee(params),
            coverage_lower_bound=max(0.0, k / (n + 1) - beta),
            target_level=min(1.0, target / n),
            reason=reason,
            details={
                "release": params["release"],
                "rank": k,
                "offset": target - k,
                "n_bins": plan.n_bins,
                "beta": beta,
                "target_count": target,
                "certificate_rank": certificate_rank,
                "threshold_share": float(plan.threshold_share),
                "n_bins_auto": params["n_bins"] == "auto",
            },
            owner_diagnostics={
                "grid_threshold": grid_threshold,
                "certificate_width": upper_threshold - grid_threshold,
                "observed_inflation": threshold - grid_threshold,
            },
        )
