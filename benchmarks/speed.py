"""The speed suite: every benchmark of the library in one process, ratios printed.

Runs, in order (each prints its own table, with the baseline timed in the same process):

1. ``bench_calibration``: ``calibrate`` of every central mechanism at n = 2400 and 10^7
   against ``np.partition``, alternating; Romanus and Molinari (2025) Table 4 beside;
2. ``bench_federated_calibration``: FedCP-QQ and FedCP2-QQ ``calibrate`` at the same
   sizes, against the same order statistic;
3. ``bench_predict_set``: classification sets and calibration scores (LAC, APS,
   randomised APS, RAPS; 100k x 10, 100k x 1000, 1M x 100) against the textbook numpy
   expressions, alternating, with peak memory;
4. ``bench_regression_predict``: regression intervals against numpy and MAPIE,
   alternating;
5. ``bench_fedcp_table``: the ``(l*, k*)`` search over Humbert et al.'s ``M(l, k)``;
6. ``bench_dask``: the scale-out recipe on 10^8 rows (time and peak memory);
7. ``bench_exact_samplers``: the exact exponential-mechanism and discrete Laplace
   samplers against the floating-point samplers they replace, alternating.

Where a benchmark compares with a baseline, the two run alternately (A B A B ...) and
the ratio is the median of the per-round ratios with their min-max
(``benchmarks/_timing.py``).

The machine's load average is printed before and after each benchmark: other jobs
inflate absolute times (ratios much less). ``--quick`` runs every benchmark at small
sizes (what CI checks); ``--only NAME`` runs some of them.

Run:  python -m benchmarks.speed [--quick] [--only bench_calibration ...]
"""

from __future__ import annotations

import argparse
import importlib
import platform
import sys
import time

import numpy as np

from benchmarks._timing import load_average

#: (module, arguments for the full run, arguments for --quick).
SUITE = [
    ("bench_calibration", [], ["--quick"]),
    ("bench_federated_calibration", [], ["--quick"]),
    ("bench_predict_set", [], ["--quick"]),
    ("bench_regression_predict", ["--repeats", "20"], ["--quick", "--repeats", "3"]),
    ("bench_fedcp_table", [], ["--repeats", "1"]),
    ("bench_dask", [], ["--quick"]),
    ("bench_exact_samplers", [], ["--quick"]),
    ("bench_risk_control", [], ["--quick"]),
]


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="small sizes (CI)")
    parser.add_argument("--only", nargs="+", choices=[name for name, _, _ in SUITE])
    args = parser.parse_args(argv)
    print(
        f"python {platform.python_version()}, numpy {np.__version__}, "
        f"{platform.machine()}, {load_average()}"
    )
    for name, full, quick in SUITE:
        if args.only and name not in args.only:
            continue
        module = importlib.import_module(f"benchmarks.{name}")
        arguments = quick if args.quick else full
        print(f"\n## {name} {' '.join(arguments)}\n\n({load_average()})\n", flush=True)
        start = time.perf_counter()
        module.main(arguments)
        print(f"\n({name}: {time.perf_counter() - start:.1f} s; {load_average()})", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
