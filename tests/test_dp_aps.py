"""DP-APS with the paper's vector release: sensitivity, exact privacy, grid, coverage, input.

The default sparse vector release has its own tests (``test_dp_aps_sparse_vector.py``).

The released index ``b_hat`` is the first noisy cumulative count reaching ``k + lambda``
with independent discrete Laplace noises, so its distribution is available in closed form
(``DPAPS.threshold_distribution``, built on the mechanism's own noise primitive).
Privacy is checked exactly with it on neighbouring score sets, and the sampler of
``DPAPS.calibrate`` is checked against it with exact binomial tails, so a wrong noise
scale in either path fails a test.
"""

import itertools
import math
import warnings
from fractions import Fraction

import numpy as np
import pytest
from diffprivlib.accountant import BudgetAccountant
from sklearn.base import clone
from sklearn.naive_bayes import GaussianNB
from sklearn.utils._param_validation import InvalidParameterError

from privconf_sklearn import PrivateConformalClassifier
from privconf_sklearn.mechanisms import (
    DPAPS,
    InfeasibleCalibrationWarning,
    UninformativeCalibrationWarning,
)
from privconf_sklearn.mechanisms import dp_aps as dp_aps_module
from privconf_sklearn.mechanisms.dp_aps import (
    MAX_GRID_SIZE,
    auto_n_bins,
    certified_level,
    cumulative_counts,
    dp_aps_offset,
)

from ._exact_tails import assert_counts_match
from ._privacy import privacy_loss
from ._stats import FALSE_FAILURE, binomial_lower_limit


def rank(n, alpha):
    """ceil((n + 1)(1 - alpha)) in exact arithmetic on the given float alpha."""
    return math.ceil((n + 1) * (1 - Fraction(alpha)))


def neighbours(scores, rng):
    """Add/remove/replace neighbours, including the worst cases for cumulative counts."""
    return [
        np.r_[scores, 0.0],  # add below every grid point: every N_b + 1
        np.r_[scores, 1.0],  # add at the top: only N_B + 1
        np.r_[scores, rng.uniform()],
        scores[1:],  # remove
        np.r_[scores[1:], 0.0],  # replace by the bottom score
        np.r_[scores[1:], 1.0],  # replace by the top score
    ]


def _loss(mechanism, first, second, alpha):
    values, p = mechanism.threshold_distribution(first, alpha)
    values_prime, q = mechanism.threshold_distribution(second, alpha)
    assert np.array_equal(values, values_prime)
    return privacy_loss(p, q)


# -------------------------------------------------------------- sensitivity
@pytest.mark.parametrize("n_bins", [2, 7, 20, 100])
def test_count_vector_l1_sensitivity_is_n_bins(n_bins):
    rng = np.random.default_rng(n_bins)
    worst = 0
    for _ in range(200):
        scores = rng.uniform(size=int(rng.integers(1, 60)))
        base = cumulative_counts(scores, n_bins)
        for other in neighbours(scores, rng):
            difference = np.abs(cumulative_counts(other, n_bins) - base)
            assert difference.max() <= 1  # each N_b moves by at most one
            worst = max(worst, int(difference.sum()))
    assert worst == n_bins  # adding a score at 0 moves every coordinate


def test_cumulative_counts_match_the_grid_test():
    rng = np.random.default_rng(0)
    for n_bins in (3, 10, 49):
        grid = np.arange(1, n_bins + 1) / n_bins
        scores = np.r_[rng.uniform(size=500), grid, 0.0, 1.0, np.nextafter(grid[:-1], 2.0)]
        expected = [np.count_nonzero(scores <= t) for t in grid]
        assert cumulative_counts(scores, n_bins).tolist() == expected


def _tail(n_bins, epsilon, c):
    """P(Z > c) = rho^(c + 1) / (1 + rho), rho = exp(-epsilon / B), for the integer noise."""
    rho = math.exp(-epsilon / n_bins)
    return rho ** (c + 1) / (1 + rho)


