"""The FedCP-QQ coverage table M(l, k) of Humbert et al. (2023), Theorem 3.2, and its search.

Checked against an exact enumeration of their Eq. (5), an independent exact-rational
computation (Bernstein-form polynomial products), the closed form of their Proposition
A.1, Monte Carlo, and a brute-force argmin over the full table.

The table and its evaluators have no public route (the plans are their only public
use), so these tests import them from the private modules.
"""

import itertools
import math
from fractions import Fraction

import numpy as np
import pytest
from scipy.special import betainc, gammaln

from privconf_sklearn.federated import make_plan
from privconf_sklearn.mechanisms.fedcp._coverage import (
    DECISION_MARGIN,
    EXACT_MAX_DEGREE,
    ROUNDING_ALLOWANCE,
    TIE_TOLERANCE,
    FastColumns,
    WorkBudget,
    approximate_coverage,
    exact_coverage_column,
    qq_coverage,
    unequal_coverage_column,
)
from privconf_sklearn.mechanisms.fedcp._quadrature import node_blocks, node_ranges, nodes
from privconf_sklearn.mechanisms.fedcp._search import equal_table, unequal_table

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
def unit_gauss_legendre(n_nodes):
    """Every node of the ``n_nodes``-point rule on [0, 1]."""
    return nodes(n_nodes, np.arange(n_nodes))


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
        value = Fraction(float(weights @ terms))
        # scipy's rules (n_nodes <= 150) err by up to 2.5e-12 relative, 1e-14 absolute.
        assert abs(float(value / exact - 1)) < (3e-12 if n_nodes <= 150 else 1e-12)
        assert abs(float(value - exact)) < 1e-14


@pytest.mark.parametrize("n_nodes", [5, 150, 151, 1000, 10_001, 50_000])
@pytest.mark.parametrize(
    "low, high", [(0, 1), (0.2, 0.3), (0.49, 0.51), (0.9, 0.95), (0, 1e-3), (0.999, 1), (0.5, 0.5)]
)
def test_window_ranges_cover_the_window(n_nodes, low, high):
    """A window's index range holds every node inside it and at most 16 outside."""
    t = unit_gauss_legendre(n_nodes)[0]
    starts, stops = node_ranges(n_nodes, [low, 0.0], [high, 1.0])
    assert (starts[1], stops[1]) == (0, n_nodes)
    inside = np.flatnonzero((t >= low) & (t <= high))
    start, stop = int(starts[0]), int(stops[0])
    if inside.size:
        assert start <= inside[0] and inside[-1] < stop
    assert stop - start - inside.size <= 16
    blocks = list(node_blocks(n_nodes, low, high, block=97))
    found = np.concatenate([b[0] for b in blocks]) if blocks else np.empty(0)
    np.testing.assert_array_equal(found, t[start:stop])


# --------------------------------------------------------------- M(l, k)
@pytest.mark.parametrize("m, n", [(2, 3), (3, 3), (4, 2), (3, 4), (2, 6), (5, 2)])
def test_exact_and_quadrature_values_match_enumeration_of_eq5(m, n):
    for rank in range(1, n + 1):
        column = exact_coverage_column((n,) * m, (rank,) * m)
        for k in range(1, m + 1):
            exact = eq5_enumeration([n] * m, [rank] * m, k)
            assert column[k - 1] == exact
            assert abs(qq_coverage(rank, k, m, n) - float(exact)) < EXACT


@pytest.mark.slow
@pytest.mark.parametrize("m, n", [(6, 8), (10, 5), (4, 15), (12, 3), (20, 20)])
def test_coverage_matches_exact_rational_integral(m, n):
    table = qq_coverage(np.arange(1, n + 1)[:, None], np.arange(1, m + 1)[None, :], m, n)
    for rank in range(1, n + 1):
        exact = bernstein_exact_column(m, n, rank)
        assert list(exact_coverage_column((n,) * m, (rank,) * m)) == exact
        np.testing.assert_allclose(table[rank - 1], [float(x) for x in exact], rtol=0, atol=EXACT)


def test_exact_values_decide_ties():
    """M(3, 3) = 1/2 exactly at m = n = 5, so alpha = 1/2 takes (3, 3) (not (2, 5))."""
    assert exact_coverage_column((5,) * 5, (3,) * 5)[2] == Fraction(1, 2)
    plan = make_plan([5] * 5, 0.5)
    assert (plan.local_ranks[0], plan.server_rank) == (3, 3)
    assert plan.coverage_lower_bound == plan.coverage_upper_bound == 0.5


