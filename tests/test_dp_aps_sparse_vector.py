"""DP-APS's default release, AboveThreshold over the cumulative counts.

``DPAPS.threshold_distribution`` sums the release's distribution over the threshold
noise (omitting ``rho`` of probability below 1e-20), so privacy is checked exactly on
neighbouring score sets against the mechanism's stated guarantee, the sampler is
checked against it, the offset is checked against a brute-force enumeration of the
noises, and coverage by Monte Carlo against Theorem 5.1's ``k / (n + 1) - beta``.
"""

import itertools
import math
import sys
import warnings
from fractions import Fraction

import numpy as np
import pytest
from sklearn.utils._param_validation import InvalidParameterError

from privconf_sklearn._random import check_noise_source
from privconf_sklearn.mechanisms import DPAPS, UninformativeCalibrationWarning
from privconf_sklearn.mechanisms._sparse_vector import (
    THRESHOLD_SHARES,
    discrete_laplace_log_cdf,
    discrete_laplace_log_pmf,
    discrete_laplace_log_sf,
    failure_probability,
    first_crossing,
    float_rates,
    noise_rates,
    offsets,
)
from privconf_sklearn.mechanisms.dp_aps import (
    certified_level,
    choose_plan,
    cumulative_counts,
    first_crossing_log_probabilities,
)

from ._exact_tails import assert_counts_match
from ._hang import no_hang
from ._stats import binomial_lower_limit


def _rank(n, alpha):
    return math.ceil((n + 1) * (1 - Fraction(alpha)))


def _loss(first, second):
    """Largest |log P - log P'|; -inf on both sides is equal, on one side a failure."""
    both = np.isneginf(first) & np.isneginf(second)
    assert not (np.isneginf(first) ^ np.isneginf(second)).any()
    with np.errstate(invalid="ignore"):
        return float(np.max(np.abs(np.where(both, 0.0, first - second))))


# ---------------------------------------------------------------- noise
@pytest.mark.parametrize("rate", [0.05, 0.7, 3.0])
def test_discrete_laplace_functions_are_consistent(rate):
    z = np.arange(-400, 401)
    pmf = np.exp(discrete_laplace_log_pmf(z, rate))
    assert pmf.sum() == pytest.approx(1.0, abs=1e-6 if rate == 0.05 else 1e-12)
    for x in (-7, -1, 0, 1, 5):
        assert math.exp(discrete_laplace_log_cdf(x, rate)) == pytest.approx(
            pmf[z <= x].sum()
            + (math.exp(-rate * 401) / (1 + math.exp(-rate)) if rate == 0.05 else 0),
            rel=1e-6,
        )
        assert math.exp(discrete_laplace_log_sf(x, rate)) == pytest.approx(
            math.exp(discrete_laplace_log_cdf(-x, rate)), rel=1e-12
        )


def test_noise_rates_are_exact_and_spend_exactly_epsilon():
    """epsilon_1 + epsilon_2 is the float epsilon's exact rational value, for any share."""
    for epsilon in (0.1, 0.7, 1.0, 3.3):
        for share in (Fraction(0), *THRESHOLD_SHARES):
            rate_threshold, rate_query = noise_rates(epsilon, share)
            assert rate_threshold + rate_query == Fraction(epsilon)
            assert rate_threshold == Fraction(epsilon) * share
            assert float_rates(epsilon, share) == (float(rate_threshold), float(rate_query))


def test_sampled_noise_follows_the_discrete_laplace():
    """The exact sampler at the query scale 1 / epsilon_2 (a rational of a float epsilon)."""
    _rate_threshold, rate_query = noise_rates(1.3, Fraction(2, 5))
    draws = check_noise_source(0).discrete_laplace(1 / rate_query, 50000)
    values = np.arange(-25, 26)
    probabilities = np.exp(discrete_laplace_log_pmf(values, float(rate_query)))
    observed = np.array([(draws == v).sum() for v in values])
    rest = len(draws) - observed.sum()
    assert_counts_match(np.r_[observed, rest], np.r_[probabilities, 1 - probabilities.sum()])


