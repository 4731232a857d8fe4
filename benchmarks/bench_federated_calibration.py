"""Calibration time of the federated mechanisms, against the same order statistic in numpy.

``FedCPQQ().calibrate`` and ``FedCP2QQ(epsilon=1).calibrate`` (input validation, the
split of the scores by agent, the plan with its ``(l*, k*)`` search, every agent's
message and the server's aggregation, all in one process) on Beta(2, 5) scores with
``alpha = 0.1``, at n = 2400 (10 agents of 240), n = 10^6 (100 agents of 10^4) and
n = 10^7 (2000 agents of 5000). "Cold" clears every cache of the plan first
(``bench_fedcp_table.clear_caches``) and is timed once; "warm" reuses the plan the cold
call left. FedCP2-QQ's ``gamma="auto"`` and ``n_bins="auto"`` search grids of ``gamma``
and ``B`` (one frontier search per ``gamma``); above 10^5 only ``gamma=0.3`` is timed
(one frontier search, ``B`` still "auto").
Baselines in the same process: the pooled split-conformal order statistic
(``np.partition``) and FedCP-Avg (one ``np.partition`` per agent, then the mean;
``benchmarks/fedcp_avg.py``).

Run:  python -m benchmarks.bench_federated_calibration [--quick]
"""

from __future__ import annotations

import argparse
import math
from functools import partial

import numpy as np

from privconf_sklearn.mechanisms import FedCP2QQ, FedCPQQ

from ._timing import best_time
from .bench_fedcp_table import clear_caches
from .fedcp_avg import fedcp_avg_threshold

ALPHA = 0.1
#: (label, mechanism, sizes it runs at).
CASES = [
    ("FedCP-QQ", FedCPQQ(), "all"),
    ("FedCP2-QQ eps = 1, gamma auto", FedCP2QQ(epsilon=1.0), "small"),
    ("FedCP2-QQ eps = 1, gamma = 0.3", FedCP2QQ(epsilon=1.0, gamma=0.3), "all"),
]
#: Largest n at which the "small" cases run.
SMALL = 100_000


def run(sizes, repeats):
    rng = np.random.default_rng(0)
    rows = []
    for n, agents in sizes:
        scores = rng.beta(2.0, 5.0, size=n)
        groups = np.repeat(np.arange(agents), n // agents)
        k = math.ceil((n + 1) * (1 - ALPHA))
        count = repeats[n]
        pooled = best_time(lambda s=scores, k=k: np.partition(s, k - 1)[k - 1], count)
        per_agent = np.split(scores, agents)
        average = best_time(lambda a=per_agent: fedcp_avg_threshold(a, ALPHA), count)
        for label, mechanism, where in CASES:
            if where == "small" and n > SMALL:
                continue
            call = partial(mechanism.calibrate, scores, ALPHA, groups=groups)
            cold = best_time(call, 1, clear_caches)
            warm = best_time(call, count)
            rows.append((n, agents, label, cold, warm, pooled, average))
    return rows


def report(rows) -> None:
    print(
        "| n | agents | mechanism | cold (ms) | warm (ms) | np.partition, pooled (ms) "
        "| warm / pooled | FedCP-Avg (ms) | warm / FedCP-Avg |"
    )
    print("|---" * 9 + "|")
    for n, agents, label, cold, warm, pooled, average in rows:
        print(
            f"| {n:,} | {agents} | {label} | {cold * 1e3:.1f} | {warm * 1e3:.3f} | "
            f"{pooled * 1e3:.3f} | {warm / pooled:.1f}x | {average * 1e3:.3f} | "
            f"{warm / average:.1f}x |"
        )


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="n = 2400 and 10^5 only")
    args = parser.parse_args(argv)
    full = [(2400, 10), (10**6, 100), (10**7, 2000)]
    sizes = [(2400, 10), (100_000, 100)] if args.quick else full
    report(run(sizes, repeats={2400: 100, 100_000: 3, 10**6: 2, 10**7: 1}))


if __name__ == "__main__":
    main()
