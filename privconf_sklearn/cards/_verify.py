"""Verify a contract card from its serialised form alone (the paper's Observation 4.1).

The verifier never raises on a card and trusts nothing on it that it can recompute. It reads
the card strictly, checks the digest and (given the issuer's public key) the signature, then
rebuilds the formal layer from what it cannot recompute (contract, configuration, training
privacy, releases, groups, a search's grid and statuses) and compares it field by field:
certificates ``L(c)``, guarantees, a search's selection, Eq. (3) and the decision.
"""

from __future__ import annotations

import math
import os
from dataclasses import dataclass, replace
from typing import Any

from ..mechanisms import DPAPS, PCOQS, ExponQ, FedCP2QQ, FedCPQQ, QuantileMechanism, SplitConformal
from ..mondrian import PrivateGroupSizes, mondrian_privacy, private_sizes_coverage_floor
from ..privacy import ADJACENCIES, PrivacyGuarantee
from ._card import NO_ROWS, ContractCard, planned_certificate
from ._contract import Clause
from ._records import Certificate, ComponentSpec
from ._search import KEPT, best_attempted, clauses_of, formal_statuses, selection_of

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
        Consistent and Eq. (3) holds; consistent, contract not met; consistent, no contract;
        unreadable, malformed, edited, wrongly signed or differing from its recomputation.
    clauses : tuple of Clause
        Eq. (3) recomputed from the card.
    problems : tuple of str
        Every inconsistency found.
    informative : bool or None, default=None
        Whether every release is informative (None: no release, or unreadable).
    authenticated : bool, default=False
        True when the card's signature verified under the given public key.
    uninformative_groups : tuple, default=()
        Mondrian groups whose release is uninformative.
    """

    status: str
    clauses: tuple[Clause, ...]
    problems: tuple[str, ...]
    informative: bool | None = None
    authenticated: bool = False
    uninformative_groups: tuple = ()

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
        if self.uninformative_groups:
            groups = ", ".join(map(str, self.uninformative_groups[:10]))
            status += f" (UNINFORMATIVE releases in groups {groups}: trivial sets / intervals)"
        elif self.informative is False:
            status += " (UNINFORMATIVE release: every set is the whole label set / every "
            status += "interval the whole score range)"
        lines = [f"card verification: {status}"]
        if self.authenticated:
            lines.append("  signature: valid under the given public key")
        for clause in self.clauses:
            mark = "ok  " if clause.satisfied else "FAIL"
            margin = "" if clause.margin is None else f"  margin {clause.margin:+.6g}"
            lines.append(f"  [{mark}] {clause.name}: {clause.requirement}{margin}")
        return "\n".join(lines + [f"  problem: {problem}" for problem in self.problems])


def _close(a: Any, b: Any) -> bool:
    """Equal, or floats equal up to :data:`RTOL`."""
    if isinstance(a, float) and isinstance(b, float):
        return a == b or math.isclose(a, b, rel_tol=RTOL, abs_tol=0.0)
    return a == b


def _rebuild(spec: ComponentSpec, registry: dict[str, type]) -> QuantileMechanism:
    """The mechanism from its class name and recorded ``get_params()``."""
    if spec.name not in registry:
        raise LookupError(
            f"mechanism {spec.name!r} is not a privconf_sklearn mechanism (pass "
            "mechanisms={name: class} to verify cards of other mechanisms)"
        )
    unrepresentable = sorted(k for k, v in spec.params.items() if isinstance(v, dict))
    if unrepresentable:
        raise LookupError(f"parameters {unrepresentable} were not recorded as values")
    return registry[spec.name](**spec.params)


def _group_sizes(spec) -> str | PrivateGroupSizes:
    if spec == "public":
        return "public"
    if spec.name != "PrivateGroupSizes":
        raise LookupError(f"group_sizes {spec.name!r} is not PrivateGroupSizes")
    sizes = PrivateGroupSizes(**spec.params)
    sizes.privacy_guarantee()  # checks epsilon and beta
    return sizes


def _certificate(recorded: Certificate, mechanism, n: int, configuration, bound=None):
    """``L(c)`` for ``n`` rows or ``bound`` (as recorded if equal up to :data:`RTOL`)."""
    lower_bound, confidence, reachable, reason = 1.0, 1.0, False, NO_ROWS
    if n:
        planned = planned_certificate(mechanism, n, configuration.alpha, configuration.agent_sizes)
        lower_bound, confidence = planned.lower_bound, planned.confidence
        reachable, reason = planned.feasible, planned.reason
    if bound is not None:
        lower_bound, confidence = bound, 1.0
    if _close(recorded.lower_bound, lower_bound) and _close(recorded.confidence, confidence):
        lower_bound, confidence = recorded.lower_bound, recorded.confidence
    return Certificate.of(lower_bound, confidence, reachable, reason)


def _privacy(recorded, planned, reachable: bool, released: bool) -> PrivacyGuarantee:
    """``recorded`` if the mechanism can have given it, else ``planned``.

    ``recorded`` may equal ``planned`` under its adjacency, carry it marked as not holding
    (reason appended), or be the zero loss of a release that read no data (level unreachable).
    """
    if recorded.adjacency in ADJACENCIES and recorded.adjacency != planned.adjacency:
        planned = planned.under(recorded.adjacency)
    fields = ("notion", "adjacency", "epsilon", "delta", "rho")
    same = all(_close(getattr(recorded, name), getattr(planned, name)) for name in fields)
    kept = same and (recorded.holds, recorded.description) == (planned.holds, planned.description)
    broken = released and same and not recorded.holds
    broken = broken and recorded.description.startswith(planned.description.strip())
    untouched = recorded.notion == "pure" and recorded.epsilon == 0.0 == recorded.delta
    untouched = untouched and released and not reachable and recorded.holds
    return recorded if kept or broken or untouched else planned


def _entries(card, configuration, mechanism, problems: list[str]) -> tuple:
    """The calibration entries with recomputed certificates (Mondrian: per group)."""
    sizes = _group_sizes(configuration.group_sizes) if configuration.mondrian else None
    private = sizes if isinstance(sizes, PrivateGroupSizes) else None
    declared = None if private is None else private.group_ids
    if declared is not None and tuple(e.group for e in card.calibrations) != tuple(declared):
        problems.append("formal.calibrations: groups are not PrivateGroupSizes.group_ids.")
    entries, floors = [], [0.0][:0]  # L_floor, computed once
    for index, entry in enumerate(card.calibrations):
        n = entry.n_samples if configuration.mondrian else configuration.n_samples
        informative, bound = entry.release is not None and entry.release.informative, None
        if private is not None and n:  # (1 - beta) L_floor if informative, else 1
            if informative and not floors:
                alpha, total = configuration.alpha, configuration.n_samples
                floors.append(private_sizes_coverage_floor(mechanism, alpha, total))
            bound = (1.0 - private.beta) * floors[0] if informative else 1.0
        certificate = _certificate(entry.certificate, mechanism, n, configuration, bound)
        release = entry.release
        if release is not None and not certificate.level_reachable and release.threshold != 1.0:
            problems.append(
                f"formal.calibrations[{index}].release: the level is unreachable, so the "
                f"mechanism releases threshold 1; the card records {release.threshold!r}."
            )
        entries.append(replace(entry, n_samples=n, certificate=certificate))
    return tuple(entries)


def _calibration_privacy(card, configuration, mechanism, entries) -> PrivacyGuarantee:
    """The guarantee of everything released, recomputed (Mondrian: composed)."""
    recorded, planned = card.calibration_privacy, mechanism.privacy_guarantee()
    reachable = [entry.certificate.level_reachable for entry in entries]
    if configuration.mondrian is not None:
        sizes = _group_sizes(configuration.group_sizes)
        adjacency = recorded.adjacency if recorded.adjacency in ADJACENCIES else "replace-one"
        read = len(entries) if isinstance(sizes, PrivateGroupSizes) else sum(reachable)
        planned = mondrian_privacy(
            mechanism, sizes, adjacency, n_groups_read=read, n_groups=len(entries)
        )
    return _privacy(recorded, planned, any(reachable), entries[0].release is not None)


def _selection(card, registry, problems: list[str]):
    """A search's selection recomputed from its grid; and the configuration on the card."""
    contract, recorded = card.contract, card.selection
    if contract is None:
        problems.append("formal.selection: a search card must record its contract.")
        return recorded, None
    candidates = []
    for index, c in enumerate(recorded.candidates):
        mechanism = _rebuild(c.configuration.mechanism, registry)
        conf = c.configuration
        certificate = _certificate(c.certificate, mechanism, conf.n_samples, conf)
        reachable, released = certificate.level_reachable, c.status in ("evaluated", "chosen")
        privacy = _privacy(c.calibration, mechanism.privacy_guarantee(), reachable, released)
        candidate = replace(c, index=index, calibration=privacy, certificate=certificate)
        feasible = all(clause.satisfied for clause in clauses_of(contract, candidate))
        candidates.append(replace(candidate, formally_feasible=feasible))
    statuses, chosen = formal_statuses(candidates), False
    for position, c in enumerate(candidates):
        formal = statuses[c.index]  # infeasible, dominated, or kept: its recorded fate
        status = formal.split(" ")[0] if formal else (c.status if c.status in KEPT else "skipped")
        status = "evaluated" if status == "chosen" and chosen else status
        chosen = chosen or status == "chosen"
        candidates[position] = replace(c, status=status)
    reference = next((c for c in candidates if c.status == "chosen"), None)
    if reference is None and any(c.status in KEPT for c in candidates):
        problems.append("formal.selection: a configuration is feasible, but none was chosen.")
    if (reference is None) != (card.calibrations[0].release is None):
        problems.append("formal.calibrations: a search card records a release iff one was chosen.")
    selection = selection_of(contract, candidates, recorded.calibration_split)
    return selection, reference or (best_attempted(contract, candidates) if candidates else None)