@pytest.mark.slow
def test_releases_follow_threshold_distribution_at_the_automatic_plan():
    """Many-bin plan with threshold noise, epsilon not a dyadic round number.

    The released indices of :func:`first_crossing` (the release of ``calibrate``, drawn
    with the exact sampler) against :meth:`DPAPS.threshold_distribution`, one exact
    binomial test per grid point (false failure 1e-7 in all). Grid points of tiny
    probability are pooled so that every cell is testable.
    """
    scores = np.random.default_rng(3).beta(2.0, 5.0, size=400)
    epsilon, alpha = 1.3, 0.2
    mechanism = DPAPS(epsilon=epsilon)
    plan = mechanism.resolve_plan(scores.size, alpha)
    assert plan.threshold_share > 0 and plan.n_bins > 20
    values, log_p = mechanism.threshold_distribution(scores, alpha)
    counts = cumulative_counts(scores, plan.n_bins)
    target = _rank(scores.size, alpha) + plan.offset
    noise = check_noise_source(4)
    released = np.array(
        [first_crossing(counts, target, epsilon, plan.threshold_share, noise) for _ in range(6000)]
    )
    observed = np.bincount(released - 1, minlength=values.size)
    probabilities = np.exp(log_p)
    small = probabilities < 1e-3
    assert_counts_match(
        np.r_[observed[~small], observed[small].sum()],
        np.r_[probabilities[~small], probabilities[small].sum()],
    )


def _uniform_on(low, high, n, seed):
    return np.random.default_rng(seed).uniform(low, high, size=n)


#: Score sets placing the first crossing: near the bottom of the grid, near the top, at
#: the top because no point below it can cross (every count below the top is k - 1,
#: the certificate's worst case), and far into a grid of several sampling blocks.
RELEASE_CASES = {
    "bottom": (12, lambda n, k: _uniform_on(0.0, 0.2, n, 1)),
    "top": (12, lambda n, k: _uniform_on(0.0, 1.0, n, 2)),
    "no crossing": (12, lambda n, k: np.r_[np.zeros(k - 1), np.ones(n - k + 1)]),
    "second block": (1500, lambda n, k: _uniform_on(0.0, 1.0, n, 3)),
}


@pytest.mark.parametrize("case", list(RELEASE_CASES), ids=list(RELEASE_CASES))
def test_releases_follow_threshold_distribution(case):
    """4,000 releases against ``threshold_distribution``, exactly.

    The grid index drawn by :func:`first_crossing` (what ``calibrate`` releases, called
    directly to keep the test fast; ``test_sampler_follows_the_exact_distribution``
    goes through ``calibrate``). One exact binomial test per grid point (false failure
    1e-7 in all), grid points of probability below 1e-3 pooled. The release draws only
    the crossing events, in order, stopping at the first (``_random._exceedance``): this
    checks that its law is the one of drawing every ``nu_b``.
    """
    n_bins, make_scores = RELEASE_CASES[case]
    n, alpha, epsilon = 300, 0.2, 2.0
    scores = make_scores(n, _rank(n, alpha))
    mechanism = DPAPS(epsilon=epsilon, n_bins=n_bins)
    plan = mechanism.resolve_plan(n, alpha)
    assert plan.threshold_share > 0
    values, log_p = mechanism.threshold_distribution(scores, alpha)
    counts = cumulative_counts(scores, n_bins)
    target = _rank(n, alpha) + plan.offset
    noise = check_noise_source(len(case))
    released = [
        first_crossing(counts, target, epsilon, plan.threshold_share, noise) for _ in range(4000)
    ]
    observed = np.bincount(np.array(released) - 1, minlength=values.size)
    probabilities = np.exp(log_p)
    small = probabilities < 1e-3
    assert_counts_match(
        np.r_[observed[~small], observed[small].sum()],
        np.r_[probabilities[~small], probabilities[small].sum()],
    )
    if case == "no crossing":
        assert probabilities[-1] > 0.99
    else:
        assert probabilities[-1] < 0.01


