"""P-COQS: private conformal calibration by noisy binary search.

Romanus and Molinari, "Differentially Private Conformal Prediction via Quantile Binary
Search" (2025), Algorithms 1-2, Proposition 1 and Theorem 2, with the corrections listed
in the user guide:

- the guarantee is rho-zCDP (reported with its (epsilon, delta) conversion), not pure
  epsilon-DP; the user states ``rho`` or ``(epsilon, delta)``. The ``N`` count queries
  are a :class:`~privconf_sklearn.privacy.GaussianQueryComposer`;
- exactly ``N`` noisy count queries (the printed ``while i <= N`` makes ``N + 1`` with
  noise calibrated for ``N``), and no rounding of the output;
- ``N`` is capped where the halved interval reaches the floating-point spacing, and
  scores outside the public sub-range ``bounds`` are clipped and counted (as owner
  diagnostics), not dropped.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from functools import lru_cache
from numbers import Real

import numpy as np

from .._param_validation import Bounds, Interval
from .._random import NoiseSource
from .._validation import split_conformal_rank
from ..privacy import GaussianQueryComposer, PrivacyGuarantee
from ._base import (
    Calibration,
    CoverageCertificate,
    QuantileMechanism,
    infeasible_calibration,
)
from ._statistics import RankCounter, ScoreStatistics, _RankCounter

__all__ = [
    "PCOQS",
    "SearchPlan",
    "noisy_binary_search",
    "query_count",
    "search_plan",
    "search_with_counter",
]

#: Delta of the (epsilon, delta) conversion reported when only ``rho`` is stated.
DEFAULT_REPORT_DELTA = 1e-5


def query_count(lower: float, upper: float, step: float) -> tuple[int, int]:
    """Number of noisy count queries of the binary search on ``[lower, upper]``.

    Romanus and Molinari 2025, Algorithm 1: ``N = ceil(log2((upper - lower) / step))``,
    the number of halvings after which the interval is at most ``step`` wide, computed
    exactly (powers of two by :func:`math.ldexp`, no rounding of ``log2``). Once the
    interval is one floating-point spacing wide (the spacing at
    ``max(|lower|, |upper|)``, ``2**-52`` on [0, 1]) a midpoint can no longer fall
    strictly inside it, so further queries would spend privacy without moving the
    threshold; ``N`` is capped at that number of halvings (52 on [0, 1]).

    Parameters
    ----------
    lower, upper : float
        Public search range, ``lower < upper``.
    step : float
        Requested final interval width, ``0 < step < upper - lower``.

    Returns
    -------
    n_queries : int
        ``N`` actually used (after the cap).
    n_requested : int
        ``ceil(log2((upper - lower) / step))`` before the cap.
    """
    width = upper - lower
    # With width = w 2**e and step = s 2**f (w, s in [1/2, 1)), width / step lies in
    # (2**(e - f - 1), 2**(e - f + 1)) and is at most 2**(e - f) exactly when w <= s:
    # exact, and no quotient to overflow however small step is.
    width_mantissa, width_exponent = math.frexp(width)
    step_mantissa, step_exponent = math.frexp(step)
    halvings = width_exponent - step_exponent + (width_mantissa > step_mantissa)
    requested = max(1, halvings)
    spacing = float(np.spacing(max(abs(lower), abs(upper))))
    resolvable = 0
    while math.ldexp(width, -(resolvable + 1)) >= spacing:
        resolvable += 1
    return min(requested, resolvable), requested


@dataclass(frozen=True)
class SearchPlan:
    """Everything P-COQS fixes from its parameters before reading data.

    Attributes
    ----------
    composer : GaussianQueryComposer
        The ``N`` Gaussian count queries (sensitivity 1) and their accounting.
    rho : float
        zCDP parameter of the whole search.
    epsilon, delta : float
        The (epsilon, delta)-DP statement reported with it (exact Gaussian conversion).
    lower, upper : float
        Public search range ``[a, b]``.
    n_queries : int
        Number ``N`` of noisy count queries.
    n_queries_requested : int
        ``ceil(log2((b - a) / step))`` before the floating-point cap.
    resolution : float
        Width ``(b - a) / 2**N`` of the final interval.
    noise_sd : float
        ``sqrt(N / (2 rho))``: each query is ``(1 / (2 sigma^2)) = rho / N``-zCDP.
    tau : float
        Rank error of Proposition 1, ``sqrt(N / rho * log(2 N / beta))``.
    rank_inflation : float
        One-sided rank slack of the inflated variant, ``sigma * Phi^{-1}(1 - beta / N)``
        (:meth:`GaussianQueryComposer.upper_tail_bound
        <privconf_sklearn.privacy.GaussianQueryComposer.upper_tail_bound>`: a union
        bound over the ``N`` queries).
    beta : float
        Failure probability of the rank-error bounds.
    """

    composer: GaussianQueryComposer
    rho: float
    epsilon: float
    delta: float
    lower: float
    upper: float
    n_queries: int
    n_queries_requested: int
    resolution: float
    noise_sd: float
    tau: float
    rank_inflation: float
    beta: float


@lru_cache(maxsize=256)
def search_plan(
    rho: float | None,
    epsilon: float | None,
    delta: float,
    lower: float,
    upper: float,
    step: float,
    beta: float,
) -> SearchPlan:
    """The :class:`SearchPlan` of validated parameters (public quantities only, cached).

    With ``rho`` given, epsilon is the exact Gaussian conversion at ``delta``; with
    ``(epsilon, delta)`` given, rho is the largest whose Gaussian composition is
    (epsilon, delta)-DP (:class:`~privconf_sklearn.privacy.GaussianQueryComposer`).
    """
    n_queries, requested = query_count(lower, upper, step)
    composer = GaussianQueryComposer(n_queries, rho=rho, epsilon=epsilon, delta=delta)
    return SearchPlan(
        composer=composer,
        rho=composer.rho,
        epsilon=composer.epsilon,
        delta=delta,
        lower=lower,
        upper=upper,
        n_queries=n_queries,
        n_queries_requested=requested,
        resolution=math.ldexp(upper - lower, -n_queries),
        noise_sd=composer.noise_sd,
        tau=math.sqrt(n_queries / composer.rho * math.log(2.0 * n_queries / beta)),
        rank_inflation=composer.upper_tail_bound(beta),
        beta=beta,
    )


def noisy_binary_search(
    scores: np.ndarray, target: float, lower: float, upper: float, noise_values: np.ndarray
) -> tuple[float, bool]:
    """Algorithm 1 of Romanus and Molinari 2025 with exactly ``len(noise_values)`` queries.

    Query ``i`` asks ``c_i = #{s <= mid_i} + noise_values[i]`` at the midpoint of the
    current interval; ``c_i >= target`` keeps the lower half (``right <- mid``),
    otherwise the upper half (``left <- mid``). The release is ``right``, the last
    midpoint whose noisy count reached the target: the paper's final midpoint is at
    most half a ``step`` lower, and ``right`` is the point the coverage argument
    certifies whatever the ties in the scores. If no query reached the target the
    release is 1, the top of the public range (not ``upper``, which no count
    certified when scores lie above it).

    Parameters
    ----------
    scores : ndarray of shape (n,)
        Calibration scores in [0, 1] (not clipped: for midpoints in ``(lower, upper)``
        the counts of raw and clipped scores are equal).
    target : float
        Rank the noisy counts are compared with.
    lower, upper : float
        Public search range.
    noise_values : ndarray of shape (N,)
        One Gaussian noise value per query, drawn before the search.

    Returns
    -------
    threshold : float
        The released threshold.
    certified : bool
        Whether some query reached the target (else the threshold is 1).
    """
    return search_with_counter(
        _RankCounter(scores, lower, upper), target, lower, upper, noise_values
    )


def search_with_counter(
    counter: RankCounter, target: float, lower: float, upper: float, noise_values: np.ndarray
) -> tuple[float, bool]:
    """:func:`noisy_binary_search` with the exact counts asked of ``counter``.

    The counts are the only thing the search reads from the scores, so any exact
    :class:`~privconf_sklearn.mechanisms.RankCounter` (in memory, or over a cluster)
    gives the same release for the same noise.
    """
    left, right = lower, upper
    certified = False
    for noise_value in noise_values.tolist():
        middle = 0.5 * (left + right)
        count = counter.count_at_most(middle)
        keep_lower_half = count + noise_value >= target
        counter.narrow(keep_lower_half, count)
        if keep_lower_half:
            right, certified = middle, True
        else:
            left = middle
    return (right if certified else 1.0), certified


class PCOQS(QuantileMechanism):
    """Private conformal calibration by noisy binary search (P-COQS).

    Romanus and Molinari, "Differentially Private Conformal Prediction via Quantile
    Binary Search" (2025).

    The threshold is found by bisection of the public range ``bounds = [a, b]``: each
    of exactly ``N = ceil(log2((b - a) / step))`` steps asks the noisy count
    ``#{s_i <= mid} + N(0, N / (2 rho))`` and keeps the lower half when it reaches the
    target rank ``r = ceil((n + 1)(1 - alpha))`` (Algorithm 1). ``N`` is capped at the
    floating-point resolution of ``[a, b]`` (52 halvings on [0, 1];
    ``details["n_queries_capped"]``). The release is the upper end of the
    final interval, unrounded, or 1 (the top of the public range) if no noisy count
    reached the target (:func:`noisy_binary_search`).

    **Privacy.** A count ``#{s_i <= t}`` changes by at most 1 when one score is added,
    removed or replaced, and the target rank moves by at most 1 when ``n`` changes by
    one, so each comparison is a Gaussian mechanism of sensitivity 1 and noise
    ``sigma = sqrt(N / (2 rho))``: ``rho / N``-zCDP and ``(1 / sigma)``-Gaussian DP. The
    ``N`` adaptive queries compose to rho-zCDP (Proposition 1) and, exactly, to
    ``mu = sqrt(2 rho)``-Gaussian DP (Dong, Roth and Su 2022, Corollary 3.3); the
    threshold is post-processing. The reported epsilon at ``delta`` is the exact
    (epsilon, delta) curve of ``mu``-GDP (analytic Gaussian, Balle and Wang 2018),
    valid because the mechanism is Gaussian, and tighter than the generic zCDP
    conversions (:class:`~privconf_sklearn.privacy.GaussianQueryComposer`). This is not
    pure epsilon-DP: the paper's experiments set ``rho = eps^2 / 2`` and call it eps-DP,
    which is wrong (see the user guide, "Corrections"); ``rho = 0.5`` is
    (4.38, 1e-5)-DP. The ``BudgetAccountant`` records (epsilon, delta).

    **Coverage, default (``inflated=False``).** Let ``W_i`` be the query noises and ``E``
    the event ``|W_i| <= tau`` for all ``i``, with Proposition 1's
    ``tau = sqrt(N / rho * log(2 N / beta))``; ``P(E) >= 1 - beta``. The noise is
    drawn independently of the data, and on ``E`` every query that kept the lower half
    had ``#{s <= mid} >= r - tau``, so the threshold is at least the
    ``ceil(r - tau)``-th smallest score (or is 1). Hence, with probability at least
    ``1 - beta`` over the noise, coverage (over calibration and test data, given the
    noise) is at least ``ceil(r - tau) / (n + 1) >= 1 - alpha - tau / (n + 1)``.
    Theorem 2's ``1 - alpha - tau / (n + 1)`` is the reported ``coverage_lower_bound``,
    with ``lower_bound_confidence = 1 - beta``; it is an approximate guarantee, and the
    marginal coverage (averaging over the noise too) is only guaranteed to exceed it
    minus ``beta``.

    Theorem 2's upper bound is not a certificate: on ``E`` every query that kept the
    upper half had ``#{s <= mid} < target + tau``, so the threshold is below the
    ``ceil(target + tau)``-th smallest score plus one final interval; coverage is then
    at most ``ceil(target + tau) / (n + 1)`` plus the score mass of an interval of
    width ``resolution``, for continuous scores with no mass at or below ``a`` and
    ``b = 1``. ``details["approximate_upper_bound"]`` records
    ``min(1, ceil(target + tau) / (n + 1))`` (Theorem 2's
    ``1 - alpha + (tau + 1) / (n + 1)`` up to the rounding of ``r + tau`` it omits).

    **Coverage, rank-inflated (``inflated=True``).** The target becomes
    ``r + tau_1`` with ``tau_1 = sigma * Phi^{-1}(1 - beta / N)``. Proof of marginal
    coverage ``>= r / (n + 1) - beta >= 1 - alpha - beta``: let ``E_1`` be the event
    ``W_i <= tau_1`` for all ``i``; each ``W_i ~ N(0, sigma^2)`` exceeds ``tau_1`` with
    probability exactly ``beta / N``, so ``P(not E_1) <= beta`` by the union bound,
    whatever the data and however the queries adapt. On ``E_1`` a query that kept the
    lower half had ``#{s <= mid} + W_i >= r + tau_1``, hence ``#{s <= mid} >= r``; the
    threshold is such a midpoint or 1, so it is at least the ``r``-th smallest score
    ``s_(r)``. Then ``P(cover) >= P({s_test <= s_(r)} and E_1) >= P(s_test <= s_(r)) -
    P(not E_1) >= r / (n + 1) - beta``, the middle step by exchangeability (the rank of
    ``s_test`` among the ``n + 1`` scores is uniform, ties broken at random). This
    bound holds marginally, so ``lower_bound_confidence = 1``, and P-COQS can enter a
    contract with a formal lower bound. Only the upper tail of the noise matters, so
    ``tau_1`` uses the exact one-sided Gaussian quantile and is smaller than ``tau``
    (about 23 against 28 at ``rho = 0.5``, ``N = 34``, ``beta = 1e-3``). Trade-off:
    the sets are larger (the empirical level rises by ``tau_1 / n``, 1% at
    ``n = 2400``, ``rho = 0.5``), and the guarantee loses ``beta``; if
    ``r + tau_1 > n`` the request is infeasible (threshold 1, no data read).

    If ``r > n`` the level is unreachable: the threshold is 1 and the data are not
    read. The calibration size ``n`` is treated as public. If no noisy count reaches the
    target the release is 1 as well, with a warning (``reason`` says so).

    Parameters
    ----------
    rho : float, default=None
        zCDP budget of the calibration, > 0. Give either ``rho`` or ``epsilon``. The
        budget is keyword-only: ``PCOQS(1.0)`` would read as ``rho = 1``, which is about
        ``(6.6, 1e-5)``-DP, not 1-DP, so it is refused.
    epsilon : float, default=None
        (epsilon, delta)-DP budget; the mechanism then runs with the largest rho whose
        Gaussian composition is (epsilon, delta)-DP. Requires ``delta``.
    delta : float, default=None
        In (0, 1). Required with ``epsilon``; with ``rho`` it is the delta of the
        reported conversion (default ``1e-5``).
    bounds : tuple of float, default=(0, 1)
        Public search range ``(a, b)`` inside [0, 1], ``a < b``. Scores outside are
        clipped to it: counted at ``a`` (below) or above every midpoint (above); their
        numbers are in ``owner_diagnostics`` (data-dependent, not private).
    step : float, default=1e-10
        Final interval width (the paper's ``delta``), in ``(0, b - a)``.
    beta : float, default=1e-3
        Failure probability of the rank-error bounds, in (0, 1).
    inflated : bool, default=False
        Raise the target rank by ``tau_1`` for a marginal lower bound
        ``1 - alpha - beta`` (see above).

    Examples
    --------
    >>> import numpy as np
    >>> from privconf_sklearn.mechanisms import PCOQS
    >>> scores = np.random.default_rng(0).uniform(size=5000)
    >>> cal = PCOQS(rho=0.5).calibrate(scores, alpha=0.1, random_state=0)
    >>> cal.privacy.notion, cal.privacy.rho, round(cal.privacy.epsilon, 2)
    ('zcdp', 0.5, 4.38)
    >>> cal.details["n_queries"], bool(0.88 < cal.threshold < 0.92)
    (34, True)
    """

    def __init__(
        self,
        *,
        rho: float | None = None,
        epsilon: float | None = None,
        delta: float | None = None,
        bounds=(0.0, 1.0),
        step: float = 1e-10,
        beta: float = 1e-3,
        inflated: bool = False,
    ):
        self.rho = rho
        self.epsilon = epsilon
        self.delta = delta
        self.bounds = bounds
        self.step = step
        self.beta = beta
        self.inflated = inflated

    _parameter_constraints = {
        "rho": [None, Interval(Real, 0, None, closed="neither")],
        "epsilon": [None, Interval(Real, 0, None, closed="neither")],
        "delta": [None, Interval(Real, 0, 1, closed="neither")],
        "step": [Interval(Real, 0, None, closed="neither")],
        "beta": [Interval(Real, 0, 1, closed="neither")],
        "inflated": ["boolean"],
        "bounds": [Bounds(0.0, 1.0)],
    }

    # ------------------------------------------------------------ parameters
    def _validated_params(self) -> dict:
        """The parameters, validated, with the :class:`SearchPlan` they fix (``"plan"``)."""
        params = super()._validated_params()
        if (params["rho"] is None) == (params["epsilon"] is None):
            raise ValueError(
                "PCOQS needs exactly one privacy budget: rho (zCDP) or epsilon (with "
                f"delta); got rho={self.rho!r}, epsilon={self.epsilon!r}."
            )
        if params["epsilon"] is not None and params["delta"] is None:
            raise ValueError(
                "PCOQS(epsilon=...) needs delta: P-COQS is (epsilon, delta)-DP, never "
                "pure epsilon-DP. Give delta in (0, 1), or state rho instead."
            )
        delta = DEFAULT_REPORT_DELTA if params["delta"] is None else params["delta"]
        lower, upper = params["bounds"]
        if params["step"] >= upper - lower:
            raise ValueError(
                f"PCOQS: step must be smaller than the width b - a = {upper - lower!r} of "
                f"bounds; got {self.step!r}."
            )
        params["plan"] = search_plan(
            params["rho"], params["epsilon"], delta, lower, upper, params["step"], params["beta"]
        )
        return params

    def resolve_plan(self) -> SearchPlan:
        """Validate the parameters and return the (cached) :class:`SearchPlan`.

        Everything the search fixes before reading data: the number of queries, the
        noise, the privacy accounting and the rank slacks.
        """
        return self._validated_params()["plan"]

    # ---------------------------------------------------------- guarantees
    def _privacy_guarantee(self, params: dict) -> PrivacyGuarantee:
        """rho-zCDP, reported with the exact (epsilon, delta) of its Gaussian composition."""
        return params["plan"].composer.privacy_guarantee()

    def _target(self, plan: SearchPlan, rank: int) -> float:
        """The rank the noisy counts are compared with: ``r``, or ``r + tau_1`` if inflated."""
        return rank + plan.rank_inflation if self.inflated else float(rank)

    def _feasible(self, params: dict, n_samples: int, alpha: float) -> bool:
        plan = params["plan"]
        rank = split_conformal_rank(n_samples, alpha)
        return rank <= n_samples and self._target(plan, rank) <= n_samples

    def _unreachable(self, params: dict, n: int, alpha: float, rank: int) -> str | None:
        """Why ``(n, alpha)`` cannot be calibrated, or None."""
        if self._feasible(params, n, alpha):
            return None
        plan = params["plan"]
        needed = self._needed_samples(params, alpha)
        if rank > n:
            return (
                f"the conformal rank ceil((n + 1)(1 - alpha)) = {rank} exceeds n = {n} for "
                f"alpha = {alpha}: {needed} are needed."
            )
        return (
            f"the inflated target rank r + tau_1 = {rank} + {plan.rank_inflation:.2f} "
            f"exceeds n = {n} (rho = {plan.rho:.4g}, beta = {plan.beta}): "
            f"{needed}, a larger rho or inflated=False is needed."
        )

    def _lower_bound(
        self, plan: SearchPlan, n: int, alpha: float, rank: int
    ) -> tuple[float, float]:
        """``(coverage lower bound, confidence)`` for a feasible ``(n, alpha)``."""
        if self.inflated:
            return max(0.0, rank / (n + 1) - plan.beta), 1.0
        return max(0.0, 1.0 - alpha - plan.tau / (n + 1)), 1.0 - plan.beta

    def _coverage_certificate(
        self, params: dict, n_samples: int, alpha: float
    ) -> CoverageCertificate:
        """Theorem 2's approximate bound, or ``r / (n + 1) - beta`` when inflated."""
        rank = split_conformal_rank(n_samples, alpha)
        reason = self._unreachable(params, n_samples, alpha, rank)
        if reason is not None:
            return CoverageCertificate(1.0, feasible=False, reason=reason)
        return CoverageCertificate(*self._lower_bound(params["plan"], n_samples, alpha, rank))

    # ---------------------------------------------------------- calibration
    def _calibrate_from_statistics(
        self, params: dict, statistics: ScoreStatistics, alpha: float, noise: NoiseSource
    ) -> Calibration:
        plan = params["plan"]
        n = statistics.n_samples
        rank = split_conformal_rank(n, alpha)
        details = {
            "n_queries": plan.n_queries,
            "n_queries_requested": plan.n_queries_requested,
            "n_queries_capped": plan.n_queries < plan.n_queries_requested,
            "resolution": plan.resolution,
            "noise_sd": plan.noise_sd,
            "bounds": (plan.lower, plan.upper),
            "rank": rank,
            "tau": plan.tau,
            "rank_inflation": plan.rank_inflation if self.inflated else 0.0,
            "beta": plan.beta,
            "inflated": bool(self.inflated),
        }
        reason = self._unreachable(params, n, alpha, rank)
        if reason is not None:
            return infeasible_calibration(type(self).__name__, n, alpha, reason, **details)
        target = self._target(plan, rank)
        threshold, certified = search_with_counter(
            statistics.rank_counter(plan.lower, plan.upper),
            target,
            plan.lower,
            plan.upper,
            plan.composer.noise(noise),
        )
        lower_bound, confidence = self._lower_bound(plan, n, alpha, rank)
        details.update(
            target_rank=target,
            certified=certified,
            approximate_upper_bound=min(1.0, math.ceil(target + plan.tau) / (n + 1)),
        )
        owner_diagnostics = {}
        if not (plan.lower == 0.0 and plan.upper == 1.0):
            n_below, n_above = statistics.count_outside(plan.lower, plan.upper)
            owner_diagnostics = {"n_clipped_below": n_below, "n_clipped_above": n_above}
        return Calibration(
            mechanism=type(self).__name__,
            threshold=threshold,
            n_samples=n,
            alpha=alpha,
            privacy=plan.composer.privacy_guarantee(),
            coverage_lower_bound=lower_bound,
            lower_bound_confidence=confidence,
            target_level=target / n,
            reason=""
            if certified
            else (
                f"no noisy count of the {plan.n_queries} queries reached the target rank "
                f"{target:.1f} inside bounds [{plan.lower}, {plan.upper}]: the threshold is "
                "the top of the range."
            ),
            details=details,
            owner_diagnostics=owner_diagnostics,
        )
