"""FedCPQQ and FedCP2QQ mechanisms (Humbert et al. 2023): coverage, guarantees, estimators."""

import math
import warnings

import numpy as np
import pytest
from diffprivlib.accountant import BudgetAccountant
from scipy.special import betainc
from scipy.stats import binom
from sklearn.base import clone
from sklearn.linear_model import LogisticRegression
from sklearn.utils._param_validation import InvalidParameterError

from privconf_sklearn import PrivateConformalClassifier
from privconf_sklearn.datasets import make_poisson_outliers, make_two_gaussians
from privconf_sklearn.federated import agent_message_log_probabilities, make_plan
from privconf_sklearn.mechanisms import (
    FedCP2QQ,
    FedCPQQ,
    InfeasibleCalibrationWarning,
    SplitConformal,
    UninformativeCalibrationWarning,
)
from privconf_sklearn.mechanisms.fedcp._coverage import ROUNDING_ALLOWANCE  # no public name

from ._stats import FALSE_FAILURE, binomial_lower_limit, binomial_upper_limit

ALPHA = 0.1
#: Unequal local sizes (Appendix A.1), public.
UNEQUAL_SIZES = (12, 15, 20, 25, 30, 40, 50, 60, 80, 100, 8, 10)
#: Unequal sizes for FedCP2-QQ.
UNEQUAL_PRIVATE_SIZES = (40, 60, 80, 100, 150, 200, 300, 50, 70, 90)


def agent_ids(sizes):
    return np.repeat(np.arange(len(sizes)), sizes)


def order_statistic(scores, rank):
    return np.partition(scores, rank - 1)[rank - 1]


def delta_of(plan):
    return 1 - (1 - plan.gamma * plan.alpha) ** (1 / plan.n_agents)


# ------------------------------------------------------------ FedCP-QQ
@pytest.mark.parametrize("sizes", [(10,) * 100, (100,) * 10, UNEQUAL_SIZES])
def test_fedcpqq_releases_the_quantile_of_quantiles(sizes):
    """The threshold is the k-th smallest of the agents' l_j-th scores (of their subsets)."""
    plan = make_plan(sizes, ALPHA)
    assert plan.sample_sizes == sizes  # these sizes need no subsampling
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


def simulated_coverage(plan, trials, rng):
    """Covered count of a fresh uniform score under the plan, for uniform scores.

    The l-th smallest of n' uniforms is Beta(l, n' - l + 1) (a uniformly random subset
    of i.i.d. scores is i.i.d.); an agent whose rank exceeds n' sends the top, 1.0.
    """
    ranks, n = np.array(plan.local_ranks), np.array(plan.sample_sizes)
    finite = ranks <= n
    messages = np.ones((trials, plan.n_agents))
    messages[:, finite] = rng.beta(
        ranks[finite], n[finite] - ranks[finite] + 1, size=(trials, int(finite.sum()))
    )
    threshold = np.partition(messages, plan.server_rank - 1, axis=1)[:, plan.server_rank - 1]
    return int((rng.uniform(size=trials) <= threshold).sum())


@pytest.mark.parametrize(
    "sizes", [(10,) * 100, (100,) * 10, UNEQUAL_SIZES, (200, 200, 200, 199), (30, 29, 3)]
)
def test_fedcpqq_coverage_by_monte_carlo(sizes):
    """Continuous scores: coverage is exactly the table value (Theorem 3.2, App. A.1)."""
    plan = make_plan(sizes, ALPHA)
    trials = 100_000
    covered = simulated_coverage(plan, trials, np.random.default_rng(1))
    low, high = plan.coverage_lower_bound, plan.coverage_upper_bound
    assert binomial_lower_limit(trials, low) <= covered <= binomial_upper_limit(trials, high)
    assert low >= 1 - ALPHA and high - low <= 2 * ROUNDING_ALLOWANCE


def test_fedcpqq_infeasible_request_reads_nothing_and_says_from_which_size():
    scores, groups = np.linspace(0, 1, 4), np.array([0, 0, 1, 1])
    with pytest.warns(InfeasibleCalibrationWarning, match="at least 5 calibration scores"):
        calibration = FedCPQQ().calibrate(scores, ALPHA, groups=groups)
    assert calibration.threshold == 1.0 and not calibration.feasible
    assert not calibration.informative
    assert calibration.privacy.epsilon == 0.0
    assert not FedCPQQ().coverage_certificate(4, ALPHA, agent_sizes=[2, 2]).feasible
    # M(n, m) = 2n / (2n + 1) >= 0.9 from n = 5 (Proposition A.1 at m = 2).
    assert FedCPQQ().min_informative_samples(ALPHA, n_agents=2) == 5


