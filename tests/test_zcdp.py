"""zCDP / Gaussian DP -> (epsilon, delta) conversions, checked against direct numerics.

The exact profile of a mu-GDP mechanism is the hockey-stick divergence between
N(mu, 1) and N(0, 1); it is integrated here numerically (scipy.integrate.quad) and
compared with the closed form. The Canonne-Kamath-Steinke bound is compared with a
brute-force minimisation over the Renyi order, and the three conversions are ordered.
"""

import math

import numpy as np
import pytest
from scipy import integrate, stats

from privconf_sklearn.privacy import (
    GaussianQueryComposer,
    bun_steinke_epsilon,
    gaussian_delta,
    gaussian_epsilon,
    gaussian_mu,
    zcdp_delta,
    zcdp_epsilon,
    zcdp_log_delta,
)

MUS = [0.05, 0.3, 1.0, 2.0, 5.0]
EPSILONS = [0.0, 0.1, 1.0, 3.0, 8.0]
DELTAS = [1e-3, 1e-5, 1e-8, 1e-12]


def hockey_stick(mu: float, epsilon: float) -> float:
    """sup_S P(S) - e^eps Q(S) for P = N(mu, 1), Q = N(0, 1), by quadrature.

    The supremum is attained on S = {x : p(x) / q(x) > e^eps} = (x*, inf) with
    x* = epsilon / mu + mu / 2 (the log-likelihood ratio is mu x - mu^2 / 2).
    """
    start = epsilon / mu + mu / 2.0
    p, q = stats.norm(mu, 1.0), stats.norm(0.0, 1.0)
    # Integrate the difference of densities over (x*, x* + 40), far beyond any mass.
    value, error = integrate.quad(
        lambda x: p.pdf(x) - math.exp(epsilon) * q.pdf(x),
        start,
        start + 40.0,
        epsabs=1e-16,
        epsrel=1e-10,
        limit=200,
    )
    assert error < 1e-12 + 1e-8 * abs(value)
    return value


@pytest.mark.parametrize("mu", MUS)
@pytest.mark.parametrize("epsilon", EPSILONS)
def test_gaussian_delta_matches_numerical_hockey_stick(mu, epsilon):
    exact = gaussian_delta(epsilon, mu)
    numerical = hockey_stick(mu, epsilon)
    assert exact == pytest.approx(numerical, rel=1e-7, abs=1e-15)


@pytest.mark.parametrize("mu", MUS)
@pytest.mark.parametrize("delta", DELTAS)
def test_gaussian_epsilon_is_the_smallest_feasible(mu, delta):
    epsilon = gaussian_epsilon(mu, delta)
    assert epsilon >= 0.0
    assert hockey_stick(mu, epsilon) <= delta * (1 + 1e-7)
    if epsilon > 0.0:
        # Tight: a slightly smaller epsilon is no longer enough.
        assert hockey_stick(mu, epsilon * (1 - 1e-6)) > delta
    else:
        assert gaussian_delta(0.0, mu) <= delta


@pytest.mark.parametrize("epsilon", [0.1, 1.0, 4.0])
@pytest.mark.parametrize("delta", DELTAS)
def test_gaussian_mu_is_the_largest_feasible(epsilon, delta):
    mu = gaussian_mu(epsilon, delta)
    assert mu > 0.0
    assert gaussian_delta(epsilon, mu) <= delta
    assert hockey_stick(mu, epsilon) <= delta * (1 + 1e-7)
    assert hockey_stick(mu * (1 + 1e-6), epsilon) > delta


@pytest.mark.parametrize("rho", [0.01, 0.125, 0.5, 2.0, 10.0])
@pytest.mark.parametrize("epsilon", [0.5, 1.0, 5.0, 20.0])
def test_cks_delta_matches_brute_force_minimisation(rho, epsilon):
    orders = 1.0 + np.geomspace(1e-6, 1e4, 200001)
    log_bound = (
        (orders - 1.0) * (orders * rho - epsilon)
        + orders * np.log1p(-1.0 / orders)
        - np.log(orders - 1.0)
    )
    brute = float(log_bound.min())
    ours = zcdp_log_delta(rho, epsilon)
    assert zcdp_delta(rho, epsilon) == math.exp(min(0.0, ours))
    # Ours is the exact minimum: never above the grid's, and within its resolution.
    assert brute - 1e-4 * max(1.0, abs(brute)) <= ours <= brute + 1e-12 * max(1.0, abs(brute))


