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
import importlib
import os
import pkgutil
import statistics
import time
import tracemalloc

from privconf_sklearn.federated import make_plan
from privconf_sklearn.mechanisms import fedcp

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


def _caches(plans_only: bool) -> list:
    """The ``lru_cache`` functions of the FedCP modules (the plan modules' only if asked)."""
    found = []
    for module in pkgutil.iter_modules(fedcp.__path__, fedcp.__name__ + "."):
        if plans_only and not module.name.endswith(("._plan", "._choice")):
            continue
        for value in vars(importlib.import_module(module.name)).values():
            if callable(getattr(value, "cache_clear", None)):
                found.append(value)
    return found


def clear_plans() -> None:
    """Forget plans (the warm state: node, coverage and frontier caches kept)."""
    for cached in _caches(plans_only=True):
        cached.cache_clear()


def clear_caches() -> None:
    """Forget everything the plan machinery caches (the cold state)."""
    for cached in _caches(plans_only=False):
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
