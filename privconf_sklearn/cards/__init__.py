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
- The selection rules of :class:`~privconf_sklearn.model_selection.CertificateAwareSearch`
  (formal screening first, calibration only for the admissible, non-dominated
  configurations; Sec. 4, Table 2), which the verifier recomputes.
"""

from ..base import register_card_builder
from ._card import SCHEMA, SCHEMA_VERSION, ContractCard, OwnerDiagnosticsWarning
from ._codec import CardFormatError
from ._contract import CLAUSES, Clause, Contract
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
from ._search import CertificateSelection
from ._verify import MECHANISMS, Verification, verify_card

register_card_builder(ContractCard.from_estimator)

__all__ = [
    "CLAUSES",
    "MECHANISMS",
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
    "Selection",
    "Signature",
    "TrainingPrivacy",
    "Verification",
    "verify_card",
]
