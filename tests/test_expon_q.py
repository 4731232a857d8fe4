"""ExponQ's public parameters: q~, gamma*, m*, bounds, strict counts, infeasibility."""

import math
import warnings

import numpy as np
import pytest
from sklearn.utils._param_validation import InvalidParameterError

from privconf_sklearn import InfeasibleCalibrationWarning, UninformativeCalibrationWarning
from privconf_sklearn.mechanisms import ExponQ
from privconf_sklearn.mechanisms import expon_q as module
from privconf_sklearn.mechanisms.expon_q import (
    AUTO_BIN_GRID,
    SCALINGS,
    bin_counts,
    coverage_upper_bound,
    exact_level,
    expected_uniform_coverage,
    exponq_parameters,
    inflated_level,
    optimal_gamma,
    quantile_log_probabilities,
)

#: The scalings of the paper's utility (the shaped default has its own tests).
PAPER_SCALINGS = tuple(s for s in SCALINGS if s != "shaped")


# ------------------------------------------------------------------ the level
@pytest.mark.parametrize("n", [300, 1000, 2400, 10**5])
@pytest.mark.parametrize("epsilon", [0.5, 1.0, 10.0])
def test_paper_level_is_equation_3(n, epsilon):
    alpha, m, gamma = 0.1, 500, 0.01
    log_term = np.log(m / (gamma * alpha))
    paper = (n + 1) * (1 - alpha) / (n * (1 - gamma * alpha)) + 2 / (epsilon * n) * log_term
    level = inflated_level(n, alpha, epsilon, m, gamma, scaling="paper")
    assert level == pytest.approx(paper, rel=1e-11) and level >= paper
    monotone = inflated_level(n, alpha, epsilon, m, gamma, scaling="monotone")
    assert monotone == pytest.approx(paper - log_term / (epsilon * n))


@pytest.mark.parametrize("alpha", [0.02, 0.1, 0.5, 0.8])
@pytest.mark.parametrize(("n", "epsilon"), [(50, 2.0), (2400, 1.0), (10**6, 0.1)])
def test_tight_level_is_the_smallest_meeting_the_tight_lemma_1(n, alpha, epsilon):
    """q~ solves q - L / (epsilon n q) = T, with rounding on the safe side only."""
    m, gamma = 300, 0.05
    target = (n + 1) * (1 - alpha) / (n * (1 - gamma * alpha))
    slack = math.log(m / (gamma * alpha)) / (epsilon * n)
    level = inflated_level(n, alpha, epsilon, m, gamma)
    assert level - slack / level >= target  # meets the lemma
    lower = level * (1 - 1e-9)
    assert lower - slack / lower < target  # and nothing noticeably smaller does


def test_paper_level_below_one_half_solves_lemma_1():
    """For alpha > 1/2 the slack is c max((1 - q)/q, 1) L / (eps n): q~ solves it exactly."""
    n, alpha, epsilon, m, gamma = 200, 0.8, 1.0, 20, 0.1
    q = inflated_level(n, alpha, epsilon, m, gamma, scaling="paper")
    target = (n + 1) * (1 - alpha) / (n * (1 - gamma * alpha))
    slack = 2 * np.log(m / (gamma * alpha)) / (epsilon * n)
    assert q < 0.5
    assert q - slack * (1 - q) / q == pytest.approx(target, rel=1e-9)


def test_tight_level_at_the_issue_settings():
    """n = 2400 and n = 171 at epsilon = 1, alpha = 0.1 (issue 12's expected values)."""
    assert ExponQ(1.0, scaling="tight").resolve_parameters(2400, 0.1).level == pytest.approx(
        0.9079, abs=5e-4
    )
    assert ExponQ(1.0, scaling="paper").resolve_parameters(2400, 0.1).level == pytest.approx(
        0.9136, abs=5e-4
    )
    assert ExponQ(1.0, scaling="tight").resolve_parameters(171, 0.1).level == pytest.approx(
        0.973, abs=1e-3
    )
    assert ExponQ(1.0, scaling="paper").resolve_parameters(171, 0.1).level > 0.999


