"""P-COQS (Romanus and Molinari 2025): privacy accounting, exact small-N privacy, coverage.

Privacy is checked three ways: (1) instrumentation: the count queries and the noise
draws are recorded, so the number of queries, the noise standard deviation and the
composed rho are read off the actual run; (2) the (epsilon, delta) reported is checked
against a direct numerical integration of the Gaussian privacy profile; (3) for a
search with N = 3 queries the output distribution is enumerated exactly (8 paths) on
worst-case neighbouring score sets, and its hockey-stick divergence at the reported
epsilon is compared with the reported delta.
"""

import itertools
import math
import warnings
from fractions import Fraction

import numpy as np
import pytest
from diffprivlib.accountant import BudgetAccountant
from diffprivlib.utils import BudgetError
from scipy import integrate, stats
from scipy.special import ndtr
from sklearn.base import clone
from sklearn.naive_bayes import GaussianNB

from privconf_sklearn import PrivateConformalClassifier

# NoiseSource is the private randomness layer; subclassing it is the only way to record
# the noise draws a mechanism makes.
from privconf_sklearn._random import NoiseSource
from privconf_sklearn.mechanisms import (
    PCOQS,
    InfeasibleCalibrationWarning,
    UninformativeCalibrationWarning,
)
from privconf_sklearn.mechanisms import pcoqs as pcoqs_module
from privconf_sklearn.mechanisms.pcoqs import query_count
from privconf_sklearn.privacy import gaussian_delta

from ._exact_tails import assert_counts_match
from ._stats import binomial_lower_limit, binomial_upper_limit


class RecordingNoise(NoiseSource):
    """A NoiseSource that records every privacy-noise draw (scale and values)."""

    def __init__(self, seed=0):
        super().__init__(np.random.default_rng(seed))
        self.draws = []

    def normal(self, scale, size=1):
        values = super().normal(scale, size)
        self.draws.append(("normal", scale, np.array(values)))
        return values

    def laplace(self, scale, size=1):
        values = super().laplace(scale, size)
        self.draws.append(("laplace", scale, np.array(values)))
        return values

    def discrete_laplace(self, scale, size=1):
        values = super().discrete_laplace(scale, size)
        self.draws.append(("discrete_laplace", scale, np.array(values)))
        return values

    def exponential_mechanism(self, penalties, denominator, rate):
        index = super().exponential_mechanism(penalties, denominator, rate)
        self.draws.append(("exponential", rate, np.array([index])))
        return index


@pytest.fixture
def count_queries(monkeypatch):
    """Record the argument of every exact count query the search makes."""
    calls = []
    # Instrumentation of the private counter: no public hook sees the exact queries.
    original = pcoqs_module._RankCounter.count_at_most

    def recording(self, point):
        calls.append(point)
        return original(self, point)

    monkeypatch.setattr(pcoqs_module._RankCounter, "count_at_most", recording)
    return calls


def gaussian_profile(mu, epsilon):
    """delta(epsilon) of N(mu, 1) vs N(0, 1), by numerical integration (no closed form)."""
    start = epsilon / mu + mu / 2.0
    value, _ = integrate.quad(
        lambda x: stats.norm.pdf(x, mu) - math.exp(epsilon) * stats.norm.pdf(x),
        start,
        start + 40.0,
        epsabs=1e-16,
        epsrel=1e-10,
        limit=200,
    )
    return value


# ----------------------------------------------------------------- privacy
CONFIGS = [
    {"rho": 0.5},
    {"rho": 0.05, "step": 1e-4},
    {"rho": 2.0, "bounds": (0.2, 0.7), "step": 1e-6},
    {"rho": 0.5, "step": 1e-20},  # capped at float resolution
    {"epsilon": 1.0, "delta": 1e-6},
    {"epsilon": 3.0, "delta": 1e-5, "inflated": True},
]