# ---------------------------------------------------------------- offset
def test_failure_probability_equals_brute_force_enumeration():
    """B = 3 (two bad points at k - 1): enumerate rho, nu_1, nu_2 on a wide box."""
    rate_threshold, rate_query, offset = 0.6, 0.9, 3
    box = np.arange(-60, 61)
    pmf_threshold = np.exp(discrete_laplace_log_pmf(box, rate_threshold))
    pmf_query = np.exp(discrete_laplace_log_pmf(box, rate_query))
    total = 0.0
    for rho, p_rho in zip(box, pmf_threshold, strict=True):
        miss = pmf_query[box <= offset + rho].sum()  # nu_b - rho <= offset: no crossing
        total += p_rho * (1 - miss**2)
    assert float(failure_probability(offset, 3, rate_threshold, rate_query)) == pytest.approx(
        total, rel=1e-9
    )


@pytest.mark.parametrize(
    ("n_bins", "epsilon", "beta"), [(2, 1.0, 1e-3), (50, 0.5, 1e-2), (3000, 2.0, 1e-3)]
)
def test_offset_is_the_smallest_integer_meeting_beta(n_bins, epsilon, beta):
    share = Fraction(0) if n_bins == 2 else Fraction(2, 5)
    lower, _upper = offsets(n_bins, epsilon, share, beta)
    rate_threshold, rate_query = float_rates(epsilon, share)
    assert failure_probability(lower, n_bins, rate_threshold, rate_query) <= beta
    assert failure_probability(lower - 1, n_bins, rate_threshold, rate_query) > beta


def test_sparse_vector_certifies_a_lower_level_than_the_papers_release():
    """The level certified on uniform scores, (upper certificate rank) / n + 1 / B, is
    lower than the vector release's (k + 2 lambda) / n + 1 / B wherever the vector
    release is feasible, and the sparse vector is feasible from fewer scores."""
    for n, epsilon, alpha in itertools.product((200, 1000, 20000), (0.5, 1.0, 2.0), (0.05, 0.1)):
        sparse = DPAPS(epsilon=epsilon).resolve_plan(n, alpha)
        vector = DPAPS(epsilon=epsilon, release="vector").resolve_plan(n, alpha)
        if vector is None:
            continue
        assert sparse is not None
        k = _rank(n, alpha)
        sparse_level = (k + sparse.offset + sparse.upper_offset) / n + 1 / sparse.n_bins
        vector_level = float(certified_level(n, alpha, epsilon, 1e-3, vector.n_bins))
        assert sparse_level < vector_level
    for epsilon in (0.5, 1.0, 2.0):
        assert DPAPS(epsilon=epsilon).min_informative_samples(0.1) <= DPAPS(
            epsilon=epsilon, release="vector"
        ).min_informative_samples(0.1)


# ---------------------------------------------------------------- privacy
@pytest.mark.parametrize("epsilon", [0.5, 2.0])
@pytest.mark.parametrize("n_bins", [2, 3, 12, "auto"])
def test_exact_privacy_replace_one(epsilon, n_bins):
    rng = np.random.default_rng(int(epsilon * 10) + (0 if n_bins == "auto" else n_bins))
    mechanism = DPAPS(epsilon=epsilon, n_bins=n_bins)
    bound = mechanism.privacy_guarantee().under("replace-one").epsilon
    worst = 0.0
    for n in (60, 250):
        plan = mechanism.resolve_plan(n, 0.2)
        if plan is None:
            continue
        grid = plan.n_bins
        for scores in (
            rng.beta(2, 5, size=n),
            rng.integers(0, grid + 1, size=n) / grid,
            np.zeros(n),
        ):
            _values, base = mechanism.threshold_distribution(scores, 0.2)
            for replacement in (0.0, 1.0, rng.uniform()):
                other = scores.copy()
                other[int(rng.integers(n))] = replacement
                worst = max(worst, _loss(base, mechanism.threshold_distribution(other, 0.2)[1]))
    assert worst <= bound * (1 + 1e-9)


