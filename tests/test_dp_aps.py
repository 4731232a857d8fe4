"""DP-APS (paper 003 Sec. 5): sensitivity, exact and audited privacy, coverage, bad input.

The released index ``b_hat`` is the first noisy cumulative count reaching ``k + lambda``
with independent Laplace noises, so its distribution is available in closed form:
``P(b_hat = b) = prod_{j<b} P(Z_j < t_j) * P(Z_b >= t_b)`` (``t_j = k + lambda - N_j``;
``b = B`` takes the whole remaining mass). Privacy is checked exactly with it, and
audited statistically from many runs of the sampler (Clopper-Pearson intervals on event
frequencies), as an external auditor would.
"""

import itertools
import math
import warnings
from fractions import Fraction

import numpy as np
import pytest
from diffprivlib.accountant import BudgetAccountant
from scipy import stats
from sklearn.base import clone
from sklearn.naive_bayes import GaussianNB

from privconf_sklearn import PrivateConformalClassifier
from privconf_sklearn._random import NoiseSource
from privconf_sklearn.mechanisms import DPAPS, InfeasibleCalibrationWarning
from privconf_sklearn.mechanisms import dp_aps as dp_aps_module
from privconf_sklearn.mechanisms.dp_aps import (
    cumulative_counts,
    dp_aps_offset,
    first_crossing,
)

from ._stats import FALSE_FAILURE, binomial_lower_limit


def rank(n, alpha):
    """ceil((n + 1)(1 - alpha)) in exact arithmetic on the given float alpha."""
    return math.ceil((n + 1) * (1 - Fraction(alpha)))


def exact_log_probabilities(scores, alpha, epsilon, n_bins, beta=1e-3, scale=None):
    """log P(b_hat = b), b = 1..B, in closed form (independent Laplace noises)."""
    scores = np.asarray(scores, dtype=float)
    counts = np.array([np.count_nonzero(scores <= b / n_bins) for b in range(1, n_bins + 1)])
    target = rank(scores.shape[0], alpha) + dp_aps_offset(n_bins, epsilon, beta)
    scale = n_bins / epsilon if scale is None else scale
    gap = target - counts
    log_miss = stats.laplace.logcdf(gap, scale=scale)  # P(Z < gap): not reached
    log_reach = stats.laplace.logsf(gap, scale=scale)  # P(Z >= gap)
    prefix = np.r_[0.0, np.cumsum(log_miss[:-1])]
    log_p = prefix + log_reach
    log_p[-1] = prefix[-1]
    return log_p


def neighbours(scores, rng):
    """Add/remove/replace neighbours, including the worst cases for cumulative counts."""
    return [
        np.r_[scores, 0.0],  # add below every grid point: every N_b + 1
        np.r_[scores, 1.0],  # add at the top: only N_B + 1 (k may move)
        np.r_[scores, rng.uniform()],
        scores[1:],  # remove
        np.r_[scores[1:], 0.0],  # replace by the bottom score
        np.r_[scores[1:], 1.0],  # replace by the top score
    ]


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
    # Adding a score at 0 moves every coordinate: the l1 sensitivity is exactly B.
    assert worst == n_bins
    scores = rng.uniform(size=30)
    added = np.r_[scores, 0.0]
    assert np.abs(cumulative_counts(added, n_bins) - cumulative_counts(scores, n_bins)).sum() == (
        n_bins
    )


def test_cumulative_counts_match_the_grid_test():
    rng = np.random.default_rng(0)
    for n_bins in (3, 10, 49):
        grid = np.arange(1, n_bins + 1) / n_bins
        scores = np.r_[rng.uniform(size=500), grid, 0.0, 1.0, np.nextafter(grid[:-1], 2.0)]
        expected = [np.count_nonzero(scores <= t) for t in grid]
        assert cumulative_counts(scores, n_bins).tolist() == expected


