"""SplitConformal: the exact conformal order statistic, and unreachable levels."""

import math
from fractions import Fraction

import numpy as np
import pytest

from privconf_sklearn import (
    InfeasibleCalibrationWarning,
    PrivateConformalClassifier,
    UninformativeCalibrationWarning,
)
from privconf_sklearn.mechanisms import SplitConformal
from privconf_sklearn.mechanisms.split import conformal_rank_min_n

from ._hang import no_hang


def split_conformal_rank(n, alpha):
    """ceil((n + 1)(1 - alpha)) in exact arithmetic on the given float alpha."""
    return math.ceil((n + 1) * (1 - Fraction(alpha)))


@pytest.mark.parametrize("n", [9, 10, 19, 99, 100, 999, 2400, 10001])
@pytest.mark.parametrize("alpha", [0.01, 0.05, 0.1, 0.2, 0.5, 0.9])
def test_threshold_is_the_conformal_order_statistic(n, alpha):
    scores = np.random.default_rng(n).uniform(size=n)
    k = split_conformal_rank(n, alpha)
    if k > n:
        with pytest.warns(InfeasibleCalibrationWarning):
            calibration = SplitConformal().calibrate(scores, alpha)
        assert calibration.threshold == 1.0 and not calibration.feasible
        assert not calibration.informative and "exceeds n" in calibration.reason
        return
    calibration = SplitConformal().calibrate(scores, alpha)
    assert calibration.threshold == np.sort(scores)[k - 1]
    assert calibration.coverage_lower_bound == k / (n + 1) >= 1 - alpha
    assert calibration.details["rank"] == k


def test_rank_is_exact_where_floats_round():
    # 1 - 0.1 rounds up in floating point: the rounded level gives rank 10 at n = 9,
    # the exact rank for the given alpha is 9 (coverage >= 9/10).
    assert math.ceil(10 * Fraction(1 - 0.1)) == 10
    assert split_conformal_rank(9, 0.1) == 9
    calibration = SplitConformal().calibrate(np.arange(9) / 9, 0.1)
    assert calibration.threshold == 8 / 9 and calibration.details["rank"] == 9


def test_ties_are_kept_in_the_set():
    scores = np.array([0.2] * 50 + [0.7] * 50)
    calibration = SplitConformal().calibrate(scores, 0.1)
    assert calibration.threshold == 0.7


def test_too_small_calibration_set_gives_full_sets():
    rng = np.random.default_rng(0)
    X = rng.normal(size=(100, 2))
    y = (X[:, 0] > 0).astype(int)
    from sklearn.linear_model import LogisticRegression

    model = LogisticRegression().fit(X, y)
    pcc = PrivateConformalClassifier(model, mechanism=SplitConformal(), alpha=0.05)
    with pytest.warns(InfeasibleCalibrationWarning, match="at least 19 calibration scores"):
        pcc.fit_calibrate(X[:10], y[:10])
    assert not pcc.calibration_.feasible
    assert "exceeds n = 10" in pcc.calibration_.reason
    assert pcc.calibration_.privacy.epsilon == 0.0  # nothing was read
    assert pcc.predict_set(X).all()


@pytest.mark.parametrize("alpha", [0.01, 0.05, 0.1, 0.3])
def test_minimum_calibration_size(alpha):
    n = conformal_rank_min_n(alpha)
    assert split_conformal_rank(n, alpha) <= n
    assert split_conformal_rank(n - 1, alpha) > n - 1


@pytest.mark.parametrize("alpha", [0.01, 0.05, 0.1, 0.15, 0.3])
def test_min_informative_samples(alpha):
    mechanism = SplitConformal()
    n = mechanism.min_informative_samples(alpha)
    assert n == conformal_rank_min_n(alpha)
    assert mechanism.coverage_certificate(n, alpha).feasible
    assert not mechanism.coverage_certificate(n - 1, alpha).feasible


def test_top_score_release_warns_and_is_not_informative():
    scores = np.r_[np.linspace(0, 0.5, 50), np.ones(50)]
    with pytest.warns(UninformativeCalibrationWarning, match="top of the range"):
        calibration = SplitConformal().calibrate(scores, 0.1)
    assert calibration.feasible and not calibration.informative
    assert "k = 91-th smallest" in calibration.reason


@pytest.mark.parametrize("alpha", [1e-9, 1e-12, 3e-15, 1e-15, 0.1, 1 / 3, 0.999])
def test_min_informative_samples_is_the_exact_boundary_for_small_alpha(alpha):
    # The exact boundary, in O(1): (1 - alpha) / alpha in floating point can be off by
    # many units for a tiny alpha (the old search stepped up from it one n at a time).
    with no_hang():
        n = SplitConformal().min_informative_samples(alpha)
    assert split_conformal_rank(n, alpha) <= n
    assert n == 1 or split_conformal_rank(n - 1, alpha) > n - 1


@pytest.mark.parametrize("alpha", [1e-16, 1e-25, 1e-300, 1e-320, 5e-324])
def test_tiny_alpha_is_refused_for_planning_and_infeasible_for_calibration(alpha):
    mechanism = SplitConformal()
    with no_hang():
        with pytest.raises(ValueError, match=r"no calibration size up to 1e\+15"):
            mechanism.min_informative_samples(alpha)
        assert not mechanism.coverage_certificate(500, alpha).feasible
        with pytest.warns(InfeasibleCalibrationWarning, match=r"more than 1e\+15"):
            calibration = mechanism.calibrate(np.linspace(0, 1, 500), alpha)
    assert calibration.threshold == 1.0 and not calibration.feasible


def test_tiny_alpha_through_the_classifier_returns_full_sets():
    from sklearn.linear_model import LogisticRegression

    rng = np.random.default_rng(0)
    X = rng.normal(size=(80, 2))
    y = (X[:, 0] > 0).astype(int)
    model = LogisticRegression().fit(X, y)
    pcc = PrivateConformalClassifier(model, mechanism=SplitConformal(), alpha=1e-25)
    with no_hang(), pytest.warns(InfeasibleCalibrationWarning, match=r"more than 1e\+15"):
        pcc.fit_calibrate(X, y)
    assert not pcc.calibration_.feasible and pcc.predict_set(X).all()
