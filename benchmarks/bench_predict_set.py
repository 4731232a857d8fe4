"""Classification sets and calibration scores: time and peak memory against plain numpy.

The classifier's ``predict_proba`` returns its input (``X`` *is* the probability
matrix), so only the score computations are measured. For every score (LAC, APS,
randomised APS, RAPS):

- **sets**: ``PrivateConformalClassifier.predict_set(X)`` (validation of the model's
  outputs included, no ``batch_size``: the default) against the textbook numpy
  expression for the same sets (argsort, take, cumsum, compare, scatter back);
- **calibration scores**: ``score_.conformity_scores(proba, y)`` against the textbook
  expression (the same, then the true label's entry).

Ours and numpy alternate (numpy, ours, numpy, ours, ...; ``benchmarks/_timing.py``) and
the ratio is the median of the per-round ratios with their min-max. Peak memory is one
traced call each (``tracemalloc``; the input matrix is not counted, the result is).
``--mapie`` adds MAPIE 1.x's ``SplitConformalClassifier(prefit=True).predict_set`` (its
default APS is the randomised one; its RAPS picks ``k`` and ``lambda`` on a split) to
the rotation. Targets (issue 17): peak memory at or below numpy's and time within 1.2x
of it, for every score, at 100k x 1000 and 1M x 100.

Run:  python -m benchmarks.bench_predict_set [--quick] [--rounds R] [--mapie]
"""

from __future__ import annotations

import argparse
from functools import partial

import numpy as np
from sklearn.base import BaseEstimator, ClassifierMixin
from sklearn.utils import check_random_state

from benchmarks._timing import alternate, load_average, peak_memory
from privconf_sklearn import PrivateConformalClassifier
from privconf_sklearn.mechanisms import SplitConformal

SCORES = ("lac", "aps", "aps_randomized", "raps")
#: MAPIE's name for each of our scores (its "aps" is the randomised one).
MAPIE_NAMES = {"lac": "lac", "aps_randomized": "aps", "raps": "raps"}


class ProbabilitiesAsFeatures(ClassifierMixin, BaseEstimator):
    """A 'fitted' classifier whose predict_proba is the identity."""

    def fit(self, X, y):
        self.classes_ = np.arange(np.asarray(X).shape[1])
        self.n_features_in_ = np.asarray(X).shape[1]
        return self

    def predict_proba(self, X):
        return np.asarray(X)

    def predict(self, X):
        return np.argmax(X, axis=1)


def _sorted_scores(proba, score, random_state):
    """Textbook: argsort each row increasingly, every label's score in that order."""
    order = np.argsort(proba, axis=1)
    ascending = np.take_along_axis(proba, order, axis=1)
    at_least = 1.0 - (np.cumsum(ascending, axis=1) - ascending)  # mass of p_k >= p_y
    if getattr(score, "randomized", False):
        u = check_random_state(random_state).uniform(size=proba.shape[0])[:, None]
        at_least -= (1.0 - u) * ascending
    if hasattr(score, "lambda_"):
        k = proba.shape[1]
        ranks = k - np.arange(k)  # rank of the label at ascending position j
        at_least += score.lambda_ * np.maximum(ranks - score.k_reg, 0)
    return order, at_least


def numpy_sets(proba, threshold, score, random_state=0):
    """The textbook expression of ``{y : score(x, y) <= threshold}``."""
    if type(score).__name__ == "LAC":
        return 1.0 - proba <= threshold
    order, scores = _sorted_scores(proba, score, random_state)
    sets = np.empty(proba.shape, dtype=bool)
    np.put_along_axis(sets, order, scores <= threshold, axis=1)
    return sets


def numpy_calibration_scores(proba, y, score, random_state=0):
    """The textbook expression of the calibration scores ``score(x_i, y_i)``."""
    rows = np.arange(proba.shape[0])
    if type(score).__name__ == "LAC":
        return 1.0 - proba[rows, y]
    order, scores = _sorted_scores(proba, score, random_state)
    every = np.empty(proba.shape)
    np.put_along_axis(every, order, scores, axis=1)
    return every[rows, y]


