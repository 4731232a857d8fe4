"""Time and memory of FedCP plans: the ``(l*, k*)`` search and FedCP2-QQ's grids.

Humbert et al. (2023), Eq. (6): ``(l*, k*) = argmin {M(l, k) >= 1 - alpha}``. Each plan
is made "cold" (every cache of the plan machinery cleared; median of ``--repeats``
runs) and "warm" (the plan cache cleared, the Gauss-Legendre and frontier caches kept);
the peak memory of a cold call is measured with ``tracemalloc`` (numpy buffers
included). Issue 17's targets: FedCP-QQ plans for 100 x 10^5 and 1000 x 10^4 under
2 s, FedCP2-QQ plans (``epsilon=1``, gamma and bins "auto") for 2 x 10^6 and
200 x 10^4 under 1 s, memory under 300 MB. The paper authors' public implementation
(full table by multivariate-hypergeometric sums, their Appendix A.2) was measured at
12.4 min for (10, 100) and 5.4 min for (5, 200) on this kind of machine (not rerun).

Run:  python -m benchmarks.bench_fedcp_table [--quick] [--repeats 1]
"""

from __future__ import annotations

import argparse
import os
import statistics
import time
import tracemalloc

from privconf_sklearn.federated import make_plan
from privconf_sklearn.mechanisms import _fedcp_coverage, _fedcp_plan, _fedcp_search
from privconf_sklearn.mechanisms._gauss_legendre import unit_gauss_legendre

ALPHA = 0.1
#: (m, n, epsilon): FedCP-QQ (epsilon None) and FedCP2-QQ plans.
CASES = [
    (100, 10, None),
    (10, 100, None),
    (50, 20, None),
    (1000, 100, None),
    (5, 200, None),
    (100, 100_000, None),
    (1000, 10_000, None),
    (10, 240, 1.0),
    (2, 1_000_000, 1.0),
    (200, 10_000, 1.0),
]
QUICK = {(100, 10, None), (10, 100, None), (10, 240, 1.0)}
TARGET_SECONDS = {None: 2.0, 1.0: 1.0}


def clear_plans() -> None:
    """Forget plans (the warm state: node and frontier caches kept)."""
    for cached in (
        _fedcp_plan.plan_fedcp_qq,
        _fedcp_plan.plan_fedcp2_qq,
        _fedcp_plan._private_choice,
        _fedcp_plan.min_informative_size,
    ):
        cached.cache_clear()


def clear_caches() -> None:
    """Forget everything the plan machinery caches (the cold state)."""
    clear_plans()
    for cached in (
        _fedcp_search.qq_frontier,
        _fedcp_search.unequal_orders,
        _fedcp_coverage.certify_equal,
        _fedcp_coverage.exact_coverage_column,
        _fedcp_coverage.unequal_coverage_column,
        _fedcp_coverage._server_window,
        _fedcp_coverage._panel_nodes,
        unit_gauss_legendre,
    ):
        cached.cache_clear()


def measure(m: int, n: int, epsilon, repeats: int):
    colds = []
    for _ in range(repeats):
        clear_caches()
        start = time.perf_counter()
        plan = make_plan([n] * m, ALPHA, epsilon=epsilon)
        colds.append(time.perf_counter() - start)
    cold = statistics.median(colds)
    clear_caches()
    tracemalloc.start()
    make_plan([n] * m, ALPHA, epsilon=epsilon)
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    clear_plans()
    start = time.perf_counter()
    make_plan([n] * m, ALPHA, epsilon=epsilon)
    warm = time.perf_counter() - start
    return plan, cold, warm, peak


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="three small cases only")
    parser.add_argument("--repeats", type=int, default=1, help="cold runs per case (median)")
    args = parser.parse_args(argv)
    print(f"alpha = {ALPHA}; load average {os.getloadavg()[0]:.2f}; {args.repeats} cold run(s)")
    print(
        "| (m, n) | protocol | (l, k) | coverage bound | cold (s) | warm (s) | peak MB | target |"
    )
    print("|---" * 8 + "|")
    for m, n, epsilon in CASES:
        if args.quick and (m, n, epsilon) not in QUICK:
            continue
        plan, cold, warm, peak = measure(m, n, epsilon, args.repeats)
        ranks = plan.table_ranks if epsilon is not None else plan.local_ranks
        protocol = "FedCP-QQ" if epsilon is None else f"FedCP2-QQ eps {epsilon:g}"
        target = TARGET_SECONDS[epsilon]
        flag = "ok" if cold <= target else f"over {target:g} s"
        print(
            f"| ({m}, {n}) | {protocol} | ({ranks[0]}, {plan.server_rank}) | "
            f"{plan.coverage_lower_bound:.7f} | {cold:.3f} | {warm:.3f} | "
            f"{peak / 2**20:.0f} | {flag} |"
        )
    print(f"load average after: {os.getloadavg()[0]:.2f}")


if __name__ == "__main__":
    main()
