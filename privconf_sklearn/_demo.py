"""The demo run by ``python -m privconf_sklearn demo``.

The simulation of Romanus & Molinari (2025, Sec. 5.1): two Gaussian classes
(n = 10000, split 60 / 24 / 16 % into training, calibration and test rows), a
diffprivlib Gaussian naive Bayes trained with epsilon = 2, and one calibration per
mechanism at alpha = 0.1 and the *same* calibration budget for every private mechanism:
pure epsilon-DP for ExponQ, DP-APS and FedCP2-QQ (local), and (epsilon, delta)-DP with
delta = 1e-5 for P-COQS (its ``epsilon=`` entry, so that the rows compare at one
epsilon). Every row is either informative or says why not and from which calibration
size it would be. The demo ends with the contract card of the ExponQ calibration.
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
from .mechanisms import DPAPS, PCOQS, ExponQ, FedCP2QQ, FedCPQQ, QuantileMechanism, SplitConformal
from .metrics import mean_set_size, set_coverage, singleton_rate

__all__ = ["demo_mechanisms", "run_demo"]

#: Public feature bounds given to the DP model (about 3.5 standard deviations).
FEATURE_BOUNDS = (-10.0, 10.0)

#: Failure probability of the contract whose card the demo prints for ExponQ
#: (target 1 - alpha, epsilon_train <= epsilon_model, epsilon_cal <= epsilon_cal).
DEMO_CONTRACT_BETA = 1e-3

#: delta of P-COQS's (epsilon, delta) budget in the demo.
PCOQS_DELTA = 1e-5


def demo_mechanisms(epsilon_cal: float, n_agents: int = 10) -> list[tuple[str, QuantileMechanism]]:
    """``(label, mechanism)`` pairs the demo calibrates with, at one budget ``epsilon_cal``.

    Every private mechanism spends ``epsilon_cal`` under replace-one adjacency (P-COQS
    with ``delta = 1e-5``). The monotone ExponQ is left out: it costs ``2 epsilon``
    under replace-one, so it would not compare at the same budget.
    """
    return [
        ("SplitConformal (non-private)", SplitConformal()),
        ("ExponQ", ExponQ(epsilon=epsilon_cal)),
        ("ExponQ (paper scaling)", ExponQ(epsilon=epsilon_cal, scaling="paper")),
        ("P-COQS", PCOQS(epsilon=epsilon_cal, delta=PCOQS_DELTA)),
        ("P-COQS inflated", PCOQS(epsilon=epsilon_cal, delta=PCOQS_DELTA, inflated=True)),
        ("DP-APS", DPAPS(epsilon=epsilon_cal)),
        # Federated (Humbert et al. 2023): the calibration rows are spread over agents.
        (f"FedCP-QQ ({n_agents} agents)", FedCPQQ(n_agents=n_agents)),
        (f"FedCP2-QQ ({n_agents} agents)", FedCP2QQ(epsilon=epsilon_cal, n_agents=n_agents)),
    ]


def _format_privacy(privacy) -> str:
    if privacy.notion == "none":
        return "none (eps = inf)"
    if privacy.notion == "zcdp":
        return f"({privacy.epsilon:.3g}, {privacy.delta:.0e})-DP"
    kind = "local-" if privacy.notion == "local" else ""
    return f"{privacy.epsilon:g}-{kind}DP"


def _status(
    estimator,
    mechanism: QuantileMechanism,
    alpha: float,
    n_cal: int,
    n_agents: int,
    quantile_at_top: bool,
):
    """``"informative"``, or why the release is trivial and from which size it would not be.

    ``quantile_at_top``: the non-private split-conformal threshold is the top of the score
    range, i.e. the scores themselves, not the noise or the size, make every set trivial.
    """
    if estimator.calibration_.informative:
        return "informative"
    federated = mechanism.requires_groups
    needed = mechanism.min_informative_samples(alpha)  # per agent for federated ones
    have = n_cal // n_agents if federated else n_cal
    unit = "rows per agent" if federated else "calibration rows"
    if needed > have:
        return f"TRIVIAL: needs >= {needed} {unit} (has {have})"
    if quantile_at_top:
        return "TRIVIAL: the scores' quantile is the top of their range (try --score lac)"
    return f"TRIVIAL: the noise released the top (informative from {needed} {unit})"


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
    score : {"lac", "aps", "aps_randomized", "raps"}, default="lac"
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
        One row per mechanism with the printed metrics, the status and the fitted
        estimator.
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
        "privconf_sklearn demo: the simulation of Romanus & Molinari (2025, Sec. 5.1), "
        f"n = {n_samples} (train {n_train} / calibration {n_cal} / test {len(y_test)}), "
        f"alpha = {alpha}, score = {score}"
    )
    print_fn(
        f"model: diffprivlib GaussianNB, epsilon_model = {epsilon_model:g}, "
        f"test accuracy = {accuracy:.3f}; every private calibration spends "
        f"epsilon_cal = {epsilon_cal:g} (P-COQS with delta = {PCOQS_DELTA:g})"
    )
    header = (
        f"{'mechanism':<28} {'privacy of calibration':<23} {'coverage':>8} "
        f"{'set size':>8} {'singleton':>9} {'threshold':>9} {'cov. bound':>10} "
        f"{'eps total':>9}  status"
    )
    print_fn(header)
    print_fn("-" * len(header))
    rows = []
    quantile_at_top = False  # set by the first, non-private row (split conformal)
    for label, mechanism in demo_mechanisms(epsilon_cal, n_agents):
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
            # Trivial releases are reported in the status column instead.
            warnings.simplefilter("ignore", UserWarning)
            estimator.fit_calibrate(
                X_cal, y_cal, groups=groups if mechanism.requires_groups else None
            )
        sets = estimator.predict_set(X_test)
        calibration = estimator.calibration_
        if isinstance(mechanism, SplitConformal):
            quantile_at_top = not calibration.informative
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
            "status": _status(estimator, mechanism, alpha, n_cal, n_agents, quantile_at_top),
            "estimator": estimator,
        }
        rows.append(row)
        bound = f"{row['coverage_lower_bound']:.4f}"
        if calibration.lower_bound_confidence < 1:
            bound += "*"
        print_fn(
            f"{label:<28} {row['privacy']:<23} {row['coverage']:>8.4f} "
            f"{row['set_size']:>8.4f} {row['singleton_rate']:>9.4f} "
            f"{row['threshold']:>9.4f} {bound:>10} "
            f"{'inf' if math.isinf(total) else f'{total:.3g}':>9}  {row['status']}"
        )
    print_fn(
        "coverage / set size / singleton: on the test rows; cov. bound: formal lower bound "
        "on coverage (* = holds with probability 1 - beta over the noise only); eps total: "
        "model + calibration; TRIVIAL: every set holds both labels."
    )
    exponq = next(row for row in rows if row["mechanism"] == "ExponQ")
    contract = Contract(
        target_coverage=1.0 - alpha,
        max_epsilon_train=epsilon_model,
        max_epsilon_cal=epsilon_cal,
        beta=DEMO_CONTRACT_BETA,
    )
    # The test rows are simulated, so the card may publish the diagnostics measured on them.
    card = ContractCard.from_estimator(exponq["estimator"], contract).evaluate(
        X_test, y_test, public=True
    )
    print_fn("")
    print_fn(card.to_markdown())
    return rows
