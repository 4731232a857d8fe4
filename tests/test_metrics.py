"""The metrics: exact values on good input, and a clear refusal of every bad input."""

import numpy as np
import pandas as pd
import pytest

from privconf_sklearn.metrics import (
    interval_coverage,
    mean_interval_width,
    mean_set_size,
    set_coverage,
    singleton_rate,
)

SETS = np.array([[True, False], [True, True], [False, False]])
INTERVALS = np.array([[0.0, 1.0], [2.0, 3.0], [-1.0, 1.0]])


# ------------------------------------------------------------------- good input
def test_set_metrics_values():
    assert set_coverage([0, 1, 1], SETS, [0, 1]) == pytest.approx(2 / 3)
    assert set_coverage(pd.Series(["a", "b", "a"]), SETS, np.array(["a", "b"])) == (
        pytest.approx(2 / 3)
    )
    assert set_coverage([0.0, 1.0, 0.0], SETS, [0, 1]) == pytest.approx(2 / 3)
    assert set_coverage([True, False, True], SETS, [True, False]) == pytest.approx(2 / 3)
    assert mean_set_size(SETS) == 1.0
    assert singleton_rate(SETS) == pytest.approx(1 / 3)


def test_interval_metrics_values():
    assert interval_coverage([1.0, 2.5, 2], INTERVALS) == pytest.approx(2 / 3)
    assert interval_coverage(np.array([1, 2, 0], dtype=np.int64), INTERVALS.tolist()) == 1.0
    assert mean_interval_width(INTERVALS) == pytest.approx(4 / 3)
    assert mean_interval_width([[0, 2]]) == 2.0


# ------------------------------------------------------------- set_coverage
@pytest.mark.parametrize(
    ("y_true", "sets", "classes", "error", "match"),
    [
        ([2], [[True, False]], [0, 1, 2], ValueError, "3 labels but sets has 2 columns"),
        ([0], [[True, False]], [0], ValueError, "classes has 1 labels but sets has 2 columns"),
        ([0], [[True, False]], [[0, 1]], ValueError, r"classes must be one-dimensional.*\(1, 2\)"),
        ([0], [[True, False]], [1, 1], ValueError, r"classes holds duplicate labels: \[1\]"),
        ([0, 1], [[True, False]], [0, 1], ValueError, "y_true has 2 rows but sets has 1"),
        ([[0], [1]], SETS[:2], [0, 1], ValueError, r"y_true must be one-dimensional.*\(2, 1\)"),
        ([True, False], SETS[:2], [0, 1], TypeError, "y_true holds boolean labels.*silently"),
        (
            np.array([True, 1], dtype=object),
            SETS[:2],
            [0, 1],
            TypeError,
            "y_true holds boolean labels",
        ),
        ([1, 0], SETS[:2], [True, False], TypeError, "classes are booleans but y_true"),
        ([np.nan, 1.0], SETS[:2], [0.0, 1.0], ValueError, r"not in classes: \[nan\]"),
        ([0, 7, 7], SETS, [0, 1], ValueError, r"y_true holds labels that are not in .*\[7\]"),
        (["0", "1"], SETS[:2], [0, 1], ValueError, r"not in classes: \['0', '1'\]"),
        ([0], [[1, 0]], [0, 1], TypeError, "sets must be a boolean array"),
        ([0], [True, False], [0, 1], ValueError, r"shape \(n_samples, n_classes\)"),
        ([0], np.zeros((1, 0), dtype=bool), [], ValueError, "n_classes >= 1"),
        ([], np.zeros((0, 2), dtype=bool), [0, 1], ValueError, "sets is empty"),
        ([0, 1], [[True, False], [True]], [0, 1], ValueError, "sets must be a rectangular"),
    ],
)
def test_set_coverage_refuses_bad_input(y_true, sets, classes, error, match):
    with pytest.raises(error, match=match):
        set_coverage(y_true, sets, classes)


@pytest.mark.parametrize("metric", [mean_set_size, singleton_rate])
@pytest.mark.parametrize(
    ("sets", "error", "match"),
    [
        (np.ones((3, 2)), TypeError, "sets must be a boolean array.*float64"),
        ([["True", "False"]], TypeError, "sets must be a boolean array"),
        (np.ones(3, dtype=bool), ValueError, r"shape \(n_samples, n_classes\)"),
        (np.zeros((0, 2), dtype=bool), ValueError, "sets is empty"),
    ],
)
def test_set_size_metrics_refuse_bad_sets(metric, sets, error, match):
    with pytest.raises(error, match=match):
        metric(sets)


# -------------------------------------------------------- interval metrics
@pytest.mark.parametrize(
    ("y_true", "intervals", "error", "match"),
    [
        (["0.5", "2.5"], [[0, 1], [2, 3]], TypeError, "y_true must hold real numbers.*<U3"),
        ([True, False], [[0, 1], [2, 3]], TypeError, "y_true must hold real numbers.*bool"),
        (np.array([0.5, 2.5], dtype=object), [[0, 1], [2, 3]], TypeError, "dtype object"),
        ([np.nan, 2.5], [[0, 1], [2, 3]], ValueError, r"y_true holds NaN .* rows \[0\]"),
        ([0.5, np.inf], [[0, 1], [2, 3]], ValueError, r"y_true holds NaN or infinite .*\[1\]"),
        ([[0.5, 2.5]], [[0, 1], [2, 3]], ValueError, r"y_true must be one-dimensional"),
        ([0.5], [[0, 1], [2, 3]], ValueError, "y_true has 1 rows but intervals has 2"),
        ([0.5, 2.5], [["0", "1"], ["2", "3"]], TypeError, "intervals must hold real numbers"),
        ([0.5, 2.5], [[False, True], [True, True]], TypeError, "intervals must hold real"),
        ([0.5, 2.5], [[0, 1], [np.nan, 3]], ValueError, r"intervals holds NaN .* rows \[1\]"),
        ([0.5, 2.5], [[0, 1, 2], [2, 3, 4]], ValueError, r"shape \(n_samples, 2\); got \(2, 3\)"),
        ([], np.zeros((0, 2)), ValueError, "intervals is empty"),
        ([0.5, 2.5], [[0, 1], [2]], ValueError, "intervals must be a rectangular"),
    ],
)
def test_interval_coverage_refuses_bad_input(y_true, intervals, error, match):
    with pytest.raises(error, match=match):
        interval_coverage(y_true, intervals)


@pytest.mark.parametrize(
    ("intervals", "error", "match"),
    [
        ([[0, 1], [np.nan, 3]], ValueError, r"intervals holds NaN or infinite values .*\[1\]"),
        ([[0, np.inf]], ValueError, "intervals holds NaN or infinite"),
        ([[True, True]], TypeError, "intervals must hold real numbers"),
        ([[0, 1, 2]], ValueError, r"shape \(n_samples, 2\)"),
        (np.zeros((0, 2)), ValueError, "intervals is empty"),
    ],
)
def test_mean_interval_width_refuses_bad_intervals(intervals, error, match):
    with pytest.raises(error, match=match):
        mean_interval_width(intervals)
