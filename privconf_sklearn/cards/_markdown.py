"""Markdown rendering of a contract card, from a template (formal layer first).

Every part says whether the card's signature covers it: the formal and diagnostic layers
when the card is signed, never the owner diagnostics.
"""

from __future__ import annotations

import math
from functools import reduce
from string import Template
from typing import Any

from ._records import EMPIRICAL

__all__ = ["render_markdown", "render_risk_markdown"]

TEMPLATE = Template(
    """# Contract card — $title

**Privacy budget:** $budget

${notes}## Formal layer

${formal}Formal-layer SHA-256: `$digest`

$signature

## Diagnostic layer (not formal evidence; $covered)

$diagnostics"""
)

#: Columns of each table: attribute paths of the records in its rows (``a.b``: ``row.a.b``).
CONTRACT = (
    "target_coverage max_epsilon_train max_epsilon_cal beta delta adjacency require_informative"
)
PRIVACY = "epsilon delta rho notion adjacency holds source description"
CERTIFICATE = (
    "group n_samples certificate.lower_bound certificate.confidence "
    "certificate.marginal_lower_bound certificate.level_reachable certificate.reason"
)
CLAUSE = "name requirement value margin satisfied"
RISK_CONTRACT = (
    "loss loss_bound max_risk max_epsilon_train max_epsilon_cal delta adjacency require_informative"
)
RISK_CERTIFICATE = "group n_samples resolution risk_bound level_reachable reason"
RISK_RELEASE = (
    "group release.index release.threshold release.informative release.target_risk release.reason"
)
RELEASE = (
    "group release.threshold release.informative release.coverage_holds release.reason "
    "release.threshold_score_units release.score_bounds release.score_bounds_source "
    "release.target_level release.coverage_upper_bound"
)
SELECTION = (
    "n_checked n_formally_feasible n_selected n_evaluated chosen_index best_coverage_margin "
    "spent_epsilon_cal spent_delta_cal calibration_split"
)
CANDIDATE = (
    "index configuration.nominal_coverage calibration.epsilon configuration.n_samples "
    "configuration.mechanism certificate.marginal_lower_bound status note"
)


def _fmt(value: Any) -> str:
    if value is None or value == "":
        return "—"
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, float):
        return ("inf" if value > 0 else "-inf") if math.isinf(value) else f"{value:.6g}"
    if hasattr(value, "params"):  # a ComponentSpec
        return f"{value.name}({_fmt(value.params)})"
    if isinstance(value, dict):
        return ", ".join(f"{k}={_fmt(v)}" for k, v in value.items())
    if isinstance(value, tuple | list):
        return "(" + ", ".join(_fmt(v) for v in value) + ")"
    return str(value).replace("|", "\\|").replace("\n", " ")


def _table(columns: str, *records, labels: tuple[str, ...] = ()) -> str:
    """One row per record, one column per attribute path (a missing attribute reads None)."""
    paths = [path.split(".") for path in columns.split()]
    header = [*([""] if labels else []), *(path[-1] for path in paths)]
    lines = [header, ["---"] * len(header)]
    for i, record in enumerate(records):
        cells = (reduce(lambda r, name: getattr(r, name, None), path, record) for path in paths)
        lines.append([*labels[i : i + 1], *map(_fmt, cells)])
    return "".join("| " + " | ".join(line) + " |\n" for line in lines)


def _fields(record) -> str:
    """A record as a two-column table of its fields."""
    return _dict_fields(vars(record))


def _dict_fields(values: dict) -> str:
    """Names and values as a two-column table."""
    rows = "".join(f"| {name} | {_fmt(value)} |\n" for name, value in values.items())
    return "| field | value |\n|---|---|\n" + rows


