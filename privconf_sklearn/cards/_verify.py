"""Verify a contract card from its serialised form alone (paper 003 Observation 4.1).

The verifier trusts nothing on the card it can recompute:

1. the digest of the formal layer (any edit of the JSON after it was written);
2. ``L(c)``, its confidence and reachability, by rebuilding the mechanism from the
   recorded class and parameters and calling its ``coverage_certificate(n, alpha)``
   (public quantities only); the calibration guarantee, from its
   ``privacy_guarantee()`` (a card may record a *weaker* guarantee, e.g. one marked as
   not holding, never a stronger one);
3. every clause of Eq. (3), its margin and the decision, from the recorded contract
   and coordinates;
4. for a search, every grid configuration's certificate and feasibility, the counts,
   the dominance statuses, the reported failed margin and the composed privacy spend.

Training privacy and the released threshold cannot be recomputed without the model and
the data; the digest protects them against edits, not against a dishonest writer (an
unkeyed digest can be recomputed by whoever edits the card: sign the JSON file if that
matters).
"""

from __future__ import annotations

import functools
import importlib
import inspect
import math
import os
import pkgutil
from dataclasses import dataclass, fields
from typing import Any

from .. import mechanisms as _mechanisms
from ..mechanisms import QuantileMechanism
from ..privacy import ADJACENCIES, PrivacyGuarantee
from ._card import ContractCard
from ._contract import Clause, card_coordinates, check_contract, decision_of, marginal_lower_bound
from ._records import Certificate, ComponentSpec, Configuration
from ._selection import (
    DOMINANCE_RULE,
    best_attempted,
    candidate_clauses,
    composed_spend,
    non_dominated,
)
from ._serial import CardFormatError

__all__ = ["Verification", "verify_card"]

#: Relative tolerance when comparing a recomputed ``L(c)`` or privacy loss with the
#: recorded one (another platform's libm may differ in the last bits of a logarithm).
RTOL = 1e-12


@dataclass(frozen=True)
class Verification:
    """Outcome of :func:`verify_card`.

    Parameters
    ----------
    status : {"accepted", "rejected", "unchecked", "inconsistent"}
        ``accepted``: consistent and every clause of Eq. (3) holds. ``rejected``:
        consistent, but the configuration does not meet the contract (see
        ``failed_clauses``). ``unchecked``: consistent, no contract recorded.
        ``inconsistent``: unreadable, edited, or a recorded field disagrees with its
        recomputation (see ``problems``).
    clauses : tuple of Clause
        Eq. (3) recomputed from the card (with the recomputed certificate when the
        mechanism could be rebuilt).
    problems : tuple of str
        Every inconsistency found.
    """

    status: str
    clauses: tuple[Clause, ...]
    problems: tuple[str, ...]

    @property
    def accepted(self) -> bool:
        """True when the card is consistent and the contract is met."""
        return self.status == "accepted"

    @property
    def failed_clauses(self) -> tuple[Clause, ...]:
        """Recomputed clauses that do not hold."""
        return tuple(c for c in self.clauses if not c.satisfied)

    @property
    def exit_code(self) -> int:
        """0 accepted, 1 rejected or unchecked, 2 inconsistent (for the command line)."""
        return {"accepted": 0, "rejected": 1, "unchecked": 1}.get(self.status, 2)

    def report(self) -> str:
        """Human-readable summary: status, failed clauses with margins, problems."""
        lines = [f"card verification: {self.status.upper()}"]
        for clause in self.clauses:
            mark = "ok  " if clause.satisfied else "FAIL"
            margin = "" if clause.margin is None else f"  margin {clause.margin:+.6g}"
            lines.append(f"  [{mark}] {clause.name}: {clause.requirement}{margin}")
        lines.extend(f"  problem: {problem}" for problem in self.problems)
        return "\n".join(lines)


def _same(a: Any, b: Any) -> bool:
    """Exact equality, with NaN equal to NaN."""
    if isinstance(a, float) and isinstance(b, float) and math.isnan(a) and math.isnan(b):
        return True
    return a == b


