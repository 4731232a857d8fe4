"""Contract cards: auditable records of a calibration (paper 003 Sec. 4, Table 1).

A card has two layers. The *formal* layer records the contract, the configuration,
the mechanism's coverage certificate ``L(c)``, the privacy coordinates, the evaluated
clauses of Eq. (3) with their margins, the decision, the released threshold and, for a
certificate-aware search, the selection summary; a SHA-256 digest of it is stored with
the card. The *diagnostic* layer records empirical coverage, set size or interval
width, and the mechanism's certificate diagnostics; it is not evidence and is not
covered by the digest.
"""

from __future__ import annotations

import dataclasses
import math
import os
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from sklearn.base import is_classifier, is_regressor
from sklearn.utils.validation import check_is_fitted

from .._validation import check_alpha
from ..mechanisms import Calibration
from ..metrics import (
    interval_coverage,
    mean_interval_width,
    mean_set_size,
    set_coverage,
    singleton_rate,
)
from ..privacy import PrivacyGuarantee
from ._contract import (
    Clause,
    Contract,
    card_coordinates,
    check_contract,
    decision_of,
    marginal_lower_bound,
)
from ._records import (
    Certificate,
    ComponentSpec,
    Configuration,
    Diagnostics,
    Release,
    Selection,
    TrainingPrivacy,
)
from ._serial import (
    CardFormatError,
    dumps,
    loads,
    plain_value,
    record_from_dict,
    record_to_dict,
    sha256_of,
)
from ._training import check_budget, describe_estimator, training_privacy

__all__ = ["SCHEMA", "SCHEMA_VERSION", "ContractCard"]

#: Name written in every serialised card.
SCHEMA = "privconf_sklearn/contract-card"
#: Version of the JSON schema; readers refuse other versions.
SCHEMA_VERSION = 1

#: Calibration ``details`` keys that are certificate diagnostics (paper 003 Prop. 5.2).
_CERTIFICATE_DIAGNOSTICS = ("certificate_width", "observed_inflation", "grid_threshold")


def task_of(estimator) -> str:
    """``"classification"``, ``"regression"`` or ``"unspecified"``."""
    if is_classifier(estimator):
        return "classification"
    if is_regressor(estimator):
        return "regression"
    return "unspecified"


def certificate_of(lower_bound: float, confidence: float, feasible: bool, reason: str):
    """A :class:`Certificate` with its marginal bound filled in."""
    return Certificate(
        lower_bound=float(lower_bound),
        confidence=float(confidence),
        marginal_lower_bound=marginal_lower_bound(lower_bound, confidence),
        level_reachable=bool(feasible),
        reason=str(reason),
    )


def _optional_float(value) -> float | None:
    return None if value is None else float(value)


def calibration_diagnostics(details: dict) -> Diagnostics:
    """Certificate diagnostics and remaining mechanism details of a calibration."""
    rest = dict(details)
    values = {key: _optional_float(rest.pop(key, None)) for key in _CERTIFICATE_DIAGNOSTICS}
    private = rest.pop("diagnostics_are_private", None)
    return Diagnostics(
        **values,
        diagnostics_are_private=None if private is None else bool(private),
        mechanism_details=plain_value(rest),
    )


