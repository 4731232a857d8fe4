"""Privacy primitives and the privacy statements they produce.

The lowest privacy layer of the package: it imports nothing from the estimators, scores
or quantile mechanisms built on top of it.
"""

from ._guarantee import ADJACENCIES, Adjacency, PrivacyGuarantee, PrivacyNotion

__all__ = ["ADJACENCIES", "Adjacency", "PrivacyGuarantee", "PrivacyNotion"]
