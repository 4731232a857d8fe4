"""Contracts and the formal feasibility predicate (the contract-cards paper, Eq. (3)).

A contract ``(gamma_target, eps_train_max, eps_cal_max, beta)`` (plus a ``delta`` bound,
the neighbouring relation the budgets are stated under and whether an uninformative
release is acceptable) is met by a configuration ``c`` when ``L(c) >= gamma_target``,
``eps_train <= eps_train_max`` and ``eps_cal <= eps_cal_max`` (Eq. (3)).
:func:`check_contract` decides the library's other cases (high-probability bounds,
approximate DP, unreachable levels, broken guarantees, Mondrian groups, guarantees stated
under another adjacency, trivial releases) conservatively, one named clause at a time;
the user guide defines each. Margins are signed slack, ``>= 0`` exactly when the clause
holds.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from numbers import Real
from typing import Annotated

from .._param_validation import Interval, StrOptions
from ..privacy import ADJACENCIES
from ._records import Budget, Flag, MaybeBudget, OpenUnit, Record, Signed, Text, forms

__all__ = ["CLAUSES", "RISK_CLAUSES", "Clause", "Contract", "check_contract", "decision_of"]

#: Clause names in the order cards list them.
CLAUSES = (
    "coverage",
    "lower_bound_confidence",
    "level_reachable",
    "epsilon_train",
    "delta_train",
    "epsilon_cal",
    "delta_cal",
    "informative",
)
#: Clause names of a risk card (:mod:`._risk_card`), in the order it lists them.
RISK_CLAUSES = (
    "loss",
    "risk",
    "level_reachable",
    "epsilon_train",
    "delta_train",
    "epsilon_cal",
    "delta_cal",
    "informative",
)
CLAUSE_NAMES = [StrOptions(set(CLAUSES) | set(RISK_CLAUSES))]
BelowOne = Annotated[float, forms(Interval(Real, 0, 1, closed="left"))]
Relation = Annotated[str, forms(StrOptions(set(ADJACENCIES)))]

#: What the ``informative`` clause requires, and what a release at the top means.
INFORMATIVE = (
    "the release is informative, threshold < 1 (at 1 every set holds every label / every "
    "interval spans the score bounds)"
)


@dataclass(frozen=True)
class Contract(Record):
    """Coverage and privacy requirements a deployment imposes (the paper's Sec. 3).

    Parameters
    ----------
    target_coverage : float
        ``gamma_target`` in (0, 1): the certified coverage required (in every group of a
        Mondrian calibration).
    max_epsilon_train, max_epsilon_cal : float
        Largest training / calibration privacy loss allowed, >= 0 (``inf``: any).
    beta : float
        Largest failure probability a coverage certificate may have, in [0, 1).
    delta : float, default=0.0
        Largest ``delta`` allowed for training and for calibration separately, in
        [0, 1). The default 0 admits pure (and local) DP only.
    adjacency : {"replace-one", "add/remove"}, default="replace-one"
        The neighbouring relation ``max_epsilon_cal`` and ``delta`` are stated under.
        A calibration guarantee stated under the other relation is restated under this
        one before it is compared (add/remove to replace-one by group privacy; the
        converse does not follow and counts as ``epsilon = inf``).
    require_informative : bool, default=True
        Whether the release must be informative: not every prediction set the whole
        label set, not every interval as wide as the score bounds (``threshold < 1``;
        for a Mondrian calibration, in every group).

    Examples
    --------
    >>> from privconf_sklearn.cards import Contract
    >>> contract = Contract(target_coverage=0.9, max_epsilon_train=2, max_epsilon_cal=1, beta=1e-3)
    >>> contract.max_epsilon_cal, contract.adjacency, contract.require_informative
    (1.0, 'replace-one', True)
    """

    target_coverage: OpenUnit
    max_epsilon_train: Budget
    max_epsilon_cal: Budget
    beta: BelowOne
    delta: BelowOne = 0.0
    adjacency: Relation = "replace-one"
    require_informative: Flag = True


@dataclass(frozen=True)
class Clause(Record):
    """One conjunct of the feasibility predicate, evaluated.

    Parameters
    ----------
    name : str
        One of :data:`CLAUSES` (of :data:`RISK_CLAUSES` on a risk card).
    requirement : str
        The inequality checked, in words and numbers (naming the groups that fail).
    value, bound, margin : float or None
        The configuration's coordinate (the worst group's), the contract's bound and
        the signed slack (``>= 0`` exactly when satisfied); None for
        ``level_reachable`` and ``informative``.
    satisfied : bool
        Whether the clause holds.
    """

    name: Annotated[str, CLAUSE_NAMES]
    requirement: Text
    value: MaybeBudget
    bound: MaybeBudget
    margin: Signed
    satisfied: Flag


def _at_least(name: str, requirement: str, value: float, bound: float) -> Clause:
    return Clause(name, requirement, value, bound, value - bound, value >= bound)


def _at_most(name: str, symbol: str, value: float, bound: float) -> Clause:
    margin = math.inf if math.isinf(bound) else bound - value
    return Clause(name, f"{symbol} <= {bound:.6g}", value, bound, margin, value <= bound)


def _groups(grouped: bool, failing: list, verb: str) -> str:
    """`` in every group`` and the groups that fail, for a Mondrian card."""
    if not grouped:
        return ""
    named = ", ".join(str(group) for group in failing[:10]) + (" ..." if len(failing) > 10 else "")
    return " in every group" + (f"; {verb} in groups {named}" if failing else "")


def _broken(entry) -> bool:
    return entry.release is not None and not entry.release.coverage_holds


def _marginal(entry) -> float:
    return 0.0 if _broken(entry) else entry.certificate.marginal_lower_bound


def _coverage_clauses(contract, calibrations, grouped: bool) -> tuple[Clause, ...]:
    """``coverage``, ``lower_bound_confidence`` and ``level_reachable``, worst group first."""
    target, needed = contract.target_coverage, 1.0 - contract.beta
    coverage = f"L - (1 - confidence) >= {target:.6g}"
    if not grouped and _broken(calibrations[0]):
        coverage += " (the release's coverage does not hold: L = 0)"
    low = [e.group for e in calibrations if _marginal(e) < target]
    unsure = [e.group for e in calibrations if e.certificate.confidence < needed]
    unreachable = [e.group for e in calibrations if not e.certificate.level_reachable]
    return (
        _at_least(
            "coverage",
            coverage + _groups(grouped, low, "fails"),
            min(_marginal(e) for e in calibrations),
            target,
        ),
        _at_least(
            "lower_bound_confidence",
            f"confidence >= 1 - beta = {needed:.6g}" + _groups(grouped, unsure, "fails"),
            min(e.certificate.confidence for e in calibrations),
            needed,
        ),
        Clause(
            "level_reachable",
            "the mechanism can reach the nominal level at this size"
            + _groups(grouped, unreachable, "unreachable"),
            None,
            None,
            None,
            not unreachable,
        ),
    )


def calibration_spend(contract, privacy) -> tuple[float, float]:
    """``(epsilon, delta)`` of a calibration guarantee under the contract's adjacency.

    A guarantee that does not hold (also after restating it) counts as ``(inf, 1)``.
    """
    stated = privacy.under(contract.adjacency) if privacy.holds else privacy
    return (stated.epsilon, stated.delta) if stated.holds else (math.inf, 1.0)


def _calibration_clauses(contract, privacy, spent) -> tuple[Clause, ...]:
    """``epsilon_cal`` and ``delta_cal``, under the contract's adjacency."""
    relation = f" (under {contract.adjacency} adjacency)"
    if spent is None:
        spent = calibration_spend(contract, privacy)
        if privacy.holds and math.isinf(spent[0]) and math.isfinite(privacy.epsilon):
            relation += f"; the guarantee is stated for {privacy.adjacency} neighbours only"
    return (
        _at_most("epsilon_cal", "eps_cal" + relation, spent[0], contract.max_epsilon_cal),
        _at_most("delta_cal", "delta_cal" + relation, spent[1], contract.delta),
    )


