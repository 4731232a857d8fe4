"""The FedCP-QQ coverage table M(l, k) of paper 004 Theorem 3.2, and its search.

Checked against an exact enumeration of Eq. (5), an independent exact-rational
computation (Bernstein-form polynomial products), the closed form of Proposition A.1,
Monte Carlo, and a brute-force argmin over the full table.
"""

import itertools
import math
from fractions import Fraction

import numpy as np
import pytest
from scipy.special import betainc, gammaln

from privconf_sklearn.mechanisms._fedcp_coverage import (
    TIE_TOLERANCE,
    qq_coverage,
    qq_orders,
    unequal_coverage_column,
    unequal_server_rank,
)
from privconf_sklearn.mechanisms._gauss_legendre import unit_gauss_legendre

from ._stats import binomial_lower_limit, binomial_upper_limit

EXACT = 1e-12


# --------------------------------------------------------------- references
def eq5_enumeration(sizes, ranks, k):
    """Paper 004 Eq. (5) / Appendix A.1, summed over every tuple (i_1, ..., i_m).

    ``1 - M = 1/(N+1) sum over tuples with at least k entries i_j >= l_j of
    prod C(n_j, i_j) / C(N, sum i)``, ``N = sum n_j``, in exact rationals.
    """
    total = sum(sizes)
    miss = Fraction(0)
    for tup in itertools.product(*[range(n + 1) for n in sizes]):
        if sum(i >= rank for i, rank in zip(tup, ranks, strict=True)) >= k:
            numerator = math.prod(math.comb(n, i) for n, i in zip(sizes, tup, strict=True))
            miss += Fraction(numerator, math.comb(total, sum(tup)))
    return 1 - miss / (total + 1)


def bernstein_exact_column(m, n, rank):
    """M(rank, k) for k = 1..m from the integral form, in exact rationals.

    ``G = sum_{i >= l} C(n, i) t^i (1 - t)^(n - i)``; products of such polynomials are
    convolutions of their scaled Bernstein coefficients, and
    ``integral t^r (1 - t)^(D - r) dt = r! (D - r)! / (D + 1)!``.
    """
    upper = [math.comb(n, i) if i >= rank else 0 for i in range(n + 1)]
    lower = [math.comb(n, i) if i < rank else 0 for i in range(n + 1)]

    def convolve(a, b):
        out = [0] * (len(a) + len(b) - 1)
        for i, x in enumerate(a):
            if x:
                for j, y in enumerate(b):
                    out[i + j] += x * y
        return out

    up_powers, low_powers = [[1]], [[1]]
    for _ in range(m):
        up_powers.append(convolve(up_powers[-1], upper))
        low_powers.append(convolve(low_powers[-1], lower))
    degree = m * n
    factorials = [math.factorial(i) for i in range(degree + 2)]
    # P(Bin(m, G) = j) integrated over t.
    mass = []
    for j in range(m + 1):
        coefficients = convolve(up_powers[j], low_powers[m - j])
        integral = sum(
            Fraction(c * factorials[r] * factorials[degree - r], factorials[degree + 1])
            for r, c in enumerate(coefficients)
            if c
        )
        mass.append(math.comb(m, j) * integral)
    return [sum(mass[:k]) for k in range(1, m + 1)]  # P(Bin < k)