def _same_clause(a: Clause, b: Clause) -> bool:
    return all(_same(getattr(a, f.name), getattr(b, f.name)) for f in fields(Clause))


def _close(a: float, b: float) -> bool:
    """Equal up to :data:`RTOL` (exactly equal for infinities and zeros)."""
    return a == b or math.isclose(a, b, rel_tol=RTOL, abs_tol=0.0)


def _rebuild(spec: ComponentSpec, registry: dict[str, type]) -> QuantileMechanism:
    cls = registry.get(spec.name)
    if cls is None:
        raise LookupError(
            f"mechanism {spec.name!r} is not a privconf_sklearn mechanism (pass "
            "mechanisms={name: class} to verify cards of other mechanisms)"
        )
    unrepresentable = [k for k, v in spec.params.items() if isinstance(v, dict) and "$repr" in v]
    if unrepresentable:
        raise LookupError(
            f"parameters {unrepresentable} of {spec.name} were not recorded as values"
        )
    return cls(**spec.params)


@functools.cache
def _package_mechanisms() -> dict[str, type]:
    """Every public mechanism class of privconf_sklearn.mechanisms, by name.

    Only this package's own modules are imported; a card cannot name code to load.
    """
    for module in pkgutil.iter_modules(_mechanisms.__path__):
        importlib.import_module(f"{_mechanisms.__name__}.{module.name}")
    registry, pending = {}, [QuantileMechanism]
    while pending:
        for cls in pending.pop().__subclasses__():
            pending.append(cls)
            if cls.__module__.startswith(_mechanisms.__name__) and not (
                cls.__name__.startswith("_") or inspect.isabstract(cls)
            ):
                registry[cls.__name__] = cls
    return registry


def _registry(extra: dict[str, type] | None) -> dict[str, type]:
    registry = dict(_package_mechanisms())
    for name, cls in (extra or {}).items():
        if not (isinstance(cls, type) and issubclass(cls, QuantileMechanism)):
            raise TypeError(f"mechanisms[{name!r}] must be a QuantileMechanism subclass.")
        registry[name] = cls
    return registry


def _same_guarantee(
    recorded: PrivacyGuarantee, planned: PrivacyGuarantee, reachable: bool, released: bool
) -> bool:
    """Whether a recorded calibration guarantee is one the mechanism can have given.

    A configuration that was not calibrated carries exactly the planned guarantee. A
    calibration may also carry it marked as not holding (an estimator-level assumption
    was broken; the description then says why), or, when the level is unreachable,
    the zero-loss guarantee of a release that did not read the data.
    """
    same_numbers = (
        recorded.notion == planned.notion
        and recorded.adjacency == planned.adjacency
        and _close(recorded.epsilon, planned.epsilon)
        and _close(recorded.delta, planned.delta)
        and (
            recorded.rho == planned.rho
            if recorded.rho is None or planned.rho is None
            else _close(recorded.rho, planned.rho)
        )
    )
    if same_numbers and recorded.holds and recorded.description == planned.description:
        return True
    if not released:
        return False
    if same_numbers and not recorded.holds:
        return recorded.description.startswith(planned.description.strip())
    return (
        not reachable
        and recorded.notion == "pure"
        and recorded.epsilon == 0.0
        and recorded.delta == 0.0
        and recorded.holds
    )


