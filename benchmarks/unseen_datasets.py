"""Data the defaults were never tuned on: ``load_wine`` and ``load_iris``.

Issue 23 asked that data the library has never seen improve too. For 30 random
stratified splits (30 % training, then 60 % of the rest for calibration: 75 and 63
calibration rows), a standardised ``LogisticRegression`` and the LAC score, the
expected test coverage, set size and share of trivial (all-label) releases over the
privacy noise are computed exactly from ``threshold_distribution`` (no sampling
noise), then averaged over splits, for the previous defaults (ExponQ's tight utility,
DP-APS's vector release) and the new ones (the shaped utility, the sparse vector).

    python -m benchmarks.unseen_datasets [--splits 30]
"""

from __future__ import annotations

import argparse
import warnings

import numpy as np
from sklearn.datasets import load_iris, load_wine
from sklearn.linear_model import LogisticRegression
from sklearn.model_selection import train_test_split
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import StandardScaler

from privconf_sklearn.mechanisms import DPAPS, ExponQ

try:
    from tqdm import tqdm
except ImportError:  # pragma: no cover - optional
    tqdm = None

ALPHA = 0.1
EPSILONS = (1.0, 2.0)
DATASETS = (("wine", load_wine), ("iris", load_iris))


def mechanisms(epsilon: float) -> dict:
    """The previous and the new defaults at ``epsilon``."""
    return {
        "ExponQ tight (before)": ExponQ(epsilon=epsilon, scaling="tight"),
        "ExponQ shaped (after)": ExponQ(epsilon=epsilon),
        "DP-APS vector (before)": DPAPS(epsilon=epsilon, release="vector"),
        "DP-APS sparse vector (after)": DPAPS(epsilon=epsilon),
    }


def expected(mechanism, calibration_scores, test_probabilities, test_scores):
    """Exact expected (coverage, set size, P(trivial)) over the mechanism's noise."""
    values, log_p = mechanism.threshold_distribution(calibration_scores, ALPHA)
    p = np.exp(log_p)
    p /= p.sum()
    sizes = np.array([((1 - test_probabilities) <= t).sum(axis=1).mean() for t in values])
    coverage = np.array([(test_scores <= t).mean() for t in values])
    return p @ coverage, p @ sizes, p[values >= 1].sum()


def one_split(X, y, seed: int, epsilon: float) -> dict:
    X_train, X_rest, y_train, y_rest = train_test_split(
        X, y, train_size=0.3, random_state=seed, stratify=y
    )
    X_cal, X_test, y_cal, y_test = train_test_split(
        X_rest, y_rest, train_size=0.6, random_state=seed, stratify=y_rest
    )
    model = make_pipeline(StandardScaler(), LogisticRegression(max_iter=1000))
    model.fit(X_train, y_train)
    calibration = 1 - model.predict_proba(X_cal)[np.arange(len(y_cal)), y_cal]
    test_probabilities = model.predict_proba(X_test)
    test = 1 - test_probabilities[np.arange(len(y_test)), y_test]
    return {
        name: expected(mechanism, calibration, test_probabilities, test)
        for name, mechanism in mechanisms(epsilon).items()
    } | {"n_cal": len(y_cal)}


def main(argv=None) -> list[str]:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--splits", type=int, default=30)
    args = parser.parse_args(argv)
    jobs = [(d, e, s) for d in DATASETS for e in EPSILONS for s in range(args.splits)]
    progress = tqdm(total=len(jobs), desc="unseen datasets") if tqdm is not None else None
    results: dict = {}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # trivial releases warn; they are counted here
        for (name, loader), epsilon, seed in jobs:
            X, y = loader(return_X_y=True)
            results.setdefault((name, epsilon), []).append(one_split(X, y, seed, epsilon))
            if progress is not None:
                progress.update()
    lines = [
        "| dataset | mechanism | epsilon | coverage | set size | trivial |",
        "|---|---|---|---|---|---|",
    ]
    for (name, epsilon), runs in results.items():
        for mechanism in mechanisms(epsilon):
            coverage, size, trivial = np.mean([run[mechanism] for run in runs], axis=0)
            lines.append(
                f"| {name} (n_cal {runs[0]['n_cal']}) | {mechanism} | {epsilon:g} | "
                f"{coverage:.3f} | {size:.2f} | {100 * trivial:.0f}% |"
            )
    print("\n".join(lines))
    return lines


if __name__ == "__main__":
    main()
