"""Monte Carlo coverage of PrivateConformalRegressor against each mechanism's bound.

Each run draws a fresh calibration set and ONE fresh test point from the same
distribution, calibrates, and checks whether the test target lies in its interval. Runs
are independent, so the number of covered runs is exactly Binomial(runs, P(cover)), and
the tolerances are exact binomial quantiles (``tests/_stats.py``).

The bound checked is the marginal one: ``coverage_lower_bound`` when it holds marginally
(``lower_bound_confidence = 1``), and ``coverage_lower_bound - beta`` when it only holds
with probability ``1 - beta`` over the noise (P(cover) >= P(cover and good noise) >=
L - beta).
"""

import warnings

import numpy as np
import pytest
from scipy.stats import spearmanr
from sklearn.datasets import load_diabetes
from sklearn.linear_model import LinearRegression, QuantileRegressor
from sklearn.model_selection import train_test_split
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import PolynomialFeatures

from privconf_sklearn import (
    InfeasibleCalibrationWarning,
    PrivateConformalRegressor,
    QuantilePair,
    ScoreBoundsWarning,
)
from privconf_sklearn.datasets import make_poisson_outliers
from privconf_sklearn.mechanisms import DPAPS, PCOQS, ExponQ, SplitConformal

from ._stats import binomial_lower_limit, binomial_upper_limit

RUNS = 2000
N_CALIBRATION = 2000
ALPHA = 0.1


def _mechanisms():
    return {
        "split": SplitConformal(),
        "exponq": ExponQ(epsilon=1.0),
        "pcoqs": PCOQS(rho=0.5),
        "dpaps": DPAPS(epsilon=1.0, n_bins=10, beta=1e-3),
    }


def _polynomial_quantile(level):
    """Linear quantile regression on (x, x^2, x^3, x^4): adapts to the sin^2 noise."""
    return make_pipeline(
        PolynomialFeatures(4, include_bias=False), QuantileRegressor(quantile=level, alpha=0.0)
    )


@pytest.fixture(scope="module")
def models():
    """Models fitted once on a training set (the design of Humbert et al. 2023, Sec. 5.1)."""
    X, y = make_poisson_outliers(2000, random_state=100)
    pair = QuantilePair(_polynomial_quantile(ALPHA / 2), _polynomial_quantile(1 - ALPHA / 2))
    pair.fit(X, y)
    return {
        # Public score bounds: the outliers (about 1% of targets, sd 25) exceed them and
        # are clipped; below the top of the range clipping does not affect coverage.
        "absolute": (LinearRegression().fit(X, y), (0.0, 10.0)),
        "cqr": (pair, (-5.0, 10.0)),
    }


@pytest.fixture(scope="module")
def runs_data():
    X, y = make_poisson_outliers(RUNS * (N_CALIBRATION + 1), random_state=200)
    return X.reshape(RUNS, N_CALIBRATION + 1, 1), y.reshape(RUNS, N_CALIBRATION + 1)


@pytest.mark.slow
@pytest.mark.parametrize("mechanism", sorted(_mechanisms()))
@pytest.mark.parametrize("score", ["absolute", "cqr"])
def test_coverage_on_heteroscedastic_data(models, runs_data, score, mechanism):
    model, bounds = models[score]
    X, y = runs_data
    estimator = PrivateConformalRegressor(
        model,
        mechanism=_mechanisms()[mechanism],
        alpha=ALPHA,
        conformity_score=score,
        score_bounds=bounds,
    )
    covered, lower_bounds, upper_bounds, at_top = 0, set(), set(), 0
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ScoreBoundsWarning)
        for run in range(RUNS):
            estimator.set_params(random_state=run)
            estimator.fit_calibrate(X[run, :-1], y[run, :-1])
            lower, upper = estimator.predict_interval(X[run, -1:])[0]
            covered += bool(lower <= y[run, -1] <= upper)
            calibration = estimator.calibration_
            lower_bounds.add(
                calibration.coverage_lower_bound - (1.0 - calibration.lower_bound_confidence)
            )
            upper_bounds.add(calibration.coverage_upper_bound)
            at_top += estimator.threshold_at_upper_bound_
    (bound,) = lower_bounds  # public quantities: the same in every run
    print(
        f"{score} {mechanism}: coverage {covered / RUNS:.3f}, marginal bound {bound:.4f}, "
        f"threshold at the upper bound in {at_top} runs"
    )
    assert 0.5 < bound < 1.0
    assert covered >= binomial_lower_limit(RUNS, bound)
    if mechanism == "split":
        assert at_top == 0
        # Continuous scores and a threshold below the clipping point: P(cover) = k/(n+1).
        (upper_bound,) = upper_bounds
        assert covered <= binomial_upper_limit(RUNS, upper_bound)


def test_cqr_widths_adapt_to_the_noise_level(models):
    """CQR interval widths follow the conditional spread; absolute-residual ones cannot."""
    X_cal, y_cal = make_poisson_outliers(2000, random_state=300)
    grid = np.linspace(1.0, 5.0, 200)[:, None]
    # Conditional sd of Y | X = x without the outlier term: Poisson variance + Gaussian.
    noise_sd = np.sqrt(np.sin(grid[:, 0]) ** 2 + 0.1 + (0.03 * grid[:, 0]) ** 2)
    widths = {}
    for score in ("absolute", "cqr"):
        model, bounds = models[score]
        estimator = PrivateConformalRegressor(
            model,
            mechanism=ExponQ(epsilon=1.0),
            conformity_score=score,
            score_bounds=bounds,
            random_state=0,
        )
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", ScoreBoundsWarning)
            estimator.fit_calibrate(X_cal, y_cal)
        intervals = estimator.predict_interval(grid)
        widths[score] = intervals[:, 1] - intervals[:, 0]
    assert np.ptp(widths["absolute"]) < 1e-12
    assert spearmanr(widths["cqr"], noise_sd).statistic > 0.8
    assert widths["cqr"].max() > 2.0 * widths["cqr"].min()


