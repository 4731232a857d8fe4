"""Conformity scores: one class per score, with string aliases for estimators."""

from ._base import BaseConformityScore
from .classification import APS, LAC, ClassificationScore

__all__ = ["APS", "LAC", "BaseConformityScore", "ClassificationScore"]
