"""Quantile mechanisms: how a calibration threshold is released.

Every mechanism takes calibration scores in the public range [0, 1] and returns a
:class:`Calibration` carrying the threshold, the coverage bounds and the
:class:`PrivacyGuarantee` of the release.
"""

from ._base import (
    Calibration,
    CoverageCertificate,
    InfeasibleCalibrationWarning,
    PrivacyGuarantee,
    QuantileMechanism,
)
from .expon_q import ExponQ
from .split import SplitConformal

__all__ = [
    "Calibration",
    "CoverageCertificate",
    "ExponQ",
    "InfeasibleCalibrationWarning",
    "PrivacyGuarantee",
    "QuantileMechanism",
    "SplitConformal",
]
