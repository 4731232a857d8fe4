"""Set size and coverage of every classification score on load_digits, and MAPIE's APS.

Over random splits of scikit-learn's ``load_digits`` (1797 images, 10 classes) into
900 training, 450 calibration and 447 test rows: a ``LogisticRegression`` is fitted on
the training rows, calibrated at ``alpha = 0.1`` with ``SplitConformal()`` (no privacy)
and ``ExponQ(epsilon=1)``, for the scores ``"lac"``, ``"aps"``, ``"aps_randomized"``
and ``"raps"`` (defaults ``k_reg=1, lambda_=0.01``) and ``RAPS(k_reg=1, lambda_=0.1)``,
and with MAPIE 1.x's default APS
(``SplitConformalClassifier(conformity_score="aps")``: randomised calibration scores,
``include_last_label=True`` at prediction). Printed: mean over splits of the test
coverage and mean set size, with their standard errors, and the share of empty sets.

Run:  python -m benchmarks.scores_digits [--splits 100]
"""

from __future__ import annotations

import argparse
import warnings

import numpy as np
from sklearn.datasets import load_digits
from sklearn.linear_model import LogisticRegression
from sklearn.model_selection import train_test_split

from privconf_sklearn import PrivateConformalClassifier
from privconf_sklearn.mechanisms import ExponQ, SplitConformal
from privconf_sklearn.scores import RAPS

#: (label, conformity_score) pairs: the four aliases, and RAPS with a larger penalty.
SCORES = (
    ("lac", "lac"),
    ("aps", "aps"),
    ("aps_randomized", "aps_randomized"),
    ("raps", "raps"),
    ("RAPS(k_reg=1, lambda_=0.1)", RAPS(k_reg=1, lambda_=0.1)),
)
ALPHA = 0.1


def _mapie_sets(model, X_cal, y_cal, X_test, seed):
    try:
        from mapie.classification import SplitConformalClassifier
    except ImportError:
        return None
    mapie = SplitConformalClassifier(
        estimator=model,
        confidence_level=1 - ALPHA,
        conformity_score="aps",
        prefit=True,
        random_state=seed,
    ).conformalize(X_cal, y_cal)
    return mapie.predict_set(X_test)[1][:, :, 0]


def run(n_splits):
    X, y = load_digits(return_X_y=True)
    X = X / 16.0
    results: dict[tuple[str, str], list[tuple[float, float, float]]] = {}
    for seed in range(n_splits):
        X_train, X_rest, y_train, y_rest = train_test_split(
            X, y, train_size=900, random_state=seed, stratify=y
        )
        X_cal, X_test, y_cal, y_test = train_test_split(
            X_rest, y_rest, train_size=450, random_state=seed, stratify=y_rest
        )
        model = LogisticRegression(max_iter=2000).fit(X_train, y_train)
        columns = np.searchsorted(model.classes_, y_test)
        rows = np.arange(len(y_test))
        runs = [
            (mechanism_name, label, score, mechanism)
            for mechanism_name, mechanism in (
                ("SplitConformal", SplitConformal()),
                ("ExponQ eps=1", ExponQ(epsilon=1.0)),
            )
            for label, score in SCORES
        ]
        for mechanism_name, label, score, mechanism in runs:
            pcc = PrivateConformalClassifier(
                model, mechanism=mechanism, conformity_score=score, alpha=ALPHA, random_state=seed
            )
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")  # uninformative releases are counted below
                sets = pcc.fit_calibrate(X_cal, y_cal).predict_set(X_test)
            results.setdefault((mechanism_name, label), []).append(_summary(sets, rows, columns))
        mapie = _mapie_sets(model, X_cal, y_cal, X_test, seed)
        if mapie is not None:
            results.setdefault(("MAPIE SplitConformal", "aps (default)"), []).append(
                _summary(mapie, rows, columns)
            )
    return results


def _summary(sets, rows, columns):
    sizes = sets.sum(axis=1)
    return float(sets[rows, columns].mean()), float(sizes.mean()), float((sizes == 0).mean())


def report(results, n_splits):
    print(f"load_digits, {n_splits} random splits (900 / 450 / 447), alpha = {ALPHA}")
    print("| calibration | score | coverage | mean set size | empty sets |")
    print("|---|---|---|---|---|")
    for (mechanism, score), values in results.items():
        coverage, size, empty = np.array(values).T
        se = np.sqrt(len(values))
        print(
            f"| {mechanism} | {score} | {coverage.mean():.3f} ({coverage.std() / se:.3f}) "
            f"| {size.mean():.2f} ({size.std() / se:.2f}) | {empty.mean():.3f} |"
        )


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--splits", type=int, default=100)
    args = parser.parse_args(argv)
    report(run(args.splits), args.splits)


if __name__ == "__main__":
    main()