def _recompute(
    where: str,
    configuration: Configuration,
    certificate: Certificate,
    privacy: PrivacyGuarantee,
    registry: dict[str, type],
    problems: list[str],
    *,
    released: bool,
) -> Certificate | None:
    """Check a recorded certificate and guarantee against the rebuilt mechanism.

    ``released``: whether the record is of a calibration that ran (its guarantee may
    then be weakened or untouched, see :func:`_same_guarantee`). Returns the
    recomputed certificate, or None if the mechanism cannot be rebuilt.
    """
    if not _close(configuration.nominal_coverage, 1.0 - configuration.alpha):
        problems.append(
            f"{where}: nominal_coverage {configuration.nominal_coverage!r} is not "
            f"1 - alpha = {1.0 - configuration.alpha!r}."
        )
    if certificate.marginal_lower_bound != marginal_lower_bound(
        certificate.lower_bound, certificate.confidence
    ):
        problems.append(f"{where}: marginal_lower_bound is not L - (1 - confidence).")
    try:
        mechanism = _rebuild(configuration.mechanism, registry)
        if configuration.agent_sizes is None:
            planned = mechanism.coverage_certificate(configuration.n_samples, configuration.alpha)
        else:
            planned = mechanism.coverage_certificate(
                configuration.n_samples,
                configuration.alpha,
                agent_sizes=configuration.agent_sizes,
            )
        guarantee = mechanism.privacy_guarantee()
        if privacy.adjacency in ADJACENCIES:  # stated under the estimator's adjacency
            guarantee = guarantee.under(privacy.adjacency)
    except (LookupError, TypeError, ValueError) as exc:
        problems.append(f"{where}: cannot recompute L(c) from the configuration: {exc}")
        return None
    recomputed = Certificate(
        lower_bound=float(planned.lower_bound),
        confidence=float(planned.confidence),
        marginal_lower_bound=marginal_lower_bound(planned.lower_bound, planned.confidence),
        level_reachable=bool(planned.feasible),
        reason=planned.reason,
    )
    if not (
        _close(certificate.lower_bound, recomputed.lower_bound)
        and _close(certificate.confidence, recomputed.confidence)
        and certificate.level_reachable == recomputed.level_reachable
    ):
        problems.append(
            f"{where}: recorded certificate (L = {certificate.lower_bound!r}, confidence "
            f"{certificate.confidence!r}, reachable {certificate.level_reachable}) differs "
            f"from {configuration.mechanism.name}.coverage_certificate("
            f"{configuration.n_samples}, {configuration.alpha!r}) = (L = "
            f"{recomputed.lower_bound!r}, confidence {recomputed.confidence!r}, reachable "
            f"{recomputed.level_reachable})."
        )
    if recomputed.level_reachable == certificate.level_reachable and (
        certificate.reason != recomputed.reason
    ):
        problems.append(
            f"{where}: recorded reason {certificate.reason!r} is not the mechanism's "
            f"{recomputed.reason!r}."
        )
    if not _same_guarantee(privacy, guarantee, recomputed.level_reachable, released):
        problems.append(
            f"{where}: recorded calibration privacy ({privacy.notion}, epsilon "
            f"{privacy.epsilon!r}, delta {privacy.delta!r}, rho {privacy.rho!r}, "
            f"{privacy.adjacency}, holds {privacy.holds}) is not what "
            f"{configuration.mechanism.name}.privacy_guarantee() gives ({guarantee.notion}, "
            f"epsilon {guarantee.epsilon!r}, delta {guarantee.delta!r}, rho "
            f"{guarantee.rho!r}, {guarantee.adjacency})"
            + ("" if released else " for a configuration that was not calibrated")
            + "."
        )
    return recomputed