def _decision_notes(card) -> list[str]:
    """The failed clauses, or why nothing was checked."""
    if card.decision == "unchecked":
        return ["No contract recorded: the card documents the calibration only."]
    failed = [c for c in card.clauses if not c.satisfied]
    if not failed:
        return []
    listed = "; ".join(f"`{c.name}` ({c.requirement}, margin {_fmt(c.margin)})" for c in failed)
    return [f"Failed clauses: {listed}"]


def _trivial_notes(entries) -> tuple[str, list[str]]:
    """The title's qualifier and the note for uninformative releases."""
    trivial = [e.group for e in entries if not e.release.informative]
    if not trivial:
        return "", []
    if trivial != [None]:
        groups = ", ".join(str(g) for g in trivial[:10])
        return f" — UNINFORMATIVE in groups {groups}", [
            "Those groups' sets hold every label / intervals span the score bounds."
        ]
    return " — UNINFORMATIVE (trivial sets / intervals)", [
        "The release is the top of the public range: every set holds every label and "
        "every interval is as wide as the score bounds."
    ]


def _notes(card) -> tuple[str, str]:
    """The title (the decision, qualified) and the notes under it."""
    entries = [e for e in card.calibrations if e.release is not None]
    qualifier, trivial = _trivial_notes(entries)
    notes = [*_decision_notes(card), *trivial]
    if len(card.calibrations) == 1 and entries and entries[0].release.reason:
        notes.append(f"Release: {entries[0].release.reason.rstrip('.')}.")
    if any(not e.release.coverage_holds for e in entries):
        notes.append("The coverage guarantee does not hold for this release.")
    return card.decision.upper() + qualifier, "".join(note + "\n\n" for note in notes)


def _contract(contract, grouped: bool) -> str:
    """The contract's table and its adjacency and informativeness clauses in words."""
    if contract is None:
        return "—\n"
    informative = "must be informative" if contract.require_informative else "may be trivial"
    where = " in every group" if grouped else ""
    return (
        _table(CONTRACT, contract)
        + f"\nBudgets are stated under {contract.adjacency} adjacency (a guarantee stated "
        f"under the other relation is restated before it is compared); the release "
        f"{informative}{where} (not every set the whole label set, not every interval the "
        "whole score range).\n"
    )


def _signature(card) -> tuple[str, str]:
    """What the signature covers, and how the diagnostic layer's heading says it."""
    if card.signature is None:
        return (
            "**Unsigned.** Nothing on this card is signed: the digest guards the formal layer "
            "against accidental edits only (anyone can recompute it), and the diagnostic "
            "layer is outside it.",
            "UNSIGNED, outside the digest",
        )
    return (
        f"**Signed** (Ed25519) by key `{card.signature.public_key}`: the signature covers "
        "the schema header, the formal layer and the diagnostic layer (check it with the "
        "issuer's public key: `card verify --public-key`). Owner diagnostics are never "
        "signed.",
        "signed",
    )


def _diagnostics(diagnostics, owner_diagnostics, names: tuple[str, ...] = EMPIRICAL) -> str:
    text = _table(" ".join(names), diagnostics)
    if diagnostics.mechanism_details:
        text += f"\nMechanism details: {_fmt(diagnostics.mechanism_details)}\n"
    if diagnostics.candidates:
        text += "\nEvaluated configurations:\n\n"
        text += _table(f"candidate_index {' '.join(EMPIRICAL)}", *diagnostics.candidates)
    if owner_diagnostics:
        text += (
            "\n## Owner diagnostics — NOT covered by the privacy guarantee, UNSIGNED, do not "
            "publish\n\n"
        )
        text += "".join(f"- {part}: {_fmt(values)}\n" for part, values in owner_diagnostics.items())
    return text


