"""Contracts and the formal feasibility predicate (the contract-cards paper, Eq. (3)).

A contract ``kappa = (gamma_target, eps_train_max, eps_cal_max, beta)`` (plus a ``delta``
bound, which the paper fixes implicitly) is met by a configuration ``c`` when

``L(c) >= gamma_target  and  eps_train <= eps_train_max  and  eps_cal <= eps_cal_max``
(Eq. (3)).

Eq. (3) is stated for a marginal coverage bound and pure calibration privacy. The
library's mechanisms also give bounds that hold only with probability ``1 - b`` over
the noise, (epsilon, delta) guarantees, local DP, and guarantees that were broken by a
data-dependent choice. :func:`check_contract` decides each case conservatively, one
named clause at a time, so a verifier can say which clause failed and by how much:

``coverage``
    ``L_marg >= gamma_target`` with ``L_marg = L - (1 - confidence)``. A bound ``L``
    that holds with probability ``confidence`` over the noise gives the marginal bound
    ``confidence * L >= L - (1 - confidence)`` (``L <= 1``), the same union-bound step
    as the paper's Theorem 5.1 (``gamma - beta``). A release whose coverage guarantee
    does not hold (``Release.coverage_holds`` False) certifies nothing: ``L_marg = 0``.
``lower_bound_confidence``
    ``confidence >= 1 - beta``: the contract's ``beta`` is the largest failure
    probability a coverage certificate may have.
``level_reachable``
    The mechanism can reach the nominal level with this calibration size. Otherwise it
    releases the top of the score range (all labels, the widest interval): coverage 1,
    trivially, which certifies nothing about the predictor the contract is about.
``epsilon_train`` / ``delta_train``
    The training guarantee against ``max_epsilon_train`` and ``delta``. A model whose
    privacy is unknown counts as ``epsilon = inf``.
``epsilon_cal`` / ``delta_cal``
    The calibration guarantee against ``max_epsilon_cal`` and ``delta``: the epsilon of
    pure DP; the (epsilon, delta) conversion of zCDP; for local DP the per-agent
    epsilon (each record lives at one agent, so the server's output is epsilon-DP in
    the calibration set by post-processing). A guarantee that does not hold (or
    ``notion="none"``) counts as ``(inf, 1)``. For a certificate-aware search the
    composed cost of every calibration it ran is used, not the selected one's alone.

Margins are signed slack, ``>= 0`` exactly when the clause holds: ``L_marg -
gamma_target``, ``confidence - (1 - beta)`` and ``bound - value`` for budgets
(``+inf`` when the bound is unconstrained, ``-inf`` for an infinite value).

A release at the top of the range that still meets Eq. (3) (noise that never crossed
the target) is feasible as the paper defines it, but trivial: cards show
``Release.informative`` next to the decision.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import ClassVar

from .._validation import Interval, NoneValue, Options
from ._records import BUDGET, FLAG, SIGNED, TEXT, check_fields, marginal_lower_bound

__all__ = [
    "CLAUSES",
    "Clause",
    "Contract",
    "Coordinates",
    "card_coordinates",
    "check_contract",
    "decision_of",
]

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
class Contract:
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

    def __post_init__(self):
        check_fields(self)


@dataclass(frozen=True)
class Coordinates:
    """The configuration's side of Eq. (3), as recorded on a card.

    Parameters
    ----------
    coverage_lower_bound : float
        The mechanism's ``L(c)``.
    lower_bound_confidence : float
        Probability over the noise with which ``L(c)`` holds (1: marginal).
    level_reachable : bool
        False when the mechanism would release the trivial top-of-range threshold.
    epsilon_train, delta_train : float
        Training guarantee (``inf``, 0 when unknown).
    epsilon_cal, delta_cal : float
        Calibration guarantee, composed over a search's calibrations when there was one.
    calibration_holds : bool
        Whether the calibration guarantee holds (False: counted as ``(inf, 1)``).
    coverage_holds : bool
        Whether the release's coverage guarantee holds (False: ``L_marg = 0``).
    """

    coverage_lower_bound: float
    lower_bound_confidence: float
    level_reachable: bool
    epsilon_train: float
    delta_train: float
    epsilon_cal: float
    delta_cal: float
    calibration_holds: bool = True
    coverage_holds: bool = True


@dataclass(frozen=True)
class Clause:
    """One conjunct of the feasibility predicate, evaluated.

    Parameters
    ----------
    name : str
        One of :data:`CLAUSES`.
    requirement : str
        The inequality checked, in words and numbers.
    value : float or None
        The configuration's coordinate (None for the boolean ``level_reachable``).
    bound : float or None
        The contract's bound (None for ``level_reachable``).
    margin : float or None
        Signed slack, ``>= 0`` exactly when satisfied (None for ``level_reachable``).
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

    def __post_init__(self):
        check_fields(self)


