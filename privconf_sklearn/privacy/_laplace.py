"""The Laplace mechanism on a vector of queries with bounded l1 sensitivity."""

from __future__ import annotations

import math

import numpy as np
from scipy import stats

from .._random import check_noise_source
from ._additive import L1NoiseMechanism

__all__ = ["LaplaceVectorMechanism"]


class LaplaceVectorMechanism(L1NoiseMechanism):
    """Add independent Laplace noise of scale ``l1_sensitivity / epsilon`` to a vector.

    If ``||f(D) - f(D')||_1 <= Delta_1`` for every pair of neighbouring data sets, the
    release ``f(D) + (Z_1, ..., Z_d)`` with ``Z_i`` i.i.d. Laplace(``Delta_1 /
    epsilon``) is epsilon-DP (Dwork, McSherry, Nissim and Smith 2006; Dwork and Roth
    2014, Theorem 3.6): the density ratio at any output ``y`` is
    ``exp((||y - f(D')||_1 - ||y - f(D)||_1) epsilon / Delta_1)``, at most
    ``exp(epsilon)`` by the triangle inequality. Anything computed from the noisy
    vector alone is post-processing.

    Parameters
    ----------
    epsilon : float
        Privacy parameter, > 0 and finite.
    l1_sensitivity : float
        ``Delta_1``, the largest l1 distance between the query vectors of two
        neighbouring data sets, > 0 and finite.
    adjacency : {"replace-one", "add/remove", "replace-one and add/remove"}, \
            default="replace-one and add/remove"
        Neighbouring relation(s) under which ``l1_sensitivity`` bounds the change.

    Examples
    --------
    >>> import numpy as np
    >>> from privconf_sklearn.privacy import LaplaceVectorMechanism
    >>> mechanism = LaplaceVectorMechanism(epsilon=1.0, l1_sensitivity=4)
    >>> mechanism.scale
    4.0
    >>> mechanism.randomise(np.zeros(3), random_state=0).shape
    (3,)
    """

    @property
    def scale(self) -> float:
        """The noise scale ``b = l1_sensitivity / epsilon`` (density ``e^{-|z|/b} / 2b``)."""
        return self.l1_sensitivity / self.epsilon

    def randomise(self, values, random_state=None) -> np.ndarray:
        """``values`` plus independent Laplace(:attr:`scale`) noise, one draw per entry.

        Parameters
        ----------
        values : array-like
            The exact query answers.
        random_state : None, int, RandomState or Generator, default=None
            Source of the privacy randomness: ``None`` (production) reads the operating
            system's cryptographic generator; anything else is reproducible, for tests.

        Returns
        -------
        ndarray of float64, same shape as ``values``
        """
        values = np.asarray(values, dtype=np.float64)
        return values + check_noise_source(random_state).laplace(self.scale, values.shape)

    def noise_log_cdf(self, x) -> np.ndarray:
        """``log P(Z <= x)`` for one noise coordinate (exact output distributions)."""
        return stats.laplace.logcdf(x, scale=self.scale)

    def noise_log_sf(self, x) -> np.ndarray:
        """``log P(Z > x)`` (equivalently ``>= x``) for one noise coordinate."""
        return stats.laplace.logsf(x, scale=self.scale)

    def tail_bound(self, failure_probability: float, n_coordinates: int) -> float:
        """``lambda`` with ``P(max_i |Z_i| > lambda) <= failure_probability``.

        Each coordinate exceeds ``lambda`` in absolute value with probability exactly
        ``exp(-lambda / b)``; setting that to ``failure_probability / d`` and taking a
        union bound over the ``d = n_coordinates`` coordinates gives
        ``lambda = b log(d / failure_probability)``.
        """
        return self.scale * math.log(n_coordinates / failure_probability)

    def _noise_description(self) -> str:
        return f"Laplace noise of scale {self.scale:.4g} (l1 sensitivity {self.l1_sensitivity:g})."