@pytest.mark.parametrize("n_bins", [2, 7])
def test_exact_privacy_add_remove_at_the_parameters_of_n(n_bins):
    epsilon, n, alpha = 1.0, 150, 0.2
    mechanism = DPAPS(epsilon=epsilon, n_bins=n_bins)
    bound = mechanism.privacy_guarantee().under("add/remove").epsilon
    plan = mechanism.resolve_plan(n, alpha)
    target = _rank(n, alpha) + plan.offset
    rng = np.random.default_rng(n_bins)
    worst = 0.0
    for scores in (rng.uniform(size=n), np.zeros(n), np.full(n, 0.999)):
        base = first_crossing_log_probabilities(
            cumulative_counts(scores, n_bins), target, epsilon, plan.threshold_share
        )
        for other in (np.r_[scores, 0.0], np.r_[scores, 1.0], scores[1:]):
            changed = first_crossing_log_probabilities(
                cumulative_counts(other, n_bins), target, epsilon, plan.threshold_share
            )
            worst = max(worst, _loss(base, changed))
    assert worst <= bound * (1 + 1e-9)
    assert worst >= 0.4 * bound  # the pairs are not vacuous


@pytest.mark.slow
def test_sampler_follows_the_exact_distribution():
    scores = np.random.default_rng(1).beta(2.0, 5.0, size=300)
    mechanism = DPAPS(epsilon=2.0, n_bins=9)
    values, log_p = mechanism.threshold_distribution(scores, 0.3)
    noise = np.random.default_rng(2)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UninformativeCalibrationWarning)
        released = [
            mechanism.calibrate(scores, 0.3, random_state=noise).threshold for _ in range(20000)
        ]
    index = np.searchsorted(values, released)
    assert np.array_equal(values[index], released)
    assert_counts_match(np.bincount(index, minlength=values.size), np.exp(log_p))


# ---------------------------------------------------------------- coverage
@pytest.mark.slow
@pytest.mark.parametrize(("n", "epsilon", "alpha"), [(200, 2.0, 0.1), (1000, 0.5, 0.2)])
def test_monte_carlo_coverage(n, epsilon, alpha):
    rng = np.random.default_rng(n)
    mechanism = DPAPS(epsilon=epsilon)
    runs, covered = 4000, 0
    bound = mechanism.coverage_certificate(n, alpha).lower_bound
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UninformativeCalibrationWarning)
        for _ in range(runs):
            scores = rng.uniform(size=n + 1)
            covered += (
                scores[-1] <= mechanism.calibrate(scores[:-1], alpha, random_state=rng).threshold
            )
    assert covered >= binomial_lower_limit(runs, bound)


def test_release_reaches_the_grid_quantile_with_probability_one_minus_beta():
    """Worst case for the certificate: every point below the top at k - 1 scores."""
    n, alpha, epsilon = 400, 0.1, 1.0
    mechanism = DPAPS(epsilon=epsilon, n_bins=40)
    k = _rank(n, alpha)
    scores = np.r_[np.zeros(k - 1), np.ones(n - k + 1)]
    _values, log_p = mechanism.threshold_distribution(scores, alpha)
    below = float(np.exp(log_p[:-1]).sum())  # every grid point below 1 has k - 1 scores
    beta = mechanism.get_params()["beta"]
    assert below <= beta
    assert below >= 0.3 * beta  # the exact offset leaves little slack in the worst case


