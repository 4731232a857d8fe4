"""ExponQ's default shaped utility: exact privacy, its certificate, its parameters, coverage.

The released edge's distribution is available exactly (``ExponQ.threshold_distribution``
and :func:`shaped_log_probabilities`), so privacy is checked exactly on neighbouring
score sets against the mechanism's own stated guarantee; the sampler of ``calibrate``
is checked against that distribution with exact multinomial tails; the certificate is
checked by recomputing its sum term by term, and coverage exactly on a two-atom
distribution that makes the lower tail as heavy as the certificate allows, and by
Monte Carlo.
"""

import math
import warnings
from fractions import Fraction

import numpy as np
import pytest
from scipy.stats import binom

from privconf_sklearn._random import check_noise_source
from privconf_sklearn.mechanisms import ExponQ, UninformativeCalibrationWarning
from privconf_sklearn.mechanisms._shaped import (
    LOWER_SLOPES,
    SHAPE_BIN_GRID,
    Shape,
    choose_shape,
    expected_relative_threshold,
    sample_shaped,
    shaped_penalties,
    target_numerators,
)
from privconf_sklearn.mechanisms.expon_q import bin_counts, shaped_log_probabilities

from ._exact_sampling import exponential_probabilities
from ._exact_tails import assert_counts_match
from ._stats import binomial_lower_limit


def _stated(mechanism, adjacency):
    return mechanism.privacy_guarantee().under(adjacency).epsilon


def _loss(first, second):
    """Largest |log P - log P'| over outputs; -inf on both sides is equal, on one a failure."""
    both = np.isneginf(first) & np.isneginf(second)
    assert not (np.isneginf(first) ^ np.isneginf(second)).any()
    with np.errstate(invalid="ignore"):
        return float(np.max(np.abs(np.where(both, 0.0, first - second))))


# ---------------------------------------------------------------- privacy
@pytest.mark.parametrize("epsilon", [0.3, 1.0, 5.0])
@pytest.mark.parametrize("alpha", [0.05, 0.1, 0.3])
def test_exact_privacy_replace_one(epsilon, alpha):
    """Random, tied and extremal replace-one neighbours, at the default parameters."""
    rng = np.random.default_rng(int(10 * epsilon) + int(100 * alpha))
    mechanism = ExponQ(epsilon=epsilon)
    bound = _stated(mechanism, "replace-one")
    worst = 0.0
    for n in (25, 80, 300):
        parameters = mechanism.resolve_parameters(n, alpha)
        if not parameters.feasible:
            continue
        m = parameters.n_bins
        for scores in (
            rng.uniform(size=n),
            rng.integers(0, m + 1, size=n) / m,  # on edges, ties
            np.full(n, 1.0 / m),  # every score on the first edge
            rng.beta(0.3, 3.0, size=n),
        ):
            _values, base = mechanism.threshold_distribution(scores, alpha)
            for replacement in (0.0, 1.0, rng.uniform(), 1.0 / m, 1.0 - 1.0 / m):
                other = scores.copy()
                other[int(rng.integers(n))] = replacement
                worst = max(worst, _loss(base, mechanism.threshold_distribution(other, alpha)[1]))
    assert worst <= bound * (1 + 1e-9)


@pytest.mark.parametrize("epsilon", [0.5, 2.0])
def test_exact_privacy_add_remove_at_the_parameters_of_n(epsilon):
    """Adding or removing a score, the parameters fixed from the public n."""
    rng = np.random.default_rng(7)
    mechanism = ExponQ(epsilon=epsilon)
    bound = _stated(mechanism, "add/remove")
    worst = 0.0
    for n in (30, 200):
        parameters = mechanism.resolve_parameters(n, 0.1)
        shape, m = parameters.shape(n), parameters.n_bins
        for scores in (rng.uniform(size=n), np.full(n, 1.0 / m), rng.beta(5, 1, size=n)):
            base = shaped_log_probabilities(bin_counts(scores, m), shape, epsilon)
            for extra in (0.0, 1.0, rng.uniform()):
                added = shaped_log_probabilities(
                    bin_counts(np.r_[scores, extra], m), shape, epsilon
                )
                removed = shaped_log_probabilities(bin_counts(scores[1:], m), shape, epsilon)
                worst = max(worst, _loss(base, added), _loss(base, removed))
    assert worst <= bound * (1 + 1e-9)


