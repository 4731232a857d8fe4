"""privconf_sklearn.dask on 10^8 rows: calibration and prediction, time and peak memory.

A diffprivlib Gaussian naive Bayes (epsilon = 2) is trained in memory on the
two-Gaussian design of Romanus and Molinari (2025), Sec. 5.1. Then, on a local cluster
bound to 127.0.0.1 (no dashboard), ``--rows`` calibration rows of the same design,
generated lazily block by block on the workers, calibrate it with
``privconf_sklearn.dask.fit_calibrate`` and ExponQ (epsilon = 1); as many test rows go
through ``predict_set_blocks``, one pass computing coverage, mean set size and singleton
rate. The in-memory path (generate the rows in numpy, ``fit_calibrate``,
``predict_set``) runs on ``--baseline-rows`` rows, data generation included on both
sides; with ``--quick`` (10^5 rows) both paths see the same rows and the benchmark
checks that the two releases are identical. Reported: wall time and rows per second of
each phase, the peak of the workers' summed resident memory (``MemorySampler``, sampled
every 0.25 s), this process's peak, the in-memory path's peak of traced allocations,
and the load average. A tqdm bar follows the phases.

Run:  python -m benchmarks.bench_dask [--rows N] [--chunk C] [--workers W] [--quick]
"""

from __future__ import annotations

import argparse
import os
import resource
import time
import tracemalloc
import warnings

import numpy as np

from privconf_sklearn import PrivateConformalClassifier
from privconf_sklearn.datasets import make_two_gaussians
from privconf_sklearn.mechanisms import ExponQ

N_FEATURES = 8


def _two_gaussian_block(block_id, rows: int, seed: int):
    """One block of Romanus and Molinari's (2025) design, labels in the last column."""
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


def in_memory_data(n_rows: int, chunk: int, seed: int = 0):
    """The rows of :func:`lazy_data`, generated in this process."""
    blocks = [
        _two_gaussian_block(index, min(chunk, n_rows - start), seed)
        for index, start in enumerate(range(0, n_rows, chunk))
    ]
    data = np.concatenate(blocks)
    return data[:, :N_FEATURES], data[:, N_FEATURES].astype(np.int64)


def trained_model():
    """diffprivlib's Gaussian naive Bayes (epsilon = 2) on 6000 rows."""
    from diffprivlib.accountant import BudgetAccountant
    from diffprivlib.models import GaussianNB

    X, y = make_two_gaussians(6000, random_state=0)
    return GaussianNB(
        epsilon=2.0, bounds=(-20.0, 20.0), random_state=0, accountant=BudgetAccountant()
    ).fit(X, y)


def unfitted_wrapper(model):
    return PrivateConformalClassifier(
        model, mechanism=ExponQ(epsilon=1.0), alpha=0.1, random_state=0
    )


def in_memory_path(model, n_rows: int, chunk: int) -> dict:
    """Generate, calibrate and predict in this process (traced peak memory)."""
    tracemalloc.start()
    start = time.perf_counter()
    X, y = in_memory_data(n_rows, chunk, seed=0)
    pcc = unfitted_wrapper(model).fit_calibrate(X, y)
    calibrated = time.perf_counter()
    X, y = in_memory_data(n_rows, chunk, seed=1)
    sets = pcc.predict_set(X, batch_size=chunk)
    coverage = float(sets[np.arange(n_rows), y].mean())
    end = time.perf_counter()
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    return {
        "estimator": pcc,
        "calibrate_seconds": calibrated - start,
        "predict_seconds": end - calibrated,
        "coverage": coverage,
        "traced_peak_mb": peak / 2**20,
    }


