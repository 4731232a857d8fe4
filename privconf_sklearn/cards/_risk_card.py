"""Risk cards: the contract card of a conformal risk control.

A :class:`PrivateRiskControlClassifier <privconf_sklearn.PrivateRiskControlClassifier>`
certifies a risk, not a coverage: ``E[L(Y, C(X))] <= U`` for its loss ``L`` with bound
``B`` (conformal risk control, Angelopoulos, Bates, Fisch, Lei and Schuster 2024). Its
card follows the contract card of "Contract Cards for Auditable Private Conformal
Prediction" (2026), with the coverage requirement replaced by a risk requirement:

- :class:`RiskContract`: the loss (its name and bound ``B``), the largest certified risk
  allowed, the privacy budgets, the adjacency they are stated under and whether the
  release must be informative.
- :class:`RiskCard`: the formal layer (contract, configuration with the public grid of
  thresholds, privacy, the certificate ``U`` and the release of the calibration or of
  every Mondrian group, the clauses with margins, the decision) and published
  diagnostics; JSON with its own schema name and a digest of the formal layer.
  :func:`~privconf_sklearn.cards.verify_card` rebuilds the formal layer from a
  serialised card alone (the certificate from the recorded mechanism, sizes, grid and
  level) and compares it field by field.

The clauses (:data:`RISK_CLAUSES`): ``loss`` (the card's loss and bound are the
contract's), ``risk`` (``U <= max_risk``, in every group), ``level_reachable``, the
training and calibration budgets (as in coverage cards, calibration under the contract's
adjacency) and ``informative`` (the release is not the set of every label).
"""

from __future__ import annotations

import dataclasses
import itertools
import math
from dataclasses import dataclass, field
from numbers import Integral, Real
from typing import Annotated, Any, ClassVar

from sklearn.utils.validation import _num_samples, check_is_fitted

from .._param_validation import Interval, validate_params
from ..metrics import mean_set_size
from ..mondrian import PrivateGroupSizes
from ..privacy import PrivacyGuarantee
from ..risk_control import (
    MondrianRiskCalibration,
    PrivateRiskControlClassifier,
    private_sizes_risk_bound,
)
from ..scores import CallableLoss, FalseNegativeRate
from ._card import DECISIONS
from ._codec import canonical_bytes, plain_value
from ._contract import RISK_CLAUSES, Clause, Relation, _at_most, _calibration_clauses, decision_of
from ._markdown import render_risk_markdown
from ._published import PublishedCard
from ._records import (
    GROUP_ID,
    MAX_SAMPLES,
    RISK_EMPIRICAL,
    SIZE,
    Budget,
    ComponentSpec,
    Count,
    Diagnostics,
    Flag,
    Items,
    Mapping,
    MaybeText,
    Nested,
    Record,
    Signature,
    Signed,
    Text,
    TrainingPrivacy,
    distinct_ids,
    forms,
    optional,
)
from ._training import describe_estimator, training_privacy

__all__ = [
    "RISK_SCHEMA",
    "RISK_SCHEMA_VERSION",
    "RiskCard",
    "RiskContract",
    "RiskEntry",
    "RiskRelease",
    "RiskSetup",
]

#: Schema name and version of a risk card's JSON (coverage cards have their own).
RISK_SCHEMA = "privconf_sklearn/risk-card"
RISK_SCHEMA_VERSION = 1
#: Most thresholds a card records: the estimator's 10^5 and the appended ``-inf``.
MAX_THRESHOLDS = 10**5 + 1

Positive = Annotated[float, forms(Interval(Real, 0, None, closed="neither"))]
BelowOne = Annotated[float, forms(Interval(Real, 0, 1, closed="left"))]
THRESHOLD = Interval(Real, None, None, closed="both")  # a real, or -inf: every label
Threshold = Annotated[float, forms(THRESHOLD)]
NonNegative = Annotated[float, forms(Interval(Real, 0, None, closed="left"))]
CLAUSE_LIST = [Items(Nested(Clause), max_length=len(RISK_CLAUSES))]


