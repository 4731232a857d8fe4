"""Verify a contract card from its serialised form alone (the paper's Observation 4.1).

The verifier never raises on a card, whatever its content, and trusts nothing on it
that it can recompute:

1. the card's form: bounded size and nesting, no duplicate keys, every field of the
   schema with its type and range (sizes positive integers, ``alpha`` in (0, 1),
   budgets non-negative, thresholds and bounds in [0, 1], no NaN), and the consistency
   rules between fields (an uninformative release is a threshold of 1, data-derived
   score bounds break the calibration guarantee, ...);
2. the digest of the formal layer and, given the issuer's public key, its signature;
3. ``L(c)``, its confidence and reachability, by rebuilding the mechanism from the
   recorded class and parameters and calling ``coverage_certificate(n, alpha)``; the
   calibration guarantee, from ``privacy_guarantee()`` restated for the recorded
   adjacency (a card may record a *weaker* guarantee, never a stronger one);
4. every clause of Eq. (3), its margin and the decision;
5. for a search, every grid configuration's certificate and feasibility, the counts,
   the dominance statuses, the reported failed margin and the composed privacy spend.

Training privacy and the released threshold cannot be recomputed without the model and
the data: the digest protects them against accidental edits, a signature against a
dishonest writer.
"""

from __future__ import annotations

import math
import os
from dataclasses import dataclass
from typing import Any

from ..mechanisms import DPAPS, PCOQS, ExponQ, FedCP2QQ, FedCPQQ, QuantileMechanism, SplitConformal
from ..privacy import ADJACENCIES, PrivacyGuarantee
from ._card import ContractCard
from ._contract import Clause, Contract, check_contract, decision_of
from ._records import Candidate, Certificate, ComponentSpec, Configuration, Selection
from ._selection import (
    DOMINANCE_RULE,
    best_attempted,
    clauses_of,
    composed_spend,
    coverage_margin,
    non_dominated,
)

__all__ = ["MECHANISMS", "Verification", "verify_card"]