# ---------------------------------------------------------- exact privacy
@pytest.mark.parametrize("epsilon", [0.5, 1.0, 4.0])
@pytest.mark.parametrize("n_bins", [2, 5, 20])
@pytest.mark.parametrize("alpha", [0.1, 0.5])
def test_exact_privacy_loss_on_neighbours(epsilon, n_bins, alpha):
    rng = np.random.default_rng(int(100 * epsilon) + n_bins)
    worst = 0.0
    for n in (30, 300):
        scores = rng.beta(2.0, 5.0, size=n)
        base = exact_log_probabilities(scores, alpha, epsilon, n_bins)
        assert np.exp(base).sum() == pytest.approx(1.0)
        for other in neighbours(scores, rng):
            loss = np.abs(base - exact_log_probabilities(other, alpha, epsilon, n_bins))
            worst = max(worst, float(loss.max()))
    assert worst <= epsilon * (1 + 1e-9)


@pytest.mark.parametrize("epsilon", [1.0, 4.0])
def test_exact_privacy_at_the_worst_case_and_power(epsilon):
    """Every cumulative count sits at the noisy target; one replacement moves them all.

    The loss of the event {b_hat = B} is then (B - 1) epsilon / B, the largest any
    output event reaches for this pair. With the noise scale halved (a 2 epsilon-DP
    mechanism) the same pair exceeds epsilon: the check has power.
    """
    n_bins, n, alpha = 4, 400, 0.5
    target = rank(n, alpha) + dp_aps_offset(n_bins, epsilon, 1e-3)
    at_zero = math.ceil(target)  # every gap target - N_j <= 0: the Laplace left tail
    first = np.r_[np.zeros(at_zero), np.ones(n - at_zero)]
    second = np.r_[np.zeros(at_zero + 1), np.ones(n - at_zero - 1)]
    loss = np.abs(
        exact_log_probabilities(first, alpha, epsilon, n_bins)
        - exact_log_probabilities(second, alpha, epsilon, n_bins)
    ).max()
    assert loss == pytest.approx(0.75 * epsilon) and loss <= epsilon
    broken = np.abs(
        exact_log_probabilities(first, alpha, epsilon, n_bins, scale=n_bins / (2 * epsilon))
        - exact_log_probabilities(second, alpha, epsilon, n_bins, scale=n_bins / (2 * epsilon))
    ).max()
    assert broken > epsilon


def test_sampler_matches_the_closed_form():
    """Chi-square of 20000 runs of the mechanism's own sampling path against it."""
    scores = np.random.default_rng(1).beta(2.0, 5.0, size=300)
    epsilon, n_bins, alpha = 2.0, 5, 0.3
    expected = np.exp(exact_log_probabilities(scores, alpha, epsilon, n_bins))
    indices = _sample_indices(scores, alpha, epsilon, n_bins, 20000, seed=2)
    observed = np.bincount(indices, minlength=n_bins + 1)[1:]
    keep = expected * 20000 >= 5
    statistic = (((observed - 20000 * expected) ** 2) / (20000 * expected))[keep].sum()
    assert observed[~keep].sum() <= binomial_upper_count(20000, expected[~keep].sum())
    assert statistic <= stats.chi2.isf(FALSE_FAILURE, int(keep.sum()) - 1)


def binomial_upper_count(trials, p):
    return int(stats.binom.isf(FALSE_FAILURE, trials, p))


def _sample_indices(scores, alpha, epsilon, n_bins, runs, seed, scale=None, beta=1e-3):
    """Run DP-APS ``runs`` times, vectorised, through the mechanism's own functions."""
    n = scores.shape[0]
    target = rank(n, alpha) + dp_aps_offset(n_bins, epsilon, beta)
    noise = NoiseSource(np.random.default_rng(seed))
    scale = n_bins / epsilon if scale is None else scale
    noisy = cumulative_counts(scores, n_bins) + noise.laplace(scale, (runs, n_bins))
    return first_crossing(noisy, target)


def test_vectorised_path_is_the_mechanism():
    """calibrate() releases exactly first_crossing(counts + Laplace) / B for a seed."""
    scores = np.random.default_rng(3).uniform(size=500)
    for seed in range(20):
        calibration = DPAPS(epsilon=2.0, n_bins=8).calibrate(scores, 0.2, random_state=seed)
        index = _sample_indices(scores, 0.2, 2.0, 8, 1, seed)[0]
        assert calibration.threshold == index / 8


