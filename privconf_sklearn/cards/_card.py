"""Contract cards: auditable records of a calibration (the contract-cards paper, Table 1).

A card has two published layers, both holding only public or privacy-protected
quantities: the *formal* layer (contract, configuration, certificate ``L(c)``, privacy
coordinates, the clauses of Eq. (3) with margins, decision, release, selection summary),
covered by a SHA-256 digest and optionally signed, and the *diagnostic* layer, which is
not evidence. The owner's non-private diagnostics stay in
:attr:`ContractCard.owner_diagnostics`, written only on explicit request.
"""

from __future__ import annotations

import dataclasses
import os
import warnings
from dataclasses import dataclass, field
from typing import Any, ClassVar

import numpy as np
from sklearn.base import is_classifier, is_regressor
from sklearn.utils.validation import check_is_fitted

from .._base import BasePrivateConformal
from .._validation import Boolean, InstanceOf, Interval, Options, validate_params
from ..mechanisms import Calibration, QuantileMechanism
from ..metrics import (
    interval_coverage,
    mean_interval_width,
    mean_set_size,
    set_coverage,
    singleton_rate,
)
from ..privacy import ADJACENCIES, PrivacyGuarantee
from ._codec import MAX_CHARS, CardFormatError, decode, dumps, loads, plain_value, sha256_of
from ._contract import CLAUSES, Clause, Contract, check_contract, decision_of
from ._records import (
    SIZE,
    TEXT,
    Certificate,
    ComponentSpec,
    Configuration,
    Diagnostics,
    Release,
    Selection,
    Signature,
    TrainingPrivacy,
    _Checked,
    check_guarantee,
    guarantee_from_dict,
    optional,
    record_from_dict,
    record_to_dict,
    tuple_of,
)
from ._training import describe_estimator, stated_training, training_privacy

__all__ = ["SCHEMA", "SCHEMA_VERSION", "ContractCard", "OwnerDiagnosticsWarning"]

#: Name written in every serialised card.
SCHEMA = "privconf_sklearn/contract-card"
#: Version of the JSON schema; readers refuse other versions.
SCHEMA_VERSION = 2

#: Why a regression release at the upper score bound cannot certify its coverage.
AT_UPPER_BOUND = (
    "the threshold is the upper score bound: intervals cover only targets whose score "
    "lies within score_bounds, which this card cannot certify without disclosing "
    "calibration data"
)

#: Constraints of the arguments of the public entry points.
ARGUMENTS = {
    "calibration": [InstanceOf(Calibration)],
    "mechanism": [InstanceOf(QuantileMechanism)],
    "estimator": [InstanceOf(BasePrivateConformal, "private conformal estimator")],
    "contract": optional([InstanceOf(Contract)]),
    "adjacency": optional([Options(*ADJACENCIES)]),
    "n_samples": SIZE,
    "alpha": [Interval("real", 0, 1, closed="neither")],
    "agent_sizes": optional([tuple_of(*SIZE)]),
    "public": [Boolean()],
    "include_owner_diagnostics": [Boolean()],
}


def check_arguments(owner: str, **values) -> dict[str, Any]:
    """``values`` checked against :data:`ARGUMENTS` (TypeError / ValueError naming them)."""
    return validate_params(owner, {name: ARGUMENTS[name] for name in values}, values)


class OwnerDiagnosticsWarning(UserWarning):
    """Owner diagnostics (not covered by the privacy guarantee) are being written out."""


def task_of(estimator) -> str:
    """``"classification"``, ``"regression"`` or ``"unspecified"``."""
    if is_classifier(estimator):
        return "classification"
    return "regression" if is_regressor(estimator) else "unspecified"


def planned_privacy(mechanism, adjacency: str | None) -> PrivacyGuarantee:
    """The mechanism's guarantee restated for the relation the user names (None: as is)."""
    guarantee = mechanism.privacy_guarantee()
    return guarantee if adjacency is None else guarantee.under(adjacency)