def _expected(card: ContractCard, registry, problems: list[str]) -> ContractCard:
    """The card rebuilt from what cannot be recomputed, with everything else recomputed."""
    configuration, training, privacy = card.configuration, card.training_privacy, None
    selection = card.selection
    if selection is not None:
        selection, reference = _selection(card, registry, problems)
        if reference is not None:
            configuration, training = reference.configuration, reference.training
            privacy = reference.calibration
    mechanism = _rebuild(configuration.mechanism, registry)
    entries = _entries(card, configuration, mechanism, problems)
    if privacy is None:
        privacy = _calibration_privacy(card, configuration, mechanism, entries)
    return ContractCard.build(
        contract=card.contract,
        configuration=configuration,
        training_privacy=training,
        calibration_privacy=privacy,
        calibrations=entries,
        selection=selection,
    )


def _differences(recorded: Any, expected: Any, path: str) -> list[str]:
    """Every path at which two plain values (recorded, recomputed) differ."""
    pair = (recorded, expected)
    if all(isinstance(v, dict) for v in pair) and recorded.keys() == expected.keys():
        children = [(recorded[key], expected[key], f"{path}.{key}") for key in recorded]
    elif all(isinstance(v, list) for v in pair) and len(recorded) == len(expected):
        children = [(*p, f"{path}[{i}]") for i, p in enumerate(zip(*pair, strict=True))]
    elif type(recorded) is type(expected) and recorded == expected:
        return []
    else:
        shown = [text if len(text) <= 80 else text[:77] + "..." for text in map(repr, pair)]
        return [f"{path}: recorded {shown[0]}, recomputed {shown[1]}."]
    return [problem for child in children for problem in _differences(*child)]


