"""Contract-card diagnostics against calibration privacy and size (contract-cards Fig. 1).

Figure 1 of "Contract Cards for Auditable Private Conformal Prediction" (2026).

Simulated 10-class data (scikit-learn ``make_classification``, classes made to overlap),
a diffprivlib random forest (50 trees of depth 8) trained with epsilon_train = 4 on rows
clipped to the unit ball (public feature bounds), test accuracy 65% (the paper's DP-SGD
CIFAR-10 model: 48%). (diffprivlib's LogisticRegression cannot be built
on scikit-learn >= 1.8; its GaussianNB is so overconfident that APS scores pile up
near 1 and every release at gamma = 0.6 is the whole label set.) APS scores and DP-APS
calibration (B = 50 bins, beta = 1e-3) at nominal coverage gamma = 0.6. For every
calibration budget epsilon_cal, calibration size n and seed (a fresh calibration sample and fresh
noise), the contract card's diagnostics are recorded: certificate width W(c)
(Prop. 5.2), observed threshold inflation and mean prediction-set size on test rows.

Panels: (left) W(c) against epsilon_cal per n; (middle) mean set size; (right) observed
inflation (dashed) below W(c) (solid). Shaded bands: one standard deviation over 5 seeds.
epsilon_cal in {1, 2, 4, 8, 16, 32}, n in {1000, 2000, 4000} (the paper: {2, 4, 8} and the
same sizes, on CIFAR-10).

    python benchmarks/figure_certificate_width.py            # full figure, ~10 s
    python benchmarks/figure_certificate_width.py --quick    # CI smoke run, seconds

Writes ``benchmarks/results/figure_certificate_width.png`` (git-ignored) unless
``--output`` says otherwise. Needs the ``[plot]`` extra (matplotlib) and tqdm.
"""

from __future__ import annotations

import argparse
import warnings
from pathlib import Path

import numpy as np
from sklearn.datasets import make_classification

from privconf_sklearn import ContractCard, PrivateConformalClassifier, import_diffprivlib
from privconf_sklearn.mechanisms import DPAPS

RESULTS = Path(__file__).resolve().parent / "results"
ALPHA = 0.4
N_BINS = 50
BETA = 1e-3
EPSILON_TRAIN = 4.0
DATA_SCALE = 4.0  # public: features divided by 4, then rows clipped to the unit ball


def _setting(quick: bool) -> dict:
    if quick:
        return {"epsilons": [2.0, 8.0], "sizes": [1000, 2000], "seeds": 2, "n_test": 2000}
    return {
        "epsilons": [1.0, 2.0, 4.0, 8.0, 16.0, 32.0],
        "sizes": [1000, 2000, 4000],
        "seeds": 5,
        "n_test": 10000,
    }


def _data(n_test: int, n_pool: int):
    X, y = make_classification(
        n_samples=8000 + n_pool + n_test,
        n_features=12,
        n_informative=8,
        n_redundant=0,
        n_classes=10,
        n_clusters_per_class=1,
        class_sep=1.6,
        random_state=0,
    )
    X = X / DATA_SCALE
    X = X / np.maximum(1.0, np.linalg.norm(X, axis=1, keepdims=True))  # public clipping
    # Through the package's gateway: diffprivlib is importable on scikit-learn >= 1.9.
    PrivateForest = import_diffprivlib().models.RandomForestClassifier
    model = PrivateForest(
        n_estimators=50,
        max_depth=8,
        epsilon=EPSILON_TRAIN,
        bounds=(-1.0, 1.0),
        classes=list(range(10)),
        random_state=0,
    )
    model.fit(X[:8000], y[:8000])
    pool = (X[8000 : 8000 + n_pool], y[8000 : 8000 + n_pool])
    test = (X[8000 + n_pool :], y[8000 + n_pool :])
    return model, pool, test


