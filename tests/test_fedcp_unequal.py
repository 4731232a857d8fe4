"""Federated plans for unequal agent sizes: the agents' ranks are searched too (issue 12).

The certified excess over 1 - alpha is never worse than the equal-size plan's at the
smallest agent's size (for FedCP-QQ and FedCP2-QQ); when the rank search cannot match
it, every agent uses a uniformly random subset of the smallest size.
"""

import numpy as np
import pytest

from privconf_sklearn.federated import make_plan
from privconf_sklearn.mechanisms import FedCP2QQ, FedCPQQ
from privconf_sklearn.mechanisms.fedcp import MAX_SAMPLE_SIZE

from ._hang import no_hang
from ._stats import binomial_lower_limit, binomial_upper_limit

ALPHA = 0.1


def excess(plan):
    return plan.coverage_lower_bound - (1 - ALPHA)


@pytest.mark.parametrize(
    "equal, unequal", [((200,) * 4, (200, 200, 200, 199)), ((100,) * 10, (100,) * 9 + (99,))]
)
def test_issue_examples(equal, unequal):
    """Before: 4 x 200 certified 0.90012 but (200, 200, 200, 199) 0.90735; 10 x 100
    certified 0.90018 but one agent of 99 gave 0.9067."""
    plan = make_plan(unequal, ALPHA)
    smallest = make_plan((min(unequal),) * len(unequal), ALPHA)
    assert plan.feasible and plan.sample_sizes == unequal  # no data discarded
    assert excess(plan) <= excess(smallest)
    assert excess(plan) <= excess(make_plan(equal, ALPHA))
    assert plan.coverage_lower_bound < 0.9005


@pytest.mark.slow
@pytest.mark.parametrize("epsilon", [None, 2.0])
def test_never_worse_than_the_equal_plan_at_the_smallest_size(epsilon):
    """Property over random size vectors (fixed seed): feasible whenever the equal-size
    plan at the smallest size is, with a certified excess no larger."""
    rng = np.random.default_rng(1)
    for _ in range(12):
        m = int(rng.integers(2, 9))
        sizes = tuple(int(x) for x in rng.integers(20, 400, m))
        plan = make_plan(sizes, ALPHA, epsilon=epsilon)
        smallest = make_plan((min(sizes),) * m, ALPHA, epsilon=epsilon)
        if smallest.feasible:
            assert plan.feasible
            assert excess(plan) <= excess(smallest)
        if plan.feasible:
            assert plan.coverage_lower_bound >= 1 - ALPHA


def test_subsampling_when_the_search_cannot_match_the_smallest_agent():
    """With an agent of 3 scores, M(3, 3) at m = 3 agents of 3 is exactly 9/10: only the
    equal-size plan (every agent using 3 random scores) certifies no excess at all."""
    plan = make_plan((3, 200, 250), ALPHA)
    assert plan.sample_sizes == (3, 3, 3)
    assert (plan.local_ranks, plan.server_rank) == ((3, 3, 3), 3)
    assert plan.coverage_lower_bound == 0.9


def test_subsets_are_uniformly_random():
    """Monte Carlo through the mechanism with each agent's scores stored sorted: the
    coverage of a fresh uniform score is exactly 9/10 only if the subsets ignore the
    storage order (a prefix of sorted scores would cover far less)."""
    sizes = (3, 200, 250)
    groups = np.repeat(np.arange(3), sizes)
    rng = np.random.default_rng(5)
    trials, covered = 3000, 0
    for trial in range(trials):
        parts = [np.sort(rng.uniform(size=n)) for n in sizes]
        calibration = FedCPQQ().calibrate(
            np.concatenate(parts), ALPHA, groups=groups, random_state=trial
        )
        covered += rng.uniform() <= calibration.threshold
    assert binomial_lower_limit(trials, 0.9) <= covered <= binomial_upper_limit(trials, 0.9)


@pytest.mark.slow
def test_private_plans_certify_the_ranks_they_announce():
    """Unequal FedCP2-QQ plans: the agents that release serve the server rank, the others
    count as +inf in the table, and the table coverage is the certified value at exactly
    the announced ranks (recomputed by the exact quadrature, which has no public route)."""
    from privconf_sklearn.mechanisms.fedcp._coverage import unequal_coverage_column

    rng = np.random.default_rng(7)
    checked = 0
    for _ in range(10):
        m = int(rng.integers(2, 7))
        sizes = tuple(int(x) for x in rng.integers(15, 300, m))
        plan = make_plan(sizes, ALPHA, epsilon=1.0)
        if not plan.feasible or plan.sample_sizes != sizes:
            continue
        checked += 1
        assert sum(plan.releases) >= plan.server_rank
        for rank, n, releases in zip(plan.table_ranks, sizes, plan.releases, strict=True):
            assert releases == (rank <= n)
        column = unequal_coverage_column(sizes, plan.table_ranks)
        assert abs(plan.table_coverage - column[plan.server_rank - 1]) <= 1.5e-12
    assert checked >= 5


#: Fields a plan for capped sizes must share with the plan for the original sizes.
PLAN_FIELDS = {
    None: ("sample_sizes", "local_ranks", "server_rank", "coverage_lower_bound"),
    8.0: ("sample_sizes", "table_ranks", "rank_corrections", "local_levels", "server_rank",
          "n_bins", "gamma", "coverage_lower_bound"),
}  # fmt: skip


