"""Time to find FedCP-QQ's ranks (l*, k*) = argmin {M(l, k) >= 1 - alpha} (paper 004 Eq. (6)).

For each (m, n) the search of :func:`privconf_sklearn.mechanisms._fedcp_coverage.qq_orders`
is timed "cold" (every cache cleared, Gauss-Legendre nodes included) and "warm" (nodes
cached, search not cached: the cost inside a fit with new agent sizes but a known
node count). The paper authors' public implementation (multivariate-hypergeometric
sums of paper 004 Appendix A.2, full table) was measured on this kind of machine at
12.4 min for (10, 100) and 5.4 min for (5, 200), and estimated at 2.4 h for (100, 10);
those numbers are printed beside ours as ratios (they were not rerun here).

Run:  python -m benchmarks.bench_fedcp_table [--repeats 5]
"""

from __future__ import annotations

import argparse
import statistics
import time

import numpy as np

from privconf_sklearn.federated import make_plan
from privconf_sklearn.mechanisms._fedcp_coverage import (
    _cumulative_weights,
    qq_coverage,
    qq_orders,
)
from privconf_sklearn.mechanisms._fedcp_plan import _plan_qq2
from privconf_sklearn.mechanisms._gauss_legendre import unit_gauss_legendre

ALPHA = 0.1
SIZES = [(100, 10), (10, 100), (50, 20), (1000, 100), (5, 200)]
#: Authors' code, seconds for the full table on this kind of machine (issue 5).
AUTHORS_SECONDS = {(10, 100): 12.4 * 60, (5, 200): 5.4 * 60, (100, 10): 2.4 * 3600}
TARGET_SECONDS = 0.1
#: Largest table (m * n pairs) also computed in full, for a like-for-like comparison.
FULL_TABLE_MAX_PAIRS = 5000


def clear_caches() -> None:
    unit_gauss_legendre.cache_clear()
    _cumulative_weights.cache_clear()
    qq_orders.cache_clear()
    _plan_qq2.cache_clear()


def full_table(m: int, n: int) -> np.ndarray:
    """Every M(l, k), l = 1..n, k = 1..m (what the authors' code computes)."""
    return qq_coverage(np.arange(1, n + 1)[:, None], np.arange(1, m + 1)[None, :], m, n)


def timed(function, repeats: int, *, cold: bool) -> float:
    """Median wall time of ``function()`` over ``repeats`` runs."""
    times = []
    for _ in range(repeats):
        if cold:
            clear_caches()
        start = time.perf_counter()
        function()
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args(argv)
    print(f"alpha = {ALPHA}; median of {args.repeats} runs; target {TARGET_SECONDS * 1e3:.0f} ms")
    header = (
        f"{'(m, n)':>11} {'(l*, k*)':>11} {'M(l*, k*)':>10} {'cold ms':>8} {'warm ms':>8} "
        f"{'table ms':>9} {'authors':>9} {'ratio':>9} {'FedCP2 plan ms':>15}"
    )
    print(header)
    print("-" * len(header))
    for m, n in SIZES:
        orders = qq_orders.__wrapped__(m, n, 1.0 - ALPHA)
        cold = timed(lambda m=m, n=n: qq_orders(m, n, 1.0 - ALPHA), args.repeats, cold=True)
        unit_gauss_legendre(m * n // 2 + 1)
        warm = timed(
            lambda m=m, n=n: qq_orders.__wrapped__(m, n, 1.0 - ALPHA), args.repeats, cold=False
        )
        private = timed(
            lambda m=m, n=n: make_plan([n] * m, ALPHA, epsilon=1.0), args.repeats, cold=True
        )
        table = (
            timed(lambda m=m, n=n: full_table(m, n), args.repeats, cold=True)
            if m * n <= FULL_TABLE_MAX_PAIRS
            else None
        )
        table_text = "-" if table is None else f"{table * 1e3:.1f}"
        authors = AUTHORS_SECONDS.get((m, n))
        authors_text = "-" if authors is None else f"{authors:.0f} s"
        reference = cold if table is None else table
        ratio = "-" if authors is None else f"{authors / reference:.0f}x"
        flag = "" if cold <= TARGET_SECONDS else "  (over target)"
        print(
            f"{f'({m}, {n})':>11} {f'({orders.local_rank}, {orders.server_rank})':>11} "
            f"{orders.coverage:>10.6f} {cold * 1e3:>8.1f} {warm * 1e3:>8.1f} "
            f"{table_text:>9} {authors_text:>9} {ratio:>9} {private * 1e3:>15.1f}{flag}"
        )
    print(
        "cold: (l*, k*) search, all caches cleared (nodes included); warm: nodes cached, "
        "search rerun; table: every M(l, k), cold; authors: their full-table time (not "
        "rerun); ratio = authors / our full table (authors / our search where no table "
        "is timed); FedCP2 plan: gamma grid of 19 values, epsilon = 1, B = 100, cold."
    )


if __name__ == "__main__":
    main()
