"""
A contract card
===============

A contract card from a certificate-aware search, drawn, saved and verified.

"Contract Cards for Auditable Private Conformal Prediction" (2026), Sec. 4 and
Table 2. A private model (diffprivlib Gaussian naive Bayes, epsilon_train = 4, feature
bounds fixed by a public clipping) on simulated 10-class data; the contract asks for
certified coverage 0.7 with epsilon_train <= 4, epsilon_cal <= 8 and beta = 1e-3. The
search grid is Table 2's: nominal coverage gamma in {0.55, 0.65, 0.75, 0.85},
epsilon_cal in {2, 4, 8} and calibration size n in {1000, 2000, 4000}, with DP-APS
(B = 20, beta = 1e-3).

1. Formal screening: every configuration's certificate ``L(c)`` against the contract,
   without reading data (left panel: grey = fails the contract).
2. Dominance: among feasible configurations, lower gamma and larger budget win
   (light = dominated).
3. Only the remaining ones are calibrated, on disjoint rows (the search costs the
   largest epsilon_cal among them), and compared on evaluation data (blue = evaluated,
   green = chosen).

The right panel is the chosen card's formal layer: each clause of the feasibility
check with its margin, the decision, the digest, and the diagnostics measured on test
data (simulated, hence public). The card is saved as JSON (without owner diagnostics:
publishable) and re-verified from the file. Every number below the figure is printed by
the run that drew it (building the documentation runs this script).

Run:  ``python examples/plot_contract_card.py [--quick] [--output DIR]``. Both modes take
a few seconds (``--quick``, also selected by ``PRIVCONF_EXAMPLES_QUICK=1``, uses a
smaller test set). ``--output DIR`` writes the figure and the card there.
"""

from __future__ import annotations

import argparse
import os
import tempfile
from collections import Counter
from pathlib import Path

import numpy as np
from sklearn.datasets import make_classification

from privconf_sklearn import (
    CertificateAwareSearch,
    Contract,
    PrivateConformalClassifier,
    import_diffprivlib,
    verify_card,
)
from privconf_sklearn.mechanisms import DPAPS

FIGURE = "contract_card.png"
CARD = "contract_card.json"
GAMMAS = (0.55, 0.65, 0.75, 0.85)
EPSILONS = (2.0, 4.0, 8.0)
SIZES = (1000, 2000, 4000)
STATUS_COLOURS = {
    "infeasible": "#d9d9d9",
    "dominated": "#fde0c5",
    "skipped": "#fde0c5",
    "evaluated": "#9ecae1",
    "chosen": "#74c476",
}


def run_search(n_test: int, seed: int):
    """Fit the private model, run the certificate-aware search; return its evaluated card."""
    n_cal = sum(SIZES)  # disjoint rows for the (at most) one evaluated size of each n
    X, y = make_classification(
        n_samples=10000 + n_cal + 2 * n_test,
        n_features=10,
        n_informative=8,
        n_redundant=0,
        n_classes=10,
        n_clusters_per_class=1,
        class_sep=1.5,
        random_state=seed,
    )
    X = X / 4.0
    X = X / np.maximum(1.0, np.linalg.norm(X, axis=1, keepdims=True))  # public clipping
    # diffprivlib through the package's gateway (importable on scikit-learn >= 1.9); its
    # LogisticRegression cannot be built on scikit-learn >= 1.8, its GaussianNB can. The
    # clipping above puts every feature in [-1, 1]: public bounds.
    PrivateGaussianNB = import_diffprivlib().models.GaussianNB
    model = PrivateGaussianNB(epsilon=4.0, bounds=(-1.0, 1.0), random_state=seed).fit(
        X[:10000], y[:10000]
    )
    cal = slice(10000, 10000 + n_cal)
    evaluation = slice(10000 + n_cal, 10000 + n_cal + n_test)
    test = slice(10000 + n_cal + n_test, None)
    search = CertificateAwareSearch(
        PrivateConformalClassifier(
            model, mechanism=DPAPS(epsilon=8.0, n_bins=20), random_state=seed
        ),
        contract=Contract(
            target_coverage=0.7, max_epsilon_train=4.0, max_epsilon_cal=8.0, beta=1e-3
        ),
        param_grid={
            "alpha": [round(1.0 - g, 2) for g in GAMMAS],
            "mechanism__epsilon": list(EPSILONS),
            "calibration_size": list(SIZES),
        },
        random_state=seed,
    ).fit(X[cal], y[cal], X_eval=X[evaluation], y_eval=y[evaluation])
    # The test rows are simulated, so their diagnostics may be published.
    return search.card_.evaluate(X[test], y[test], public=True)


