"""The library's single randomness policy: privacy noise, and the other draws.

Every random draw that protects privacy goes through a :class:`NoiseSource`, built by
:func:`check_noise_source` from a ``random_state``:

- ``None`` (the default, and the only setting meant for production): 64-bit words from
  the operating system's cryptographic generator (:func:`os.urandom`), turned into
  uniforms in the open interval (0, 1) with 53 random bits each. Nothing is seeded and
  nothing can be replayed.
- an ``int``, a :class:`numpy.random.RandomState` or a :class:`numpy.random.Generator`:
  the same 53-bit uniforms drawn from numpy, so results are reproducible. Use this for
  tests and experiments only: anyone who knows the seed can subtract the noise.

All samplers (Laplace, Gaussian, categorical from log-weights) are inverse-CDF
transforms of these uniforms, so both kinds of source go through identical code.

The other draws of an estimator (the split of ``prefit=False``, the uniforms of the
randomised APS and RAPS scores) are not privacy noise; they come from the numpy
``RandomState`` of :func:`check_random_state` (scikit-learn's rule, with ``None``
meaning numpy's global generator), which also accepts a ``Generator``.

Consumption is the same everywhere: a ``RandomState`` or a ``Generator`` is used
directly, so every draw advances it (successive fits and predictions get fresh
randomness), while an int seeds a fresh generator at every draw (the same draws each
time).

Floating-point note: like every numpy-based DP library, samples are 53-bit floats, so
probabilities below about ``2**-53`` are not represented exactly (Mironov, "On
significance of the least significant bits for differential privacy", CCS 2012).
"""

from __future__ import annotations

import math
import os

import numpy as np
from scipy.special import ndtri
from sklearn.utils import check_random_state as _sklearn_check_random_state

__all__ = ["NoiseSource", "check_noise_source", "check_random_state"]

_TWO_POW_53 = float(2**53)


class NoiseSource:
    """Uniform (0, 1) doubles and the privacy-noise samplers built on them.

    Parameters
    ----------
    generator : numpy.random.Generator or numpy.random.RandomState or None
        ``None`` reads the operating system's cryptographic generator; otherwise the
        numpy generator is used (reproducible, not for production).
    """

    def __init__(self, generator=None):
        self._generator = generator

    @property
    def cryptographic(self) -> bool:
        """Whether draws come from the operating system's cryptographic generator."""
        return self._generator is None

    def _random_words(self, size: int) -> np.ndarray:
        if self._generator is None:
            return np.frombuffer(os.urandom(8 * size), dtype=np.uint64) >> np.uint64(11)
        if isinstance(self._generator, np.random.Generator):
            return self._generator.integers(0, 2**53, size=size, dtype=np.uint64)
        return self._generator.randint(0, 2**53, size=size, dtype=np.uint64)

    def uniform(self, size: int | tuple[int, ...] = 1) -> np.ndarray:
        """Uniforms on the open interval (0, 1), 53 random bits each.

        Parameters
        ----------
        size : int or tuple of int
            Output shape.

        Returns
        -------
        ndarray of float64
            Values ``(k + 1/2) / 2**53`` for uniform integers ``0 <= k < 2**53``;
            never exactly 0 or 1, and symmetric about 1/2.
        """
        shape = (size,) if isinstance(size, int | np.integer) else tuple(size)
        count = math.prod(int(length) for length in shape)
        words = self._random_words(count).astype(np.float64)
        return ((words + 0.5) / _TWO_POW_53).reshape(shape)

    def laplace(self, scale: float, size: int | tuple[int, ...] = 1) -> np.ndarray:
        """Centred Laplace noise with density ``exp(-|x| / scale) / (2 scale)``."""
        v = self.uniform(size) - 0.5
        return -scale * np.sign(v) * np.log1p(-2.0 * np.abs(v))

    def normal(self, scale: float, size: int | tuple[int, ...] = 1) -> np.ndarray:
        """Centred Gaussian noise with standard deviation ``scale``."""
        return scale * ndtri(self.uniform(size))

    def discrete_laplace(self, rate: float, size: int = 1) -> np.ndarray:
        """Integer noise with ``P(z)`` proportional to ``exp(-rate |z|)`` (two-sided geometric).

        The difference of two independent geometric variables on ``{0, 1, ...}`` with
        ``P(G >= g) = exp(-rate g)``, each drawn by inversion of one uniform.
        """
        first = np.floor(-np.log(self.uniform(size)) / rate)
        second = np.floor(-np.log(self.uniform(size)) / rate)
        return (first - second).astype(np.int64)

    def categorical_from_log_weights(self, log_weights: np.ndarray) -> int:
        """Draw index ``j`` with probability proportional to ``exp(log_weights[j])``.

        One uniform and an inverse-CDF search over the cumulative weights, shifted by
        their maximum first (no overflow whatever the weights' magnitude).

        Parameters
        ----------
        log_weights : ndarray of shape (m,)
            Unnormalised log-probabilities; ``-inf`` entries are never drawn.

        Returns
        -------
        int
            The drawn index.
        """
        cdf = np.cumsum(np.exp(log_weights - np.max(log_weights)))
        u = self.uniform(1)[0] * cdf[-1]
        index = int(np.searchsorted(cdf, u, side="right"))
        # u < cdf[-1] always; guard the last index against rounding in cumsum.
        return min(index, log_weights.shape[0] - 1)


def check_noise_source(random_state) -> NoiseSource:
    """Turn a ``random_state`` into the :class:`NoiseSource` used for privacy noise.

    Parameters
    ----------
    random_state : None, int, numpy.random.RandomState or numpy.random.Generator
        ``None`` selects the operating system's cryptographic generator (production).
        Anything else gives reproducible noise (tests and experiments only).

    Returns
    -------
    NoiseSource

    Raises
    ------
    ValueError
        If ``random_state`` is of another type, or a negative integer.
    """
    if random_state is None:
        return NoiseSource(None)
    if isinstance(random_state, NoiseSource):
        return random_state
    if isinstance(random_state, np.random.Generator | np.random.RandomState):
        return NoiseSource(random_state)
    if isinstance(random_state, int | np.integer) and not isinstance(random_state, bool):
        if random_state < 0:
            raise ValueError(f"random_state must be a non-negative integer; got {random_state}.")
        return NoiseSource(np.random.default_rng(int(random_state)))
    raise ValueError(
        "random_state must be None (cryptographic noise), an int, a "
        f"numpy.random.RandomState or a numpy.random.Generator; got {random_state!r}."
    )


def check_random_state(random_state) -> np.random.RandomState:
    """Turn a ``random_state`` into the numpy ``RandomState`` of the draws that are not noise.

    scikit-learn's :func:`~sklearn.utils.check_random_state`, which also accepts a
    :class:`numpy.random.Generator`: the ``RandomState`` then wraps the Generator's bit
    generator, so its draws advance the Generator, as they advance a given
    ``RandomState``. For the split of ``prefit=False`` and the uniforms of randomised
    scores; privacy noise comes from :func:`check_noise_source`.

    Parameters
    ----------
    random_state : None, int, numpy.random.RandomState or numpy.random.Generator
        ``None`` is numpy's global ``RandomState``; an int seeds a new one.

    Returns
    -------
    numpy.random.RandomState

    Raises
    ------
    ValueError
        If ``random_state`` is of another type (scikit-learn's message).
    """
    if isinstance(random_state, np.random.Generator):
        return np.random.RandomState(random_state.bit_generator)
    return _sklearn_check_random_state(random_state)