@pytest.mark.parametrize(("n", "alpha", "epsilon"), [(2400, 0.1, 1.0), (10**5, 0.05, 0.3)])
def test_tight_level_is_below_paper_and_close_to_monotone(n, alpha, epsilon):
    """The tight slack L / (eps n q) is the monotone one (add/remove only) times 1/q."""
    tight = ExponQ(epsilon, scaling="tight").resolve_parameters(n, alpha).level
    paper = ExponQ(epsilon, scaling="paper").resolve_parameters(n, alpha).level
    monotone = ExponQ(epsilon, scaling="monotone").resolve_parameters(n, alpha).level
    assert monotone < tight < paper
    assert tight - monotone < (paper - monotone) / 5


@pytest.mark.parametrize(
    ("n", "epsilon", "alpha"), [(1000, 1, 0.1), (5000, 0.3, 0.05), (500, 5, 0.2), (171, 1, 0.1)]
)
@pytest.mark.parametrize("scaling", PAPER_SCALINGS)
@pytest.mark.parametrize("m", [10, 178, 2610])
def test_optimal_gamma_minimises_the_level(n, epsilon, alpha, scaling, m):
    gamma = optimal_gamma(n, alpha, epsilon, m, scaling=scaling)
    grid = np.geomspace(1e-9, 0.999, 20000)
    levels = inflated_level(n, alpha, epsilon, m, grid, scaling=scaling)
    best = inflated_level(n, alpha, epsilon, m, gamma, scaling=scaling)
    assert best <= levels.min() * (1 + 1e-12)


def test_optimal_gamma_vectorises_over_bins():
    gammas = optimal_gamma(2400, 0.1, 1.0, AUTO_BIN_GRID)
    assert gammas.shape == AUTO_BIN_GRID.shape
    singles = [optimal_gamma(2400, 0.1, 1.0, int(m)) for m in AUTO_BIN_GRID[::10]]
    assert gammas[::10] == pytest.approx(singles, rel=1e-12)


# -------------------------------------------------------------- m* criterion
def _direct_expected_coverage(n, epsilon, q, m, offset, scaling):
    j = np.arange(1, m + 1) + offset
    below, above = n * (j - 1) / m, n * (m - j) / m
    if scaling == "tight":
        exponent = epsilon * np.maximum((1 - q) * below, q * above)
    else:
        factor = 2.0 if scaling == "paper" else 1.0
        exponent = (
            epsilon / (factor * max(1 / q, 1 / (1 - q))) * np.maximum(below / q, above / (1 - q))
        )
    log_w = -exponent
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
@pytest.mark.parametrize("scaling", PAPER_SCALINGS)
def test_closed_form_criterion_equals_direct_sum(n, epsilon, q, m, offset, scaling):
    closed = expected_uniform_coverage(n, epsilon, q, m, offset=offset, scaling=scaling)
    direct = _direct_expected_coverage(n, epsilon, q, m, offset, scaling)
    assert float(closed) == pytest.approx(direct, abs=1e-10)


def test_criterion_has_a_limit_for_huge_epsilon():
    coverage = expected_uniform_coverage(2400, 1e308, 0.9, AUTO_BIN_GRID, offset=0.5)
    assert np.isfinite(coverage).all()


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
    assert gamma == optimal_gamma(2400, 0.1, 1.0, n_bins)


def test_bins_grow_like_n_epsilon():
    """Corollary 1 of Angelopoulos et al. 2022: m* of order n epsilon."""
    bins = [exponq_parameters(n, 0.1, 1.0)[0] for n in (1000, 10**4, 10**5, 10**6)]
    assert bins == sorted(bins) and bins[-1] > 30 * bins[0]