def loss_name(loss) -> str:
    """``"fnr"``, ``"callable <name>"`` or the loss class's name."""
    if isinstance(loss, FalseNegativeRate):
        return "fnr"
    if isinstance(loss, CallableLoss):
        function = loss.function
        return f"callable {getattr(function, '__qualname__', type(function).__name__)}"
    return type(loss).__name__


@dataclass(frozen=True)
class RiskContract(Record):
    """Risk and privacy requirements of a deployment of conformal risk control.

    Parameters
    ----------
    loss : str
        The loss whose risk is bounded, as cards name it: ``"fnr"`` (the false-negative
        rate), ``"callable <name>"`` for a user loss, or a loss class's name.
    loss_bound : float
        ``B``, the largest loss of one row, > 0: the contract's risk is in these units.
    max_risk : float
        The largest certified risk ``E[L] <= U`` allowed, in ``(0, loss_bound)`` (in every
        group of a Mondrian calibration).
    max_epsilon_train, max_epsilon_cal : float
        Largest training / calibration privacy loss allowed, >= 0 (``inf``: any).
    delta : float, default=0.0
        Largest ``delta`` allowed for training and for calibration separately, in [0, 1).
    adjacency : {"replace-one", "add/remove"}, default="replace-one"
        The neighbouring relation ``max_epsilon_cal`` and ``delta`` are stated under.
    require_informative : bool, default=True
        Whether the release must be informative: not the set of every label (in every
        group).

    Examples
    --------
    >>> from privconf_sklearn.cards import RiskContract
    >>> contract = RiskContract(loss="fnr", loss_bound=1.0, max_risk=0.1,
    ...                         max_epsilon_train=float("inf"), max_epsilon_cal=1.0)
    >>> contract.max_risk, contract.adjacency
    (0.1, 'replace-one')
    """

    loss: Text
    loss_bound: Positive
    max_risk: Positive
    max_epsilon_train: Budget
    max_epsilon_cal: Budget
    delta: BelowOne = 0.0
    adjacency: Relation = "replace-one"
    require_informative: Flag = True

    def _check(self) -> None:
        if not self.max_risk < self.loss_bound:
            raise ValueError(
                f"max_risk must lie in (0, loss_bound) = (0, {self.loss_bound!r}); got "
                f"{self.max_risk!r}."
            )


@dataclass(frozen=True)
class RiskSetup(Record):
    """The calibration choices of a risk control.

    Parameters
    ----------
    loss : str
        The loss (see :class:`RiskContract`).
    loss_bound : float
        ``B`` > 0.
    alpha : float
        The requested risk level, in ``(0, loss_bound)``.
    n_samples : int
        Calibration size (public).
    mechanism : ComponentSpec
        ``ExponCRC`` or ``SplitCRC`` with its parameters.
    thresholds : tuple of float
        The public grid: the candidates' thresholds on ``p_k(x)``, least conservative
        (largest) first, strictly decreasing (``-inf``: every label).
    estimator : str or None, default=None
        The fitted model's class path.
    mondrian : str or None, default=None
        ``"callable <name>"`` for Mondrian groups (None: one threshold).
    groups : tuple or None, default=None
        With ``mondrian``: the groups, in order; the card holds one entry per group.
    group_sizes : ComponentSpec or None, default=None
        ``PrivateGroupSizes`` with its parameters when the group sizes were released
        privately (None: public sizes; written only when set).
    """

    written_when_set: ClassVar[tuple[str, ...]] = ("group_sizes",)

    loss: Text
    loss_bound: Positive
    alpha: Positive
    n_samples: Annotated[int, SIZE]
    mechanism: ComponentSpec
    thresholds: Annotated[tuple, forms(Items(THRESHOLD, max_length=MAX_THRESHOLDS))]
    estimator: MaybeText = None
    mondrian: MaybeText = None
    groups: Annotated[tuple | None, optional([Items(GROUP_ID)])] = None
    group_sizes: ComponentSpec | None = None

    @property
    def private_sizes(self) -> PrivateGroupSizes | None:
        """The size release recorded (None: public sizes)."""
        return None if self.group_sizes is None else PrivateGroupSizes(**self.group_sizes.params)

    def _check(self) -> None:
        if not self.alpha < self.loss_bound:
            raise ValueError(f"alpha must lie in (0, loss_bound); got {self.alpha!r}.")
        grid = self.thresholds
        if not grid or any(a <= b for a, b in itertools.pairwise(grid)):
            raise ValueError("thresholds must be non-empty and strictly decreasing.")
        if (self.mondrian is None) != (self.groups is None):
            raise ValueError("mondrian and groups are recorded together or not at all.")
        if self.groups is not None and not distinct_ids(self.groups):
            raise ValueError("groups must list at least one group, each once.")
        if self.group_sizes is not None:
            declared = self.group_sizes.params.get("group_ids")
            if (
                self.groups is None
                or self.group_sizes.name != "PrivateGroupSizes"
                or declared is None
                or canonical_bytes(list(declared)) != canonical_bytes(list(self.groups))
            ):
                raise ValueError(
                    "group_sizes records the PrivateGroupSizes of Mondrian groups: its "
                    "group_ids are the card's groups."
                )


