"""Privacy primitives and the privacy statements they produce.

The lowest privacy layer of the package: it imports nothing from the estimators, scores
or quantile mechanisms built on top of it. One class per primitive, each with its
privacy analysis and the neighbouring relation it holds under:

- :class:`ExponentialMechanism`: one candidate of a finite range, from given utilities
  (standard, monotone and range-bounded analyses);
- :class:`DiscreteLaplaceMechanism`: integer-valued queries (counts) with bounded l1
  sensitivity, integer noise sampled exactly;
- :class:`LaplaceVectorMechanism`: real-valued queries with bounded l1 sensitivity
  (floating-point continuous noise);
- :class:`GaussianQueryComposer`: adaptive Gaussian queries with zCDP / Gaussian-DP
  accounting and the exact (epsilon, delta) conversion.

Each returns a :class:`PrivacyGuarantee`.
"""

from ._conversions import (
    bun_steinke_epsilon,
    gaussian_delta,
    gaussian_epsilon,
    gaussian_mu,
    zcdp_delta,
    zcdp_epsilon,
    zcdp_log_delta,
)
from ._discrete_laplace import DiscreteLaplaceMechanism
from ._exponential import EXPONENTIAL_ANALYSES, ExponentialMechanism
from ._gaussian import GaussianQueryComposer
from ._guarantee import (
    ADJACENCIES,
    ADJACENCY_STATEMENTS,
    Adjacency,
    PrivacyGuarantee,
    PrivacyNotion,
)
from ._laplace import LaplaceVectorMechanism

__all__ = [
    "ADJACENCIES",
    "ADJACENCY_STATEMENTS",
    "EXPONENTIAL_ANALYSES",
    "Adjacency",
    "DiscreteLaplaceMechanism",
    "ExponentialMechanism",
    "GaussianQueryComposer",
    "LaplaceVectorMechanism",
    "PrivacyGuarantee",
    "PrivacyNotion",
    "bun_steinke_epsilon",
    "gaussian_delta",
    "gaussian_epsilon",
    "gaussian_mu",
    "zcdp_delta",
    "zcdp_epsilon",
    "zcdp_log_delta",
]