@pytest.mark.parametrize("scaling", PAPER_SCALINGS)
@pytest.mark.parametrize(("n", "epsilon"), [(2400, 1.0), (10**5, 0.3), (500, 5.0)])
def test_auto_choice_is_the_criterion_minimum_above_n_epsilon(n, epsilon, scaling):
    alpha = 0.1
    n_bins, _gamma, level = exponq_parameters(n, alpha, epsilon, scaling)
    gammas = np.broadcast_to(
        optimal_gamma(n, alpha, epsilon, AUTO_BIN_GRID, scaling=scaling), AUTO_BIN_GRID.shape
    )
    levels = exact_level(inflated_level(n, alpha, epsilon, AUTO_BIN_GRID, gammas, scaling=scaling))
    admissible = (levels < 1) & (AUTO_BIN_GRID >= min(n * epsilon, AUTO_BIN_GRID[-1]))
    criterion = [
        expected_uniform_coverage(
            n, epsilon, q, m, offset=(np.arange(16) + 0.5) / 16, scaling=scaling
        ).mean()
        for q, m in zip(levels[admissible], AUTO_BIN_GRID[admissible], strict=True)
    ]
    chosen = expected_uniform_coverage(
        n, epsilon, level, n_bins, offset=(np.arange(16) + 0.5) / 16, scaling=scaling
    ).mean()
    assert n_bins >= min(n * epsilon, AUTO_BIN_GRID[-1])
    assert chosen == pytest.approx(min(criterion), abs=1e-15)


@pytest.mark.parametrize(("n", "epsilon"), [(100, 1.0), (300, 0.3)])
def test_auto_bins_fall_back_to_the_largest_reachable_below_n_epsilon(n, epsilon):
    """When no m >= n epsilon reaches q~ < 1, the largest m that does is used."""
    alpha = 0.1
    n_bins, _gamma, level = exponq_parameters(n, alpha, epsilon)
    gammas = optimal_gamma(n, alpha, epsilon, AUTO_BIN_GRID)
    levels = inflated_level(n, alpha, epsilon, AUTO_BIN_GRID, gammas)
    assert not ((levels < 1) & (AUTO_BIN_GRID >= n * epsilon)).any()
    assert n_bins == AUTO_BIN_GRID[levels < 1].max()
    assert level < 1


def test_auto_bins_survive_scores_piled_near_the_quantile():
    """Scores crowding near 1 (a weak model's LAC scores): coarse bins would give full sets.

    With m = 147 (what the uniform criterion alone would pick) every edge below 1 holds
    too few scores and the mechanism releases 1 with high probability; with
    m >= n epsilon it does not.
    """
    n, alpha, epsilon = 2400, 0.1, 1.0
    rng = np.random.default_rng(0)
    n_bins, _, level = exponq_parameters(n, alpha, epsilon)
    coarse_gamma = optimal_gamma(n, alpha, epsilon, 147)
    coarse_level = inflated_level(n, alpha, epsilon, 147, coarse_gamma)
    edges = {}
    for m, q in ((n_bins, level), (147, coarse_level)):
        scores = 1 - rng.beta(1.0, 40.0, size=n)
        log_p = quantile_log_probabilities(bin_counts(scores, m), q, epsilon, scaling="tight")
        edges[m] = float(np.exp(log_p) @ (np.arange(1, m + 1) / m))
    assert edges[147] > 0.999
    assert edges[n_bins] < 0.999


