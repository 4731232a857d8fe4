"""The noise source: random words, uniform integers and bits, and the samplers on them.

See the package docstring for the policy (cryptographic by default, seeded for tests).
"""

from __future__ import annotations

import math
import os

import numpy as np
from scipy.special import ndtri
from sklearn.utils import check_random_state as _sklearn_check_random_state

from ._bits import BitSource
from ._discrete import bernoulli_exp, discrete_laplace
from ._exceedance import first_exceedance
from ._exponential import sample_exponential_mechanism
from ._rational import as_fraction, as_positive_integer

__all__ = ["NoiseSource", "check_noise_source", "check_random_state"]

_TWO_POW_53 = float(2**53)


def _shape(size) -> tuple[int, ...]:
    return (int(size),) if isinstance(size, int | np.integer) else tuple(int(n) for n in size)


class NoiseSource(BitSource):
    """Random words, and the privacy-noise samplers built on them.

    One primitive, :meth:`random_words` (independent uniform 64-bit words), feeds the
    exact samplers: uniform integers below any bound (:meth:`integers_below`),
    arbitrarily many bits (:meth:`random_bits`), ``Bernoulli(exp(-gamma))``
    (:meth:`bernoulli_exp`), the discrete Laplace distribution
    (:meth:`discrete_laplace`) and the exponential mechanism
    (:meth:`exponential_mechanism`). The floating-point samplers (:meth:`uniform`,
    :meth:`laplace`, :meth:`normal`) use 53-bit uniforms.

    Parameters
    ----------
    generator : numpy.random.Generator or numpy.random.RandomState or None
        ``None`` reads the operating system's cryptographic generator; otherwise the
        numpy generator is used (reproducible, not for production).
    """

    # --------------------------------------------------------- exact samplers
    def bernoulli_exp(self, gamma, size: int | tuple[int, ...] = 1) -> np.ndarray:
        """Independent ``Bernoulli(exp(-gamma))`` draws, exactly, for rational ``gamma``.

        Canonne, Kamath and Steinke, "The Discrete Gaussian for Differential Privacy"
        (NeurIPS 2020), Algorithm 1, with integer arithmetic only (``gamma`` an int, a
        Fraction or a float, which is an exact dyadic rational).

        Returns
        -------
        ndarray of bool
        """
        exact = as_fraction(gamma, "gamma", allow_zero=True)
        shape = _shape(size)
        numerators = np.full(math.prod(shape), exact.numerator, dtype=object)
        return bernoulli_exp(self, numerators, exact.denominator).reshape(shape)

    def discrete_laplace(self, scale, size: int | tuple[int, ...] = 1) -> np.ndarray:
        """Discrete Laplace noise: ``P(Z = z)`` proportional to ``exp(-|z| / scale)``.

        Exactly, on the integers, for a rational ``scale > 0`` (an int, a Fraction or a
        float): Canonne, Kamath and Steinke (2020), Algorithm 2.

        Returns
        -------
        ndarray
            int64 (an object array of Python ints in the event that a draw does not fit).
        """
        exact = as_fraction(scale, "scale")
        shape = _shape(size)
        draws = discrete_laplace(self, exact.numerator, exact.denominator, math.prod(shape))
        return draws.reshape(shape)

    def discrete_laplace_first_crossing(self, scale, values, level: int) -> int:
        """The first ``b`` with ``values[b] + Z_b >= level``, ``Z_b`` independent discrete Laplace.

        The law of that index for ``P(Z_b = z)`` proportional to ``exp(-|z| / scale)``,
        exactly, without drawing the ``Z_b``: the events ``Z_b >= level - values[b]`` are
        drawn as independent Bernoulli variables by comparing uniform bits with the
        exact binary expansion of their probability, block by block, stopping at the
        first success (``_random._exceedance``).

        Parameters
        ----------
        scale : float, int or Fraction
            ``> 0``; a float is an exact dyadic rational.
        values : array-like of int, shape (m,)
            Integers (int64).
        level : int
            The threshold.

        Returns
        -------
        int
            The index, or ``m`` if no ``values[b] + Z_b`` reaches ``level``.
        """
        return first_exceedance(self, 1 / as_fraction(scale, "scale"), values, level)

    def exponential_mechanism(self, penalties, denominator, rate) -> int:
        """Index ``j`` with probability exactly proportional to ``exp(-rate a_j / D)``.

        Inverse CDF with lazily refined precision (``_random._exponential``): one 64-bit
        word and one floating-point pass with rigorous error bounds decide the draw,
        except with probability about ``4 (2**-40 + m 2**-53)``; then the comparison is
        settled with exact integer arithmetic on rigorous bounds of the weights.

        Parameters
        ----------
        penalties : array-like of shape (m,)
            Non-negative integers ``a_j`` (int64, or Python ints of any size).
        denominator : int
            ``D >= 1``.
        rate : float, int or Fraction
            ``> 0``; a float is an exact dyadic rational.

        Returns
        -------
        int
            The drawn index.
        """
        return sample_exponential_mechanism(
            self,
            penalties,
            as_positive_integer(denominator, "denominator"),
            as_fraction(rate, "rate"),
        )

    # ------------------------------------------------ floating-point samplers
    def _uniform_words(self, size: int) -> np.ndarray:
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
        shape = _shape(size)
        words = self._uniform_words(math.prod(shape)).astype(np.float64)
        return ((words + 0.5) / _TWO_POW_53).reshape(shape)

    def laplace(self, scale: float, size: int | tuple[int, ...] = 1) -> np.ndarray:
        """Continuous Laplace noise (floating point), density ``exp(-|x| / scale) / (2 scale)``."""
        v = self.uniform(size) - 0.5
        return -scale * np.sign(v) * np.log1p(-2.0 * np.abs(v))

    def normal(self, scale: float, size: int | tuple[int, ...] = 1) -> np.ndarray:
        """Centred Gaussian noise (floating point) with standard deviation ``scale``."""
        return scale * ndtri(self.uniform(size))


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