def _check_selection(card: ContractCard, registry, problems: list[str]) -> None:
    selection, contract = card.selection, card.contract
    if contract is None:
        problems.append("selection: a search card must record its contract.")
        return
    if selection.rule != DOMINANCE_RULE:
        problems.append("selection: the recorded rule is not this library's selection rule.")
    candidates = selection.candidates
    if [c.index for c in candidates] != list(range(len(candidates))):
        problems.append("selection: candidate indices are not 0, 1, ..., N - 1.")
        return
    if selection.n_checked != len(candidates):
        problems.append(
            f"selection: n_checked = {selection.n_checked} but {len(candidates)} "
            "configurations are recorded."
        )
    for candidate in candidates:
        where = f"selection.candidates[{candidate.index}]"
        _recompute(
            where,
            candidate.configuration,
            candidate.certificate,
            candidate.calibration,
            registry,
            problems,
            released=candidate.status in ("evaluated", "chosen"),
        )
        clauses = candidate_clauses(
            contract, candidate.training, candidate.calibration, candidate.certificate
        )
        feasible = all(c.satisfied for c in clauses)
        if feasible != candidate.formally_feasible:
            problems.append(
                f"{where}: formally_feasible = {candidate.formally_feasible} but Eq. (3) "
                f"on its certificate gives {feasible}."
            )
        if (candidate.status == "infeasible") == candidate.formally_feasible:
            problems.append(
                f"{where}: status {candidate.status!r} contradicts formally_feasible = "
                f"{candidate.formally_feasible}."
            )
    kept = non_dominated(candidates)
    for index, winner in kept.items():
        status = candidates[index].status
        if (winner is None) == (status == "dominated"):
            problems.append(
                f"selection.candidates[{index}]: status {status!r} but the dominance rule "
                + ("keeps it." if winner is None else f"finds it dominated by {winner}.")
            )
    statuses = [c.status for c in candidates]
    counts = {
        "n_formally_feasible": sum(c.formally_feasible for c in candidates),
        "n_selected": sum(s in ("skipped", "evaluated", "chosen") for s in statuses),
        "n_evaluated": sum(s in ("evaluated", "chosen") for s in statuses),
    }
    for name, value in counts.items():
        if getattr(selection, name) != value:
            problems.append(
                f"selection: {name} = {getattr(selection, name)} but the candidates give {value}."
            )
    margins = [
        candidate_clauses(contract, c.training, c.calibration, c.certificate)[0].margin
        for c in candidates
    ]
    if candidates and not _same(selection.best_coverage_margin, max(margins)):
        problems.append(
            f"selection: best_coverage_margin = {selection.best_coverage_margin!r} but the "
            f"certificates give {max(margins)!r}."
        )
    evaluated = [c.calibration for c in candidates if c.status in ("evaluated", "chosen")]
    if selection.calibration_split not in ("disjoint", "shared"):
        problems.append(f"selection: unknown calibration_split {selection.calibration_split!r}.")
    else:
        spent = composed_spend(evaluated, selection.calibration_split)
        recorded = (selection.spent_epsilon_cal, selection.spent_delta_cal)
        if not (_same(spent[0], recorded[0]) and _same(spent[1], recorded[1])):
            problems.append(
                f"selection: spent (epsilon, delta) = {recorded} but composing the evaluated "
                f"calibrations ({selection.calibration_split} rows) gives {spent}."
            )
    chosen = [c for c in candidates if c.status == "chosen"]
    if selection.chosen_index is None:
        if chosen or counts["n_formally_feasible"]:
            problems.append("selection: chosen_index is None but a configuration was chosen.")
        elif candidates:
            reported = best_attempted(contract, candidates)
            if reported.configuration != card.configuration:
                problems.append(
                    "selection: the card's configuration is not the best attempted one "
                    f"(grid index {reported.index})."
                )
        return
    if len(chosen) != 1 or chosen[0].index != selection.chosen_index:
        problems.append(
            f"selection: chosen_index = {selection.chosen_index} but the statuses mark "
            f"{[c.index for c in chosen]} as chosen."
        )
        return
    if (
        chosen[0].configuration != card.configuration
        or chosen[0].training != card.training_privacy
        or chosen[0].calibration != card.calibration_privacy
        or chosen[0].certificate != card.certificate
    ):
        problems.append("selection: the chosen configuration is not the one on the card.")
    if card.release is None:
        problems.append("selection: a configuration was chosen but the card records no release.")