def _reference_log_probabilities(scores, m, s_l, k, epsilon):
    """The release's distribution from its definition (exact counts and penalties)."""
    edges = [Fraction(j / m) for j in range(0, m + 1)]  # the float edges fl(j / m)
    exact = [Fraction(float(s)) for s in scores]
    penalties = []
    for j in range(1, m + 1):
        covered = sum(s <= edges[j] for s in exact)
        below = sum(s <= edges[j - 1] for s in exact) if j > 1 else 0  # B_j = C_{j-1}
        penalties.append(max((1 - s_l) * (below - k), s_l * (k - covered), 0))
    logs = np.array([-epsilon * float(f - min(penalties)) for f in penalties])
    return logs - np.log(np.exp(logs).sum())


def test_distribution_is_the_one_the_proof_is_about():
    """Against an independent implementation of the definition (Fractions), and an
    extremal pair whose loss the definition fixes: any change of the exponent's scale,
    of a slope or of the strict/non-strict counts moves one of them."""
    rng = np.random.default_rng(11)
    for _ in range(40):
        n, m = int(rng.integers(5, 60)), int(rng.choice([2, 3, 8, 20]))
        s_l = Fraction(int(rng.integers(1, 101)), 100)
        mechanism = ExponQ(epsilon=1.0, n_bins=m, lower_slope=float(s_l))
        parameters = mechanism.resolve_parameters(n, 0.2)
        if not parameters.feasible:
            continue
        scores = rng.integers(0, 2 * m + 1, size=n) / (2 * m)  # on and between edges
        _values, log_p = mechanism.threshold_distribution(scores, 0.2)
        reference = _reference_log_probabilities(scores, m, s_l, parameters.target_rank, 1.0)
        np.testing.assert_allclose(log_p, reference, rtol=0, atol=1e-9)
    # Two scores at the first edge and 38 at the second; one moved from the first edge
    # to the top: a loss of 0.7568 epsilon (found by exhaustive search over 4 bins).
    mechanism = ExponQ(epsilon=1.0, n_bins=4, lower_slope=0.5)
    first = np.r_[np.full(2, 0.25), np.full(38, 0.5)]
    second = np.r_[np.full(1, 0.25), np.full(38, 0.5), np.ones(1)]
    loss = _loss(
        mechanism.threshold_distribution(first, 0.1)[1],
        mechanism.threshold_distribution(second, 0.1)[1],
    )
    assert loss == pytest.approx(0.756763791858134, rel=1e-9)


@pytest.mark.slow
def test_sampler_follows_the_exact_distribution():
    scores = np.random.default_rng(3).beta(2.0, 5.0, size=150)
    mechanism = ExponQ(epsilon=1.0)
    values, log_p = mechanism.threshold_distribution(scores, 0.1)
    noise = np.random.default_rng(4)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UninformativeCalibrationWarning)
        released = [
            mechanism.calibrate(scores, 0.1, random_state=noise).threshold for _ in range(20000)
        ]
    index = np.searchsorted(values, released)
    assert np.array_equal(values[index], released)
    assert_counts_match(np.bincount(index, minlength=values.size), np.exp(log_p))


def test_penalties_are_exact_integers():
    shape = Shape(Fraction(7, 20), Fraction(3, 64) + 10, 5)
    curve = np.array([20, 17, 12, 10, 3, 0])
    numerators, denominator = shaped_penalties(curve, shape)
    assert numerators.dtype == np.int64 and denominator == 20 * 64
    tau = Fraction(3, 64) + 10
    expected = [
        max(Fraction(7, 20) * (curve[j] - tau), Fraction(13, 20) * (tau - curve[j - 1]), 0)
        for j in range(1, 6)
    ]
    assert [Fraction(int(a), denominator) for a in numerators] == expected


# ---------------------------------------------------------------- certificate
def _certified(n, epsilon, s_l, m, k):
    """(1 / (n + 1)) sum_r (1 - G(r)), term by term with Fractions for the counting."""
    total = 0.0
    for r in range(1, min(n, math.ceil(k)) + 1):
        x = math.exp(-epsilon * s_l * float(k - r + 1))
        total += 1.0 - (m - 1) * x / (1.0 + (m - 1) * x)
    return total / (n + 1)


