"""ExponQ's public parameters: q~, gamma*, m*, bounds, infeasibility."""

import numpy as np
import pytest

from privconf_sklearn import InfeasibleCalibrationWarning
from privconf_sklearn.mechanisms import ExponQ
from privconf_sklearn.mechanisms import expon_q as module
from privconf_sklearn.mechanisms.expon_q import (
    AUTO_BIN_GRID,
    bin_counts,
    coverage_upper_bound,
    expected_uniform_coverage,
    exponq_parameters,
    inflated_level,
    optimal_gamma,
    quantile_log_probabilities,
)


@pytest.mark.parametrize("n", [300, 1000, 2400, 10**5])
@pytest.mark.parametrize("epsilon", [0.5, 1.0, 10.0])
def test_inflated_level_is_equation_3(n, epsilon):
    alpha, m, gamma = 0.1, 500, 0.01
    paper = (n + 1) * (1 - alpha) / (n * (1 - gamma * alpha)) + 2 / (epsilon * n) * np.log(
        m / (gamma * alpha)
    )
    assert inflated_level(n, alpha, epsilon, m, gamma) == pytest.approx(paper, rel=1e-11)
    assert inflated_level(n, alpha, epsilon, m, gamma) >= paper
    monotone = inflated_level(n, alpha, epsilon, m, gamma, monotone=True)
    assert monotone == pytest.approx(paper - np.log(m / (gamma * alpha)) / (epsilon * n))


def test_level_below_one_half_solves_lemma_1():
    """For alpha > 1/2 the slack is c max((1 - q)/q, 1) L / (eps n): q~ solves it exactly."""
    n, alpha, epsilon, m, gamma = 200, 0.8, 1.0, 20, 0.1
    q = inflated_level(n, alpha, epsilon, m, gamma)
    target = (n + 1) * (1 - alpha) / (n * (1 - gamma * alpha))
    slack = 2 * np.log(m / (gamma * alpha)) / (epsilon * n)
    assert q < 0.5
    assert q - slack * (1 - q) / q == pytest.approx(target, rel=1e-9)


@pytest.mark.parametrize(
    ("n", "epsilon", "alpha"), [(1000, 1, 0.1), (5000, 0.3, 0.05), (500, 5, 0.2)]
)
@pytest.mark.parametrize("monotone", [False, True])
def test_optimal_gamma_minimises_the_level(n, epsilon, alpha, monotone):
    gamma = optimal_gamma(n, alpha, epsilon, monotone=monotone)
    grid = np.geomspace(1e-6, 0.999, 20000)
    levels = inflated_level(n, alpha, epsilon, 100, grid, monotone=monotone)
    best = inflated_level(n, alpha, epsilon, 100, gamma, monotone=monotone)
    assert best <= levels.min() + 1e-12


def _direct_expected_coverage(n, epsilon, q, m, offset, monotone):
    j = np.arange(1, m + 1) + offset
    w = np.maximum(n * (j - 1) / (m * q), n * (m - j) / (m * (1 - q)))
    scale = epsilon / ((1 if monotone else 2) * max(1 / q, 1 / (1 - q)))
    log_w = -scale * w
    p = np.exp(log_w - log_w.max())
    return float((p * j).sum() / p.sum() / m)


@pytest.mark.parametrize(
    ("n", "epsilon", "q", "m"),
    [
        (2400, 1, 0.93, 1000),
        (2400, 1, 0.93, 100000),
        (100, 0.5, 0.97, 10),
        (10000, 10, 0.91, 37),
        (500, 1, 0.3, 200),
        (1000, 1, 0.9, 10**6),
        (50, 1, 0.99, 3),
    ],
)
@pytest.mark.parametrize("offset", [0.0, 0.37])
@pytest.mark.parametrize("monotone", [False, True])
def test_closed_form_criterion_equals_direct_sum(n, epsilon, q, m, offset, monotone):
    closed = expected_uniform_coverage(n, epsilon, q, m, offset=offset, monotone=monotone)
    direct = _direct_expected_coverage(n, epsilon, q, m, offset, monotone)
    assert float(closed) == pytest.approx(direct, abs=1e-10)


def test_auto_parameters_are_deterministic_public_and_cached():
    exponq_parameters.cache_clear()
    state = np.random.get_state()[1].copy()  # noqa: NPY002 (the legacy global RNG)
    first = exponq_parameters(2400, 0.1, 1.0)
    assert np.array_equal(np.random.get_state()[1], state)  # noqa: NPY002
    assert exponq_parameters(2400, 0.1, 1.0) is first
    exponq_parameters.cache_clear()
    assert exponq_parameters(2400, 0.1, 1.0) == first
    n_bins, gamma, level = first
    assert n_bins in AUTO_BIN_GRID and 0 < gamma < 1 and 0.9 < level < 1


def test_bins_grow_like_n_epsilon():
    """Corollary 1 of paper 000: m* of order n epsilon."""
    bins = [exponq_parameters(n, 0.1, 1.0)[0] for n in (1000, 10**4, 10**5, 10**6)]
    assert bins == sorted(bins) and bins[-1] > 30 * bins[0]


