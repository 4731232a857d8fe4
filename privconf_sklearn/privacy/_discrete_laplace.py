"""The discrete Laplace mechanism on integer-valued queries, sampled exactly."""

from __future__ import annotations

import math
import numbers
from fractions import Fraction
from functools import lru_cache

import numpy as np

from .._random import check_noise_source
from ._additive import L1NoiseMechanism

__all__ = ["DiscreteLaplaceMechanism"]

#: Relative safety margin of the float comparisons in :meth:`noise_isf`.
_MARGIN = 1e-12


def _is_real(value) -> bool:
    return isinstance(value, numbers.Real) and not isinstance(value, bool)


def _integer_values(values) -> np.ndarray:
    """``values`` as an int64 (or Python-int object) array, or a clear error."""
    array = np.asarray(values)
    if array.dtype.kind in "iu":
        return array if array.dtype.kind == "i" else array.astype(object)
    if array.dtype == object and all(
        isinstance(v, numbers.Integral) and not isinstance(v, bool) for v in array.flat
    ):
        return array
    raise ValueError(
        "values must be integers (the discrete Laplace mechanism noises integer-valued "
        f"queries such as counts); got dtype {array.dtype}."
    )


def _log_at_least(decay: float, k: np.ndarray) -> np.ndarray:
    """``log P(Z >= k)`` for integers ``k`` (float array, infinities allowed), ``1/b = decay``."""
    log_norm = math.log1p(math.exp(-decay))  # log(1 + rho)
    # Both branches are evaluated everywhere; each is used only where it is exact.
    with np.errstate(invalid="ignore", over="ignore", divide="ignore"):
        upper = -decay * k - log_norm  # k >= 1: rho^k / (1 + rho)
        lower = np.log1p(-np.exp(-decay * (1.0 - k) - log_norm))  # k <= 0
    return np.where(k >= 1, upper, lower)


@lru_cache(maxsize=256)
def _upper_quantile(decay: float, probability: float) -> int:
    """The smallest integer ``c >= 0`` with ``P(Z > c) <= probability`` (see ``noise_isf``)."""
    target = math.log(probability)

    def small_enough(c: int) -> bool:
        return float(_log_at_least(decay, np.float64(c + 1))) <= target - _MARGIN * abs(target)

    estimate = (-target - math.log1p(math.exp(-decay))) / decay - 1.0
    if estimate > 2.0**50:  # integers beyond float resolution: round up generously
        return math.ceil(estimate * (1.0 + 1e-9)) + 1
    c = max(0, math.ceil(estimate))
    while c > 0 and small_enough(c - 1):
        c -= 1
    while not small_enough(c):
        c += 1
    return c


