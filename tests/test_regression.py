"""PrivateConformalRegressor: exactness, public score bounds, scores and bad input."""

import warnings

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from mapie.regression import SplitConformalRegressor
from sklearn.base import BaseEstimator, RegressorMixin
from sklearn.dummy import DummyRegressor
from sklearn.exceptions import NotFittedError
from sklearn.linear_model import LinearRegression, Ridge
from sklearn.utils._param_validation import InvalidParameterError

from privconf_sklearn import (
    InfeasibleCalibrationWarning,
    PrivacyLeakWarning,
    PrivateConformalRegressor,
    QuantilePair,
    ScoreBoundsWarning,
)
from privconf_sklearn.datasets import make_poisson_outliers
from privconf_sklearn.mechanisms import DPAPS, PCOQS, Calibration, ExponQ, SplitConformal
from privconf_sklearn.privacy import PrivacyGuarantee
from privconf_sklearn.scores import (
    CQR,
    AbsoluteResidual,
    NormalizedResidual,
    threshold_in_score_units,
    to_unit_range,
)

MECHANISMS = {
    "split": SplitConformal(),
    "exponq": ExponQ(epsilon=1.0),
    "pcoqs": PCOQS(rho=0.5),
    "dpaps": DPAPS(epsilon=1.0, n_bins=50, beta=1e-3),
}


class FixedOutputRegressor(RegressorMixin, BaseEstimator):
    """Returns a fixed array from predict (to feed scores exact, chosen outputs)."""

    def __init__(self, output=None):
        self.output = output

    def fit(self, X, y):
        self.fitted_ = True
        return self

    def predict(self, X):
        return np.asarray(self.output)[: len(X)]


@pytest.fixture(scope="module")
def data():
    X, y = make_poisson_outliers(6000, random_state=0)
    return (X[:2000], y[:2000]), (X[2000:4000], y[2000:4000]), (X[4000:], y[4000:])


@pytest.fixture(scope="module")
def linear(data):
    (X, y), _, _ = data
    return LinearRegression().fit(X, y)


