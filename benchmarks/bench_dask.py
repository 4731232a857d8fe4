"""The scale-out recipe of ``privconf_sklearn.dask`` on 10^8 rows: time and peak memory.

A diffprivlib Gaussian naive Bayes (epsilon = 2) calibrated with ExponQ
(epsilon = 1) on paper 002's simulated data; then 10^8 test rows of the same
distribution, generated lazily block by block on the workers (``--rows``), go through
``predict_set_blocks`` on a local cluster bound to 127.0.0.1 (no dashboard). One pass
computes coverage, mean set size and singleton rate, so no set is ever held in full.
Reported: wall time, rows per second, and memory: the peak of the workers' summed
resident memory (``MemorySampler``, sampled every 0.25 s), each worker's resident
memory at the end, and this process's peak. The in-memory baseline is ``predict_set``
on one block in this process.

Run:  python -m benchmarks.bench_dask [--rows N] [--chunk C] [--workers W] [--quick]
"""

from __future__ import annotations

import argparse
import os
import resource
import time
import warnings

import numpy as np

from privconf_sklearn import PrivateConformalClassifier
from privconf_sklearn.datasets import make_two_gaussians
from privconf_sklearn.mechanisms import ExponQ

N_FEATURES = 8


def _two_gaussian_block(block_id, rows: int, seed: int):
    """Rows of paper 002's design for one block, labels in the last column."""
    rng = np.random.default_rng([seed, block_id])
    y = rng.integers(0, 2, size=rows)
    mean = np.where(y == 0, 0.8, -1.0)[:, None]
    scale = np.sqrt(np.where(y == 0, 7.0, 8.0))[:, None]
    X = mean + scale * rng.standard_normal((rows, N_FEATURES))
    return np.column_stack([X, y])


def lazy_data(n_rows: int, chunk: int, seed: int = 0):
    """Features and labels as dask arrays, each block generated where it is used."""
    import dask.array as da
    from dask import delayed

    blocks = []
    for index, start in enumerate(range(0, n_rows, chunk)):
        rows = min(chunk, n_rows - start)
        block = delayed(_two_gaussian_block)(index, rows, seed)
        blocks.append(da.from_delayed(block, shape=(rows, N_FEATURES + 1), dtype=np.float64))
    data = da.concatenate(blocks, axis=0)
    return data[:, :N_FEATURES], data[:, N_FEATURES].astype(np.int64)


def calibrated_classifier():
    from diffprivlib.accountant import BudgetAccountant
    from diffprivlib.models import GaussianNB

    X, y = make_two_gaussians(10000, random_state=0)
    model = GaussianNB(
        epsilon=2.0, bounds=(-20.0, 20.0), random_state=0, accountant=BudgetAccountant()
    ).fit(X[:6000], y[:6000])
    return PrivateConformalClassifier(
        model, mechanism=ExponQ(epsilon=1.0), alpha=0.1, random_state=0
    ).fit_calibrate(X[6000:8400], y[6000:8400])


def run(n_rows: int, chunk: int, workers: int, memory_limit: str):
    import dask
    import dask.array as da
    from distributed.diagnostics import MemorySampler

    from privconf_sklearn.dask import local_cluster, predict_set_blocks

    pcc = calibrated_classifier()
    block = lazy_data(chunk, chunk, seed=1)[0].compute()
    start = time.perf_counter()
    pcc.predict_set(block)
    in_memory = time.perf_counter() - start

    X, y = lazy_data(n_rows, chunk)
    with local_cluster(n_workers=workers, memory_limit=memory_limit) as client:
        addresses = sorted(client.scheduler_info()["workers"])
        sampler = MemorySampler()
        start = time.perf_counter()
        with sampler.sample("process", interval=0.25):
            sets = predict_set_blocks(pcc, X)
            size = sets.sum(axis=1)
            covered = da.where(y == 1, sets[:, 1], sets[:, 0])
            coverage, mean_size, singletons = dask.compute(
                covered.mean(), size.mean(), (size == 1).mean()
            )
        seconds = time.perf_counter() - start
        per_worker = client.run(lambda: __import__("psutil").Process().memory_info().rss)
    cluster_peak = float(sampler.to_pandas()["process"].max())
    return {
        "rows": n_rows,
        "chunk": chunk,
        "workers": workers,
        "addresses": addresses,
        "seconds": seconds,
        "rows_per_second": n_rows / seconds,
        "in_memory_seconds_per_chunk": in_memory,
        "cluster_peak_mb": cluster_peak / 2**20,
        "worker_rss_end_mb": {k: v / 2**20 for k, v in per_worker.items()},
        "client_peak_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
        "coverage": float(coverage),
        "mean_set_size": float(mean_size),
        "singleton_rate": float(singletons),
        "threshold": pcc.threshold_,
    }


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=10**8)
    parser.add_argument("--chunk", type=int, default=10**6)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--memory-limit", default="2GiB", help="per worker")
    parser.add_argument("--quick", action="store_true", help="10^6 rows in blocks of 10^5")
    args = parser.parse_args(argv)
    rows, chunk = (10**6, 10**5) if args.quick else (args.rows, args.chunk)
    warnings.filterwarnings("ignore", module="distributed")
    result = run(rows, chunk, args.workers, args.memory_limit)
    load = os.getloadavg()
    print(
        f"rows {result['rows']:,} in blocks of {result['chunk']:,}, {args.workers} workers "
        f"({args.memory_limit} each) at {', '.join(result['addresses'])}"
    )
    print(
        f"wall time {result['seconds']:.1f} s = {result['rows_per_second'] / 1e6:.2f} M rows/s "
        f"(in memory, one process: {chunk / result['in_memory_seconds_per_chunk'] / 1e6:.2f} "
        "M rows/s per block)"
    )
    print(
        f"peak of the workers' summed RSS {result['cluster_peak_mb']:.0f} MB; "
        f"worker RSS at the end {result['worker_rss_end_mb']}; this process "
        f"{result['client_peak_mb']:.0f} MB"
    )
    print(
        f"coverage {result['coverage']:.4f}, mean set size {result['mean_set_size']:.4f}, "
        f"singletons {result['singleton_rate']:.4f}, threshold {result['threshold']:.6f}"
    )
    print(f"load average after the run: {load[0]:.2f}, {load[1]:.2f}, {load[2]:.2f}")  # fmt: skip
    return result


if __name__ == "__main__":
    main()