def test_fedcpqq_scores_at_the_top_warn_uninformative():
    """A feasible plan whose k-th smallest message is 1.0 says so (no silent full sets)."""
    groups = agent_ids((100,) * 10)
    with pytest.warns(UninformativeCalibrationWarning, match="every agent's message is the top"):
        calibration = FedCPQQ().calibrate(np.ones(1000), ALPHA, groups=groups)
    assert calibration.feasible and not calibration.informative
    assert "order statistics are at the top" in calibration.reason


# ----------------------------------------------------------- FedCP2-QQ
PRIVATE_SETTINGS = [
    # (sizes, epsilon, n_bins, scaling)
    ((10,) * 100, 20.0, 10, "tight"),
    ((100,) * 10, 2.0, 100, "tight"),
    ((100,) * 10, 2.0, "auto", "tight"),
    ((100,) * 10, 4.0, 100, "paper"),
    (UNEQUAL_PRIVATE_SIZES, 4.0, 50, "tight"),
    (UNEQUAL_PRIVATE_SIZES, 4.0, 50, "paper"),
]


@pytest.mark.parametrize("sizes, epsilon, n_bins, scaling", PRIVATE_SETTINGS)
def test_fedcp2qq_corrections_follow_the_proofs(sizes, epsilon, n_bins, scaling):
    """Tight: the smallest c with eps q (c + 1) >= log((B - 1)/delta), q = (l + c)/n.
    Paper: Eq. (10), c = ceil(2/eps log(B/delta)), q = max((l + c)/n, 1/2)."""
    plan = FedCP2QQ(epsilon, n_bins=n_bins, scaling=scaling).plan(sizes, ALPHA)
    assert plan.feasible
    gamma, delta, bins = plan.gamma, delta_of(plan), plan.n_bins
    assert plan.table_level == pytest.approx((1 - ALPHA) / (1 - gamma * ALPHA), rel=1e-15)
    assert plan.table_coverage >= plan.table_level
    assert plan.coverage_lower_bound == pytest.approx((1 - gamma * ALPHA) * plan.table_coverage)
    assert plan.coverage_lower_bound >= 1 - ALPHA
    for rank, c, q, n, releases in zip(
        plan.table_ranks,
        plan.rank_corrections,
        plan.local_levels,
        plan.sample_sizes,
        plan.releases,
        strict=True,
    ):
        if not releases:
            assert rank == n + 1 and q == 0.0
            continue
        if scaling == "paper":
            assert c == math.ceil(2 / epsilon * math.log(bins / delta))
            assert q == max((rank + c) / n, 0.5) < 1
        else:
            log_term = math.log((bins - 1) / delta)
            assert q == (rank + c) / n <= 1
            assert epsilon * q * (c + 1) >= log_term
            assert c == 0 or epsilon * (rank + c - 1) / n * c < log_term  # c is the smallest


def agent_overshoot(plan, agent, scores):
    """P(Q_j >= [s]_(l_j)) from the exact output distribution (l_j: the table rank)."""
    probabilities = np.exp(agent_message_log_probabilities(scores, plan, agent))
    edges = np.arange(1, plan.n_bins + 1) / plan.n_bins
    return probabilities[edges >= order_statistic(scores, plan.table_ranks[agent])].sum()