@pytest.mark.parametrize("params", CONFIGS)
def test_queries_noise_and_composed_rho_are_as_stated(params, count_queries):
    mechanism = PCOQS(**params)
    scores = np.random.default_rng(1).uniform(size=3000)
    noise = RecordingNoise()
    with warnings.catch_warnings():  # bounds=(0.2, 0.7) leave the target uncertified
        warnings.simplefilter("ignore", UninformativeCalibrationWarning)
        calibration = mechanism.calibrate(scores, 0.1, random_state=noise)
    guarantee = calibration.privacy

    lower, upper = params.get("bounds", (0.0, 1.0))
    step = params.get("step", 1e-10)
    requested = math.ceil(math.log2((upper - lower) / step))
    resolvable = math.floor(math.log2((upper - lower) / np.spacing(upper)))
    n_queries = min(requested, resolvable)

    # Exactly N count queries, at distinct points inside the public range.
    assert len(count_queries) == n_queries == calibration.details["n_queries"]
    assert len(set(count_queries)) == n_queries
    assert all(lower < point < upper for point in count_queries)
    # Exactly N Gaussian draws, one per query, and no other privacy noise.
    assert [(kind, values.shape) for kind, _, values in noise.draws] == [("normal", (n_queries,))]
    ((_, sd, _),) = noise.draws
    rho = params.get("rho", guarantee.rho)
    assert sd == pytest.approx(math.sqrt(n_queries / (2.0 * rho)), rel=1e-12)
    # zCDP composition: each sensitivity-1 Gaussian query is 1 / (2 sd^2)-zCDP.
    composed = n_queries / (2.0 * sd**2)
    assert composed == pytest.approx(guarantee.rho, rel=1e-12)
    if "rho" in params:
        assert guarantee.rho == params["rho"]
    assert guarantee.notion == "zcdp"
    assert guarantee.accountant_spend() == (guarantee.epsilon, guarantee.delta)


def test_float_resolution_cap():
    assert query_count(0.0, 1.0, 1e-10) == (34, 34)
    assert query_count(0.0, 1.0, 0.25) == (2, 2)  # exact power of two: no extra query
    assert query_count(0.0, 1.0, 0.2500001) == (2, 2)
    assert query_count(0.0, 1.0, 0.2499999) == (3, 3)
    assert query_count(0.0, 1.0, 1e-20) == (52, 67)
    assert query_count(0.5, 1.0, 1e-20) == (51, 66)
    calibration = PCOQS(rho=0.5, step=1e-20).calibrate(np.linspace(0, 1, 500), 0.1, random_state=0)
    assert calibration.details["n_queries_capped"] is True
    assert calibration.details["resolution"] == 2.0**-52


@pytest.mark.parametrize(
    ("bounds", "step", "requested"),
    [((0.0, 1.0), 1e-320, 1064), ((0.0, 1.0), 5e-324, 1074), ((0.25, 0.75), 2.0**-1073, 1072)],
)
def test_subnormal_step_is_counted_exactly_and_capped(bounds, step, requested):
    # (b - a) / step overflows to inf for a subnormal step: N must still be the exact
    # ceil(log2((b - a) / step)), capped at the float resolution.
    width = Fraction(bounds[1] - bounds[0])
    assert width / 2**requested <= step < width / 2 ** (requested - 1)
    calibration = PCOQS(rho=1.0, bounds=bounds, step=step).calibrate(
        np.linspace(0, 1, 500), 0.1, random_state=0
    )
    assert calibration.details["n_queries_requested"] == requested
    assert calibration.details["n_queries"] == query_count(*bounds, 1e-20)[0]
    assert calibration.details["n_queries_capped"] is True


@pytest.mark.parametrize("rho", [0.02, 0.5, 3.0])
@pytest.mark.parametrize("delta", [1e-5, 1e-9])
def test_reported_epsilon_matches_numerical_gaussian_profile(rho, delta):
    guarantee = PCOQS(rho=rho, delta=delta).privacy_guarantee()
    mu = math.sqrt(2.0 * rho)  # N queries of sd sqrt(N / (2 rho)): mu^2 = N / sd^2
    assert guarantee.delta == delta
    assert gaussian_profile(mu, guarantee.epsilon) <= delta * (1 + 1e-7)
    assert gaussian_profile(mu, guarantee.epsilon * (1 - 1e-6)) > delta


