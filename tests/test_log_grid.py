"""ExponQ on a public log-spaced grid: the edges, exact privacy, sampling, bad input."""

import warnings

import numpy as np
import pytest

from privconf_sklearn.mechanisms import ExponQ, LogGrid, UninformativeCalibrationWarning

from ._exact_tails import assert_counts_match


def test_edges_are_public_increasing_and_end_at_one():
    for resolution in (1e-6, 0.01, 0.5):
        for n_bins in (1, 2, 7, 1000):
            edges = LogGrid(resolution).edges(n_bins)
            assert edges.shape == (n_bins,) and edges[-1] == 1.0
            assert np.all(np.diff(edges) > 0)
    edges = LogGrid(0.01).edges(100)
    shifted = edges[:-1] + 0.01  # e_j + r is geometric: log-spaced above the resolution
    assert np.allclose(shifted[1:] / shifted[:-1], shifted[1] / shifted[0], rtol=1e-9)


def test_scores_count_at_the_first_edge_at_or_above_them():
    mechanism = ExponQ(epsilon=1.0, n_bins=5, grid=LogGrid(0.1))
    edges = mechanism.edges(5)
    scores = np.r_[0.0, edges, np.nextafter(edges[:-1], 2.0)]
    values, _log_p = mechanism.threshold_distribution(np.tile(scores, 10), 0.2)
    assert np.array_equal(values, edges)
    # A released edge covers exactly the scores <= it (prediction-time comparison).
    from privconf_sklearn.mechanisms._statistics import edge_counts

    counts = edge_counts(scores, edges)
    assert counts.tolist() == [2, 2, 2, 2, 2]  # {0, e_1}, {e_1+, e_2}, ..., {e_4+, 1}


@pytest.mark.parametrize("epsilon", [0.5, 2.0])
def test_exact_privacy_on_neighbours(epsilon):
    rng = np.random.default_rng(int(10 * epsilon))
    mechanism = ExponQ(epsilon=epsilon, grid=LogGrid(0.01))
    bound = mechanism.privacy_guarantee().under("replace-one").epsilon
    worst = 0.0
    for n in (50, 300):
        scores = rng.exponential(0.05, size=n).clip(0, 1)
        _values, base = mechanism.threshold_distribution(scores, 0.1)
        for replacement in (0.0, 1.0, rng.uniform()):
            other = scores.copy()
            other[int(rng.integers(n))] = replacement
            _values, changed = mechanism.threshold_distribution(other, 0.1)
            worst = max(worst, float(np.max(np.abs(base - changed))))
    assert worst <= bound * (1 + 1e-9)


@pytest.mark.slow
def test_sampler_follows_the_exact_distribution():
    scores = np.random.default_rng(1).exponential(0.05, size=200).clip(0, 1)
    mechanism = ExponQ(epsilon=1.0, grid=LogGrid(0.01))
    values, log_p = mechanism.threshold_distribution(scores, 0.1)
    noise = np.random.default_rng(2)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UninformativeCalibrationWarning)
        released = [
            mechanism.calibrate(scores, 0.1, random_state=noise).threshold for _ in range(6000)
        ]
    index = np.searchsorted(values, released)
    assert np.array_equal(values[index], released)
    assert_counts_match(np.bincount(index, minlength=values.size), np.exp(log_p))


def test_grid_is_recorded_and_clonable():
    from sklearn.base import clone

    mechanism = ExponQ(epsilon=1.0, grid=LogGrid(0.02))
    calibration = mechanism.calibrate(np.linspace(0, 0.3, 400), 0.1, random_state=0)
    assert calibration.details["grid"] == "log (resolution 0.02)"
    assert clone(mechanism).get_params()["grid"].resolution == 0.02


@pytest.mark.parametrize("grid", ["log", LogGrid(0.0), LogGrid(1.0), LogGrid(True), None, 0.01])
def test_bad_grid_is_rejected_by_name(grid):
    with pytest.raises((ValueError, TypeError), match=r"grid|resolution"):
        ExponQ(epsilon=1.0, grid=grid).calibrate(np.linspace(0, 1, 100), 0.1)
