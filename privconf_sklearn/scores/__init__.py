"""Conformity scores, and the losses of prediction sets that risk control controls.

One class per conformity score, with string aliases for estimators; the losses of
prediction sets in :mod:`.risk`. Also the map between a score's public range
``[low, high]`` and the range [0, 1] the mechanisms see (:func:`to_unit_range`,
:func:`threshold_in_score_units`).
"""

from ._base import BaseConformityScore, ConformityScoreWarning
from ._unit_range import (
    public_score_threshold,
    score_threshold,
    threshold_in_score_units,
    to_unit_range,
)
from .classification import APS, LAC, RAPS, ClassificationScore, check_label_kinds
from .regression import (
    CQR,
    AbsoluteResidual,
    NormalizedResidual,
    RegressionScore,
    check_predictions,
)
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
    "ConformityScoreWarning",
    "FalseNegativeRate",
    "NormalizedResidual",
    "RegressionScore",
    "SetLoss",
    "check_label_kinds",
    "check_predictions",
    "public_score_threshold",
    "score_threshold",
    "threshold_in_score_units",
    "to_unit_range",
]