@dataclass(frozen=True)
class ContractCard:
    """An auditable record of one calibration against a contract (paper 003 Table 1).

    Build cards with :meth:`from_estimator` (or the estimators' ``card_``),
    :meth:`from_calibration` or a :class:`~privconf_sklearn.cards.CertificateAwareSearch`;
    read them with :meth:`from_json`; check them with
    :func:`~privconf_sklearn.cards.verify_card`.

    Parameters
    ----------
    contract : Contract or None
        The requirements (None: the card records the calibration only, ``decision`` is
        ``"unchecked"``; see :meth:`with_contract`).
    configuration : Configuration
        Nominal coverage, calibration size, mechanism, score, model.
    training_privacy : TrainingPrivacy
        ``eps_train`` (and delta) and where it comes from.
    calibration_privacy : PrivacyGuarantee
        ``eps_cal``: the guarantee of the calibration release.
    certificate : Certificate
        ``L(c)``, its confidence and the marginal bound Eq. (3) uses.
    clauses : tuple of Clause
        Eq. (3) clause by clause, with margins (empty without a contract).
    decision : {"feasible", "infeasible", "unchecked"}
        Conjunction of the clauses.
    release : Release or None, default=None
        The released threshold (None for a configuration never calibrated, e.g. the
        best attempted one of an infeasible search).
    selection : Selection or None, default=None
        Selection summary when the card comes from a certificate-aware search.
    diagnostics : Diagnostics, default=Diagnostics()
        Empirical and certificate diagnostics; filled by :meth:`evaluate`.
    formal_sha256 : str, default=""
        SHA-256 of the formal layer; computed when empty. A card read from JSON keeps
        the stated digest, so the verifier can compare it with the recomputed one.

    Examples
    --------
    >>> import numpy as np
    >>> from privconf_sklearn.cards import Contract, ContractCard
    >>> from privconf_sklearn.mechanisms import ExponQ
    >>> mechanism = ExponQ(epsilon=1.0)
    >>> scores = np.random.default_rng(0).uniform(size=2000)
    >>> calibration = mechanism.calibrate(scores, alpha=0.1, random_state=0)
    >>> contract = Contract(target_coverage=0.9, max_epsilon_train=2.0,
    ...                     max_epsilon_cal=1.0, beta=1e-3)
    >>> card = ContractCard.from_calibration(calibration, mechanism, contract=contract,
    ...                                      epsilon_train=2.0)
    >>> card.decision
    'feasible'
    >>> ContractCard.from_json(card.to_json()) == card
    True
    """

    contract: Contract | None
    configuration: Configuration
    training_privacy: TrainingPrivacy
    calibration_privacy: PrivacyGuarantee
    certificate: Certificate
    clauses: tuple[Clause, ...]
    decision: str
    release: Release | None = None
    selection: Selection | None = None
    diagnostics: Diagnostics = field(default_factory=Diagnostics, hash=False)
    formal_sha256: str = ""
    _estimator: Any = field(default=None, init=False, compare=False, repr=False, hash=False)

    def __post_init__(self):
        if not self.formal_sha256:
            object.__setattr__(self, "formal_sha256", self.compute_digest())

    # ---------------------------------------------------------------- building
    @classmethod
    def build(
        cls,
        *,
        contract: Contract | None,
        configuration: Configuration,
        training_privacy: TrainingPrivacy,
        calibration_privacy: PrivacyGuarantee,
        certificate: Certificate,
        release: Release | None = None,
        selection: Selection | None = None,
        diagnostics: Diagnostics | None = None,
    ) -> ContractCard:
        """A card whose clauses and decision are computed from the given fields."""
        if contract is not None and not isinstance(contract, Contract):
            raise TypeError(f"contract must be a Contract or None; got {type(contract).__name__}.")
        clauses = ()
        if contract is not None:
            coordinates = card_coordinates(
                training_privacy, calibration_privacy, certificate, selection
            )
            clauses = check_contract(contract, coordinates)
        return cls(
            contract=contract,
            configuration=configuration,
            training_privacy=training_privacy,
            calibration_privacy=calibration_privacy,
            certificate=certificate,
            clauses=clauses,
            decision=decision_of(contract, clauses),
            release=release,
            selection=selection,
            diagnostics=Diagnostics() if diagnostics is None else diagnostics,
        )

    @classmethod
    def from_calibration(
        cls,
        calibration: Calibration,
        mechanism,
        *,
        contract: Contract | None = None,
        epsilon_train: float | None = None,
        delta_train: float | None = None,
    ) -> ContractCard:
        """Card of a bare mechanism calibration (no model: ``task="unspecified"``).

        Parameters
        ----------
        calibration : Calibration
            What ``mechanism.calibrate`` returned.
        mechanism : QuantileMechanism
            The mechanism that produced it (its parameters go on the card).
        contract : Contract or None, default=None
            Requirements to check.
        epsilon_train, delta_train : float or None, default=None
            Training privacy of the model the scores came from; None records the
            training as not known to be private (``inf``).

        Returns
        -------
        ContractCard
        """
        training = _stated_training(epsilon_train, delta_train)
        configuration = Configuration(
            task="unspecified",
            alpha=float(calibration.alpha),
            nominal_coverage=1.0 - float(calibration.alpha),
            n_samples=int(calibration.n_samples),
            mechanism=ComponentSpec.of(mechanism),
            agent_sizes=_agent_sizes(mechanism, calibration),
        )
        return cls.build(
            contract=contract,
            configuration=configuration,
            training_privacy=training,
            calibration_privacy=calibration.privacy,
            certificate=certificate_of(
                calibration.coverage_lower_bound,
                calibration.lower_bound_confidence,
                calibration.feasible,
                "" if calibration.feasible else calibration.reason,
            ),
            release=_release(calibration, None, None),
            diagnostics=calibration_diagnostics(calibration.details),
        )

    @classmethod
    def for_configuration(
        cls,
        mechanism,
        n_samples: int,
        alpha: float,
        *,
        contract: Contract | None = None,
        epsilon_train: float | None = None,
        delta_train: float | None = None,
        agent_sizes=None,
    ) -> ContractCard:
        """Card of a configuration before any data: certificate and guarantee only.

        Checks whether calibrating with ``mechanism`` on ``n_samples`` rows at level
        ``1 - alpha`` would meet ``contract``, from public quantities alone (no data
        read, no privacy spent). The card has no release.

        Parameters
        ----------
        mechanism : QuantileMechanism
            The mechanism with its parameters.
        n_samples : int
            Planned calibration size.
        alpha : float
            Miscoverage level.
        contract : Contract or None, default=None
            Requirements to check.
        epsilon_train, delta_train : float or None, default=None
            Training privacy; None records the training as not known to be private.
        agent_sizes : sequence of int or None, default=None
            Federated mechanisms: the planned size of each agent's calibration set.

        Returns
        -------
        ContractCard
        """
        alpha = check_alpha(alpha)
        if agent_sizes is None:
            planned = mechanism.coverage_certificate(int(n_samples), alpha)
        else:
            agent_sizes = tuple(int(size) for size in agent_sizes)
            planned = mechanism.coverage_certificate(int(n_samples), alpha, agent_sizes=agent_sizes)
        return cls.build(
            contract=contract,
            configuration=Configuration(
                task="unspecified",
                alpha=alpha,
                nominal_coverage=1.0 - alpha,
                n_samples=int(n_samples),
                mechanism=ComponentSpec.of(mechanism),
                agent_sizes=agent_sizes,
            ),
            training_privacy=_stated_training(epsilon_train, delta_train),
            calibration_privacy=mechanism.privacy_guarantee(),
            certificate=certificate_of(
                planned.lower_bound, planned.confidence, planned.feasible, planned.reason
            ),
        )

    @classmethod
    def from_estimator(
        cls,
        estimator,
        contract: Contract | None = None,
        *,
        epsilon_train: float | None = None,
        delta_train: float | None = None,
        selection: Selection | None = None,
    ) -> ContractCard:
        """Card of a fitted private conformal classifier or regressor.

        Parameters
        ----------
        estimator : PrivateConformalClassifier or PrivateConformalRegressor
            Fitted (``calibration_`` set).
        contract : Contract or None, default=None
            Requirements to check; None records the calibration only.
        epsilon_train : float or None, default=None
            Training budget. None reads it from the diffprivlib model (summed over the
            diffprivlib steps of a pipeline); a model that is not a diffprivlib one is
            recorded as not private (``inf``). A value below what diffprivlib reports
            is refused.
        delta_train : float or None, default=None
            Training delta (None: from diffprivlib, 0 for its pure-DP models).
        selection : Selection or None, default=None
            Set by :class:`~privconf_sklearn.cards.CertificateAwareSearch`.

        Returns
        -------
        ContractCard
            With the estimator attached, so that :meth:`evaluate` can fill the
            diagnostics.
        """
        check_is_fitted(estimator, "calibration_")
        calibration = estimator.calibration_
        card = cls.build(
            contract=contract,
            configuration=configuration_of(
                estimator,
                calibration.n_samples,
                estimator.mechanism_,
                estimator.score_,
                estimator.estimator_,
                agent_sizes=_agent_sizes(estimator.mechanism_, calibration),
            ),
            training_privacy=training_privacy(estimator.estimator_, epsilon_train, delta_train),
            calibration_privacy=calibration.privacy,
            certificate=certificate_of(
                calibration.coverage_lower_bound,
                calibration.lower_bound_confidence,
                calibration.feasible,
                "" if calibration.feasible else calibration.reason,
            ),
            release=_release(calibration, estimator.threshold_, estimator.score_bounds_),
            selection=selection,
            diagnostics=calibration_diagnostics(calibration.details),
        )
        object.__setattr__(card, "_estimator", estimator)
        return card

    def with_contract(self, contract: Contract | None) -> ContractCard:
        """The same record checked against another contract (new clauses and digest)."""
        card = self.build(
            contract=contract,
            configuration=self.configuration,
            training_privacy=self.training_privacy,
            calibration_privacy=self.calibration_privacy,
            certificate=self.certificate,
            release=self.release,
            selection=self.selection,
            diagnostics=dataclasses.replace(self.diagnostics),
        )
        object.__setattr__(card, "_estimator", self._estimator)
        return card

    # ------------------------------------------------------------- diagnostics
    def evaluate(self, X, y, *, estimator=None) -> ContractCard:
        """Fill the empirical diagnostics on held-out data, in place.

        Classification: coverage, mean set size, singleton rate and the model's
        accuracy. Regression: coverage and mean interval width.

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)
            Test features (never the calibration rows).
        y : array-like of shape (n_samples,)
            Test targets.
        estimator : fitted estimator, default=None
            Needed only for a card read from JSON; must be the calibration the card
            records (same threshold and calibration size).

        Returns
        -------
        ContractCard
            This card.
        """
        estimator = self._estimator if estimator is None else estimator
        if estimator is None:
            raise ValueError(
                "This card has no estimator attached (it was read from JSON or built "
                "from a bare calibration); pass estimator= to evaluate it."
            )
        check_is_fitted(estimator, "calibration_")
        if (
            self.release is None
            or estimator.calibration_.threshold != self.release.threshold
            or estimator.calibration_.n_samples != self.configuration.n_samples
        ):
            raise ValueError(
                "estimator is not the calibration this card records (threshold or "
                "calibration size differ)."
            )
        for name, value in empirical_diagnostics(estimator, X, y).items():
            setattr(self.diagnostics, name, value)
        return self

    def redacted(self) -> ContractCard:
        """A copy without the calibration diagnostics that were not released privately.

        DP-APS's certificate width, observed inflation and grid threshold are
        data-dependent (paper 003 Sec. 5): publishing them discloses the calibration
        set. The formal layer (and its digest) is unchanged.
        """

        def clean(diagnostics: Diagnostics) -> Diagnostics:
            if diagnostics.diagnostics_are_private:
                return dataclasses.replace(
                    diagnostics, candidates=tuple(clean(c) for c in diagnostics.candidates)
                )
            return dataclasses.replace(
                diagnostics,
                certificate_width=None,
                observed_inflation=None,
                grid_threshold=None,
                mechanism_details={},
                redacted=True,
                candidates=tuple(clean(c) for c in diagnostics.candidates),
            )

        return dataclasses.replace(self, diagnostics=clean(self.diagnostics))

    # ------------------------------------------------------------ serialising
    def formal_dict(self) -> dict:
        """The formal layer as plain data (what the digest covers, with the schema)."""
        return {
            "contract": record_to_dict(self.contract),
            "configuration": record_to_dict(self.configuration),
            "privacy": {
                "training": record_to_dict(self.training_privacy),
                "calibration": record_to_dict(self.calibration_privacy),
            },
            "certificate": record_to_dict(self.certificate),
            "release": record_to_dict(self.release),
            "clauses": record_to_dict(self.clauses),
            "decision": self.decision,
            "selection": record_to_dict(self.selection),
        }

    def compute_digest(self) -> str:
        """SHA-256 of the canonical JSON of the schema header and the formal layer."""
        return sha256_of(
            {"schema": SCHEMA, "schema_version": SCHEMA_VERSION, "formal": self.formal_dict()}
        )

    def to_dict(self) -> dict:
        """The whole card as plain data, in schema order."""
        return {
            "schema": SCHEMA,
            "schema_version": SCHEMA_VERSION,
            "formal": self.formal_dict(),
            "formal_sha256": self.formal_sha256,
            "diagnostics": record_to_dict(self.diagnostics),
        }

    def to_json(self) -> str:
        """JSON text (non-finite floats as ``{"$float": "inf"}``); round-trips exactly."""
        return dumps(self.to_dict())

    def save(self, path: str | os.PathLike) -> None:
        """Write :meth:`to_json` to ``path`` (UTF-8)."""
        with open(path, "w", encoding="utf-8") as handle:
            handle.write(self.to_json())

    @classmethod
    def from_dict(cls, data: Any) -> ContractCard:
        """Inverse of :meth:`to_dict`.

        Raises
        ------
        CardFormatError
            If the schema name or version is not this library's, or a field is
            missing, unknown or mistyped (the message names its path).
        """
        if not isinstance(data, dict):
            raise CardFormatError(f"a card must be a JSON object; got {type(data).__name__}.")
        expected = {"schema", "schema_version", "formal", "formal_sha256", "diagnostics"}
        if set(data) != expected:
            raise CardFormatError(
                f"card: unknown fields {sorted(set(data) - expected)}, missing fields "
                f"{sorted(expected - set(data))}."
            )
        if data["schema"] != SCHEMA:
            raise CardFormatError(f"schema must be {SCHEMA!r}; got {data['schema']!r}.")
        version = data["schema_version"]
        if version != SCHEMA_VERSION or isinstance(version, bool):
            raise CardFormatError(
                f"schema_version {version!r} is not supported (this library reads "
                f"version {SCHEMA_VERSION})."
            )
        if not isinstance(data["formal_sha256"], str):
            raise CardFormatError("formal_sha256 must be a string.")
        formal = data["formal"]
        keys = {
            "contract",
            "configuration",
            "privacy",
            "certificate",
            "release",
            "clauses",
            "decision",
            "selection",
        }
        if not isinstance(formal, dict) or set(formal) != keys:
            got = sorted(formal) if isinstance(formal, dict) else type(formal).__name__
            raise CardFormatError(f"formal must have the fields {sorted(keys)}; got {got}.")
        privacy = formal["privacy"]
        if not isinstance(privacy, dict) or set(privacy) != {"training", "calibration"}:
            raise CardFormatError("formal.privacy must have the fields training, calibration.")
        if formal["decision"] not in ("feasible", "infeasible", "unchecked"):
            raise CardFormatError(f"formal.decision is not a decision: {formal['decision']!r}.")

        def optional(record_type, value, path):
            return None if value is None else record_from_dict(record_type, value, path)

        clauses = formal["clauses"]
        if not isinstance(clauses, list):
            raise CardFormatError("formal.clauses must be a JSON array.")
        return cls(
            contract=optional(Contract, formal["contract"], "formal.contract"),
            configuration=record_from_dict(
                Configuration, formal["configuration"], "formal.configuration"
            ),
            training_privacy=record_from_dict(
                TrainingPrivacy, privacy["training"], "formal.privacy.training"
            ),
            calibration_privacy=record_from_dict(
                PrivacyGuarantee, privacy["calibration"], "formal.privacy.calibration"
            ),
            certificate=record_from_dict(Certificate, formal["certificate"], "formal.certificate"),
            clauses=tuple(
                record_from_dict(Clause, c, f"formal.clauses[{i}]") for i, c in enumerate(clauses)
            ),
            decision=formal["decision"],
            release=optional(Release, formal["release"], "formal.release"),
            selection=optional(Selection, formal["selection"], "formal.selection"),
            diagnostics=record_from_dict(Diagnostics, data["diagnostics"], "diagnostics"),
            formal_sha256=data["formal_sha256"],
        )

    @classmethod
    def from_json(cls, text: str | bytes) -> ContractCard:
        """Read a card from JSON text (see :meth:`from_dict` for the errors)."""
        return cls.from_dict(loads(text))

    @classmethod
    def load(cls, path: str | os.PathLike) -> ContractCard:
        """Read a card from a JSON file."""
        with open(path, encoding="utf-8") as handle:
            return cls.from_json(handle.read())

    def to_markdown(self) -> str:
        """The card as a Markdown document (formal layer first, then diagnostics)."""
        from ._markdown import render_markdown

        return render_markdown(self)