@dataclass(frozen=True)
class RiskRelease(Record):
    """What a risk control released.

    Parameters
    ----------
    index : int
        The released candidate (0-based, in the order of ``thresholds``).
    threshold : float
        ``thresholds[index]``: sets are ``{k : p_k(x) > threshold}``.
    informative : bool
        ``index < m - 1``. False: the most conservative candidate (every label, when the
        grid ends at ``-inf``).
    target_risk : float or None
        The empirical mean loss the mechanism aimed at (public), or None.
    reason : str
        Why the release is uninformative, or empty.
    """

    index: Count
    threshold: Threshold
    informative: Flag
    target_risk: Signed
    reason: Text


@dataclass(frozen=True)
class RiskEntry(Record):
    """The certificate and release of the whole calibration set, or of one Mondrian group.

    Parameters
    ----------
    group : JSON value or None
        The group id (None: the whole calibration set).
    n_samples : int
        Rows the release read: the group's size (public sizes) or its released private
        lower bound ``m_g``, possibly 0 (private sizes).
    resolution : int
        ``Q``: losses were rounded up to multiples of ``B / Q`` (public).
    risk_bound : float
        ``U``, the certified ``E[L] <= U`` (0 when the level is unreachable: the release is
        then the most conservative candidate, whose loss the guarantee assumes is 0).
        With private sizes, ``alpha + beta (B - alpha)``
        (:func:`~privconf_sklearn.risk_control.private_sizes_risk_bound`) when reachable.
    level_reachable : bool
        False when no calibration set of this size certifies ``alpha``.
    reason : str
        Why the level is unreachable, or empty.
    release : RiskRelease or None
        The release (None for a configuration never calibrated).
    """

    group: Annotated[Any, forms(None, GROUP_ID)]
    n_samples: Annotated[int, forms(Interval(Integral, 0, MAX_SAMPLES, closed="both"))]
    resolution: Annotated[int, forms(Interval(Integral, 1, None, closed="left"))]
    risk_bound: NonNegative
    level_reachable: Flag
    reason: Text
    release: RiskRelease | None


def _check_entry_sizes(setup: RiskSetup, entries) -> None:
    """The entries match the groups and the calibration size.

    One entry (group null) without groups, else one per listed group; their sizes add up
    to the calibration size (public sizes) or are each at most it (private sizes).
    """
    if setup.groups is None:
        if [(e.group, e.n_samples) for e in entries] != [(None, setup.n_samples)]:
            raise ValueError(
                "without Mondrian groups, calibrations hold one entry: group null, "
                "n_samples = configuration.n_samples."
            )
        return
    if [entry.group for entry in entries] != list(setup.groups):
        raise ValueError("calibrations must hold one entry per listed group, in order.")
    sizes = [entry.n_samples for entry in entries]
    if setup.group_sizes is None and (sum(sizes) != setup.n_samples or min(sizes) < 1):
        raise ValueError(
            "with public group sizes, every entry reads at least one row and their sizes "
            "add up to configuration.n_samples."
        )
    if max(sizes) > setup.n_samples:
        raise ValueError("with private group sizes, each entry's size is at most n_samples.")