def _load(card: Any) -> ContractCard:
    if isinstance(card, ContractCard):
        return card
    if isinstance(card, os.PathLike) or (isinstance(card, str) and card.lstrip()[:1] != "{"):
        return ContractCard.load(card)  # a card's JSON text is an object: others name files
    if isinstance(card, str | bytes):
        return ContractCard.from_json(card)
    return ContractCard.from_dict(card)


def _registry(extra) -> dict[str, type]:
    if extra is not None and not isinstance(extra, dict):
        raise TypeError(f"mechanisms must be a dict of name to class; got {type(extra).__name__}.")
    for name, cls in (extra or {}).items():
        if not (isinstance(cls, type) and issubclass(cls, QuantileMechanism)):
            raise TypeError(f"mechanisms[{name!r}] must be a QuantileMechanism subclass.")
    return {**MECHANISMS, **{str(name): cls for name, cls in (extra or {}).items()}}


def _check(card: ContractCard, registry, key) -> tuple[tuple[Clause, ...], list[str]]:
    """The recomputed clauses and every problem of a readable card."""
    problems: list[str] = []
    if card.compute_digest() != card.formal_sha256:
        problems.append(
            "formal_sha256 does not match the formal layer: the card was edited after it "
            "was written."
        )
    if key is not None:
        from ._signing import check_signature

        problem = check_signature(card.signature, card.signed_payload(), key)
        problems += [] if problem is None else [f"signature: {problem}"]
    try:
        expected = _expected(card, registry, problems)
    except Exception as exc:  # a crafted card must not crash the verifier
        return (), [*problems, f"cannot recompute the card: {exc!r}"]
    problems += _differences(card.formal_dict(), expected.formal_dict(), "formal")
    return expected.clauses, problems


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
    try:
        clauses, problems = _check(card, registry, key)
    except Exception as exc:  # the verifier reports, it never crashes
        return Verification("inconsistent", (), (f"cannot verify the card: {exc!r}",))
    released = [(e.group, e.release) for e in card.calibrations if e.release is not None]
    informative = all(release.informative for _, release in released) if released else None
    trivial = tuple(
        group for group, release in released if group is not None and not release.informative
    )
    if problems:
        return Verification("inconsistent", clauses, tuple(problems), informative, False, trivial)
    status = {"feasible": "accepted", "infeasible": "rejected"}.get(card.decision, "unchecked")
    return Verification(status, clauses, (), informative, key is not None, trivial)