@pytest.mark.parametrize(
    ("n", "alpha", "epsilon", "s_l", "m"),
    [
        (20, 0.1, 1.0, 1.0, 4),
        (171, 0.1, 1.0, 0.4, 17),
        (539, 0.05, 0.5, 0.7, 300),
        (2400, 0.1, 1.0, 0.75, 2783),
    ],
)
def test_target_is_the_smallest_certified_rank(n, alpha, epsilon, s_l, m):
    numerator = int(target_numerators(n, alpha, epsilon, s_l, m))
    k = n - Fraction(numerator, 64)
    assert _certified(n, epsilon, s_l, m, k) >= 1 - alpha
    # One step (1/64) lower is no longer certified, up to the solver's margin of one
    # part in 10^9 of the level and the rounding-up of the tail bound.
    smaller = k - Fraction(1, 64)
    assert _certified(n, epsilon, s_l, m, smaller) < 1 - alpha + 1e-6


def test_two_atom_distribution_keeps_coverage_exactly():
    """Scores 0 with probability p, 1 otherwise: coverage is p + (1 - p) P(threshold = 1).

    Computed exactly over the binomial number of zeros; with p just below 1 - alpha the
    release must reach the top often enough, the heaviest lower tail the certificate
    allows. Small n, where the certificate is tightest.
    """
    for n, epsilon, alpha in ((20, 1.0, 0.1), (60, 8.0, 0.2), (111, 0.5, 0.1)):
        mechanism = ExponQ(epsilon=epsilon)
        top = np.zeros(n + 1)
        for zeros in range(n + 1):
            scores = np.r_[np.zeros(zeros), np.ones(n - zeros)]
            values, log_p = mechanism.threshold_distribution(scores, alpha)
            top[zeros] = math.exp(log_p[-1]) if values[-1] == 1.0 else 0.0
        for p in np.linspace(0.3, 1 - alpha, 25):
            weights = binom.pmf(np.arange(n + 1), n, p)
            assert p + (1 - p) * float(weights @ top) >= 1 - alpha


@pytest.mark.slow
@pytest.mark.parametrize(
    ("n", "epsilon", "alpha"), [(15, 1.0, 0.1), (120, 0.5, 0.1), (500, 2.0, 0.05)]
)
def test_monte_carlo_coverage_on_continuous_scores(n, epsilon, alpha):
    """Fresh scores, noise and test point per run; count covered runs (binomial tail)."""
    rng = np.random.default_rng(n)
    mechanism = ExponQ(epsilon=epsilon)
    runs, covered = 4000, 0
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UninformativeCalibrationWarning)
        for _ in range(runs):
            scores = rng.uniform(size=n + 1)
            threshold = mechanism.calibrate(scores[:-1], alpha, random_state=rng).threshold
            covered += scores[-1] <= threshold
    assert covered >= binomial_lower_limit(runs, 1 - alpha)


def test_upper_bound_holds_on_uniform_scores():
    """Exact expected coverage on uniform scores (inner expectation exact) stays below it."""
    rng = np.random.default_rng(5)
    mechanism = ExponQ(epsilon=1.0)
    n = 400
    upper = mechanism.calibrate(rng.uniform(size=n), 0.1, random_state=0).coverage_upper_bound
    expected = []
    for _ in range(200):
        values, log_p = mechanism.threshold_distribution(rng.uniform(size=n), 0.1)
        expected.append(float(np.exp(log_p) @ values))  # P(test <= t) = t
    m = mechanism.resolve_parameters(n, 0.1).n_bins
    # mean of 200 bounded runs: Hoeffding margin at 1e-7
    assert np.mean(expected) <= upper + 1.0 / m + math.sqrt(math.log(1e7) / 400)


# ---------------------------------------------------------------- parameters
def test_criterion_closed_form_equals_the_sum_over_edges():
    rng = np.random.default_rng(0)
    for _ in range(300):
        n = int(rng.integers(10, 3000))
        m = int(rng.choice([2, 3, 7, 40, 500]))
        epsilon = float(rng.choice([0.05, 1.0, 20.0]))
        s_l = float(rng.choice([0.3, 0.75, 1.0]))
        k = float(rng.uniform(1, n))
        f = float(rng.choice([1.0, 0.5, 0.125]))
        o = float(rng.uniform())
        j = np.arange(1, m + 1)
        edges = np.minimum((j - 1 + o) / m, 1.0)
        edges[-1] = 1.0
        covered = np.minimum(n * (j - 1 + o) / (m * f), n)
        covered[-1] = n
        below = np.r_[0.0, covered[:-1]]
        penalty = np.maximum(np.maximum((1 - s_l) * (below - k), s_l * (k - covered)), 0)
        weights = np.exp(-epsilon * (penalty - penalty.min()))
        brute = float(weights @ edges / weights.sum()) / f
        closed = float(expected_relative_threshold(n, epsilon, s_l, m, k, f, o))
        assert closed == pytest.approx(brute, rel=1e-9, abs=1e-12)