def split_details(calibration: Calibration) -> tuple[dict, dict]:
    """``(public, owner)``: the calibration's published details and owner diagnostics.

    Records that still keep non-private values in ``details`` mark them with
    ``diagnostics_are_private=False``; then every detail counts as an owner diagnostic.
    """
    public, owner = dict(calibration.details), dict(calibration.owner_diagnostics)
    if public.pop("diagnostics_are_private", None) is False:
        public, owner = {}, {**public, **owner}
    return plain_value(public), plain_value(owner)


def configuration_of(estimator, n_samples, mechanism, score, model, agent_sizes=None):
    """The configuration of a (fitted or candidate) conformal estimator."""
    return Configuration(
        task=task_of(estimator),
        alpha=float(estimator.alpha),
        nominal_coverage=1.0 - float(estimator.alpha),
        n_samples=int(n_samples),
        mechanism=ComponentSpec.of(mechanism),
        conformity_score=None if score is None else ComponentSpec.of(score),
        estimator=None if model is None else describe_estimator(model),
        agent_sizes=agent_sizes,
    )


def _certificate(calibration: Calibration) -> Certificate:
    reason = "" if calibration.feasible else calibration.reason
    return Certificate.of(
        calibration.coverage_lower_bound,
        calibration.lower_bound_confidence,
        calibration.feasible,
        reason,
    )


def _bare(mechanism, n_samples, alpha, agent_sizes) -> Configuration:
    """The configuration of a calibration without a model on record."""
    alpha = float(alpha)
    spec = ComponentSpec.of(mechanism)
    return Configuration(
        "unspecified", alpha, 1.0 - alpha, int(n_samples), spec, None, None, agent_sizes
    )


def _agent_sizes(mechanism, calibration: Calibration) -> tuple[int, ...] | None:
    sizes = calibration.details.get("agent_sizes")
    if not mechanism.requires_groups or sizes is None:
        return None
    return tuple(int(size) for size in sizes)


def make_release(calibration, task, bounds=None, threshold=None, source=None) -> Release:
    """The published release of a calibration.

    ``coverage_holds`` is False when the calibration says so and, for regression,
    whenever the threshold is the upper score bound (public either way). An
    uninformative release gives the mechanism's reason (computed from its private
    output); a coverage failure a fixed sentence, never the calibration's own reason
    (which may quote data-dependent counts).
    """
    at_bound = task == "regression" and calibration.threshold >= 1.0
    reasons = [AT_UPPER_BOUND] if at_bound else []
    if not calibration.coverage_holds and not at_bound:
        reasons.append("an assumption of the coverage guarantee does not hold")
    elif calibration.coverage_holds and not calibration.informative and calibration.reason:
        reasons.append(calibration.reason)
    public = source == "public"
    return Release(
        threshold=float(calibration.threshold),
        threshold_score_units=float(threshold) if public else None,
        score_bounds=(float(bounds[0]), float(bounds[1])) if public else None,
        score_bounds_source=source,
        target_level=calibration.target_level,
        coverage_upper_bound=calibration.coverage_upper_bound,
        upper_bound_atom_slope=float(calibration.upper_bound_atom_slope),
        informative=bool(calibration.threshold < 1.0),
        coverage_holds=bool(calibration.coverage_holds) and not at_bound,
        reason="; ".join(reasons),
    )


def empirical_diagnostics(estimator, X, y) -> dict[str, Any]:
    """Coverage and efficiency of a fitted conformal estimator on ``(X, y)``."""
    predicted, y = estimator.predict_set(X), np.asarray(y)
    if task_of(estimator) == "regression":
        return {
            "n_test": int(y.shape[0]),
            "empirical_coverage": interval_coverage(y, predicted),
            "mean_width": mean_interval_width(predicted),
        }
    return {
        "n_test": int(y.shape[0]),
        "empirical_coverage": set_coverage(y, predicted, estimator.classes_),
        "mean_set_size": mean_set_size(predicted),
        "singleton_rate": singleton_rate(predicted),
        "accuracy": float(np.mean(np.asarray(estimator.predict(X)) == y)),
    }