# ------------------------------------------------------- statistical audit
def _clopper_pearson(count, trials, confidence_tail):
    lower = stats.beta.ppf(confidence_tail, count, trials - count + 1) if count > 0 else 0.0
    upper = stats.beta.isf(confidence_tail, count + 1, trials - count) if count < trials else 1.0
    return lower, upper


def audited_epsilon_lower_bound(first, second, alpha, epsilon, n_bins, runs, scale=None):
    """Largest privacy loss certified by the runs: over events {b_hat = b}, both ways.

    For each event S, ``log(lower CI of P_first(S) / upper CI of P_second(S))`` is a lower
    bound on the privacy loss with confidence 1 - FALSE_FAILURE overall (union bound
    over the 4 B one-sided Clopper-Pearson intervals).
    """
    counts = [
        np.bincount(
            _sample_indices(data, alpha, epsilon, n_bins, runs, seed, scale),
            minlength=n_bins + 1,
        )[1:]
        for data, seed in ((first, 11), (second, 12))
    ]
    tail = FALSE_FAILURE / (4 * n_bins)
    best = -math.inf
    for a, b in ((0, 1), (1, 0)):
        for event in range(n_bins):
            p_low, _ = _clopper_pearson(int(counts[a][event]), runs, tail)
            _, q_high = _clopper_pearson(int(counts[b][event]), runs, tail)
            if p_low > 0:
                best = max(best, math.log(p_low / q_high))
    return best


def test_statistical_privacy_audit_on_worst_case_neighbours():
    """From 200000 runs on each neighbour, the certified loss stays below epsilon.

    Worst case for the cumulative counts: all N_1..N_{B-1} exactly at the noisy target,
    and one score replaced from the top of the range to the bottom, so that every count
    moves by one (true loss of {b_hat = B}: 3 epsilon / 4 with B = 4). The same audit
    flags a mechanism whose noise is calibrated for 2 epsilon.
    """
    epsilon, n_bins, n, alpha, runs = 1.0, 4, 2000, 0.5, 200000
    target = rank(n, alpha) + dp_aps_offset(n_bins, epsilon, 1e-3)
    at_zero = math.ceil(target)  # every gap target - N_j <= 0: the Laplace left tail
    first = np.r_[np.zeros(at_zero), np.ones(n - at_zero)]
    second = np.r_[np.zeros(at_zero + 1), np.ones(n - at_zero - 1)]
    certified = audited_epsilon_lower_bound(first, second, alpha, epsilon, n_bins, runs)
    assert certified <= epsilon
    assert certified > 0.5 * epsilon  # the audit is sharp enough to see most of the loss
    broken = audited_epsilon_lower_bound(
        first, second, alpha, epsilon, n_bins, runs, scale=n_bins / (2 * epsilon)
    )
    assert broken > epsilon


# ------------------------------------------------- certificate and details
def test_details_keys_and_certificate_quantities():
    scores = np.random.default_rng(4).beta(2.0, 5.0, size=3000)
    calibration = DPAPS(epsilon=1.0, n_bins=20, beta=1e-3).calibrate(scores, 0.1, random_state=0)
    details = calibration.details
    for key in (
        "certificate_width",
        "observed_inflation",
        "grid_threshold",
        "offset",
        "n_bins",
        "beta",
        "diagnostics_are_private",
    ):
        assert key in details
    assert details["diagnostics_are_private"] is False
    assert details["offset"] == pytest.approx(20 * math.log(20 / 1e-3) / 1.0)
    assert (details["n_bins"], details["beta"]) == (20, 1e-3)
    k = rank(3000, 0.1)
    kth = np.sort(scores)[k - 1]
    assert details["grid_threshold"] == math.ceil(kth * 20) / 20  # non-private t_{q(k)}
    upper_rank = math.ceil(k + 2 * details["offset"])
    upper = 1.0 if upper_rank > 3000 else math.ceil(np.sort(scores)[upper_rank - 1] * 20) / 20
    assert details["certificate_width"] == pytest.approx(upper - details["grid_threshold"])
    assert details["observed_inflation"] == pytest.approx(
        calibration.threshold - details["grid_threshold"]
    )
    assert "not covered" in calibration.privacy.description
    assert "NOT covered by epsilon" in DPAPS.__doc__