def test_details_are_public_and_diagnostics_owner_only():
    scores = np.random.default_rng(4).beta(2.0, 5.0, size=3000)
    calibration = DPAPS(epsilon=1.0).calibrate(scores, 0.1, random_state=0)
    assert set(calibration.details) >= {"release", "rank", "offset", "n_bins", "threshold_share"}
    assert set(calibration.owner_diagnostics) == {
        "grid_threshold",
        "certificate_width",
        "observed_inflation",
    }
    assert not set(calibration.details) & set(calibration.owner_diagnostics)


def test_bad_release_is_rejected_by_name():
    with pytest.raises((ValueError, TypeError), match="release"):
        DPAPS(epsilon=1.0, release="laplace").calibrate(np.linspace(0, 1, 400), 0.1)


# ---------------------------------------------------------------- extreme parameters
TINY_BETA_CALLS = {
    "calibrate": lambda m, scores: m.calibrate(scores, 0.1, random_state=0),
    "coverage_certificate": lambda m, scores: m.coverage_certificate(1000, 0.1),
    "min_informative_samples": lambda m, scores: m.min_informative_samples(0.1),
    "forecast": lambda m, scores: m.forecast(1000, 0.1),
}


@pytest.mark.parametrize("call", list(TINY_BETA_CALLS.values()), ids=list(TINY_BETA_CALLS))
def test_tiny_beta_is_refused_by_name(call):
    # The certificate adds the 1e-20 of threshold noise its sums leave out, so no
    # offset certifies a smaller beta: the search for one used to run forever.
    scores = np.random.default_rng(0).uniform(size=1000)
    for beta in (1e-25, 1e-20, 1.9e-20):
        with no_hang(20), pytest.raises(InvalidParameterError, match=r"'beta'.*2e-20"):
            call(DPAPS(epsilon=1.0, beta=beta), scores)


def test_smallest_beta_is_certified():
    # Its offset lies below the union bound's, which bounds the search for it.
    for n_bins in ("auto", 2, 50):
        mechanism = DPAPS(epsilon=1.0, beta=2e-20, n_bins=n_bins)
        with no_hang(20):
            plan = mechanism.resolve_plan(5000, 0.1)
            certificate = mechanism.coverage_certificate(5000, 0.1)
        assert plan is not None and certificate.feasible
        assert certificate.lower_bound == _rank(5000, 0.1) / 5001 - 2e-20


def test_offset_search_stops_at_an_unreachable_beta():
    # The plan is a public function: past the parameter check, the search for the offset
    # is bounded by the union bound's and names beta rather than spinning.
    with no_hang(20), pytest.raises(ValueError, match="beta = 1e-25"):
        choose_plan(1000, _rank(1000, 0.1), 1.0, 1e-25)


@pytest.mark.filterwarnings("error::RuntimeWarning")
@pytest.mark.parametrize("release", ["sparse_vector", "vector"])
@pytest.mark.parametrize("epsilon", [1e8, 1e300, sys.float_info.max])
def test_huge_epsilon_releases_in_bounded_time(epsilon, release):
    # The crossing sampler used to build exp(-epsilon_2) to about 1.44 epsilon_2 bits.
    # At this budget the noise is negligible: the release is the grid quantile of rank
    # k with probability 1 - O(B e^{-epsilon / B}), and so is the exact distribution
    # (whose log-probabilities overflow to -inf, silently, at the largest floats).
    scores = np.random.default_rng(0).uniform(size=1000)
    n_bins, k = 1000, _rank(1000, 0.1)
    mechanism = DPAPS(epsilon=epsilon, n_bins=n_bins, release=release)
    with no_hang(20):
        calibration = mechanism.calibrate(scores, 0.1, random_state=0)
    grid_quantile = (np.searchsorted(cumulative_counts(scores, n_bins), k) + 1) / n_bins
    assert calibration.details["offset"] == 0
    assert calibration.threshold == grid_quantile
    values, log_probabilities = mechanism.threshold_distribution(scores, 0.1)
    assert log_probabilities[values == grid_quantile] == pytest.approx([0.0], abs=1e-12)
