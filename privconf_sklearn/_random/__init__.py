"""The library's single randomness policy: privacy noise, and the other draws.

Every random draw that protects privacy goes through a :class:`NoiseSource`, built by
:func:`check_noise_source` from a ``random_state``:

- ``None`` (the default, and the only setting meant for production): 64-bit words from
  the operating system's cryptographic generator (:func:`os.urandom`). Nothing is seeded
  and nothing can be replayed.
- an ``int``, a :class:`numpy.random.RandomState` or a :class:`numpy.random.Generator`:
  words drawn from numpy, so results are reproducible. Use this for tests and
  experiments only: anyone who knows the seed can subtract the noise.

Both kinds of source go through identical code: only the words differ.

**Exact samplers** (:mod:`._discrete`, :mod:`._exceedance`, :mod:`._exponential`),
built on uniform random bits and integer (or rigorously bounded) arithmetic, so that the
distribution drawn is exactly the one the privacy proofs are about, with no ``2**-53`` rounding:

- :meth:`NoiseSource.bernoulli_exp`: ``Bernoulli(exp(-gamma))`` for rational ``gamma``
  (Canonne, Kamath and Steinke 2020, Algorithm 1);
- :meth:`NoiseSource.discrete_laplace`: ``P(Z = z)`` proportional to
  ``exp(-|z| / scale)`` on the integers, for rational ``scale`` (their Algorithm 2);
- :meth:`NoiseSource.discrete_laplace_first_crossing`: the first ``b`` with
  ``values[b] + Z_b >= level`` for independent discrete Laplace ``Z_b``, drawing only the
  events ``Z_b >= level - values[b]`` (uniform bits against the exact binary expansion of
  their probability), in order, up to the first that occurs (:mod:`._exceedance`);
- :meth:`NoiseSource.exponential_mechanism`: index ``j`` with probability proportional
  to ``exp(-rate * a_j / D)`` for integer penalties ``a_j`` (inverse CDF with lazily
  refined precision).

**Floating-point samplers** (:meth:`NoiseSource.uniform`, :meth:`NoiseSource.laplace`,
:meth:`NoiseSource.normal`): inverse-CDF transforms of 53-bit uniforms, used where no
pure-DP claim rests on the last bits (the Gaussian noise of P-COQS, random subsets,
:class:`~privconf_sklearn.privacy.LaplaceVectorMechanism` on real-valued queries).
Probabilities below about ``2**-53`` are not represented exactly there (Mironov, "On
significance of the least significant bits for differential privacy", CCS 2012).

The other draws of an estimator (the split of ``prefit=False``, the uniforms of the
randomised APS and RAPS scores) are not privacy noise; they come from the numpy
``RandomState`` of :func:`check_random_state` (scikit-learn's rule, with ``None``
meaning numpy's global generator), which also accepts a ``Generator``.

Consumption is the same everywhere: a ``RandomState`` or a ``Generator`` is used
directly, so every draw advances it (successive fits and predictions get fresh
randomness), while an int seeds a fresh generator at every draw (the same draws each
time).
"""

from ._source import NoiseSource, check_noise_source, check_random_state

__all__ = ["NoiseSource", "check_noise_source", "check_random_state"]
