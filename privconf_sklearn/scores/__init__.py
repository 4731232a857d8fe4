"""Conformity scores and the losses of prediction sets.

One class per conformity score (with string aliases for the estimators), and the losses
of prediction sets that conformal risk control controls.
"""

from ._base import BaseConformityScore
from .classification import APS, LAC, RAPS, ClassificationScore
from .regression import CQR, AbsoluteResidual, NormalizedResidual, RegressionScore
from .risk import CallableLoss, FalseNegativeRate, SetLoss

__all__ = [
    "APS",
    "CQR",
    "LAC",
    "RAPS",
    "AbsoluteResidual",
    "BaseConformityScore",
    "CallableLoss",
    "ClassificationScore",
    "FalseNegativeRate",
    "NormalizedResidual",
    "RegressionScore",
    "SetLoss",
]