@pytest.mark.parametrize("epsilon", [0.3, 1.0, 5.0])
def test_rho_derived_from_epsilon_delta_is_the_largest_valid(epsilon):
    delta = 1e-6
    guarantee = PCOQS(epsilon=epsilon, delta=delta).privacy_guarantee()
    assert (guarantee.epsilon, guarantee.delta) == (epsilon, delta)
    mu = math.sqrt(2.0 * guarantee.rho)
    assert gaussian_profile(mu, epsilon) <= delta * (1 + 1e-7)
    assert gaussian_profile(mu * (1 + 1e-6), epsilon) > delta


def test_default_reported_delta_and_rho_one_half():
    guarantee = PCOQS(rho=0.5).privacy_guarantee()
    assert guarantee.delta == 1e-5
    assert guarantee.epsilon == pytest.approx(4.3772, abs=1e-4)
    assert "Not pure epsilon-DP" in guarantee.description


def _path_distribution(scores, target, lower, upper, n_queries, sd):
    """Exact distribution of the search's output: one probability per decision path."""
    scores = np.asarray(scores)
    distribution = {}
    for path in itertools.product((True, False), repeat=n_queries):
        left, right, probability, certified = lower, upper, 1.0, False
        for keep_lower in path:
            middle = 0.5 * (left + right)
            count = np.count_nonzero(scores <= middle)
            p_lower = float(ndtr((count - target) / sd))  # P(count + W >= target)
            probability *= p_lower if keep_lower else 1.0 - p_lower
            if keep_lower:
                right, certified = middle, True
            else:
                left = middle
        output = right if certified else 1.0
        distribution[output] = distribution.get(output, 0.0) + probability
    return distribution


def _hockey_stick(p, q, epsilon):
    outputs = set(p) | set(q)
    return sum(max(0.0, p.get(o, 0.0) - math.exp(epsilon) * q.get(o, 0.0)) for o in outputs)


def _worst_profile_ratio(noise_sd, mu, target, n, epsilons):
    """max over epsilon and both directions of delta_output(epsilon) / delta_mu(epsilon).

    Neighbours chosen so that every query sits at the decision boundary: k scores at 0
    and n - k at 1 give #{s <= mid} = k at every midpoint; replacing a 1 by a 0 moves
    every count by one (the worst case for all N comparisons at once).
    """
    worst = 0.0
    for k in (target - 2, target - 1, target):
        first = np.r_[np.zeros(k), np.ones(n - k)]
        second = np.r_[np.zeros(k + 1), np.ones(n - k - 1)]
        p = _path_distribution(first, target, 0.0, 1.0, 3, noise_sd)
        q = _path_distribution(second, target, 0.0, 1.0, 3, noise_sd)
        assert sum(p.values()) == pytest.approx(1.0)
        for epsilon in epsilons:
            output_delta = max(_hockey_stick(p, q, epsilon), _hockey_stick(q, p, epsilon))
            worst = max(worst, output_delta / gaussian_delta(epsilon, mu))
    return worst


@pytest.mark.parametrize("rho", [0.1, 0.5, 2.0])
def test_exact_privacy_of_a_three_query_search(rho):
    """Enumerate all 2^3 decision paths on worst-case neighbours.

    The release must satisfy the whole (epsilon, delta) profile of sqrt(2 rho)-GDP (so
    in particular the reported (epsilon, delta)). The same check on a search whose noise
    is calibrated for one query instead of N = 3 fails: the test has power.
    """
    mechanism = PCOQS(rho=rho, step=1 / 8)
    plan = mechanism.resolve_plan()
    guarantee = mechanism.privacy_guarantee()
    assert plan.n_queries == 3
    mu = math.sqrt(2.0 * rho)
    n, alpha = 40, 0.3
    target = math.ceil((n + 1) * (1 - alpha))
    epsilons = np.r_[np.linspace(0.0, 3.0 * mu + 1.0, 40), guarantee.epsilon]
    assert _worst_profile_ratio(plan.noise_sd, mu, target, n, epsilons) <= 1.0
    assert gaussian_delta(guarantee.epsilon, mu) <= guarantee.delta
    broken_sd = plan.noise_sd / math.sqrt(plan.n_queries)
    assert _worst_profile_ratio(broken_sd, mu, target, n, epsilons) > 2.0