#: The mechanisms a card may name, by class name (a card cannot name code to load).
MECHANISMS: dict[str, type[QuantileMechanism]] = {
    cls.__name__: cls for cls in (DPAPS, ExponQ, FedCP2QQ, FedCPQQ, PCOQS, SplitConformal)
}

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
        ``inconsistent``: unreadable, malformed, edited, wrongly signed, or a recorded
        field disagrees with its recomputation (see ``problems``).
    clauses : tuple of Clause
        Eq. (3) recomputed from the card.
    problems : tuple of str
        Every inconsistency found.
    informative : bool or None, default=None
        Whether the release is informative (None: no release, or unreadable). An
        accepted card with an uninformative release meets Eq. (3) with trivial sets.
    authenticated : bool, default=False
        True when a public key was given and the card's signature verified under it.
    """

    status: str
    clauses: tuple[Clause, ...]
    problems: tuple[str, ...]
    informative: bool | None = None
    authenticated: bool = False

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
        """Human-readable summary: status, clauses with margins, problems."""
        status = self.status.upper()
        if self.informative is False:
            status += " (UNINFORMATIVE release: every set is the whole label set / every "
            status += "interval the whole score range)"
        lines = [f"card verification: {status}"]
        if self.authenticated:
            lines.append("  signature: valid under the given public key")
        for clause in self.clauses:
            mark = "ok  " if clause.satisfied else "FAIL"
            margin = "" if clause.margin is None else f"  margin {clause.margin:+.6g}"
            lines.append(f"  [{mark}] {clause.name}: {clause.requirement}{margin}")
        lines.extend(f"  problem: {problem}" for problem in self.problems)
        return "\n".join(lines)


def _close(a: float | None, b: float | None) -> bool:
    """Equal up to :data:`RTOL` (exactly equal for None, infinities and zeros)."""
    if a is None or b is None:
        return a is b
    return a == b or math.isclose(a, b, rel_tol=RTOL, abs_tol=0.0)


def _rebuild(spec: ComponentSpec, registry: dict[str, type]) -> QuantileMechanism:
    """The mechanism from its class name and recorded ``get_params()``."""
    cls = registry.get(spec.name)
    if cls is None:
        raise LookupError(
            f"mechanism {spec.name!r} is not a privconf_sklearn mechanism (pass "
            "mechanisms={name: class} to verify cards of other mechanisms)"
        )
    unrepresentable = sorted(k for k, v in spec.params.items() if isinstance(v, dict))
    if unrepresentable:
        raise LookupError(f"parameters {unrepresentable} were not recorded as values")
    return cls(**spec.params)


def _planned(configuration: Configuration, registry) -> tuple[Certificate, PrivacyGuarantee]:
    mechanism = _rebuild(configuration.mechanism, registry)
    sizes = configuration.agent_sizes
    extra = {} if sizes is None else {"agent_sizes": sizes}
    planned = mechanism.coverage_certificate(configuration.n_samples, configuration.alpha, **extra)
    certificate = Certificate.of(
        planned.lower_bound, planned.confidence, planned.feasible, planned.reason
    )
    return certificate, mechanism.privacy_guarantee()


def _same_numbers(a: PrivacyGuarantee, b: PrivacyGuarantee) -> bool:
    return (
        a.notion == b.notion
        and a.adjacency == b.adjacency
        and _close(a.epsilon, b.epsilon)
        and _close(a.delta, b.delta)
        and _close(a.rho, b.rho)
    )


def _same_guarantee(recorded, planned, reachable: bool, released: bool) -> bool:
    """Whether ``recorded`` is a guarantee the mechanism can have given.

    ``planned`` is the rebuilt mechanism's guarantee, restated for the recorded
    adjacency. A configuration that was not calibrated carries exactly it. A
    calibration may also carry it marked as not holding (an estimator-level assumption
    broke; the description then says why), or, when the level is unreachable, the
    zero-loss guarantee of a release that did not read the data.
    """
    if recorded.adjacency != planned.adjacency and recorded.adjacency in ADJACENCIES:
        restated = planned.under(recorded.adjacency)
    else:
        restated = planned
    same = _same_numbers(recorded, restated)
    if same and recorded.holds == restated.holds and recorded.description == restated.description:
        return True
    if not released:
        return False
    if same and not recorded.holds:
        return recorded.description.startswith(planned.description.strip())
    untouched = recorded.notion == "pure" and recorded.epsilon == 0.0 == recorded.delta
    return not reachable and untouched and recorded.holds


def _recompute(where, configuration, certificate, privacy, registry, problems, released):
    """Check a recorded certificate and guarantee against the rebuilt mechanism.

    Returns the recomputed certificate, or None if the mechanism cannot be rebuilt or
    fails on the recorded parameters (any exception: the card is then unverifiable).
    """
    try:
        recomputed, planned = _planned(configuration, registry)
    except Exception as exc:  # a crafted card must not crash the verifier
        problems.append(f"{where}: cannot recompute L(c) from the configuration: {exc}")
        return None
    name = configuration.mechanism.name
    if not (
        _close(certificate.lower_bound, recomputed.lower_bound)
        and _close(certificate.confidence, recomputed.confidence)
        and certificate.level_reachable == recomputed.level_reachable
    ):
        problems.append(
            f"{where}: recorded certificate (L = {certificate.lower_bound!r}, confidence "
            f"{certificate.confidence!r}, reachable {certificate.level_reachable}) differs "
            f"from {name}.coverage_certificate({configuration.n_samples}, "
            f"{configuration.alpha!r}) = (L = {recomputed.lower_bound!r}, confidence "
            f"{recomputed.confidence!r}, reachable {recomputed.level_reachable})."
        )
    elif certificate.reason != recomputed.reason:
        problems.append(
            f"{where}: recorded reason {certificate.reason!r} is not the mechanism's "
            f"{recomputed.reason!r}."
        )
    if not _same_guarantee(privacy, planned, recomputed.level_reachable, released):
        problems.append(
            f"{where}: recorded calibration privacy ({privacy.notion}, epsilon "
            f"{privacy.epsilon!r}, delta {privacy.delta!r}, {privacy.adjacency}, holds "
            f"{privacy.holds}) is not what {name}.privacy_guarantee() gives ("
            f"{planned.notion}, epsilon {planned.epsilon!r}, delta {planned.delta!r}, "
            f"{planned.adjacency}) under that adjacency"
            + ("." if released else " for a configuration that was not calibrated.")
        )
    return recomputed


def _check_candidate(contract: Contract, candidate: Candidate, registry, problems) -> None:
    where = f"selection.candidates[{candidate.index}]"
    released = candidate.status in ("evaluated", "chosen")
    _recompute(
        where,
        candidate.configuration,
        candidate.certificate,
        candidate.calibration,
        registry,
        problems,
        released,
    )
    clauses = clauses_of(contract, candidate)
    feasible = all(c.satisfied for c in clauses)
    if feasible != candidate.formally_feasible:
        problems.append(
            f"{where}: formally_feasible = {candidate.formally_feasible} but Eq. (3) on its "
            f"certificate gives {feasible}."
        )
    if (candidate.status == "infeasible") == candidate.formally_feasible:
        problems.append(
            f"{where}: status {candidate.status!r} contradicts formally_feasible = "
            f"{candidate.formally_feasible}."
        )


def _check_summary(contract: Contract, selection: Selection, problems: list[str]) -> None:
    """Dominance statuses, counts, failed margin and composed spend of a search."""
    candidates = selection.candidates
    for index, winner in non_dominated(candidates).items():
        status = candidates[index].status
        if (winner is None) == (status == "dominated"):
            found = "keeps it." if winner is None else f"finds it dominated by {winner}."
            problems.append(
                f"selection.candidates[{index}]: status {status!r} but the dominance rule " + found
            )
    statuses = [c.status for c in candidates]
    spent = composed_spend(
        [c.calibration for c in candidates if c.status in ("evaluated", "chosen")],
        selection.calibration_split,
    )
    margins = [coverage_margin(contract, c) for c in candidates]
    expected = {
        "n_checked": len(candidates),
        "n_formally_feasible": sum(c.formally_feasible for c in candidates),
        "n_selected": sum(s in ("skipped", "evaluated", "chosen") for s in statuses),
        "n_evaluated": sum(s in ("evaluated", "chosen") for s in statuses),
        "best_coverage_margin": max(margins, default=None),
        "spent_epsilon_cal": spent[0],
        "spent_delta_cal": spent[1],
    }
    for name, value in expected.items():
        recorded = getattr(selection, name)
        if value is not None and recorded != value:
            problems.append(f"selection: {name} = {recorded!r} but the candidates give {value!r}.")


def _check_choice(card: ContractCard, problems: list[str]) -> None:
    """The chosen configuration is the card's own; an infeasible search reports its best."""
    selection = card.selection
    assert selection is not None and card.contract is not None
    chosen = [c for c in selection.candidates if c.status == "chosen"]
    if selection.chosen_index is None:
        if chosen or selection.n_formally_feasible:
            problems.append("selection: chosen_index is None but a configuration was chosen.")
        elif selection.candidates:
            best = best_attempted(card.contract, selection.candidates)
            if best.configuration != card.configuration:
                problems.append(
                    "selection: the card's configuration is not the best attempted one "
                    f"(grid index {best.index})."
                )
        return
    if [c.index for c in chosen] != [selection.chosen_index]:
        problems.append(
            f"selection: chosen_index = {selection.chosen_index} but the statuses mark "
            f"{[c.index for c in chosen]} as chosen."
        )
        return
    mine = (card.configuration, card.training_privacy, card.calibration_privacy, card.certificate)
    theirs = (chosen[0].configuration, chosen[0].training, chosen[0].calibration)
    if mine != (*theirs, chosen[0].certificate):
        problems.append("selection: the chosen configuration is not the one on the card.")
    if card.release is None:
        problems.append("selection: a configuration was chosen but the card records no release.")