# ------------------------------------------------------- Gauss-Legendre rule
@pytest.mark.parametrize("n_nodes", [1, 2, 3, 7, 40, 150, 151, 400, 1000, 5001])
def test_gauss_legendre_integrates_bernstein_polynomials_exactly(n_nodes):
    t, one_minus_t, weights = unit_gauss_legendre(n_nodes)
    assert np.all(np.diff(t) > 0) and np.all(weights > 0)
    assert abs(weights.sum() - 1.0) < 1e-14
    np.testing.assert_allclose(t + one_minus_t, 1.0, rtol=0, atol=4.5e-16)
    degree = 2 * n_nodes - 1
    for a in sorted({0, 1, degree // 3, degree // 2, degree - 1, degree}):
        exact = Fraction(math.factorial(a) * math.factorial(degree - a), math.factorial(degree + 1))
        if float(exact) < 1e-250:
            continue
        with np.errstate(divide="ignore"):
            terms = np.exp(a * np.log(t) + (degree - a) * np.log(one_minus_t))
        assert abs(float(Fraction(float(weights @ terms)) / exact - 1)) < 1e-12


def test_gauss_legendre_rejects_non_positive_size():
    with pytest.raises(ValueError, match="n_nodes"):
        unit_gauss_legendre(0)


# --------------------------------------------------------------- M(l, k)
@pytest.mark.parametrize("m, n", [(2, 3), (3, 3), (4, 2), (3, 4), (2, 6), (5, 2)])
def test_coverage_matches_enumeration_of_eq5(m, n):
    for rank, k in itertools.product(range(1, n + 1), range(1, m + 1)):
        exact = eq5_enumeration([n] * m, [rank] * m, k)
        assert abs(qq_coverage(rank, k, m, n) - float(exact)) < EXACT


@pytest.mark.parametrize("m, n", [(6, 8), (10, 5), (4, 15), (12, 3)])
def test_coverage_matches_exact_rational_integral(m, n):
    table = qq_coverage(np.arange(1, n + 1)[:, None], np.arange(1, m + 1)[None, :], m, n)
    for rank in range(1, n + 1):
        exact = np.array([float(x) for x in bernstein_exact_column(m, n, rank)])
        np.testing.assert_allclose(table[rank - 1], exact, rtol=0, atol=EXACT)


@pytest.mark.parametrize("m, n", [(100, 10), (10, 100), (50, 20), (1000, 100), (5, 200)])
def test_coverage_matches_proposition_a1(m, n):
    """M(n, k) = Gamma(k + 1/n) Gamma(m + 1) / (Gamma(k) Gamma(m + 1/n + 1))."""
    k = np.arange(1, m + 1)
    # The Gamma ratio telescopes to prod_{i=k}^{m} n i / (n i + 1): no lgamma cancellation.
    product = np.exp(np.cumsum(np.log1p(-1.0 / (n * np.arange(m, 0, -1) + 1.0)))[::-1])
    gamma_form = np.exp(gammaln(k + 1 / n) - gammaln(k) + gammaln(m + 1) - gammaln(m + 1 / n + 1))
    np.testing.assert_allclose(product, gamma_form, rtol=1e-11)
    np.testing.assert_allclose(qq_coverage(n, k, m, n), product, rtol=0, atol=EXACT)


def test_proposition_a1_exact_rational():
    m, n = 20, 7
    for k in (1, 5, 20):
        exact = math.prod(Fraction(n * i, n * i + 1) for i in range(k, m + 1))
        assert abs(qq_coverage(n, k, m, n) - float(exact)) < EXACT


@pytest.mark.parametrize("m, n", [(50, 20), (1000, 100), (10, 100)])
def test_windowed_sum_equals_full_quadrature(m, n):
    """Skipping the nodes where the integrand is within 1e-18 of 0 or 1 changes nothing."""
    _, one_minus_t, weights = unit_gauss_legendre(m * n // 2 + 1)
    rng = np.random.default_rng(0)
    ranks = np.r_[rng.integers(1, n + 1, 12), 1, n, n]
    servers = np.r_[rng.integers(1, m + 1, 12), m, 1, m]
    for rank, k in zip(ranks, servers, strict=True):
        one_minus_g = betainc(n - rank + 1, rank, one_minus_t)
        full = weights @ betainc(m - k + 1, k, one_minus_g)
        assert abs(qq_coverage(rank, k, m, n) - full) < 1e-14


def test_coverage_by_monte_carlo():
    """Coverage of the quantile of quantiles of uniform scores: Bin(T, M(l, k))."""
    m, n, trials = 6, 8, 100_000
    rng = np.random.default_rng(1)
    scores = np.sort(rng.uniform(size=(trials, m, n)), axis=2)
    test_points = rng.uniform(size=trials)
    for rank, k in [(1, 1), (4, 3), (7, 5), (8, 6), (6, 2)]:
        threshold = np.sort(scores[:, :, rank - 1], axis=1)[:, k - 1]
        covered = int((test_points <= threshold).sum())
        expected = float(qq_coverage(rank, k, m, n))
        assert binomial_lower_limit(trials, expected) <= covered
        assert covered <= binomial_upper_limit(trials, expected)


def test_coverage_rejects_out_of_range_ranks():
    with pytest.raises(ValueError, match="local ranks"):
        qq_coverage(11, 1, 5, 10)
    with pytest.raises(ValueError, match="server ranks"):
        qq_coverage(1, 0, 5, 10)


# ---------------------------------------------------------------- search
def brute_force_orders(m, n, level):
    table = qq_coverage(np.arange(1, n + 1)[:, None], np.arange(1, m + 1)[None, :], m, n)
    feasible = table >= level
    if not feasible.any():
        return None
    best = table[feasible].min()
    rank, k = np.argwhere(feasible & (table <= best + TIE_TOLERANCE))[0] + 1
    return int(rank), int(k), float(table[rank - 1, k - 1])


@pytest.mark.parametrize(
    "m, n",
    [
        (100, 10),
        (10, 100),
        (50, 20),
        (7, 13),
        (2, 2),
        (3, 40),
        (30, 30),
        (5, 200),
        (20, 400),
        (3, 1000),
    ],
)
@pytest.mark.parametrize("alpha", [0.05, 0.1, 0.2, 0.3])
def test_search_equals_brute_force_argmin(m, n, alpha):
    level = 1.0 - alpha
    orders = qq_orders.__wrapped__(m, n, level)  # uncached
    expected = brute_force_orders(m, n, level)
    if expected is None:
        assert orders is None
        return
    assert (orders.local_rank, orders.server_rank) == expected[:2]
    assert orders.coverage == pytest.approx(expected[2], abs=1e-15)
    # Valid and minimal: reaches the level, one rank less in either direction does not.
    assert orders.coverage >= level
    if orders.server_rank > 1:
        assert qq_coverage(orders.local_rank, orders.server_rank - 1, m, n) < level
    if orders.local_rank > 1:
        assert qq_coverage(orders.local_rank - 1, orders.server_rank, m, n) < level


def test_search_fixes_the_authors_choice_at_10_by_100():
    """DESIGN.md correction 9: no NaN anywhere, and (l*, k*) = (95, 1) at (10, 100)."""
    table = qq_coverage(np.arange(1, 101)[:, None], np.arange(1, 11)[None, :], 10, 100)
    assert np.isfinite(table).all()
    assert np.all(np.diff(table, axis=0) >= -1e-15) and np.all(np.diff(table, axis=1) >= -1e-15)
    orders = qq_orders(10, 100, 0.9)
    assert (orders.local_rank, orders.server_rank) == (95, 1)
    # The authors' (l, k) = (86, 10) is feasible but further from 0.9.
    assert orders.coverage < qq_coverage(86, 10, 10, 100)


def test_search_handles_large_tables_and_empty_feasible_sets():
    orders = qq_orders(1000, 100, 0.9)
    assert orders.coverage >= 0.9
    assert qq_coverage(orders.local_rank, orders.server_rank - 1, 1000, 100) < 0.9
    assert qq_orders(2, 2, 0.9) is None  # M(2, 2) = 4/5
    orders = qq_orders(1, 20, 0.9)  # one agent: split conformal, M(l, 1) = l / 21
    assert (orders.local_rank, orders.server_rank) == (19, 1)
    assert orders.coverage == pytest.approx(19 / 21, abs=EXACT)


@pytest.mark.parametrize("m, n", [(10, 7000), (2, 12000)])
def test_search_handles_agents_with_thousands_of_scores(m, n):
    """The initial guess of k underflows to 0 for small l once n is in the thousands."""
    orders = qq_orders.__wrapped__(m, n, 0.9)
    assert orders.coverage >= 0.9
    if orders.server_rank > 1:
        assert qq_coverage(orders.local_rank, orders.server_rank - 1, m, n) < 0.9
    assert qq_coverage(orders.local_rank - 1, orders.server_rank, m, n) < 0.9


# ----------------------------------------------------------- unequal sizes
@pytest.mark.parametrize(
    "sizes, ranks", [((2, 3, 4), (2, 3, 3)), ((1, 2, 5), (1, 2, 5)), ((3, 3, 2, 1), (3, 2, 2, 2))]
)
def test_unequal_column_matches_appendix_a1_enumeration(sizes, ranks):
    column = unequal_coverage_column(sizes, ranks)
    for k in range(1, len(sizes) + 1):
        n_finite = sum(r <= s for s, r in zip(sizes, ranks, strict=True))
        exact = 1.0 if k > n_finite else float(eq5_enumeration(sizes, ranks, k))
        assert abs(column[k - 1] - exact) < EXACT


@pytest.mark.parametrize("m, n, rank", [(100, 10, 9), (10, 100, 90), (50, 20, 18)])
def test_unequal_column_reduces_to_the_table_for_equal_sizes(m, n, rank):
    column = unequal_coverage_column((n,) * m, (rank,) * m)
    np.testing.assert_allclose(column, qq_coverage(rank, np.arange(1, m + 1), m, n), atol=EXACT)


def test_unequal_server_rank_is_the_smallest_valid_rank():
    sizes = (5, 8, 12, 20, 30, 45, 60)
    ranks = tuple(math.ceil(0.9 * (n + 1)) for n in sizes)
    k, coverage = unequal_server_rank(sizes, ranks, 0.9)
    column = unequal_coverage_column(sizes, ranks)
    assert coverage == column[k - 1] >= 0.9
    assert k == 1 or column[k - 2] < 0.9
    assert unequal_server_rank((2, 3), (3, 4), 0.9) is None  # both messages are +inf
