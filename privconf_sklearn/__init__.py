"""Differentially private conformal prediction for scikit-learn.

Wrap a fitted (often differentially private) model, calibrate it on held-out data with
a private quantile mechanism, and get prediction sets or intervals with a stated
coverage guarantee and a stated privacy guarantee for the calibration set.
"""

from ._diffprivlib import import_diffprivlib, prepare_diffprivlib
from .cards import Contract, ContractCard, verify_card
from .classification import PrivateConformalClassifier
from .mechanisms import (
    Calibration,
    InfeasibleCalibrationWarning,
    PrivacyGuarantee,
    UninformativeCalibrationWarning,
)
from .model_selection import CertificateAwareSearch
from .regression import (
    PrivacyLeakWarning,
    PrivateConformalRegressor,
    QuantilePair,
    ScoreBoundsWarning,
)
from .risk_control import PrivateRiskControlClassifier

__version__ = "0.1.0"

# diffprivlib 0.6.6 imports two aliases scikit-learn 1.9 removed: define them (only where
# missing, with their old values), import diffprivlib if it can be, and order the warning
# filters so that joblib workers run the same step (see privconf_sklearn._diffprivlib).
prepare_diffprivlib()

__all__ = [
    "Calibration",
    "CertificateAwareSearch",
    "Contract",
    "ContractCard",
    "InfeasibleCalibrationWarning",
    "PrivacyGuarantee",
    "PrivacyLeakWarning",
    "PrivateConformalClassifier",
    "PrivateConformalRegressor",
    "PrivateRiskControlClassifier",
    "QuantilePair",
    "ScoreBoundsWarning",
    "UninformativeCalibrationWarning",
    "__version__",
    "import_diffprivlib",
    "verify_card",
]
