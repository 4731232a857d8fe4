"""Markdown rendering of a contract card, from a template (formal layer first)."""

from __future__ import annotations

import math
from string import Template
from typing import Any

__all__ = ["render_markdown"]

TEMPLATE = Template(
    """# Contract card — $title

**Privacy budget:** $budget

${summary}## Formal layer

### Contract

$contract
### Configuration

$configuration
### Privacy

$privacy
### Certificate

$certificate
$clauses### Release

$release
${selection}Formal-layer SHA-256: `$digest`$signature

## Diagnostic layer (not formal evidence)

$diagnostics$owner"""
)


def _fmt(value: Any) -> str:
    if value is None:
        return "—"
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, float):
        return ("inf" if value > 0 else "-inf") if math.isinf(value) else f"{value:.6g}"
    if isinstance(value, dict):
        return ", ".join(f"{k}={_fmt(v)}" for k, v in value.items())
    if isinstance(value, tuple | list):
        return "(" + ", ".join(_fmt(v) for v in value) + ")"
    return str(value).replace("|", "\\|").replace("\n", " ")


def _table(header: tuple[str, ...], *rows: tuple) -> str:
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(_fmt(cell) for cell in row) + " |" for row in rows]
    return "\n".join(lines) + "\n"


def _spec(spec) -> str:
    return "—" if spec is None else f"{spec.name}({_fmt(spec.params)})"


def _title(card) -> tuple[str, str]:
    """Title (decision, qualified) and the summary paragraph under it."""
    title = card.decision.upper()
    notes = []
    if card.decision == "infeasible":
        failed = [c for c in card.clauses if not c.satisfied]
        notes.append(
            "Failed clauses: "
            + "; ".join(f"`{c.name}` ({c.requirement}, margin {_fmt(c.margin)})" for c in failed)
        )
    elif card.decision == "unchecked":
        notes.append("No contract recorded: the card documents the calibration only.")
    release = card.release
    if release is not None and not release.informative:
        title += " — UNINFORMATIVE (trivial sets / intervals)"
        notes.append(
            "The release is the top of the public range: every prediction set holds "
            "every label and every interval is as wide as the score bounds"
            + (f" ({release.reason})." if release.reason else ".")
        )
    if release is not None and not release.coverage_holds:
        notes.append(f"The coverage guarantee does not hold: {release.reason}.")
    return title, "".join(note + "\n\n" for note in notes)


def _budget(card) -> str:
    cal, train = card.calibration_privacy, card.training_privacy
    rho = f", rho = {_fmt(cal.rho)}" if cal.rho is not None else ""
    holds = "" if cal.holds else " — NOT HOLDING"
    return (
        f"calibration epsilon = {_fmt(cal.epsilon)}, delta = {_fmt(cal.delta)}{rho} "
        f"({cal.notion}, {cal.adjacency} adjacency){holds}; training epsilon = "
        f"{_fmt(train.epsilon)}, delta = {_fmt(train.delta)} ({train.source})."
    )


def _selection(selection) -> str:
    if selection is None:
        return ""
    summary = _table(
        (
            "checked",
            "feasible",
            "selected",
            "evaluated",
            "chosen",
            "best margin",
            "spent eps_cal",
            "spent delta_cal",
            "rows",
        ),
        (
            selection.n_checked,
            selection.n_formally_feasible,
            selection.n_selected,
            selection.n_evaluated,
            selection.chosen_index,
            selection.best_coverage_margin,
            selection.spent_epsilon_cal,
            selection.spent_delta_cal,
            selection.calibration_split,
        ),
    )
    grid = _table(
        ("#", "gamma", "eps_cal", "n", "mechanism", "marginal L", "status", "note"),
        *[
            (
                c.index,
                c.configuration.nominal_coverage,
                c.calibration.epsilon,
                c.configuration.n_samples,
                _spec(c.configuration.mechanism),
                c.certificate.marginal_lower_bound,
                c.status,
                c.note or None,
            )
            for c in selection.candidates
        ],
    )
    rule = f"Rule: {selection.rule}\n"
    return f"### Selection summary (certificate-aware search)\n\n{summary}\n{rule}\n{grid}\n"