def run(n_rows: int, chunk: int, workers: int, memory_limit: str, *, baseline_rows: int,
        processes: bool = True) -> dict:  # fmt: skip
    import dask
    import dask.array as da
    from distributed.diagnostics import MemorySampler
    from tqdm import tqdm

    from privconf_sklearn.dask import fit_calibrate, local_cluster, predict_set_blocks

    model = trained_model()
    result: dict = {"rows": n_rows, "chunk": chunk, "workers": workers}
    with tqdm(total=3, desc="bench_dask", unit="phase") as progress:
        progress.set_postfix_str(f"in memory, {baseline_rows:,} rows")
        baseline = in_memory_path(model, baseline_rows, chunk)
        progress.update()
        X_cal, y_cal = lazy_data(n_rows, chunk, seed=0)
        X_test, y_test = lazy_data(n_rows, chunk, seed=1)
        with local_cluster(
            n_workers=workers, memory_limit=memory_limit, processes=processes
        ) as client:
            result["addresses"] = sorted(client.scheduler_info()["workers"])
            sampler = MemorySampler()
            with sampler.sample("process", interval=0.25):
                progress.set_postfix_str(f"fit_calibrate on dask, {n_rows:,} rows")
                start = time.perf_counter()
                pcc = fit_calibrate(unfitted_wrapper(model), X_cal, y_cal)
                calibrated = time.perf_counter()
                progress.update()
                progress.set_postfix_str(f"predict_set_blocks, {n_rows:,} rows")
                sets = predict_set_blocks(pcc, X_test)
                size = sets.sum(axis=1)
                covered = da.where(y_test == 1, sets[:, 1], sets[:, 0])
                coverage, mean_size, singletons = dask.compute(
                    covered.mean(), size.mean(), (size == 1).mean()
                )
                end = time.perf_counter()
                progress.update()
            if processes:
                rss = client.run(lambda: __import__("psutil").Process().memory_info().rss)
                result["worker_rss_end_mb"] = {k: v / 2**20 for k, v in rss.items()}
    result.update(
        estimator=pcc,
        baseline=baseline,
        baseline_rows=baseline_rows,
        calibrate_seconds=calibrated - start,
        predict_seconds=end - calibrated,
        cluster_peak_mb=float(sampler.to_pandas()["process"].max()) / 2**20,
        client_peak_mb=resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
        coverage=float(coverage),
        mean_set_size=float(mean_size),
        singleton_rate=float(singletons),
    )
    if baseline_rows == n_rows:  # the same rows: the releases must be identical
        ours, theirs = pcc, baseline["estimator"]
        result["same_release"] = bool(
            ours.threshold_ == theirs.threshold_ and ours.calibration_ == theirs.calibration_
        )
    return result


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=10**8)
    parser.add_argument("--chunk", type=int, default=10**6)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--memory-limit", default="2GiB", help="per worker")
    parser.add_argument(
        "--baseline-rows", type=int, default=10**7, help="rows of the in-memory path"
    )
    parser.add_argument(
        "--threads", action="store_true", help="workers as threads of this process (tests)"
    )
    parser.add_argument(
        "--quick", action="store_true", help="10^5 rows in blocks of 2 x 10^4, both paths"
    )
    args = parser.parse_args(argv)
    if args.quick:
        rows, chunk, baseline_rows = 10**5, 2 * 10**4, 10**5
    else:
        rows, chunk, baseline_rows = args.rows, args.chunk, args.baseline_rows
    warnings.filterwarnings("ignore", module="distributed")
    r = run(rows, chunk, args.workers, args.memory_limit, baseline_rows=baseline_rows,
            processes=not args.threads)  # fmt: skip
    base = r["baseline"]
    load = os.getloadavg()
    print(
        f"rows {rows:,} (calibration) + {rows:,} (test) in blocks of {chunk:,}, "
        f"{args.workers} workers ({args.memory_limit} each) at {', '.join(r['addresses'])}"
    )
    print(
        f"dask: fit_calibrate {r['calibrate_seconds']:.1f} s = "
        f"{rows / r['calibrate_seconds'] / 1e6:.2f} M rows/s; predict {r['predict_seconds']:.1f}"
        f" s = {rows / r['predict_seconds'] / 1e6:.2f} M rows/s (data generated on the workers)"
    )
    print(
        f"in memory ({baseline_rows:,} rows, data generated in numpy): fit_calibrate "
        f"{base['calibrate_seconds']:.1f} s = "
        f"{baseline_rows / base['calibrate_seconds'] / 1e6:.2f} M rows/s; predict "
        f"{base['predict_seconds']:.1f} s = {baseline_rows / base['predict_seconds'] / 1e6:.2f}"
        f" M rows/s; traced peak {base['traced_peak_mb']:.0f} MB"
    )
    print(
        f"peak of the workers' summed RSS {r['cluster_peak_mb']:.0f} MB; worker RSS at the "
        f"end {r.get('worker_rss_end_mb', 'n/a (threads)')}; this process "
        f"{r['client_peak_mb']:.0f} MB"
    )
    print(
        f"threshold {r['estimator'].threshold_:.6f} (in memory on its rows: "
        f"{base['estimator'].threshold_:.6f}); coverage {r['coverage']:.4f}, mean set size "
        f"{r['mean_set_size']:.4f}, singletons {r['singleton_rate']:.4f}"
    )
    if "same_release" in r:
        print(f"same rows on both paths: identical release = {r['same_release']}")
    print(f"load average after the run: {load[0]:.2f}, {load[1]:.2f}, {load[2]:.2f}")  # fmt: skip
    return r


if __name__ == "__main__":
    main()
