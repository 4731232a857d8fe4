"""The selection rules of a certificate-aware search (the contract-cards paper, Sec. 4).

The rules read card records only (public ``n``, ``alpha``, mechanism parameters and
certificates), so the search (:mod:`privconf_sklearn.model_selection`) applies them and the
verifier recomputes them. Dominance (the paper's Remark 5.3): among
formally feasible configurations equal in all but nominal coverage and calibration budget,
``c`` dominates ``c'`` when ``gamma(c) <= gamma(c')``, ``eps_cal(c) >= eps_cal(c')`` and
``delta_cal(c) >= delta_cal(c')``; exact ties keep the first configuration of the grid.
"""

from __future__ import annotations

import math

from ._codec import canonical_bytes
from ._contract import Contract, calibration_spend, check_contract
from ._records import CalibrationEntry, Candidate, Selection

__all__ = [
    "KEPT",
    "best_attempted",
    "candidate_entry",
    "clauses_of",
    "compose",
    "composed_spend",
    "contract_spend",
    "evaluation_priority",
    "formal_statuses",
    "selection_of",
]

#: Mechanism parameters that set the calibration budget (left out of the group key).
PRIVACY_PARAMETERS = ("epsilon", "rho", "delta")
#: Statuses of the formally feasible, non-dominated configurations.
KEPT = ("skipped", "evaluated", "chosen")

DOMINANCE_RULE = (
    "Formal screening first: Eq. (3) on every configuration's certificate, no data read. "
    "Among feasible configurations that differ only in nominal coverage and calibration "
    "budget, keep those not dominated by one with lower-or-equal nominal coverage and "
    "larger-or-equal (epsilon_cal, delta_cal) (contract-cards paper, Remark 5.3); calibration "
    "sizes are not compared. Evaluate the kept ones in order of nominal coverage (ascending), "
    "epsilon_cal (descending), calibration size (descending); choose the evaluated one "
    "with the smallest mean set size (mean width for regression) on the evaluation data, "
    "or the first in that order when no evaluation data is given."
)


def candidate_entry(candidate: Candidate) -> CalibrationEntry:
    """The calibration entry of a grid configuration before calibration (no release)."""
    return CalibrationEntry(None, candidate.configuration.n_samples, candidate.certificate, None)


def clauses_of(contract: Contract, candidate: Candidate):
    """Eq. (3) for one grid configuration, from its own (planned) guarantees."""
    return check_contract(
        contract, candidate.training, candidate.calibration, [candidate_entry(candidate)]
    )


def _group_key(candidate: Candidate) -> bytes:
    """All a configuration shares with those it is compared with (Remark 5.3)."""
    config, training, score = candidate.configuration, candidate.training, None
    if config.conformity_score is not None:
        score = [config.conformity_score.name, config.conformity_score.params]
    params = {k: v for k, v in config.mechanism.params.items() if k not in PRIVACY_PARAMETERS}
    shared = [config.task, config.mechanism.name, params, score, config.estimator]
    return canonical_bytes([*shared, training.epsilon, training.delta, config.n_samples])


def _dominates(a: Candidate, b: Candidate) -> bool:
    gamma_a, gamma_b = a.configuration.nominal_coverage, b.configuration.nominal_coverage
    cal_a, cal_b = a.calibration, b.calibration
    no_worse = gamma_a <= gamma_b and cal_a.epsilon >= cal_b.epsilon and cal_a.delta >= cal_b.delta
    strictly = gamma_a < gamma_b or cal_a.epsilon > cal_b.epsilon or cal_a.delta > cal_b.delta
    return no_worse and (strictly or a.index < b.index)


def formal_statuses(candidates) -> dict[int, str | None]:
    """``"infeasible"``, ``"dominated by #k"`` or None (kept) for every candidate."""
    groups: dict[bytes, list[Candidate]] = {}
    for candidate in candidates:
        if candidate.formally_feasible:
            groups.setdefault(_group_key(candidate), []).append(candidate)
    statuses: dict[int, str | None] = {c.index: "infeasible" for c in candidates}
    for group in groups.values():
        for c in group:
            winner = next((o.index for o in group if o is not c and _dominates(o, c)), None)
            statuses[c.index] = None if winner is None else f"dominated by #{winner}"
    return statuses


def best_attempted(contract: Contract, candidates) -> Candidate:
    """The configuration an infeasibility card reports (most clauses met, then margin)."""

    def key(candidate: Candidate):
        clauses = clauses_of(contract, candidate)
        return (-sum(c.satisfied for c in clauses), -clauses[0].margin, candidate.index)

    return min(candidates, key=key)


def composed_spend(guarantees, split: str) -> tuple[float, float]:
    """Calibration (epsilon, delta) of several releases on the same calibration set.

    ``"disjoint"`` rows: parallel composition, the maxima; ``"shared"``: basic sequential
    composition, the sums (Dwork & Roth 2014, Thm. 3.16). One not holding is ``(inf, 1)``.
    """
    spends = [(g.epsilon, g.delta) if g.holds else (math.inf, 1.0) for g in guarantees]
    return compose(spends, split)


def compose(spends, split: str) -> tuple[float, float]:
    """:func:`composed_spend` of ``(epsilon, delta)`` pairs (a ledger's records)."""
    epsilons, deltas = [e for e, _ in spends], [d for _, d in spends]
    if split == "disjoint":
        return max(epsilons, default=0.0), max(deltas, default=0.0)
    return math.fsum(epsilons), min(1.0, math.fsum(deltas))


def contract_spend(contract: Contract, selection: Selection) -> tuple[float, float]:
    """A search's composed calibration cost under the contract's adjacency.

    Every evaluated configuration's guarantee is restated under ``contract.adjacency``
    (:func:`~._contract.calibration_spend`) before the composition
    ``selection.spent_*`` records under the estimator's own adjacency.
    """
    evaluated = [c.calibration for c in selection.candidates if c.status in ("evaluated", "chosen")]
    spends = [calibration_spend(contract, guarantee) for guarantee in evaluated]
    return compose(spends, selection.calibration_split)


def selection_of(contract: Contract, candidates, split: str) -> Selection:
    """The selection summary of screened (and perhaps evaluated) candidates."""
    evaluated = [c for c in candidates if c.status in ("evaluated", "chosen")]
    chosen = [c.index for c in candidates if c.status == "chosen"]
    spent = composed_spend([c.calibration for c in evaluated], split)
    return Selection(
        rule=DOMINANCE_RULE,
        calibration_split=split,
        n_checked=len(candidates),
        n_formally_feasible=sum(c.formally_feasible for c in candidates),
        n_selected=sum(c.status in KEPT for c in candidates),
        n_evaluated=len(evaluated),
        chosen_index=chosen[0] if chosen else None,
        best_coverage_margin=max(clauses_of(contract, c)[0].margin for c in candidates),
        spent_epsilon_cal=float(spent[0]),
        spent_delta_cal=float(spent[1]),
        candidates=tuple(candidates),
    )


def evaluation_priority(candidate: Candidate) -> tuple:
    """The evaluation order :data:`DOMINANCE_RULE` states (a sort key).

    Nominal coverage up, then ``epsilon_cal`` and calibration size down, then grid order.
    """
    configuration = candidate.configuration
    return (
        configuration.nominal_coverage,
        -candidate.calibration.epsilon,
        -configuration.n_samples,
        candidate.index,
    )
