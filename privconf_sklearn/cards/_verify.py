"""Verify a contract card from its serialised form alone (the paper's Observation 4.1).

The verifier never raises on a card: it reads the card strictly, checks the digest and
signature, rebuilds the formal layer from the recorded configuration and releases and
compares it field by field (certificates ``L(c)``, guarantees, a search's selection, Eq.
(3) under the contract's adjacency and informativeness clause, the decision, one entry
per listed Mondrian group, a private release's threshold in score units). The release's
target level and upper bound are range-checked, not recomputed; they do not enter the
decision.
"""

from __future__ import annotations

import math
import os
from dataclasses import dataclass, replace
from typing import Any

from ..mechanisms import (
    DPAPS,
    PCOQS,
    ExponCRC,
    ExponQ,
    FedCP2QQ,
    FedCPQQ,
    QuantileMechanism,
    SplitConformal,
    SplitCRC,
)
from ..mondrian import PrivateGroupSizes, mondrian_privacy, private_sizes_coverage_floor
from ..privacy import ADJACENCIES, PrivacyGuarantee
from ..scores import public_score_threshold
from ._card import NO_ROWS, ContractCard, planned_certificate
from ._codec import MAX_CHARS, canonical_bytes, decode, loads
from ._contract import Clause
from ._records import Certificate, ComponentSpec
from ._risk_card import RISK_SCHEMA, RiskCard, RiskEntry, RiskSetup, entry_certificate
from ._selection import KEPT, best_attempted, clauses_of, formal_statuses, selection_of

__all__ = ["MECHANISMS", "Verification", "verify_card"]

#: The mechanisms a card may name, by class name (a card cannot name code to load).
MECHANISMS: dict[str, type[QuantileMechanism]] = {
    cls.__name__: cls for cls in (DPAPS, ExponQ, FedCP2QQ, FedCPQQ, PCOQS, SplitConformal)
}
#: The risk-control mechanisms a risk card may name.
RISK_MECHANISMS: dict[str, type] = {cls.__name__: cls for cls in (ExponCRC, SplitCRC)}
#: Relative tolerance for a recomputed ``L(c)`` or privacy loss (libms differ in last bits).
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
    signed : bool, default=False
        Whether the card carries a signature (checked only given a public key: see
        ``authenticated``).
    """

    status: str
    clauses: tuple[Clause, ...]
    problems: tuple[str, ...]
    informative: bool | None = None
    authenticated: bool = False
    uninformative_groups: tuple = ()
    signed: bool = False

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

    def _status_line(self) -> str:
        status = self.status.upper()
        if self.status == "rejected":
            status += f": contract not met ({', '.join(c.name for c in self.failed_clauses)})"
        if self.uninformative_groups:
            groups = ", ".join(map(str, self.uninformative_groups[:10]))
            status += f" (UNINFORMATIVE releases in groups {groups}: trivial sets / intervals)"
        elif self.informative is False:
            status += " (UNINFORMATIVE release: every set is the whole label set / every "
            status += "interval the whole score range)"
        return f"card verification: {status}"

    def _signature_line(self) -> str:
        if self.status == "inconsistent":
            return ""  # the problems say what failed, the signature included
        if self.authenticated:
            return (
                "  signature: valid under the given public key (it covers the formal and "
                "diagnostic layers)"
            )
        if self.signed:
            return "  signature: present, NOT checked (no public key given): read as unsigned"
        return "  signature: none (unsigned card: the digest guards against accidental edits only)"

    def report(self) -> str:
        """Human-readable summary: status, signature, clauses with margins, problems."""
        signature = self._signature_line()
        lines = [self._status_line(), *([signature] if signature else [])]
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


def _restated(planned: PrivacyGuarantee, adjacency: str) -> PrivacyGuarantee:
    """``planned`` for a card's recorded relation.

    A statement for one relation of a guarantee that holds under both (as cards written
    before both were kept record it) is the same guarantee, narrowed; otherwise
    :meth:`PrivacyGuarantee.under`.
    """
    if adjacency not in ADJACENCIES or adjacency == planned.adjacency:
        return planned
    if adjacency in planned.adjacencies and planned.reads_data:
        return replace(planned, adjacency=adjacency)
    return planned.under(adjacency)


def _privacy(recorded, planned, reachable: bool, released: bool) -> PrivacyGuarantee:
    """``recorded`` if the mechanism can have given it, else ``planned``."""
    planned = _restated(planned, recorded.adjacency)
    fields = ("notion", "adjacency", "epsilon", "delta", "rho")
    same = all(_close(getattr(recorded, name), getattr(planned, name)) for name in fields)
    kept = same and (recorded.holds, recorded.description) == (planned.holds, planned.description)
    broken = released and same and not recorded.holds  # an estimator-level assumption broke
    broken = broken and recorded.description.startswith(planned.description.strip())
    untouched = recorded.notion == "pure" and recorded.epsilon == 0.0 == recorded.delta  # no data
    untouched = untouched and released and not reachable and recorded.holds
    return recorded if kept or broken or untouched else planned


def _declared_groups(configuration, sizes) -> list[str]:
    """The listed groups are ``PrivateGroupSizes.group_ids`` when those are declared."""
    declared = sizes.group_ids if isinstance(sizes, PrivateGroupSizes) else None
    if declared is None:
        return []
    keys = [[canonical_bytes(group) for group in ids] for ids in (declared, configuration.groups)]
    if keys[0] == keys[1]:
        return []
    return ["formal.configuration.groups: not the declared PrivateGroupSizes.group_ids."]


def _group_bound(sizes, mechanism, configuration, release, n: int) -> float | None:
    """A private-size group's ``L``: ``(1 - beta) L_floor`` if informative, else 1."""
    if not isinstance(sizes, PrivateGroupSizes) or not n:
        return None
    if release is None or not release.informative:
        return 1.0
    alpha, total = configuration.alpha, configuration.n_samples  # L_floor is cached
    return (1.0 - sizes.beta) * private_sizes_coverage_floor(mechanism, alpha, total)


