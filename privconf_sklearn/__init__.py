"""Differentially private conformal prediction for scikit-learn.

Wrap a fitted (often differentially private) model, calibrate it on held-out data with
a private quantile mechanism, and get prediction sets or intervals with a stated
coverage guarantee and a stated privacy guarantee for the calibration set.
"""

from ._diffprivlib import import_diffprivlib, restore_removed_tree_aliases
from .cards import Contract, ContractCard, verify_card
from .classification import PrivateConformalClassifier
from .mechanisms import (
    Calibration,
    Forecast,
    InfeasibleCalibrationWarning,
    PrivacyGuarantee,
    UninformativeCalibrationWarning,
)
from .model_selection import CertificateAwareSearch
from .mondrian import UninformativePredictionWarning
from .regression import (
    PrivacyLeakWarning,
    PrivateConformalRegressor,
    QuantilePair,
    ScoreBoundsWarning,
)
from .risk_control import PrivateRiskControlClassifier

__version__ = "0.1.0"

# The one change outside the package: diffprivlib 0.6.6 imports two aliases scikit-learn
# 1.9 removed from sklearn.tree._tree; define them, only where missing, with their old
# values (numpy.float64, numpy.float32). diffprivlib itself is not imported here; see
# privconf_sklearn._diffprivlib for what this step covers and what it cannot.
restore_removed_tree_aliases()

__all__ = [
    "Calibration",
    "CertificateAwareSearch",
    "Contract",
    "ContractCard",
    "Forecast",
    "InfeasibleCalibrationWarning",
    "PrivacyGuarantee",
    "PrivacyLeakWarning",
    "PrivateConformalClassifier",
    "PrivateConformalRegressor",
    "PrivateRiskControlClassifier",
    "QuantilePair",
    "ScoreBoundsWarning",
    "UninformativeCalibrationWarning",
    "UninformativePredictionWarning",
    "__version__",
    "import_diffprivlib",
    "restore_removed_tree_aliases",
    "verify_card",
]
