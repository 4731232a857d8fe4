"""Contracts and the formal feasibility predicate (the contract-cards paper, Eq. (3)).

A contract ``(gamma_target, eps_train_max, eps_cal_max, beta)`` (plus a ``delta`` bound)
is met by a configuration ``c`` when ``L(c) >= gamma_target``, ``eps_train <=
eps_train_max`` and ``eps_cal <= eps_cal_max`` (Eq. (3)). Eq. (3) is stated for a
marginal coverage bound and pure calibration privacy; :func:`check_contract` decides
the library's other cases conservatively, one named clause at a time (the user guide
defines each clause). Margins are signed slack, ``>= 0`` exactly when the clause holds.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import ClassVar

from .._validation import Interval, NoneValue, Options
from ._records import BUDGET, FLAG, SIGNED, TEXT, _Checked, marginal_lower_bound

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


@dataclass(frozen=True)
class Contract(_Checked):
    """Coverage and privacy requirements a deployment imposes (the paper's Sec. 3).

    Parameters
    ----------
    target_coverage : float
        ``gamma_target`` in (0, 1): the certified marginal coverage required.
    max_epsilon_train : float
        Largest training privacy loss allowed, >= 0 (``inf``: unconstrained).
    max_epsilon_cal : float
        Largest calibration privacy loss allowed, >= 0 (``inf``: unconstrained).
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

    target_coverage: float
    max_epsilon_train: float
    max_epsilon_cal: float
    beta: float
    delta: float = 0.0
    _constraints: ClassVar = {
        "target_coverage": [Interval("real", 0, 1, closed="neither")],
        "max_epsilon_train": BUDGET,
        "max_epsilon_cal": BUDGET,
        "beta": [Interval("real", 0, 1, closed="left")],
        "delta": [Interval("real", 0, 1, closed="left")],
    }


@dataclass(frozen=True)
class Clause(_Checked):
    """One conjunct of the feasibility predicate, evaluated.

    Parameters
    ----------
    name : str
        One of :data:`CLAUSES`.
    requirement : str
        The inequality checked, in words and numbers.
    value, bound, margin : float or None
        The configuration's coordinate, the contract's bound and the signed slack
        (``>= 0`` exactly when satisfied); None for the boolean ``level_reachable``.
    satisfied : bool
        Whether the clause holds.
    """

    name: str
    requirement: str
    value: float | None
    bound: float | None
    margin: float | None
    satisfied: bool
    _constraints: ClassVar = {
        "name": [Options(*CLAUSES)],
        "requirement": TEXT,
        "value": [NoneValue(), *BUDGET],
        "bound": [NoneValue(), *BUDGET],
        "margin": [NoneValue(), *SIGNED],
        "satisfied": FLAG,
    }


def _at_least(name: str, requirement: str, value: float, bound: float) -> Clause:
    return Clause(name, requirement, value, bound, value - bound, value >= bound)


def _at_most(name: str, symbol: str, value: float, bound: float) -> Clause:
    margin = math.inf if math.isinf(bound) else bound - value
    return Clause(name, f"{symbol} <= {bound:.6g}", value, bound, margin, value <= bound)


def check_contract(
    contract: Contract, training, privacy, certificate, selection=None, release=None
) -> tuple[Clause, ...]:
    """Evaluate every clause of the (conservatively extended) Eq. (3).

    Parameters
    ----------
    contract : Contract
        The requirements.
    training : TrainingPrivacy
        ``eps_train`` (``inf`` when unknown).
    privacy : PrivacyGuarantee
        The calibration guarantee; one that does not hold counts as ``(inf, 1)``.
    certificate : Certificate
        ``L(c)``; ``L - (1 - confidence)`` is the marginal bound checked.
    selection : Selection or None, default=None
        A search that calibrated something is charged what it spent in total.
    release : Release or None, default=None
        A release whose coverage does not hold certifies nothing (``L = 0``).

    Returns
    -------
    tuple of Clause
        In the order of :data:`CLAUSES`; feasible iff all hold (Observation 4.1).
    """
    l_marg = marginal_lower_bound(certificate.lower_bound, certificate.confidence)
    coverage = f"L - (1 - confidence) >= {contract.target_coverage:.6g}"
    if release is not None and not release.coverage_holds:
        l_marg, coverage = 0.0, coverage + " (the release's coverage does not hold: L = 0)"
    if selection is not None and selection.n_evaluated > 0:
        cal = (selection.spent_epsilon_cal, selection.spent_delta_cal)
    else:
        cal = (privacy.epsilon, privacy.delta) if privacy.holds else (math.inf, 1.0)
    needed = 1.0 - contract.beta
    return (
        _at_least("coverage", coverage, l_marg, contract.target_coverage),
        _at_least(
            "lower_bound_confidence",
            f"confidence >= 1 - beta = {needed:.6g}",
            certificate.confidence,
            needed,
        ),
        Clause(
            "level_reachable",
            "the mechanism reaches the nominal level (no trivial top-of-range release)",
            None,
            None,
            None,
            certificate.level_reachable,
        ),
        _at_most("epsilon_train", "eps_train", training.epsilon, contract.max_epsilon_train),
        _at_most("delta_train", "delta_train", training.delta, contract.delta),
        _at_most("epsilon_cal", "eps_cal", cal[0], contract.max_epsilon_cal),
        _at_most("delta_cal", "delta_cal", cal[1], contract.delta),
    )


def decision_of(contract: Contract | None, clauses: tuple[Clause, ...]) -> str:
    """``"feasible"``, ``"infeasible"``, or ``"unchecked"`` when there is no contract."""
    if contract is None:
        return "unchecked"
    return "feasible" if all(clause.satisfied for clause in clauses) else "infeasible"