@pytest.mark.parametrize("sizes, epsilon, n_bins, scaling", PRIVATE_SETTINGS)
def test_fedcp2qq_each_agent_overshoots_its_rank_with_the_required_probability(
    sizes, epsilon, n_bins, scaling
):
    """The core of Theorem 4.1, exactly, on adversarial data sets (ties, scores on edges):
    ``P(Q_j >= s_(l_j)) >= (1 - gamma alpha)^(1/m)`` for every releasing agent."""
    plan = FedCP2QQ(epsilon, n_bins=n_bins, scaling=scaling).plan(sizes, ALPHA)
    required = (1 - plan.gamma * ALPHA) ** (1 / len(sizes))
    rng = np.random.default_rng(2)
    worst = 1.0
    for agent, size in enumerate(sizes):
        if not plan.releases[agent] or plan.sample_sizes[agent] != size:
            continue
        candidates = [
            rng.uniform(size=size),
            rng.beta(0.3, 0.3, size=size),
            np.full(size, rng.uniform()),
            np.repeat(rng.uniform(size=2), [size // 2, size - size // 2]),
            rng.integers(0, plan.n_bins + 1, size=size) / plan.n_bins,  # on bin edges
            np.linspace(0, 1, size),
            np.r_[np.zeros(plan.table_ranks[agent]), np.ones(size - plan.table_ranks[agent])],
        ]
        for scores in candidates:
            worst = min(worst, agent_overshoot(plan, agent, scores))
    assert worst >= required - 1e-12


def test_tight_correction_against_the_papers():
    """Same table; c = the smallest integer with eps q (c + 1) >= log((B - 1)/delta) for
    the tight scaling, against Eq. (10)'s ceil(2/eps log(B/delta))."""
    tight = make_plan((1000,) * 10, ALPHA, epsilon=1.0, n_bins=100, gamma=0.3)
    paper = make_plan((1000,) * 10, ALPHA, epsilon=1.0, n_bins=100, gamma=0.3, scaling="paper")
    assert tight.table_ranks == paper.table_ranks
    delta, rank = delta_of(tight), tight.table_ranks[0]
    smallest = next(
        c
        for c in range(1000)
        if 1.0 * (rank + c) / 1000 * (c + 1) >= math.log(99 / delta) * (1 + 1e-12)
    )
    assert tight.rank_corrections[0] == smallest
    assert paper.rank_corrections[0] == math.ceil(2 * math.log(100 / delta))
    assert paper.rank_corrections[0] > smallest


@pytest.mark.slow
@pytest.mark.parametrize(
    "sizes, epsilon, n_bins, scaling, trials",
    [
        ((100,) * 10, 2.0, 100, "tight", 1500),
        ((100,) * 10, 2.0, 100, "paper", 800),
        ((10,) * 100, 20.0, 10, "tight", 200),
        (UNEQUAL_PRIVATE_SIZES, 4.0, "auto", "tight", 800),
    ],
)
def test_fedcp2qq_coverage_by_monte_carlo(sizes, epsilon, n_bins, scaling, trials):
    """Coverage at least (1 - gamma alpha) M >= 1 - alpha (Theorem 4.1), on uniform scores."""
    mechanism = FedCP2QQ(epsilon, n_bins=n_bins, scaling=scaling)
    bound = mechanism.plan(sizes, ALPHA).coverage_lower_bound
    rng = np.random.default_rng(3)
    groups = agent_ids(sizes)
    covered = 0
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UninformativeCalibrationWarning)
        for trial in range(trials):
            scores = rng.uniform(size=groups.shape[0])
            calibration = mechanism.calibrate(scores, ALPHA, groups=groups, random_state=trial)
            covered += rng.uniform() <= calibration.threshold
    assert covered >= binomial_lower_limit(trials, bound)


def test_fedcp2qq_infeasible_when_the_correction_exceeds_the_local_sizes():
    """(m, n) = (100, 10) at epsilon = 1: no agent can aim above its rank within its data."""
    groups = agent_ids((10,) * 100)
    mechanism = FedCP2QQ(1.0)
    needed = mechanism.min_informative_samples(ALPHA, n_agents=100)
    with pytest.warns(InfeasibleCalibrationWarning, match=f"at least {needed} calibration"):
        calibration = mechanism.calibrate(np.full(1000, 0.5), ALPHA, groups=groups)
    assert calibration.threshold == 1.0 and not calibration.feasible
    assert not calibration.informative
    assert calibration.privacy.epsilon == 0.0
    certificate = FedCP2QQ(1.0, n_agents=100).coverage_certificate(1000, ALPHA)
    assert not certificate.feasible and certificate.reason == calibration.reason
    assert calibration.privacy.accountant_spend() == (0.0, 0.0)


def test_fedcp2qq_every_agent_at_the_top_warns_uninformative():
    """Scores at the top of the range: the private messages land on the top edge."""
    groups = agent_ids((300,) * 5)
    with pytest.warns(UninformativeCalibrationWarning, match="every agent's message is the top"):
        calibration = FedCP2QQ(1.0).calibrate(np.ones(1500), ALPHA, groups=groups, random_state=0)
    assert calibration.feasible and not calibration.informative
    assert "private quantiles landed on the top edge" in calibration.reason


def test_fedcp2qq_fewer_releasing_agents_than_needed_is_infeasible():
    """Agents too small for their corrected ranks: the plan cannot serve any server rank."""
    sizes = (20, 20, 21)
    mechanism = FedCP2QQ(1.0)
    with pytest.warns(InfeasibleCalibrationWarning, match="fewer agents can release"):
        calibration = mechanism.calibrate(
            np.random.default_rng(0).uniform(size=sum(sizes)), ALPHA, groups=agent_ids(sizes)
        )
    assert not calibration.feasible and not calibration.informative


@pytest.mark.parametrize("scaling", ["tight", "paper"])
def test_fedcp2qq_huge_epsilon_is_essentially_noiseless(scaling):
    """epsilon = 1e308 (epsilon n overflows): a feasible plan whose agents release the
    most likely edge whatever the noise draws."""
    scores, groups = np.random.default_rng(0).uniform(size=500), np.arange(500) % 5
    mechanism = FedCP2QQ(1e308, n_bins=100, gamma=0.1, scaling=scaling)
    releases = [
        mechanism.calibrate(scores, ALPHA, groups=groups, random_state=seed) for seed in range(3)
    ]
    assert all(c.feasible and c.informative for c in releases)
    assert releases[0].coverage_lower_bound >= 1 - ALPHA
    assert len({c.threshold for c in releases}) == 1


@pytest.mark.parametrize("epsilon", [1e-300, 1e-320, 5e-324])
@pytest.mark.parametrize("scaling", ["tight", "paper"])
def test_fedcp2qq_vanishing_epsilon_is_an_honest_infeasible_release(epsilon, scaling):
    scores, groups = np.random.default_rng(0).uniform(size=500), np.arange(500) % 5
    mechanism = FedCP2QQ(epsilon, scaling=scaling)
    needed = "more than the 10000 scores an agent uses"
    with pytest.warns(InfeasibleCalibrationWarning, match=needed):
        calibration = mechanism.calibrate(scores, ALPHA, groups=groups, random_state=0)
    assert calibration.threshold == 1.0 and calibration.privacy.epsilon == 0.0
    assert mechanism.min_informative_samples(ALPHA, n_agents=5) == 10**9 + 1


@pytest.mark.parametrize("gamma", [5e-324, 1e-310])
def test_fedcp2qq_vanishing_gamma_allows_no_failure_and_is_infeasible(gamma):
    """gamma alpha below the smallest normal float: no failure probability is allowed to
    the agents (delta = 0), so none can release: infeasible, never a crash."""
    plan = make_plan([40, 60, 80], ALPHA, epsilon=2.0, gamma=gamma)
    assert not plan.feasible and "fewer agents can release" in plan.reason
    plan = make_plan([100] * 3, 1e-300, epsilon=2.0, n_bins=20)
    assert not plan.feasible


def test_readme_federated_setting_is_informative():
    """5 agents x 300 rows at epsilon = 1 (the README snippet's setting).

    The release is trivial only if at least m - k + 1 messages are the top edge. The
    plan keeps that probability below TRIVIAL_TOLERANCE (0.1%) on idealised uniform
    scores; on this draw of uniform scores (a deterministic computation from the agents'
    exact output distributions) it is below 0.1% as well.
    """
    sizes = (300,) * 5
    plan = make_plan(sizes, ALPHA, epsilon=1.0)
    assert plan.feasible and plan.coverage_lower_bound >= 1 - ALPHA
    scores = np.random.default_rng(0).uniform(size=1500)
    parts = np.split(scores, 5)
    top = [np.exp(agent_message_log_probabilities(p, plan, j))[-1] for j, p in enumerate(parts)]
    # Independent agents: P(at least m - k + 1 at the top) <= P(Bin(m, max top) >= m - k + 1).
    trivial = binom.sf(plan.n_agents - plan.server_rank, plan.n_agents, max(top))
    assert trivial < 1e-3
    calibration = FedCP2QQ(1.0).calibrate(scores, ALPHA, groups=agent_ids(sizes), random_state=0)
    assert calibration.informative and calibration.threshold < 1.0


def test_fedcp2qq_privacy_guarantee_is_local_per_agent():
    guarantee = FedCP2QQ(0.7).privacy_guarantee()
    assert (guarantee.notion, guarantee.epsilon, guarantee.delta) == ("local", 0.7, 0.0)
    assert guarantee.adjacency == "add/remove"
    assert guarantee.under("replace-one").epsilon == 1.4
    assert guarantee.accountant_spend() == (0.7, 0.0)
    assert FedCPQQ().privacy_guarantee().notion == "none"


def _view_log_ratio(plan, before, after):
    """max |log P(view | before) - log P(view | after)| over every view (m_0, m_1).

    The server's view is both agents' messages: independent, so its log-probability
    is the sum of the agents' exact log-probabilities, over the grid of pairs.
    """
    views = [
        sum(
            np.meshgrid(
                *[agent_message_log_probabilities(s, plan, j) for j, s in enumerate(data)],
                indexing="ij",
            )
        )
        for data in (before, after)
    ]
    return float(np.max(np.abs(views[0] - views[1])))


def test_fedcp2qq_server_view_of_a_record_moving_between_agents_costs_two_epsilon():
    """Exact privacy loss of the server's view on two agents (fixed public plan).

    A replaced record that sits at agent 0 in one data set and at agent 1 in the other
    changes one score of each agent: the loss reaches almost 2 epsilon, the guarantee's
    replace-one statement; a record added or removed (one agent's score) costs at most
    epsilon, its add/remove statement, and each agent's message stays epsilon-local-DP.
    """
    epsilon, n = 1.0, 100
    plan = make_plan([n, n], 0.2, epsilon=epsilon, n_bins=10)
    stated = FedCP2QQ(epsilon, n_bins=10).calibrate(
        np.zeros(2 * n), 0.2, groups=agent_ids((n, n)), random_state=0
    ).privacy
    low, high = np.zeros(n), np.ones(n)
    moved = [(low, low), (np.r_[1.0, low[1:]], np.r_[1.0, low[1:]])]  # one score each
    one_agent = [(low, low), (np.r_[1.0, low[1:]], low)]
    mixed = [(high, low), (np.r_[0.0, high[1:]], np.r_[1.0, low[1:]])]
    loss_moved = max(_view_log_ratio(plan, *moved), _view_log_ratio(plan, *mixed))
    loss_one = _view_log_ratio(plan, *one_agent)
    assert 1.9 * epsilon < loss_moved <= stated.under("replace-one").epsilon + 1e-12
    assert loss_one <= stated.under("add/remove").epsilon + 1e-12
    assert stated.under("replace-one").epsilon == 2 * epsilon
    assert stated.under("add/remove").epsilon == epsilon


# ------------------------------------------------------ certificates
@pytest.mark.parametrize(
    "mechanism", [FedCPQQ(n_agents=8), FedCP2QQ(3.0, n_agents=8), FedCP2QQ(0.5, n_agents=8)]
)
@pytest.mark.parametrize("n_samples", [400, 1203])
def test_certificate_equals_the_calibration_for_even_splits(mechanism, n_samples):
    certificate = mechanism.coverage_certificate(n_samples, ALPHA)
    groups = np.arange(n_samples) % 8
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UninformativeCalibrationWarning)
        calibration = clone(mechanism).calibrate(
            np.random.default_rng(0).uniform(size=n_samples), ALPHA, groups=groups, random_state=0
        )
    assert certificate.feasible == calibration.feasible
    assert certificate.lower_bound == calibration.coverage_lower_bound
    sizes = np.bincount(groups).tolist()
    assert mechanism.coverage_certificate(n_samples, ALPHA, agent_sizes=sizes) == certificate


