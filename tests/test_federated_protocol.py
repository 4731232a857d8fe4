"""The one-round protocol of privconf_sklearn.federated: messages, privacy, validation."""

import itertools
import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from privconf_sklearn._random import check_noise_source
from privconf_sklearn.federated import (
    FederatedPlan,
    agent_message,
    agent_message_log_probabilities,
    aggregate,
    make_plan,
)
from privconf_sklearn.mechanisms import FedCP2QQ, FedCPQQ
from privconf_sklearn.mechanisms._binning import bin_counts
from privconf_sklearn.mechanisms.expon_q import quantile_log_probabilities

from ._stats import binomial_lower_limit, binomial_upper_limit

ROOT = Path(__file__).resolve().parents[1]
ALPHA = 0.1


def split(scores, sizes):
    return np.split(scores, np.cumsum(sizes)[:-1])


def json_round_trip(value):
    return json.loads(json.dumps(value))


# -------------------------------------------------------- round trips
@pytest.mark.parametrize(
    "sizes, epsilon, n_bins",
    [
        ((100,) * 10, None, 100),
        ((100,) * 10, 3.0, 100),
        ((40, 60, 80, 100, 150, 200, 300, 50, 70, 90), 4.0, 50),
    ],
)
def test_json_protocol_reproduces_the_mechanism(sizes, epsilon, n_bins):
    """Plan and messages survive JSON; the server's release equals the mechanism's."""
    rng = np.random.default_rng(0)
    scores = rng.uniform(size=sum(sizes))
    groups = np.repeat(np.arange(len(sizes)), sizes)
    mechanism = FedCPQQ() if epsilon is None else FedCP2QQ(epsilon, n_bins=n_bins)
    expected = mechanism.calibrate(scores, ALPHA, groups=groups, random_state=7)
    assert expected.feasible

    plan = make_plan(sizes, ALPHA, epsilon=epsilon, n_bins=n_bins)
    wire_plan = json_round_trip(plan.to_dict())
    assert FederatedPlan.from_dict(wire_plan) == plan
    noise = check_noise_source(7)  # the mechanism hands one noise source to all agents
    messages = [
        json_round_trip(agent_message(part, wire_plan, agent, random_state=noise))
        for agent, part in enumerate(split(scores, sizes))
    ]
    assert aggregate(wire_plan, messages[::-1]) == expected


def test_agents_without_a_finite_rank_send_the_top_without_reading_data():
    sizes = (3, 200, 250)  # l = ceil(0.9 * 4) = 4 > 3: the first agent's quantile is +inf
    plan = make_plan(sizes, ALPHA)
    assert plan.sends_top(0) and not plan.sends_top(1)
    message = agent_message(np.zeros(3), plan, 0)
    assert message["value"] == 1.0 and message["read_data"] is False


# ---------------------------------------------------- exact privacy
PRIVACY_PLANS = [
    # (agent sizes, alpha, epsilon, n_bins); levels q = 0.92, 0.75, and (0.6, 1/2, 0.58).
    ((12, 12), 0.3, 10.0, 6),
    ((12, 12, 12), 0.3, 20.0, 6),
    ((10, 14, 12), 0.8, 3.0, 5),
]


def all_local_datasets(size, n_bins):
    """Every data set of ``size`` discretised scores: multisets of bin edges."""
    edges = np.arange(1, n_bins + 1) / n_bins
    for bins in itertools.combinations_with_replacement(range(n_bins), size):
        yield edges[list(bins)]


def max_log_ratio(log_probabilities_of, size, n_bins):
    """Largest |log P(m | S) - log P(m | S')| over replace-one neighbours S, S'."""
    rows, log_p = {}, []
    for scores in all_local_datasets(size, n_bins):
        rows[tuple(bin_counts(scores, n_bins))] = len(log_p)
        log_p.append(log_probabilities_of(scores))
    pairs = []
    for counts, row in rows.items():
        for source, target in itertools.permutations(range(n_bins), 2):
            if counts[source]:
                neighbour = list(counts)
                neighbour[source] -= 1
                neighbour[target] += 1
                pairs.append((row, rows[tuple(neighbour)]))
    log_p, pairs = np.array(log_p), np.array(pairs)
    return float(np.max(np.abs(log_p[pairs[:, 0]] - log_p[pairs[:, 1]])))


@pytest.mark.parametrize("sizes, alpha, epsilon, n_bins", PRIVACY_PLANS)
def test_each_agent_message_is_epsilon_local_dp(sizes, alpha, epsilon, n_bins):
    """Full output distribution on all neighbouring local data sets: max log ratio <= eps."""
    plan = make_plan(sizes, alpha, epsilon=epsilon, n_bins=n_bins)
    assert plan.feasible
    checked = set()
    for agent, size in enumerate(sizes):
        if (size, plan.local_levels[agent]) in checked:
            continue  # same size and level: the same mechanism
        checked.add((size, plan.local_levels[agent]))

        def log_probabilities(scores, agent=agent):
            return agent_message_log_probabilities(scores, plan, agent)

        worst = max_log_ratio(log_probabilities, size, n_bins)
        assert worst <= epsilon * (1 + 1e-12)
        assert worst >= 0.3 * epsilon  # the bound is not vacuous


