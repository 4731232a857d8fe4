"""Contract cards: auditable records of a calibration (the contract-cards paper, Table 1).

Two published layers hold only public or privacy-protected quantities: the *formal*
layer (contract, configuration, privacy coordinates, a certificate ``L(c)`` and release
per calibration or Mondrian group, Eq. (3) clause by clause, the decision, a search's
selection summary), covered by a SHA-256 digest; and the *diagnostic* layer, which is
not evidence. An optional signature covers both. Owner diagnostics are written only on
request, outside the signature.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from numbers import Real
from typing import Annotated, Any, ClassVar

import numpy as np
from sklearn.base import is_classifier, is_regressor
from sklearn.utils.validation import check_is_fitted

from .._param_validation import Interval, StrOptions, validate_params
from ..base import BasePrivateConformal
from ..mechanisms import Calibration, QuantileMechanism
from ..metrics import (
    interval_coverage,
    mean_interval_width,
    mean_set_size,
    set_coverage,
    singleton_rate,
)
from ..mondrian import MondrianCalibration
from ..privacy import ADJACENCIES, PrivacyGuarantee
from ..risk_control import PrivateRiskControlClassifier
from ._codec import CardFormatError, canonical_bytes, plain_value
from ._contract import CLAUSES, Clause, Contract, check_contract, decision_of
from ._published import OwnerDiagnosticsWarning, PublishedCard
from ._records import (
    SIZE,
    CalibrationEntry,
    Certificate,
    ComponentSpec,
    Configuration,
    Diagnostics,
    Items,
    Mapping,
    Nested,
    Record,
    Release,
    Selection,
    Signature,
    Text,
    TrainingPrivacy,
    optional,
)
from ._selection import contract_spend
from ._training import describe_estimator, stated_training, training_privacy

__all__ = ["SCHEMA", "SCHEMA_VERSION", "ContractCard", "OwnerDiagnosticsWarning"]

#: Name written in every serialised card.
SCHEMA = "privconf_sklearn/contract-card"
#: Version of the JSON schema; readers refuse other versions (:data:`EARLIER_VERSIONS`).
SCHEMA_VERSION = 4
#: What each earlier version lacked, for the message that refuses it.
EARLIER_VERSIONS = {
    1: "per-group calibrations",
    2: "per-group calibrations",
    3: "",
}
#: What version 4 added: the rules an earlier card's author did not state.
ADDED_IN_4 = (
    "contracts that state their adjacency and whether the release must be informative, "
    "the public list of Mondrian groups, and signatures that cover the diagnostic layer"
)

#: Why a regression release at the upper score bound cannot certify its coverage.
AT_UPPER_BOUND = (
    "the threshold is the upper score bound: intervals cover only targets whose score "
    "lies within score_bounds, which this card cannot certify without disclosing "
    "calibration data"
)
#: The certificate reason of a Mondrian group calibrated on no rows.
NO_ROWS = "the group's calibration size is 0: its sets are trivial"

#: Constraints of the arguments of the public entry points.
ARGUMENTS = {
    "calibration": [Calibration],
    "mechanism": [QuantileMechanism],
    "estimator": [BasePrivateConformal],
    "contract": optional([Contract]),
    "adjacency": optional([StrOptions(set(ADJACENCIES))]),
    "n_samples": SIZE,
    "alpha": [Interval(Real, 0, 1, closed="neither")],
    "agent_sizes": optional([Items(*SIZE)]),
    "public": ["boolean"],
}
CLAUSE_LIST = [Items(Nested(Clause), max_length=len(CLAUSES))]
DECISIONS = [StrOptions({"feasible", "infeasible", "unchecked"})]


def check_arguments(owner: str, **values) -> dict[str, Any]:
    """``values`` checked against :data:`ARGUMENTS` (``InvalidParameterError`` naming them)."""
    return validate_params({name: ARGUMENTS[name] for name in values}, values, owner)


def _check_coverage_estimator(estimator, owner: str) -> None:
    """A fitted conformal estimator that certifies a coverage (not a risk control)."""
    check_arguments(owner, estimator=estimator)
    if isinstance(estimator, PrivateRiskControlClassifier):
        raise TypeError(
            f"{type(estimator).__name__} certifies a risk, not a coverage: its card is a "
            "RiskCard (RiskCard.from_estimator, or estimator.card_)."
        )
    check_is_fitted(estimator, "calibration_")


def task_of(estimator) -> str:
    """``"classification"``, ``"regression"`` or ``"unspecified"`` (None: no model)."""
    if estimator is None:
        return "unspecified"
    if is_classifier(estimator):
        return "classification"
    return "regression" if is_regressor(estimator) else "unspecified"


def split_details(calibration) -> tuple[dict, dict]:
    """``(public, owner)``: a calibration's published details and owner diagnostics.

    Records that keep non-private values in ``details`` say
    ``diagnostics_are_private=False``; then every detail is an owner diagnostic.
    """
    public, owner = dict(calibration.details), dict(calibration.owner_diagnostics)
    if public.pop("diagnostics_are_private", None) is False:
        public, owner = {}, {**public, **owner}
    return plain_value(public), plain_value(owner)


def planned_certificate(mechanism, n_samples: int, alpha: float, agent_sizes=None):
    """``mechanism.coverage_certificate`` (with the agents' sizes for federated ones)."""
    extra = {} if agent_sizes is None else {"agent_sizes": agent_sizes}
    return mechanism.coverage_certificate(n_samples, alpha, **extra)


def configuration_of(
    estimator, n_samples, alpha, mechanism, score=None, model=None, **extra
) -> Configuration:
    """The configuration of a conformal estimator (None: a bare mechanism).

    ``alpha`` is the calibration's (the estimator's may have changed since) or the
    candidate's.
    """
    return Configuration(
        task=task_of(estimator),
        alpha=float(alpha),
        nominal_coverage=1.0 - float(alpha),
        n_samples=int(n_samples),
        mechanism=ComponentSpec.of(mechanism),
        conformity_score=None if score is None else ComponentSpec.of(score),
        estimator=None if model is None else describe_estimator(model),
        **extra,
    )


def make_release(calibration, task, bounds=None, threshold=None, source=None) -> Release:
    """The published release of a calibration.

    ``coverage_holds`` is False when the calibration says so and, for regression, at the
    upper score bound. The reason is the mechanism's for an uninformative release and a
    fixed sentence for a coverage failure (never the calibration's own, which may quote
    data-dependent counts).
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


def make_entry(mechanism, configuration, calibration, group=None, bound=None, release=None):
    """A calibration entry; ``bound``: the group's ``(L, confidence)`` if not the release's.

    The certificate's reason is the mechanism's own (public), never the calibration's.
    """
    n = int(calibration.n_samples)
    lower_bound, confidence = bound or (
        calibration.coverage_lower_bound,
        calibration.lower_bound_confidence,
    )
    reason = "" if calibration.feasible else NO_ROWS
    if n and not calibration.feasible:
        sizes = configuration.agent_sizes
        reason = planned_certificate(mechanism, n, configuration.alpha, sizes).reason
    certificate = Certificate.of(lower_bound, confidence, calibration.feasible, reason)
    return CalibrationEntry(plain_value(group), n, certificate, release)


def empirical_diagnostics(estimator, X, y) -> dict[str, Any]:
    """Coverage and efficiency of a fitted conformal estimator on ``(X, y)``."""
    predicted, y = estimator.predict_set(X), np.asarray(y)
    found: dict[str, Any] = {"n_test": int(y.shape[0])}
    if task_of(estimator) == "regression":
        found["empirical_coverage"] = interval_coverage(y, predicted)
        found["mean_width"] = mean_interval_width(predicted)
        return found
    found["empirical_coverage"] = set_coverage(y, predicted, estimator.classes_)
    found["mean_set_size"] = mean_set_size(predicted)
    found["singleton_rate"] = singleton_rate(predicted)
    found["accuracy"] = float(np.mean(np.asarray(estimator.predict(X)) == y))
    return found


def _releases(calibration) -> list[tuple[Any, Calibration, tuple | None]]:
    """``(group, release, (L, confidence) or None)`` of every threshold of a calibration."""
    if not isinstance(calibration, MondrianCalibration):
        return [(None, calibration, None)]
    return [
        (g.group, g.calibration, (g.coverage_lower_bound, g.lower_bound_confidence))
        for g in calibration.groups
    ]


def _grouping(estimator) -> dict[str, Any]:
    """The ``mondrian`` and ``group_sizes`` of a fitted estimator's configuration."""
    calibration = estimator.calibration_
    if not isinstance(calibration, MondrianCalibration):
        return {}
    mondrian = estimator.mondrian_
    name, declared = mondrian, None
    if not isinstance(mondrian, str):
        name = f"callable {getattr(mondrian, '__name__', type(mondrian).__name__)}"
        declared = calibration.group_ids
    groups = plain_value(tuple(estimator.groups_))  # the classes_, or the declared ids
    if calibration.group_sizes == "public":
        return {"mondrian": name, "group_sizes": "public", "groups": groups}
    details = calibration.details
    params = {"beta": details["size_beta"], "epsilon": details["size_epsilon"]}
    spec = ComponentSpec("PrivateGroupSizes", plain_value({**params, "group_ids": declared}))
    return {"mondrian": name, "group_sizes": spec, "groups": groups}


def _stated(privacy: PrivacyGuarantee, adjacency: str | None) -> PrivacyGuarantee:
    """``privacy`` restated under ``adjacency`` (None: as is)."""
    return privacy if adjacency is None else privacy.under(adjacency)


def _agent_sizes(mechanism, calibration) -> tuple[int, ...] | None:
    sizes = calibration.details.get("agent_sizes") if mechanism.requires_groups else None
    return None if sizes is None else tuple(int(size) for size in sizes)


def _check_groups(configuration: Configuration, entries) -> None:
    """Mondrian entries: one per listed group, sizes consistent with the calibration size."""
    listed = [canonical_bytes(group) for group in configuration.groups or ()]
    if [canonical_bytes(entry.group) for entry in entries] != listed:
        found = [entry.group for entry in entries[:10]]
        raise ValueError(
            "a Mondrian card holds one calibration entry per group of configuration.groups, "
            f"in that order: {len(listed)} groups listed, entries for groups {found}"
            + (" ..." if len(entries) > 10 else "")
        )
    sizes = [entry.n_samples for entry in entries]
    if configuration.group_sizes == "public" and sum(sizes) != configuration.n_samples:
        raise ValueError(f"public group sizes sum to {sum(sizes)}, not n_samples.")
    if max(sizes) > configuration.n_samples:
        raise ValueError("a group's released size exceeds the calibration size.")


def _check_made_by(calibration: Calibration, mechanism, agent_sizes) -> None:
    """ValueError unless ``mechanism``, as configured, can have released ``calibration``.

    Its guarantee (or a zero loss for a release that read no data) and its certificate
    ``L(c)`` must be the calibration's: the card would otherwise not verify.
    """
    released, stated = calibration.privacy, mechanism.privacy_guarantee()
    coordinates = [(p.notion, p.epsilon, p.delta, p.rho) for p in (released, stated)]
    untouched = not calibration.feasible and released.epsilon == 0.0 == released.delta
    problem = None
    if not untouched and coordinates[0] != coordinates[1]:
        problem = f"it states (notion, epsilon, delta, rho) = {coordinates[1]}, the "
        problem += f"calibration {coordinates[0]}"
    n, alpha = calibration.n_samples, calibration.alpha
    planned = planned_certificate(mechanism, n, alpha, agent_sizes)
    bound = (calibration.coverage_lower_bound, calibration.lower_bound_confidence)
    if planned.feasible != calibration.feasible or (
        calibration.feasible and bound != (planned.lower_bound, planned.confidence)
    ):
        problem = f"it certifies L = {planned.lower_bound!r}, the calibration {bound[0]!r}"
    if problem is not None:
        raise ValueError(
            f"mechanism {mechanism!r} is not the one that made the calibration: {problem}."
        )


def _check_version(schema: Any, version: Any) -> None:
    """CardFormatError unless a card is of this schema and version (naming earlier ones)."""
    if schema == SCHEMA and type(version) is int and version in EARLIER_VERSIONS:
        lacked = f"{EARLIER_VERSIONS[version]} and " if EARLIER_VERSIONS[version] else ""
        raise CardFormatError(
            f"schema_version {version}: this card was written by an earlier privconf_sklearn. "
            f"Version {SCHEMA_VERSION} cards add {lacked}{ADDED_IN_4}; an earlier card cannot "
            "be checked against rules its author did not state, so it is refused. Re-issue "
            "it with this version (ContractCard.from_estimator, or the estimator's card_)."
        )
    if schema != SCHEMA or type(version) is not int or version != SCHEMA_VERSION:
        raise CardFormatError(
            f"not a {SCHEMA} card of schema_version {SCHEMA_VERSION}: schema {schema!r}, "
            f"version {version!r}."
        )


@dataclass(frozen=True)
class ContractCard(PublishedCard, Record):
    """An auditable record of a calibration against a contract (Table 1 of the paper).

    Build cards with :meth:`from_estimator` (or the estimators' ``card_``),
    :meth:`from_calibration`, :meth:`for_configuration` or a
    :class:`~privconf_sklearn.model_selection.CertificateAwareSearch`; read them with
    :meth:`from_json`; check them with :func:`~privconf_sklearn.cards.verify_card`.
    Every field is checked when a card is built.

    Parameters
    ----------
    contract : Contract or None
        The requirements (None: ``decision`` is ``"unchecked"``).
    configuration : Configuration
        Nominal coverage, calibration size, mechanism, score, model, Mondrian groups.
    training_privacy : TrainingPrivacy
        ``eps_train`` (and delta) and where it comes from.
    calibration_privacy : PrivacyGuarantee
        ``eps_cal``: the guarantee of everything the calibration released (Mondrian:
        all groups and, when private, the sizes), under the adjacency the user stated.
    calibrations : tuple of CalibrationEntry
        Certificate ``L(c)`` and release of the whole calibration set (one entry,
        ``group`` None) or of every Mondrian group.
    clauses : tuple of Clause
        Eq. (3) clause by clause, with margins (empty without a contract).
    decision : {"feasible", "infeasible", "unchecked"}
        Conjunction of the clauses; whether sets are informative is in each release.
    selection : Selection or None, default=None
        Selection summary of a certificate-aware search.
    diagnostics : Diagnostics, default=Diagnostics()
        Published diagnostics (public or privacy-protected quantities only).
    owner_diagnostics : dict, default={}
        NOT covered by the privacy guarantee: ``"calibration"`` (computed from the
        calibration data without noise), ``"test"`` (:meth:`evaluate` on data not
        declared public), ``"candidates"`` (a search's calibrations). Written only with
        ``include_owner_diagnostics=True``.
    signature : Signature or None, default=None
        Ed25519 signature of the formal and diagnostic layers (:meth:`sign`).
    formal_sha256 : str, default=""
        SHA-256 of the formal layer; computed when empty.

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

    schema: ClassVar[str] = SCHEMA
    schema_version: ClassVar[int] = SCHEMA_VERSION
    extra_formal_names: ClassVar[tuple[str, ...]] = ("selection",)

    contract: Contract | None
    configuration: Configuration
    training_privacy: TrainingPrivacy
    calibration_privacy: PrivacyGuarantee
    calibrations: tuple[CalibrationEntry, ...]
    clauses: Annotated[tuple[Clause, ...], CLAUSE_LIST]
    decision: Annotated[str, DECISIONS]
    selection: Selection | None = None
    diagnostics: Diagnostics = field(default_factory=Diagnostics)
    owner_diagnostics: Mapping = field(default_factory=dict, compare=False, repr=False)
    signature: Signature | None = None
    formal_sha256: Text = ""
    _estimator: Any = field(default=None, init=False, compare=False, repr=False)

    def _check(self) -> None:
        configuration, entries = self.configuration, self.calibrations
        if configuration.mondrian is not None:
            _check_groups(configuration, entries)
        elif [(e.group, e.n_samples) for e in entries] != [(None, configuration.n_samples)]:
            raise ValueError(
                "without Mondrian groups, calibrations hold one entry: group null, "
                "n_samples = configuration.n_samples."
            )
        if len({entry.release is None for entry in entries}) > 1:
            raise ValueError("either every calibration entry records a release or none does.")
        for release in (entry.release for entry in entries if entry.release is not None):
            if release.score_bounds_source == "calibration data" and self.calibration_privacy.holds:
                raise ValueError(
                    "score bounds taken from the calibration data break the calibration "
                    "guarantee: calibration_privacy.holds must be False."
                )
            if configuration.task == "regression" and release.threshold >= 1.0:
                if release.coverage_holds:
                    raise ValueError(f"coverage_holds must be False: {AT_UPPER_BOUND}.")
        if not self.formal_sha256:
            object.__setattr__(self, "formal_sha256", self.compute_digest())

    @property
    def certificate(self) -> Certificate:
        """The certificate of a card without groups (Mondrian: see :attr:`calibrations`)."""
        return self._entry().certificate

    @property
    def release(self) -> Release | None:
        """The release of a card without groups, or None (Mondrian: :attr:`calibrations`)."""
        return self._entry().release

    def _entry(self) -> CalibrationEntry:
        if self.configuration.mondrian is not None:
            raise AttributeError(
                "a Mondrian card has one certificate and release per group: use card.calibrations."
            )
        return self.calibrations[0]

    # ---------------------------------------------------------------- building
    @classmethod
    def build(cls, *, contract, calibrations, selection=None, **fields) -> ContractCard:
        """A card whose clauses and decision are computed from the given fields.

        ``fields``: ``configuration``, ``training_privacy``, ``calibration_privacy``,
        optionally ``diagnostics`` and ``owner_diagnostics``.
        """
        check_arguments("ContractCard", contract=contract)
        spent = None
        if selection is not None and selection.n_evaluated > 0 and contract is not None:
            spent = contract_spend(contract, selection)
        clauses: tuple[Clause, ...] = ()
        if contract is not None:
            training, privacy = fields["training_privacy"], fields["calibration_privacy"]
            clauses = check_contract(contract, training, privacy, calibrations, spent)
        decision = decision_of(contract, clauses)
        return cls(contract=contract, calibrations=tuple(calibrations), clauses=clauses,
                   decision=decision, selection=selection, **fields)  # fmt: skip

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
            Relation the calibration guarantee is stated under (None: as is).

        Returns
        -------
        ContractCard

        Raises
        ------
        ValueError
            If ``mechanism`` (class or parameters) cannot have made ``calibration``: the
            card would not verify.
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
        n, alpha = calibration.n_samples, calibration.alpha
        sizes = _agent_sizes(mechanism, calibration)
        configuration = configuration_of(None, n, alpha, mechanism, agent_sizes=sizes)
        release = make_release(calibration, "unspecified")
        card = cls.build(
            contract=contract,
            configuration=configuration,
            training_privacy=stated_training(epsilon_train, delta_train),
            calibration_privacy=_stated(calibration.privacy, adjacency),
            calibrations=[make_entry(mechanism, configuration, calibration, release=release)],
            diagnostics=Diagnostics(mechanism_details=public),
            owner_diagnostics={"calibration": owner} if owner else {},
        )
        _check_made_by(calibration, mechanism, sizes)
        return card

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
        """Card of a configuration before any data: certificate and guarantee, no release.

        Whether calibrating with ``mechanism`` on ``n_samples`` rows at level
        ``1 - alpha`` would meet ``contract``, from public quantities alone (no data
        read, no privacy spent).

        Parameters
        ----------
        mechanism : QuantileMechanism
            The mechanism with its parameters.
        n_samples, alpha : int, float
            Planned calibration size in [1, 2**53]; miscoverage level in (0, 1).
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
        if sizes is not None and not mechanism.requires_groups:
            raise ValueError(
                f"ContractCard.for_configuration: agent_sizes is for federated mechanisms; "
                f"{type(mechanism).__name__} calibrates on one set of n_samples rows."
            )
        planned = planned_certificate(mechanism, n, alpha, sizes)
        certificate = Certificate.of(
            planned.lower_bound, planned.confidence, planned.feasible, planned.reason
        )
        return cls.build(
            contract=contract,
            configuration=configuration_of(None, n, alpha, mechanism, agent_sizes=sizes),
            training_privacy=stated_training(epsilon_train, delta_train),
            calibration_privacy=_stated(mechanism.privacy_guarantee(), adjacency),
            calibrations=[CalibrationEntry(None, n, certificate, None)],
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
        (under the estimator's adjacency). A Mondrian calibration records the public
        list of groups (``estimator.groups_``: the classes, or the declared ids) and one
        entry per group (its id, its size as released, its certificate and release); the
        contract must then hold in every group.

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
            Set by :class:`~privconf_sklearn.model_selection.CertificateAwareSearch`.

        Returns
        -------
        ContractCard
            With the estimator attached, for :meth:`evaluate`.
        """
        _check_coverage_estimator(estimator, "ContractCard.from_estimator")
        calibration, task = estimator.calibration_, task_of(estimator)
        releases, mondrian = _releases(calibration), isinstance(calibration, MondrianCalibration)
        units = list(estimator.group_thresholds_) if mondrian else [estimator.threshold_]
        public, owner = split_details(calibration)
        if mondrian:
            parts = [split_details(release) for _, release, _ in releases]
            public.update(groups=tuple(p for p, _ in parts))
            if any(o for _, o in parts):
                owner.update(groups=tuple(o for _, o in parts))
        source = "public"
        if task == "regression" and any(
            r.details.get("score_bounds_source") == "calibration data" for _, r, _ in releases
        ):
            source = "calibration data"
            public.pop("score_bounds", None)
            owner.update(score_bounds=estimator.score_bounds_, thresholds=plain_value(units))
        mechanism = estimator.mechanism_
        configuration = configuration_of(
            estimator,
            calibration.n_samples,
            calibration.alpha,
            mechanism,
            estimator.score_,
            estimator.estimator_,
            agent_sizes=_agent_sizes(mechanism, calibration),
            **_grouping(estimator),
        )
        entries = [
            make_entry(
                mechanism,
                configuration,
                release,
                group,
                bound,
                make_release(release, task, estimator.score_bounds_, threshold, source),
            )
            for (group, release, bound), threshold in zip(releases, units, strict=True)
        ]
        card = cls.build(
            contract=contract,
            configuration=configuration,
            training_privacy=training_privacy(estimator.estimator_, epsilon_train, delta_train),
            calibration_privacy=calibration.privacy,
            calibrations=entries,
            selection=selection,
            diagnostics=Diagnostics(mechanism_details=public),
            owner_diagnostics={"calibration": plain_value(owner)} if owner else {},
        )
        object.__setattr__(card, "_estimator", estimator)
        return card

    def with_contract(self, contract: Contract | None) -> ContractCard:
        """The same record checked against another contract (new digest, no signature)."""
        return self._attached(
            self.build(
                contract=contract,
                configuration=self.configuration,
                training_privacy=self.training_privacy,
                calibration_privacy=self.calibration_privacy,
                calibrations=self.calibrations,
                selection=self.selection,
                diagnostics=dataclasses.replace(self.diagnostics),
                owner_diagnostics=dict(self.owner_diagnostics),
            )
        )

    def _check_evaluated(self, estimator) -> None:
        _check_coverage_estimator(estimator, "ContractCard.evaluate")
        releases = [r for _, r, _ in _releases(estimator.calibration_)]
        recorded = [(e.n_samples, e.release and e.release.threshold) for e in self.calibrations]
        if recorded != [(r.n_samples, r.threshold) for r in releases]:
            raise ValueError(
                "estimator is not the calibration this card records (thresholds or "
                "calibration sizes differ)."
            )

    def _empirical_diagnostics(self, estimator, X, y) -> dict[str, Any]:
        return empirical_diagnostics(estimator, X, y)

    @classmethod
    def _check_schema(cls, schema: Any, version: Any) -> None:
        _check_version(schema, version)

    def _render_markdown(self, owner_diagnostics: Any) -> str:
        from ._markdown import render_markdown

        return render_markdown(self, owner_diagnostics)