def _quiet_fit(estimator, X, y):
    """Fit where clipping/infeasibility warnings are irrelevant to the test."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ScoreBoundsWarning)
        warnings.simplefilter("ignore", InfeasibleCalibrationWarning)
        return estimator.fit_calibrate(X, y)


# ------------------------------------------------------------------ exactness
@pytest.mark.parametrize("score_bounds", [(0.0, 30.0), (-1.0, 13.0), (0.0, 7.3), None])
@pytest.mark.parametrize("n", [517, 999, 1000])
@pytest.mark.parametrize("alpha", [0.05, 0.1, 0.2])
def test_split_conformal_intervals_equal_mapie(data, linear, score_bounds, n, alpha):
    """Bit-for-bit MAPIE SplitConformalRegressor intervals, also when the map to [0, 1]
    is not one-to-one (bounds (-1, 13) and (0, 7.3) merge neighbouring floats) and with
    bounds taken from the data."""
    _, (X_cal, y_cal), (X_test, _) = data
    ours = PrivateConformalRegressor(
        linear, mechanism=SplitConformal(), alpha=alpha, score_bounds=score_bounds
    )
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", PrivacyLeakWarning)
        _quiet_fit(ours, X_cal[:n], y_cal[:n])
    mapie = SplitConformalRegressor(linear, confidence_level=1 - alpha, prefit=True)
    mapie.conformalize(X_cal[:n], y_cal[:n])
    _, mapie_intervals = mapie.predict_interval(X_test)
    np.testing.assert_array_equal(ours.predict_set(X_test), mapie_intervals[:, :, 0])
    assert ours.threshold_ in np.abs(y_cal[:n] - linear.predict(X_cal[:n]))


@settings(max_examples=300, deadline=None)
@given(
    low=st.floats(-1e6, 1e6, allow_nan=False, allow_subnormal=True),
    width=st.floats(1e-300, 1e6, allow_nan=False),
    t=st.floats(0.0, 1.0),
)
def test_private_threshold_covers_exactly_what_the_release_covers(low, width, t):
    """For a private release, s <= threshold_ iff (s - low) / (high - low) <= t, for every
    float s in [low, high]: checked at threshold_ and at its float neighbours."""
    high = low + width
    if not high > low:
        return
    release = Calibration("X", t, 10, 0.1, PrivacyGuarantee.pure(1.0), 0.9)
    scores = np.array([low, high])
    threshold = threshold_in_score_units(
        release, scores, to_unit_range(scores, low, high), low, high
    )
    assert low <= threshold <= high
    assert to_unit_range(threshold, low, high) <= t
    above = np.nextafter(threshold, np.inf)
    assert threshold == high or to_unit_range(above, low, high) > t
    if t == 1.0:
        assert threshold == high


def test_private_threshold_reads_no_data():
    """The private mapping depends on the release and the public bounds only."""
    release = Calibration("X", 0.3, 3, 0.1, PrivacyGuarantee.pure(1.0), 0.9)
    thresholds = {
        threshold_in_score_units(release, s, to_unit_range(s, -1.0, 13.0), -1.0, 13.0)
        for s in (np.array([0.0, 3.2, 12.0]), np.array([3.2000000000000006, 5.0, 9.0]))
    }
    assert len(thresholds) == 1


@pytest.mark.parametrize("name", sorted(MECHANISMS))
def test_calibration_scores_covered_iff_unit_score_below_release(data, linear, name):
    """Every mechanism: the calibration scores the mechanism counts as covered (unit score
    <= t) are exactly those with score <= threshold_."""
    _, (X_cal, y_cal), _ = data
    bounds = (-1.0, 13.0)
    model = PrivateConformalRegressor(
        linear, mechanism=MECHANISMS[name], score_bounds=bounds, random_state=1
    )
    _quiet_fit(model, X_cal, y_cal)
    scores = np.clip(np.abs(y_cal - linear.predict(X_cal)), *bounds)
    unit = to_unit_range(scores, *bounds)
    np.testing.assert_array_equal(scores <= model.threshold_, unit <= model.calibration_.threshold)


# --------------------------------------------------------------- public bounds
@pytest.mark.parametrize("score", ["absolute", "cqr"])
@pytest.mark.parametrize("name", sorted(MECHANISMS))
def test_privacy_leak_warning_iff_bounds_missing(data, linear, score, name):
    _, (X_cal, y_cal), _ = data
    estimator = linear if score == "absolute" else _pair(linear)
    kwargs = dict(mechanism=MECHANISMS[name], conformity_score=score, random_state=0)
    with warnings.catch_warnings():
        warnings.simplefilter("error", PrivacyLeakWarning)
        given_bounds = _quiet_fit(
            PrivateConformalRegressor(estimator, score_bounds=(-20.0, 30.0), **kwargs),
            X_cal,
            y_cal,
        )
    assert given_bounds.calibration_.privacy.holds
    assert given_bounds.calibration_.details["score_bounds_source"] == "public"
    with pytest.warns(PrivacyLeakWarning, match="score_bounds=None"):
        missing = _quiet_fit(PrivateConformalRegressor(estimator, **kwargs), X_cal, y_cal)
    privacy = missing.calibration_.privacy
    assert not privacy.holds and not privacy.is_private
    assert "NOT HOLDING" in privacy.description
    assert missing.calibration_.details["score_bounds_source"] == "calibration data"
    raw = missing.score_.conformity_scores(
        missing.score_.estimator_outputs(estimator, X_cal), y_cal
    )
    assert missing.score_bounds_ == (raw.min(), raw.max())


def test_clipping_is_counted_reported_and_warned():
    """Scores 0..9 (|y - 0|) against bounds (2.5, 6): 3 below, 3 above."""
    y = np.arange(10.0)
    model = FixedOutputRegressor(np.zeros(10)).fit(None, None)
    estimator = PrivateConformalRegressor(
        model, mechanism=SplitConformal(), alpha=0.3, score_bounds=(2.5, 6.0)
    )
    with pytest.warns(ScoreBoundsWarning) as record:
        estimator.fit_calibrate(np.zeros((10, 1)), y)
    messages = [str(w.message) for w in record]
    assert any("6 of 10 calibration scores" in m and "(3 below, 3 above)" in m for m in messages)
    assert any(
        "as wide as score_bounds allow" in m
        and "3 calibration scores did" in m
        and "does NOT hold" in m
        for m in messages
    )
    calibration = estimator.calibration_
    # Clip counts are owner-side diagnostics, never among the published details.
    assert calibration.owner_diagnostics == {"n_scores_below_bounds": 3, "n_scores_above_bounds": 3}
    assert set(calibration.details) == {
        "rank",
        "score_bounds",
        "score_bounds_source",
        "threshold_at_upper_bound",
        "coverage_assumes_scores_within_bounds",
    }
    # k = ceil(11 * 0.7) = 8: the 8th smallest clipped score is 6 (clipped 7): the top.
    assert estimator.threshold_ == 6.0 and estimator.threshold_at_upper_bound_
    # ... and scores above the bound were seen: the coverage statement does not hold.
    assert not calibration.coverage_holds
    assert "3 calibration scores exceeded it" in calibration.reason

    inside = PrivateConformalRegressor(
        model, mechanism=SplitConformal(), alpha=0.3, score_bounds=(0.0, 9.0)
    )
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        inside.fit_calibrate(np.zeros((10, 1)), y)
    assert inside.calibration_.owner_diagnostics["n_scores_above_bounds"] == 0
    assert inside.threshold_ == 7.0 and not inside.threshold_at_upper_bound_
    assert inside.calibration_.coverage_holds


def test_cqr_negative_scores_clipped_below():
    band = np.tile([-2.0, 2.0], (6, 1))  # scores max(-2 - y, y - 2)
    y = np.array([0.0, 0.5, -1.0, 1.5, 3.0, 10.0])  # scores -2, -1.5, -1, -0.5, 1, 8
    estimator = PrivateConformalRegressor(
        FixedOutputRegressor(band).fit(None, None),
        mechanism=SplitConformal(),
        alpha=0.4,
        conformity_score="cqr",
        score_bounds=(-1.2, 4.0),
    )
    with pytest.warns(ScoreBoundsWarning, match=r"\(2 below, 1 above\)"):
        estimator.fit_calibrate(np.zeros((6, 1)), y)
    # k = ceil(7 * 0.6) = 5: clipped scores -1.2, -1.2, -1, -0.5, 1, 4 -> 1.
    assert estimator.threshold_ == 1.0
    np.testing.assert_array_equal(estimator.predict_set(np.zeros((1, 1))), [[-3.0, 3.0]])


def test_threshold_at_top_of_range_is_stated():
    """An infeasible request: the interval is as wide as the bounds allow, flagged."""
    model = FixedOutputRegressor(np.full(5, 1.0)).fit(None, None)
    estimator = PrivateConformalRegressor(
        model, mechanism=SplitConformal(), alpha=0.1, score_bounds=(0.0, 4.0)
    )
    with pytest.warns(InfeasibleCalibrationWarning):
        estimator.fit_calibrate(np.zeros((5, 1)), np.arange(5.0))
    assert estimator.threshold_ == 4.0
    assert estimator.threshold_at_upper_bound_
    assert estimator.calibration_.details["threshold_at_upper_bound"]
    assert not estimator.calibration_.feasible
    # No score above the bound: the (trivial) statement still holds.
    assert estimator.calibration_.coverage_holds
    np.testing.assert_array_equal(estimator.predict_set(np.zeros((2, 1))), [[-3.0, 5.0]] * 2)


def test_feasible_threshold_at_top_warns():
    model = FixedOutputRegressor(np.zeros(50)).fit(None, None)
    estimator = PrivateConformalRegressor(
        model, mechanism=SplitConformal(), score_bounds=(0.0, 1.0)
    )
    with pytest.warns(ScoreBoundsWarning) as record:
        estimator.fit_calibrate(np.zeros((50, 1)), np.full(50, 3.0))
    assert any("as wide as score_bounds allow" in str(w.message) for w in record)
    assert estimator.threshold_at_upper_bound_ and estimator.calibration_.feasible
    assert not estimator.calibration_.coverage_holds


def test_single_distinct_score_with_data_bounds():
    model = FixedOutputRegressor(np.zeros(30)).fit(None, None)
    estimator = PrivateConformalRegressor(model, mechanism=SplitConformal())
    with pytest.warns(PrivacyLeakWarning):
        estimator.fit_calibrate(np.zeros((30, 1)), np.full(30, 2.0))
    assert estimator.threshold_ == 2.0
    low, high = estimator.score_bounds_
    assert low == 2.0 and high == np.nextafter(2.0, 3.0)
    # Data-derived bounds are owner-side diagnostics, not published details.
    assert estimator.calibration_.owner_diagnostics["score_bounds"] == (low, high)
    assert "score_bounds" not in estimator.calibration_.details


# ---------------------------------------------------------------------- scores
def test_interval_membership_equals_score_rule_in_exact_arithmetic():
    """Dyadic data (exact float arithmetic): y in interval iff score <= threshold."""
    rng = np.random.default_rng(3)
    f = rng.integers(-64, 64, 400) / 8.0
    sigma = rng.integers(1, 16, 400) / 4.0
    y = rng.integers(-128, 128, 400) / 8.0
    band = np.column_stack([f - 1.0, f + rng.integers(0, 16, 400) / 8.0])
    cases = [
        (AbsoluteResidual(), f),
        (CQR(), band),
        (NormalizedResidual(_sigma_model(1.0)), np.column_stack([f, sigma])),
    ]
    for score, outputs in cases:
        scores = score.conformity_scores(outputs, y)
        for threshold in (-0.5, 0.0, 0.75, 1.25, 3.0):
            intervals = score.predict_set(outputs, threshold)
            inside = (intervals[:, 0] <= y) & (y <= intervals[:, 1])
            np.testing.assert_array_equal(inside, scores <= threshold)


def test_normalized_residual_end_to_end_and_clone(data, linear):
    (X_train, y_train), (X_cal, y_cal), (X_test, _) = data
    residuals = np.abs(y_train - linear.predict(X_train))
    sigma = Ridge().fit(np.c_[X_train, X_train**2], residuals)

    class Quadratic(RegressorMixin, BaseEstimator):
        def fit(self, X, y):
            self.model_ = sigma
            return self

        def predict(self, X):
            return self.model_.predict(np.c_[X, X**2])

    difficulty = Quadratic().fit(X_train, residuals)
    score = NormalizedResidual(difficulty, min_difficulty=0.05)
    estimator = PrivateConformalRegressor(
        linear,
        mechanism=ExponQ(epsilon=1.0),
        conformity_score=score,
        score_bounds=(0.0, 50.0),
        random_state=0,
    )
    _quiet_fit(estimator, X_cal, y_cal)
    assert estimator.score_.difficulty_estimator is difficulty
    intervals = estimator.predict_interval(X_test)
    widths = intervals[:, 1] - intervals[:, 0]
    expected = 2 * estimator.threshold_ * np.maximum(difficulty.predict(X_test), 0.05)
    np.testing.assert_allclose(widths, expected, rtol=1e-12)
    assert widths.std() > 0


def test_quantile_pair_prefit_and_fit(data, linear):
    (X, y), _, (X_test, _) = data
    low, high = (
        DummyRegressor(strategy="quantile", quantile=0.1).fit(X, y),
        DummyRegressor(strategy="quantile", quantile=0.9).fit(X, y),
    )
    pair = QuantilePair(low, high)
    expected = np.column_stack([low.predict(X_test), high.predict(X_test)])
    np.testing.assert_array_equal(pair.predict_quantiles(X_test), expected)
    np.testing.assert_array_equal(pair.predict(X_test), expected.mean(axis=1))
    refit = QuantilePair(DummyRegressor(strategy="quantile", quantile=0.1), high).fit(X, y)
    assert refit.lower_ is not refit.lower
    with pytest.raises(NotFittedError, match="lower regressor"):
        QuantilePair(DummyRegressor(), high).predict_quantiles(X_test)


# ------------------------------------------------------------------- bad input
@pytest.mark.parametrize(
    ("bounds", "error"),
    [
        ((1.0, 1.0), ValueError),
        ((2.0, 1.0), ValueError),
        ((np.nan, 1.0), ValueError),
        ((0.0, np.inf), ValueError),
        ((-1e308, 1e308), ValueError),
        ((0, 10**400), ValueError),
        ((-(10**400), 0), ValueError),
        ((0.0,), ValueError),
        ((0.0, 1.0, 2.0), ValueError),
        ("0,1", TypeError),
        ((True, 2.0), TypeError),
        (("a", 1.0), TypeError),
        (5.0, TypeError),
    ],
)
def test_bad_score_bounds(data, linear, bounds, error):
    _, (X_cal, y_cal), _ = data
    estimator = PrivateConformalRegressor(linear, mechanism=SplitConformal(), score_bounds=bounds)
    with pytest.raises(error, match="score_bounds"):
        estimator.fit_calibrate(X_cal, y_cal)
    assert not hasattr(estimator, "calibration_")
    with pytest.raises(error, match="score_bounds"):  # refused before any data is read
        estimator.fit_calibrate(None, None)


@pytest.mark.parametrize("bad", [np.nan, np.inf, -np.inf])
def test_non_finite_targets(data, linear, bad):
    _, (X_cal, y_cal), _ = data
    y = y_cal.copy()
    y[[3, 17]] = bad
    estimator = PrivateConformalRegressor(
        linear, mechanism=SplitConformal(), score_bounds=(0.0, 30.0)
    )
    with pytest.raises(ValueError, match=r"NaN or infinite targets in 2 rows.*\[3, 17\]"):
        estimator.fit_calibrate(X_cal, y)
    assert not hasattr(estimator, "calibration_")


@pytest.mark.parametrize(
    "targets",
    [
        np.array(["a", "b", "c"]),
        np.array(["1.5", "2", "3"], dtype=object),  # would be parsed by astype(float)
        np.array([1.5, 2.0, 3.0], dtype=object),
        np.array([True, False, True]),
    ],
    ids=["str", "object-str", "object-float", "bool"],
)
def test_non_numeric_targets_are_not_converted(data, linear, targets):
    _, (X_cal, _), _ = data
    estimator = PrivateConformalRegressor(
        linear, mechanism=SplitConformal(), score_bounds=(0.0, 30.0)
    )
    with pytest.raises(TypeError, match="real-valued targets"):
        estimator.fit_calibrate(X_cal[:3], targets)
    assert not hasattr(estimator, "calibration_")


@pytest.mark.parametrize(
    ("output", "score", "match"),
    [
        (np.zeros((20, 3)), "absolute", r"shape \(20, 3\).*\(n_samples,\)"),
        (np.zeros((20, 2, 1)), "absolute", r"shape \(20, 2, 1\)"),
        (np.zeros(20), "cqr", r"shape \(20,\); expected two quantile predictions"),
        (np.zeros((20, 3)), "cqr", r"shape \(20, 3\).*QuantilePair"),
        (np.where(np.arange(20) == 4, np.nan, 0.0), "absolute", r"NaN or infinite.*\[4\]"),
        (np.full((20, 2), np.inf), "cqr", "NaN or infinite"),
        (np.array(["x"] * 20), "absolute", "dtype <U1"),
    ],
)
def test_bad_predictions(output, score, match):
    estimator = PrivateConformalRegressor(
        FixedOutputRegressor(output).fit(None, None),
        mechanism=SplitConformal(),
        conformity_score=score,
        score_bounds=(-5.0, 5.0),
    )
    with pytest.raises(ValueError, match=match):
        estimator.fit_calibrate(np.zeros((20, 1)), np.zeros(20))
    assert not hasattr(estimator, "calibration_")


def test_bad_predictions_at_predict_time(data, linear):
    _, (X_cal, y_cal), _ = data
    estimator = _quiet_fit(
        PrivateConformalRegressor(linear, mechanism=SplitConformal(), score_bounds=(0, 30)),
        X_cal,
        y_cal,
    )
    X_bad = X_cal[:5].copy()
    estimator.estimator_ = FixedOutputRegressor(np.array([0.0, np.nan, 1.0, 2.0, 3.0]))
    with pytest.raises(ValueError, match=r"NaN or infinite values in 1 rows.*\[1\]"):
        estimator.predict_set(X_bad)


def test_pair_of_estimators_is_rejected_with_hint(data, linear):
    _, (X_cal, y_cal), _ = data
    for prefit in (True, False):
        estimator = PrivateConformalRegressor(
            (linear, linear),
            mechanism=SplitConformal(),
            conformity_score="cqr",
            score_bounds=(-5, 5),
            prefit=prefit,
        )
        with pytest.raises(TypeError, match=r"QuantilePair\(lower, upper\)"):
            estimator.fit(X_cal, y_cal)


def test_unknown_score_and_normalized_misuse(data, linear):
    _, (X_cal, y_cal), _ = data
    expected = (
        r"The 'conformity_score' parameter of PrivateConformalRegressor must be a str among "
        r"\{('absolute', 'cqr'|'cqr', 'absolute')\} or an instance of "
        r"'privconf_sklearn.scores._base.BaseConformityScore'\. Got 'lac' instead\."
    )
    with pytest.raises(InvalidParameterError, match=expected):
        PrivateConformalRegressor(
            linear, mechanism=SplitConformal(), conformity_score="lac", score_bounds=(0, 1)
        ).fit_calibrate(X_cal, y_cal)
    cases = [
        (NormalizedResidual(Ridge()), NotFittedError, "difficulty_estimator Ridge is not fitted"),
        (NormalizedResidual(_sigma_model(-1.0)), ValueError, "values <= 0 in 2000 rows"),
        (
            NormalizedResidual(_sigma_model(1.0), min_difficulty=0),
            InvalidParameterError,
            "The 'min_difficulty' parameter of NormalizedResidual must be None or a float",
        ),
        (NormalizedResidual(object()), TypeError, "difficulty_estimator.predict"),
    ]
    for score, error, match in cases:
        estimator = PrivateConformalRegressor(
            linear, mechanism=SplitConformal(), conformity_score=score, score_bounds=(0, 9)
        )
        with pytest.raises(error, match=match):
            estimator.fit_calibrate(X_cal, y_cal)
        assert not hasattr(estimator, "calibration_")


def test_accountant_records_spend_even_when_privacy_is_broken(data, linear, dp):
    _, (X_cal, y_cal), _ = data
    accountant = dp.accountant.BudgetAccountant()
    estimator = PrivateConformalRegressor(
        linear, mechanism=ExponQ(epsilon=0.7), accountant=accountant, random_state=0
    )
    with pytest.warns(PrivacyLeakWarning):
        _quiet_fit(estimator, X_cal, y_cal)
    assert tuple(accountant.total()) == (0.7, 0.0)


def _sigma_model(value):
    return DummyRegressor(strategy="constant", constant=value).fit([[0.0]], [value])


def _pair(model):
    """A 'quantile' pair shifted around a point model (enough for API tests)."""
    return QuantilePair(_Shifted(model, -1.0), _Shifted(model, 1.0))


class _Shifted(RegressorMixin, BaseEstimator):
    def __init__(self, model=None, shift=0.0):
        self.model = model
        self.shift = shift

    def fit(self, X, y):
        self.model_ = self.model
        return self

    def __sklearn_is_fitted__(self):
        return True

    def predict(self, X):
        return self.model.predict(X) + self.shift


# ------------------------------------------------------- loose public bounds
def test_threshold_above_every_score_warns_and_stays_owner_side():
    """Public bounds far wider than the scores: the release sits on the grid's first edges,
    above every calibration score, and the user is told (the interval width then comes
    from the bounds, not the data). With bounds that fit the scores, no such warning."""
    rng = np.random.default_rng(0)
    X = rng.normal(size=(6000, 3))
    y = X @ np.array([1.0, -2.0, 0.5]) + rng.normal(size=6000)
    model = LinearRegression().fit(X[:1000], y[:1000])
    X_cal, y_cal = X[1000:], y[1000:]
    loose = PrivateConformalRegressor(
        model, mechanism=ExponQ(epsilon=1.0), score_bounds=(0.0, 1e6), random_state=0
    )
    with pytest.warns(ScoreBoundsWarning, match="exceeds every calibration score"):
        loose.fit_calibrate(X_cal, y_cal)
    assert loose.calibration_.owner_diagnostics["threshold_above_every_score"] is True
    assert "threshold_above_every_score" not in loose.calibration_.details
    assert "threshold_above_every_score" not in loose.card_.to_json()
    fitting = PrivateConformalRegressor(
        model, mechanism=ExponQ(epsilon=1.0), score_bounds=(0.0, 10.0), random_state=0
    )
    with warnings.catch_warnings():
        warnings.simplefilter("error", ScoreBoundsWarning)
        fitting.fit_calibrate(X_cal, y_cal)
    assert fitting.calibration_.owner_diagnostics["threshold_above_every_score"] is False
    # Split conformal releases a calibration score itself: never above every score.
    split = PrivateConformalRegressor(model, mechanism=SplitConformal(), score_bounds=(0.0, 1e6))
    with warnings.catch_warnings():
        warnings.simplefilter("error", ScoreBoundsWarning)
        split.fit_calibrate(X_cal, y_cal)