def _stated_training(epsilon_train, delta_train) -> TrainingPrivacy:
    """Training privacy stated by the user for a card without a model on record."""
    delta = 0.0 if delta_train is None else check_budget(delta_train, "delta_train")
    if epsilon_train is None:
        return TrainingPrivacy(math.inf, delta, "not stated (no model on record)")
    return TrainingPrivacy(
        check_budget(epsilon_train, "epsilon_train"), delta, "stated by the user"
    )


def _agent_sizes(mechanism, calibration: Calibration) -> tuple[int, ...] | None:
    """Per-agent calibration sizes of a federated calibration (None if central)."""
    sizes = calibration.details.get("agent_sizes")
    if not getattr(mechanism, "requires_groups", False) or sizes is None:
        return None
    return tuple(int(size) for size in sizes)


def configuration_of(
    estimator, n_samples: int, mechanism, score, model, *, agent_sizes=None
) -> Configuration:
    """The configuration of a (fitted or candidate) conformal estimator."""
    alpha = float(estimator.alpha)
    return Configuration(
        task=task_of(estimator),
        alpha=alpha,
        nominal_coverage=1.0 - alpha,
        n_samples=int(n_samples),
        mechanism=ComponentSpec.of(mechanism),
        conformity_score=None if score is None else ComponentSpec.of(score),
        estimator=None if model is None else describe_estimator(model),
        agent_sizes=agent_sizes,
    )


