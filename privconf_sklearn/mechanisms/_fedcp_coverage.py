"""The coverage table of the quantile-of-quantiles estimator, computed exactly and fast.

Paper 004 (Humbert, Le Bars, Bellet, Arlot, ICML 2023), Theorem 3.2: when each of ``m``
agents sends the ``l``-th smallest of its ``n`` scores and the server keeps the ``k``-th
smallest message, a fresh score is covered with probability at least (equal to, for
continuous scores)

``M(l, k) = integral_0^1 P(Bin(m, G_l(t)) < k) dt``,  ``G_l(t) = P(Bin(n, t) >= l)``

(the proof in Appendix C.1, before the multinomial sums of Eq. (5)). The integrand is a
polynomial of degree ``m n`` in ``t``, so Gauss-Legendre quadrature with
``ceil((m n + 1) / 2)`` nodes is exact. All probabilities are regularised incomplete
beta functions evaluated on the side that keeps full precision (``1 - G`` from
``1 - t``), so no tail is obtained as a difference of numbers close to 1 (the
authors' code does that and returns NaN, DESIGN.md correction 9).

Speed: the integrand is within ``TAIL`` of 1 left of a window and within ``TAIL`` of 0
right of it (it is monotone in ``t``); the window's ends are closed-form incomplete-beta
inverses, so only the nodes inside it are evaluated and the nodes to its left
contribute their cumulated weight. The search for
``(l*, k*) = argmin {M(l, k) : M(l, k) >= level}`` uses the monotonicity of ``M`` in
``l`` and ``k`` (Appendix A.2): for every ``l`` the smallest feasible ``k`` is found
from the guess ``ceil((m + 1) G_l(level))`` by galloping and bisection, all ``l`` at
once, and facts are propagated across ``l``; past the first ``l`` whose guess is 1 (most
rows when ``n`` is large) the search turns around: for each smaller ``k`` the smallest
feasible ``l`` is found by bisection, so the cost does not grow with the number of rows.

Unequal local sizes (Appendix A.1): agent ``j`` sends its ``l_j``-th smallest score,
``G_j(t) = P(Bin(n_j, t) >= l_j)``, and the integrand becomes the Poisson-binomial
``P(sum_j Bernoulli(G_j(t)) < k)``, a polynomial of degree ``sum_j n_j``; it is
computed for every ``k`` at once.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache

import numpy as np
from scipy.special import betainc, betaincinv, gammaln, xlogy

from ._gauss_legendre import unit_gauss_legendre

__all__ = [
    "TIE_TOLERANCE",
    "QQOrders",
    "qq_coverage",
    "qq_orders",
    "unequal_coverage_column",
    "unequal_server_rank",
]

#: Integrand mass ignored on each side of the evaluation window (each ignored node's
#: integrand is within TAIL of 0 or 1, so the total error is at most 2 * TAIL).
TAIL = 1e-18

#: Coverage values closer than this are treated as equal when choosing ``(l*, k*)``:
#: the tie goes to the smaller ``l`` (then the smaller ``k``).
TIE_TOLERANCE = 1e-12

#: Extra nodes kept on each side of a window, against rounding in the window's ends.
_WINDOW_PAD = 2


def _node_count(degree: int) -> int:
    """Gauss-Legendre nodes needed to integrate a polynomial of ``degree`` exactly."""
    return degree // 2 + 1


def _ragged_gather(starts: np.ndarray, stops: np.ndarray):
    """Flat node indices of the windows ``[starts[p], stops[p])`` and their owner ``p``."""
    lengths = np.maximum(stops - starts, 0)
    owner = np.repeat(np.arange(starts.shape[0]), lengths)
    offsets = np.cumsum(lengths) - lengths
    index = np.arange(int(lengths.sum())) - offsets[owner] + starts[owner]
    return index, owner


def qq_coverage(local_rank, server_rank, n_agents: int, n_per_agent: int) -> np.ndarray:
    """``M(l, k)`` of paper 004 Theorem 3.2 for arrays of pairs ``(l, k)``.

    Parameters
    ----------
    local_rank : int or array-like of int
        ``l`` in ``1..n``: the rank of the score each agent sends.
    server_rank : int or array-like of int
        ``k`` in ``1..m``: the rank of the message the server keeps (broadcast against
        ``local_rank``).
    n_agents : int
        ``m >= 1``.
    n_per_agent : int
        ``n >= 1``, each agent's number of scores.

    Returns
    -------
    ndarray of float
        ``M(l, k)``, accurate to about 1e-14 (exact Gauss-Legendre integration of a
        degree ``m n`` polynomial, evaluated in double precision).
    """
    m, n = int(n_agents), int(n_per_agent)
    l_arr, k_arr = np.broadcast_arrays(np.asarray(local_rank), np.asarray(server_rank))
    shape = l_arr.shape
    l_arr = l_arr.ravel().astype(np.int64)
    k_arr = k_arr.ravel().astype(np.int64)
    if l_arr.size and (l_arr.min() < 1 or l_arr.max() > n):
        raise ValueError(f"local ranks must lie in 1..{n}; got {np.unique(l_arr).tolist()[:10]}.")
    if k_arr.size and (k_arr.min() < 1 or k_arr.max() > m):
        raise ValueError(f"server ranks must lie in 1..{m}; got {np.unique(k_arr).tolist()[:10]}.")
    t, one_minus_t, weights = unit_gauss_legendre(_node_count(m * n))
    cumulative = _cumulative_weights(weights.shape[0])
    # Window in G: P(Bin(m, G) >= k) < TAIL below g_low, P(Bin(m, G) < k) < TAIL above.
    g_low = betaincinv(k_arr, m - k_arr + 1, TAIL)
    one_minus_g_high = betaincinv(m - k_arr + 1, k_arr, TAIL)
    # ... mapped to t through G_l(t) = I_t(l, n - l + 1), 1 - G_l(t) = I_{1-t}(n - l + 1, l).
    t_low = betaincinv(l_arr, n - l_arr + 1, g_low)
    one_minus_t_high = betaincinv(n - l_arr + 1, l_arr, one_minus_g_high)
    n_nodes = t.shape[0]
    starts = np.maximum(np.searchsorted(t, t_low, side="left") - _WINDOW_PAD, 0)
    above = np.searchsorted(one_minus_t[::-1], one_minus_t_high, side="left")
    stops = np.minimum(n_nodes - above + _WINDOW_PAD, n_nodes)
    stops = np.maximum(stops, starts)
    index, owner = _ragged_gather(starts, stops)
    ranks_l, ranks_k = l_arr[owner], k_arr[owner]
    one_minus_g = betainc(n - ranks_l + 1, ranks_l, one_minus_t[index])
    below_k = betainc(m - ranks_k + 1, ranks_k, one_minus_g)  # P(Bin(m, G) < k)
    inside = np.bincount(owner, weights=weights[index] * below_k, minlength=l_arr.size)
    return (cumulative[starts] + inside).reshape(shape)


@lru_cache(maxsize=32)
def _cumulative_weights(n_nodes: int) -> np.ndarray:
    """``[0, w_1, w_1 + w_2, ...]`` for the cached Gauss-Legendre rule."""
    _, _, weights = unit_gauss_legendre(n_nodes)
    cumulative = np.concatenate([[0.0], np.cumsum(weights)])
    cumulative.flags.writeable = False
    return cumulative


@dataclass(frozen=True)
class QQOrders:
    """Ranks of the quantile-of-quantiles estimator and their coverage.

    Attributes
    ----------
    local_rank : int
        ``l``: each agent sends its ``l``-th smallest score.
    server_rank : int
        ``k``: the server keeps the ``k``-th smallest message.
    coverage : float
        ``M(l, k)`` (Theorem 3.2), at least the requested level.
    """

    local_rank: int
    server_rank: int
    coverage: float


def _next_probe(low, high, origin, step, bisecting):
    """Next ``k`` to evaluate in each open bracket ``(low, high)``, strictly inside it.

    From the guess ``origin``: gallop up (``low + step``) while the guess and above are
    infeasible, down (``high - step``) while below the guess is feasible, bisect once a
    gallop has crossed the boundary. Returns the probes and the two gallop masks.
    """
    going_up = ~bisecting & (low >= origin)
    going_down = ~bisecting & ~going_up & (high < origin)
    probe = np.where(
        bisecting,
        (low + high) // 2,
        np.where(
            going_up,
            np.minimum(low + step, high - 1),
            np.where(
                going_down, np.maximum(high - step, low + 1), np.clip(origin, low + 1, high - 1)
            ),
        ),
    )
    return probe, going_up, going_down


@lru_cache(maxsize=1024)
def qq_orders(n_agents: int, n_per_agent: int, level: float) -> QQOrders | None:
    """``(l*, k*) = argmin {M(l, k) : M(l, k) >= level}`` (paper 004 Eq. (6)).

    Depends on public quantities only and is cached. Ties (coverages within
    :data:`TIE_TOLERANCE`) go to the smallest ``l``.

    Parameters
    ----------
    n_agents, n_per_agent : int
        ``m`` and ``n``.
    level : float
        Target coverage, e.g. ``1 - alpha``.

    Returns
    -------
    QQOrders or None
        None when no pair reaches ``level`` (even ``M(n, m)`` is below it).
    """
    m, n = int(n_agents), int(n_per_agent)
    ranks = np.arange(1, n + 1)
    # k ~ (m + 1) P(Beta(l, n - l + 1) <= level), at least 1. The rows past the first
    # guess of 1 (the "tail", most of the rows when n is large) are not searched row by
    # row: their smallest feasible k lies below the frontier's, and for each such k the
    # smallest feasible row is found by bisection in l (_smallest_feasible_rows).
    guess = np.ceil((m + 1) * betainc(ranks, n - ranks + 1, level)).astype(np.int64)
    np.maximum(guess, 1, out=guess)
    first_at_one = np.flatnonzero(guess == 1)
    frontier = int(first_at_one[0]) if first_at_one.size else n - 1
    # Per l: M(l, k) < level for k <= known_low, >= level for k >= known_high;
    # known_high = m + 1 stands for "no feasible k known" (k = m + 1 is infeasible).
    known_low = np.zeros(n, dtype=np.int64)
    known_high = np.full(n, m + 1, dtype=np.int64)
    step = np.ones(n, dtype=np.int64)
    values: dict[tuple[int, int], float] = {}

    def evaluate(rows: np.ndarray, ks: np.ndarray) -> None:
        if rows.size == 0:
            return
        coverage = qq_coverage(rows + 1, ks, m, n)
        for row, k, value in zip(rows.tolist(), ks.tolist(), coverage.tolist(), strict=True):
            values[(row, k)] = value
        feasible = coverage >= level
        # M is non-decreasing in l: a feasible (l, k) is feasible for every l' >= l and
        # an infeasible one for every l' <= l.
        high_at = np.full(n, m + 1, dtype=np.int64)
        np.minimum.at(high_at, rows[feasible], ks[feasible])
        low_at = np.zeros(n, dtype=np.int64)
        np.maximum.at(low_at, rows[~feasible], ks[~feasible])
        np.minimum(known_high, np.minimum.accumulate(high_at), out=known_high)
        np.maximum(known_low, np.maximum.accumulate(low_at[::-1])[::-1], out=known_low)

    # Round 0: the guess and its left neighbour for every l whose guess is in range,
    # plus k = m at the largest l whose guess is out of range (if that is infeasible,
    # so is every smaller l).
    plausible = np.flatnonzero(guess[: frontier + 1] <= m)
    hopeless = np.flatnonzero(guess > m)
    rows = [plausible, plausible[guess[plausible] > 1]]
    ks = [guess[plausible], guess[plausible][guess[plausible] > 1] - 1]
    if hopeless.size:
        rows.append(hopeless[-1:])
        ks.append(np.array([m]))
    evaluate(np.concatenate(rows), np.concatenate(ks))
    start = np.clip(guess, 1, m)
    bisecting = np.zeros(n, dtype=bool)
    while True:
        open_rows = known_high[: frontier + 1] - known_low[: frontier + 1] > 1
        if not open_rows.any():
            break
        # Rows whose guess is out of range and with no feasible k known form a prefix of
        # l: probe only the largest at k = m (its infeasibility settles all the others).
        waiting = np.flatnonzero(
            open_rows & (known_high[: frontier + 1] > m) & (guess[: frontier + 1] > m)
        )
        open_rows[waiting[:-1]] = False
        rows = np.flatnonzero(open_rows)
        probe, going_up, going_down = _next_probe(
            known_low[rows], known_high[rows], start[rows], step[rows], bisecting[rows]
        )
        step[rows] *= 2
        evaluate(rows, probe)
        # A gallop that crossed the boundary leaves a bracket: bisect from now on.
        crossed = (going_up & (known_high[rows] <= probe)) | (
            going_down & (known_low[rows] >= probe)
        )
        bisecting[rows[crossed]] = True
    head = np.flatnonzero(known_high[: frontier + 1] <= m)
    # The frontier is settled: infeasible below its smallest feasible k (m + 1: none).
    tail_ks = np.arange(1, int(known_high[frontier]), dtype=np.int64)
    tail = _smallest_feasible_rows(m, n, level, frontier, tail_ks, values)
    found = tail < n
    rows = np.concatenate([head, tail[found]])
    ks = np.concatenate([known_high[head], tail_ks[found]])
    if rows.size == 0:
        return None
    # Dominance: M is non-decreasing in l and in k, and ties go to the smaller l then the
    # smaller k, so a pair is a candidate only if its k is below every smaller row's.
    order = np.lexsort((ks, rows))
    rows, ks = rows[order], ks[order]
    keeps = np.concatenate([[True], ks[1:] < np.minimum.accumulate(ks)[:-1]])
    rows, ks = rows[keeps], ks[keeps]
    pairs = list(zip(rows.tolist(), ks.tolist(), strict=True))
    missing = np.array([pair not in values for pair in pairs])
    if missing.any():
        evaluate(rows[missing], ks[missing])
    coverage = np.array([values[pair] for pair in pairs])
    # Rounding could in principle break monotonicity at the 1e-16 level and let a bound
    # propagate to a pair that does not reach the level: never return such a pair.
    valid = coverage >= level
    if not valid.any():
        return None
    rows, ks, coverage = rows[valid], ks[valid], coverage[valid]
    best = int(np.flatnonzero(coverage <= coverage.min() + TIE_TOLERANCE)[0])
    return QQOrders(int(rows[best]) + 1, int(ks[best]), float(coverage[best]))


def _smallest_feasible_rows(m, n, level, frontier, server_ranks, values):
    """For each ``k``, the smallest row past ``frontier`` with ``M >= level`` (n: none).

    Every ``k`` of ``server_ranks`` is infeasible at the frontier row, and ``M`` is
    non-decreasing in ``l``, so a bisection over the rows ``frontier + 1 .. n - 1``
    (all ``k`` at once, about ``log2(n)`` vectorised rounds) finds the boundary.
    Evaluated coverages are recorded in ``values`` under ``(row, k)``.
    """
    low = np.full(server_ranks.size, frontier, dtype=np.int64)  # infeasible
    high = np.full(server_ranks.size, n, dtype=np.int64)  # feasible, or n for "none"
    while True:
        open_ks = np.flatnonzero(high - low > 1)
        if open_ks.size == 0:
            return high
        middle = (low[open_ks] + high[open_ks]) // 2
        coverage = qq_coverage(middle + 1, server_ranks[open_ks], m, n)
        for row, k, value in zip(
            middle.tolist(), server_ranks[open_ks].tolist(), coverage.tolist(), strict=True
        ):
            values[(row, k)] = value
        feasible = coverage >= level
        high[open_ks[feasible]] = middle[feasible]
        low[open_ks[~feasible]] = middle[~feasible]


def _binomial_pmf(count: int, g: np.ndarray, one_minus_g: np.ndarray) -> np.ndarray:
    """``P(Bin(count, g) = s)`` for ``s = 0..count``, shape ``(len(g), count + 1)``."""
    s = np.arange(count + 1)
    log_choose = gammaln(count + 1) - gammaln(s + 1) - gammaln(count - s + 1)
    return np.exp(log_choose + xlogy(s, g[:, None]) + xlogy(count - s, one_minus_g[:, None]))


@lru_cache(maxsize=256)
def unequal_coverage_column(agent_sizes: tuple[int, ...], local_ranks: tuple[int, ...]):
    """Coverage of the quantile of quantiles for every server rank, any local sizes.

    Paper 004 Appendix A.1: agent ``j`` sends its ``l_j``-th smallest of ``n_j``
    scores (``+inf``, i.e. the top of the range, when ``l_j > n_j``), the server keeps
    the ``k``-th smallest message. Following the proof of Theorem 3.2 with the
    independent, non-identical messages (as in the proof of Proposition 3.4),
    ``M_k = integral_0^1 P(sum_j Bernoulli(G_j(t)) < k) dt`` with
    ``G_j(t) = P(Bin(n_j, t) >= l_j)``, a polynomial of degree ``sum n_j`` integrated
    exactly by Gauss-Legendre. Agents with equal ``(n_j, l_j)`` are grouped into one
    binomial.

    Parameters
    ----------
    agent_sizes : tuple of int
        ``n_j >= 1``.
    local_ranks : tuple of int
        ``l_j >= 1``.

    Returns
    -------
    ndarray of shape (m,)
        ``M_k`` for ``k = 1..m`` (read-only); ``M_k = 1`` when fewer than ``k`` agents
        can send a finite message.
    """
    sizes = np.asarray(agent_sizes, dtype=np.int64)
    ranks = np.asarray(local_ranks, dtype=np.int64)
    m = sizes.shape[0]
    finite = ranks <= sizes
    groups, counts = np.unique(
        np.stack([sizes[finite], ranks[finite]], axis=1), axis=0, return_counts=True
    )
    n_finite = int(finite.sum())
    column = np.ones(m)
    if n_finite:
        group_n, group_l = groups[:, 0], groups[:, 1]
        t, one_minus_t, weights = unit_gauss_legendre(_node_count(int(sizes[finite].sum())))
        cumulative = _cumulative_weights(weights.shape[0])
        # Left of t_low: sum_j G_j(t) < TAIL, so every P(S < k), k >= 1, is within TAIL
        # of 1; right of t_high: sum_j (1 - G_j(t)) < TAIL, so P(S < k) < TAIL, k <= n_finite.
        t_low = betaincinv(group_l, group_n - group_l + 1, TAIL / n_finite).min()
        one_minus_t_high = betaincinv(group_n - group_l + 1, group_l, TAIL / n_finite).min()
        n_nodes = t.shape[0]
        start = max(int(np.searchsorted(t, t_low, side="left")) - _WINDOW_PAD, 0)
        above = int(np.searchsorted(one_minus_t[::-1], one_minus_t_high, side="left"))
        stop = max(min(n_nodes - above + _WINDOW_PAD, n_nodes), start)
        window = slice(start, stop)
        distribution = np.ones((stop - start, 1))
        for size, rank, count in zip(group_n, group_l, counts, strict=True):
            one_minus_g = betainc(size - rank + 1, rank, one_minus_t[window])
            g = betainc(rank, size - rank + 1, t[window])
            pmf = _binomial_pmf(int(count), g, one_minus_g)
            combined = np.zeros((distribution.shape[0], distribution.shape[1] + int(count)))
            for s in range(int(count) + 1):
                combined[:, s : s + distribution.shape[1]] += distribution * pmf[:, s : s + 1]
            distribution = combined
        below = np.cumsum(distribution, axis=1)[:, :n_finite]  # P(S < k), k = 1..n_finite
        column[:n_finite] = cumulative[start] + weights[window] @ below
    column.flags.writeable = False
    return column


@lru_cache(maxsize=1024)
def unequal_server_rank(
    agent_sizes: tuple[int, ...], local_ranks: tuple[int, ...], level: float
) -> tuple[int, float] | None:
    """Smallest ``k`` with ``M_k >= level`` (paper 004 Appendix A.1), and ``M_k``.

    Returns None when no ``k`` reaches the level with a finite threshold (``k`` would
    exceed the number of agents able to send a finite message).
    """
    column = unequal_coverage_column(agent_sizes, local_ranks)
    n_finite = int(sum(rank <= size for size, rank in zip(agent_sizes, local_ranks, strict=True)))
    feasible = np.flatnonzero(column[:n_finite] >= level)
    if feasible.size == 0:
        return None
    k = int(feasible[0]) + 1
    return k, float(column[k - 1])