def mapie_predict_set(model, X_cal, y_cal, score, alpha):
    """MAPIE's split conformal sets (None if MAPIE is not installed)."""
    try:
        from mapie.classification import SplitConformalClassifier
    except ImportError:
        return None
    mapie = SplitConformalClassifier(
        estimator=model,
        confidence_level=1 - alpha,
        conformity_score=MAPIE_NAMES[score],
        prefit=True,
        random_state=0,
    ).conformalize(X_cal, y_cal)
    return lambda X: mapie.predict_set(X)[1][:, :, 0]


def run(sizes, rounds, with_mapie):
    rng = np.random.default_rng(0)
    rows = []
    for n, k in sizes:
        proba = rng.dirichlet(np.full(k, 0.3), size=n)
        labels = (proba.cumsum(axis=1) > rng.uniform(size=(n, 1))).argmax(axis=1)
        model = ProbabilitiesAsFeatures().fit(proba[:2000], labels[:2000])
        for name in SCORES:
            pcc = PrivateConformalClassifier(
                model,
                mechanism=SplitConformal(),
                conformity_score=name,
                alpha=0.1,
                random_state=0,
            ).fit_calibrate(proba[:2000], labels[:2000])
            score, threshold = pcc.score_, pcc.threshold_
            contenders = {
                "numpy": partial(numpy_sets, proba, threshold, score),
                "ours": partial(pcc.predict_set, proba),
            }
            if with_mapie and name in MAPIE_NAMES:
                mapie = mapie_predict_set(model, proba[:2000], labels[:2000], name, 0.1)
                if mapie is not None:
                    contenders["MAPIE"] = partial(mapie, proba)
            timing = alternate(contenders, rounds)
            memory = {label: peak_memory(function) for label, function in contenders.items()}
            agreement = float((pcc.predict_set(proba) == contenders["numpy"]()).all(axis=1).mean())
            rows.append(("sets", n, k, name, timing, memory, agreement))

            calibration = {
                "numpy": partial(numpy_calibration_scores, proba, labels, score),
                "ours": partial(score.conformity_scores, proba, labels, random_state=0),
            }
            timing = alternate(calibration, rounds)
            memory = {label: peak_memory(function) for label, function in calibration.items()}
            difference = np.abs(calibration["ours"]() - calibration["numpy"]()).max()
            rows.append(("calibration scores", n, k, name, timing, memory, float(difference)))
            print(f"  {n:,} x {k} {name} done ({load_average()})", flush=True)
    return rows


def report(rows):
    mb = 1024**2
    print(
        "| what | size | score | ours (s, median) | numpy (s, median) "
        "| ours / numpy: median (min-max) | peak MB ours | peak MB numpy | MAPIE (s) "
        "| MAPIE / ours | MAPIE MB | same as numpy |"
    )
    print("|---" * 12 + "|")
    for what, n, k, name, timing, memory, check in rows:
        has_mapie = "MAPIE" in timing.times
        mapie = f"{timing.median('MAPIE'):.3f}" if has_mapie else "n/a"
        mapie_ratio = timing.ratio_text("MAPIE", "ours") if has_mapie else "n/a"
        mapie_mb = f"{memory['MAPIE'] / mb:.0f}" if has_mapie else "n/a"
        same = f"{check:.4f} of rows" if what == "sets" else f"max abs difference {check:.1e}"
        print(
            f"| {what} | {n:,} x {k} | {name} | {timing.median('ours'):.4f} "
            f"| {timing.median('numpy'):.4f} | {timing.ratio_text('ours', 'numpy')} "
            f"| {memory['ours'] / mb:.1f} | {memory['numpy'] / mb:.1f} | {mapie} "
            f"| {mapie_ratio} | {mapie_mb} | {same} |"
        )


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="small sizes, 3 rounds")
    parser.add_argument("--rounds", type=int, default=None, help="timed rounds (default 5)")
    parser.add_argument("--mapie", action="store_true", help="add MAPIE to the rotation")
    args = parser.parse_args(argv)
    if args.quick:
        sizes, rounds = [(2000, 10), (2000, 100)], 3
    else:
        sizes, rounds = [(100_000, 10), (100_000, 1000), (1_000_000, 100)], 5
    if args.rounds is not None:
        rounds = args.rounds
    print(load_average())
    rows = run(sizes, rounds, args.mapie)
    print(f"\n{load_average()}\n")
    report(rows)


if __name__ == "__main__":
    main()
