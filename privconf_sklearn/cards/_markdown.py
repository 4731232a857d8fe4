"""Markdown rendering of a contract card, from a template (formal layer first)."""

from __future__ import annotations

import math
from functools import reduce
from string import Template
from typing import Any

from ._records import EMPIRICAL

__all__ = ["render_markdown"]

TEMPLATE = Template(
    """# Contract card — $title

**Privacy budget:** $budget

${notes}## Formal layer

${formal}Formal-layer SHA-256: `$digest`$signature

## Diagnostic layer (not formal evidence)

$diagnostics"""
)

#: Columns of each table: attribute paths of the records in its rows (``a.b``: ``row.a.b``).
CONTRACT = "target_coverage max_epsilon_train max_epsilon_cal beta delta"
PRIVACY = "epsilon delta rho notion adjacency holds source description"
CERTIFICATE = (
    "group n_samples certificate.lower_bound certificate.confidence "
    "certificate.marginal_lower_bound certificate.level_reachable certificate.reason"
)
CLAUSE = "name requirement value margin satisfied"
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
    rows = "".join(f"| {name} | {_fmt(value)} |\n" for name, value in vars(record).items())
    return "| field | value |\n|---|---|\n" + rows


def _notes(card) -> tuple[str, str]:
    """The title (the decision, qualified) and the notes under it."""
    title, notes = card.decision.upper(), []
    if card.decision == "infeasible":
        failed = [c for c in card.clauses if not c.satisfied]
        notes.append(
            "Failed clauses: "
            + "; ".join(f"`{c.name}` ({c.requirement}, margin {_fmt(c.margin)})" for c in failed)
        )
    if card.decision == "unchecked":
        notes.append("No contract recorded: the card documents the calibration only.")
    entries = [e for e in card.calibrations if e.release is not None]
    trivial = [e.group for e in entries if not e.release.informative]
    if trivial and trivial != [None]:
        title += f" — UNINFORMATIVE in groups {', '.join(str(g) for g in trivial[:10])}"
        notes.append("Those groups' sets hold every label / intervals span the score bounds.")
    elif trivial:
        title += " — UNINFORMATIVE (trivial sets / intervals)"
        notes.append(
            "The release is the top of the public range: every set holds every label and "
            "every interval is as wide as the score bounds."
        )
    if len(card.calibrations) == 1 and entries and entries[0].release.reason:
        notes.append(f"Release: {entries[0].release.reason.rstrip('.')}.")
    if any(not e.release.coverage_holds for e in entries):
        notes.append("The coverage guarantee does not hold for this release.")
    return title, "".join(note + "\n\n" for note in notes)


def _diagnostics(diagnostics, owner_diagnostics) -> str:
    text = _table(" ".join(EMPIRICAL), diagnostics)
    if diagnostics.mechanism_details:
        text += f"\nMechanism details: {_fmt(diagnostics.mechanism_details)}\n"
    if diagnostics.candidates:
        text += "\nEvaluated configurations:\n\n"
        text += _table(f"candidate_index {' '.join(EMPIRICAL)}", *diagnostics.candidates)
    if owner_diagnostics:
        text += "\n## Owner diagnostics — NOT covered by the privacy guarantee, do not publish\n\n"
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
    rho = "" if cal.rho is None else f", rho = {_fmt(cal.rho)}"
    released = card.calibrations[0].release is not None
    sections = [
        ("Contract", "—\n" if card.contract is None else _table(CONTRACT, card.contract)),
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
    return TEMPLATE.substitute(
        title=title,
        budget=f"calibration epsilon = {_fmt(cal.epsilon)}, delta = {_fmt(cal.delta)}{rho} "
        f"({cal.notion}, {cal.adjacency} adjacency{'' if cal.holds else ', NOT HOLDING'}); "
        f"training epsilon = {_fmt(train.epsilon)}, delta = {_fmt(train.delta)} "
        f"({train.source}).",
        notes=notes,
        formal="".join(f"### {heading}\n\n{text}\n" for heading, text in sections),
        digest=card.formal_sha256,
        signature=""
        if card.signature is None
        else f"  \nSigned (Ed25519) by key `{card.signature.public_key}`",
        diagnostics=_diagnostics(card.diagnostics, owner_diagnostics),
    )
