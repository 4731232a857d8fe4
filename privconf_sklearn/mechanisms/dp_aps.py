"""DP-APS: Laplace noise on cumulative counts over a public grid (paper 003, Sec. 5).

"Contract Cards for Auditable Private Conformal Prediction" (2026): the calibration
backend of Sec. 5, Theorem 5.1 (privacy and coverage), Proposition 5.2 (the
threshold-inflation certificate) and Remark 5.3. No public code exists; this is an
implementation from the paper (DESIGN.md correction 9), claiming no parity.
"""

from __future__ import annotations

import math

import numpy as np

from .._random import NoiseSource
from .._validation import check_in_open_interval, check_positive_finite, split_conformal_rank
from ..privacy import PrivacyGuarantee
from ._base import (
    Calibration,
    CoverageCertificate,
    QuantileMechanism,
    infeasible_calibration,
)
from ._binning import bin_counts

__all__ = [
    "DPAPS",
    "cumulative_counts",
    "dp_aps_offset",
    "first_crossing",
    "grid_quantile_index",
]


def cumulative_counts(scores: np.ndarray, n_bins: int) -> np.ndarray:
    """Cumulative counts ``N_b = #{i : s_i <= t_b}`` on the grid ``t_b = b / B``.

    Paper 003 Sec. 5. Computed as the running sum of the bin counts of
    :func:`~privconf_sklearn.mechanisms._binning.bin_counts`, whose bin index agrees
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


def dp_aps_offset(n_bins: int, epsilon: float, beta: float) -> float:
    """Conservative offset ``lambda = B log(B / beta) / epsilon`` (paper 003 Sec. 5).

    A Laplace(``B / epsilon``) variable exceeds ``lambda`` in absolute value with
    probability exactly ``beta / B``, so all ``B`` noises stay within ``lambda`` with
    probability at least ``1 - beta`` (proof of Theorem 5.1).
    """
    return n_bins * math.log(n_bins / beta) / epsilon


def first_crossing(noisy_counts: np.ndarray, target: float) -> np.ndarray:
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


def grid_quantile_index(counts: np.ndarray, rank: float) -> int:
    """``q(r) = min{b : N_b >= r}``, or ``B`` if there is none (paper 003 Prop. 5.2)."""
    index = int(np.searchsorted(counts, rank, side="left")) + 1
    return min(index, counts.shape[0])


class DPAPS(QuantileMechanism):
    """Private conformal calibration with noisy cumulative counts on a grid (DP-APS).

    Paper 003 Sec. 5: on the public grid ``t_b = b / B`` (``b = 1..B``) the cumulative
    counts ``N_b = #{s_i <= t_b}`` are released with independent Laplace(``B /
    epsilon``) noise; with ``k = ceil((n + 1)(1 - alpha))`` and the offset
    ``lambda = B log(B / beta) / epsilon``, the threshold is ``t_b`` for the first
    ``b`` whose noisy count reaches ``k + lambda``, else ``t_B = 1``.

    **Privacy.** Adding, removing or replacing one score changes each ``N_b`` by at
    most 1, so the count vector has l1 sensitivity ``B`` and the Laplace vector
    mechanism is pure epsilon-DP (Theorem 5.1, point 1); the threshold is
    post-processing. When ``n`` changes by one, ``k`` moves by at most 1 as well, so the
    comparison ``N_b - k`` still moves by at most 1 per coordinate. ``n`` is treated as
    public (the infeasibility decision below uses it).

    **Coverage.** On the event that every ``|Z_b| <= lambda`` (probability at least
    ``1 - beta``) the threshold has ``N_b >= k``, so it is at least the ``k``-th
    smallest score; hence ``P(cover) >= k / (n + 1) - beta >= (1 - alpha) - beta``
    marginally (Theorem 5.1 with ``gamma = 1 - alpha``). The reported
    ``coverage_lower_bound`` is ``k / (n + 1) - beta`` (the proof's last step before
    ``k / (n + 1) >= gamma``), with ``lower_bound_confidence = 1``. If ``k > n`` the
    level is unreachable: the threshold is 1 and the data are not read.

    **Diagnostics (NOT covered by epsilon).** ``details`` records the certificate width
    ``W = t_{q(ceil(k + 2 lambda))} - t_{q(k)}`` of Proposition 5.2 (with probability
    ``1 - beta`` the threshold lies in ``[t_{q(k)}, t_{q(ceil(k + 2 lambda))}]``), the
    non-private grid threshold ``t_{q(k)}`` and the observed inflation (threshold minus
    ``t_{q(k)}``). They are computed from the exact counts: releasing any of them is an
    additional, unaccounted disclosure of the calibration data, which the epsilon of
    this mechanism does not cover (paper 003 Sec. 5 and Sec. 8: a trusted audit
    setting, or extra privacy accounting, is needed). ``details["diagnostics_are_private"]``
    is False to say so.

    The grid size trades resolution (``1 / B``) against noise: ``lambda`` grows like
    ``B log B / epsilon`` counts, i.e. the empirical level rises by about
    ``lambda / n``; roughly ``B ~ sqrt(n epsilon / log(B / beta))`` balances the two.

    Parameters
    ----------
    epsilon : float, default=1.0
        Privacy budget of the calibration, > 0 and finite.
    n_bins : int, default=20
        Grid size ``B >= 2``.
    beta : float, default=1e-3
        Failure probability of the noise bound, in (0, 1); the coverage guarantee loses
        ``beta``.

    Examples
    --------
    >>> import numpy as np
    >>> from privconf_sklearn.mechanisms import DPAPS
    >>> scores = np.random.default_rng(0).uniform(size=20000)
    >>> cal = DPAPS(epsilon=1.0).calibrate(scores, alpha=0.1, random_state=0)
    >>> cal.privacy.epsilon, round(cal.coverage_lower_bound, 4)
    (1.0, 0.899)
    >>> cal.threshold, cal.details["grid_threshold"]
    (0.95, 0.9)
    """

    def __init__(self, epsilon: float = 1.0, *, n_bins: int = 20, beta: float = 1e-3):
        self.epsilon = epsilon
        self.n_bins = n_bins
        self.beta = beta

    def _check_params(self) -> None:
        check_positive_finite(self.epsilon, "epsilon")
        if (
            not isinstance(self.n_bins, int | np.integer)
            or isinstance(self.n_bins, bool)
            or self.n_bins < 2
        ):
            raise ValueError(f"n_bins must be an integer >= 2; got {self.n_bins!r}.")
        check_in_open_interval(self.beta, "beta")

    def privacy_guarantee(self) -> PrivacyGuarantee:
        """Pure epsilon-DP of the threshold (Theorem 5.1); diagnostics are not covered."""
        self._check_params()
        return PrivacyGuarantee.pure(
            float(self.epsilon),
            adjacency="replace-one and add/remove",
            description=(
                f"Laplace(B/epsilon) noise on the {int(self.n_bins)} cumulative counts of a "
                "public grid (l1 sensitivity B). Covers the threshold only: the "
                "certificate-width diagnostics are computed from exact counts and are not "
                "covered."
            ),
        )

    def _unreachable(self, n: int, alpha: float, k: int) -> str | None:
        """Why ``(n, alpha)`` cannot be calibrated (``k > n``), or None."""
        if k > n:
            return (
                f"the conformal rank k = ceil((n + 1)(1 - alpha)) = {k} exceeds n = {n} for "
                f"alpha = {alpha}: more calibration data is needed."
            )
        return None

    def coverage_certificate(self, n_samples: int, alpha: float) -> CoverageCertificate:
        """``k / (n + 1) - beta >= (1 - alpha) - beta`` (Theorem 5.1); infeasible if ``k > n``."""
        self._check_params()
        k = split_conformal_rank(n_samples, alpha)
        reason = self._unreachable(n_samples, alpha, k)
        if reason is not None:
            return CoverageCertificate(1.0, feasible=False, reason=reason)
        return CoverageCertificate(max(0.0, k / (n_samples + 1) - float(self.beta)))

    def _calibrate(
        self, scores: np.ndarray, alpha: float, groups, noise: NoiseSource
    ) -> Calibration:
        n = scores.shape[0]
        n_bins, epsilon, beta = int(self.n_bins), float(self.epsilon), float(self.beta)
        k = split_conformal_rank(n, alpha)
        offset = dp_aps_offset(n_bins, epsilon, beta)
        public = {"rank": k, "offset": offset, "n_bins": n_bins, "beta": beta}
        reason = self._unreachable(n, alpha, k)
        if reason is not None:
            # No data read: no diagnostics, nothing data-dependent in the record.
            return infeasible_calibration(
                type(self).__name__,
                n,
                alpha,
                reason,
                **public,
                grid_threshold=None,
                certificate_width=None,
                observed_inflation=None,
                diagnostics_are_private=True,
            )
        counts = cumulative_counts(scores, n_bins)
        noisy = counts + noise.laplace(n_bins / epsilon, n_bins)
        threshold = int(first_crossing(noisy, k + offset)) / n_bins
        grid_threshold = grid_quantile_index(counts, k) / n_bins
        certificate_rank = math.ceil(k + 2.0 * offset)
        upper_threshold = grid_quantile_index(counts, certificate_rank) / n_bins
        return Calibration(
            mechanism=type(self).__name__,
            threshold=threshold,
            n_samples=n,
            alpha=alpha,
            privacy=self.privacy_guarantee(),
            coverage_lower_bound=max(0.0, k / (n + 1) - beta),
            target_level=min(1.0, (k + offset) / n),
            details={
                **public,
                "target_count": k + offset,
                "certificate_rank": certificate_rank,
                # Data-dependent diagnostics (exact counts): NOT covered by epsilon.
                "grid_threshold": grid_threshold,
                "certificate_width": upper_threshold - grid_threshold,
                "observed_inflation": threshold - grid_threshold,
                "diagnostics_are_private": False,
            },
        )