@pytest.mark.parametrize(
    "mechanism",
    [FedCPQQ(), FedCP2QQ(0.5), FedCP2QQ(1.0), FedCP2QQ(2.0), FedCP2QQ(1.0, n_bins=100)],
)
@pytest.mark.parametrize("alpha, n_agents", [(0.05, 10), (0.1, 10), (0.1, 3)])
def test_min_informative_samples_is_the_feasibility_boundary(mechanism, alpha, n_agents):
    n = mechanism.min_informative_samples(alpha, n_agents=n_agents)
    assert mechanism.coverage_certificate(n * n_agents, alpha, agent_sizes=[n] * n_agents).feasible
    if n > 1:
        below = [n - 1] * n_agents
        assert not mechanism.coverage_certificate(
            (n - 1) * n_agents, alpha, agent_sizes=below
        ).feasible
    assert clone(mechanism).set_params(n_agents=n_agents).min_informative_samples(alpha) == n


def test_min_informative_samples_needs_the_number_of_agents():
    with pytest.raises(ValueError, match="number of agents"):
        FedCPQQ().min_informative_samples(ALPHA)
    with pytest.raises(TypeError, match="n_agents"):
        FedCPQQ().min_informative_samples(ALPHA, n_agents=2.0)


def test_certificate_needs_agent_sizes():
    with pytest.raises(ValueError, match="agent_sizes"):
        FedCPQQ().coverage_certificate(1000, ALPHA)
    with pytest.raises(ValueError, match="sum to 90"):
        FedCPQQ().coverage_certificate(100, ALPHA, agent_sizes=[45, 45])
    with pytest.raises(TypeError, match=r"agent_sizes\[1\]"):
        FedCPQQ().coverage_certificate(100, ALPHA, agent_sizes=[50, 50.0])


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
    nan_groups = (np.arange(40) % 2).astype(float)
    nan_groups[3] = np.nan
    with pytest.raises(ValueError, match="finite agent ids"):
        mechanism.calibrate(scores, ALPHA, groups=nan_groups)
    with pytest.raises(ValueError, match="not booleans"):
        mechanism.calibrate(scores, ALPHA, groups=np.arange(40) % 2 == 0)