def run(quick: bool) -> list[dict]:
    """One row per (epsilon_cal, n): mean and sd of the card diagnostics over seeds."""
    from tqdm import tqdm

    setting = _setting(quick)
    model, (X_pool, y_pool), (X_test, y_test) = _data(setting["n_test"], max(setting["sizes"]) * 2)
    jobs = [
        (e, n, s)
        for e in setting["epsilons"]
        for n in setting["sizes"]
        for s in range(setting["seeds"])
    ]
    records = {}
    for epsilon, n, seed in tqdm(jobs, desc="calibrations", unit="cal"):
        rows = np.random.default_rng(seed).choice(len(y_pool), size=n, replace=False)
        estimator = PrivateConformalClassifier(
            model,
            mechanism=DPAPS(epsilon=epsilon, n_bins=N_BINS, beta=BETA),
            alpha=ALPHA,
            conformity_score="aps",
            random_state=1000 + seed,
        )
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", UserWarning)
            estimator.fit_calibrate(X_pool[rows], y_pool[rows])
        card = ContractCard.from_estimator(estimator).evaluate(X_test, y_test, public=True)
        # A configuration DP-APS cannot serve (k + lambda > n) releases the top of the
        # range without a grid quantile: no width or inflation to report (NaN).
        d, owner = card.diagnostics, card.owner_diagnostics.get("calibration", {})
        records.setdefault((epsilon, n), []).append(
            (
                owner.get("certificate_width", np.nan),
                owner.get("observed_inflation", np.nan),
                d.mean_set_size,
                d.empirical_coverage,
            )
        )
    out = []
    for (epsilon, n), values in records.items():
        values = np.asarray(values)
        mean, sd = values.mean(axis=0), values.std(axis=0)
        out.append(
            {
                "epsilon_cal": epsilon,
                "n": n,
                "mean_width": mean[0],
                "sd_width": sd[0],
                "mean_inflation": mean[1],
                "sd_inflation": sd[1],
                "max_inflation_minus_width": float((values[:, 1] - values[:, 0]).max()),
                "mean_set_size": mean[2],
                "sd_set_size": sd[2],
                "mean_coverage": mean[3],
            }
        )
    return out


def plot(rows: list[dict], output: Path) -> None:
    """Three panels like the paper's Figure 1."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, 3, figsize=(13, 3.8), constrained_layout=True)
    sizes = sorted({r["n"] for r in rows})
    colors = plt.cm.viridis(np.linspace(0.0, 0.8, len(sizes)))
    for n, color in zip(sizes, colors, strict=True):
        part = sorted((r for r in rows if r["n"] == n), key=lambda r: r["epsilon_cal"])
        eps = np.array([r["epsilon_cal"] for r in part])

        def band(ax, key, style="-", label=None, part=part, eps=eps, color=color):
            mean = np.array([r[f"mean_{key}"] for r in part])
            sd = np.array([r[f"sd_{key}"] for r in part])
            ax.plot(eps, mean, style, color=color, marker="o", ms=3, label=label)
            ax.fill_between(eps, mean - sd, mean + sd, color=color, alpha=0.15)

        band(axes[0], "width", label=f"n = {n}")
        band(axes[1], "set_size", label=f"n = {n}")
        band(axes[2], "width", label=f"W(c), n = {n}")
        band(axes[2], "inflation", style="--", label=f"inflation, n = {n}")
    titles = (
        "certificate width W(c)",
        "mean prediction-set size",
        "observed inflation (dashed) <= W(c)",
    )
    for ax, title in zip(axes, titles, strict=True):
        ax.set_xscale("log", base=2)
        ax.set_xlabel("calibration budget epsilon_cal")
        ax.set_title(title)
        ax.grid(alpha=0.3)
    axes[0].legend(fontsize=8)
    axes[2].legend(fontsize=7, ncol=2)
    fig.suptitle(
        f"DP-APS contract-card diagnostics: gamma = {1 - ALPHA:g}, B = {N_BINS}, "
        f"beta = {BETA:g}, eps_train = {EPSILON_TRAIN:g} (10-class simulated data)",
        fontsize=10,
    )
    output.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(output, dpi=120)
    plt.close(fig)


def main(argv: list[str] | None = None) -> list[dict]:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--quick", action="store_true", help="small grid for CI (seconds)")
    parser.add_argument("--output", type=Path, default=RESULTS / "figure_certificate_width.png")
    args = parser.parse_args(argv)
    rows = run(args.quick)
    print(
        f"{'eps_cal':>7} {'n':>5} {'W(c)':>13} {'inflation':>13} {'max(infl-W)':>11} "
        f"{'set size':>13} {'coverage':>8}"
    )
    for r in rows:
        print(
            f"{r['epsilon_cal']:>7g} {r['n']:>5d} {r['mean_width']:>6.3f}±{r['sd_width']:<6.3f} "
            f"{r['mean_inflation']:>6.3f}±{r['sd_inflation']:<6.3f} "
            f"{r['max_inflation_minus_width']:>11.3f} "
            f"{r['mean_set_size']:>6.3f}±{r['sd_set_size']:<6.3f} {r['mean_coverage']:>8.4f}"
        )
    plot(rows, args.output)
    print(f"figure written to {args.output}")
    return rows


if __name__ == "__main__":
    main()