@pytest.mark.parametrize(
    ("n_bins", "epsilon", "beta"), [(20, 0.7, 1e-3), (3, 4.0, 0.9), (600, 0.1, 1e-3)]
)
def test_offset_is_the_smallest_integer_union_bound(n_bins, epsilon, beta):
    """lambda: the smallest integer with B P(|Z| > lambda) = 2 B P(Z > lambda) <= beta."""
    offset = dp_aps_offset(n_bins, epsilon, beta)
    assert isinstance(offset, int)
    assert 2 * n_bins * _tail(n_bins, epsilon, offset) <= beta
    assert offset == 0 or 2 * n_bins * _tail(n_bins, epsilon, offset - 1) > beta
    # within one count of the paper's continuous B log(B / beta) / epsilon
    assert abs(offset - n_bins * math.log(n_bins / beta) / epsilon) <= 1


# ---------------------------------------------------------- exact privacy
@pytest.mark.parametrize("epsilon", [0.5, 1.0, 4.0])
@pytest.mark.parametrize("n_bins", [2, 5, 20])
@pytest.mark.parametrize("alpha", [0.1, 0.5])
def test_exact_privacy_on_neighbours(epsilon, n_bins, alpha):
    """Replace-one neighbours through the mechanism; add/remove at the parameters of n.

    Under add/remove the grid, ``k`` and ``lambda`` are those of the public ``n``; the
    worst case for the counts is a score added at 0 (every ``N_b`` moves): it is the
    replacement of a top score by a bottom one below, at the same ``n``.
    """
    rng = np.random.default_rng(int(100 * epsilon) + n_bins)
    mechanism = DPAPS(epsilon=epsilon, n_bins=n_bins, release="vector")
    stated = mechanism.privacy_guarantee()
    worst = 0.0
    for n in (30, 300, 3000):
        if not mechanism.coverage_certificate(n, alpha).feasible:
            continue
        scores = rng.beta(2.0, 5.0, size=n)
        _values, base = mechanism.threshold_distribution(scores, alpha)
        assert np.exp(base).sum() == pytest.approx(1.0)
        for other in (np.r_[scores[1:], 0.0], np.r_[scores[1:], 1.0], np.r_[1.0, scores[:-1]]):
            worst = max(worst, _loss(mechanism, scores, other, alpha))
    assert worst <= stated.under("replace-one").epsilon * (1 + 1e-9)
    assert worst <= stated.under("add/remove").epsilon * (1 + 1e-9)


@pytest.mark.parametrize("epsilon", [1.0, 4.0])
def test_exact_privacy_at_the_worst_case(epsilon):
    """Every cumulative count sits at the noisy target; one replacement moves them all.

    The loss of the event {b_hat = B} is then (B - 1) epsilon / B, the largest any
    output event reaches for this pair: a mechanism whose noise is calibrated for
    sensitivity 1 instead of B (scale 1 / epsilon) would lose about (B - 1) epsilon.
    """
    n_bins, n, alpha = 4, 4000, 0.5
    mechanism = DPAPS(epsilon=epsilon, n_bins=n_bins, release="vector")
    target = rank(n, alpha) + dp_aps_offset(n_bins, epsilon, 1e-3)
    at_zero = math.ceil(target)  # every gap target - N_j <= 0: the Laplace left tail
    first = np.r_[np.zeros(at_zero), np.ones(n - at_zero)]
    second = np.r_[np.zeros(at_zero + 1), np.ones(n - at_zero - 1)]
    assert _loss(mechanism, first, second, alpha) == pytest.approx(0.75 * epsilon, rel=1e-6)


@pytest.mark.slow
@pytest.mark.parametrize("n_bins", ["auto", 5])
def test_sampler_matches_the_exact_distribution(n_bins):
    """20000 runs of DPAPS.calibrate against threshold_distribution (exact tails)."""
    scores = np.random.default_rng(1).beta(2.0, 5.0, size=300)
    mechanism = DPAPS(epsilon=2.0, n_bins=n_bins, release="vector")
    values, log_p = mechanism.threshold_distribution(scores, 0.3)
    noise = np.random.default_rng(2)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UninformativeCalibrationWarning)
        thresholds = [
            mechanism.calibrate(scores, 0.3, random_state=noise).threshold for _ in range(20000)
        ]
    index = np.searchsorted(values, thresholds)
    assert np.array_equal(values[index], thresholds)
    assert_counts_match(np.bincount(index, minlength=values.size), np.exp(log_p))


