"""Non-private split conformal calibration: the baseline every mechanism is compared to."""

from __future__ import annotations

from .._random import NoiseSource
from .._validation import check_alpha, split_conformal_rank
from ..privacy import PrivacyGuarantee
from ._base import (
    Calibration,
    CoverageCertificate,
    QuantileMechanism,
    infeasible_calibration,
)
from ._statistics import ScoreStatistics

__all__ = ["SplitConformal"]


class SplitConformal(QuantileMechanism):
    """Split conformal prediction without privacy (epsilon = infinity).

    The threshold is the ``k``-th smallest score with ``k = ceil((n + 1)(1 - alpha))``
    (Vovk et al. 2005; Lei et al. 2018). Under exchangeability the
    prediction sets cover with probability at least ``k / (n + 1) >= 1 - alpha``, and at
    most ``k / (n + 1) + p_max`` where ``p_max`` is the largest atom of the score
    distribution (exactly ``k / (n + 1)`` for continuous scores).

    If ``k > n`` the level is unreachable: the threshold is the top of the range and
    the calibration is marked infeasible (:meth:`min_informative_samples` gives the
    smallest ``n`` that reaches it). If the ``k``-th smallest score is itself 1, the
    release is the top of the range too, with a warning.

    Examples
    --------
    >>> import numpy as np
    >>> from privconf_sklearn.mechanisms import SplitConformal
    >>> scores = np.linspace(0, 1, 99)
    >>> cal = SplitConformal().calibrate(scores, alpha=0.1)
    >>> bool(cal.threshold == np.sort(scores)[89])
    True
    """

    def __init__(self):
        pass

    def privacy_guarantee(self) -> PrivacyGuarantee:
        """No privacy: the release is an exact order statistic of the data."""
        return PrivacyGuarantee.no_privacy("Exact empirical quantile: no privacy protection.")

    def coverage_certificate(self, n_samples: int, alpha: float) -> CoverageCertificate:
        """``k / (n + 1)`` with ``k = ceil((n + 1)(1 - alpha))``; infeasible if ``k > n``."""
        k = split_conformal_rank(n_samples, alpha)
        if k > n_samples:
            return CoverageCertificate(
                1.0, feasible=False, reason=_unreachable(k, n_samples, alpha)
            )
        return CoverageCertificate(k / (n_samples + 1))

    def min_informative_samples(self, alpha: float) -> int:
        """Smallest ``n`` with ``ceil((n + 1)(1 - alpha)) <= n`` (closed form)."""
        return conformal_rank_min_n(check_alpha(alpha))

    def _calibrate_from_statistics(
        self, statistics: ScoreStatistics, alpha: float, noise: NoiseSource
    ) -> Calibration:
        n = statistics.n_samples
        k = split_conformal_rank(n, alpha)
        if k > n:
            return infeasible_calibration(
                type(self).__name__, n, alpha, _unreachable(k, n, alpha), rank=k
            )
        threshold = statistics.kth_smallest(k)
        reason = (
            ""
            if threshold < 1.0
            else f"the k = {k}-th smallest calibration score is the top of the range, 1.0."
        )
        return Calibration(
            mechanism=type(self).__name__,
            threshold=threshold,
            n_samples=n,
            alpha=alpha,
            privacy=self.privacy_guarantee(),
            coverage_lower_bound=k / (n + 1),
            coverage_upper_bound=k / (n + 1),
            upper_bound_atom_slope=1.0,
            target_level=k / n,
            reason=reason,
            details={"rank": k},
        )


def _unreachable(k: int, n: int, alpha: float) -> str:
    return (
        f"ceil((n + 1)(1 - alpha)) = {k} exceeds n = {n}: at least "
        f"{conformal_rank_min_n(alpha)} calibration scores are needed for alpha = {alpha}."
    )


def conformal_rank_min_n(alpha: float) -> int:
    """Smallest n for which ``ceil((n + 1)(1 - alpha)) <= n``."""
    # (n + 1)(1 - alpha) <= n  <=>  n >= (1 - alpha) / alpha; search from the floor up
    # in exact arithmetic to avoid an off-by-one from rounding.
    n = max(1, int((1.0 - alpha) / alpha) - 1)
    while split_conformal_rank(n, alpha) > n:
        n += 1
    return n
