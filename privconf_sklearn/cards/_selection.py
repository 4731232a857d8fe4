"""Rules of the certificate-aware search, on card records only (the paper's Sec. 4).

The search and the verifier share these functions, so that a verifier can recompute
from a card alone which configurations were formally feasible, which were dominated
and what the evaluated calibrations cost.

Dominance. Two formally feasible configurations are compared only when they agree on
everything except the nominal coverage and the calibration budget (task, mechanism and
its other parameters, score, model, training privacy, calibration size). Within such a
group, ``c`` dominates ``c'`` when ``gamma(c) <= gamma(c')``, ``eps_cal(c) >=
eps_cal(c')`` and ``delta_cal(c) >= delta_cal(c')``: a lower nominal level gives a lower
threshold, a larger budget (within the contract) less noise (for DP-APS the paper's
Remark 5.3). Calibration size is a cost, never compared. Exact ties keep the first
configuration of the grid.
"""

from __future__ import annotations

import math
from typing import cast

from ._codec import canonical_bytes
from ._contract import Clause, Contract, check_contract
from ._records import Candidate

__all__ = [
    "DOMINANCE_RULE",
    "best_attempted",
    "clauses_of",
    "composed_spend",
    "coverage_margin",
    "non_dominated",
    "priority_order",
]

#: Mechanism parameters that set the calibration budget (left out of the group key).
PRIVACY_PARAMETERS = ("epsilon", "rho", "delta")

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


def clauses_of(contract: Contract, candidate: Candidate) -> tuple[Clause, ...]:
    """Eq. (3) for one grid configuration, from its own (planned) guarantees."""
    return check_contract(
        contract, candidate.training, candidate.calibration, candidate.certificate
    )


def coverage_margin(contract: Contract, candidate: Candidate) -> float:
    """``L_marg - gamma_target`` of one grid configuration."""
    return cast(float, clauses_of(contract, candidate)[0].margin)


def _group_key(candidate: Candidate) -> bytes:
    configuration = candidate.configuration
    params = configuration.mechanism.params
    score = configuration.conformity_score
    return canonical_bytes(
        {
            "task": configuration.task,
            "mechanism": configuration.mechanism.name,
            "params": {k: v for k, v in params.items() if k not in PRIVACY_PARAMETERS},
            "score": None if score is None else [score.name, score.params],
            "estimator": configuration.estimator,
            "training": [candidate.training.epsilon, candidate.training.delta],
            "n_samples": configuration.n_samples,
        }
    )


def _dominates(a: Candidate, b: Candidate) -> bool:
    gamma_a, gamma_b = a.configuration.nominal_coverage, b.configuration.nominal_coverage
    cal_a, cal_b = a.calibration, b.calibration
    no_worse = gamma_a <= gamma_b and cal_a.epsilon >= cal_b.epsilon and cal_a.delta >= cal_b.delta
    strictly = gamma_a < gamma_b or cal_a.epsilon > cal_b.epsilon or cal_a.delta > cal_b.delta
    return no_worse and (strictly or a.index < b.index)


def non_dominated(candidates) -> dict[int, int | None]:
    """For every formally feasible candidate: None if kept, else the index dominating it."""
    groups: dict[bytes, list[Candidate]] = {}
    for candidate in candidates:
        if candidate.formally_feasible:
            groups.setdefault(_group_key(candidate), []).append(candidate)
    return {
        c.index: next((o.index for o in group if o is not c and _dominates(o, c)), None)
        for group in groups.values()
        for c in group
    }


def priority_order(candidates: list[Candidate]) -> list[Candidate]:
    """Evaluation order of the kept candidates (see :data:`DOMINANCE_RULE`)."""
    return sorted(
        candidates,
        key=lambda c: (
            c.configuration.nominal_coverage,
            -c.calibration.epsilon,
            -c.configuration.n_samples,
            c.index,
        ),
    )


def best_attempted(contract: Contract, candidates) -> Candidate:
    """The configuration an infeasibility card reports (most clauses met, then margin)."""

    def key(candidate: Candidate):
        met = sum(c.satisfied for c in clauses_of(contract, candidate))
        return (-met, -coverage_margin(contract, candidate), candidate.index)

    return min(candidates, key=key)


def composed_spend(guarantees, split: str) -> tuple[float, float]:
    """Calibration (epsilon, delta) of several releases on the same calibration set.

    ``"disjoint"`` rows: parallel composition, the maximum. ``"shared"``: basic
    sequential composition, the sums (Dwork & Roth 2014, Thm. 3.16). A guarantee that
    does not hold counts as ``(inf, 1)``.
    """
    pairs = [(g.epsilon, g.delta) if g.holds else (math.inf, 1.0) for g in guarantees]
    if not pairs:
        return 0.0, 0.0
    if split == "disjoint":
        return max(p[0] for p in pairs), max(p[1] for p in pairs)
    return math.fsum(p[0] for p in pairs), min(1.0, math.fsum(p[1] for p in pairs))