# ------------------------------------------------------ details, diagnostics
def test_details_are_public_and_diagnostics_owner_only():
    scores = np.random.default_rng(4).beta(2.0, 5.0, size=3000)
    calibration = DPAPS(epsilon=1.0, n_bins=20, beta=1e-3, release="vector").calibrate(
        scores, 0.1, random_state=0
    )
    details, owner = calibration.details, calibration.owner_diagnostics
    assert set(details) == {
        "release",
        "rank",
        "offset",
        "n_bins",
        "beta",
        "target_count",
        "certificate_rank",
        "threshold_share",
        "n_bins_auto",
    }
    assert set(owner) == {"grid_threshold", "certificate_width", "observed_inflation"}
    assert details["offset"] == dp_aps_offset(20, 1.0, 1e-3)
    k = rank(3000, 0.1)
    kth = np.sort(scores)[k - 1]
    assert owner["grid_threshold"] == math.ceil(kth * 20) / 20  # non-private t_{q(k)}
    upper_rank = math.ceil(k + 2 * details["offset"])
    upper = 1.0 if upper_rank > 3000 else math.ceil(np.sort(scores)[upper_rank - 1] * 20) / 20
    assert owner["certificate_width"] == pytest.approx(upper - owner["grid_threshold"])
    assert owner["observed_inflation"] == pytest.approx(
        calibration.threshold - owner["grid_threshold"]
    )
    assert "not covered" in calibration.privacy.description
    assert "NOT covered by epsilon" in DPAPS.__doc__


def test_certificate_width_is_nonincreasing_in_epsilon():
    """Remark 5.3: for fixed scores and grid, W(c) cannot grow with epsilon."""
    scores = np.random.default_rng(5).beta(2.0, 5.0, size=4000)
    widths = [
        DPAPS(epsilon=epsilon, n_bins=25, release="vector")
        .calibrate(scores, 0.2, random_state=0)
        .owner_diagnostics["certificate_width"]
        for epsilon in (0.5, 1.0, 2.0, 4.0, 8.0, 16.0)
    ]
    assert all(a >= b for a, b in itertools.pairwise(widths))
    assert widths[0] > widths[-1]


@pytest.mark.slow
def test_threshold_lies_in_the_certificate_interval():
    """Proposition 5.2: t_{q(k)} <= threshold <= t_{q(k)} + W with probability 1 - beta."""
    scores = np.random.default_rng(6).beta(2.0, 5.0, size=2000)
    runs, beta = 4000, 0.05
    mechanism = DPAPS(epsilon=2.0, n_bins=10, beta=beta, release="vector")
    noise = np.random.default_rng(7)
    inside = 0
    for _ in range(runs):
        owner = mechanism.calibrate(scores, 0.1, random_state=noise).owner_diagnostics
        inside += 0.0 <= owner["observed_inflation"] <= owner["certificate_width"] + 1e-12
    assert inside >= binomial_lower_limit(runs, 1 - beta)


# ------------------------------------------------------------- the grid size
@pytest.mark.parametrize(
    ("n", "alpha", "epsilon"),
    [(2400, 0.1, 1.0), (539, 0.1, 1.0), (10**5, 0.05, 0.5), (300, 0.2, 4.0)],
)
@pytest.mark.parametrize("beta", [1e-3, 0.05])
def test_auto_grid_minimises_the_certified_level(n, alpha, epsilon, beta):
    """Brute force over every feasible B: the automatic B is the best one."""
    chosen = auto_n_bins(n, alpha, epsilon, beta)
    bins = np.arange(2, 5000)
    feasible = bins[rank(n, alpha) + bins * np.log(bins / beta) / epsilon <= n]
    levels = certified_level(n, alpha, epsilon, beta, feasible)
    assert chosen == feasible[np.argmin(levels)]
    assert DPAPS(epsilon=epsilon, beta=beta, release="vector").resolve_n_bins(n, alpha) == chosen