class DiscreteLaplaceMechanism(L1NoiseMechanism):
    """Add independent discrete Laplace noise to integer-valued queries: pure epsilon-DP.

    Each coordinate gets integer noise ``Z`` with

    ``P(Z = z) = tanh(epsilon / (2 Delta)) exp(-epsilon |z| / Delta)``, ``z`` in Z,

    i.e. scale ``b = Delta / epsilon`` (``P`` proportional to ``exp(-|z| / b)``), where
    ``Delta = l1_sensitivity``. The normaliser is
    ``(1 - rho) / (1 + rho) = tanh(1 / (2 b))`` with ``rho = exp(-1 / b)``.

    **Privacy.** If ``f`` is integer-valued with ``||f(D) - f(D')||_1 <= Delta`` for
    every pair of neighbouring data sets, the release ``y = f(D) + (Z_1, ..., Z_d)``
    (an integer vector) has ``P_D(y) / P_D'(y) = exp((||y - f(D')||_1 -
    ||y - f(D)||_1) epsilon / Delta) <= exp(epsilon)`` by the triangle inequality, so it
    is epsilon-DP (Canonne, Kamath and Steinke 2020, Sec. 2; Ghosh, Roughgarden and
    Sundararajan 2012 for the one-dimensional geometric mechanism). The noise is drawn
    *exactly* from this distribution (:meth:`NoiseSource.discrete_laplace
    <privconf_sklearn._random.NoiseSource.discrete_laplace>`, their Algorithm 2, integer
    arithmetic only, the exact rational scale ``Delta / epsilon``), so the statement
    holds for the released integers themselves: no floating-point noise (Mironov 2012)
    is involved.

    **Distribution functions** (exact formulas, evaluated in float64): for an integer
    ``k``, ``P(Z >= k) = rho^k / (1 + rho)`` when ``k >= 0`` and
    ``1 - rho^(1 - k) / (1 + rho)`` when ``k <= 0``; ``P(Z <= x) = P(Z >= -floor(x))``
    by symmetry.

    Parameters
    ----------
    epsilon : float
        Privacy parameter, > 0 and finite.
    l1_sensitivity : float
        ``Delta``, the largest l1 distance between the query vectors of two neighbouring
        data sets (an integer for integer-valued queries), > 0 and finite.
    adjacency : {"replace-one", "add/remove", "replace-one and add/remove"}, \
            default="replace-one and add/remove"
        Neighbouring relation(s) under which ``l1_sensitivity`` bounds the change.

    Examples
    --------
    >>> import numpy as np
    >>> from privconf_sklearn.privacy import DiscreteLaplaceMechanism
    >>> mechanism = DiscreteLaplaceMechanism(epsilon=1.0, l1_sensitivity=4)
    >>> mechanism.scale
    Fraction(4, 1)
    >>> mechanism.randomise(np.array([10, 20, 30]), random_state=0).dtype
    dtype('int64')
    >>> round(float(np.exp(mechanism.noise_log_pmf(0))), 4)  # tanh(1/8)
    0.1244
    >>> mechanism.tail_bound(1e-3, n_coordinates=3)  # P(max |Z_i| > 32) <= 1e-3
    32
    """

    def __init__(
        self,
        epsilon: float,
        l1_sensitivity: float,
        *,
        adjacency: str = "replace-one and add/remove",
    ):
        super().__init__(epsilon, l1_sensitivity, adjacency=adjacency)
        self._scale = Fraction(self.l1_sensitivity) / Fraction(self.epsilon)
        self._decay = float(1 / self._scale)  # 1 / b, correctly rounded

    @property
    def scale(self) -> Fraction:
        """The scale ``b = l1_sensitivity / epsilon``, exactly (a Fraction)."""
        return self._scale

    def sample_noise(self, size: int | tuple[int, ...] = 1, random_state=None) -> np.ndarray:
        """Independent draws of ``Z``, exactly.

        Parameters
        ----------
        size : int or tuple of int, default=1
            Output shape.
        random_state : None, int, RandomState or Generator, default=None
            Source of the privacy randomness: ``None`` (production) reads the operating
            system's cryptographic generator; anything else is reproducible, for tests.

        Returns
        -------
        ndarray
            int64 (an object array of Python ints for draws beyond the int64 range).
        """
        return check_noise_source(random_state).discrete_laplace(self.scale, size)

    def randomise(self, values, random_state=None) -> np.ndarray:
        """``values`` plus independent noise ``Z``, one draw per entry.

        Parameters
        ----------
        values : array-like of int
            The exact integer query answers (an integer array; floats are refused).
        random_state : None, int, RandomState or Generator, default=None
            Source of the privacy randomness (see :meth:`sample_noise`).

        Returns
        -------
        ndarray, same shape as ``values``
            int64 when the sums fit, else an object array of Python ints.
        """
        values = _integer_values(values)
        noise = self.sample_noise(values.shape, random_state)
        if values.dtype == object or noise.dtype == object:
            return values.astype(object) + noise.astype(object)
        limit = 2**62
        if values.size and (np.abs(values).max() >= limit or np.abs(noise).max() >= limit):
            return values.astype(object) + noise.astype(object)
        return values + noise

    def noise_log_pmf(self, z) -> np.ndarray:
        """``log P(Z = z)`` (``-inf`` off the integers)."""
        z = np.asarray(z, dtype=np.float64)
        decay = self._decay
        log_norm = math.log(-math.expm1(-decay)) - math.log1p(math.exp(-decay))
        with np.errstate(invalid="ignore"):
            return np.where(z == np.floor(z), log_norm - decay * np.abs(z), -np.inf)

    def noise_log_cdf(self, x) -> np.ndarray:
        """``log P(Z <= x)`` for real ``x`` (exact output distributions)."""
        return _log_at_least(self._decay, -np.floor(np.asarray(x, dtype=np.float64)))

    def noise_log_sf(self, x) -> np.ndarray:
        """``log P(Z > x)`` for real ``x``."""
        return _log_at_least(self._decay, np.floor(np.asarray(x, dtype=np.float64)) + 1.0)

    def noise_isf(self, probability: float) -> int:
        """The smallest integer ``c >= 0`` with ``P(Z > c) <= probability``.

        ``P(Z > c) = rho^(c + 1) / (1 + rho)``; the closed-form root is checked and moved
        by single steps with a relative margin of ``1e-12`` in the safe direction, so
        rounding never returns a ``c`` whose tail exceeds ``probability``.

        Parameters
        ----------
        probability : float
            In (0, 1).
        """
        if not (_is_real(probability) and 0.0 < probability < 1.0):
            raise ValueError(f"probability must be a real number in (0, 1); got {probability!r}.")
        return _upper_quantile(self._decay, float(probability))

    def tail_bound(self, failure_probability: float, n_coordinates: int) -> int:
        """The smallest integer ``lambda >= 0`` with ``d P(|Z| > lambda) <= failure_probability``.

        ``P(|Z| > lambda) = 2 P(Z > lambda)``; a union bound over the ``d =
        n_coordinates`` coordinates then gives ``P(max_i |Z_i| > lambda) <=
        failure_probability`` with ``lambda = noise_isf(failure_probability / (2 d))``.
        """
        return self.noise_isf(failure_probability / (2.0 * n_coordinates))

    def _noise_description(self) -> str:
        return (
            f"Discrete Laplace noise of scale {float(self.scale):.4g} (l1 sensitivity "
            f"{self.l1_sensitivity:g}), sampled exactly."
        )
