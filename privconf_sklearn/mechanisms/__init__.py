"""Quantile and risk-control mechanisms: how a calibration threshold is released.

Every mechanism takes calibration scores in the public range [0, 1] and returns a
:class:`Calibration` carrying the threshold, the coverage bounds and the
:class:`PrivacyGuarantee` of the release. It reads the scores only through a few exact
statistics (:class:`ScoreStatistics`), so it can release from scores held elsewhere too
(:meth:`QuantileMechanism.calibrate_from_statistics`).

Risk-control mechanisms (:class:`ExponCRC`, :class:`SplitCRC`) take the summed loss
curve of a calibration set over a public grid (:class:`LossCurve`) and return a
:class:`RiskCalibration`: the released candidate, its risk bound and its guarantee.
"""

from ..privacy import PrivacyGuarantee
from ._base import (
    Calibration,
    CoverageCertificate,
    Forecast,
    InfeasibleCalibrationWarning,
    QuantileMechanism,
    UninformativeCalibrationWarning,
    infeasible_calibration,
)
from ._binning import bin_counts
from ._grids import LogGrid
from ._loss_curve import LossCurve, loss_units, max_resolution
from ._statistics import (
    RankCounter,
    ScoreArray,
    ScoreStatistics,
    agent_labels,
    count_agent_ids,
    edge_counts,
)
from .dp_aps import DPAPS
from .expon_q import ExponQ
from .fedcp import FedCP2QQ, FedCPQQ
from .pcoqs import PCOQS
from .risk_control import (
    ExponCRC,
    LossAssumptionWarning,
    RiskCalibration,
    RiskCertificate,
    RiskControlMechanism,
    RiskForecast,
    SplitCRC,
)
from .split import SplitConformal

__all__ = [
    "DPAPS",
    "PCOQS",
    "Calibration",
    "CoverageCertificate",
    "ExponCRC",
    "ExponQ",
    "FedCP2QQ",
    "FedCPQQ",
    "Forecast",
    "InfeasibleCalibrationWarning",
    "LogGrid",
    "LossAssumptionWarning",
    "LossCurve",
    "PrivacyGuarantee",
    "QuantileMechanism",
    "RankCounter",
    "RiskCalibration",
    "RiskCertificate",
    "RiskControlMechanism",
    "RiskForecast",
    "ScoreArray",
    "ScoreStatistics",
    "SplitCRC",
    "SplitConformal",
    "UninformativeCalibrationWarning",
    "agent_labels",
    "bin_counts",
    "count_agent_ids",
    "edge_counts",
    "infeasible_calibration",
    "loss_units",
    "max_resolution",
]