def _check_selection(card: ContractCard, registry, problems: list[str]) -> None:
    selection, contract = card.selection, card.contract
    assert selection is not None
    if contract is None:
        problems.append("selection: a search card must record its contract.")
        return
    if selection.rule != DOMINANCE_RULE:
        problems.append("selection: the recorded rule is not this library's selection rule.")
    if [c.index for c in selection.candidates] != list(range(len(selection.candidates))):
        problems.append("selection: candidate indices are not 0, 1, ..., N - 1.")
        return
    for candidate in selection.candidates:
        _check_candidate(contract, candidate, registry, problems)
    _check_summary(contract, selection, problems)
    _check_choice(card, problems)


def _check_clauses(card: ContractCard, recomputed, problems: list[str]) -> tuple[Clause, ...]:
    """Eq. (3) recomputed from the card (with the recomputed certificate if any)."""
    if card.contract is None:
        if card.clauses:
            problems.append("clauses are recorded but the card has no contract.")
        return ()

    def clauses_with(certificate):
        return check_contract(
            card.contract,
            card.training_privacy,
            card.calibration_privacy,
            certificate,
            card.selection,
            card.release,
        )

    recorded = clauses_with(card.certificate)
    if recorded != card.clauses:
        differing = [b.name for a, b in zip(recorded, card.clauses, strict=False) if a != b]
        problems.append(
            f"recorded clauses {differing or ['(number of clauses)']} differ from Eq. (3) "
            "recomputed from the card's contract and coordinates."
        )
    return clauses_with(card.certificate if recomputed is None else recomputed)