@pytest.mark.parametrize(
    "params",
    [
        {"epsilon": 0.0},
        {"epsilon": np.inf},
        {"epsilon": float("nan")},
        {"epsilon": "1"},
        {"epsilon": True},
        {"n_bins": 1},
        {"n_bins": 10**7},
        {"n_bins": 10.0},
        {"n_bins": None},
        {"n_bins": "best"},
        {"gamma": 1.5},
        {"gamma": "best"},
        {"scaling": "monotone"},
        {"n_agents": 1},
        {"n_agents": 2.0},
    ],
)
def test_parameter_errors(params):
    name = next(iter(params))
    mechanism = FedCP2QQ(1.0).set_params(**params)
    expected = f"The '{name}' parameter of FedCP2QQ must be"
    with pytest.raises(InvalidParameterError, match=expected):
        mechanism.privacy_guarantee()
    with pytest.raises(InvalidParameterError, match=expected):
        mechanism.calibrate(np.linspace(0, 1, 40), ALPHA, groups=np.arange(40) % 2)


def test_epsilon_is_required():
    with pytest.raises(TypeError, match="epsilon"):
        FedCP2QQ()  # no default privacy budget
    assert "epsilon=1.0" in repr(FedCP2QQ(1.0))


# ------------------------------------------------------- estimators
def fedcp_conditional_coverage_floor(plan, false_failure):
    """v with P(F(threshold) < v) <= false_failure, F(threshold) = V the quantile of
    quantiles of uniforms: P(V <= v) = P(Bin(m, G_l(v)) >= k) (equal sizes)."""
    m, n, rank, k = plan.n_agents, plan.sample_sizes[0], plan.local_ranks[0], plan.server_rank
    low, high = 0.0, 1.0
    for _ in range(60):
        v = 0.5 * (low + high)
        below = binom.sf(k - 1, m, betainc(rank, n - rank + 1, v))
        low, high = (v, high) if below <= false_failure else (low, v)
    return low


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
    covered = int(sets[np.arange(2000), y[4000:]].sum())
    assert estimator.calibration_.details["n_agents"] == 10
    # The estimator's default replace-one adjacency: a record may move between agents.
    expected_spend = [] if isinstance(mechanism, FedCPQQ) else [(6.0, 0.0)]
    spent = [entry for entry in accountant.spent_budget if entry != (np.inf, 0.0)]
    assert spent == expected_spend
    if isinstance(mechanism, FedCPQQ):
        # Given the calibration, test coverage is F(threshold) >= the floor (prob. 1 - f/2);
        # the covered count is then at least Binomial(2000, floor)'s lower limit.
        floor = fedcp_conditional_coverage_floor(
            mechanism.plan([200] * 10, ALPHA), FALSE_FAILURE / 2
        )
        assert covered >= binomial_lower_limit(2000, floor, FALSE_FAILURE / 2)
    with pytest.raises(ValueError, match="needs groups"):
        clone(estimator).fit_calibrate(X[2000:4000], y[2000:4000])