def render_markdown(card, owner_diagnostics: dict | None = None) -> str:
    """The card as Markdown: decision and budget first, then the formal layer.

    Parameters
    ----------
    card : ContractCard
        The card.
    owner_diagnostics : dict or None, default=None
        Owner diagnostics to append (only when the owner asked for them).

    Returns
    -------
    str
    """
    title, notes = _notes(card)
    cal, train, selection = card.calibration_privacy, card.training_privacy, card.selection
    released = card.calibrations[0].release is not None
    grouped = card.configuration.groups is not None
    sections = [
        ("Contract", _contract(card.contract, grouped)),
        ("Configuration", _fields(card.configuration)),
        ("Privacy", _table(PRIVACY, train, cal, labels=("training", "calibration"))),
        ("Certificate", _table(CERTIFICATE, *card.calibrations)),
        (
            "Feasibility, Eq. (3)",
            _table(CLAUSE, *card.clauses) if card.clauses else "— (no contract)\n",
        ),
        ("Release", _table(RELEASE, *card.calibrations) if released else "Not calibrated.\n"),
    ]
    if selection is not None:
        rule = f"\nRule: {selection.rule}\n\n"
        text = _table(SELECTION, selection) + rule + _table(CANDIDATE, *selection.candidates)
        sections.append(("Selection summary (certificate-aware search)", text))
    return _page(card, title, notes, sections, owner_diagnostics)


def _page(card, title: str, notes: str, sections, owner_diagnostics) -> str:
    """The Markdown page of any card: title, budget, notes, formal sections, diagnostics."""
    cal, train = card.calibration_privacy, card.training_privacy
    rho = "" if cal.rho is None else f", rho = {_fmt(cal.rho)}"
    signature, covered = _signature(card)
    return TEMPLATE.substitute(
        title=title,
        budget=f"calibration epsilon = {_fmt(cal.epsilon)}, delta = {_fmt(cal.delta)}{rho} "
        f"({cal.notion}, {cal.adjacency} adjacency{'' if cal.holds else ', NOT HOLDING'}); "
        f"training epsilon = {_fmt(train.epsilon)}, delta = {_fmt(train.delta)} "
        f"({train.source}).",
        notes=notes,
        formal="".join(f"### {heading}\n\n{text}\n" for heading, text in sections),
        digest=card.formal_sha256,
        signature=signature,
        covered=covered,
        diagnostics=_diagnostics(card.diagnostics, owner_diagnostics, card.empirical_names),
    )


def _risk_sections(card) -> list[tuple[str, str]]:
    released = card.calibrations[0].release is not None
    cal, train = card.calibration_privacy, card.training_privacy
    grid = card.configuration.thresholds
    setup = {
        **{k: v for k, v in vars(card.configuration).items() if k != "group_sizes" or v},
        "thresholds": f"{len(grid)} candidates, from {_fmt(grid[0])} down to {_fmt(grid[-1])}",
    }
    contract = "—\n" if card.contract is None else _table(RISK_CONTRACT, card.contract)
    return [
        ("Contract", contract),
        ("Configuration", _dict_fields(setup)),
        ("Privacy", _table(PRIVACY, train, cal, labels=("training", "calibration"))),
        ("Certificate: E[loss] <= risk_bound", _table(RISK_CERTIFICATE, *card.calibrations)),
        ("Clauses", _table(CLAUSE, *card.clauses) if card.clauses else "— (no contract)\n"),
        ("Release", _table(RISK_RELEASE, *card.calibrations) if released else "Not calibrated.\n"),
    ]


def render_risk_markdown(card, owner_diagnostics: dict | None = None) -> str:
    """A risk card as Markdown: decision and budget first, then the formal layer.

    Parameters
    ----------
    card : RiskCard
        The card.
    owner_diagnostics : dict or None, default=None
        Owner diagnostics to append (only when the owner asked for them).

    Returns
    -------
    str
    """
    trivial = [e.group for e in card.calibrations if e.release and not e.release.informative]
    title = card.decision.upper() + (" — UNINFORMATIVE (every label)" if trivial else "")
    notes = "".join(note + "\n\n" for note in _decision_notes(card))
    text = _page(card, title, notes, _risk_sections(card), owner_diagnostics)
    return text.replace("# Contract card", "# Risk card", 1)
