"""Contracts and the formal feasibility predicate (the contract-cards paper, Eq. (3)).

A contract ``(gamma_target, eps_train_max, eps_cal_max, beta)`` (plus a ``delta`` bound)
is met by a configuration ``c`` when ``L(c) >= gamma_target``, ``eps_train <=
eps_train_max`` and ``eps_cal <= eps_cal_max`` (Eq. (3)). :func:`check_contract` decides
the library's other cases (high-probability bounds, approximate DP, unreachable levels,
broken guarantees, Mondrian groups) conservatively, one named clause at a time; the user
guide defines each. Margins are signed slack, ``>= 0`` exactly when the clause holds.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from numbers import Real
from typing import Annotated

from .._param_validation import Interval, StrOptions
from ._records import Budget, Flag, MaybeBudget, OpenUnit, Record, Signed, Text, forms

__all__ = ["CLAUSES", "Clause", "Contract", "check_contract", "decision_of"]

#: Clause names in the order cards list them.
CLAUSES = (
    "coverage",
    "lower_bound_confidence",
    "level_reachable",
    "epsilon_train",
    "delta_train",
    "epsilon_cal",
    "delta_cal",
)
CLAUSE_NAMES = [StrOptions(set(CLAUSES))]
BelowOne = Annotated[float, forms(Interval(Real, 0, 1, closed="left"))]


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

    Examples
    --------
    >>> from privconf_sklearn.cards import Contract
    >>> Contract(target_coverage=0.9, max_epsilon_train=2, max_epsilon_cal=1, beta=1e-3)
    Contract(target_coverage=0.9, max_epsilon_train=2.0, max_epsilon_cal=1.0, beta=0.001, delta=0.0)
    """

    target_coverage: OpenUnit
    max_epsilon_train: Budget
    max_epsilon_cal: Budget
    beta: BelowOne
    delta: BelowOne = 0.0


@dataclass(frozen=True)
class Clause(Record):
    """One conjunct of the feasibility predicate, evaluated.

    Parameters
    ----------
    name : str
        One of :data:`CLAUSES`.
    requirement : str
        The inequality checked, in words and numbers (naming the groups that fail).
    value, bound, margin : float or None
        The configuration's coordinate (the worst group's), the contract's bound and
        the signed slack (``>= 0`` exactly when satisfied); None for ``level_reachable``.
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


def check_contract(contract, training, privacy, calibrations, spent=None) -> tuple[Clause, ...]:
    """Evaluate every clause of the (conservatively extended) Eq. (3).

    Parameters
    ----------
    contract : Contract
        The requirements.
    training : TrainingPrivacy
        ``eps_train`` (``inf`` when unknown).
    privacy : PrivacyGuarantee
        The calibration guarantee; one that does not hold counts as ``(inf, 1)``.
    calibrations : sequence of CalibrationEntry
        One entry, or one per Mondrian group. Coverage, confidence and reachability
        must hold in every group (group-conditional coverage): each clause's value is
        the worst group's, and its requirement names the groups that fail. A release
        whose coverage does not hold certifies nothing (``L = 0``).
    spent : tuple of float or None, default=None
        A search's composed calibration ``(epsilon, delta)``, charged instead.

    Returns
    -------
    tuple of Clause
        In the order of :data:`CLAUSES`; feasible iff all hold (Observation 4.1).
    """

    def broken(entry) -> bool:
        return entry.release is not None and not entry.release.coverage_holds

    def marginal(entry) -> float:
        return 0.0 if broken(entry) else entry.certificate.marginal_lower_bound

    grouped = any(entry.group is not None for entry in calibrations)
    target, needed = contract.target_coverage, 1.0 - contract.beta
    coverage = f"L - (1 - confidence) >= {target:.6g}"
    if not grouped and broken(calibrations[0]):
        coverage += " (the release's coverage does not hold: L = 0)"
    low = [e.group for e in calibrations if marginal(e) < target]
    unsure = [e.group for e in calibrations if e.certificate.confidence < needed]
    unreachable = [e.group for e in calibrations if not e.certificate.level_reachable]
    if spent is None:
        spent = (privacy.epsilon, privacy.delta) if privacy.holds else (math.inf, 1.0)
    return (
        _at_least(
            "coverage",
            coverage + _groups(grouped, low, "fails"),
            min(marginal(e) for e in calibrations),
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
            "the mechanism can reach the nominal level at this size (whether the release "
            "is informative is recorded apart)" + _groups(grouped, unreachable, "unreachable"),
            None,
            None,
            None,
            not unreachable,
        ),
        _at_most("epsilon_train", "eps_train", training.epsilon, contract.max_epsilon_train),
        _at_most("delta_train", "delta_train", training.delta, contract.delta),
        _at_most("epsilon_cal", "eps_cal", spent[0], contract.max_epsilon_cal),
        _at_most("delta_cal", "delta_cal", spent[1], contract.delta),
    )


def decision_of(contract, clauses: tuple[Clause, ...]) -> str:
    """``"feasible"``, ``"infeasible"``, or ``"unchecked"`` when there is no contract."""
    if contract is None:
        return "unchecked"
    return "feasible" if all(clause.satisfied for clause in clauses) else "infeasible"