def _release_problems(path: str, release, certificate, private: bool) -> list[str]:
    """What a release contradicts: the trivial release of an unreachable level, units."""
    if release is None:
        return []
    problems = []
    if not certificate.level_reachable and release.threshold != 1.0:
        problems.append(
            f"{path}: the level is unreachable, so the mechanism releases threshold 1; the "
            f"card records {release.threshold!r}."
        )
    return problems + (_score_units(path, release) if private else [])


def _entries(card, configuration, mechanism, problems: list[str]) -> tuple:
    """The calibration entries with recomputed certificates (Mondrian: per group)."""
    sizes = _group_sizes(configuration.group_sizes) if configuration.mondrian else None
    problems += _declared_groups(configuration, sizes)
    entries, private = [], mechanism.privacy_guarantee().notion != "none"
    for index, entry in enumerate(card.calibrations):
        n = entry.n_samples if configuration.mondrian else configuration.n_samples
        bound = _group_bound(sizes, mechanism, configuration, entry.release, n)
        certificate = _certificate(entry.certificate, mechanism, n, configuration, bound)
        path = f"formal.calibrations[{index}].release"
        problems += _release_problems(path, entry.release, certificate, private)
        entries.append(replace(entry, n_samples=n, certificate=certificate))
    return tuple(entries)


def _score_units(path: str, release) -> list[str]:
    """A private release's threshold in score units, recomputed from public quantities."""
    if release.score_bounds is None:
        return []
    expected = public_score_threshold(release.threshold, *release.score_bounds)
    if release.threshold_score_units == expected:
        return []
    recorded = release.threshold_score_units
    return [f"{path}.threshold_score_units: recorded {recorded!r}, recomputed {expected!r}."]


def _screened(contract, recorded, registry) -> list:
    """A search's grid, each configuration's certificate, guarantee and Eq. (3) recomputed."""
    candidates = []
    for index, c in enumerate(recorded.candidates):
        mechanism, conf = _rebuild(c.configuration.mechanism, registry), c.configuration
        certificate = _certificate(c.certificate, mechanism, conf.n_samples, conf)
        reachable, released = certificate.level_reachable, c.status in ("evaluated", "chosen")
        privacy = _privacy(c.calibration, mechanism.privacy_guarantee(), reachable, released)
        candidate = replace(c, index=index, calibration=privacy, certificate=certificate)
        feasible = all(clause.satisfied for clause in clauses_of(contract, candidate))
        candidates.append(replace(candidate, formally_feasible=feasible))
    return candidates


