"""Contract cards: auditable records of every calibration.

After "Contract Cards for Auditable Private Conformal Prediction" (2026):

- :class:`Contract`: coverage and privacy requirements, the adjacency the budgets are
  stated under, and whether the release must be informative.
- :class:`ContractCard`: formal layer (contract, configuration with the public list of
  Mondrian groups, privacy coordinates, certificate ``L(c)`` and release of the
  calibration or of every Mondrian group, Eq. (3) clause by clause with margins,
  selection summary) and published diagnostics; JSON with a versioned schema, a digest
  of the formal layer and an optional Ed25519 signature of the whole published card;
  Markdown that marks what is unsigned. Publishable by default: the owner's non-private
  diagnostics are written only on request.
- :func:`verify_card`: rebuild the formal layer from a serialised card alone and
  compare (Observation 4.1); never raises on a card.
- :class:`RiskCard` and :class:`RiskContract`: the same record for a conformal risk
  control (:class:`~privconf_sklearn.PrivateRiskControlClassifier`), whose contract
  states the loss, its bound and the largest certified risk.
- The selection rules of :class:`~privconf_sklearn.model_selection.CertificateAwareSearch`
  (formal screening first, calibration only for the admissible, non-dominated
  configurations; Sec. 4, Table 2), which the verifier recomputes.
"""

from ..base import register_card_builder
from ..risk_control import PrivateRiskControlClassifier
from ._card import SCHEMA, SCHEMA_VERSION, ContractCard, OwnerDiagnosticsWarning
from ._codec import CardFormatError
from ._contract import CLAUSES, RISK_CLAUSES, Clause, Contract
from ._records import (
    CalibrationEntry,
    Candidate,
    Certificate,
    ComponentSpec,
    Configuration,
    Diagnostics,
    Release,
    Selection,
    Signature,
    TrainingPrivacy,
)
from ._risk_card import (
    RISK_SCHEMA,
    RISK_SCHEMA_VERSION,
    RiskCard,
    RiskContract,
    RiskEntry,
    RiskRelease,
    RiskSetup,
)
from ._search import CertificateSelection
from ._verify import MECHANISMS, RISK_MECHANISMS, Verification, verify_card


def card_of(estimator):
    """The card behind ``estimator.card_``: a :class:`RiskCard` for risk control.

    Otherwise :meth:`ContractCard.from_estimator`. Registered with
    :func:`~privconf_sklearn.base.register_card_builder` when this package is imported.
    """
    if isinstance(estimator, PrivateRiskControlClassifier):
        return RiskCard.from_estimator(estimator)
    return ContractCard.from_estimator(estimator)


register_card_builder(card_of)

__all__ = [
    "CLAUSES",
    "MECHANISMS",
    "RISK_CLAUSES",
    "RISK_MECHANISMS",
    "RISK_SCHEMA",
    "RISK_SCHEMA_VERSION",
    "SCHEMA",
    "SCHEMA_VERSION",
    "CalibrationEntry",
    "Candidate",
    "CardFormatError",
    "Certificate",
    "CertificateSelection",
    "Clause",
    "ComponentSpec",
    "Configuration",
    "Contract",
    "ContractCard",
    "Diagnostics",
    "OwnerDiagnosticsWarning",
    "Release",
    "RiskCard",
    "RiskContract",
    "RiskEntry",
    "RiskRelease",
    "RiskSetup",
    "Selection",
    "Signature",
    "TrainingPrivacy",
    "Verification",
    "card_of",
    "verify_card",
]