@dataclass(frozen=True)
class ContractCard(_Checked):
    """An auditable record of one calibration against a contract (Table 1 of the paper).

    Build cards with :meth:`from_estimator` (or the estimators' ``card_``),
    :meth:`from_calibration`, :meth:`for_configuration` or a
    :class:`~privconf_sklearn.cards.CertificateAwareSearch`; read them with
    :meth:`from_json`; check them with :func:`~privconf_sklearn.cards.verify_card`.
    Every field is checked when a card is built.

    Parameters
    ----------
    contract : Contract or None
        The requirements (None: ``decision`` is ``"unchecked"``; see
        :meth:`with_contract`).
    configuration : Configuration
        Nominal coverage, calibration size, mechanism, score, model.
    training_privacy : TrainingPrivacy
        ``eps_train`` (and delta) and where it comes from.
    calibration_privacy : PrivacyGuarantee
        ``eps_cal``: the calibration's guarantee, under the adjacency the user stated.
    certificate : Certificate
        ``L(c)``, its confidence and the marginal bound Eq. (3) uses.
    clauses : tuple of Clause
        Eq. (3) clause by clause, with margins (empty without a contract).
    decision : {"feasible", "infeasible", "unchecked"}
        Conjunction of the clauses (Eq. (3) as the paper defines it: whether the sets
        are informative is ``release.informative``).
    release : Release or None, default=None
        The release (None for a configuration never calibrated).
    selection : Selection or None, default=None
        Selection summary of a certificate-aware search.
    diagnostics : Diagnostics, default=Diagnostics()
        Published diagnostics (public or privacy-protected quantities only).
    owner_diagnostics : dict, default={}
        The owner's diagnostics, NOT covered by the privacy guarantee: ``"calibration"``
        (computed from the calibration data without noise: DP-APS's grid threshold and
        certificate width, regression clip counts, data-derived score bounds...),
        ``"test"`` (:meth:`evaluate` on data not declared public), ``"candidates"`` (a
        search's calibrations). Written only with ``include_owner_diagnostics=True``.
    signature : Signature or None, default=None
        Ed25519 signature of the formal layer (:meth:`sign`).
    formal_sha256 : str, default=""
        SHA-256 of the formal layer; computed when empty (a card read from JSON keeps
        the stated one, for the verifier to compare).

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
    >>> card.decision, card.release.informative
    ('feasible', True)
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
    owner_diagnostics: dict[str, Any] = field(
        default_factory=dict, compare=False, repr=False, hash=False
    )
    signature: Signature | None = None
    formal_sha256: str = ""
    _estimator: Any = field(default=None, init=False, compare=False, repr=False, hash=False)
    _constraints: ClassVar = {
        "contract": ARGUMENTS["contract"],
        "configuration": [InstanceOf(Configuration)],
        "training_privacy": [InstanceOf(TrainingPrivacy)],
        "certificate": [InstanceOf(Certificate)],
        "clauses": [tuple_of(InstanceOf(Clause), max_length=len(CLAUSES))],
        "decision": [Options("feasible", "infeasible", "unchecked")],
        "release": optional([InstanceOf(Release)]),
        "selection": optional([InstanceOf(Selection)]),
        "diagnostics": [InstanceOf(Diagnostics)],
        "owner_diagnostics": [InstanceOf(dict, "dict")],
        "signature": optional([InstanceOf(Signature)]),
        "formal_sha256": TEXT,
    }

    def __post_init__(self):
        super().__post_init__()
        privacy = check_guarantee(self.calibration_privacy)
        object.__setattr__(self, "calibration_privacy", privacy)
        release = self.release
        if release is not None and release.score_bounds_source == "calibration data":
            if privacy.holds:
                raise ValueError(
                    "score bounds taken from the calibration data break the calibration "
                    "guarantee: calibration_privacy.holds must be False."
                )
        if self.configuration.task == "regression" and release is not None:
            if release.threshold >= 1.0 and release.coverage_holds:
                raise ValueError(f"coverage_holds must be False: {AT_UPPER_BOUND}.")
        if not self.formal_sha256:
            object.__setattr__(self, "formal_sha256", self.compute_digest())

    # ---------------------------------------------------------------- building
    @classmethod
    def build(cls, *, contract, selection=None, release=None, **fields) -> ContractCard:
        """A card whose clauses and decision are computed from the given fields.

        ``fields``: ``configuration``, ``training_privacy``, ``calibration_privacy``,
        ``certificate``, optionally ``diagnostics`` and ``owner_diagnostics``.
        """
        check_arguments("ContractCard", contract=contract)
        clauses: tuple[Clause, ...] = ()
        if contract is not None:
            clauses = check_contract(
                contract,
                fields["training_privacy"],
                fields["calibration_privacy"],
                fields["certificate"],
                selection,
                release,
            )
        return cls(
            contract=contract,
            clauses=clauses,
            decision=decision_of(contract, clauses),
            release=release,
            selection=selection,
            **fields,
        )

    @classmethod
    def from_calibration(
        cls,
        calibration: Calibration,
        mechanism: QuantileMechanism,
        *,
        contract: Contract | None = None,
        epsilon_train: float | None = None,
        delta_train: float | None = None,
        adjacency: str | None = "replace-one",
    ) -> ContractCard:
        """Card of a bare mechanism calibration (no model: ``task="unspecified"``).

        Parameters
        ----------
        calibration : Calibration
            What ``mechanism.calibrate`` returned.
        mechanism : QuantileMechanism
            The mechanism that produced it.
        contract : Contract or None, default=None
            Requirements to check.
        epsilon_train, delta_train : float or None, default=None
            Training privacy of the model the scores came from (None: ``inf``, 0).
        adjacency : {"replace-one", "add/remove"} or None, default="replace-one"
            Relation the calibration guarantee is stated under
            (:meth:`~privconf_sklearn.privacy.PrivacyGuarantee.under`; None: as is).

        Returns
        -------
        ContractCard
        """
        check_arguments(
            "ContractCard.from_calibration",
            calibration=calibration,
            mechanism=mechanism,
            contract=contract,
            adjacency=adjacency,
        )
        if type(mechanism).__name__ != calibration.mechanism:
            raise ValueError(
                f"mechanism is a {type(mechanism).__name__} but the calibration was made "
                f"by {calibration.mechanism}."
            )
        public, owner = split_details(calibration)
        privacy = calibration.privacy
        sizes = _agent_sizes(mechanism, calibration)
        return cls.build(
            contract=contract,
            configuration=_bare(mechanism, calibration.n_samples, calibration.alpha, sizes),
            training_privacy=stated_training(epsilon_train, delta_train),
            calibration_privacy=privacy if adjacency is None else privacy.under(adjacency),
            certificate=_certificate(calibration),
            release=make_release(calibration, "unspecified"),
            diagnostics=Diagnostics(mechanism_details=public),
            owner_diagnostics={"calibration": owner} if owner else {},
        )

    @classmethod
    def for_configuration(
        cls,
        mechanism: QuantileMechanism,
        n_samples: int,
        alpha: float,
        *,
        contract: Contract | None = None,
        epsilon_train: float | None = None,
        delta_train: float | None = None,
        agent_sizes=None,
        adjacency: str | None = "replace-one",
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
            Planned calibration size, an integer in [1, 2**53].
        alpha : float
            Miscoverage level in (0, 1).
        contract : Contract or None, default=None
            Requirements to check.
        epsilon_train, delta_train : float or None, default=None
            Training privacy (None: not known to be private).
        agent_sizes : sequence of int or None, default=None
            Federated mechanisms: the planned size of each agent's calibration set.
        adjacency : {"replace-one", "add/remove"} or None, default="replace-one"
            Relation the calibration guarantee is stated under (None: as is).

        Returns
        -------
        ContractCard

        Raises
        ------
        TypeError, ValueError
            For a wrong type or value, naming the parameter.
        """
        checked = check_arguments(
            "ContractCard.for_configuration",
            mechanism=mechanism,
            n_samples=n_samples,
            alpha=alpha,
            agent_sizes=agent_sizes,
            contract=contract,
            adjacency=adjacency,
        )
        n, alpha, sizes = checked["n_samples"], checked["alpha"], checked["agent_sizes"]
        planned = mechanism.coverage_certificate(
            n, alpha, **({} if sizes is None else {"agent_sizes": sizes})
        )
        return cls.build(
            contract=contract,
            configuration=_bare(mechanism, n, alpha, sizes),
            training_privacy=stated_training(epsilon_train, delta_train),
            calibration_privacy=planned_privacy(mechanism, adjacency),
            certificate=Certificate.of(
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

        The calibration guarantee is ``estimator.calibration_.privacy`` as recorded
        (stated under the estimator's adjacency).

        Parameters
        ----------
        estimator : PrivateConformalClassifier or PrivateConformalRegressor
            Fitted (``calibration_`` set).
        contract : Contract or None, default=None
            Requirements to check; None records the calibration only.
        epsilon_train : float or None, default=None
            Training budget. None reads it from the diffprivlib model (summed over a
            pipeline's diffprivlib steps; ``inf`` for a model not known to be private).
            A value below what diffprivlib reports is refused.
        delta_train : float or None, default=None
            Training delta (None: from diffprivlib, 0 for its pure-DP models).
        selection : Selection or None, default=None
            Set by :class:`~privconf_sklearn.cards.CertificateAwareSearch`.

        Returns
        -------
        ContractCard
            With the estimator attached, for :meth:`evaluate`.
        """
        check_arguments("ContractCard.from_estimator", estimator=estimator)
        check_is_fitted(estimator, "calibration_")
        calibration, task = estimator.calibration_, task_of(estimator)
        public, owner = split_details(calibration)
        source = "public"
        if task == "regression" and estimator.score_bounds is None:
            source = "calibration data"
            public.pop("score_bounds", None)
            owner.update(score_bounds=estimator.score_bounds_, threshold=estimator.threshold_)
        card = cls.build(
            contract=contract,
            configuration=configuration_of(
                estimator,
                calibration.n_samples,
                estimator.mechanism_,
                estimator.score_,
                estimator.estimator_,
                _agent_sizes(estimator.mechanism_, calibration),
            ),
            training_privacy=training_privacy(estimator.estimator_, epsilon_train, delta_train),
            calibration_privacy=calibration.privacy,
            certificate=_certificate(calibration),
            release=make_release(
                calibration, task, estimator.score_bounds_, estimator.threshold_, source
            ),
            selection=selection,
            diagnostics=Diagnostics(mechanism_details=public),
            owner_diagnostics={"calibration": plain_value(owner)} if owner else {},
        )
        object.__setattr__(card, "_estimator", estimator)
        return card

    def with_contract(self, contract: Contract | None) -> ContractCard:
        """The same record checked against another contract (new digest, no signature)."""
        card = self.build(
            contract=contract,
            configuration=self.configuration,
            training_privacy=self.training_privacy,
            calibration_privacy=self.calibration_privacy,
            certificate=self.certificate,
            release=self.release,
            selection=self.selection,
            diagnostics=dataclasses.replace(self.diagnostics),
            owner_diagnostics=dict(self.owner_diagnostics),
        )
        object.__setattr__(card, "_estimator", self._estimator)
        return card

    # ------------------------------------------------------------- diagnostics
    def evaluate(self, X, y, *, estimator=None, public: bool = False) -> ContractCard:
        """Compute the empirical diagnostics on held-out data, in place.

        Classification: coverage, mean set size, singleton rate, the model's accuracy.
        Regression: coverage and mean interval width. They are exact statistics of
        ``(X, y)``: about the calibration set they disclose nothing beyond the private
        threshold, but they disclose the test data. So they are owner diagnostics
        (``owner_diagnostics["test"]``) unless the test data are public
        (``public=True``: they go to the published :attr:`diagnostics`).

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)
            Test features (never the calibration rows).
        y : array-like of shape (n_samples,)
            Test targets.
        estimator : fitted estimator, default=None
            Needed only for a card read from JSON; must be the calibration the card
            records (same threshold and calibration size).
        public : bool, default=False
            Whether ``(X, y)`` are public, so their diagnostics may be published.

        Returns
        -------
        ContractCard
            This card.
        """
        check_arguments("ContractCard.evaluate", public=public)
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
        found = empirical_diagnostics(estimator, X, y)
        if public:
            for name, value in found.items():
                setattr(self.diagnostics, name, value)
        else:
            self.owner_diagnostics["test"] = found
        return self

    # ------------------------------------------------------------ serialising
    def formal_dict(self) -> dict:
        """The formal layer as plain data.

        The certificate and release sit in ``calibrations``, one entry for the whole
        calibration set (``group`` null), so that per-group entries can be added.
        """
        calibration = {
            "group": None,
            "certificate": record_to_dict(self.certificate),
            "release": record_to_dict(self.release),
        }
        return {
            "contract": record_to_dict(self.contract),
            "configuration": record_to_dict(self.configuration),
            "privacy": {
                "training": record_to_dict(self.training_privacy),
                "calibration": record_to_dict(self.calibration_privacy),
            },
            "calibrations": [calibration],
            "clauses": record_to_dict(self.clauses),
            "decision": self.decision,
            "selection": record_to_dict(self.selection),
        }

    def signed_payload(self) -> dict:
        """Schema header and formal layer: what the digest and the signature cover."""
        return {"schema": SCHEMA, "schema_version": SCHEMA_VERSION, "formal": self.formal_dict()}

    def compute_digest(self) -> str:
        """SHA-256 of the key-sorted, compact, ASCII JSON of :meth:`signed_payload`."""
        return sha256_of(self.signed_payload())

    def to_dict(self, *, include_owner_diagnostics: bool = False) -> dict:
        """The card as plain data, in schema order (see :meth:`to_json`)."""
        check_arguments("ContractCard", include_owner_diagnostics=include_owner_diagnostics)
        data = {
            **self.signed_payload(),
            "formal_sha256": self.formal_sha256,
            "signature": record_to_dict(self.signature),
            "diagnostics": record_to_dict(self.diagnostics),
        }
        if include_owner_diagnostics and self.owner_diagnostics:
            warnings.warn(
                "Writing owner diagnostics: computed from the data without noise, they are "
                "NOT covered by the privacy guarantee. Do not publish this output.",
                OwnerDiagnosticsWarning,
                stacklevel=3,
            )
            data["owner_diagnostics"] = plain_value(self.owner_diagnostics)
        return data

    def to_json(self, *, include_owner_diagnostics: bool = False) -> str:
        """JSON text, publishable by default (infinities as ``{"$float": "inf"}``).

        Parameters
        ----------
        include_owner_diagnostics : bool, default=False
            Also write :attr:`owner_diagnostics`, with an
            :class:`OwnerDiagnosticsWarning`: for the data owner's own records only.

        Returns
        -------
        str
        """
        return dumps(self.to_dict(include_owner_diagnostics=include_owner_diagnostics))

    def save(self, path: str | os.PathLike, *, include_owner_diagnostics: bool = False) -> None:
        """Write :meth:`to_json` to ``path`` (UTF-8); publishable by default."""
        text = self.to_json(include_owner_diagnostics=include_owner_diagnostics)
        with open(path, "w", encoding="utf-8") as handle:
            handle.write(text)

    @classmethod
    def from_dict(cls, data: Any) -> ContractCard:
        """Inverse of :meth:`to_dict`; also takes ``json.loads`` output.

        Raises
        ------
        CardFormatError
            If the schema name or version is not this library's, or a field is
            missing, unknown or invalid (the message names its path).
        """
        data = decode(data)
        _expect(
            data,
            "card",
            ["schema", "schema_version", "formal", "formal_sha256"],
            ("signature", "diagnostics", "owner_diagnostics"),
        )
        version = data["schema_version"]
        if data["schema"] != SCHEMA or type(version) is not int or version != SCHEMA_VERSION:
            raise CardFormatError(
                f"not a {SCHEMA} card of schema_version {SCHEMA_VERSION}: schema "
                f"{data['schema']!r}, version {version!r}."
            )
        signature, diagnostics = data.get("signature"), data.get("diagnostics")
        try:
            return cls(
                **_formal_fields(data["formal"]),
                diagnostics=Diagnostics()
                if diagnostics is None
                else record_from_dict(Diagnostics, diagnostics, "diagnostics"),
                owner_diagnostics=data.get("owner_diagnostics", {}),
                signature=None
                if signature is None
                else record_from_dict(Signature, signature, "signature"),
                formal_sha256=data["formal_sha256"],
            )
        except CardFormatError:
            raise
        except (TypeError, ValueError) as exc:
            raise CardFormatError(f"card: {exc}") from exc

    @classmethod
    def from_json(cls, text: str | bytes) -> ContractCard:
        """Read a card from JSON text (see :meth:`from_dict` for the errors)."""
        return cls.from_dict(loads(text))

    @classmethod
    def load(cls, path: str | os.PathLike) -> ContractCard:
        """Read a card from a JSON file (at most 16 MiB)."""
        with open(path, encoding="utf-8") as handle:
            return cls.from_json(handle.read(MAX_CHARS + 1))

    def to_markdown(self, *, include_owner_diagnostics: bool = False) -> str:
        """The card as Markdown (``include_owner_diagnostics`` as in :meth:`to_json`)."""
        from ._markdown import render_markdown

        data = self.to_dict(include_owner_diagnostics=include_owner_diagnostics)
        return render_markdown(self, data.get("owner_diagnostics"))

    def sign(self, private_key) -> ContractCard:
        """A copy carrying an Ed25519 signature of the formal layer.

        The digest ``formal_sha256`` protects against accidental edits only: whoever
        edits a card can recompute it. The signature says who issued the card: only
        the holder of ``private_key`` can make one that verifies under the matching
        public key (``verify_card(card, public_key=...)``). Needs ``cryptography``
        (``pip install "privconf_sklearn[sign]"``).

        Parameters
        ----------
        private_key : cryptography...ed25519.Ed25519PrivateKey
            The issuer's key.

        Returns
        -------
        ContractCard
        """
        from ._signing import sign_payload

        signed = dataclasses.replace(
            self, signature=sign_payload(self.signed_payload(), private_key)
        )
        object.__setattr__(signed, "_estimator", self._estimator)
        return signed


def _expect(data: Any, path: str, required: list[str], optional: tuple = ()) -> None:
    """``data`` is an object with the fields ``required`` and perhaps ``optional``."""
    if not isinstance(data, dict):
        raise CardFormatError(f"{path} must be a JSON object; got {type(data).__name__}.")
    missing, unknown = set(required) - set(data), set(data) - {*required, *optional}
    if missing or unknown:
        raise CardFormatError(
            f"{path}: unknown fields {sorted(unknown)[:10]}, missing fields {sorted(missing)}."
        )


def _formal_fields(formal: Any) -> dict[str, Any]:
    """Constructor arguments of :class:`ContractCard` from the decoded formal layer."""
    names = ["contract", "configuration", "privacy", "calibrations", "clauses", "decision"]
    _expect(formal, "formal", [*names, "selection"])
    _expect(formal["privacy"], "formal.privacy", ["training", "calibration"])
    entries = formal["calibrations"]
    if not isinstance(entries, tuple) or len(entries) != 1 or not isinstance(entries[0], dict):
        raise CardFormatError("formal.calibrations must hold exactly one entry (no groups).")
    _expect(entries[0], "formal.calibrations[0]", ["group", "certificate", "release"])
    if entries[0]["group"] is not None:
        raise CardFormatError("formal.calibrations[0].group must be null (no groups).")
    if not isinstance(formal["clauses"], tuple):
        raise CardFormatError("formal.clauses must be a JSON array.")

    def record(kind, value, path):
        return None if value is None else record_from_dict(kind, value, path)

    where = "formal.calibrations[0]"
    return {
        "contract": record(Contract, formal["contract"], "formal.contract"),
        "configuration": record(Configuration, formal["configuration"], "formal.configuration"),
        "training_privacy": record(
            TrainingPrivacy, formal["privacy"]["training"], "formal.privacy.training"
        ),
        "calibration_privacy": guarantee_from_dict(
            formal["privacy"]["calibration"], "formal.privacy.calibration"
        ),
        "certificate": record(Certificate, entries[0]["certificate"], f"{where}.certificate"),
        "release": record(Release, entries[0]["release"], f"{where}.release"),
        "clauses": tuple(
            record_from_dict(Clause, c, f"formal.clauses[{i}]")
            for i, c in enumerate(formal["clauses"])
        ),
        "decision": formal["decision"],
        "selection": record(Selection, formal["selection"], "formal.selection"),
    }
