"""FedCPQQ and FedCP2QQ mechanisms (paper 004): coverage, guarantees, estimator use, errors."""

import warnings

import numpy as np
import pytest
from diffprivlib.accountant import BudgetAccountant
from sklearn.base import clone
from sklearn.linear_model import LogisticRegression

from benchmarks.fedcp_avg import fedcp_avg_threshold
from privconf_sklearn import PrivateConformalClassifier
from privconf_sklearn.datasets import make_poisson_outliers, make_two_gaussians
from privconf_sklearn.federated import agent_message_log_probabilities, make_plan
from privconf_sklearn.mechanisms import (
    FedCP2QQ,
    FedCPQQ,
    InfeasibleCalibrationWarning,
    SplitConformal,
)
from privconf_sklearn.mechanisms._binning import bin_counts
from privconf_sklearn.mechanisms._fedcp_coverage import qq_coverage

from ._stats import binomial_lower_limit, binomial_upper_limit

ALPHA = 0.1
#: Unequal local sizes (Appendix A.1), public.
UNEQUAL_SIZES = (12, 15, 20, 25, 30, 40, 50, 60, 80, 100, 8, 10)
#: Unequal sizes large enough for FedCP2-QQ at epsilon = 4.
UNEQUAL_PRIVATE_SIZES = (40, 60, 80, 100, 150, 200, 300, 50, 70, 90)


def agent_ids(sizes):
    return np.repeat(np.arange(len(sizes)), sizes)


def order_statistic(scores, rank):
    return np.partition(scores, rank - 1)[rank - 1]


# ------------------------------------------------------------ FedCP-QQ
@pytest.mark.parametrize("sizes", [(10,) * 100, (100,) * 10, UNEQUAL_SIZES])
def test_fedcpqq_releases_the_quantile_of_quantiles(sizes):
    """The mechanism's threshold is the k-th smallest of the agents' l_j-th scores."""
    plan = make_plan(sizes, ALPHA)
    rng = np.random.default_rng(0)
    for _ in range(5):
        scores = rng.uniform(size=sum(sizes))
        groups = agent_ids(sizes)
        perm = rng.permutation(scores.shape[0])  # rows of agents interleaved
        calibration = FedCPQQ().calibrate(scores[perm], ALPHA, groups=groups[perm])
        parts = np.split(scores, np.cumsum(sizes)[:-1])
        messages = [
            1.0 if rank > part.shape[0] else order_statistic(part, rank)
            for part, rank in zip(parts, plan.local_ranks, strict=True)
        ]
        assert calibration.threshold == order_statistic(np.array(messages), plan.server_rank)
        assert calibration.coverage_lower_bound == plan.coverage_lower_bound >= 1 - ALPHA
        assert calibration.privacy.notion == "none"


@pytest.mark.parametrize("sizes", [(10,) * 100, (100,) * 10, UNEQUAL_SIZES])
def test_fedcpqq_coverage_by_monte_carlo(sizes):
    """Continuous scores: coverage is exactly the table value (Theorem 3.2, App. A.1).

    The l-th smallest of n uniforms is Beta(l, n - l + 1); the test point is covered iff
    it lies below the k-th smallest message, so covered counts are Bin(T, M).
    """
    plan = make_plan(sizes, ALPHA)
    trials = 100_000
    rng = np.random.default_rng(1)
    ranks, n = np.array(plan.local_ranks), np.array(sizes)
    finite = ranks <= n  # an agent whose rank exceeds its size sends +inf (the top, 1.0)
    messages = np.ones((trials, len(sizes)))
    messages[:, finite] = rng.beta(
        ranks[finite], n[finite] - ranks[finite] + 1, size=(trials, int(finite.sum()))
    )
    threshold = np.partition(messages, plan.server_rank - 1, axis=1)[:, plan.server_rank - 1]
    covered = int((rng.uniform(size=trials) <= threshold).sum())
    expected = plan.coverage_lower_bound
    assert (
        binomial_lower_limit(trials, expected) <= covered <= binomial_upper_limit(trials, expected)
    )
    assert expected >= 1 - ALPHA


def test_fedcpqq_infeasible_request_reads_nothing():
    scores, groups = np.linspace(0, 1, 4), np.array([0, 0, 1, 1])
    with pytest.warns(InfeasibleCalibrationWarning, match="no quantile-of-quantiles ranks"):
        calibration = FedCPQQ().calibrate(scores, ALPHA, groups=groups)
    assert calibration.threshold == 1.0 and not calibration.feasible
    assert calibration.privacy.epsilon == 0.0
    assert not FedCPQQ().coverage_certificate(4, ALPHA, agent_sizes=[2, 2]).feasible


