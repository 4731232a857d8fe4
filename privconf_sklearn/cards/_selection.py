"""Rules of the certificate-aware search, on card records only (the paper's Sec. 4).

The search and the verifier share these functions, so that a verifier can recompute
from a card alone which configurations were formally feasible, which were dominated
and what the evaluated calibrations cost.

Dominance. Two formally feasible configurations are compared only when they agree on
everything except the nominal coverage and the calibration budget: task, mechanism
class and its other parameters, score, model and its training privacy, calibration
size. Within such a group, ``c`` dominates ``c'`` when ``gamma(c) <= gamma(c')``,
``eps_cal(c) >= eps_cal(c')`` and ``delta_cal(c) >= delta_cal(c')``: a lower nominal
level gives a lower threshold, and a larger budget (still within the contract) less
noise. For DP-APS this is the paper's Remark 5.3 (the certificate width is
non-increasing in ``eps_cal``); for the other mechanisms the noise scale likewise decreases with the
budget. Calibration size is a cost (rows held out), so sizes are never compared.
Exact ties keep the first configuration of the grid.
"""

from __future__ import annotations

import math

from ..privacy import PrivacyGuarantee
from ._codec import canonical_bytes
from ._contract import Contract, card_coordinates, check_contract
from ._records import Candidate, Certificate, TrainingPrivacy

__all__ = [
    "DOMINANCE_RULE",
    "PRIVACY_PARAMETERS",
    "best_attempted",
    "candidate_clauses",
    "composed_spend",
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


def candidate_clauses(
    contract: Contract,
    training: TrainingPrivacy,
    calibration: PrivacyGuarantee,
    certificate: Certificate,
):
    """Eq. (3) for one grid configuration, from its own (planned) guarantees."""
    return check_contract(contract, card_coordinates(training, calibration, certificate, None))


def _group_key(candidate: Candidate) -> bytes:
    configuration = candidate.configuration
    mechanism_params = {
        key: value
        for key, value in configuration.mechanism.params.items()
        if key not in PRIVACY_PARAMETERS
    }
    return canonical_bytes(
        {
            "task": configuration.task,
            "mechanism": configuration.mechanism.name,
            "mechanism_params": mechanism_params,
            "score": None
            if configuration.conformity_score is None
            else [configuration.conformity_score.name, configuration.conformity_score.params],
            "estimator": configuration.estimator,
            "training": [candidate.training.epsilon, candidate.training.delta],
            "n_samples": configuration.n_samples,
        }
    )


def _dominates(a: Candidate, b: Candidate) -> bool:
    gamma_a, gamma_b = a.configuration.nominal_coverage, b.configuration.nominal_coverage
    eps_a, eps_b = a.calibration.epsilon, b.calibration.epsilon
    delta_a, delta_b = a.calibration.delta, b.calibration.delta
    no_worse = gamma_a <= gamma_b and eps_a >= eps_b and delta_a >= delta_b
    if not no_worse:
        return False
    strictly = gamma_a < gamma_b or eps_a > eps_b or delta_a > delta_b
    return strictly or a.index < b.index


def non_dominated(candidates: tuple[Candidate, ...] | list[Candidate]) -> dict[int, int | None]:
    """For every formally feasible candidate: None if kept, else the index dominating it."""
    feasible = [c for c in candidates if c.formally_feasible]
    groups: dict[bytes, list[Candidate]] = {}
    for candidate in feasible:
        groups.setdefault(_group_key(candidate), []).append(candidate)
    result: dict[int, int | None] = {}
    for members in groups.values():
        for candidate in members:
            winner = next(
                (o.index for o in members if o is not candidate and _dominates(o, candidate)),
                None,
            )
            result[candidate.index] = winner
    return result


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
    """The configuration an infeasibility card reports.

    The one satisfying the most clauses of Eq. (3); ties go to the largest coverage
    margin, then to the first in the grid.
    """

    def key(candidate: Candidate):
        clauses = candidate_clauses(
            contract, candidate.training, candidate.calibration, candidate.certificate
        )
        return (-sum(c.satisfied for c in clauses), -clauses[0].margin, candidate.index)

    return min(candidates, key=key)


def composed_spend(guarantees: list[PrivacyGuarantee], split: str) -> tuple[float, float]:
    """Calibration (epsilon, delta) of several releases on the same calibration set.

    ``"disjoint"``: each record is in one calibration only, so parallel composition
    gives the maximum. ``"shared"``: basic sequential composition gives the sums
    (Dwork & Roth 2014, Thm. 3.16). A guarantee that does not hold counts as
    ``(inf, 1)``.
    """
    pairs = [(g.epsilon, g.delta) if g.holds else (math.inf, 1.0) for g in guarantees]
    if not pairs:
        return 0.0, 0.0
    if split == "disjoint":
        return max(p[0] for p in pairs), max(p[1] for p in pairs)
    return math.fsum(p[0] for p in pairs), min(1.0, math.fsum(p[1] for p in pairs))
