"""The demo run by ``python -m privconf_sklearn demo``.

Paper 002 Sec. 5.1 setting: simulated two-Gaussian data (n = 10000, split 60/24/16), a
diffprivlib Gaussian naive Bayes trained with epsilon = 2, and one private calibration
per mechanism at alpha = 0.1, epsilon_cal = 1; ends with the contract card (paper 003)
of the ExponQ calibration.
"""

from __future__ import annotations

import math
import warnings

import numpy as np
from diffprivlib.accountant import BudgetAccountant
from diffprivlib.models import GaussianNB

from .cards import Contract, ContractCard
from .classification import PrivateConformalClassifier
from .datasets import make_two_gaussians
from .mechanisms import DPAPS, PCOQS, ExponQ, FedCP2QQ, FedCPQQ, SplitConformal
from .metrics import mean_set_size, set_coverage, singleton_rate

__all__ = ["demo_mechanisms", "run_demo"]

#: Public feature bounds given to the DP model (about 3.5 standard deviations).
FEATURE_BOUNDS = (-10.0, 10.0)

#: Failure probability of the contract whose card the demo prints for ExponQ
#: (target 1 - alpha, epsilon_train <= epsilon_model, epsilon_cal <= epsilon_cal).
DEMO_CONTRACT_BETA = 1e-3


def demo_mechanisms(epsilon_cal: float):
    """``(label, mechanism)`` pairs the demo calibrates with: every mechanism we have."""
    return [
        ("SplitConformal (non-private)", SplitConformal()),
        ("ExponQ", ExponQ(epsilon=epsilon_cal)),
        ("ExponQ (monotone)", ExponQ(epsilon=epsilon_cal, scaling="monotone")),
        # Paper 002's setting rho = eps^2 / 2: zCDP, NOT eps-DP (the table prints both).
        (f"P-COQS (rho = {epsilon_cal**2 / 2:g})", PCOQS(rho=epsilon_cal**2 / 2)),
        ("P-COQS inflated", PCOQS(rho=epsilon_cal**2 / 2, inflated=True)),
        ("DP-APS", DPAPS(epsilon=epsilon_cal)),
        # Federated (paper 004): the calibration rows are spread over agents via groups.
        ("FedCP-QQ (non-private)", FedCPQQ()),
        ("FedCP2-QQ (local DP)", FedCP2QQ(epsilon=epsilon_cal)),
    ]


def _format_privacy(privacy) -> str:
    if privacy.notion == "none":
        return "none (eps = inf)"
    if privacy.notion == "zcdp":
        return f"{privacy.rho:.3g}-zCDP = ({privacy.epsilon:.3g}, {privacy.delta:.0e})-DP"
    kind = "local " if privacy.notion == "local" else ""
    return f"{privacy.epsilon:g}-{kind}DP"