# ----------------------------------------------------------- FedCP2-QQ
PRIVATE_SETTINGS = [
    # (sizes, epsilon, n_bins): m >> n needs a large epsilon for l_gamma + l_cor < n.
    ((10,) * 100, 20.0, 10),
    ((100,) * 10, 2.0, 100),
    (UNEQUAL_PRIVATE_SIZES, 4.0, 50),
]


@pytest.mark.parametrize("sizes, epsilon, n_bins", PRIVATE_SETTINGS)
def test_fedcp2qq_plan_follows_algorithm_3(sizes, epsilon, n_bins):
    plan = FedCP2QQ(epsilon, n_bins=n_bins).plan(sizes, ALPHA)
    assert plan.feasible
    m, gamma = len(sizes), plan.gamma
    assert plan.table_level == pytest.approx((1 - ALPHA) / (1 - gamma * ALPHA), rel=1e-15)
    delta = 1 - (1 - gamma * ALPHA) ** (1 / m)
    assert plan.rank_correction == int(np.ceil(2 / epsilon * np.log(n_bins / delta)))
    assert plan.table_coverage >= plan.table_level
    assert plan.coverage_lower_bound == pytest.approx((1 - gamma * ALPHA) * plan.table_coverage)
    assert plan.coverage_lower_bound >= 1 - ALPHA - 1e-15
    for rank, corrected, size, level in zip(
        plan.table_ranks, plan.local_ranks, sizes, plan.local_levels, strict=True
    ):
        assert corrected == rank + plan.rank_correction
        assert level == max(corrected / size, 0.5)


def test_fedcp2qq_auto_gamma_minimises_the_corrected_coverage():
    """Sec. 4: gamma = argmin over the grid of M(l_gamma + l_cor, k_gamma)."""
    sizes, epsilon = (100,) * 10, 5.0
    chosen = FedCP2QQ(epsilon).plan(sizes, ALPHA)
    scores = []
    for gamma in np.round(np.arange(1, 20) * 0.05, 2):
        plan = FedCP2QQ(epsilon, gamma=float(gamma)).plan(sizes, ALPHA)
        if plan.feasible:
            scores.append(
                (float(qq_coverage(plan.local_ranks[0], plan.server_rank, 10, 100)), gamma)
            )
    assert chosen.gamma == min(scores)[1]