def test_certificate_width_is_nonincreasing_in_epsilon():
    """Remark 5.3: for fixed scores and grid, W(c) cannot grow with epsilon."""
    scores = np.random.default_rng(5).beta(2.0, 5.0, size=4000)
    widths = [
        DPAPS(epsilon=epsilon, n_bins=25)
        .calibrate(scores, 0.2, random_state=0)
        .details["certificate_width"]
        for epsilon in (0.5, 1.0, 2.0, 4.0, 8.0, 16.0)
    ]
    assert all(a >= b for a, b in itertools.pairwise(widths))
    assert widths[0] > widths[-1]


@pytest.mark.slow
def test_threshold_lies_in_the_certificate_interval():
    """Proposition 5.2: t_{q(k)} <= threshold <= t_{q(k)} + W with probability 1 - beta."""
    scores = np.random.default_rng(6).beta(2.0, 5.0, size=2000)
    runs, beta = 4000, 0.05
    mechanism = DPAPS(epsilon=2.0, n_bins=10, beta=beta)
    noise = np.random.default_rng(7)
    inside = 0
    for _ in range(runs):
        details = mechanism.calibrate(scores, 0.1, random_state=noise).details
        inside += 0.0 <= details["observed_inflation"] <= details["certificate_width"] + 1e-12
    assert inside >= binomial_lower_limit(runs, 1 - beta)


# ---------------------------------------------------------- feasibility
@pytest.mark.parametrize(("n", "alpha"), [(5, 0.1), (9, 0.1), (18, 0.05), (19, 0.05)])
def test_unreachable_rank_is_infeasible_without_reading_data(n, alpha, monkeypatch):
    reads = []
    original = dp_aps_module.cumulative_counts
    monkeypatch.setattr(
        dp_aps_module, "cumulative_counts", lambda s, b: reads.append(1) or original(s, b)
    )
    mechanism = DPAPS(epsilon=1.0)
    certificate = mechanism.coverage_certificate(n, alpha)
    scores = np.linspace(0, 1, n)
    k = rank(n, alpha)
    assert certificate.feasible == (k <= n)
    if certificate.feasible:
        assert mechanism.calibrate(scores, alpha, random_state=0).feasible
        assert reads == [1]
        return
    with pytest.warns(InfeasibleCalibrationWarning):
        calibration = mechanism.calibrate(scores, alpha, random_state=0)
    assert (calibration.feasible, calibration.threshold) == (False, 1.0)
    assert calibration.privacy.epsilon == 0.0
    assert reads == []
    assert calibration.reason == certificate.reason
    assert calibration.details["certificate_width"] is None
    assert calibration.details["diagnostics_are_private"] is True


@pytest.mark.parametrize(("n", "alpha"), [(20, 0.1), (200, 0.2), (2400, 0.1), (10000, 0.01)])
@pytest.mark.parametrize("beta", [1e-3, 0.05])
def test_certificate_is_what_calibrate_returns(n, alpha, beta):
    mechanism = DPAPS(epsilon=1.0, n_bins=10, beta=beta)
    certificate = mechanism.coverage_certificate(n, alpha)
    calibration = mechanism.calibrate(
        np.random.default_rng(0).uniform(size=n), alpha, random_state=0
    )
    assert certificate.feasible and calibration.feasible
    assert calibration.coverage_lower_bound == certificate.lower_bound
    assert calibration.lower_bound_confidence == certificate.confidence == 1.0
    assert certificate.lower_bound == pytest.approx(rank(n, alpha) / (n + 1) - beta)
    assert certificate.lower_bound >= (1 - alpha) - beta  # Theorem 5.1's L(c)


# ------------------------------------------------------------- coverage
class BetaScores:
    def sample(self, rng, n):
        return rng.beta(2.0, 2.0, size=n)


