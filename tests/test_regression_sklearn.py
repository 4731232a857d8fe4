"""PrivateConformalRegressor in the scikit-learn ecosystem."""

import pickle
import warnings

import numpy as np
import pandas as pd
import pytest
from sklearn.base import clone
from sklearn.linear_model import LinearRegression, QuantileRegressor, Ridge
from sklearn.model_selection import GridSearchCV
from sklearn.pipeline import Pipeline, make_pipeline
from sklearn.preprocessing import StandardScaler
from sklearn.utils.estimator_checks import parametrize_with_checks

from privconf_sklearn import (
    InfeasibleCalibrationWarning,
    PrivateConformalRegressor,
    QuantilePair,
    ScoreBoundsWarning,
)
from privconf_sklearn.datasets import make_poisson_outliers
from privconf_sklearn.mechanisms import ExponQ, SplitConformal
from privconf_sklearn.metrics import (
    interval_coverage,
    interval_coverage_scorer,
    mean_interval_width,
    neg_mean_interval_width_scorer,
)
from privconf_sklearn.mondrian import PrivateGroupSizes

from ._checks import CountingExponQ, assert_private_path_ran, sign_of_first_feature
from ._coverage import covered_count_lower_limit

# Private instances at alpha = 0.2 and epsilon = 10: ExponQ's level is reachable on the
# checks' small calibration sets, so the private path runs (asserted below).
COMMON_CHECK_ESTIMATORS = [
    PrivateConformalRegressor(
        Ridge(),
        mechanism=SplitConformal(),
        score_bounds=(0.0, 10.0),
        prefit=False,
        random_state=0,
    ),
    PrivateConformalRegressor(
        Ridge(),
        mechanism=CountingExponQ(epsilon=10.0),
        alpha=0.2,
        score_bounds=(0.0, 10.0),
        prefit=False,
        random_state=0,
    ),
    PrivateConformalRegressor(
        QuantilePair(
            QuantileRegressor(quantile=0.1, alpha=0.0),
            QuantileRegressor(quantile=0.9, alpha=0.0),
        ),
        mechanism=CountingExponQ(epsilon=10.0),
        alpha=0.2,
        conformity_score="cqr",
        score_bounds=(-5.0, 5.0),
        prefit=False,
        random_state=0,
    ),
    PrivateConformalRegressor(
        Ridge(),
        mechanism=CountingExponQ(epsilon=10.0),
        alpha=0.2,
        score_bounds=(0.0, 10.0),
        mondrian=sign_of_first_feature,
        group_sizes="public",
        prefit=False,
        random_state=0,
    ),
    PrivateConformalRegressor(
        Ridge(),
        mechanism=SplitConformal(),
        score_bounds=(0.0, 10.0),
        mondrian=sign_of_first_feature,
        group_sizes=PrivateGroupSizes(epsilon=5.0, group_ids=[False, True]),
        prefit=False,
        random_state=0,
    ),
    QuantilePair(Ridge(), Ridge(alpha=2.0)),
]

#: A common check that trains an ExponQ estimator on enough rows for a private,
#: informative release: the checks must exercise the private path.
PRIVATE_PATH = (COMMON_CHECK_ESTIMATORS[1], "check_fit_idempotent")


@parametrize_with_checks(COMMON_CHECK_ESTIMATORS)
def test_sklearn_common_checks(estimator, check):
    """All scikit-learn common checks pass; none is declared as an expected failure.

    Some checks' data sets are tiny (the private level is unreachable: an
    InfeasibleCalibrationWarning) and on arbitrary scales (scores outside the bounds:
    a ScoreBoundsWarning); both warnings are expected there.
    """
    CountingExponQ.releases = []
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", InfeasibleCalibrationWarning)
        warnings.simplefilter("ignore", ScoreBoundsWarning)
        warnings.filterwarnings("ignore", message="Mondrian calibration", category=UserWarning)
        check(estimator)
    assert_private_path_ran(estimator, check, PRIVATE_PATH)


@pytest.fixture(scope="module")
def data():
    X, y = make_poisson_outliers(3000, random_state=5)
    return X, y


@pytest.fixture(scope="module")
def model(data):
    X, y = data
    return LinearRegression().fit(X[:1000], y[:1000])


def _regressor(model, **kwargs):
    params = dict(mechanism=ExponQ(epsilon=1.0), score_bounds=(0.0, 150.0), random_state=0)
    return PrivateConformalRegressor(model, **{**params, **kwargs})