@pytest.mark.parametrize("sizes, epsilon, n_bins", PRIVATE_SETTINGS)
def test_fedcp2qq_each_agent_overshoots_its_rank_with_the_required_probability(
    sizes, epsilon, n_bins
):
    """The core of Theorem 4.1, computed exactly from each agent's output distribution.

    ``P(Q_j >= [S]_(l_gamma)) >= (1 - gamma alpha)^(1/m)`` for every local data set
    (Lemma C.4 with the sensitivity-scaled utility), including adversarial ones.
    """
    plan = FedCP2QQ(epsilon, n_bins=n_bins).plan(sizes, ALPHA)
    required = (1 - plan.gamma * ALPHA) ** (1 / len(sizes))
    edges = np.arange(1, n_bins + 1) / n_bins
    rng = np.random.default_rng(2)
    for agent, size in enumerate(sizes):
        candidates = [
            rng.uniform(size=size),
            rng.beta(0.3, 0.3, size=size),
            np.full(size, rng.uniform()),
            np.repeat(rng.uniform(size=2), [size // 2, size - size // 2]),
            rng.integers(0, n_bins + 1, size=size) / n_bins,  # on bin edges
        ]
        for scores in candidates:
            probabilities = np.exp(agent_message_log_probabilities(scores, plan, agent))
            rank = plan.table_ranks[agent]
            if rank > size:
                continue
            # [S]_(l): the l-th smallest score rounded up to its bin's right edge.
            target = np.flatnonzero(bin_counts(np.array([order_statistic(scores, rank)]), n_bins))
            assert probabilities[edges >= edges[target[0]]].sum() >= required - 1e-12


@pytest.mark.parametrize(
    "sizes, epsilon, n_bins, trials",
    [
        ((100,) * 10, 2.0, 100, 1500),
        ((10,) * 100, 20.0, 10, 200),
        (UNEQUAL_PRIVATE_SIZES, 4.0, 50, 800),
    ],
)
def test_fedcp2qq_coverage_by_monte_carlo(sizes, epsilon, n_bins, trials):
    """Coverage at least (1 - gamma alpha) M(l_gamma, k_gamma) >= 1 - alpha (Theorem 4.1)."""
    mechanism = FedCP2QQ(epsilon, n_bins=n_bins)
    bound = mechanism.plan(sizes, ALPHA).coverage_lower_bound
    rng = np.random.default_rng(3)
    groups = agent_ids(sizes)
    covered = 0
    for trial in range(trials):
        scores = rng.uniform(size=groups.shape[0])
        calibration = mechanism.calibrate(scores, ALPHA, groups=groups, random_state=trial)
        covered += rng.uniform() <= calibration.threshold
    assert covered >= binomial_lower_limit(trials, bound)


def test_fedcp2qq_infeasible_when_the_correction_exceeds_the_local_sizes():
    """Paper 004 Eq. (10) at (m, n) = (100, 10), epsilon = 1: l_cor alone exceeds n."""
    groups = agent_ids((10,) * 100)
    mechanism = FedCP2QQ(1.0)
    with pytest.warns(InfeasibleCalibrationWarning, match="privacy correction l_cor"):
        calibration = mechanism.calibrate(np.full(1000, 0.5), ALPHA, groups=groups)
    assert calibration.threshold == 1.0 and not calibration.feasible
    assert calibration.privacy.epsilon == 0.0
    assert "l_cor" in calibration.reason
    certificate = FedCP2QQ(1.0, n_agents=100).coverage_certificate(1000, ALPHA)
    assert not certificate.feasible and certificate.reason == calibration.reason
    assert calibration.privacy.accountant_spend() == (0.0, 0.0)


def test_fedcp2qq_privacy_guarantee_is_local_per_agent():
    guarantee = FedCP2QQ(0.7).privacy_guarantee()
    assert (guarantee.notion, guarantee.epsilon, guarantee.delta) == ("local", 0.7, 0.0)
    assert guarantee.accountant_spend() == (0.7, 0.0)
    assert FedCPQQ().privacy_guarantee().notion == "none"


# ------------------------------------------------------ certificates
@pytest.mark.parametrize(
    "mechanism", [FedCPQQ(n_agents=8), FedCP2QQ(3.0, n_agents=8), FedCP2QQ(0.5, n_agents=8)]
)
@pytest.mark.parametrize("n_samples", [1000, 1203])
def test_certificate_equals_the_calibration_for_even_splits(mechanism, n_samples):
    certificate = mechanism.coverage_certificate(n_samples, ALPHA)
    groups = np.arange(n_samples) % 8
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", InfeasibleCalibrationWarning)
        calibration = clone(mechanism).calibrate(
            np.random.default_rng(0).uniform(size=n_samples), ALPHA, groups=groups, random_state=0
        )
    assert certificate.feasible == calibration.feasible
    assert certificate.lower_bound == calibration.coverage_lower_bound
    sizes = np.bincount(groups).tolist()
    assert mechanism.coverage_certificate(n_samples, ALPHA, agent_sizes=sizes) == certificate


def test_certificate_needs_agent_sizes():
    with pytest.raises(ValueError, match="agent_sizes"):
        FedCPQQ().coverage_certificate(1000, ALPHA)
    with pytest.raises(ValueError, match="sum to 90"):
        FedCPQQ().coverage_certificate(100, ALPHA, agent_sizes=[45, 45])


# ------------------------------------------------------------ errors
@pytest.mark.parametrize("mechanism", [FedCPQQ(), FedCP2QQ(1.0)])
def test_groups_errors(mechanism):
    scores = np.linspace(0, 1, 40)
    with pytest.raises(ValueError, match="needs groups"):
        mechanism.calibrate(scores, ALPHA)
    with pytest.raises(ValueError, match="at least two agents"):
        mechanism.calibrate(scores, ALPHA, groups=np.zeros(40))
    with pytest.raises(ValueError, match="one entry per calibration row"):
        mechanism.calibrate(scores, ALPHA, groups=np.arange(39) % 2)
    with pytest.raises(ValueError, match="groups define 4 agents but n_agents = 5"):
        clone(mechanism).set_params(n_agents=5).calibrate(scores, ALPHA, groups=np.arange(40) % 4)


@pytest.mark.parametrize(
    "params, match",
    [
        ({"epsilon": 0.0}, "epsilon"),
        ({"epsilon": np.inf}, "epsilon"),
        ({"n_bins": 1}, "n_bins"),
        ({"n_bins": 10.0}, "n_bins"),
        ({"gamma": 1.5}, "gamma"),
        ({"gamma": "best"}, "gamma"),
        ({"n_agents": 1}, "n_agents"),
    ],
)
def test_parameter_errors(params, match):
    mechanism = FedCP2QQ(1.0).set_params(**params)
    with pytest.raises(ValueError, match=match):
        mechanism.privacy_guarantee()
    with pytest.raises(ValueError, match=match):
        mechanism.calibrate(np.linspace(0, 1, 40), ALPHA, groups=np.arange(40) % 2)


# ------------------------------------------------------- estimators
@pytest.mark.parametrize("mechanism", [FedCPQQ(), FedCP2QQ(epsilon=3.0)])
def test_classifier_with_federated_mechanisms(mechanism):
    X, y = make_two_gaussians(6000, random_state=0)
    model = LogisticRegression().fit(X[:2000], y[:2000])
    accountant = BudgetAccountant()
    groups = np.arange(2000) % 10
    estimator = PrivateConformalClassifier(
        model, mechanism=mechanism, alpha=ALPHA, random_state=0, accountant=accountant
    ).fit_calibrate(X[2000:4000], y[2000:4000], groups=groups)
    sets = estimator.predict_set(X[4000:])
    coverage = sets[np.arange(2000), y[4000:]].mean()
    assert coverage >= 0.85
    assert estimator.calibration_.details["n_agents"] == 10
    expected_spend = [] if isinstance(mechanism, FedCPQQ) else [(3.0, 0.0)]
    spent = [entry for entry in accountant.spent_budget if entry != (np.inf, 0.0)]
    assert spent == expected_spend
    with pytest.raises(ValueError, match="needs groups"):
        clone(estimator).fit_calibrate(X[2000:4000], y[2000:4000])


def test_classifier_grid_parameters_reach_the_mechanism():
    estimator = PrivateConformalClassifier(LogisticRegression(), mechanism=FedCP2QQ(1.0))
    estimator.set_params(mechanism__epsilon=4.0, mechanism__n_bins=50)
    assert clone(estimator).mechanism.get_params() == {
        "epsilon": 4.0,
        "n_bins": 50,
        "gamma": "auto",
        "n_agents": None,
    }


# -------------------------------------------- paper 004 Sec. 5.1 reproduction
def _binned_quantile_regression(x_train, y_train, levels, n_bins=20):
    """Empirical conditional quantiles of y on 20 bins of x in [1, 5] (a simple CQR base)."""
    edges = np.linspace(1, 5, n_bins + 1)

    def bin_of(x):
        return np.clip(np.searchsorted(edges, x, side="right") - 1, 0, n_bins - 1)

    index = bin_of(x_train)
    table = np.array([np.quantile(y_train[index == b], levels) for b in range(n_bins)])
    return lambda x: table[bin_of(x)].T


def test_reproduces_paper004_section_5_1():
    """m = 50 agents x n = 20, alpha = 0.1, Poisson data with outliers, CQR scores.

    Paper 004 Fig. 3: FedCP-QQ intervals are almost those of centralised split
    conformal; FedCP-Avg (average of local quantiles) gives wider ones.
    """
    widths = []
    for seed in range(20):
        X, y = make_poisson_outliers(7000, random_state=seed)
        x = X[:, 0]
        predict = _binned_quantile_regression(x[:1000], y[:1000], [ALPHA / 2, 1 - ALPHA / 2])
        low, high = predict(x[1000:2000])
        scores = np.maximum(low - y[1000:2000], y[1000:2000] - high)  # CQR
        # A monotone map to [0, 1] keeps order statistics (the mechanisms are non-private).
        a, b = scores.min(), scores.max()
        unit = (scores - a) / (b - a)
        groups = np.repeat(np.arange(50), 20)
        q_fed = a + (b - a) * FedCPQQ().calibrate(unit, ALPHA, groups=groups).threshold
        q_central = a + (b - a) * SplitConformal().calibrate(unit, ALPHA).threshold
        q_avg = fedcp_avg_threshold(np.split(scores, 50), ALPHA)
        test_low, test_high = predict(x[2000:])
        widths.append([np.mean(test_high - test_low + 2 * q) for q in (q_fed, q_central, q_avg)])
    fed, central, average = np.mean(widths, axis=0)
    assert abs(fed / central - 1) < 0.10
    assert average > 1.10 * fed
