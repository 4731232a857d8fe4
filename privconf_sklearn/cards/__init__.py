"""Contract cards: auditable records of every calibration (paper 003).

- :class:`Contract`: coverage and privacy requirements.
- :class:`ContractCard`: formal layer (contract, configuration, certificate ``L(c)``,
  privacy coordinates, Eq. (3) clause by clause with margins, release, selection
  summary) and diagnostic layer; JSON with a versioned schema and a digest, Markdown.
- :func:`verify_card`: recompute Eq. (3) and every recomputable formal field from a
  serialised card alone (Observation 4.1).
- :class:`CertificateAwareSearch`: formal screening first, calibration only for the
  admissible, non-dominated configurations (Sec. 4, Table 2).
"""

from .._base import register_card_builder
from ._card import SCHEMA, SCHEMA_VERSION, ContractCard
from ._contract import CLAUSES, Clause, Contract
from ._records import (
    Candidate,
    Certificate,
    ComponentSpec,
    Configuration,
    Diagnostics,
    Release,
    Selection,
    TrainingPrivacy,
)
from ._search import CertificateAwareSearch
from ._serial import CardFormatError
from ._verify import Verification, verify_card

register_card_builder(ContractCard.from_estimator)

__all__ = [
    "CLAUSES",
    "SCHEMA",
    "SCHEMA_VERSION",
    "Candidate",
    "CardFormatError",
    "Certificate",
    "CertificateAwareSearch",
    "Clause",
    "ComponentSpec",
    "Configuration",
    "Contract",
    "ContractCard",
    "Diagnostics",
    "Release",
    "Selection",
    "TrainingPrivacy",
    "Verification",
    "verify_card",
]