def test_predict_interval_predict_and_score_delegate(data, model):
    X, y = data
    estimator = _regressor(model).fit(X[1000:2000], y[1000:2000])
    intervals = estimator.predict_interval(X[2000:])
    np.testing.assert_array_equal(intervals, estimator.predict_set(X[2000:]))
    np.testing.assert_array_equal(estimator.predict(X[2000:]), model.predict(X[2000:]))
    assert estimator.score(X[2000:], y[2000:]) == model.score(X[2000:], y[2000:])
    centre = model.predict(X[2000:])
    np.testing.assert_array_equal(
        intervals, np.c_[centre - estimator.threshold_, centre + estimator.threshold_]
    )


def test_batch_size_gives_identical_intervals(data, model):
    X, y = data
    estimator = _regressor(model).fit(X[1000:2000], y[1000:2000])
    np.testing.assert_array_equal(estimator.predict_set(X, batch_size=77), estimator.predict_set(X))


def test_dataframe_passes_through(data):
    X, y = data
    frame = pd.DataFrame({"x": X[:, 0]})
    model = LinearRegression().fit(frame[:1000], y[:1000])
    estimator = _regressor(model).fit(frame[1000:2000], y[1000:2000])
    assert list(estimator.feature_names_in_) == ["x"]
    assert estimator.predict_set(frame[2000:]).shape == (1000, 2)


def test_estimator_is_a_pipeline_fitted_by_fit(data):
    X, y = data
    estimator = _regressor(make_pipeline(StandardScaler(), Ridge()), prefit=False).fit(X, y)
    assert estimator.calibration_.n_samples == 900  # calibration_size = 0.3
    assert estimator.predict_set(X[:10]).shape == (10, 2)


def test_in_a_pipeline_as_last_step(data):
    X, y = data
    pipeline = Pipeline(
        [("scale", StandardScaler()), ("pcr", _regressor(Ridge(), prefit=False))]
    ).fit(X, y)
    intervals = pipeline[-1].predict_interval(pipeline[:-1].transform(X[:50]))
    centre = pipeline.predict(X[:50])
    # (f - t + f + t) / 2 is f up to the rounding of the two sums: a few ulps of |f| + t.
    rounding = 4 * np.finfo(float).eps * (np.abs(centre) + pipeline[-1].threshold_)
    np.testing.assert_array_less(np.abs(intervals.mean(axis=1) - centre), rounding)


def test_grid_search_over_epsilon_and_alpha_with_width_scorer(data, model):
    X, y = data
    search = GridSearchCV(
        _regressor(model),
        {"mechanism__epsilon": [0.5, 2.0], "alpha": [0.1, 0.3]},
        scoring={"width": neg_mean_interval_width_scorer, "coverage": interval_coverage_scorer},
        refit="width",
        cv=3,
    ).fit(X[1000:], y[1000:])
    widths = -search.cv_results_["mean_test_width"]
    best = int(np.argmin(widths))  # the refit candidate is the narrowest on average
    assert search.best_index_ == best and search.best_params_ == search.cv_results_["params"][best]
    assert search.best_estimator_.estimator is model
    assert np.all(widths > 0)
    intervals = search.best_estimator_.predict_interval(X[:1000])
    assert search.score(X[:1000], y[:1000]) == -mean_interval_width(intervals)
    # The refit calibrated on all of X[1000:]: a derived limit for fresh rows.
    covered = round(interval_coverage(y[:1000], intervals) * 1000)
    assert covered >= covered_count_lower_limit(search.best_estimator_, X[1000:], y[1000:], 1000)


def test_clone_keeps_prefit_estimator_and_params(model):
    estimator = _regressor(model, alpha=0.2)
    cloned = clone(estimator)
    assert cloned.estimator is model
    assert cloned.get_params()["score_bounds"] == (0.0, 150.0)
    assert cloned.mechanism is not estimator.mechanism
    assert cloned.mechanism.get_params() == estimator.mechanism.get_params()


def test_pickle_round_trip_keeps_intervals(data, model):
    X, y = data
    estimator = _regressor(model, conformity_score="absolute").fit(X[1000:2000], y[1000:2000])
    restored = pickle.loads(pickle.dumps(estimator))
    assert restored.threshold_ == estimator.threshold_
    assert restored.calibration_ == estimator.calibration_
    np.testing.assert_array_equal(restored.predict_set(X[2000:]), estimator.predict_set(X[2000:]))


def test_split_conformal_widths_shrink_as_alpha_grows(data, model):
    """Deterministic: k = ceil((n + 1)(1 - alpha)) falls with alpha, so does the threshold."""
    X, y = data
    thresholds = [
        _regressor(model, mechanism=SplitConformal(), alpha=alpha)
        .fit_calibrate(X[1000:2000], y[1000:2000])
        .threshold_
        for alpha in (0.05, 0.1, 0.2, 0.3)
    ]
    assert thresholds == sorted(thresholds, reverse=True) and thresholds[0] > thresholds[-1]