def test_enumerated_distribution_matches_the_sampler():
    """The enumeration above describes the implementation: exact tails on 4000 runs."""
    scores = np.random.default_rng(4).uniform(size=40)
    mechanism = PCOQS(rho=0.02, step=1 / 8)
    plan = mechanism.resolve_plan()
    target = math.ceil(41 * 0.7)
    exact = _path_distribution(scores, target, 0.0, 1.0, 3, plan.noise_sd)
    noise = NoiseSource(np.random.default_rng(5))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UninformativeCalibrationWarning)
        outputs = [
            mechanism.calibrate(scores, 0.3, random_state=noise).threshold for _ in range(4000)
        ]
    support = sorted(exact)
    observed = np.array([outputs.count(o) for o in support])
    assert observed.sum() == 4000  # no output outside the enumerated support
    assert_counts_match(observed, [exact[o] for o in support])


@pytest.mark.parametrize("beta", [1e-3, 0.05])
@pytest.mark.parametrize("rho", [0.1, 2.0])
def test_inflated_slack_is_a_union_bound_over_the_queries(rho, beta):
    """All N noises stay below tau_1 except with probability <= beta (and about beta).

    Read off a calibration's public details; tau_1 = sigma Phi^{-1}(1 - beta) (no union
    bound over the N queries) would fail with probability about N beta.
    """
    calibration = PCOQS(rho=rho, beta=beta, inflated=True).calibrate(
        np.random.default_rng(0).uniform(size=5000), 0.1, random_state=0
    )
    details = calibration.details
    per_query = stats.norm.sf(details["rank_inflation"], scale=details["noise_sd"])
    failure = 1 - (1 - per_query) ** details["n_queries"]
    assert 0.95 * beta <= failure <= beta


# ----------------------------------------------------------- the release
def test_output_is_not_rounded_and_covers_an_atom():
    """All scores at one value: the threshold is within one resolution above it.

    The authors' R code rounds to 2 decimals (0.12 here), which would cover nothing.
    """
    scores = np.full(10000, 0.123456789)
    calibration = PCOQS(rho=0.5).calibrate(scores, 0.1, random_state=0)
    resolution = calibration.details["resolution"]
    assert 0.123456789 <= calibration.threshold <= 0.123456789 + resolution


def test_scores_outside_bounds_are_clipped_and_counted():
    rng = np.random.default_rng(2)
    scores = rng.uniform(size=5000)
    with pytest.warns(UninformativeCalibrationWarning, match="no noisy count"):
        calibration = PCOQS(rho=0.5, bounds=(0.2, 0.6)).calibrate(scores, 0.1, random_state=0)
    # The 0.9-quantile lies above b = 0.6: no count certifies a point in [a, b], so the
    # release is the top of the public range, not b (which would under-cover).
    assert calibration.threshold == 1.0 and not calibration.informative
    assert calibration.feasible and "no noisy count" in calibration.reason
    assert calibration.details["certified"] is False
    # The clip counts are data-dependent: owner-only diagnostics, not in details.
    assert calibration.owner_diagnostics == {
        "n_clipped_below": np.count_nonzero(scores < 0.2),
        "n_clipped_above": np.count_nonzero(scores > 0.6),
    }
    assert not {"n_clipped_below", "n_clipped_above"} & set(calibration.details)
    # Scores below a are counted (the authors' code drops them, shifting the rank).
    low = np.r_[np.full(4000, 0.05), rng.uniform(0.3, 0.5, size=1000)]
    calibration = PCOQS(rho=0.5, bounds=(0.2, 0.6)).calibrate(low, 0.1, random_state=0)
    assert np.count_nonzero(low <= calibration.threshold) >= 4500 - calibration.details["tau"]
    assert calibration.owner_diagnostics["n_clipped_below"] == 4000
    full = PCOQS(rho=0.5).calibrate(scores, 0.1, random_state=0)
    assert full.owner_diagnostics == {}


