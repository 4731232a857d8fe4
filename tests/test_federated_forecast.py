"""The data-free forecast of federated mechanisms: per agent and for the server's release."""

import warnings

import numpy as np
import pytest
from scipy.stats import binom

from privconf_sklearn.mechanisms import FedCP2QQ, FedCPQQ, UninformativeCalibrationWarning
from privconf_sklearn.mechanisms._base import MONTE_CARLO_RUNS


def test_forecast_needs_no_groups_and_reports_every_agent():
    """It crashed with "These scores carry no agent ids" before."""
    forecast = FedCP2QQ(epsilon=1.0, n_agents=5).forecast(1000, 0.1)
    assert forecast.certificate.feasible and forecast.n_samples == 1000
    agents = forecast.agent_informative_probabilities
    assert len(agents) == 5 and len(set(agents)) == 1  # equal agents, equal chances
    assert 0.0 < agents[0] <= 1.0
    assert forecast.exact is False


def test_unequal_agents_follow_their_plan():
    mechanism = FedCP2QQ(epsilon=1.0)
    sizes = [100, 200, 300, 400]
    forecast = mechanism.forecast(1000, 0.1, agent_sizes=sizes)
    plan = mechanism.plan(sizes, 0.1)
    for agent, probability in enumerate(forecast.agent_informative_probabilities):
        assert (probability == 0.0) == plan.sends_top(agent)
        assert 0.0 <= probability <= 1.0


def test_non_private_agents_are_informative_unless_told_to_send_the_top():
    forecast = FedCPQQ().forecast(600, 0.1, agent_sizes=[100, 200, 300])
    assert set(forecast.agent_informative_probabilities) <= {0.0, 1.0}
    assert forecast.informative_probability == 1.0


def test_an_unreachable_level_forecasts_trivial_releases_everywhere():
    forecast = FedCP2QQ(epsilon=0.01, n_agents=4).forecast(200, 0.1)
    assert not forecast.certificate.feasible
    assert forecast.informative_probability == 0.0
    assert forecast.agent_informative_probabilities == (0.0,) * 4


def test_forecast_agrees_with_releases_on_the_same_scores():
    """The server's informative rate over fresh releases (another seed) on the forecast's
    idealised scores matches the forecast's Monte Carlo, within exact binomial tails
    (two independent samples of MONTE_CARLO_RUNS; false failure below 1e-6)."""
    mechanism = FedCP2QQ(epsilon=1.0)
    sizes = [60, 60, 60, 60, 60]
    forecast = mechanism.forecast(300, 0.1, agent_sizes=sizes)
    scores = np.concatenate([(np.arange(s) + 0.5) / s for s in sizes])
    groups = np.repeat(np.arange(len(sizes)), sizes)
    rng = np.random.default_rng(12345)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UninformativeCalibrationWarning)  # counted here
        informative = sum(
            mechanism.calibrate(scores, 0.1, groups=groups, random_state=rng).informative
            for _ in range(MONTE_CARLO_RUNS)
        )
    p = forecast.informative_probability
    low, high = binom.ppf(1e-7, MONTE_CARLO_RUNS, p), binom.isf(1e-7, MONTE_CARLO_RUNS, p)
    # The forecast's own rate is itself a binomial estimate: widen by its tail too.
    slack = binom.isf(1e-7, MONTE_CARLO_RUNS, 0.5) - MONTE_CARLO_RUNS / 2
    assert low - slack <= informative <= high + slack


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"agent_sizes": [1, 2]}, "sum to 3"),
        ({"agent_sizes": [500, 499, True]}, "agent_sizes"),
        ({"spread": 0.0}, "spread"),
    ],
)
def test_bad_forecast_inputs_are_named(kwargs, message):
    with pytest.raises(ValueError, match=message):
        FedCP2QQ(epsilon=1.0).forecast(1000, 0.1, **kwargs)


def test_without_sizes_or_n_agents_the_error_says_what_to_pass():
    with pytest.raises(ValueError, match="agent_sizes"):
        FedCP2QQ(epsilon=1.0).forecast(1000, 0.1)
