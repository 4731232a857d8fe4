"""Conversions between zCDP, Gaussian DP and (epsilon, delta)-DP.

Two families of conversions, used to state the guarantee of Gaussian query
compositions (:class:`~privconf_sklearn.privacy.GaussianQueryComposer`, behind P-COQS of
Romanus and Molinari 2025, whose zCDP budget is not pure DP) and of any zCDP statement
(:meth:`~privconf_sklearn.privacy.PrivacyGuarantee.under`) in the (epsilon, delta) form a
diffprivlib ``BudgetAccountant`` records:

- **Exact, for Gaussian mechanisms.** A mechanism that adds ``N(0, sigma^2)`` noise to
  queries of sensitivity 1 is ``mu``-Gaussian DP with ``mu = 1 / sigma``, and the
  adaptive composition of ``mu_i``-GDP mechanisms is exactly ``sqrt(sum mu_i^2)``-GDP
  (Dong, Roth and Su, "Gaussian Differential Privacy", JRSS-B 2022, Corollary 3.3).
  A ``mu``-GDP mechanism is ``(epsilon, delta)``-DP exactly for

  ``delta_mu(epsilon) = Phi(-epsilon/mu + mu/2) - exp(epsilon) Phi(-epsilon/mu - mu/2)``

  (the analytic Gaussian mechanism, Balle and Wang, ICML 2018, Theorem 8; Dong, Roth and
  Su 2022, Corollary 2.13), and for no smaller delta: the curve is attained by a single
  Gaussian query. ``mu``-GDP implies ``(mu^2 / 2)``-zCDP, but not conversely, so these
  functions apply to Gaussian-noise mechanisms only (:func:`gaussian_delta`,
  :func:`gaussian_epsilon`, :func:`gaussian_mu`).
- **Generic, for any rho-zCDP mechanism.** Bun and Steinke (TCC 2016, Proposition 1.3):
  ``epsilon = rho + 2 sqrt(rho log(1 / delta))`` (:func:`bun_steinke_epsilon`), and the
  tighter bound of Canonne, Kamath and Steinke ("The Discrete Gaussian for Differential
  Privacy", NeurIPS 2020, Corollary 13):
  ``delta = min_{a > 1} exp((a - 1)(a rho - epsilon) + a log(1 - 1/a)) / (a - 1)``
  (:func:`zcdp_delta`, :func:`zcdp_log_delta`, :func:`zcdp_epsilon`).

For the same ``rho = mu^2 / 2``, exact Gaussian <= Canonne-Kamath-Steinke <= Bun-Steinke
in epsilon at fixed delta; e.g. ``rho = 0.5``, ``delta = 1e-5``: 4.38, 4.73 and 5.30.

Every inversion is a bisection that keeps its answer on the safe side: a returned
epsilon always satisfies ``delta(epsilon) <= delta`` and a returned ``mu`` always
satisfies ``delta_mu(epsilon) <= delta``, as evaluated in floating point (the profile
is computed in log space, accurate to a few ulps, far below any delta one would state).
"""

from __future__ import annotations

import math
from functools import lru_cache

from scipy.optimize import brentq
from scipy.special import log_ndtr

__all__ = [
    "bun_steinke_epsilon",
    "gaussian_delta",
    "gaussian_epsilon",
    "gaussian_mu",
    "zcdp_delta",
    "zcdp_epsilon",
    "zcdp_log_delta",
]

#: Bisection stops when the bracket is this small relative to its upper end.
_RELATIVE_TOLERANCE = 1e-13


def gaussian_delta(epsilon: float, mu: float) -> float:
    """Exact privacy profile of a ``mu``-GDP mechanism at ``epsilon``.

    ``delta_mu(epsilon) = Phi(-epsilon/mu + mu/2) - e^epsilon Phi(-epsilon/mu - mu/2)``
    (Balle and Wang 2018, Theorem 8), computed as
    ``exp(A) * (1 - exp(B - A))`` with ``A, B`` the logarithms of the two terms, so that
    neither cancellation nor overflow of ``e^epsilon`` occurs.

    Parameters
    ----------
    epsilon : float
        Privacy loss level, >= 0.
    mu : float
        Gaussian DP parameter (``sensitivity / sigma``, composed as a root sum of
        squares), >= 0.

    Returns
    -------
    float
        The smallest delta for which the mechanism is (epsilon, delta)-DP.
    """
    if mu == 0.0:
        return 0.0
    first = float(log_ndtr(-epsilon / mu + mu / 2.0))
    second = epsilon + float(log_ndtr(-epsilon / mu - mu / 2.0))
    if second >= first:  # only by rounding, when the difference is ~0
        return 0.0
    return math.exp(first) * -math.expm1(second - first)