def test_classifier_grid_parameters_reach_the_mechanism():
    estimator = PrivateConformalClassifier(LogisticRegression(), mechanism=FedCP2QQ(1.0))
    estimator.set_params(mechanism__epsilon=4.0, mechanism__n_bins=50)
    assert clone(estimator).mechanism.get_params() == {
        "epsilon": 4.0,
        "n_bins": 50,
        "gamma": "auto",
        "scaling": "tight",
        "n_agents": None,
    }


# -------------------------------------------- Sec. 5.1 of Humbert et al. (2023)
def _binned_quantile_regression(x_train, y_train, levels, n_bins=20):
    """Empirical conditional quantiles of y on 20 bins of x in [1, 5] (a simple CQR base)."""
    edges = np.linspace(1, 5, n_bins + 1)

    def bin_of(x):
        return np.clip(np.searchsorted(edges, x, side="right") - 1, 0, n_bins - 1)

    index = bin_of(x_train)
    table = np.array([np.quantile(y_train[index == b], levels) for b in range(n_bins)])
    return lambda x: table[bin_of(x)].T


def pooled_rank_distribution(m, n, rank, k):
    """P(R <= r), r = 0..mn, for R the rank of the quantile of quantiles among all mn scores.

    R <= r iff at least k agents hold ``rank`` or more of the r smallest pooled scores;
    for exchangeable continuous scores their counts are multivariate hypergeometric:
    ``ways[r, a]`` (drawn r, a agents at or above the rank) is built agent by agent with
    weights C(n, c) and divided by C(mn, r) (at most about 1e300 here: finite floats).
    """
    total = m * n
    ways = np.zeros((total + 1, m + 1))
    ways[0, 0] = 1.0
    for _ in range(m):
        step = np.zeros_like(ways)
        for c in range(n + 1):
            shifted = ways[: total + 1 - c] * math.comb(n, c)
            if c >= rank:
                step[c:, 1:] += shifted[:, :-1]
            else:
                step[c:] += shifted
        ways = step
    normaliser = np.array([float(math.comb(total, r)) for r in range(total + 1)])
    return ways[:, k:].sum(axis=1) / normaliser