def _load(card) -> ContractCard:
    if isinstance(card, ContractCard):
        return card
    if isinstance(card, os.PathLike):
        return ContractCard.load(card)
    if isinstance(card, str) and not card.lstrip().startswith("{"):
        # A card's JSON text is an object, so any other string names a file.
        return ContractCard.load(card)
    if isinstance(card, str | bytes):
        return ContractCard.from_json(card)
    if isinstance(card, dict):
        return ContractCard.from_dict(card)
    raise TypeError(
        "card must be a ContractCard, JSON text, a parsed JSON dict or a path; got "
        f"{type(card).__name__}."
    )


def verify_card(card, *, mechanisms: dict[str, type] | None = None) -> Verification:
    """Recompute Eq. (3) and every recomputable formal field of a card.

    Parameters
    ----------
    card : ContractCard, str, bytes, dict or path-like
        The card, its JSON text, the parsed JSON, or a path to the JSON file (a string
        that does not start with ``{`` is read as a path).
    mechanisms : dict of str to type, default=None
        Extra mechanism classes by name (for mechanisms outside
        :mod:`privconf_sklearn.mechanisms`).

    Returns
    -------
    Verification
        ``status`` is ``"accepted"`` exactly when the card is consistent and the
        recorded configuration meets the recorded contract (Observation 4.1).

    Examples
    --------
    >>> import numpy as np
    >>> from privconf_sklearn.cards import Contract, ContractCard, verify_card
    >>> from privconf_sklearn.mechanisms import ExponQ
    >>> mechanism = ExponQ(epsilon=1.0)
    >>> calibration = mechanism.calibrate(np.linspace(0, 1, 3000), 0.1, random_state=0)
    >>> card = ContractCard.from_calibration(
    ...     calibration, mechanism, epsilon_train=2.0,
    ...     contract=Contract(0.95, max_epsilon_train=2, max_epsilon_cal=1, beta=1e-3))
    >>> result = verify_card(card.to_json())
    >>> result.status, [c.name for c in result.failed_clauses]
    ('rejected', ['coverage'])
    >>> round(result.failed_clauses[0].margin, 6)
    -0.05
    """
    try:
        card = _load(card)
    except (CardFormatError, OSError, UnicodeDecodeError) as exc:
        return Verification("inconsistent", (), (f"unreadable card: {exc}",))
    registry = _registry(mechanisms)
    problems: list[str] = []
    if card.compute_digest() != card.formal_sha256:
        problems.append(
            "formal_sha256 does not match the formal layer: the card was edited after it "
            "was written."
        )
    recomputed = _recompute(
        "configuration",
        card.configuration,
        card.certificate,
        card.calibration_privacy,
        registry,
        problems,
        released=card.release is not None,
    )
    if card.selection is not None:
        _check_selection(card, registry, problems)
    contract = card.contract
    clauses: tuple[Clause, ...] = ()
    if contract is not None:
        recorded = check_contract(
            contract,
            card_coordinates(
                card.training_privacy, card.calibration_privacy, card.certificate, card.selection
            ),
        )
        if len(recorded) != len(card.clauses) or not all(
            _same_clause(a, b) for a, b in zip(recorded, card.clauses, strict=False)
        ):
            differing = [
                b.name
                for a, b in zip(recorded, card.clauses, strict=False)
                if not _same_clause(a, b)
            ] or ["(number of clauses)"]
            problems.append(
                f"recorded clauses {differing} differ from Eq. (3) recomputed from the "
                "card's contract and coordinates."
            )
        certificate = card.certificate if recomputed is None else recomputed
        clauses = check_contract(
            contract,
            card_coordinates(
                card.training_privacy, card.calibration_privacy, certificate, card.selection
            ),
        )
    elif card.clauses:
        problems.append("clauses are recorded but the card has no contract.")
    decision = decision_of(contract, clauses)
    if card.decision != decision:
        problems.append(f"recorded decision {card.decision!r} but Eq. (3) gives {decision!r}.")
    if problems:
        return Verification("inconsistent", clauses, tuple(problems))
    status = {"feasible": "accepted", "infeasible": "rejected"}.get(decision, "unchecked")
    return Verification(status, clauses, ())