def test_auto_grid_is_deterministic_public_and_cached():
    auto_n_bins.cache_clear()
    first = auto_n_bins(2400, 0.1, 1.0, 1e-3)
    assert auto_n_bins(2400, 0.1, 1.0, 1e-3) == first == 11
    assert auto_n_bins.cache_info().hits == 1
    # It grows like sqrt(n epsilon / log B).
    sizes = [auto_n_bins(n, 0.1, 1.0, 1e-3) for n in (10**3, 10**4, 10**5, 10**6)]
    assert sizes == sorted(sizes) and 2.5 < sizes[-1] / sizes[-2] < 3.5


def test_auto_grid_certifies_a_lower_level_than_the_papers():
    for n in (2400, 10**4, 10**5):
        auto = auto_n_bins(n, 0.1, 1.0, 1e-3)
        assert certified_level(n, 0.1, 1.0, 1e-3, auto) < certified_level(n, 0.1, 1.0, 1e-3, 20)


def test_default_grid_is_auto_and_papers_grid_is_available():
    assert DPAPS(1.0, release="vector").get_params()["n_bins"] == "auto"
    calibration = DPAPS(1.0, n_bins=20, release="vector").calibrate(
        np.random.default_rng(0).uniform(size=5000), 0.1, random_state=0
    )
    assert calibration.details["n_bins"] == 20 and not calibration.details["n_bins_auto"]


# ---------------------------------------------------------- feasibility
def _assert_infeasible_without_reading(mechanism, n, alpha, monkeypatch, match):
    reads = []
    original = dp_aps_module.cumulative_counts
    # Instrumentation: no public hook tells whether the data were read.
    monkeypatch.setattr(
        dp_aps_module, "cumulative_counts", lambda s, b: reads.append(1) or original(s, b)
    )
    certificate = mechanism.coverage_certificate(n, alpha)
    assert not certificate.feasible
    with pytest.warns(InfeasibleCalibrationWarning, match=match):
        calibration = mechanism.calibrate(np.linspace(0, 1, n), alpha, random_state=0)
    assert (calibration.feasible, calibration.informative, calibration.threshold) == (
        False,
        False,
        1.0,
    )
    assert calibration.privacy.epsilon == 0.0
    assert reads == []
    assert calibration.reason == certificate.reason
    assert calibration.owner_diagnostics == {}


@pytest.mark.parametrize(("n", "alpha"), [(5, 0.1), (18, 0.05)])
def test_unreachable_rank_is_infeasible_without_reading_data(n, alpha, monkeypatch):
    assert rank(n, alpha) > n
    _assert_infeasible_without_reading(
        DPAPS(epsilon=1.0, release="vector"), n, alpha, monkeypatch, "exceeds n"
    )


@pytest.mark.parametrize(("n_bins", "n"), [(20, 1000), (20, 1988), ("auto", 100)])
def test_counts_that_cannot_cross_are_infeasible(n_bins, n, monkeypatch):
    """k <= n but k + lambda > n: the noisy counts would essentially never cross.

    n = 1988 is the last infeasible size for B = 20: k + lambda = 1791 + 198 = 1989.
    """
    mechanism = DPAPS(epsilon=1.0, n_bins=n_bins, release="vector")
    assert rank(n, 0.1) <= n
    if n_bins == 20:
        assert n < rank(n, 0.1) + dp_aps_offset(20, 1.0, 1e-3)
    _assert_infeasible_without_reading(mechanism, n, 0.1, monkeypatch, "never reach")


@pytest.mark.parametrize("n_bins", ["auto", 20])
@pytest.mark.parametrize("epsilon", [0.5, 1.0, 2.0])
@pytest.mark.parametrize("alpha", [0.05, 0.1])
def test_min_informative_samples_is_the_feasibility_boundary(n_bins, epsilon, alpha):
    mechanism = DPAPS(epsilon=epsilon, n_bins=n_bins, release="vector")
    n = mechanism.min_informative_samples(alpha)
    assert mechanism.coverage_certificate(n, alpha).feasible
    assert not mechanism.coverage_certificate(n - 1, alpha).feasible
    size = 2 if n_bins == "auto" else n_bins
    assert rank(n, alpha) + dp_aps_offset(size, epsilon, 1e-3) <= n
    assert rank(n - 1, alpha) + dp_aps_offset(size, epsilon, 1e-3) > n - 1