def _check_release(entry: RiskEntry, grid: tuple) -> None:
    """A release names a candidate of the grid, consistently with the certificate."""
    release, m = entry.release, len(grid)
    if release is None:
        return
    if not release.index < m or release.threshold != grid[release.index]:
        raise ValueError(f"release index {release.index} does not name its threshold.")
    if release.informative != (release.index < m - 1):
        raise ValueError(f"informative must be index < m - 1 = {release.index < m - 1}.")
    if not entry.level_reachable and release.informative:
        raise ValueError("an unreachable level releases the most conservative candidate.")


def check_risk_contract(contract, setup, training, privacy, entries) -> tuple[Clause, ...]:
    """Every clause of the risk contract, worst group first (order of :data:`RISK_CLAUSES`)."""
    grouped = setup.mondrian is not None
    where = " in every group" if grouped else ""
    same_loss = (setup.loss, setup.loss_bound) == (contract.loss, contract.loss_bound)
    unreachable = [e.group for e in entries if not e.level_reachable]
    released = [e for e in entries if e.release is not None]
    trivial = [e.group for e in released if not e.release.informative]
    risk = _at_most("risk", "U (certified E[loss])" + where, max(e.risk_bound for e in entries),
                    contract.max_risk)  # fmt: skip
    informative = not (trivial and contract.require_informative)
    return (
        Clause(
            "loss",
            f"the loss is {contract.loss!r} with bound B = {contract.loss_bound:.6g} (card: "
            f"{setup.loss!r}, B = {setup.loss_bound:.6g})",
            None,
            None,
            None,
            same_loss,
        ),
        risk,
        Clause(
            "level_reachable",
            "the mechanism can certify alpha at this size"
            + (f"; unreachable in groups {unreachable[:10]}" if grouped and unreachable else ""),
            None,
            None,
            None,
            not unreachable,
        ),
        _at_most("epsilon_train", "eps_train", training.epsilon, contract.max_epsilon_train),
        _at_most("delta_train", "delta_train", training.delta, contract.delta),
        *_calibration_clauses(contract, privacy, None),
        Clause(
            "informative",
            ("the release is not the set of every label" + where)
            if contract.require_informative
            else "not required by the contract",
            None,
            None,
            None,
            informative,
        ),
    )