def _budget_clause(name: str, value: float, bound: float, symbol: str) -> Clause:
    margin = math.inf if math.isinf(bound) else bound - value
    return Clause(
        name=name,
        requirement=f"{symbol} <= {bound:.6g}",
        value=value,
        bound=bound,
        margin=margin,
        satisfied=value <= bound,
    )


def check_contract(contract: Contract, coordinates: Coordinates) -> tuple[Clause, ...]:
    """Evaluate every clause of the (conservatively extended) Eq. (3).

    Parameters
    ----------
    contract : Contract
        The requirements.
    coordinates : Coordinates
        The configuration's certificate and privacy coordinates.

    Returns
    -------
    tuple of Clause
        In the order of :data:`CLAUSES`. The configuration is formally feasible iff
        every clause is satisfied (the paper's Observation 4.1).
    """
    c = coordinates
    l_marg = marginal_lower_bound(c.coverage_lower_bound, c.lower_bound_confidence)
    requirement = f"L - (1 - confidence) >= {contract.target_coverage:.6g}"
    if not c.coverage_holds:
        l_marg, requirement = 0.0, requirement + " (the release's coverage does not hold: L = 0)"
    needed = 1.0 - contract.beta
    calibration = (c.epsilon_cal, c.delta_cal) if c.calibration_holds else (math.inf, 1.0)
    return (
        Clause(
            "coverage",
            requirement,
            l_marg,
            contract.target_coverage,
            l_marg - contract.target_coverage,
            l_marg >= contract.target_coverage,
        ),
        Clause(
            "lower_bound_confidence",
            f"confidence >= 1 - beta = {needed:.6g}",
            c.lower_bound_confidence,
            needed,
            c.lower_bound_confidence - needed,
            c.lower_bound_confidence >= needed,
        ),
        Clause(
            "level_reachable",
            "the mechanism reaches the nominal level (no trivial top-of-range release)",
            None,
            None,
            None,
            c.level_reachable,
        ),
        _budget_clause("epsilon_train", c.epsilon_train, contract.max_epsilon_train, "eps_train"),
        _budget_clause("delta_train", c.delta_train, contract.delta, "delta_train"),
        _budget_clause("epsilon_cal", calibration[0], contract.max_epsilon_cal, "eps_cal"),
        _budget_clause("delta_cal", calibration[1], contract.delta, "delta_cal"),
    )


def card_coordinates(training, calibration_privacy, certificate, selection, release=None):
    """The Eq. (3) coordinates a card's recorded fields give.

    For a search that calibrated something, the calibration privacy is what the whole
    search spent (``selection.spent_*``), since the selection depends on every
    evaluated calibration.
    """
    if selection is not None and selection.n_evaluated > 0:
        epsilon_cal, delta_cal = selection.spent_epsilon_cal, selection.spent_delta_cal
        holds = True
    else:
        epsilon_cal, delta_cal = calibration_privacy.epsilon, calibration_privacy.delta
        holds = calibration_privacy.holds
    return Coordinates(
        coverage_lower_bound=certificate.lower_bound,
        lower_bound_confidence=certificate.confidence,
        level_reachable=certificate.level_reachable,
        epsilon_train=training.epsilon,
        delta_train=training.delta,
        epsilon_cal=epsilon_cal,
        delta_cal=delta_cal,
        calibration_holds=holds,
        coverage_holds=release is None or release.coverage_holds,
    )


def decision_of(contract: Contract | None, clauses: tuple[Clause, ...]) -> str:
    """``"feasible"``, ``"infeasible"``, or ``"unchecked"`` when there is no contract."""
    if contract is None:
        return "unchecked"
    return "feasible" if all(clause.satisfied for clause in clauses) else "infeasible"