@pytest.mark.parametrize(
    "m, n",
    [(100, 10), (10, 100), (50, 20), pytest.param(1000, 100, marks=pytest.mark.slow), (5, 200)],
)
def test_coverage_matches_proposition_a1(m, n):
    """M(n, k) = Gamma(k + 1/n) Gamma(m + 1) / (Gamma(k) Gamma(m + 1/n + 1))."""
    k = np.arange(1, m + 1)
    # The Gamma ratio telescopes to prod_{i=k}^{m} n i / (n i + 1): no lgamma cancellation.
    product = np.exp(np.cumsum(np.log1p(-1.0 / (n * np.arange(m, 0, -1) + 1.0)))[::-1])
    gamma_form = np.exp(gammaln(k + 1 / n) - gammaln(k) + gammaln(m + 1) - gammaln(m + 1 / n + 1))
    np.testing.assert_allclose(product, gamma_form, rtol=1e-11)
    np.testing.assert_allclose(qq_coverage(n, k, m, n), product, rtol=0, atol=EXACT)
    # Fast values at l = n (a corner of the table) stay far inside the decision margin.
    np.testing.assert_allclose(
        approximate_coverage(n, k, m, n), product, rtol=0, atol=DECISION_MARGIN / 10
    )


def test_proposition_a1_exact_rational():
    m, n = 20, 7
    for k in (1, 5, 20):
        exact = math.prod(Fraction(n * i, n * i + 1) for i in range(k, m + 1))
        assert abs(qq_coverage(n, k, m, n) - float(exact)) < EXACT
        assert exact_coverage_column((n,) * m, (n,) * m)[k - 1] == exact