@dataclass(frozen=True)
class RiskCard(PublishedCard, Record):
    """An auditable record of a conformal risk control against a :class:`RiskContract`.

    Build it with :meth:`from_estimator` (or the estimator's ``card_``); read it with
    :meth:`from_json`; check it with :func:`~privconf_sklearn.cards.verify_card`.

    Parameters
    ----------
    contract : RiskContract or None
        The requirements (None: ``decision`` is ``"unchecked"``).
    configuration : RiskSetup
        Loss, bound, level, size, mechanism, grid, model, Mondrian groups.
    training_privacy : TrainingPrivacy
        ``eps_train`` (and delta) and where it comes from.
    calibration_privacy : PrivacyGuarantee
        The guarantee of everything the calibration released (Mondrian: all groups),
        under the adjacency the user stated.
    calibrations : tuple of RiskEntry
        Certificate and release of the whole calibration set or of every group.
    clauses : tuple of Clause
        The contract clause by clause, with margins (empty without a contract).
    decision : {"feasible", "infeasible", "unchecked"}
        Conjunction of the clauses.
    diagnostics : Diagnostics, default=Diagnostics()
        Published diagnostics: the mechanisms' public details.
    owner_diagnostics : dict, default={}
        NOT covered by the privacy guarantee: the counts of calibration rows that broke
        an assumption of the risk guarantee. Written only on request.
    signature : Signature or None, default=None
        Ed25519 signature of the formal and diagnostic layers (:meth:`sign`), written
        only when present (readers of unsigned risk cards need not know the field).
    formal_sha256 : str, default=""
        SHA-256 of the formal layer; computed when empty.

    Examples
    --------
    >>> from sklearn.linear_model import LogisticRegression
    >>> from sklearn.multioutput import MultiOutputClassifier
    >>> from sklearn.datasets import make_multilabel_classification
    >>> from privconf_sklearn import PrivateRiskControlClassifier
    >>> from privconf_sklearn.cards import RiskCard, RiskContract, verify_card
    >>> from privconf_sklearn.mechanisms import ExponCRC
    >>> X, Y = make_multilabel_classification(3000, n_classes=4, allow_unlabeled=False,
    ...                                       random_state=0)
    >>> model = MultiOutputClassifier(LogisticRegression()).fit(X[:1000], Y[:1000])
    >>> crc = PrivateRiskControlClassifier(model, mechanism=ExponCRC(1.0), alpha=0.1,
    ...                                    random_state=0).fit_calibrate(X[1000:], Y[1000:])
    >>> contract = RiskContract("fnr", 1.0, max_risk=0.1, max_epsilon_train=float("inf"),
    ...                         max_epsilon_cal=1.0)
    >>> card = RiskCard.from_estimator(crc, contract)
    >>> card.decision, verify_card(card.to_json()).status
    ('feasible', 'accepted')
    """

    schema: ClassVar[str] = RISK_SCHEMA
    schema_version: ClassVar[int] = RISK_SCHEMA_VERSION
    writes_unsigned_signature: ClassVar[bool] = False  # version 1 cards had no signature
    empirical_names: ClassVar[tuple[str, ...]] = RISK_EMPIRICAL

    contract: RiskContract | None
    configuration: RiskSetup
    training_privacy: TrainingPrivacy
    calibration_privacy: PrivacyGuarantee
    calibrations: tuple[RiskEntry, ...]
    clauses: Annotated[tuple[Clause, ...], CLAUSE_LIST]
    decision: Annotated[str, DECISIONS]
    diagnostics: Diagnostics = field(default_factory=Diagnostics)
    owner_diagnostics: Mapping = field(default_factory=dict, compare=False, repr=False)
    signature: Signature | None = None
    formal_sha256: Text = ""
    _estimator: Any = field(default=None, init=False, compare=False, repr=False)

    def _check(self) -> None:
        setup, entries = self.configuration, self.calibrations
        _check_entry_sizes(setup, entries)
        if len({entry.release is None for entry in entries}) > 1:
            raise ValueError("either every calibration entry records a release or none does.")
        for entry in entries:
            _check_release(entry, setup.thresholds)
        if not self.formal_sha256:
            object.__setattr__(self, "formal_sha256", self.compute_digest())

    @property
    def risk_upper_bound(self) -> float:
        """The largest certified risk over the entries (the marginal bound too)."""
        return max(entry.risk_bound for entry in self.calibrations)

    # ---------------------------------------------------------------- building
    @classmethod
    def build(cls, *, contract, calibrations, **fields) -> RiskCard:
        """A card whose clauses and decision are computed from the given fields.

        ``fields``: ``configuration``, ``training_privacy``, ``calibration_privacy``,
        optionally ``diagnostics`` and ``owner_diagnostics``.
        """
        validate_params({"contract": [None, RiskContract]}, {"contract": contract}, "RiskCard")
        clauses: tuple[Clause, ...] = ()
        if contract is not None:
            clauses = check_risk_contract(
                contract,
                fields["configuration"],
                fields["training_privacy"],
                fields["calibration_privacy"],
                calibrations,
            )
        return cls(contract=contract, calibrations=tuple(calibrations), clauses=clauses,
                   decision=decision_of(contract, clauses), **fields)  # fmt: skip

    @classmethod
    def from_estimator(
        cls,
        estimator,
        contract: RiskContract | None = None,
        *,
        epsilon_train: float | None = None,
        delta_train: float | None = None,
    ) -> RiskCard:
        """Card of a fitted :class:`~privconf_sklearn.PrivateRiskControlClassifier`.

        The certificate of every entry is the mechanism's
        :meth:`~privconf_sklearn.mechanisms.RiskControlMechanism.risk_certificate` at the
        entry's public size and resolution (the bound the release recorded); the
        calibration guarantee is ``estimator.calibration_.privacy`` as recorded.

        Parameters
        ----------
        estimator : PrivateRiskControlClassifier
            Fitted (``calibration_`` set).
        contract : RiskContract or None, default=None
            Requirements to check; None records the calibration only.
        epsilon_train, delta_train : float or None, default=None
            Training budget (None: read from a diffprivlib model, ``inf`` otherwise).

        Returns
        -------
        RiskCard

        Raises
        ------
        ValueError
            If calibration rows broke the loss's assumption (a positive loss at the set of
            every label): the bound does not hold, and no card states it.
        """
        validate_params(
            {"estimator": [PrivateRiskControlClassifier], "contract": [None, RiskContract]},
            {"estimator": estimator, "contract": contract},
            "RiskCard.from_estimator",
        )
        check_is_fitted(estimator, "calibration_")
        calibration = estimator.calibration_
        grouped = isinstance(calibration, MondrianRiskCalibration)
        releases = list(calibration.groups) if grouped else [(None, calibration)]
        _refuse_broken_assumptions(releases, grouped)
        loss, grid = estimator.score_, tuple(float(t) for t in estimator.thresholds_)
        mondrian = estimator.mondrian_ if grouped else None
        setup = RiskSetup(
            loss=loss_name(loss),
            loss_bound=float(loss.bound()),
            alpha=float(calibration.alpha),
            n_samples=int(calibration.n_samples),
            mechanism=ComponentSpec.of(estimator.mechanism_),
            thresholds=grid,
            estimator=describe_estimator(estimator.estimator_),
            mondrian=None
            if mondrian is None
            else f"callable {getattr(mondrian, '__name__', type(mondrian).__name__)}",
            groups=plain_value(tuple(g for g, _ in releases)) if grouped else None,
            group_sizes=_size_spec(calibration.group_sizes) if grouped else None,
        )
        entries = [
            _entry(estimator.mechanism_, setup, plain_value(group), release)
            for group, release in releases
        ]
        public = [plain_value(dict(r.details)) for _, r in releases]
        owner = [plain_value(dict(r.owner_diagnostics)) for _, r in releases]
        owner_diagnostics = {"calibration": owner if grouped else owner[0]} if any(owner) else {}
        if grouped:  # the exact group sizes, when they were released privately
            owner_diagnostics.update(plain_value(dict(calibration.owner_diagnostics)))
        card = cls.build(
            contract=contract,
            configuration=setup,
            training_privacy=training_privacy(estimator.estimator_, epsilon_train, delta_train),
            calibration_privacy=calibration.privacy,
            calibrations=entries,
            diagnostics=Diagnostics(
                mechanism_details={"groups": tuple(public)} if grouped else public[0]
            ),
            owner_diagnostics=owner_diagnostics,
        )
        object.__setattr__(card, "_estimator", estimator)
        return card

    def with_contract(self, contract: RiskContract | None) -> RiskCard:
        """The same record checked against another contract (new digest, no signature)."""
        return self._attached(
            type(self).build(
                contract=contract,
                configuration=self.configuration,
                training_privacy=self.training_privacy,
                calibration_privacy=self.calibration_privacy,
                calibrations=self.calibrations,
                diagnostics=dataclasses.replace(self.diagnostics),
                owner_diagnostics=dict(self.owner_diagnostics),
            )
        )

    def _check_evaluated(self, estimator) -> None:
        validate_params(
            {"estimator": [PrivateRiskControlClassifier]},
            {"estimator": estimator},
            "RiskCard.evaluate",
        )
        check_is_fitted(estimator, "calibration_")
        calibration = estimator.calibration_
        releases = (
            [release for _, release in calibration.groups]
            if isinstance(calibration, MondrianRiskCalibration)
            else [calibration]
        )
        found = [(r.n_samples, float(estimator.thresholds_[r.index])) for r in releases]
        recorded = [(e.n_samples, e.release and e.release.threshold) for e in self.calibrations]
        if recorded != found:
            raise ValueError(
                "estimator is not the calibration this card records (thresholds or "
                "calibration sizes differ)."
            )

    def _empirical_diagnostics(self, estimator, X, y) -> dict[str, Any]:
        return risk_diagnostics(estimator, X, y)

    def _render_markdown(self, owner_diagnostics: Any) -> str:
        return render_risk_markdown(self, owner_diagnostics)