def _release(calibration: Calibration, threshold_score_units, score_bounds) -> Release:
    return Release(
        threshold=float(calibration.threshold),
        threshold_score_units=_optional_float(threshold_score_units),
        score_bounds=None if score_bounds is None else tuple(float(b) for b in score_bounds),
        target_level=_optional_float(calibration.target_level),
        coverage_upper_bound=_optional_float(calibration.coverage_upper_bound),
        upper_bound_atom_slope=float(calibration.upper_bound_atom_slope),
    )


def empirical_diagnostics(estimator, X, y) -> dict[str, Any]:
    """Coverage and efficiency of a fitted conformal estimator on ``(X, y)``."""
    predicted = estimator.predict_set(X)
    y_array = np.asarray(y)
    if task_of(estimator) == "regression":
        return {
            "n_test": int(y_array.shape[0]),
            "empirical_coverage": interval_coverage(y_array, predicted),
            "mean_width": mean_interval_width(predicted),
        }
    return {
        "n_test": int(y_array.shape[0]),
        "empirical_coverage": set_coverage(y_array, predicted, estimator.classes_),
        "mean_set_size": mean_set_size(predicted),
        "singleton_rate": singleton_rate(predicted),
        "accuracy": float(np.mean(np.asarray(estimator.predict(X)) == y_array)),
    }