def _grid_panel(axis, card) -> None:
    """Rows: nominal coverage; columns: (n, epsilon_cal); colour: status; text: L(c)."""
    columns = [(n, e) for n in SIZES for e in EPSILONS]
    cells = {}
    for candidate in card.selection.candidates:
        configuration = candidate.configuration
        key = (
            round(configuration.nominal_coverage, 2),
            configuration.n_samples,
            float(configuration.mechanism.params["epsilon"]),
        )
        cells[key] = candidate
    for row, gamma in enumerate(GAMMAS):
        for column, (n, epsilon) in enumerate(columns):
            candidate = cells[(gamma, n, epsilon)]
            axis.add_patch(
                _rectangle(column, row, STATUS_COLOURS[candidate.status]),
            )
            axis.text(
                column + 0.5,
                row + 0.5,
                f"{candidate.certificate.marginal_lower_bound:.3f}",
                ha="center",
                va="center",
                fontsize=7,
            )
    axis.set_xlim(0, len(columns))
    axis.set_ylim(0, len(GAMMAS))
    axis.set_xticks(
        np.arange(len(columns)) + 0.5, [f"n={n}\neps={e:g}" for n, e in columns], fontsize=7
    )
    axis.set_yticks(np.arange(len(GAMMAS)) + 0.5, [f"gamma={g}" for g in GAMMAS], fontsize=8)
    axis.tick_params(length=0)
    for status, colour in STATUS_COLOURS.items():
        if status != "skipped":
            axis.bar(0, 0, color=colour, label=status)
    axis.legend(loc="upper center", bbox_to_anchor=(0.5, -0.16), ncol=4, fontsize=8)
    s = card.selection
    axis.set_title(
        f"certificate L(c) of the {s.n_checked} configurations: {s.n_formally_feasible} "
        f"feasible, {s.n_evaluated} calibrated; search cost eps_cal = {s.spent_epsilon_cal:g}",
        fontsize=9,
    )


def _rectangle(x, y, colour):
    from matplotlib.patches import Rectangle

    return Rectangle((x, y), 1, 1, facecolor=colour, edgecolor="white")


def _card_panel(axis, card, verification) -> None:
    """The chosen card's clauses, decision and diagnostics as a table."""
    axis.axis("off")
    rows = [
        [
            clause.name,
            clause.requirement.replace("the mechanism reaches the nominal level ", "")[:42],
            "-" if clause.margin is None else f"{clause.margin:+.4g}",
            "yes" if clause.satisfied else "NO",
        ]
        for clause in card.clauses
    ]
    table = axis.table(
        cellText=rows,
        colLabels=["clause", "requirement", "margin", "holds"],
        loc="upper center",
        cellLoc="left",
        colWidths=[0.26, 0.5, 0.13, 0.09],
    )
    table.auto_set_font_size(False)
    table.set_fontsize(7)
    table.scale(1.0, 1.3)
    configuration, diagnostics = card.configuration, card.diagnostics
    lines = [
        f"decision: {card.decision.upper()}   (verifier: {verification.status})",
        f"chosen: {configuration.mechanism.name}(epsilon="
        f"{configuration.mechanism.params['epsilon']:g}), gamma = "
        f"{configuration.nominal_coverage:g}, n = {configuration.n_samples}",
        f"eps_train = {card.training_privacy.epsilon:g} ({card.training_privacy.source})",
        f"test coverage {diagnostics.empirical_coverage:.3f}, mean set size "
        f"{diagnostics.mean_set_size:.2f}, accuracy {diagnostics.accuracy:.2f}",
        f"release informative: {card.release.informative}; owner diagnostics not shown",
        f"formal_sha256 {card.formal_sha256[:32]}...",
    ]
    axis.text(0.0, 0.02, "\n".join(lines), fontsize=7.5, family="monospace", va="bottom")
    axis.set_title("the chosen contract card (formal layer and diagnostics)", fontsize=9)