@pytest.mark.parametrize("mu", MUS)
@pytest.mark.parametrize("epsilon", [0.5, 1.0, 3.0])
def test_generic_zcdp_bound_dominates_the_exact_gaussian_profile(mu, epsilon):
    """A mu-GDP mechanism is (mu^2/2)-zCDP, so the generic bound must be valid for it."""
    assert zcdp_delta(mu * mu / 2.0, epsilon) >= gaussian_delta(epsilon, mu)


@pytest.mark.parametrize("rho", [0.005, 0.05, 0.5, 2.0, 8.0])
@pytest.mark.parametrize("delta", DELTAS)
def test_conversions_are_ordered_and_cks_epsilon_is_feasible(rho, delta):
    exact = gaussian_epsilon(math.sqrt(2.0 * rho), delta)
    cks = zcdp_epsilon(rho, delta)
    bun_steinke = bun_steinke_epsilon(rho, delta)
    assert exact <= cks <= bun_steinke
    assert zcdp_delta(rho, cks) <= delta
    assert zcdp_delta(rho, cks * (1 - 1e-6)) > delta


def test_reference_values_rho_one_half():
    """rho = 0.5 (the "epsilon = 1" of Romanus and Molinari 2025) at delta = 1e-5."""
    assert bun_steinke_epsilon(0.5, 1e-5) == pytest.approx(0.5 + 2 * math.sqrt(0.5 * math.log(1e5)))
    assert bun_steinke_epsilon(0.5, 1e-5) == pytest.approx(5.2985, abs=1e-4)
    assert zcdp_epsilon(0.5, 1e-5) == pytest.approx(4.7284, abs=1e-4)
    assert gaussian_epsilon(1.0, 1e-5) == pytest.approx(4.3772, abs=1e-4)


def test_zero_privacy_loss_edge_cases():
    assert gaussian_delta(1.0, 0.0) == 0.0
    assert zcdp_delta(0.0, 1.0) == 0.0
    assert zcdp_epsilon(0.0, 1e-5) == 0.0
    # A very weak mechanism already meets a large delta at epsilon = 0.
    assert gaussian_epsilon(0.01, 0.5) == 0.0


@pytest.mark.parametrize("rho", [0.05, 0.5, 3.0])
@pytest.mark.parametrize("n_queries", [1, 7])
def test_add_remove_zcdp_restated_under_replace_one_is_exact_group_privacy(rho, n_queries):
    """Queries of values in [-1, 1]: adding or removing a record moves each by at most 1
    (the composer's add/remove sensitivity), replacing one by up to 2. The same noise is
    then a composer of sensitivity 2 under replace-one, whose rho is exactly 4 rho (group
    privacy for two steps, Bun and Steinke 2016, Proposition 1.9, is tight here): the
    restated guarantee must be that rho, and its (epsilon, delta) must hold for it.
    """
    add_remove = GaussianQueryComposer(n_queries, rho=rho, adjacency="add/remove")
    restated = add_remove.privacy_guarantee().under("replace-one")
    actual_mu = math.sqrt(n_queries) * 2.0 / add_remove.noise_sd  # sensitivity 2, same noise
    actual_rho = actual_mu**2 / 2.0
    assert (restated.notion, restated.adjacency) == ("zcdp", "replace-one")
    assert restated.rho == pytest.approx(actual_rho, rel=1e-12)
    assert restated.delta == add_remove.delta
    assert gaussian_delta(restated.epsilon, actual_mu) <= restated.delta
    assert restated.epsilon == pytest.approx(zcdp_epsilon(actual_rho, restated.delta), rel=1e-12)