@pytest.mark.parametrize(
    "sizes, epsilon",
    [
        ((10**9,) * 50, None),  # took more than 300 s
        ((10**9, 10**9 - 1), None),  # 6 s
        ((2, 10**9), None),  # unequal: the search's cost grew with the largest size
        ((10**9,) * 50, 8.0),
        ((40, 10**6, 10**9), 8.0),
    ],
)
def test_agents_above_the_cap_use_a_random_subset_of_the_capped_size(sizes, epsilon):
    """Planning cost is bounded: an agent with more than MAX_SAMPLE_SIZE scores uses a
    uniformly random subset of that size, and the plan (ranks, corrections, certified
    bound) is exactly the plan for the capped sizes."""
    kwargs = {} if epsilon is None else {"epsilon": epsilon, "n_bins": 20}
    with no_hang():
        plan = make_plan(sizes, ALPHA, **kwargs)
    capped = tuple(min(n, MAX_SAMPLE_SIZE) for n in sizes)
    reference = make_plan(capped, ALPHA, **kwargs)
    assert plan.feasible and plan.agent_sizes == sizes
    assert max(plan.sample_sizes) <= MAX_SAMPLE_SIZE
    for name in PLAN_FIELDS[epsilon]:
        assert getattr(plan, name) == getattr(reference, name), name
    assert plan.coverage_lower_bound >= 1 - ALPHA


@pytest.mark.parametrize("mechanism", [FedCPQQ(), FedCP2QQ(4.0, n_bins=50, gamma=0.1)])
def test_calibration_with_agents_above_the_cap_subsamples(mechanism):
    sizes = (MAX_SAMPLE_SIZE + 5000,) * 2
    scores = np.random.default_rng(0).uniform(size=sum(sizes))
    with no_hang():
        calibration = mechanism.calibrate(
            scores, ALPHA, groups=np.repeat([0, 1], sizes), random_state=0
        )
    assert calibration.details["sample_sizes"] == [MAX_SAMPLE_SIZE] * 2
    assert calibration.informative and calibration.coverage_lower_bound >= 1 - ALPHA


# ------------------------------------------------------------ bounded search
@pytest.fixture
def cut_search(monkeypatch):
    """Give the rank search no work budget: the plans a cut search falls back on."""
    from privconf_sklearn.mechanisms.fedcp import _choice, _plan, _search

    caches = [_plan.plan_fedcp_qq, _plan.plan_fedcp2_qq, _plan._fedcp_qq_table]
    caches += [_plan.min_informative_size, _choice.private_choice]
    for cache in caches:
        cache.cache_clear()
    monkeypatch.setattr(_search, "SEARCH_CELLS", 0.0)
    yield
    for cache in caches:
        cache.cache_clear()


@pytest.mark.parametrize("sizes", [(1, 2, 30, 40, 50, 60), (2, 3, 3, 50, 60, 70, 80)])
def test_a_cut_search_falls_back_on_thresholded_plans(cut_search, sizes):
    """With no search budget, the agents of at least s scores use s random scores and the
    others send the top without reading their data; the certificate is the equal table
    of the kept agents, which the exact rational column of every agent confirms (the
    top is never among the k smallest of the others' messages)."""
    from privconf_sklearn.mechanisms.fedcp._coverage import exact_coverage_column

    plan = make_plan(sizes, ALPHA)
    assert plan.feasible  # the smallest agent alone (1 or 2 scores) would be infeasible
    kept = [not plan.sends_top(j) for j in range(len(sizes))]
    threshold = min(s for s, keep in zip(plan.sample_sizes, kept, strict=True) if keep)
    assert kept == [n >= threshold for n in sizes]
    assert all(s == threshold for s, keep in zip(plan.sample_sizes, kept, strict=True) if keep)
    exact = exact_coverage_column(plan.sample_sizes, plan.local_ranks)[plan.server_rank - 1]
    assert plan.coverage_lower_bound == float(exact) >= 1 - ALPHA
    private = make_plan(sizes, ALPHA, epsilon=8.0, n_bins=20)
    assert private.feasible and private.coverage_lower_bound >= 1 - ALPHA
    assert not all(private.releases)


def test_thresholded_plans_cover_as_certified(cut_search):
    """Monte Carlo through the mechanism: agents below the threshold send the top, the
    others' random subsets are i.i.d.; coverage M exactly, for continuous scores."""
    sizes = (1, 2, 30, 40, 50, 60)
    plan = make_plan(sizes, ALPHA)
    groups = np.repeat(np.arange(len(sizes)), sizes)
    rng = np.random.default_rng(11)
    trials, covered = 3000, 0
    for trial in range(trials):
        calibration = FedCPQQ().calibrate(
            rng.uniform(size=sum(sizes)), ALPHA, groups=groups, random_state=trial
        )
        covered += rng.uniform() <= calibration.threshold
    bound = plan.coverage_lower_bound
    assert binomial_lower_limit(trials, bound) <= covered <= binomial_upper_limit(trials, bound)


@pytest.mark.slow
@pytest.mark.parametrize("epsilon", [None, 1.0])
def test_a_thousand_agents_of_very_unequal_sizes_get_a_certified_plan(epsilon):
    """1,000 agents of 1 to 20,000 scores (log-uniform): the search is cut at its budget
    and the thresholded plans keep the larger agents (agents below the threshold, down
    to 1 score, send the top); before, every agent subsampled to the smallest size (1
    score): infeasible."""
    rng = np.random.default_rng(1000)
    sizes = np.exp(rng.uniform(0.0, np.log(20_000.0), 1000)).astype(int).clip(1).tolist()
    with no_hang():
        plan = make_plan(sizes, ALPHA, epsilon=epsilon)
    assert plan.feasible and plan.coverage_lower_bound >= 1 - ALPHA
    assert max(plan.sample_sizes) > min(sizes) == 1