def run_demo(
    *,
    n_samples: int = 10000,
    alpha: float = 0.1,
    epsilon_model: float = 2.0,
    epsilon_cal: float = 1.0,
    score: str = "lac",
    seed: int | None = None,
    n_agents: int = 10,
    print_fn=print,
):
    """Train a DP model, calibrate it with every mechanism and print the results.

    Parameters
    ----------
    n_samples : int, default=10000
        Total simulated rows (60% train, 24% calibration, 16% test).
    alpha : float, default=0.1
        Target miscoverage.
    epsilon_model : float, default=2.0
        Privacy budget of the diffprivlib Gaussian naive Bayes.
    epsilon_cal : float, default=1.0
        Calibration privacy budget of each private mechanism.
    score : {"lac", "aps"}, default="lac"
        Conformity score.
    seed : int or None, default=None
        Seed for the model's and the mechanisms' noise; None uses the cryptographic
        source (the data simulation is always seeded with 0).
    n_agents : int, default=10
        Number of agents the calibration rows are spread over for federated mechanisms.
    print_fn : callable, default=print
        Where the report goes.

    Returns
    -------
    list of dict
        One row per mechanism with the printed metrics and the fitted estimator.
    """
    X, y = make_two_gaussians(n_samples, random_state=0)
    n_train, n_cal = int(0.6 * n_samples), int(0.24 * n_samples)
    X_train, y_train = X[:n_train], y[:n_train]
    X_cal, y_cal = X[n_train : n_train + n_cal], y[n_train : n_train + n_cal]
    X_test, y_test = X[n_train + n_cal :], y[n_train + n_cal :]
    groups = np.arange(n_cal) % n_agents

    model_accountant = BudgetAccountant()
    model = GaussianNB(
        epsilon=epsilon_model,
        bounds=FEATURE_BOUNDS,
        accountant=model_accountant,
        random_state=seed,
    ).fit(X_train, y_train)
    accuracy = float((model.predict(X_test) == y_test).mean())
    print_fn(
        f"privconf_sklearn demo: paper 002 Sec. 5.1 data, n = {n_samples} "
        f"(train {n_train} / calibration {n_cal} / test {len(y_test)}), alpha = {alpha}, "
        f"score = {score}"
    )
    print_fn(
        f"model: diffprivlib GaussianNB, epsilon_model = {epsilon_model:g}, "
        f"test accuracy = {accuracy:.3f}"
    )
    header = (
        f"{'mechanism':<30} {'privacy of calibration':<28} {'coverage':>8} "
        f"{'set size':>8} {'singleton':>9} {'threshold':>9} {'cov. bound':>10} "
        f"{'eps total':>9}"
    )
    print_fn(header)
    print_fn("-" * len(header))
    rows = []
    for label, mechanism in demo_mechanisms(epsilon_cal):
        accountant = BudgetAccountant(spent_budget=model_accountant.spent_budget)
        estimator = PrivateConformalClassifier(
            model,
            mechanism=mechanism,
            alpha=alpha,
            conformity_score=score,
            random_state=seed,
            accountant=accountant,
        )
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", UserWarning)
            estimator.fit_calibrate(
                X_cal, y_cal, groups=groups if mechanism.requires_groups else None
            )
        sets = estimator.predict_set(X_test)
        calibration = estimator.calibration_
        total = accountant.total()[0]
        row = {
            "mechanism": label,
            "privacy": _format_privacy(calibration.privacy),
            "coverage": set_coverage(y_test, sets, estimator.classes_),
            "set_size": mean_set_size(sets),
            "singleton_rate": singleton_rate(sets),
            "threshold": estimator.threshold_,
            "coverage_lower_bound": calibration.coverage_lower_bound,
            "epsilon_total": total,
            "estimator": estimator,
        }
        rows.append(row)
        bound = f"{row['coverage_lower_bound']:.4f}"
        if calibration.lower_bound_confidence < 1:
            bound += "*"
        print_fn(
            f"{label:<30} {row['privacy']:<28} {row['coverage']:>8.4f} "
            f"{row['set_size']:>8.4f} {row['singleton_rate']:>9.4f} "
            f"{row['threshold']:>9.4f} {bound:>10} "
            f"{'inf' if math.isinf(total) else f'{total:.3g}':>9}"
        )
    print_fn(
        "coverage/set size/singleton: on the test rows; cov. bound: formal lower bound on "
        "coverage (* = holds with probability 1 - beta only); eps total: model + calibration."
    )
    exponq = next(row for row in rows if row["mechanism"] == "ExponQ")
    contract = Contract(
        target_coverage=1.0 - alpha,
        max_epsilon_train=epsilon_model,
        max_epsilon_cal=epsilon_cal,
        beta=DEMO_CONTRACT_BETA,
    )
    card = ContractCard.from_estimator(exponq["estimator"], contract).evaluate(X_test, y_test)
    print_fn("")
    print_fn(card.to_markdown())
    return rows
