"""Conformity scores: one class per score, with string aliases for estimators."""

from ._base import BaseConformityScore, ConformityScoreWarning
from .classification import APS, LAC, RAPS, ClassificationScore
from .regression import CQR, AbsoluteResidual, NormalizedResidual, RegressionScore

__all__ = [
    "APS",
    "CQR",
    "LAC",
    "RAPS",
    "AbsoluteResidual",
    "BaseConformityScore",
    "ClassificationScore",
    "ConformityScoreWarning",
    "NormalizedResidual",
    "RegressionScore",
]