def _informative_clause(contract, calibrations, grouped: bool) -> Clause:
    """``informative``: the release is not trivial (in every group, for Mondrian)."""
    released = [e for e in calibrations if e.release is not None]
    trivial = [e.group for e in released if not e.release.informative]
    if not released:
        requirement, satisfied = "no release on the card: checked once calibrated", True
    elif not contract.require_informative:
        found = "; the release is UNINFORMATIVE" if trivial else ""
        requirement, satisfied = "not required by the contract" + found, True
    else:
        requirement = INFORMATIVE + ("; the threshold is 1" if trivial and not grouped else "")
        requirement += _groups(grouped, trivial, "uninformative")
        satisfied = not trivial
    return Clause("informative", requirement, None, None, None, satisfied)


def check_contract(contract, training, privacy, calibrations, spent=None) -> tuple[Clause, ...]:
    """Evaluate every clause of the (conservatively extended) Eq. (3).

    Parameters
    ----------
    contract : Contract
        The requirements.
    training : TrainingPrivacy
        ``eps_train`` (``inf`` when unknown).
    privacy : PrivacyGuarantee
        The calibration guarantee, restated under ``contract.adjacency``; one that does
        not hold (there) counts as ``(inf, 1)``.
    calibrations : sequence of CalibrationEntry
        One entry, or one per Mondrian group. Coverage, confidence, reachability and
        (if required) an informative release must hold in every group
        (group-conditional coverage): each clause's value is the worst group's, and its
        requirement names the groups that fail. A release whose coverage does not hold
        certifies nothing (``L = 0``).
    spent : tuple of float or None, default=None
        A search's composed calibration ``(epsilon, delta)`` under
        ``contract.adjacency``, charged instead.

    Returns
    -------
    tuple of Clause
        In the order of :data:`CLAUSES`; feasible iff all hold (Observation 4.1).
    """
    grouped = any(entry.group is not None for entry in calibrations)
    return (
        *_coverage_clauses(contract, calibrations, grouped),
        _at_most("epsilon_train", "eps_train", training.epsilon, contract.max_epsilon_train),
        _at_most("delta_train", "delta_train", training.delta, contract.delta),
        *_calibration_clauses(contract, privacy, spent),
        _informative_clause(contract, calibrations, grouped),
    )


def decision_of(contract, clauses: tuple[Clause, ...]) -> str:
    """``"feasible"``, ``"infeasible"``, or ``"unchecked"`` when there is no contract."""
    if contract is None:
        return "unchecked"
    return "feasible" if all(clause.satisfied for clause in clauses) else "infeasible"