def _load(card: Any) -> ContractCard:
    if isinstance(card, ContractCard):
        return card
    if isinstance(card, os.PathLike):
        return ContractCard.load(card)
    if isinstance(card, str) and not card.lstrip().startswith("{"):
        # A card's JSON text is an object, so any other string names a file.
        return ContractCard.load(card)
    if isinstance(card, str | bytes):
        return ContractCard.from_json(card)
    return ContractCard.from_dict(card)


def _registry(extra) -> dict[str, type]:
    registry = dict(MECHANISMS)
    if extra is None:
        return registry
    if not isinstance(extra, dict):
        raise TypeError(f"mechanisms must be a dict of name to class; got {type(extra).__name__}.")
    for name, cls in extra.items():
        if not (isinstance(cls, type) and issubclass(cls, QuantileMechanism)):
            raise TypeError(f"mechanisms[{name!r}] must be a QuantileMechanism subclass.")
        registry[str(name)] = cls
    return registry


def _problems(card: ContractCard, registry, key, problems: list[str]) -> tuple[Clause, ...]:
    """Every check of a readable card; returns the recomputed clauses."""
    if card.compute_digest() != card.formal_sha256:
        problems.append(
            "formal_sha256 does not match the formal layer: the card was edited after it "
            "was written."
        )
    if key is not None:
        from ._signing import check_signature

        problem = check_signature(card.signature, card.signed_payload(), key)
        if problem is not None:
            problems.append(f"signature: {problem}")
    recomputed = _recompute(
        "configuration",
        card.configuration,
        card.certificate,
        card.calibration_privacy,
        registry,
        problems,
        card.release is not None,
    )
    release = card.release
    if recomputed is not None and release is not None and not recomputed.level_reachable:
        if release.threshold != 1.0:
            problems.append(
                "release: the level is unreachable, so the mechanism releases threshold 1; "
                f"the card records {release.threshold!r}."
            )
    if card.selection is not None:
        _check_selection(card, registry, problems)
    clauses = _check_clauses(card, recomputed, problems)
    decision = decision_of(card.contract, clauses)
    if card.decision != decision:
        problems.append(f"recorded decision {card.decision!r} but Eq. (3) gives {decision!r}.")
    return clauses


def verify_card(card, *, mechanisms=None, public_key=None) -> Verification:
    """Recompute Eq. (3) and every recomputable formal field of a card.

    Never raises on the card itself: an unreadable, malformed or edited card gives
    status ``"inconsistent"`` with the problems named.

    Parameters
    ----------
    card : ContractCard, str, bytes, dict or path-like
        The card, its JSON text, the parsed JSON (``json.loads(text)``), or a path to
        the JSON file (a string that does not start with ``{`` is read as a path).
    mechanisms : dict of str to type, default=None
        Extra mechanism classes by name (for mechanisms outside
        :mod:`privconf_sklearn.mechanisms`).
    public_key : Ed25519PublicKey or bytes, default=None
        The issuer's Ed25519 public key (object, 32 raw bytes or PEM), obtained from the
        issuer rather than from the card. Given, the card must carry a valid signature
        by that key (``Verification.authenticated``); needs ``cryptography``.

    Returns
    -------
    Verification
        ``status`` is ``"accepted"`` exactly when the card is consistent and the
        recorded configuration meets the recorded contract (Observation 4.1).

    Raises
    ------
    TypeError, ValueError
        Only for a bad ``mechanisms`` or ``public_key`` argument.

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
    registry = _registry(mechanisms)
    key = None
    if public_key is not None:
        from ._signing import public_key_hex

        key = public_key_hex(public_key)
    try:
        card = _load(card)
    except (ValueError, OSError) as exc:
        return Verification("inconsistent", (), (f"unreadable card: {exc}",))
    problems: list[str] = []
    try:
        clauses = _problems(card, registry, key, problems)
    except Exception as exc:  # the verifier reports, it never crashes
        return Verification("inconsistent", (), (f"cannot verify the card: {exc!r}",))
    informative = None if card.release is None else card.release.informative
    if problems:
        return Verification("inconsistent", clauses, tuple(problems), informative)
    status = {"feasible": "accepted", "infeasible": "rejected"}.get(card.decision, "unchecked")
    return Verification(status, clauses, (), informative, key is not None)