def _diagnostics(diagnostics) -> str:
    names = (
        "n_test",
        "empirical_coverage",
        "mean_set_size",
        "singleton_rate",
        "accuracy",
        "mean_width",
    )
    rows = [(n.replace("_", " "), getattr(diagnostics, n)) for n in names]
    rows = [row for row in rows if row[1] is not None] or [("—", None)]
    out = _table(("diagnostic", "value"), *rows)
    if diagnostics.mechanism_details:
        out += f"\nMechanism details: {_fmt(diagnostics.mechanism_details)}\n"
    if diagnostics.candidates:
        out += "\n### Evaluated configurations\n\n" + _table(
            ("#", "coverage", "set size", "width"),
            *[
                (d.candidate_index, d.empirical_coverage, d.mean_set_size, d.mean_width)
                for d in diagnostics.candidates
            ],
        )
    return out


def _owner(owner: dict | None) -> str:
    if not owner:
        return ""
    rows = [(part, _fmt(values)) for part, values in owner.items()]
    return (
        "\n## Owner diagnostics — NOT covered by the privacy guarantee, do not publish\n\n"
        + _table(("part", "values"), *rows)
    )


def render_markdown(card, owner_diagnostics: dict | None = None) -> str:
    """The card as Markdown: decision and budget, contract, configuration, ...

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
    title, summary = _title(card)
    contract, configuration, cal = card.contract, card.configuration, card.calibration_privacy
    certificate, release = card.certificate, card.release
    return TEMPLATE.substitute(
        title=title,
        summary=summary,
        budget=_budget(card),
        contract="—\n"
        if contract is None
        else _table(
            ("gamma_target", "max eps_train", "max eps_cal", "beta", "delta"),
            (
                contract.target_coverage,
                contract.max_epsilon_train,
                contract.max_epsilon_cal,
                contract.beta,
                contract.delta,
            ),
        ),
        configuration=_table(
            ("field", "value"),
            ("task", configuration.task),
            ("nominal coverage gamma", configuration.nominal_coverage),
            ("alpha", configuration.alpha),
            ("calibration size n", configuration.n_samples),
            ("agent sizes", configuration.agent_sizes),
            ("mechanism", _spec(configuration.mechanism)),
            ("conformity score", _spec(configuration.conformity_score)),
            ("model", configuration.estimator),
        ),
        privacy=_table(
            ("", "notion", "epsilon", "delta", "rho", "adjacency", "holds", "source"),
            (
                "training",
                "—",
                card.training_privacy.epsilon,
                card.training_privacy.delta,
                None,
                None,
                None,
                card.training_privacy.source,
            ),
            (
                "calibration",
                cal.notion,
                cal.epsilon,
                cal.delta,
                cal.rho,
                cal.adjacency,
                cal.holds,
                cal.description,
            ),
        ),
        certificate=_table(
            ("L(c)", "confidence", "marginal L", "level reachable", "reason"),
            (
                certificate.lower_bound,
                certificate.confidence,
                certificate.marginal_lower_bound,
                certificate.level_reachable,
                certificate.reason or None,
            ),
        ),
        clauses=""
        if not card.clauses
        else "### Feasibility, Eq. (3)\n\n"
        + _table(
            ("clause", "requirement", "value", "margin", "holds"),
            *[(c.name, c.requirement, c.value, c.margin, c.satisfied) for c in card.clauses],
        )
        + "\n",
        release="Not calibrated (no data read for this configuration).\n"
        if release is None
        else _table(
            (
                "threshold [0, 1]",
                "informative",
                "coverage holds",
                "threshold (score units)",
                "score bounds",
                "bounds from",
                "target level",
                "coverage upper bound",
            ),
            (
                release.threshold,
                release.informative,
                release.coverage_holds,
                release.threshold_score_units,
                release.score_bounds,
                release.score_bounds_source,
                release.target_level,
                release.coverage_upper_bound,
            ),
        ),
        selection=_selection(card.selection),
        digest=card.formal_sha256,
        signature=""
        if card.signature is None
        else f"  \nSigned (Ed25519) by key `{card.signature.public_key}`",
        diagnostics=_diagnostics(card.diagnostics),
        owner=_owner(owner_diagnostics),
    )