@pytest.mark.parametrize("inflated", [False, True])
@pytest.mark.parametrize(("n", "alpha"), [(5, 0.1), (9, 0.1), (100, 0.1), (2400, 0.05)])
def test_infeasible_requests_do_not_read_data(n, alpha, inflated, count_queries):
    mechanism = PCOQS(rho=0.5, inflated=inflated)
    certificate = mechanism.coverage_certificate(n, alpha)
    scores = np.linspace(0, 1, n)
    if certificate.feasible:
        calibration = mechanism.calibrate(scores, alpha, random_state=0)
        assert calibration.feasible
        assert len(count_queries) == 34
        return
    with pytest.warns(InfeasibleCalibrationWarning):
        calibration = mechanism.calibrate(scores, alpha, random_state=0)
    assert not calibration.feasible and not calibration.informative
    assert calibration.threshold == 1.0
    assert calibration.privacy.epsilon == 0.0
    assert count_queries == []
    assert calibration.reason == certificate.reason


def test_infeasibility_boundaries():
    # r = ceil(10 * 0.9) = 9 <= 9; r = 6 > 5.
    assert PCOQS(rho=0.5).coverage_certificate(9, 0.1).feasible
    assert not PCOQS(rho=0.5).coverage_certificate(5, 0.1).feasible
    # Inflated: r + tau_1 = 91 + 23.4 > 100 at rho = 0.5, feasible at n = 2400.
    assert not PCOQS(rho=0.5, inflated=True).coverage_certificate(100, 0.1).feasible
    assert PCOQS(rho=0.5, inflated=True).coverage_certificate(2400, 0.1).feasible


@pytest.mark.parametrize("inflated", [False, True])
@pytest.mark.parametrize("alpha", [0.05, 0.1])
@pytest.mark.parametrize("budget", [{"rho": 0.5}, {"epsilon": 1.0, "delta": 1e-5}])
def test_min_informative_samples_is_the_feasibility_boundary(budget, alpha, inflated):
    mechanism = PCOQS(**budget, inflated=inflated)
    n = mechanism.min_informative_samples(alpha)
    assert mechanism.coverage_certificate(n, alpha).feasible
    assert not mechanism.coverage_certificate(n - 1, alpha).feasible
    assert str(n) in mechanism.coverage_certificate(n - 1, alpha).reason


@pytest.mark.parametrize("inflated", [False, True])
@pytest.mark.parametrize("rho", [0.1, 1.0])
@pytest.mark.parametrize(("n", "alpha"), [(200, 0.2), (2400, 0.1), (10000, 0.05)])
def test_certificate_is_what_calibrate_returns(n, alpha, rho, inflated):
    mechanism = PCOQS(rho=rho, inflated=inflated)
    certificate = mechanism.coverage_certificate(n, alpha)
    scores = np.random.default_rng(0).uniform(size=n)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", InfeasibleCalibrationWarning)
        calibration = mechanism.calibrate(scores, alpha, random_state=0)
    assert calibration.feasible == certificate.feasible
    assert calibration.coverage_lower_bound == certificate.lower_bound
    if certificate.feasible:
        assert calibration.lower_bound_confidence == certificate.confidence
        plan = mechanism.resolve_plan()
        if inflated:
            rank = math.ceil((n + 1) * (1 - Fraction(alpha)))
            assert certificate.lower_bound == pytest.approx(rank / (n + 1) - plan.beta)
            assert certificate.lower_bound >= 1 - alpha - plan.beta
            assert certificate.confidence == 1.0
        else:
            assert certificate.lower_bound == pytest.approx(1 - alpha - plan.tau / (n + 1))
            assert certificate.confidence == 1 - plan.beta
            tau = math.sqrt(34 / rho * math.log(2 * 34 / plan.beta))  # Proposition 1
            assert plan.tau == pytest.approx(tau)