@pytest.mark.parametrize("m, n", [(50, 20), (1000, 100), (10, 100), (3, 3000)])
def test_windowed_quadrature_equals_full_quadrature(m, n):
    """Skipping the nodes outside the window (integrating h - H) changes nothing."""
    _, one_minus_t, weights = unit_gauss_legendre(m * n // 2 + 1)
    rng = np.random.default_rng(0)
    ranks = np.r_[rng.integers(1, n + 1, 12), 1, n, n]
    servers = np.r_[rng.integers(1, m + 1, 12), m, 1, m]
    for rank, k in zip(ranks, servers, strict=True):
        one_minus_g = betainc(n - rank + 1, rank, one_minus_t)
        full = weights @ betainc(m - k + 1, k, one_minus_g)
        assert abs(qq_coverage(rank, k, m, n) - full) < 1e-14


@pytest.mark.slow
def test_fast_values_stay_within_the_decision_margin_in_the_corners():
    """Extreme ranks (l in {1, 2, n - 1, n}, k in {1, m}) are the hardest integrands."""
    worst = 0.0
    for m in (2, 10, 100, 1000, 3000):
        for n in (2, 10, 100, 1000, 10_000):
            if m * n > 2 * 10**7:
                continue
            ranks = np.array(sorted({1, 2, n // 2, max(n - 1, 1), n}))[:, None]
            ks = np.array(sorted({1, 2, m // 2, m}))[None, :]
            difference = approximate_coverage(ranks, ks, m, n) - qq_coverage(ranks, ks, m, n)
            assert not np.isnan(difference).any()  # max(worst, nan) would drop it silently
            worst = max(worst, float(np.max(np.abs(difference))))
    assert worst < DECISION_MARGIN / 10


def test_fast_values_agree_with_the_quadrature():
    """The search's 48-node values against the exact quadrature, random (l, k, m, n)."""
    rng = np.random.default_rng(4)
    worst = 0.0
    for _ in range(200):
        m = int(rng.choice([2, 3, 10, 30, 100, 300]))
        n = int(rng.choice([5, 30, 100, 1000, 10_000, 100_000]))
        if m * n > 10**7:
            continue
        rank, k = int(rng.integers(max(1, n // 2), n + 1)), int(rng.integers(1, m + 1))
        difference = approximate_coverage(rank, k, m, n) - qq_coverage(rank, k, m, n)
        assert not math.isnan(difference)  # max(worst, nan) would drop it silently
        worst = max(worst, abs(difference))
    assert worst < 1e-13


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
    with pytest.raises(ValueError, match="exact coverage"):
        exact_coverage_column((EXACT_MAX_DEGREE,) * 2, (1, 1))


# ---------------------------------------------------------------- search
def brute_force_orders(m, n, level):
    """Exact argmin of the full table (exact rationals), ties to the smaller l then k."""
    best = None
    for rank in range(1, n + 1):
        for k, value in enumerate(exact_coverage_column((n,) * m, (rank,) * m), start=1):
            if value >= level and (best is None or value < best[2]):
                best = (rank, k, value)
    return best


@pytest.mark.parametrize(
    "m, n", [(5, 5), (2, 2), (7, 13), (3, 40), (10, 20), (20, 10), (2, 100), (4, 60), (30, 13)]
)
@pytest.mark.parametrize("alpha", [0.05, 0.1, 0.2, 0.3, 0.5])
def test_search_equals_exact_brute_force_argmin(m, n, alpha):
    level = 1 - Fraction(alpha)
    orders = equal_table(m, n, level)
    expected = brute_force_orders(m, n, level)
    if expected is None:
        assert orders is None
        return
    assert (orders.local_ranks[0], orders.server_rank, orders.coverage.key) == expected


def quadrature_brute_force(m, n, level):
    table = qq_coverage(np.arange(1, n + 1)[:, None], np.arange(1, m + 1)[None, :], m, n)
    feasible = table - ROUNDING_ALLOWANCE >= level
    if not feasible.any():
        return None
    best = table[feasible].min()
    rank, k = np.argwhere(feasible & (table <= best + TIE_TOLERANCE))[0] + 1
    return int(rank), int(k), float(table[rank - 1, k - 1])


@pytest.mark.slow
@pytest.mark.parametrize(
    "m, n", [(100, 10), (10, 100), (50, 20), (30, 30), (5, 200), (20, 400), (3, 1000)]
)
@pytest.mark.parametrize("alpha", [0.05, 0.1, 0.2, 0.3])
def test_search_equals_brute_force_argmin_on_large_tables(m, n, alpha):
    level = 1 - Fraction(alpha)
    orders = equal_table(m, n, level)
    expected = quadrature_brute_force(m, n, float(level))
    if expected is None:
        assert orders is None
        return
    assert (orders.local_ranks[0], orders.server_rank) == expected[:2]
    assert orders.coverage.lower_float == pytest.approx(expected[2] - ROUNDING_ALLOWANCE, abs=1e-15)
    # Valid and minimal: reaches the level, one rank less in either direction does not.
    assert orders.coverage.key >= level
    if orders.server_rank > 1:
        assert qq_coverage(orders.local_ranks[0], orders.server_rank - 1, m, n) < level
    if orders.local_ranks[0] > 1:
        assert qq_coverage(orders.local_ranks[0] - 1, orders.server_rank, m, n) < level


def test_search_fixes_the_authors_choice_at_10_by_100():
    """No NaN anywhere, and (l*, k*) = (95, 1) at (10, 100) (the authors' code: (86, 10))."""
    table = qq_coverage(np.arange(1, 101)[:, None], np.arange(1, 11)[None, :], 10, 100)
    assert np.isfinite(table).all()
    assert np.all(np.diff(table, axis=0) >= -1e-15) and np.all(np.diff(table, axis=1) >= -1e-15)
    orders = equal_table(10, 100, 1 - Fraction(0.1))
    assert (orders.local_ranks[0], orders.server_rank) == (95, 1)
    # The authors' (l, k) = (86, 10) is feasible but further from 0.9.
    assert orders.coverage.key < qq_coverage(86, 10, 10, 100)


@pytest.mark.parametrize(
    "m, n, expected", [(100, 100_000, (90119, 11)), (1000, 10_000, (8985, 699))]
)
def test_search_of_large_tables_is_minimal(m, n, expected):
    """The plans of issue 17's sizes: valid and minimal in both ranks (exact quadrature)."""
    level = 1 - Fraction(0.1)
    orders = equal_table(m, n, level)
    assert (orders.local_ranks[0], orders.server_rank) == expected
    assert orders.coverage.key >= level
    assert qq_coverage(orders.local_ranks[0], orders.server_rank - 1, m, n) < 0.9
    assert qq_coverage(orders.local_ranks[0] - 1, orders.server_rank, m, n) < 0.9


def test_search_handles_empty_feasible_sets_and_one_agent():
    assert equal_table(2, 2, 1 - Fraction(0.1)) is None  # M(2, 2) = 4/5
    orders = equal_table(1, 20, 1 - Fraction(0.1))  # split conformal
    assert (orders.local_ranks[0], orders.server_rank) == (19, 1)
    assert orders.coverage.key == Fraction(19, 21)


@pytest.mark.parametrize("m, n", [(10, 7000), (2, 12000)])
def test_search_handles_agents_with_thousands_of_scores(m, n):
    level = 1 - Fraction(0.1)
    orders = equal_table(m, n, level)
    assert orders.coverage.key >= level
    if orders.server_rank > 1:
        assert qq_coverage(orders.local_ranks[0], orders.server_rank - 1, m, n) < 0.9
    assert qq_coverage(orders.local_ranks[0] - 1, orders.server_rank, m, n) < 0.9


def test_search_respects_a_largest_rank():
    level = 1 - Fraction(0.1)
    orders = equal_table(10, 100, level, max_rank=91)
    assert orders.local_ranks[0] <= 91 and orders.coverage.key >= level
    expected = brute_force_orders_limited(10, 100, level, 91)
    assert (orders.local_ranks[0], orders.server_rank) == expected


def brute_force_orders_limited(m, n, level, limit):
    table = qq_coverage(np.arange(1, limit + 1)[:, None], np.arange(1, m + 1)[None, :], m, n)
    feasible = table - ROUNDING_ALLOWANCE >= float(level)
    best = table[feasible].min()
    rank, k = np.argwhere(feasible & (table <= best + TIE_TOLERANCE))[0] + 1
    return int(rank), int(k)


# ----------------------------------------------------------- unequal sizes
@pytest.mark.parametrize(
    "sizes, ranks", [((2, 3, 4), (2, 3, 3)), ((1, 2, 5), (1, 2, 5)), ((3, 3, 2, 1), (3, 2, 2, 2))]
)
def test_unequal_column_matches_appendix_a1_enumeration(sizes, ranks):
    column = unequal_coverage_column(sizes, ranks)
    exact = exact_coverage_column(sizes, ranks)
    for k in range(1, len(sizes) + 1):
        n_finite = sum(r <= s for s, r in zip(sizes, ranks, strict=True))
        expected = 1 if k > n_finite else eq5_enumeration(sizes, ranks, k)
        assert exact[k - 1] == expected
        assert abs(column[k - 1] - float(expected)) < EXACT


@pytest.mark.parametrize("m, n, rank", [(100, 10, 9), (10, 100, 90), (50, 20, 18)])
def test_unequal_column_reduces_to_the_table_for_equal_sizes(m, n, rank):
    column = unequal_coverage_column((n,) * m, (rank,) * m)
    np.testing.assert_allclose(column, qq_coverage(rank, np.arange(1, m + 1), m, n), atol=EXACT)


def fast_column(sizes, ranks):
    columns = FastColumns(sizes, WorkBudget(1e12))
    return np.array([columns(ranks, k) for k in range(1, len(sizes) + 1)])


@pytest.mark.slow
def test_fast_unequal_columns_agree_with_the_quadrature():
    rng = np.random.default_rng(3)
    worst = 0.0
    for _ in range(60):
        m = int(rng.integers(2, 30))
        sizes = tuple(int(x) for x in rng.choice(rng.integers(1, 3000, 4), m))
        ranks = tuple(
            int(max(1, min(s + 1, round(rng.uniform(0.0, 1.05) * (s + 1))))) for s in sizes
        )
        exact = unequal_coverage_column(sizes, ranks)
        difference = fast_column(sizes, ranks) - exact
        assert not np.isnan(difference).any()  # max(worst, nan) would drop it silently
        worst = max(worst, float(np.max(np.abs(difference))))
        if sum(sizes) <= EXACT_MAX_DEGREE:
            rational = np.array([float(x) for x in exact_coverage_column(sizes, ranks)])
            assert np.max(np.abs(rational - exact)) < EXACT
    assert worst < 1e-13


def test_unequal_search_reaches_the_level_with_small_excess():
    level = 1 - Fraction(0.1)
    choice, complete = unequal_table((200, 200, 200, 199), level)
    assert complete
    column = unequal_coverage_column((200, 200, 200, 199), choice.local_ranks)
    assert choice.coverage.key >= level
    assert abs(float(choice.coverage.key) - column[choice.server_rank - 1]) < 2e-12
    assert unequal_table((2, 3), level)[0] is None  # every configuration is below 0.9