def _with_statuses(candidates: list) -> list:
    """Infeasible, dominated, or kept with its recorded fate; one chosen configuration."""
    statuses = formal_statuses(candidates)
    found: list = []
    for c in candidates:
        formal = statuses[c.index]
        status = formal.split(" ")[0] if formal else (c.status if c.status in KEPT else "skipped")
        if status == "chosen" and any(d.status == "chosen" for d in found):
            status = "evaluated"
        found.append(replace(c, status=status))
    return found


def _choice_problems(card, candidates: list, reference) -> list[str]:
    """A feasible grid has a chosen configuration, and the card its release."""
    problems = []
    if reference is None and any(c.status in KEPT for c in candidates):
        problems.append("formal.selection: a configuration is feasible, but none was chosen.")
    if (reference is None) != (card.calibrations[0].release is None):
        problems.append("formal.calibrations: a search card records a release iff one was chosen.")
    return problems


def _selection(card, registry, problems: list[str]):
    """A search's selection recomputed from its grid; and the configuration on the card."""
    contract, recorded = card.contract, card.selection
    if contract is None:
        problems.append("formal.selection: a search card must record its contract.")
        return recorded, None
    candidates = _with_statuses(_screened(contract, recorded, registry))
    reference = next((c for c in candidates if c.status == "chosen"), None)
    problems += _choice_problems(card, candidates, reference)
    selection = selection_of(contract, candidates, recorded.calibration_split)
    return selection, reference or (best_attempted(contract, candidates) if candidates else None)


def _calibration_privacy(card, configuration, mechanism, entries) -> PrivacyGuarantee:
    """The guarantee of everything released (Mondrian: all groups, composed)."""
    recorded, planned = card.calibration_privacy, mechanism.privacy_guarantee()
    reachable = [entry.certificate.level_reachable for entry in entries]
    if configuration.mondrian is not None:
        sizes = _group_sizes(configuration.group_sizes)
        adjacency = recorded.adjacency if recorded.adjacency in ADJACENCIES else "replace-one"
        read = len(entries) if isinstance(sizes, PrivateGroupSizes) else sum(reachable)
        groups = len(configuration.groups)
        planned = mondrian_privacy(mechanism, sizes, adjacency, n_groups_read=read, n_groups=groups)
    return _privacy(recorded, planned, any(reachable), entries[0].release is not None)


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


def _registry(mechanisms) -> dict[str, type[QuantileMechanism]]:
    """The mechanisms a card may name: the library's and ``mechanisms`` (checked)."""
    extra = {} if mechanisms is None else mechanisms
    if not isinstance(extra, dict):
        raise TypeError(f"mechanisms must be a dict of name to class; got {type(extra).__name__}.")
    for name, cls in extra.items():
        if not (isinstance(cls, type) and issubclass(cls, QuantileMechanism)):
            raise TypeError(f"mechanisms[{name!r}] must be a QuantileMechanism subclass.")
    return {**MECHANISMS, **{str(name): cls for name, cls in extra.items()}}


def _key(public_key) -> str | None:
    """The issuer's public key as 64 hex digits (None: none given)."""
    if public_key is None:
        return None
    from ._signing import public_key_hex

    return public_key_hex(public_key)


def _risk_entry(entry: RiskEntry, mechanism, setup: RiskSetup) -> RiskEntry:
    """The entry with its certificate recomputed (as recorded if equal up to :data:`RTOL`)."""
    bound, reachable, reason = entry_certificate(
        mechanism, setup, entry.n_samples, entry.resolution
    )
    bound = entry.risk_bound if _close(entry.risk_bound, bound) else bound
    return replace(entry, risk_bound=bound, level_reachable=reachable, reason=reason)