# ---------------------------------------------------------------- coverage
class BetaScores:
    """Beta(2, 2) scores: continuous, density at most 1.5."""

    continuous = True

    def sample(self, rng, n):
        return rng.beta(2.0, 2.0, size=n)


class TiedScores:
    """Seven atoms carrying all the mass."""

    continuous = False
    atoms = np.array([0.1, 0.3, 0.5, 0.7, 0.85, 0.95, 1.0])
    probabilities = np.array([0.3, 0.2, 0.15, 0.15, 0.1, 0.05, 0.05])

    def sample(self, rng, n):
        cumulative = np.cumsum(self.probabilities)
        return self.atoms[np.minimum(np.searchsorted(cumulative, rng.uniform(size=n)), 6)]


#: (n, rho, runs): rho = 4 at n = 200 so that the inflated variant is feasible there.
SIZES = [(200, 4.0, 3000), (2400, 0.5, 1500), (10000, 0.5, 600)]


def _coverage_runs(mechanism, distribution, n, alpha, runs, seed):
    rng, noise = np.random.default_rng(seed), np.random.default_rng(seed + 1)
    covered = 0
    calibration = None
    for _ in range(runs):
        scores = distribution.sample(rng, n + 1)
        calibration = mechanism.calibrate(scores[:n], alpha, random_state=noise)
        covered += scores[n] <= calibration.threshold
    return covered, calibration


@pytest.mark.slow
@pytest.mark.parametrize("inflated", [False, True])
@pytest.mark.parametrize("alpha", [0.05, 0.1, 0.2])
@pytest.mark.parametrize(("n", "rho", "runs"), SIZES)
@pytest.mark.parametrize("distribution", [BetaScores(), TiedScores()], ids=["beta", "tied"])
def test_monte_carlo_coverage(distribution, n, rho, runs, alpha, inflated):
    """Covered runs ~ Binomial(runs, P(cover)); bounds from Theorem 2 / the inflation proof.

    Default: the bound L holds with probability 1 - beta over the noise, so marginal
    coverage is at least (1 - beta) L. Inflated: L is marginal. Upper side (continuous
    scores only): with probability 1 - beta the threshold is below the
    ceil(target + tau)-th score plus one resolution, so P(cover) <= that rank / (n + 1)
    + 1.5 * resolution (density <= 1.5) + beta.
    """
    mechanism = PCOQS(rho=rho, inflated=inflated)
    certificate = mechanism.coverage_certificate(n, alpha)
    assert certificate.feasible
    seed = n + int(1000 * alpha) + 7 * inflated + 13 * distribution.continuous
    covered, calibration = _coverage_runs(mechanism, distribution, n, alpha, runs, seed)
    marginal = certificate.lower_bound * certificate.confidence
    assert covered >= binomial_lower_limit(runs, marginal)
    if distribution.continuous:
        upper = calibration.details["approximate_upper_bound"]
        slack = 1.5 * calibration.details["resolution"] + calibration.details["beta"]
        assert covered <= binomial_upper_limit(runs, min(1.0, upper + slack))