# ----------------------------------------------------------- strict counts
@pytest.mark.parametrize("scaling", PAPER_SCALINGS)
@pytest.mark.parametrize("q", [0.3, 0.5, 0.9, 0.99])
def test_utility_uses_strict_counts(scaling, q):
    """The utility of e_j counts scores strictly below (s <= e_{j-1}) and strictly above.

    Computed here from float comparisons on the raw scores (not from the cumulative
    counts the module uses), with ties and scores exactly on bin edges, at the level the
    mechanism uses: q rounded up to a multiple of 2^-30.
    """
    m, epsilon = 8, 1.3
    level = math.ceil(q * 2**30) / 2**30
    rng = np.random.default_rng(int(100 * q))
    scores = np.r_[rng.choice(np.arange(m + 1) / m, size=40), rng.uniform(size=40)]
    edges = np.arange(m + 1) / m
    below = np.array([np.count_nonzero(scores <= edges[j - 1]) for j in range(1, m + 1)])
    below[0] = 0
    above = np.array([np.count_nonzero(scores > edges[j]) for j in range(1, m + 1)])
    if scaling == "tight":
        exponent = epsilon * np.maximum((1 - level) * below, level * above)
    else:
        factor = 2.0 if scaling == "paper" else 1.0
        exponent = (
            epsilon
            / (factor * max(1 / level, 1 / (1 - level)))
            * np.maximum(below / level, above / (1 - level))
        )
    expected = -exponent - np.log(np.exp(-exponent).sum())
    log_p = quantile_log_probabilities(bin_counts(scores, m), q, epsilon, scaling=scaling)
    assert log_p == pytest.approx(expected, abs=1e-12)


def test_an_atom_on_an_edge_is_released_there():
    """Every score at 0.5 (an edge of 8 bins): the utility is best exactly at 0.5.

    With non-strict counts the scores would count below their own edge and the release
    would spread over every edge above it.
    """
    scores = np.full(2000, 0.5)
    values, log_p = ExponQ(1.0, n_bins=8).threshold_distribution(scores, 0.1)
    assert values[int(np.argmax(log_p))] == 0.5
    assert np.exp(np.logaddexp.reduce(log_p[values != 0.5])) < 1e-50


# ------------------------------------------------------------------ bounds
def test_upper_bound_is_above_lower_bound_and_capped():
    n = 10**5
    n_bins, gamma, level = exponq_parameters(n, 0.1, 1.0)
    upper, slope = coverage_upper_bound(n, 0.1, 1.0, n_bins, gamma, level)
    assert 0.9 < upper < 0.91 and slope == 1 - gamma * 0.1
    paper = exponq_parameters(n, 0.1, 1.0, "paper")
    paper_upper, _ = coverage_upper_bound(n, 0.1, 1.0, *paper, scaling="paper")
    assert upper < paper_upper
    assert coverage_upper_bound(50, 0.1, 1.0, 1000, 0.01, 0.99)[0] == 1.0


def test_tight_upper_bound_formula():
    """q' = q~ + L / (epsilon n (1 - q~)) for the tight scaling (Lemma 1, over side)."""
    n, alpha, epsilon, m, gamma, level = 10**4, 0.1, 2.0, 5000, 0.01, 0.91
    log_term = math.log(m / (gamma * alpha))
    upper_level = level + log_term / (epsilon * n * (1 - level))
    expected = gamma * alpha + (1 - gamma * alpha) * (n * upper_level + 1) / (n + 1)
    assert coverage_upper_bound(n, alpha, epsilon, m, gamma, level)[0] == pytest.approx(expected)


# -------------------------------------------------------------- calibration
def test_infeasible_level_does_not_read_the_data(monkeypatch):
    def forbidden(*args, **kwargs):
        raise AssertionError("the data were read")

    monkeypatch.setattr(module, "bin_counts", forbidden)  # instrumentation: no public hook
    with pytest.warns(InfeasibleCalibrationWarning, match="q~ = 1.0.*at least 86"):
        calibration = ExponQ(epsilon=1.0, scaling="tight").calibrate(np.linspace(0, 1, 60), 0.1)
    assert calibration.threshold == 1.0 and not calibration.feasible
    assert not calibration.informative
    assert calibration.privacy.epsilon == 0.0
    assert calibration.coverage_lower_bound == 1.0
    certificate = ExponQ(epsilon=1.0, scaling="tight").coverage_certificate(60, 0.1)
    assert not certificate.feasible and "q~" in certificate.reason