def test_privacy_check_catches_the_unscaled_mechanism():
    """Without the sensitivity scaling (paper 000's printed Algorithm 2) eps is exceeded."""
    plan = make_plan((12, 12), 0.3, epsilon=10.0, n_bins=6)
    q = plan.local_levels[0]
    sensitivity = max(1 / q, 1 / (1 - q))

    def unscaled(scores):
        return quantile_log_probabilities(bin_counts(scores, 6), q, 10.0 * sensitivity)

    assert max_log_ratio(unscaled, 12, 6) > 10.0 * 2


def test_agent_message_samples_its_exact_distribution():
    plan = make_plan((12, 12), 0.3, epsilon=10.0, n_bins=6)
    scores = np.random.default_rng(0).uniform(size=12)
    probabilities = np.exp(agent_message_log_probabilities(scores, plan, 0))
    noise = check_noise_source(11)
    draws = 4000
    bins = np.array(
        [agent_message(scores, plan, 0, random_state=noise)["bin"] for _ in range(draws)]
    )
    for edge in range(1, 7):
        count = int((bins == edge).sum())
        p = probabilities[edge - 1]
        assert binomial_lower_limit(draws, p) <= count <= binomial_upper_limit(draws, p)


# ------------------------------------------------------- validation
@pytest.fixture
def private_round():
    sizes = (100, 100, 100)
    plan = make_plan(sizes, ALPHA, epsilon=8.0, n_bins=20)
    rng = np.random.default_rng(0)
    parts = split(rng.uniform(size=300), sizes)
    messages = [agent_message(part, plan, j, random_state=j) for j, part in enumerate(parts)]
    return plan, parts, messages


def test_aggregate_rejects_messages_that_do_not_match_the_plan(private_round):
    plan, _, messages = private_round
    with pytest.raises(ValueError, match="Expected 3 messages"):
        aggregate(plan, messages[:2])
    with pytest.raises(ValueError, match="more than one message"):
        aggregate(plan, [messages[0], messages[0], messages[1]])
    bad = dict(messages[1], value=0.123)
    with pytest.raises(ValueError, match="edge b / 20"):
        aggregate(plan, [messages[0], bad, messages[2]])
    bad = dict(messages[1], n_samples=99)
    with pytest.raises(ValueError, match="reports 99 scores"):
        aggregate(plan, [messages[0], bad, messages[2]])
    bad = dict(messages[1], protocol="FedCP-QQ")
    with pytest.raises(ValueError, match="not a FedCP2-QQ v1 message"):
        aggregate(plan, [messages[0], bad, messages[2]])
    bad = dict(messages[1], agent=7)
    with pytest.raises(ValueError, match="invalid agent index"):
        aggregate(plan, [messages[0], bad, messages[2]])


def test_agent_message_rejects_bad_input(private_round):
    plan, parts, _ = private_round
    with pytest.raises(ValueError, match="holds 99 scores but the plan was made for 100"):
        agent_message(parts[0][:99], plan, 0)
    with pytest.raises(ValueError, match=r"public range \[0, 1\]"):
        agent_message(parts[0] + 1.0, plan, 0)
    with pytest.raises(ValueError, match=r"agent must be in 0\.\.2"):
        agent_message(parts[0], plan, 3)
    with pytest.raises(ValueError, match="FedCP-QQ"):
        agent_message_log_probabilities(parts[0], make_plan((100,) * 3, ALPHA), 0)
    wire = plan.to_dict()
    tampered = dict(wire, local_levels=[0.999] * 3)  # a level the public inputs do not give
    with pytest.raises(ValueError, match="does not follow from its public inputs"):
        agent_message(parts[0], tampered, 0)
    with pytest.raises(ValueError, match="allows at most 1"):
        agent_message(parts[0], wire, 0, max_epsilon=1.0)
    with pytest.raises(ValueError, match="asks for no privacy"):
        agent_message(parts[0], make_plan((100,) * 3, ALPHA), 0, max_epsilon=8.0)
    assert agent_message(parts[0], wire, 0, max_epsilon=8.0, random_state=0)["read_data"]
    with pytest.raises(ValueError, match="version"):
        agent_message(parts[0], dict(wire, version=99), 0)
    with pytest.raises(ValueError, match="missing"):
        FederatedPlan.from_dict({k: v for k, v in wire.items() if k != "n_bins"})


def test_infeasible_plans_take_no_messages():
    plan = make_plan((10,) * 100, ALPHA, epsilon=1.0)
    assert not plan.feasible
    with pytest.raises(ValueError, match="infeasible"):
        agent_message(np.zeros(10), plan, 0)
    calibration = aggregate(plan, [])
    assert calibration.threshold == 1.0 and not calibration.feasible
    assert calibration.reason == plan.reason


def test_make_plan_rejects_bad_public_input():
    with pytest.raises(ValueError, match="at least two agents"):
        make_plan([100], ALPHA)
    with pytest.raises(ValueError, match="positive integers"):
        make_plan([100, 0], ALPHA)
    with pytest.raises(ValueError, match="alpha"):
        make_plan([100, 100], 1.5)
    with pytest.raises(ValueError, match="epsilon"):
        make_plan([100, 100], ALPHA, epsilon=-1.0)


# ----------------------------------------------------------- example
def test_example_runs_three_agent_processes_and_a_server():
    result = subprocess.run(
        [sys.executable, str(ROOT / "examples" / "federated_protocol.py")],
        capture_output=True,
        text=True,
        timeout=180,
        check=False,
    )
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    assert sum(line.startswith("server: agent ") for line in lines) == 3
    assert any("privacy local epsilon = 2 per agent" in line for line in lines)
    coverage = float(next(line for line in lines if line.startswith("test:")).split()[2][:-1])
    assert coverage >= 0.85