@pytest.mark.parametrize(("n", "epsilon"), [(2400, 1.0), (10**5, 0.3), (500, 5.0)])
def test_auto_choice_is_the_criterion_minimum_above_n_epsilon(n, epsilon):
    alpha = 0.1
    n_bins, gamma, level = exponq_parameters(n, alpha, epsilon)
    levels = inflated_level(n, alpha, epsilon, AUTO_BIN_GRID, gamma)
    admissible = (levels < 1) & (AUTO_BIN_GRID >= min(n * epsilon, AUTO_BIN_GRID[-1]))
    criterion = module._bins_criterion(
        n, epsilon, levels[admissible], AUTO_BIN_GRID[admissible], False
    )
    chosen = module._bins_criterion(n, epsilon, np.array([level]), np.array([n_bins]), False)
    assert n_bins >= min(n * epsilon, AUTO_BIN_GRID[-1])
    assert chosen[0] == criterion.min()


@pytest.mark.parametrize(("n", "epsilon"), [(200, 1.0), (1000, 0.2)])
def test_auto_bins_fall_back_to_the_largest_reachable_below_n_epsilon(n, epsilon):
    """When no m >= n epsilon reaches q~ < 1, the largest m that does is used."""
    alpha = 0.1
    n_bins, gamma, level = exponq_parameters(n, alpha, epsilon)
    levels = inflated_level(n, alpha, epsilon, AUTO_BIN_GRID, gamma)
    assert not ((levels < 1) & (AUTO_BIN_GRID >= n * epsilon)).any()
    assert n_bins == AUTO_BIN_GRID[levels < 1].max()
    assert level < 1


def test_auto_bins_survive_scores_piled_near_the_quantile():
    """Scores crowding near 1 (a weak model's LAC scores): coarse bins would give full sets.

    With m = 147 (what the uniform criterion alone picks) every edge below 1 holds too
    few scores and the mechanism releases 1; with m >= n epsilon it does not.
    """
    n, alpha, epsilon = 2400, 0.1, 1.0
    rng = np.random.default_rng(0)
    n_bins, _, level = exponq_parameters(n, alpha, epsilon)
    coarse_level = inflated_level(n, alpha, epsilon, 147, optimal_gamma(n, alpha, epsilon))
    edges = {}
    for m, q in ((n_bins, level), (147, coarse_level)):
        scores = 1 - rng.beta(1.0, 40.0, size=n)
        log_p = quantile_log_probabilities(bin_counts(scores, m), q, epsilon)
        edges[m] = float(np.exp(log_p) @ (np.arange(1, m + 1) / m))
    assert edges[147] > 0.999
    assert edges[n_bins] < 0.999


def test_infeasible_level_does_not_read_the_data(monkeypatch):
    def forbidden(*args, **kwargs):
        raise AssertionError("the data were read")

    monkeypatch.setattr(module, "bin_counts", forbidden)
    with pytest.warns(InfeasibleCalibrationWarning, match="q~ = 1.05"):
        calibration = ExponQ(epsilon=1.0).calibrate(np.linspace(0, 1, 100), 0.1)
    assert calibration.threshold == 1.0 and not calibration.feasible
    assert calibration.privacy.epsilon == 0.0
    assert calibration.coverage_lower_bound == 1.0
    certificate = ExponQ(epsilon=1.0).coverage_certificate(100, 0.1)
    assert not certificate.feasible and "q~" in certificate.reason


def test_fixed_bins_and_gamma_are_used():
    calibration = ExponQ(epsilon=1.0, n_bins=64, gamma=0.05).calibrate(
        np.linspace(0, 1, 5000), 0.1, random_state=0
    )
    assert calibration.details["n_bins"] == 64 and calibration.details["gamma"] == 0.05
    assert not calibration.details["n_bins_auto"]
    assert calibration.target_level == pytest.approx(inflated_level(5000, 0.1, 1.0, 64, 0.05))
    assert (calibration.threshold * 64) % 1 == 0


def test_bin_counts_agree_with_float_comparisons():
    rng = np.random.default_rng(0)
    edges_hit = np.r_[np.arange(101) / 100, np.arange(101) / 100 + 1e-17, 0.3, 0.7]
    scores = np.clip(np.r_[rng.uniform(size=1000), edges_hit], 0, 1)
    for m in (1, 3, 10, 100, 997):
        counts = bin_counts(scores, m)
        edges = np.arange(m + 1) / m
        expected = [np.sum(scores <= edges[1])] + [
            np.sum((scores > edges[j - 1]) & (scores <= edges[j])) for j in range(2, m + 1)
        ]
        assert counts.tolist() == expected


def test_log_probabilities_are_normalised_for_extreme_utilities():
    counts = np.r_[10**7, np.zeros(98, dtype=int), 10**7]
    log_p = quantile_log_probabilities(counts, 0.999, 100.0)
    assert np.isfinite(log_p).all()
    assert np.exp(log_p).sum() == pytest.approx(1.0)


def test_upper_bound_is_above_lower_bound_and_capped():
    n = 10**5
    n_bins, gamma, level = exponq_parameters(n, 0.1, 1.0)
    upper, slope = coverage_upper_bound(n, 0.1, 1.0, n_bins, gamma, level)
    assert 0.9 < upper < 0.92 and slope == 1 - gamma * 0.1
    # At n = 2400 the q/(1 - q) factor of Lemma 1 makes Theorem 3 vacuous.
    assert coverage_upper_bound(50, 0.1, 1.0, 1000, 0.01, 0.99)[0] == 1.0