def _refuse_broken_assumptions(releases, grouped: bool) -> None:
    """No card for a calibration whose rows broke the loss's assumption (owner-side)."""
    broken = [group for group, release in releases if not release.assumptions_hold]
    if broken:
        where = f" (groups {broken[:10]})" if grouped else ""
        raise ValueError(
            "No card certifies this calibration: calibration rows had a positive loss "
            f"at the set of every label{where}, which the risk guarantee assumes is 0 "
            "for every row, so the bound does not hold (calibration_.owner_diagnostics "
            "counts them; the count is not private). Fix the loss and calibrate again."
        )


def _size_spec(group_sizes) -> ComponentSpec | None:
    """``PrivateGroupSizes`` and its parameters (None: public sizes)."""
    if not isinstance(group_sizes, PrivateGroupSizes):
        return None
    params = group_sizes.get_params(deep=False)
    return ComponentSpec("PrivateGroupSizes", plain_value(params))


def entry_certificate(mechanism, setup: RiskSetup, n_samples: int, resolution: int):
    """``(U, reachable, reason)`` of an entry of ``n_samples`` rows, from public values.

    The mechanism's certificate at the entry's size and resolution; with private sizes
    the bound is :func:`~privconf_sklearn.risk_control.private_sizes_risk_bound` when
    reachable, and a size of 0 is unreachable (the group's release reads no row).
    """
    private = setup.private_sizes
    if n_samples == 0:
        beta = None if private is None else private.beta
        return 0.0, False, f"the private lower bound of the group's size is 0 (beta = {beta})."
    certificate = mechanism.risk_certificate(
        n_samples,
        setup.alpha,
        len(setup.thresholds),
        loss_bound=setup.loss_bound,
        resolution=resolution,
    )
    bound = float(certificate.upper_bound)
    if private is not None and certificate.feasible:
        bound = private_sizes_risk_bound(setup.alpha, private.beta, setup.loss_bound)
    return bound, bool(certificate.feasible), certificate.reason


def _entry(mechanism, setup: RiskSetup, group, release) -> RiskEntry:
    """One entry: the certificate at the release's public size and resolution, the release."""
    resolution = int(release.details["resolution"])
    bound, reachable, reason = entry_certificate(
        mechanism, setup, int(release.n_samples), resolution
    )
    target = release.target_risk
    return RiskEntry(
        group=group,
        n_samples=int(release.n_samples),
        resolution=resolution,
        risk_bound=bound,
        level_reachable=reachable,
        reason=reason,
        release=RiskRelease(
            index=int(release.index),
            threshold=setup.thresholds[release.index],
            informative=bool(release.informative),
            target_risk=None if target is None or not math.isfinite(target) else float(target),
            reason=release.reason,
        ),
    )


def risk_diagnostics(estimator, X, y) -> dict[str, Any]:
    """Rows, mean loss and mean set size of a fitted risk control on ``(X, y)``.

    The mean loss is :meth:`~privconf_sklearn.PrivateRiskControlClassifier.mean_loss`.
    """
    risk = estimator.mean_loss(X, y)
    return {
        "n_test": int(_num_samples(X)),
        "empirical_risk": risk,
        "mean_set_size": mean_set_size(estimator.predict_set(X)),
    }