def test_no_crossing_warns_and_is_not_informative():
    """Feasible, but every score at the top: no noisy count below t_B reaches the target."""
    with pytest.warns(UninformativeCalibrationWarning, match="no noisy cumulative count"):
        calibration = DPAPS(epsilon=1.0, release="vector").calibrate(
            np.ones(3000), 0.1, random_state=0
        )
    assert calibration.feasible and not calibration.informative
    assert "no noisy cumulative count" in calibration.reason


@pytest.mark.parametrize(("n", "alpha"), [(500, 0.2), (2400, 0.1), (10000, 0.01)])
@pytest.mark.parametrize("beta", [1e-3, 0.05])
@pytest.mark.parametrize("n_bins", ["auto", 10])
def test_certificate_is_what_calibrate_returns(n, alpha, beta, n_bins):
    mechanism = DPAPS(epsilon=1.0, n_bins=n_bins, beta=beta, release="vector")
    certificate = mechanism.coverage_certificate(n, alpha)
    with warnings.catch_warnings():
        # Uniform scores: the target level often falls in the top grid cell.
        warnings.simplefilter("ignore", UninformativeCalibrationWarning)
        calibration = mechanism.calibrate(
            np.random.default_rng(0).uniform(size=n), alpha, random_state=0
        )
    assert certificate.feasible and calibration.feasible
    assert calibration.coverage_lower_bound == certificate.lower_bound
    assert calibration.lower_bound_confidence == certificate.confidence == 1.0
    assert certificate.lower_bound == pytest.approx(rank(n, alpha) / (n + 1) - beta)
    assert certificate.lower_bound >= (1 - alpha) - beta  # Theorem 5.1's L(c)
    assert calibration.privacy == mechanism.privacy_guarantee()


# ------------------------------------------------------------- coverage
class BetaScores:
    def sample(self, rng, n):
        return rng.beta(2.0, 2.0, size=n)


class GridTiedScores:
    """Beta(2, 2) scores rounded up to multiples of 1/40: ties exactly on grid points."""

    def sample(self, rng, n):
        return np.ceil(rng.beta(2.0, 2.0, size=n) * 40) / 40


#: (n, alpha, epsilon, n_bins, runs).
SETTINGS = [
    (200, 0.2, 8.0, "auto", 3000),
    (200, 0.1, 8.0, 10, 3000),
    (2400, 0.05, 4.0, "auto", 1500),
    (2400, 0.1, 1.0, "auto", 1500),
    (2400, 0.2, 1.0, 10, 1500),
    (10000, 0.05, 1.0, 20, 600),
    (10000, 0.1, 1.0, "auto", 600),
    (10000, 0.2, 1.0, 20, 600),
]


@pytest.mark.slow
@pytest.mark.parametrize(("n", "alpha", "epsilon", "n_bins", "runs"), SETTINGS)
@pytest.mark.parametrize("distribution", [BetaScores(), GridTiedScores()], ids=["beta", "grid"])
def test_monte_carlo_coverage(distribution, n, alpha, epsilon, n_bins, runs):
    """Covered runs ~ Binomial(runs, P(cover)) with P(cover) >= k / (n + 1) - beta.

    The check is not vacuous: given the calibration sets, the informative runs (threshold
    below 1) are independent Bernoulli(p_i) with p_i exact from threshold_distribution;
    their number is at least sum p_i - sqrt(runs log(1 / 1e-7) / 2) except with
    probability 1e-7 (Hoeffding), and the p_i average above one half.
    """
    mechanism = DPAPS(epsilon=epsilon, n_bins=n_bins, release="vector")
    certificate = mechanism.coverage_certificate(n, alpha)
    assert certificate.feasible
    rng, noise = np.random.default_rng(n + int(100 * alpha)), np.random.default_rng(1)
    covered = below_top = 0
    expected_below_top = 0.0
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UninformativeCalibrationWarning)
        for _ in range(runs):
            scores = distribution.sample(rng, n + 1)
            threshold = mechanism.calibrate(scores[:n], alpha, random_state=noise).threshold
            covered += scores[n] <= threshold
            below_top += threshold < 1.0
            values, log_p = mechanism.threshold_distribution(scores[:n], alpha)
            expected_below_top += float(np.exp(log_p[values < 1.0]).sum())
    assert covered >= binomial_lower_limit(runs, certificate.lower_bound)
    assert expected_below_top > runs / 2
    assert below_top >= expected_below_top - math.sqrt(runs * math.log(1 / FALSE_FAILURE) / 2)


