"""Markdown rendering of a contract card (formal layer first, then diagnostics)."""

from __future__ import annotations

import math
from typing import Any

__all__ = ["render_markdown"]


def _fmt(value: Any) -> str:
    if value is None:
        return "—"
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, float):
        if math.isinf(value):
            return "inf" if value > 0 else "-inf"
        return f"{value:.6g}"
    if isinstance(value, dict):
        return ", ".join(f"{k}={v if isinstance(v, bool) else _fmt(v)}" for k, v in value.items())
    if isinstance(value, tuple):
        return "(" + ", ".join(_fmt(v) for v in value) + ")"
    return str(value).replace("|", "\\|")


def _table(header: tuple[str, ...], rows: list[tuple]) -> list[str]:
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    lines.extend("| " + " | ".join(_fmt(cell) for cell in row) + " |" for row in rows)
    return [*lines, ""]


def _spec(spec) -> str:
    if spec is None:
        return "—"
    return f"{spec.name}({_fmt(spec.params) if spec.params else ''})"


def render_markdown(card) -> str:
    """The card as Markdown: decision, contract, configuration, certificate, clauses...

    Parameters
    ----------
    card : ContractCard
        The card.

    Returns
    -------
    str
    """
    decision = {"feasible": "FEASIBLE", "infeasible": "INFEASIBLE", "unchecked": "UNCHECKED"}
    out = [f"# Contract card — {decision[card.decision]}", ""]
    if card.decision == "infeasible":
        failed = [c for c in card.clauses if not c.satisfied]
        out += [
            "Failed clauses: "
            + "; ".join(
                f"`{c.name}` ({c.requirement}"
                + ("" if c.margin is None else f", margin {_fmt(c.margin)}")
                + ")"
                for c in failed
            ),
            "",
        ]
    elif card.decision == "unchecked":
        out += ["No contract recorded: the card documents the calibration only.", ""]
    out += ["## Formal layer", "", "### Contract", ""]
    contract = card.contract
    if contract is None:
        out += ["—", ""]
    else:
        out += _table(
            ("gamma_target", "max eps_train", "max eps_cal", "beta", "delta"),
            [
                (
                    contract.target_coverage,
                    contract.max_epsilon_train,
                    contract.max_epsilon_cal,
                    contract.beta,
                    contract.delta,
                )
            ],
        )
    configuration = card.configuration
    out += ["### Configuration", ""]
    out += _table(
        ("field", "value"),
        [
            ("task", configuration.task),
            ("nominal coverage gamma", configuration.nominal_coverage),
            ("alpha", configuration.alpha),
            ("calibration size n", configuration.n_samples),
            ("mechanism", _spec(configuration.mechanism)),
            ("conformity score", _spec(configuration.conformity_score)),
            ("model", configuration.estimator),
        ],
    )
    training, calibration = card.training_privacy, card.calibration_privacy
    out += ["### Privacy coordinates", ""]
    out += _table(
        ("", "notion", "epsilon", "delta", "rho", "holds", "source / adjacency"),
        [
            ("training", "—", training.epsilon, training.delta, None, None, training.source),
            (
                "calibration",
                calibration.notion,
                calibration.epsilon,
                calibration.delta,
                calibration.rho,
                calibration.holds,
                calibration.adjacency,
            ),
        ],
    )
    if calibration.description:
        out += [f"Calibration guarantee: {calibration.description}", ""]
    certificate = card.certificate
    out += ["### Certificate", ""]
    out += _table(
        ("L(c)", "confidence", "marginal L", "level reachable", "reason"),
        [
            (
                certificate.lower_bound,
                certificate.confidence,
                certificate.marginal_lower_bound,
                certificate.level_reachable,
                certificate.reason or None,
            )
        ],
    )
    if card.clauses:
        out += ["### Feasibility, Eq. (3)", ""]
        out += _table(
            ("clause", "requirement", "value", "margin", "holds"),
            [(c.name, c.requirement, c.value, c.margin, c.satisfied) for c in card.clauses],
        )
    release = card.release
    out += ["### Release", ""]
    if release is None:
        out += ["Not calibrated (no data read for this configuration).", ""]
    else:
        out += _table(
            (
                "threshold [0, 1]",
                "threshold (score units)",
                "score bounds",
                "target level",
                "coverage upper bound",
            ),
            [
                (
                    release.threshold,
                    release.threshold_score_units,
                    release.score_bounds,
                    release.target_level,
                    release.coverage_upper_bound,
                )
            ],
        )
    selection = card.selection
    if selection is not None:
        out += ["### Selection summary (certificate-aware search)", ""]
        out += _table(
            (
                "checked",
                "formally feasible",
                "selected",
                "evaluated",
                "chosen index",
                "best coverage margin",
                "spent eps_cal",
                "spent delta_cal",
                "rows",
            ),
            [
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
                )
            ],
        )
        out += [f"Rule: {selection.rule}", ""]
        out += _table(
            ("#", "gamma", "eps_cal", "n", "mechanism", "marginal L", "status", "note"),
            [
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
    out += [f"Formal-layer SHA-256: `{card.formal_sha256}`", ""]
    out += _diagnostics(card.diagnostics)
    return "\n".join(out)


def _diagnostics(diagnostics) -> list[str]:
    out = ["## Diagnostic layer (not formal evidence)", ""]
    rows = [
        ("test rows", diagnostics.n_test),
        ("empirical coverage", diagnostics.empirical_coverage),
        ("mean set size", diagnostics.mean_set_size),
        ("singleton rate", diagnostics.singleton_rate),
        ("model accuracy", diagnostics.accuracy),
        ("mean interval width", diagnostics.mean_width),
        ("certificate width W(c)", diagnostics.certificate_width),
        ("observed threshold inflation", diagnostics.observed_inflation),
        ("non-private grid threshold", diagnostics.grid_threshold),
    ]
    out += _table(("diagnostic", "value"), [r for r in rows if r[1] is not None] or [("—", None)])
    if diagnostics.diagnostics_are_private is False:
        out += [
            "Certificate diagnostics are data-dependent and were not privatised: publish "
            "them only in a trusted audit setting (paper 003 Sec. 5).",
            "",
        ]
    if diagnostics.redacted:
        out += ["Non-private calibration diagnostics were redacted.", ""]
    if diagnostics.mechanism_details:
        out += [f"Mechanism details: {_fmt(diagnostics.mechanism_details)}", ""]
    if diagnostics.candidates:
        out += ["### Evaluated configurations", ""]
        out += _table(
            ("#", "coverage", "set size", "width", "cert. width", "inflation"),
            [
                (
                    d.candidate_index,
                    d.empirical_coverage,
                    d.mean_set_size,
                    d.mean_width,
                    d.certificate_width,
                    d.observed_inflation,
                )
                for d in diagnostics.candidates
            ],
        )
    return out