def test_parameters_are_public_deterministic_and_cached():
    choose_shape.cache_clear()
    first = choose_shape(539, 0.1, 1.0)
    assert choose_shape(539, 0.1, 1.0) is first
    choose_shape.cache_clear()
    assert choose_shape(539, 0.1, 1.0) == first
    assert first.lower_slope in LOWER_SLOPES and first.n_bins in SHAPE_BIN_GRID.tolist()


def test_user_fixed_slope_and_grid_are_used():
    parameters = ExponQ(epsilon=1.0, n_bins=50, lower_slope=0.6).resolve_parameters(500, 0.1)
    assert parameters.n_bins == 50 and parameters.lower_slope == Fraction(3, 5)


def test_shaped_aims_lower_than_the_paper_utility():
    for n in (100, 171, 539, 2400, 10000):
        for epsilon in (0.5, 1.0, 2.0):
            shaped = ExponQ(epsilon=epsilon).resolve_parameters(n, 0.1)
            tight = ExponQ(epsilon=epsilon, scaling="tight").resolve_parameters(n, 0.1)
            if tight.feasible:
                assert shaped.feasible and shaped.level < tight.level


def test_feasibility_and_min_informative_samples_agree():
    for epsilon in (0.3, 1.0, 4.0):
        mechanism = ExponQ(epsilon=epsilon)
        n = mechanism.min_informative_samples(0.1)
        assert mechanism.coverage_certificate(n, 0.1).feasible
        assert not mechanism.coverage_certificate(n - 1, 0.1).feasible
        assert mechanism.resolve_parameters(n, 0.1).feasible
        assert not mechanism.resolve_parameters(n - 1, 0.1).feasible


def test_infeasible_request_reads_no_data():
    mechanism = ExponQ(epsilon=0.1)
    with pytest.warns(UninformativeCalibrationWarning, match="needed"):
        calibration = mechanism.calibrate(np.full(10, 0.5), 0.1)
    assert calibration.threshold == 1.0 and not calibration.feasible
    assert calibration.privacy.epsilon == 0.0


@pytest.mark.parametrize(
    ("params", "match"),
    [
        ({"lower_slope": 0.123}, "multiple of 0.01"),
        ({"lower_slope": 0.0}, "lower_slope"),
        ({"lower_slope": 1.5}, "lower_slope"),
        ({"lower_slope": True}, "lower_slope"),
        ({"gamma": 0.1}, "gamma"),
        ({"lower_slope": 0.5, "scaling": "tight"}, "lower_slope"),
    ],
)
def test_bad_shape_parameters_are_rejected_by_name(params, match):
    with pytest.raises((ValueError, TypeError), match=match):
        ExponQ(epsilon=1.0, **params).calibrate(np.linspace(0, 1, 50), 0.1)


# ------------------------------------------------------------ the exact draw
def test_sample_shaped_draws_exactly_the_shaped_distribution():
    """sample_shaped(numerators, D, epsilon, noise): index j with probability
    proportional to exp(-epsilon a_j / D), against probabilities computed in 60-digit
    decimal arithmetic from the same integers (epsilon 0.7 is not a round dyadic), with
    exact binomial tails. Penalties of ExponQ's shape on a small grid."""
    shape = Shape(Fraction(7, 10), Fraction(301, 64), 6)
    curve = np.array([12, 11, 9, 6, 4, 1, 0])
    numerators, denominator = shaped_penalties(curve, shape)
    assert numerators.min() == 0 and numerators.max() > 3 * denominator
    epsilon = 0.7
    probabilities = exponential_probabilities(numerators, denominator, Fraction(epsilon))
    noise = check_noise_source(11)
    draws = [sample_shaped(numerators, denominator, epsilon, noise) for _ in range(8000)]
    assert_counts_match(np.bincount(draws, minlength=shape.n_bins), probabilities)


def test_sample_shaped_refuses_what_is_not_a_shaped_problem():
    with pytest.raises(ValueError, match="penalties"):
        sample_shaped(np.array([0, -1]), 3, 1.0, 0)
    with pytest.raises(ValueError, match="denominator"):
        sample_shaped(np.array([0, 1]), 0, 1.0, 0)
    with pytest.raises(ValueError, match="epsilon"):
        sample_shaped(np.array([0, 1]), 3, -1.0, 0)
