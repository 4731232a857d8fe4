"""Coverage and set size against the calibration budget epsilon_cal, for every mechanism.

A fixed (non-private) logistic regression on simulated 6-class data; for each
epsilon_cal and each repetition, a fresh random split of the held-out rows into
``n_cal`` calibration and ``n_test`` test rows. Mechanisms:

- split conformal (non-private; a horizontal reference),
- ExponQ and its monotone variant (pure epsilon-DP),
- P-COQS at (epsilon, delta = 1e-5) (zCDP: a weaker guarantee than pure epsilon-DP),
- DP-APS with 20 bins (pure epsilon-DP).

The figure shows the mean test coverage with the 5%-95% range over repetitions, and the
mean set size. Infeasible requests (too little data for the budget) release full sets;
their warnings are silenced here on purpose and show up as coverage 1 in the figure.

Run:  python examples/plot_coverage_vs_epsilon.py [--quick] [--output DIR]
The full run (7 budgets x 100 repetitions) takes about 20 s; ``--quick`` (2 budgets x 3
repetitions) a few seconds.
"""

from __future__ import annotations

import argparse
import warnings
from pathlib import Path

import numpy as np
from sklearn.datasets import make_classification
from sklearn.linear_model import LogisticRegression

from privconf_sklearn import PrivateConformalClassifier
from privconf_sklearn.mechanisms import (
    DPAPS,
    PCOQS,
    ExponQ,
    InfeasibleCalibrationWarning,
    SplitConformal,
)
from privconf_sklearn.metrics import mean_set_size, set_coverage

FIGURE = "coverage_vs_epsilon.png"
DEFAULT_OUTPUT = Path(__file__).resolve().parents[1] / "docs" / "_static" / "examples"
ALPHA = 0.1


def mechanisms(epsilon: float) -> dict:
    """The private mechanisms compared at calibration budget ``epsilon``."""
    return {
        "ExponQ": ExponQ(epsilon=epsilon),
        "ExponQ (monotone)": ExponQ(epsilon=epsilon, scaling="monotone"),
        "P-COQS (epsilon, 1e-5)": PCOQS(epsilon=epsilon, delta=1e-5),
        "DP-APS (B = 20)": DPAPS(epsilon=epsilon),
    }


def simulate(n_cal: int, n_test: int, epsilons, n_repeats: int, seed: int):
    """Coverage and set size of every mechanism, budget and repetition."""
    from tqdm import tqdm

    X, y = make_classification(
        n_samples=5000 + 4 * (n_cal + n_test),
        n_features=8,
        n_informative=6,
        n_redundant=0,
        n_classes=6,
        n_clusters_per_class=1,
        class_sep=1.2,
        random_state=seed,
    )
    model = LogisticRegression(max_iter=1000).fit(X[:5000], y[:5000])
    X_pool, y_pool = X[5000:], y[5000:]
    rng = np.random.default_rng(seed)
    results = {}  # (name, epsilon) -> array (n_repeats, 2): coverage, set size
    for repeat in tqdm(range(n_repeats), desc="repetitions"):
        rows = rng.permutation(X_pool.shape[0])
        cal, test = rows[:n_cal], rows[n_cal : n_cal + n_test]
        runs = [("split conformal", None, SplitConformal())]
        runs += [(name, e, m) for e in epsilons for name, m in mechanisms(e).items()]
        for name, epsilon, mechanism in runs:
            estimator = PrivateConformalClassifier(
                model, mechanism=mechanism, alpha=ALPHA, random_state=rng
            )
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", InfeasibleCalibrationWarning)
                estimator.fit_calibrate(X_pool[cal], y_pool[cal])
            sets = estimator.predict_set(X_pool[test])
            record = results.setdefault((name, epsilon), np.empty((n_repeats, 2)))
            record[repeat] = (
                set_coverage(y_pool[test], sets, estimator.classes_),
                mean_set_size(sets),
            )
    return results


def plot(results, epsilons, n_cal: int, path: Path) -> None:
    """Two panels: coverage and mean set size against epsilon_cal."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, (left, right) = plt.subplots(1, 2, figsize=(11, 4.2), constrained_layout=True)
    baseline = results[("split conformal", None)]
    for axis, column in ((left, 0), (right, 1)):
        axis.axhline(baseline[:, column].mean(), color="black", linestyle=":", label="split")
    for name in mechanisms(1.0):
        values = np.array([results[(name, e)] for e in epsilons])  # (n_eps, n_repeats, 2)
        for axis, column in ((left, 0), (right, 1)):
            mean = values[:, :, column].mean(axis=1)
            (line,) = axis.plot(epsilons, mean, marker="o", label=name)
            if column == 0:
                low, high = np.percentile(values[:, :, 0], [5, 95], axis=1)
                axis.fill_between(epsilons, low, high, color=line.get_color(), alpha=0.15)
    left.axhline(1 - ALPHA, color="grey", linewidth=0.8)
    left.set_ylabel("test coverage (mean, 5%-95% band)")
    right.set_ylabel("mean set size (labels)")
    for axis in (left, right):
        axis.set_xscale("log")
        axis.set_xlabel("calibration budget epsilon_cal")
    right.legend(fontsize=8)
    fig.suptitle(
        f"6 classes, n_cal = {n_cal}, alpha = {ALPHA}: the price of private calibration",
        fontsize=10,
    )
    fig.savefig(path, dpi=110)
    plt.close(fig)


def main(argv=None) -> list[Path]:
    """Run the simulation and write the figure; return the written paths."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="2 budgets, 3 repetitions")
    parser.add_argument("--output", type=Path, default=DEFAULT_OUTPUT)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)
    if args.quick:
        epsilons, n_repeats, n_cal, n_test = [0.5, 4.0], 3, 1000, 1000
    else:
        epsilons, n_repeats, n_cal, n_test = [0.1, 0.2, 0.5, 1, 2, 5, 10], 100, 2000, 2000
    results = simulate(n_cal, n_test, epsilons, n_repeats, args.seed)
    args.output.mkdir(parents=True, exist_ok=True)
    path = args.output / FIGURE
    plot(results, epsilons, n_cal, path)
    for name in ["split conformal", *mechanisms(1.0)]:
        keys = [(name, None)] if name == "split conformal" else [(name, e) for e in epsilons]
        summary = ", ".join(
            f"{'-' if key[1] is None else key[1]}: {results[key][:, 0].mean():.3f} "
            f"[{np.percentile(results[key][:, 0], 5):.3f}] / {results[key][:, 1].mean():.2f}"
            for key in keys
        )
        print(f"{name:<24} coverage [5th percentile] / size by epsilon_cal: {summary}")
    print(f"wrote {path}")
    return [path]


if __name__ == "__main__":
    main()