def test_top_edge_release_warns_and_is_not_informative():
    """Feasible, but every score at 1: the release is the top edge, with a reason."""
    with pytest.warns(UninformativeCalibrationWarning, match="top edge"):
        calibration = ExponQ(epsilon=1.0).calibrate(np.ones(3000), 0.1, random_state=0)
    assert calibration.feasible and not calibration.informative
    assert "top edge" in calibration.reason


def test_fixed_bins_and_gamma_are_used():
    calibration = ExponQ(epsilon=1.0, n_bins=64, gamma=0.05, scaling="tight").calibrate(
        np.linspace(0, 1, 5000), 0.1, random_state=0
    )
    assert calibration.details["n_bins"] == 64 and calibration.details["gamma"] == 0.05
    assert not calibration.details["n_bins_auto"]
    assert calibration.details["scaling"] == "tight"
    assert calibration.target_level == pytest.approx(inflated_level(5000, 0.1, 1.0, 64, 0.05))
    assert (calibration.threshold * 64) % 1 == 0


@pytest.mark.parametrize("epsilon", [1e308, 1e200])
def test_huge_epsilon_is_the_split_conformal_quantile(epsilon):
    scores = np.random.default_rng(0).uniform(size=2400)
    calibration = ExponQ(epsilon=epsilon).calibrate(scores, 0.1, random_state=0)
    values, log_p = ExponQ(epsilon=epsilon).threshold_distribution(scores, 0.1)
    assert not np.isnan(log_p).any()
    assert calibration.informative and np.isfinite(calibration.threshold)
    # All the mass at the grid edge just above the empirical q~ quantile.
    q = calibration.target_level
    rank = math.ceil(q * 2400)
    kth = np.sort(scores)[rank - 1]
    assert calibration.threshold == pytest.approx(math.ceil(kth * values.size) / values.size)


@pytest.mark.parametrize(
    ("params", "match"),
    [
        ({"epsilon": 10**400}, "epsilon"),
        ({"epsilon": 0.0}, "epsilon"),
        ({"epsilon": math.nan}, "epsilon"),
        ({"epsilon": "1"}, "epsilon"),
        ({"epsilon": None}, "epsilon"),
        ({"epsilon": 1.0, "n_bins": 10**9}, "n_bins"),
        ({"epsilon": 1.0, "n_bins": 1}, "n_bins"),
        ({"epsilon": 1.0, "n_bins": 2.5}, "n_bins"),
        ({"epsilon": 1.0, "n_bins": "many"}, "n_bins"),
        ({"epsilon": 1.0, "gamma": 1.0}, "gamma"),
        ({"epsilon": 1.0, "scaling": "loose"}, "scaling"),
        ({"epsilon": 1.0, "scaling": True}, "scaling"),
    ],
)
def test_bad_parameters(params, match):
    mechanism = ExponQ(**params)  # stored untouched
    expected = f"The '{match}' parameter of ExponQ must be"
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        with pytest.raises(InvalidParameterError, match=expected):
            mechanism.calibrate(np.linspace(0, 1, 100), 0.1, random_state=0)
    with pytest.raises(InvalidParameterError, match=expected):
        mechanism.privacy_guarantee()
    with pytest.raises(InvalidParameterError, match=expected):
        mechanism.min_informative_samples(0.1)


def test_epsilon_has_no_default():
    with pytest.raises(TypeError, match="epsilon"):
        ExponQ()  # the budget is always a visible choice
    assert repr(ExponQ(1.0)) == "ExponQ(epsilon=1.0)"


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
    for scaling in PAPER_SCALINGS:
        log_p = quantile_log_probabilities(counts, 0.999, 100.0, scaling=scaling)
        assert not np.isnan(log_p).any()
        assert np.exp(log_p).sum() == pytest.approx(1.0)
