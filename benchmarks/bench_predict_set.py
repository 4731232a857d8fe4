"""predict_set speed and peak memory: ours vs plain numpy vs MAPIE, same process.

The classifier's ``predict_proba`` returns its input (``X`` *is* the probability
matrix), so only the set construction is timed: ours includes the validation of the
probabilities (finite, non-negative, rows summing to one). Plain numpy is the textbook
expression for the same sets; MAPIE is ``SplitConformalClassifier(prefit=True)``.

Run:  python -m benchmarks.bench_predict_set [--quick]
"""

from __future__ import annotations

import argparse
import gc
import time
import tracemalloc
from functools import partial

import numpy as np
from sklearn.base import BaseEstimator, ClassifierMixin

from privconf_sklearn import PrivateConformalClassifier
from privconf_sklearn.mechanisms import SplitConformal


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


def numpy_lac(proba, threshold):
    return 1.0 - proba <= threshold


def numpy_aps(proba, threshold):
    """Sort, accumulate, compare, scatter back (no tie grouping)."""
    order = np.argsort(proba, axis=1)
    ascending = np.take_along_axis(proba, order, axis=1)
    scores = 1.0 - (np.cumsum(ascending, axis=1) - ascending)
    sets = np.empty(proba.shape, dtype=bool)
    np.put_along_axis(sets, order, scores <= threshold, axis=1)
    return sets


def measure(function, repeats):
    """Best wall time over repeats and peak traced memory of one call."""
    gc.collect()
    tracemalloc.start()
    result = function()
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        function()
        times.append(time.perf_counter() - start)
    return min(times), peak, result


def mapie_predict_set(model, X_cal, y_cal, score, alpha):
    try:
        from mapie.classification import SplitConformalClassifier
    except ImportError:
        return None
    mapie = SplitConformalClassifier(
        estimator=model, confidence_level=1 - alpha, conformity_score=score, prefit=True
    ).conformalize(X_cal, y_cal)
    return lambda X: mapie.predict_set(X)[1][:, :, 0]


def run(sizes, repeats):
    rng = np.random.default_rng(0)
    rows = []
    for n, k in sizes:
        proba = rng.dirichlet(np.full(k, 0.3), size=n)
        y_cal = np.array([rng.choice(k, p=p) for p in proba[:2000]])
        model = ProbabilitiesAsFeatures().fit(proba[:2000], y_cal)
        for score in ("lac", "aps"):
            pcc = PrivateConformalClassifier(
                model, mechanism=SplitConformal(), conformity_score=score, alpha=0.1
            ).fit_calibrate(proba[:2000], y_cal)
            baseline = numpy_lac if score == "lac" else numpy_aps
            t_ours, m_ours, ours = measure(partial(pcc.predict_set, proba), repeats)
            t_batch, m_batch, batched = measure(
                partial(pcc.predict_set, proba, batch_size=10000), repeats
            )
            t_numpy, m_numpy, plain = measure(partial(baseline, proba, pcc.threshold_), repeats)
            agreement = float((ours == plain).all(axis=1).mean())
            assert np.array_equal(ours, batched)
            mapie = mapie_predict_set(model, proba[:2000], y_cal, score, 0.1)
            t_mapie = m_mapie = None
            if mapie is not None:
                t_mapie, m_mapie, _ = measure(partial(mapie, proba), max(1, repeats // 2))
            rows.append(
                (
                    n,
                    k,
                    score,
                    t_ours,
                    m_ours,
                    t_batch,
                    m_batch,
                    t_numpy,
                    m_numpy,
                    t_mapie,
                    m_mapie,
                    agreement,
                )
            )
    return rows


def report(rows):
    mb = 1024**2
    header = (
        "| size | score | ours (s) | numpy (s) | ours / numpy | MAPIE (s) | MAPIE / ours "
        "| peak MB ours | batched 10k: s, MB | numpy MB | MAPIE MB | same sets as numpy |"
    )
    print(header)
    print("|---" * 12 + "|")
    for n, k, score, t_o, m_o, t_b, m_b, t_n, m_n, t_m, m_m, agree in rows:
        mapie_t = f"{t_m:.3f}" if t_m is not None else "n/a"
        mapie_ratio = f"{t_m / t_o:.1f}x" if t_m is not None else "n/a"
        mapie_m = f"{m_m / mb:.0f}" if m_m is not None else "n/a"
        print(
            f"| {n:,} x {k} | {score} | {t_o:.4f} | {t_n:.4f} | {t_o / t_n:.2f} | {mapie_t} | "
            f"{mapie_ratio} | {m_o / mb:.0f} | {t_b:.4f}, {m_b / mb:.0f} | {m_n / mb:.0f} | "
            f"{mapie_m} | {agree:.4f} |"
        )


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="small sizes, one repeat")
    args = parser.parse_args(argv)
    sizes = [(2000, 10), (2000, 100)] if args.quick else [(100_000, 10), (100_000, 1000)]
    report(run(sizes, repeats=1 if args.quick else 5))


if __name__ == "__main__":
    main()
