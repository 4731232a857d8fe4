"""Quantile mechanisms: how a calibration threshold is released.

Every mechanism takes calibration scores in the public range [0, 1] and returns a
:class:`Calibration` carrying the threshold, the coverage bounds and the
:class:`PrivacyGuarantee` of the release. It reads the scores only through a few exact
statistics (:class:`ScoreStatistics`), so it can release from scores held elsewhere too
(:meth:`QuantileMechanism.calibrate_from_statistics`).
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
from .split import SplitConformal

__all__ = [
    "DPAPS",
    "PCOQS",
    "Calibration",
    "CoverageCertificate",
    "ExponQ",
    "FedCP2QQ",
    "FedCPQQ",
    "Forecast",
    "InfeasibleCalibrationWarning",
    "LogGrid",
    "PrivacyGuarantee",
    "QuantileMechanism",
    "RankCounter",
    "ScoreArray",
    "ScoreStatistics",
    "SplitConformal",
    "UninformativeCalibrationWarning",
    "agent_labels",
    "bin_counts",
    "count_agent_ids",
    "edge_counts",
    "infeasible_calibration",
]