# ------------------------------------------------------------ estimator
def test_plugs_into_the_classifier_and_spends_epsilon():
    rng = np.random.default_rng(0)
    X = rng.normal(size=(3000, 3))
    y = (X[:, 0] + 0.5 * rng.normal(size=3000) > 0).astype(int)
    model = GaussianNB().fit(X[:1000], y[:1000])
    accountant = BudgetAccountant()
    estimator = PrivateConformalClassifier(
        model,
        mechanism=DPAPS(epsilon=0.7, n_bins=10, release="vector"),
        alpha=0.1,
        random_state=0,
        accountant=accountant,
    ).fit_calibrate(X[1000:], y[1000:])
    assert accountant.spent_budget == [(0.7, 0.0)]
    assert estimator.calibration_.mechanism == "DPAPS"
    assert estimator.calibration_.privacy.notion == "pure"
    sets = estimator.predict_set(X[:50])
    assert sets.shape == (50, 2) and sets.dtype == bool
    cloned = clone(estimator)
    assert cloned.mechanism.get_params() == {
        "epsilon": 0.7,
        "n_bins": 10,
        "beta": 1e-3,
        "release": "vector",
    }


# ------------------------------------------------------------ bad input
@pytest.mark.parametrize(
    ("params", "match"),
    [
        ({"epsilon": 0.0}, "epsilon"),
        ({"epsilon": -1.0}, "epsilon"),
        ({"epsilon": math.inf}, "epsilon"),
        ({"epsilon": 10**400}, "epsilon"),
        ({"epsilon": None}, "epsilon"),
        ({"epsilon": 1.0, "n_bins": 1}, "n_bins"),
        ({"epsilon": 1.0, "n_bins": 0}, "n_bins"),
        ({"epsilon": 1.0, "n_bins": 10**9}, "n_bins"),
        ({"epsilon": 1.0, "n_bins": MAX_GRID_SIZE + 1}, "n_bins"),
        ({"epsilon": 1.0, "n_bins": 10.0}, "n_bins"),
        ({"epsilon": 1.0, "n_bins": True}, "n_bins"),
        ({"epsilon": 1.0, "n_bins": "many"}, "n_bins"),
        ({"epsilon": 1.0, "beta": 0.0}, "beta"),
        ({"epsilon": 1.0, "beta": 1.0}, "beta"),
        ({"epsilon": 1.0, "beta": -0.5}, "beta"),
        ({"epsilon": 1.0, "beta": math.nan}, "beta"),
    ],
)
def test_bad_parameters_are_rejected_by_name(params, match):
    mechanism = DPAPS(**params, release="vector")
    expected = f"The '{match}' parameter of DPAPS must be"
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        with pytest.raises(InvalidParameterError, match=expected):
            mechanism.calibrate(np.linspace(0, 1, 100), 0.1, random_state=0)
    with pytest.raises(InvalidParameterError, match=expected):
        mechanism.privacy_guarantee()
    with pytest.raises(InvalidParameterError, match=expected):
        mechanism.coverage_certificate(100, 0.1)


def test_epsilon_has_no_default():
    with pytest.raises(TypeError, match="epsilon"):
        DPAPS()
    assert repr(DPAPS(1.0)) == "DPAPS(epsilon=1.0)"
