"""Adaptive Gaussian count queries and their zCDP / Gaussian-DP accounting."""

from __future__ import annotations

import math
from numbers import Integral, Real

import numpy as np
from scipy.special import ndtri

from .._param_validation import Interval, StrOptions, validate_params
from .._random import check_noise_source
from ._conversions import gaussian_epsilon, gaussian_mu
from ._guarantee import ADJACENCY_STATEMENTS, PrivacyGuarantee

__all__ = ["GaussianQueryComposer"]


class GaussianQueryComposer:
    """``N`` adaptively chosen queries, each answered with the same Gaussian noise.

    Every query has l2 sensitivity at most ``sensitivity``; each answer gets
    independent ``N(0, sigma^2)`` noise with ``sigma = sensitivity sqrt(N / (2 rho))``.
    One such answer is ``(sensitivity / sigma)``-Gaussian DP and
    ``rho / N``-zCDP; the adaptive composition of the ``N`` answers is exactly
    ``mu``-Gaussian DP with ``mu = sqrt(N) sensitivity / sigma = sqrt(2 rho)`` (Dong,
    Roth and Su 2022, Corollary 3.3) and ``rho``-zCDP (Bun and Steinke 2016). The
    reported ``(epsilon, delta)`` is the exact curve of ``mu``-GDP
    (analytic Gaussian, Balle and Wang 2018, Theorem 8; see
    :func:`privconf_sklearn.privacy.gaussian_epsilon`), valid because the mechanism is
    Gaussian and tighter than any generic zCDP conversion.

    The budget is stated either as ``rho`` (then ``epsilon`` is reported at ``delta``)
    or as ``(epsilon, delta)`` (then ``rho`` is the largest whose composition is
    ``(epsilon, delta)``-DP, :func:`privconf_sklearn.privacy.gaussian_mu`).

    Parameters
    ----------
    n_queries : int
        ``N >= 1``.
    rho : float or None, default=None
        zCDP budget of the whole composition, > 0.
    epsilon : float or None, default=None
        ``(epsilon, delta)`` budget, > 0; give exactly one of ``rho`` and ``epsilon``.
    delta : float, default=1e-5
        In (0, 1): the delta of the stated budget, or of the reported conversion when
        ``rho`` is given.
    sensitivity : float, default=1.0
        l2 sensitivity of each query (1 for a count).
    adjacency : {"replace-one", "add/remove", "replace-one and add/remove"}, \
            default="replace-one and add/remove"
        Neighbouring relation(s) under which ``sensitivity`` holds.

    Examples
    --------
    >>> from privconf_sklearn.privacy import GaussianQueryComposer
    >>> composer = GaussianQueryComposer(34, rho=0.5)
    >>> round(composer.noise_sd, 3), round(composer.epsilon, 2), composer.delta
    (5.831, 4.38, 1e-05)
    """

    _parameter_constraints = {
        "n_queries": [Interval(Integral, 1, None, closed="left")],
        "rho": [None, Interval(Real, 0, None, closed="neither")],
        "epsilon": [None, Interval(Real, 0, None, closed="neither")],
        "delta": [Interval(Real, 0, 1, closed="neither")],
        "sensitivity": [Interval(Real, 0, None, closed="neither")],
        "adjacency": [StrOptions(set(ADJACENCY_STATEMENTS))],
    }

    def __init__(
        self,
        n_queries: int,
        *,
        rho: float | None = None,
        epsilon: float | None = None,
        delta: float = 1e-5,
        sensitivity: float = 1.0,
        adjacency: str = "replace-one and add/remove",
    ):
        checked = validate_params(
            self._parameter_constraints,
            {
                "n_queries": n_queries,
                "rho": rho,
                "epsilon": epsilon,
                "delta": delta,
                "sensitivity": sensitivity,
                "adjacency": adjacency,
            },
            type(self).__name__,
        )
        if (checked["rho"] is None) == (checked["epsilon"] is None):
            raise ValueError(
                "GaussianQueryComposer needs exactly one budget: rho (zCDP) or epsilon "
                f"(with delta); got rho={rho!r}, epsilon={epsilon!r}."
            )
        self.n_queries: int = checked["n_queries"]
        self.delta: float = checked["delta"]
        self.sensitivity: float = checked["sensitivity"]
        self.adjacency: str = checked["adjacency"]
        if checked["rho"] is None:
            self.epsilon: float = checked["epsilon"]
            self.rho: float = gaussian_mu(self.epsilon, self.delta) ** 2 / 2.0
        else:
            self.rho = checked["rho"]
            self.epsilon = gaussian_epsilon(self.mu, self.delta)

    def __repr__(self) -> str:
        return (
            f"GaussianQueryComposer(n_queries={self.n_queries}, rho={self.rho!r}, "
            f"epsilon={self.epsilon!r}, delta={self.delta!r})"
        )

    @property
    def mu(self) -> float:
        """Gaussian-DP parameter of the composition, ``sqrt(2 rho)``."""
        return math.sqrt(2.0 * self.rho)

    @property
    def noise_sd(self) -> float:
        """``sigma = sensitivity sqrt(N / (2 rho))``, the noise of every answer."""
        return self.sensitivity * math.sqrt(self.n_queries / (2.0 * self.rho))

    def noise(self, random_state=None) -> np.ndarray:
        """The ``N`` noise values, one per query, drawn independently of the data.

        Drawing them up front is equivalent to drawing each when its query is asked:
        the noise never depends on the data or on earlier answers.

        Parameters
        ----------
        random_state : None, int, RandomState or Generator, default=None
            Source of the privacy randomness: ``None`` (production) reads the operating
            system's cryptographic generator; anything else is reproducible, for tests.
        """
        return check_noise_source(random_state).normal(self.noise_sd, self.n_queries)

    def upper_tail_bound(self, failure_probability: float) -> float:
        """``t`` with ``P(max_i W_i > t) <= failure_probability`` over the ``N`` noises.

        Each ``W_i ~ N(0, sigma^2)`` exceeds ``t = sigma Phi^{-1}(1 - beta / N)`` with
        probability exactly ``beta / N``; the union bound over the ``N`` queries gives
        ``beta``, however the queries adapt.
        """
        return -self.noise_sd * float(ndtri(failure_probability / self.n_queries))

    def privacy_guarantee(self, description: str = "") -> PrivacyGuarantee:
        """rho-zCDP, reported as the exact ``(epsilon, delta)`` of ``mu``-Gaussian DP."""
        return PrivacyGuarantee(
            notion="zcdp",
            epsilon=self.epsilon,
            delta=self.delta,
            rho=self.rho,
            adjacency=self.adjacency,
            description=description
            or (
                f"{self.n_queries} Gaussian queries of sensitivity {self.sensitivity:g} with "
                f"noise sd {self.noise_sd:.4g}: rho-zCDP and exactly sqrt(2 rho)-Gaussian "
                f"DP, hence ({self.epsilon:.4g}, {self.delta:.3g})-DP by the analytic "
                "Gaussian conversion. Not pure epsilon-DP."
            ),
        )
