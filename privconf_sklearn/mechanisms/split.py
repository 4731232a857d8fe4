"""Non-private split conformal calibration: the baseline every mechanism is compared to."""

from __future__ import annotations

import math
from fractions import Fraction

from .._random import NoiseSource
from .._validation import split_conformal_rank
from ..privacy import PrivacyGuarantee
from ._base import (
    MAX_PLANNED_SAMPLES,
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
    smallest ``n`` that reaches it, ``ceil(1 / alpha) - 1``, and refuses beyond
    ``10^15``). If the ``k``-th smallest score is itself 1, the release is the top of
    the range too, with a warning.

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

    def _privacy_guarantee(self, params: dict) -> PrivacyGuarantee:
        """No privacy: the release is an exact order statistic of the data."""
        return PrivacyGuarantee.no_privacy("Exact empirical quantile: no privacy protection.")

    def _coverage_certificate(
        self, params: dict, n_samples: int, alpha: float
    ) -> CoverageCertificate:
        """``k / (n + 1)`` with ``k = ceil((n + 1)(1 - alpha))``; infeasible if ``k > n``."""
        k = split_conformal_rank(n_samples, alpha)
        if k > n_samples:
            return CoverageCertificate(
                1.0, feasible=False, reason=self._unreachable(params, k, n_samples, alpha)
            )
        return CoverageCertificate(k / (n_samples + 1))

    def _min_informative_samples(self, params: dict, alpha: float) -> int:
        """Smallest ``n`` with ``ceil((n + 1)(1 - alpha)) <= n`` (closed form, exact).

        :func:`conformal_rank_min_n` of ``alpha``; a ``ValueError`` if that size exceeds
        ``10^15`` (``alpha`` below about ``1e-15``), as for every mechanism of the library.
        """
        n = conformal_rank_min_n(alpha)
        if n > MAX_PLANNED_SAMPLES:
            raise ValueError(
                f"{self!r} at alpha = {alpha!r}: no calibration size up to "
                f"{MAX_PLANNED_SAMPLES:.0e} can return non-trivial sets at this level "
                "(split conformal needs n >= 1 / alpha - 1)."
            )
        return n

    def _calibrate_from_statistics(
        self, params: dict, statistics: ScoreStatistics, alpha: float, noise: NoiseSource
    ) -> Calibration:
        n = statistics.n_samples
        k = split_conformal_rank(n, alpha)
        if k > n:
            return infeasible_calibration(
                type(self).__name__, n, alpha, self._unreachable(params, k, n, alpha), rank=k
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
            privacy=self._privacy_guarantee(params),
            coverage_lower_bound=k / (n + 1),
            coverage_upper_bound=k / (n + 1),
            upper_bound_atom_slope=1.0,
            target_level=k / n,
            reason=reason,
            details={"rank": k},
        )

    def _unreachable(self, params: dict, k: int, n: int, alpha: float) -> str:
        return (
            f"ceil((n + 1)(1 - alpha)) = {k} exceeds n = {n}: "
            f"{self._needed_samples(params, alpha)} are needed for alpha = {alpha}."
        )


def conformal_rank_min_n(alpha: float) -> int:
    """Smallest ``n`` for which ``ceil((n + 1)(1 - alpha)) <= n``, in O(1).

    ``ceil(x) <= n`` iff ``x <= n``, and ``(n + 1)(1 - alpha) <= n`` iff
    ``(n + 1) alpha >= 1``, so ``n = ceil(1 / alpha) - 1`` (at least 1, as
    ``alpha < 1``), computed in exact rational arithmetic on the binary value of
    ``alpha``: no rounding, and an exact (possibly huge) integer for any ``alpha > 0``.

    Parameters
    ----------
    alpha : float
        Miscoverage level in (0, 1).

    Returns
    -------
    int
        The smallest calibration size that reaches ``1 - alpha``.
    """
    return math.ceil(1 / Fraction(alpha)) - 1