class GridTiedScores:
    """Beta(2, 2) scores rounded up to multiples of 1/40: ties exactly on grid points."""

    def sample(self, rng, n):
        return np.ceil(rng.beta(2.0, 2.0, size=n) * 40) / 40


#: (n, alpha, epsilon, n_bins, runs), chosen so that k + lambda stays below the count at
#: t_{B-1} for these scores: the threshold is then usually below 1 and the check is not
#: vacuous (at n = 200, alpha = 0.05 no grid makes it informative: k + lambda > n).
SETTINGS = [
    (200, 0.1, 8.0, 10, 3000),
    (200, 0.2, 8.0, 10, 3000),
    (2400, 0.05, 4.0, 20, 1500),
    (2400, 0.1, 1.0, 10, 1500),
    (2400, 0.2, 1.0, 10, 1500),
    (10000, 0.05, 1.0, 20, 600),
    (10000, 0.1, 1.0, 20, 600),
    (10000, 0.2, 1.0, 20, 600),
]


@pytest.mark.slow
@pytest.mark.parametrize(("n", "alpha", "epsilon", "n_bins", "runs"), SETTINGS)
@pytest.mark.parametrize("distribution", [BetaScores(), GridTiedScores()], ids=["beta", "grid"])
def test_monte_carlo_coverage(distribution, n, alpha, epsilon, n_bins, runs):
    """Covered runs ~ Binomial(runs, P(cover)) with P(cover) >= k / (n + 1) - beta."""
    mechanism = DPAPS(epsilon=epsilon, n_bins=n_bins)
    certificate = mechanism.coverage_certificate(n, alpha)
    rng, noise = np.random.default_rng(n + int(100 * alpha)), np.random.default_rng(1)
    covered = below_top = 0
    for _ in range(runs):
        scores = distribution.sample(rng, n + 1)
        threshold = mechanism.calibrate(scores[:n], alpha, random_state=noise).threshold
        covered += scores[n] <= threshold
        below_top += threshold < 1.0
    assert covered >= binomial_lower_limit(runs, certificate.lower_bound)
    assert below_top >= runs // 2  # the thresholds were informative in most runs


# ------------------------------------------------------------ estimator
def test_plugs_into_the_classifier_and_spends_epsilon():
    rng = np.random.default_rng(0)
    X = rng.normal(size=(3000, 3))
    y = (X[:, 0] + 0.5 * rng.normal(size=3000) > 0).astype(int)
    model = GaussianNB().fit(X[:1000], y[:1000])
    accountant = BudgetAccountant()
    estimator = PrivateConformalClassifier(
        model,
        mechanism=DPAPS(epsilon=0.7, n_bins=10),
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
    assert cloned.mechanism.get_params() == {"epsilon": 0.7, "n_bins": 10, "beta": 1e-3}


# ------------------------------------------------------------ bad input
@pytest.mark.parametrize(
    ("params", "match"),
    [
        ({"epsilon": 0.0}, "epsilon"),
        ({"epsilon": -1.0}, "epsilon"),
        ({"epsilon": math.inf}, "epsilon"),
        ({"epsilon": None}, "epsilon"),
        ({"n_bins": 1}, "n_bins"),
        ({"n_bins": 0}, "n_bins"),
        ({"n_bins": 10.0}, "n_bins"),
        ({"n_bins": True}, "n_bins"),
        ({"n_bins": "auto"}, "n_bins"),
        ({"beta": 0.0}, "beta"),
        ({"beta": 1.0}, "beta"),
        ({"beta": -0.5}, "beta"),
        ({"beta": math.nan}, "beta"),
    ],
)
def test_bad_parameters_are_rejected_by_name(params, match):
    mechanism = DPAPS(**params)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        with pytest.raises(ValueError, match=match):
            mechanism.calibrate(np.linspace(0, 1, 100), 0.1, random_state=0)
    with pytest.raises(ValueError, match=match):
        mechanism.privacy_guarantee()
    with pytest.raises(ValueError, match=match):
        mechanism.coverage_certificate(100, 0.1)