DIABETES_RUNS = 1000


@pytest.mark.slow
def test_diabetes_with_diffprivlib_linear_regression(dp):
    """load_diabetes, diffprivlib LinearRegression (public bounds), alpha = 0.1.

    The model uses the two strongest predictors, bmi and s5 (diffprivlib's functional
    mechanism is unusable with all ten features on 150 rows: predictions off by 1e5
    below epsilon ~ 1e4), trained once on 150 rows with epsilon = 10. Each run permutes
    the other 292 rows into 291 calibration rows and one test row: given the data,
    calibration and test scores are exchangeable, so each run covers with probability
    at least the bound, independently of the other runs.

    Public bounds, from the data set's documentation rather than the data: features
    are centred and scaled by their standard deviation times sqrt(n_samples), so
    (-0.2, 0.2) holds z-scores up to about 4.2; the target (disease progression) is
    documented in [25, 346], so y in [0, 400], and scores |y - f(x)| are in [0, 400]
    for predictions in that range.
    """
    X, y = load_diabetes(return_X_y=True)
    X = X[:, [2, 8]]  # bmi, s5
    order = np.random.default_rng(7).permutation(len(y))
    train, pool = order[:150], order[150:]
    model = dp.models.LinearRegression(
        epsilon=10.0, bounds_X=(-0.2, 0.2), bounds_y=(0.0, 400.0), random_state=0
    ).fit(X[train], y[train])
    rng = np.random.default_rng(8)
    permutations = np.array([rng.permutation(pool) for _ in range(DIABETES_RUNS)])
    mechanisms = {
        "SplitConformal": SplitConformal(),
        "ExponQ(epsilon=1)": ExponQ(epsilon=1.0),
        "PCOQS(rho=0.5)": PCOQS(rho=0.5),
        "DPAPS(epsilon=1, B=10)": DPAPS(epsilon=1.0, n_bins=10, beta=1e-3),
    }
    print(f"\nload_diabetes, alpha = {ALPHA}, n_cal = {len(pool) - 1}, {DIABETES_RUNS} runs")
    for name, mechanism in mechanisms.items():
        estimator = PrivateConformalRegressor(
            model, mechanism=mechanism, alpha=ALPHA, score_bounds=(0.0, 400.0)
        )
        covered, width, bounds = 0, 0.0, set()
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", ScoreBoundsWarning)
            warnings.simplefilter("ignore", InfeasibleCalibrationWarning)
            for run, rows in enumerate(permutations):
                estimator.set_params(random_state=run)
                estimator.fit_calibrate(X[rows[:-1]], y[rows[:-1]])
                lower, upper = estimator.predict_interval(X[rows[-1:]])[0]
                covered += bool(lower <= y[rows[-1]] <= upper)
                width += (upper - lower) / DIABETES_RUNS
                calibration = estimator.calibration_
                bounds.add(
                    calibration.coverage_lower_bound - (1.0 - calibration.lower_bound_confidence)
                )
        (bound,) = bounds
        print(
            f"  {name:24s} coverage {covered / DIABETES_RUNS:.3f} (bound {bound:.3f}), "
            f"mean width {width:.1f}"
        )
        assert covered >= binomial_lower_limit(DIABETES_RUNS, bound)


def test_predictions_far_off_the_bounds_are_not_reported_as_covered(dp):
    """The README regression snippet on load_diabetes (issue 12): diffprivlib's
    LinearRegression with all ten features and bounds_X = (-1, 1) predicts about 1e5,
    every calibration score exceeds the public upper bound 400, the threshold sits at
    that bound and test coverage is 0. The calibration must say that its coverage
    statement does not hold, not only warn; the clip counts stay owner-side."""
    X, y = load_diabetes(return_X_y=True)
    X_train, X_rest, y_train, y_rest = train_test_split(X, y, test_size=0.5, random_state=0)
    X_cal, X_test, y_cal, y_test = train_test_split(X_rest, y_rest, test_size=0.5, random_state=0)
    model = dp.models.LinearRegression(
        epsilon=2.0, bounds_X=(-1, 1), bounds_y=(0, 400), random_state=0
    ).fit(X_train, y_train)
    assert np.abs(model.predict(X_cal)).min() > 1e4
    pcr = PrivateConformalRegressor(
        model, mechanism=ExponQ(epsilon=1.0), alpha=0.1, score_bounds=(0, 400), random_state=0
    )
    with pytest.warns(ScoreBoundsWarning, match="does NOT hold"):
        pcr.fit_calibrate(X_cal, y_cal)
    calibration = pcr.calibration_
    assert len(y_cal) == 110 and pcr.threshold_at_upper_bound_
    assert not calibration.coverage_holds
    assert "110 calibration scores exceeded it" in calibration.reason
    assert calibration.owner_diagnostics == {
        "n_scores_below_bounds": 0,
        "n_scores_above_bounds": 110,
    }
    assert not {"n_scores_below_bounds", "n_scores_above_bounds"} & set(calibration.details)
    intervals = pcr.predict_interval(X_test)
    assert not ((intervals[:, 0] <= y_test) & (y_test <= intervals[:, 1])).any()
