"""Regression predict_set speed and peak memory: ours vs the plain numpy expression.

Two settings, each for 10^6 rows (``--quick``: 10^5), all in the same process:

- **interval step**: the regressor's ``predict`` returns a precomputed column (a view,
  zero cost), so only our validation of the predictions (shape, finite) and the
  interval construction are timed, against ``(y_pred - q, y_pred + q)`` (CQR:
  ``(lo - q, hi + q)``).
- **end to end**: a fitted ``LinearRegression`` on 10 features; ours is
  ``predict_set(X)`` against ``y_pred = model.predict(X)`` plus the same expression.
  MAPIE's ``SplitConformalRegressor.predict_interval`` is timed too when installed.

Ours and numpy (and MAPIE, when installed, end to end) alternate for ``--repeats``
rounds (``benchmarks/_timing.py``); the ratio is the median of the per-round ratios
with their min-max. Peak memory is one traced call each. The ratio target is
ours / numpy <= 1.2.

Run:  python -m benchmarks.bench_regression_predict [--quick] [--repeats R]
"""

from __future__ import annotations

import argparse

import numpy as np
from sklearn.base import BaseEstimator, RegressorMixin
from sklearn.linear_model import LinearRegression

from benchmarks._timing import alternate, load_average, peak_memory
from privconf_sklearn import PrivateConformalRegressor
from privconf_sklearn.mechanisms import SplitConformal


class ColumnsAsPredictions(RegressorMixin, BaseEstimator):
    """A 'fitted' regressor whose predictions are X's first column (or first two)."""

    def __init__(self, n_outputs=1):
        self.n_outputs = n_outputs

    def fit(self, X, y):
        self.n_features_in_ = np.asarray(X).shape[1]
        return self

    def predict(self, X):
        return X[:, 0] if self.n_outputs == 1 else X[:, :2]


def measure(contenders, repeats):
    """Alternating timings and one traced peak memory per contender."""
    timing = alternate(contenders, repeats)
    return timing, {name: peak_memory(function) for name, function in contenders.items()}


def interval_step(n, repeats, rng):
    rows = []
    centre = rng.normal(size=n)
    absolute_X = np.ascontiguousarray(centre[:, None])
    band_X = np.column_stack([centre - 1.0, centre + 1.0])
    y = centre + rng.normal(size=n)
    cases = [
        ("absolute", absolute_X, ColumnsAsPredictions(1), (0.0, 10.0)),
        ("cqr", band_X, ColumnsAsPredictions(2), (-5.0, 10.0)),
    ]
    for score, X, model, bounds in cases:
        model.fit(X, y)
        pcr = PrivateConformalRegressor(
            model, mechanism=SplitConformal(), conformity_score=score, score_bounds=bounds
        ).fit_calibrate(X[:2000], y[:2000])
        q = pcr.threshold_
        if score == "absolute":
            y_pred = X[:, 0]

            def baseline(y_pred=y_pred, q=q):
                return y_pred - q, y_pred + q
        else:
            lo, hi = X[:, 0], X[:, 1]

            def baseline(lo=lo, hi=hi, q=q):
                return lo - q, hi + q

        timing, memory = measure(
            {"numpy": baseline, "ours": lambda pcr=pcr, X=X: pcr.predict_set(X)}, repeats
        )
        ours, plain = pcr.predict_set(X), baseline()
        same = np.array_equal(ours[:, 0], plain[0]) and np.array_equal(ours[:, 1], plain[1])
        rows.append(("interval step", score, timing, memory, same))
    return rows


def end_to_end(n, repeats, rng):
    X = rng.normal(size=(n, 10))
    y = X @ rng.normal(size=10) + rng.normal(size=n)
    model = LinearRegression().fit(X[:5000], y[:5000])
    pcr = PrivateConformalRegressor(
        model, mechanism=SplitConformal(), score_bounds=(0.0, 20.0)
    ).fit_calibrate(X[5000:7000], y[5000:7000])
    q = pcr.threshold_

    def baseline():
        y_pred = model.predict(X)
        return y_pred - q, y_pred + q

    contenders = {"numpy": baseline, "ours": lambda: pcr.predict_set(X)}
    try:
        from mapie.regression import SplitConformalRegressor
    except ImportError:
        pass
    else:
        mapie = SplitConformalRegressor(model, confidence_level=0.9, prefit=True)
        mapie.conformalize(X[5000:7000], y[5000:7000])
        contenders["MAPIE"] = lambda: mapie.predict_interval(X)
    timing, memory = measure(contenders, repeats)
    ours, plain = pcr.predict_set(X), baseline()
    same = np.array_equal(ours[:, 0], plain[0]) and np.array_equal(ours[:, 1], plain[1])
    return [("end to end", "absolute", timing, memory, same)]


def report(n, rows):
    mb = 1024**2
    print(f"{n} rows")
    print(
        "| setting | score | ours (ms, median) | numpy (ms, median) "
        "| ours / numpy: median (min-max) | MAPIE (ms, median) | peak MB ours "
        "| peak MB numpy | identical |"
    )
    print("|---" * 9 + "|")
    for setting, score, timing, memory, same in rows:
        has_mapie = "MAPIE" in timing.times
        mapie = f"{timing.median('MAPIE') * 1e3:.1f}" if has_mapie else "n/a"
        print(
            f"| {setting} | {score} | {timing.median('ours') * 1e3:.2f} "
            f"| {timing.median('numpy') * 1e3:.2f} | {timing.ratio_text('ours', 'numpy')} "
            f"| {mapie} | {memory['ours'] / mb:.1f} | {memory['numpy'] / mb:.1f} | {same} |"
        )


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="10^5 rows instead of 10^6")
    parser.add_argument("--repeats", type=int, default=20)
    args = parser.parse_args(argv)
    n = 10**5 if args.quick else 10**6
    rng = np.random.default_rng(0)
    print(load_average())
    rows = interval_step(n, args.repeats, rng) + end_to_end(n, args.repeats, rng)
    print(load_average())
    report(n, rows)


if __name__ == "__main__":
    main()