def _expected_risk_card(card: RiskCard) -> RiskCard:
    """A risk card rebuilt: certificates, guarantee, clauses and decision recomputed."""
    setup = card.configuration
    mechanism = _rebuild(setup.mechanism, RISK_MECHANISMS)
    entries = [_risk_entry(entry, mechanism, setup) for entry in card.calibrations]
    reachable = [entry.level_reachable for entry in entries]
    recorded, planned = card.calibration_privacy, mechanism.privacy_guarantee()
    if setup.mondrian is not None:
        adjacency = recorded.adjacency if recorded.adjacency in ADJACENCIES else "replace-one"
        sizes = setup.private_sizes
        planned = mondrian_privacy(
            mechanism,
            "public" if sizes is None else sizes,
            adjacency,
            n_groups_read=sum(reachable) if sizes is None else len(entries),
            n_groups=len(entries),
        )
    released = entries[0].release is not None
    return RiskCard.build(
        contract=card.contract,
        configuration=setup,
        training_privacy=card.training_privacy,
        calibration_privacy=_privacy(recorded, planned, any(reachable), released),
        calibrations=entries,
    )


def _check(card, registry, key: str | None) -> tuple[tuple[Clause, ...], list[str]]:
    """Eq. (3) recomputed, and every problem: digest, signature, recomputed fields."""
    problems = []
    if card.compute_digest() != card.formal_sha256:
        problems.append("formal_sha256 does not match the formal layer: the card was edited.")
    if key is not None:
        from ._signing import check_signature

        problem = check_signature(card.signature, card.signed_payload(), key)
        problems += [] if problem is None else [f"signature: {problem}"]
    try:
        if isinstance(card, RiskCard):
            expected: Any = _expected_risk_card(card)
        else:
            expected = _expected(card, registry, problems)
    except Exception as exc:  # a crafted card must not crash the verifier
        return (), [*problems, f"cannot recompute the card: {exc!r}"]
    problems += _differences(card.formal_dict(), expected.formal_dict(), "formal")
    return expected.clauses, problems


#: Longest string read as a path (longer ones are neither a path nor a card).
_MAX_PATH = 4096


def _load(card: Any) -> ContractCard | RiskCard:
    """A contract card or a risk card (by its schema name) from any accepted form."""
    if isinstance(card, ContractCard | RiskCard):
        return card
    if isinstance(card, str) and card.lstrip()[:1] != "{" and len(card) > _MAX_PATH:
        raise ValueError(
            f"a card is JSON text starting with '{{' or a path; got a string of {len(card)} "
            f"characters starting {card[:40]!r}."
        )
    if isinstance(card, os.PathLike) or (isinstance(card, str) and card.lstrip()[:1] != "{"):
        with open(card, encoding="utf-8") as handle:  # a card's JSON is an object: a path
            card = handle.read(MAX_CHARS + 1)
    data = loads(card) if isinstance(card, str | bytes) else decode(card)
    if isinstance(data, dict) and data.get("schema") == RISK_SCHEMA:
        return RiskCard.from_dict(data)
    return ContractCard.from_dict(data)


def verify_card(card, *, mechanisms=None, public_key=None) -> Verification:
    """Recompute Eq. (3) and every recomputable formal field of a card, never raising on it.

    Parameters
    ----------
    card : ContractCard, RiskCard, str, bytes, dict or path-like
        The card, its JSON text, ``json.loads`` of it, or a path (a string not starting
        ``{``). A risk card (schema ``privconf_sklearn/risk-card``) is checked against its
        :class:`~privconf_sklearn.cards.RiskContract`: its certificates are recomputed
        from the recorded mechanism, sizes, resolutions, grid and level.
    mechanisms : dict of str to type, default=None
        Extra mechanism classes by name (outside :mod:`privconf_sklearn.mechanisms`).
    public_key : Ed25519PublicKey or bytes, default=None
        The issuer's key (object, 32 raw bytes or PEM), obtained from the issuer, not the card;
        the card must then carry a valid signature by it. Needs ``cryptography``.

    Returns
    -------
    Verification
        ``"accepted"`` exactly when the card is consistent and meets its contract; an
        unreadable, malformed or edited card is ``"inconsistent"``, its problems named.

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
    registry, key = _registry(mechanisms), _key(public_key)
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
    trivial = tuple(g for g, release in released if g is not None and not release.informative)
    status = {"feasible": "accepted", "infeasible": "rejected"}.get(card.decision, "unchecked")
    status, authenticated = ("inconsistent", False) if problems else (status, key is not None)
    signed = getattr(card, "signature", None) is not None
    return Verification(
        status, clauses, tuple(problems), informative, authenticated, trivial, signed
    )
