"""Contracts and the formal feasibility predicate (paper 003 Sec. 3-4, Eq. (3)).

A contract ``kappa = (gamma_target, eps_train_max, eps_cal_max, beta)`` (plus a ``delta``
bound, which the paper fixes implicitly) is met by a configuration ``c`` when

``L(c) >= gamma_target  and  eps_train <= eps_train_max  and  eps_cal <= eps_cal_max``
(Eq. (3)).

Eq. (3) is stated for a marginal coverage bound and pure calibration privacy. The
library's mechanisms also give bounds that hold only with probability ``1 - b`` over
the noise, (epsilon, delta) guarantees, local DP and guarantees that were broken by a
data-dependent choice. :func:`check_contract` decides each case conservatively, one
named clause at a time, so a verifier can say which clause failed and by how much:

``coverage``
    ``L_marg >= gamma_target`` with ``L_marg = L - (1 - confidence)``. A bound ``L``
    that holds with probability ``confidence`` over the noise gives the marginal bound
    ``confidence * L >= L - (1 - confidence)`` (``L <= 1``), the same union-bound step
    as Theorem 5.1 of paper 003 (``gamma - beta``). For a marginal bound
    (``confidence = 1``) ``L_marg = L``.
``lower_bound_confidence``
    ``confidence >= 1 - beta``: the contract's ``beta`` is the largest failure
    probability a coverage certificate may have (paper 003 Sec. 3).
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
"""

from __future__ import annotations

import math
import numbers
from dataclasses import dataclass

__all__ = [
    "CLAUSES",
    "Clause",
    "Contract",
    "Coordinates",
    "card_coordinates",
    "check_contract",
    "decision_of",
    "marginal_lower_bound",
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


def _check_real(value, name: str, *, low: float, high: float, high_open: bool) -> float:
    if not isinstance(value, numbers.Real) or isinstance(value, bool) or math.isnan(value):
        raise ValueError(f"{name} must be a real number; got {value!r}.")
    value = float(value)
    above = value >= high if high_open else value > high
    if value < low or above:
        closing = ")" if high_open else "]"
        raise ValueError(f"{name} must lie in [{low:g}, {high:g}{closing}; got {value!r}.")
    return value


@dataclass(frozen=True)
class Contract:
    """Coverage and privacy requirements a deployment imposes (paper 003 Sec. 3).

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

    def __post_init__(self):
        target = _check_real(self.target_coverage, "target_coverage", low=0, high=1, high_open=True)
        if target == 0.0:
            raise ValueError("target_coverage must be > 0; got 0.0.")
        checked = {
            "target_coverage": target,
            "max_epsilon_train": _check_real(
                self.max_epsilon_train, "max_epsilon_train", low=0, high=math.inf, high_open=False
            ),
            "max_epsilon_cal": _check_real(
                self.max_epsilon_cal, "max_epsilon_cal", low=0, high=math.inf, high_open=False
            ),
            "beta": _check_real(self.beta, "beta", low=0, high=1, high_open=True),
            "delta": _check_real(self.delta, "delta", low=0, high=1, high_open=True),
        }
        for name, value in checked.items():
            object.__setattr__(self, name, value)


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
    """

    coverage_lower_bound: float
    lower_bound_confidence: float
    level_reachable: bool
    epsilon_train: float
    delta_train: float
    epsilon_cal: float
    delta_cal: float
    calibration_holds: bool = True


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


def marginal_lower_bound(lower_bound: float, confidence: float) -> float:
    """``L - (1 - confidence)``, floored at 0: a marginal bound from a high-probability one."""
    if confidence >= 1.0:
        return float(lower_bound)
    return max(0.0, float(lower_bound) - (1.0 - float(confidence)))


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
    """Evaluate every clause of the (conservatively extended) Eq. (3) of paper 003.

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
        every clause is satisfied (Observation 4.1).
    """
    c = coordinates
    l_marg = marginal_lower_bound(c.coverage_lower_bound, c.lower_bound_confidence)
    coverage = Clause(
        name="coverage",
        requirement=f"L - (1 - confidence) >= {contract.target_coverage:.6g}",
        value=l_marg,
        bound=contract.target_coverage,
        margin=l_marg - contract.target_coverage,
        satisfied=l_marg >= contract.target_coverage,
    )
    needed = 1.0 - contract.beta
    confidence = Clause(
        name="lower_bound_confidence",
        requirement=f"confidence >= 1 - beta = {needed:.6g}",
        value=float(c.lower_bound_confidence),
        bound=needed,
        margin=float(c.lower_bound_confidence) - needed,
        satisfied=c.lower_bound_confidence >= needed,
    )
    reachable = Clause(
        name="level_reachable",
        requirement="the mechanism reaches the nominal level (no trivial top-of-range release)",
        value=None,
        bound=None,
        margin=None,
        satisfied=bool(c.level_reachable),
    )
    if c.calibration_holds:
        epsilon_cal, delta_cal = float(c.epsilon_cal), float(c.delta_cal)
    else:
        epsilon_cal, delta_cal = math.inf, 1.0
    return (
        coverage,
        confidence,
        reachable,
        _budget_clause(
            "epsilon_train", float(c.epsilon_train), contract.max_epsilon_train, "eps_train"
        ),
        _budget_clause("delta_train", float(c.delta_train), contract.delta, "delta_train"),
        _budget_clause("epsilon_cal", epsilon_cal, contract.max_epsilon_cal, "eps_cal"),
        _budget_clause("delta_cal", delta_cal, contract.delta, "delta_cal"),
    )


def card_coordinates(training, calibration_privacy, certificate, selection) -> Coordinates:
    """The Eq. (3) coordinates a card's recorded fields give.

    Parameters
    ----------
    training : TrainingPrivacy
        Training privacy record.
    calibration_privacy : PrivacyGuarantee
        Guarantee of the calibration on the card.
    certificate : Certificate
        Coverage certificate record.
    selection : Selection or None
        Selection summary of a search.

    For a search that calibrated something, the calibration privacy is what the whole
    search spent (``selection.spent_*``), since the selection depends on every
    evaluated calibration.
    """
    if selection is not None and selection.n_evaluated > 0:
        epsilon_cal, delta_cal, holds = (
            selection.spent_epsilon_cal,
            selection.spent_delta_cal,
            True,
        )
    else:
        epsilon_cal, delta_cal, holds = (
            calibration_privacy.epsilon,
            calibration_privacy.delta,
            calibration_privacy.holds,
        )
    return Coordinates(
        coverage_lower_bound=certificate.lower_bound,
        lower_bound_confidence=certificate.confidence,
        level_reachable=certificate.level_reachable,
        epsilon_train=training.epsilon,
        delta_train=training.delta,
        epsilon_cal=epsilon_cal,
        delta_cal=delta_cal,
        calibration_holds=holds,
    )


def decision_of(contract: Contract | None, clauses: tuple[Clause, ...]) -> str:
    """``"feasible"``, ``"infeasible"``, or ``"unchecked"`` when there is no contract."""
    if contract is None:
        return "unchecked"
    return "feasible" if all(clause.satisfied for clause in clauses) else "infeasible"