@lru_cache(maxsize=256)
def gaussian_epsilon(mu: float, delta: float) -> float:
    """Smallest epsilon with ``gaussian_delta(epsilon, mu) <= delta``.

    The profile decreases in epsilon; the Bun-Steinke epsilon of ``rho = mu^2 / 2`` is a
    valid starting upper end (it is a valid conversion, hence not below the exact one).

    Parameters
    ----------
    mu : float
        Gaussian DP parameter, >= 0.
    delta : float
        Target delta in (0, 1).

    Returns
    -------
    float
        epsilon >= 0 (the upper end of the final bracket, so always feasible).
    """
    if gaussian_delta(0.0, mu) <= delta:
        return 0.0
    low, high = 0.0, bun_steinke_epsilon(mu * mu / 2.0, delta)
    while gaussian_delta(high, mu) > delta:  # never taken in exact arithmetic
        low, high = high, 2.0 * high
    return _bisect(lambda e: gaussian_delta(e, mu) <= delta, low, high, feasible_high=True)


@lru_cache(maxsize=256)
def gaussian_mu(epsilon: float, delta: float) -> float:
    """Largest ``mu`` with ``gaussian_delta(epsilon, mu) <= delta``.

    The profile increases in ``mu`` at fixed epsilon, so the feasible set is an
    interval ``[0, mu*]``; the rho-zCDP of that Gaussian composition is ``mu*^2 / 2``.

    Parameters
    ----------
    epsilon : float
        Target epsilon, > 0.
    delta : float
        Target delta in (0, 1).

    Returns
    -------
    float
        ``mu`` > 0 (the lower end of the final bracket, so always feasible).
    """
    low, high = 0.0, 1.0
    while gaussian_delta(epsilon, high) <= delta:
        low, high = high, 2.0 * high
    return _bisect(lambda m: gaussian_delta(epsilon, m) <= delta, low, high, feasible_high=False)


def bun_steinke_epsilon(rho: float, delta: float) -> float:
    """``rho + 2 sqrt(rho log(1/delta))`` (Bun and Steinke 2016, Proposition 1.3).

    Valid for any rho-zCDP mechanism; looser than :func:`zcdp_epsilon`.
    """
    return rho + 2.0 * math.sqrt(rho * math.log(1.0 / delta))


def zcdp_log_delta(rho: float, epsilon: float) -> float:
    """Logarithm of the Canonne-Kamath-Steinke delta of rho-zCDP at ``epsilon``.

    ``delta = min_{a > 1} exp((a - 1)(a rho - epsilon) + a log(1 - 1/a)) / (a - 1)``
    (Canonne, Kamath and Steinke 2020, Corollary 13), before capping at 1, in log space
    so that it does not underflow. Every ``a > 1`` gives a valid delta; the minimiser
    solves ``(2a - 1) rho - epsilon + log(1 - 1/a) = 0`` (the derivative of the log of
    the bound, increasing in ``a``), found by Brent's method.

    Parameters
    ----------
    rho : float
        zCDP parameter, > 0.
    epsilon : float
        >= 0.

    Returns
    -------
    float
        ``log(delta)`` (may be > 0, meaning the bound is vacuous).
    """

    def slope(a: float) -> float:
        return (2.0 * a - 1.0) * rho - epsilon + math.log1p(-1.0 / a)

    low, high = 1.0 + 1e-12, (epsilon + 1.0) / (2.0 * rho) + 2.0
    order = low if slope(low) >= 0.0 else brentq(slope, low, high, xtol=1e-12, rtol=1e-12)
    return (
        (order - 1.0) * (order * rho - epsilon)
        + order * math.log1p(-1.0 / order)
        - math.log(order - 1.0)
    )


def zcdp_delta(rho: float, epsilon: float) -> float:
    """Delta of the Canonne-Kamath-Steinke conversion of rho-zCDP at ``epsilon``.

    ``exp`` of :func:`zcdp_log_delta`, capped at 1; valid for any rho-zCDP mechanism.

    Parameters
    ----------
    rho : float
        zCDP parameter, >= 0.
    epsilon : float
        >= 0.

    Returns
    -------
    float
        delta in [0, 1].
    """
    if rho == 0.0:
        return 0.0
    return math.exp(min(0.0, zcdp_log_delta(rho, epsilon)))


@lru_cache(maxsize=256)
def zcdp_epsilon(rho: float, delta: float) -> float:
    """Smallest epsilon with ``zcdp_delta(rho, epsilon) <= delta`` (any rho-zCDP mechanism).

    Parameters
    ----------
    rho : float
        zCDP parameter, >= 0.
    delta : float
        Target delta in (0, 1).

    Returns
    -------
    float
        epsilon >= 0, at most :func:`bun_steinke_epsilon`.
    """
    if rho == 0.0:
        return 0.0
    high = bun_steinke_epsilon(rho, delta)
    if zcdp_delta(rho, high) > delta:  # cannot happen: the CKS bound is the tighter one
        return high
    return _bisect(lambda e: zcdp_delta(rho, e) <= delta, 0.0, high, feasible_high=True)


def _bisect(feasible, low: float, high: float, *, feasible_high: bool) -> float:
    """Bisection on a monotone feasibility predicate; returns the feasible bracket end.

    With ``feasible_high=True`` the predicate holds at ``high`` and fails at ``low``
    (unless ``low`` itself is returned as feasible by the caller); otherwise it holds at
    ``low`` and fails at ``high``.
    """
    while high - low > _RELATIVE_TOLERANCE * high:
        middle = 0.5 * (low + high)
        if middle in (low, high):
            break
        if feasible(middle) == feasible_high:
            high = middle
        else:
            low = middle
    return high if feasible_high else low
