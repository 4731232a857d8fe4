"""Prediction over the row blocks of a dask array, and a local cluster on the loopback.

Prediction is embarrassingly parallel over rows: :func:`predict_set_blocks` maps
``predict_set`` over the row blocks of a dask array. Each task receives one block of
rows and returns its sets; blocks never meet, so the result is identical to
``estimator.predict_set`` on the whole array, and the released threshold is what every
block uses: prediction reads no calibration data and spends no privacy.
"""

from __future__ import annotations

from contextlib import contextmanager

import numpy as np
from sklearn.base import is_classifier
from sklearn.utils.validation import check_is_fitted

__all__ = ["local_cluster", "predict_set_blocks"]


def _predict_block(block: np.ndarray, estimator) -> np.ndarray:
    return estimator.predict_set(block)


def predict_set_blocks(estimator, X):
    """``estimator.predict_set`` mapped over the row blocks of a dask array.

    Parameters
    ----------
    estimator : PrivateConformalClassifier or PrivateConformalRegressor
        Fitted and calibrated.
    X : dask.array.Array of shape (n_samples, n_features)
        Features; any row chunking. Column chunks are merged into one (a model needs
        whole rows).

    Returns
    -------
    dask.array.Array
        Lazy prediction sets with ``X``'s row chunks: bool ``(n_samples, n_classes)``
        for a classifier (columns in ``estimator.classes_`` order), float
        ``(n_samples, 2)`` lower and upper bounds for a regressor.

    Raises
    ------
    sklearn.exceptions.NotFittedError
        If ``estimator`` is not calibrated.
    ValueError
        If ``X`` is not a two-dimensional dask array.
    """
    import dask.array as da

    check_is_fitted(estimator, "calibration_")
    if not isinstance(X, da.Array) or X.ndim != 2:
        raise ValueError(
            f"X must be a two-dimensional dask array; got {type(X).__name__} "
            f"with ndim={getattr(X, 'ndim', None)}."
        )
    if X.numblocks[1] > 1:
        X = X.rechunk({1: -1})
    dtype: np.dtype
    if is_classifier(estimator):
        width, dtype = len(estimator.classes_), np.dtype(bool)
    else:
        width, dtype = 2, np.dtype(np.float64)
    return X.map_blocks(
        _predict_block,
        estimator,
        dtype=dtype,
        chunks=(X.chunks[0], (width,)),
        meta=np.empty((0, width), dtype=dtype),
    )


@contextmanager
def local_cluster(n_workers: int = 2, *, threads_per_worker: int = 1, memory_limit="2GiB",
                  processes: bool = True):  # fmt: skip
    """A ``dask.distributed`` cluster on this machine, reachable from 127.0.0.1 only.

    Scheduler and workers listen on TCP on the loopback interface (also with
    ``processes=False``, where dask would otherwise use in-process transport). The
    dashboard is disabled; the scheduler's remaining HTTP endpoint listens on the loopback
    as well, at a free port (two clusters on one machine do not clash), and serves only
    dask's health check (``/health``).
    Yields the connected ``Client`` (the default scheduler inside the block) and closes
    cluster and client on exit.

    Parameters
    ----------
    n_workers : int, default=2
        Worker processes (threads if ``processes=False``).
    threads_per_worker : int, default=1
        Threads per worker.
    memory_limit : str or int, default="2GiB"
        Per-worker memory limit; workers spill, pause and are restarted past it.
    processes : bool, default=True
        Separate worker processes (``False``: threads in this process, for tests).
    """
    import dask
    from distributed import Client, LocalCluster

    # The scheduler always serves HTTP: on the loopback, at a free port (dask's default,
    # 8787, clashes with any other cluster), with the dashboard off and only the health
    # check among dask's pages (no worker lists, identities or proxies). Workers likewise.
    only_health = ["distributed.http.health"]
    with (
        dask.config.set(
            {
                "distributed.scheduler.http.routes": only_health,
                "distributed.worker.http.routes": only_health,
            }
        ),
        LocalCluster(
            n_workers=n_workers,
            threads_per_worker=threads_per_worker,
            processes=processes,
            memory_limit=memory_limit,
            host="127.0.0.1",
            protocol="tcp://",
            dashboard_address="127.0.0.1:0",
            scheduler_kwargs={"dashboard": False},
            worker_dashboard_address=None,
        ) as cluster,
        Client(cluster) as client,
    ):
        yield client