# ---------------------------------------------------------------- estimator
def test_plugs_into_the_classifier_and_spends_epsilon_delta():
    rng = np.random.default_rng(0)
    X = rng.normal(size=(3000, 3))
    y = (X[:, 0] + 0.5 * rng.normal(size=3000) > 0).astype(int)
    model = GaussianNB().fit(X[:1000], y[:1000])
    for mechanism in (PCOQS(rho=0.5), PCOQS(epsilon=2.0, delta=1e-6, inflated=True)):
        accountant = BudgetAccountant()
        estimator = PrivateConformalClassifier(
            model, mechanism=mechanism, alpha=0.1, random_state=0, accountant=accountant
        ).fit_calibrate(X[1000:], y[1000:])
        guarantee = estimator.calibration_.privacy
        assert accountant.spent_budget == [(guarantee.epsilon, guarantee.delta)]
        assert estimator.calibration_.mechanism == "PCOQS"
        sets = estimator.predict_set(X[:50])
        assert sets.shape == (50, 2) and sets.dtype == bool
        assert 0.0 <= estimator.threshold_ <= 1.0
    # The budget is checked before data is read.
    with pytest.raises(BudgetError):
        PrivateConformalClassifier(
            model,
            mechanism=PCOQS(rho=0.5),
            random_state=0,
            accountant=BudgetAccountant(epsilon=1.0, delta=1e-5),
        ).fit_calibrate(X[1000:], y[1000:])


def test_clone_and_set_params():
    mechanism = PCOQS(rho=0.3, bounds=(0.0, 0.5), step=1e-6, beta=0.01, inflated=True)
    cloned = clone(mechanism)
    assert cloned.get_params() == mechanism.get_params()
    cloned.set_params(rho=None, epsilon=1.0, delta=1e-6)
    assert cloned.privacy_guarantee().epsilon == 1.0


# ---------------------------------------------------------------- bad input
@pytest.mark.parametrize(
    ("params", "match"),
    [
        ({"rho": 0.5, "epsilon": 1.0, "delta": 1e-5}, "exactly one"),
        ({}, "exactly one"),
        ({"epsilon": 1.0}, "needs delta"),
        ({"rho": 0.0}, "rho"),
        ({"rho": -1.0}, "rho"),
        ({"rho": math.inf}, "rho"),
        ({"rho": "0.5"}, "rho"),
        ({"rho": 10**400}, "rho"),
        ({"epsilon": 0.0, "delta": 1e-5}, "epsilon"),
        ({"epsilon": 1.0, "delta": 0.0}, "delta"),
        ({"epsilon": 1.0, "delta": 1.0}, "delta"),
        ({"rho": 0.5, "delta": -0.1}, "delta"),
        ({"rho": 0.5, "delta": math.nan}, "delta"),
        ({"rho": 0.5, "bounds": (0.5, 0.5)}, "bounds"),
        ({"rho": 0.5, "bounds": (0.7, 0.2)}, "bounds"),
        ({"rho": 0.5, "bounds": (-0.1, 1.0)}, "bounds"),
        ({"rho": 0.5, "bounds": (0.0, 2.0)}, "bounds"),
        ({"rho": 0.5, "bounds": (0.0, math.nan)}, "bounds"),
        ({"rho": 0.5, "bounds": (0.0,)}, "bounds"),
        ({"rho": 0.5, "bounds": "0,1"}, "bounds"),
        ({"rho": 0.5, "step": 0.0}, "step"),
        ({"rho": 0.5, "step": 1.0}, "step"),
        ({"rho": 0.5, "bounds": (0.2, 0.3), "step": 0.2}, "step"),
        ({"rho": 0.5, "beta": 0.0}, "beta"),
        ({"rho": 0.5, "beta": 1.0}, "beta"),
        ({"rho": 0.5, "inflated": "yes"}, "inflated"),
    ],
)
def test_bad_parameters_are_rejected_by_name(params, match):
    """Wrong types raise TypeError, wrong values ValueError, both naming the parameter."""
    mechanism = PCOQS(**params)  # stored untouched
    wrong_type = any(isinstance(value, str) for value in params.values())
    error = TypeError if wrong_type else ValueError
    with pytest.raises(error, match=match):
        mechanism.calibrate(np.linspace(0, 1, 100), 0.1, random_state=0)
    with pytest.raises(error, match=match):
        mechanism.privacy_guarantee()
    with pytest.raises(error, match=match):
        mechanism.coverage_certificate(100, 0.1)
    with pytest.raises(error, match=match):
        mechanism.min_informative_samples(0.1)