def test_reproduces_section_5_1_fedcp_qq_is_split_conformal_in_distribution():
    """m = 50 agents x n = 20, alpha = 0.1, Poisson data with outliers, CQR scores.

    Their Fig. 3: FedCP-QQ's intervals are almost those of centralised split conformal.
    Exactly: FedCP-QQ's threshold is the R-th smallest pooled score, with R's
    distribution computed exactly for exchangeable scores; every seed's R lies within
    that distribution's two-sided 1e-7 range (Bonferroni over the seeds), while split
    conformal takes rank ceil(0.9 * 1001) = 901.
    """
    plan = make_plan((20,) * 50, ALPHA)
    cdf = pooled_rank_distribution(50, 20, plan.local_ranks[0], plan.server_rank)
    seeds = 20
    tail = FALSE_FAILURE / (2 * seeds)
    low = int(np.searchsorted(cdf, tail, side="right"))  # P(R < low) <= tail
    high = int(np.searchsorted(cdf, 1 - tail, side="left"))  # P(R > high) <= tail
    assert low <= 901 <= high
    for seed in range(seeds):
        X, y = make_poisson_outliers(2000, random_state=seed)
        x = X[:, 0]
        predict = _binned_quantile_regression(x[:1000], y[:1000], [ALPHA / 2, 1 - ALPHA / 2])
        low_q, high_q = predict(x[1000:2000])
        scores = np.maximum(low_q - y[1000:2000], y[1000:2000] - high_q)  # CQR
        # A monotone map to [0, 1] keeps order statistics (the mechanisms are non-private).
        a, b = scores.min(), scores.max()
        unit = (scores - a) / (b - a)
        groups = np.repeat(np.arange(50), 20)
        threshold = FedCPQQ().calibrate(unit, ALPHA, groups=groups).threshold
        rank = int(np.sum(unit <= threshold))
        assert low <= rank <= high
        central = SplitConformal().calibrate(unit, ALPHA).threshold
        assert int(np.sum(unit <= central)) == 901