def plot(card, verification):
    """Left: the search grid; right: the card."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, (left, right) = plt.subplots(
        1, 2, figsize=(13, 4.8), gridspec_kw={"width_ratios": [1.15, 1]}, layout="constrained"
    )
    _grid_panel(left, card)
    _card_panel(right, card, verification)
    fig.suptitle(
        "Contract: coverage >= 0.7, eps_train <= 4, eps_cal <= 8, beta = 1e-3 (contract-cards "
        "paper, Table 2 grid, DP-APS)",
        fontsize=10,
    )
    return fig


def findings(card) -> list[str]:
    """What the search did, from the card's selection record."""
    candidates = card.selection.candidates
    statuses = Counter(candidate.status for candidate in candidates)
    infeasible = sorted(
        {round(c.configuration.nominal_coverage, 2) for c in candidates if c.status == "infeasible"}
    )
    chosen = next(c.configuration for c in candidates if c.status == "chosen")
    return [
        f"{len(candidates)} configurations: "
        + ", ".join(f"{count} {status}" for status, count in sorted(statuses.items()))
        + ".",
        "Nominal coverages failing the contract on some certificate (no data read): "
        f"{', '.join(f'{g:g}' for g in infeasible) or 'none'}.",
        f"The search spent epsilon_cal = {card.selection.spent_epsilon_cal:g}, the largest "
        "budget it calibrated with (disjoint rows).",
        f"Chosen: nominal coverage {chosen.nominal_coverage:g}, epsilon_cal "
        f"{float(chosen.mechanism.params['epsilon']):g}, n = {chosen.n_samples}; decision "
        f"{card.decision!r}.",
    ]


def main(argv=None) -> list[Path]:
    """Run the search, save and verify the card, draw the figure; return written paths."""
    parser = argparse.ArgumentParser(description="A contract card.")
    parser.add_argument("--quick", action="store_true", help="smaller evaluation/test sets")
    parser.add_argument("--output", type=Path, default=None, help="also write the figure here")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)
    quick = args.quick or os.environ.get("PRIVCONF_EXAMPLES_QUICK") == "1"
    card = run_search(n_test=2000 if quick else 10000, seed=args.seed)
    for line in findings(card):
        print("-", line)
    with tempfile.TemporaryDirectory() as scratch:
        directory = args.output if args.output is not None else Path(scratch)
        directory.mkdir(parents=True, exist_ok=True)
        card.save(directory / CARD)
        verification = verify_card(directory / CARD)  # re-verified from the saved file
    fig = plot(card, verification)
    print(card.to_markdown())
    print(verification.report())
    written = []
    if args.output is not None:
        written = [args.output / FIGURE, args.output / CARD]
        fig.savefig(written[0], dpi=110)
        print(f"wrote {written[0]} and {written[1]}")
    return written


# %%
# The run
# -------
#
# Low nominal coverages fail the contract on their certificate alone, before any data
# is read; among the feasible configurations, dominated ones (higher nominal coverage
# than needed, or a smaller budget than allowed) are dropped, which leaves about one
# configuration per calibration size. Only those are calibrated, on disjoint rows, so
# the whole search costs the largest ``epsilon_cal`` among them, within the contract;
# the one with the smallest sets on the evaluation data is chosen. Verify a saved card
# with ``python -m privconf_sklearn card verify contract_card.json`` and print it with
# ``python -m privconf_sklearn card show contract_card.json``. See
# :doc:`/user_guide/cards`.

if __name__ == "__main__":
    main()
