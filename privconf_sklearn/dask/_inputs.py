"""The dask inputs of ``fit_calibrate``: checked, aligned and cut into row partitions.

``X`` is a two-dimensional dask array or a dask DataFrame; ``y`` and ``groups`` are dask
arrays, dask Series / DataFrames or in-memory arrays. Each becomes one lazy piece per
partition of ``X``'s rows, so that partition ``i`` of every input holds the same rows.
The partitions' lengths are taken from the dask arrays' chunks where they are known,
and counted in one pass otherwise (a dask DataFrame does not know them).
"""

from __future__ import annotations

import sys
from dataclasses import dataclass
from typing import Any

import numpy as np

__all__ = ["Partitions", "partition_inputs"]


@dataclass(frozen=True)
class Partitions:
    """Row partitions of the calibration inputs.

    Attributes
    ----------
    features, targets : tuple of dask.delayed.Delayed
        ``X`` and ``y`` of each partition (a numpy array or a pandas object).
    groups : tuple of dask.delayed.Delayed or None
        The agent ids of each partition, when given.
    lengths : tuple of int
        Rows per partition.
    """

    features: tuple
    targets: tuple
    groups: tuple | None
    lengths: tuple[int, ...]

    @property
    def n_samples(self) -> int:
        """Total number of rows."""
        return int(sum(self.lengths))

    @property
    def starts(self) -> tuple[int, ...]:
        """Index of the first row of each partition."""
        return tuple(int(v) for v in np.cumsum((0, *self.lengths))[:-1])


def _is_dask_array(value) -> bool:
    import dask.array as da

    return isinstance(value, da.Array)


def _is_dask_frame(value) -> bool:
    """A dask DataFrame or Series (only possible if dask.dataframe is imported)."""
    dataframe = sys.modules.get("dask.dataframe")
    return dataframe is not None and isinstance(value, dataframe.DataFrame | dataframe.Series)


def _known_rows(array):
    """A dask array whose row chunk sizes are known (computed if they are not)."""
    if any(np.isnan(size) for size in array.chunks[0]):
        array = array.compute_chunk_sizes()
    return array


def _check_features(X):
    if _is_dask_array(X):
        if X.ndim != 2:
            raise ValueError(
                f"X must be two-dimensional (rows of features); got a dask array with "
                f"ndim={X.ndim}."
            )
        return X.rechunk({1: -1}) if X.numblocks[1] > 1 else X
    if _is_dask_frame(X):
        if X.ndim != 2:
            raise TypeError(
                "X must be a dask DataFrame or a two-dimensional dask array; got a dask "
                "Series (one feature: use series.to_frame())."
            )
        return X
    raise TypeError(
        "privconf_sklearn.dask.fit_calibrate takes X as a dask array or a dask DataFrame; "
        f"got {type(X).__name__}. For data in memory use estimator.fit_calibrate(X, y)."
    )


def _length_mismatch(name: str, n_rows: int, n_given: int) -> ValueError:
    if name == "y":
        return ValueError(f"X has {n_rows} rows but y has {n_given}: they must match.")
    return ValueError(
        f"groups has {n_given} entries but X has {n_rows} rows: give one agent id per row."
    )


def _column(name: str, value, lengths: tuple[int, ...], frame_lengths) -> tuple:
    """One lazy piece of ``value`` per partition of the given lengths."""
    import dask.array as da

    n_rows = int(sum(lengths))
    if _is_dask_frame(value):
        if tuple(frame_lengths) == lengths:
            return tuple(value.to_delayed(optimize_graph=False))
        value = value.to_dask_array(lengths=list(frame_lengths))
    elif not _is_dask_array(value):
        value = np.asarray(value)
        if value.ndim == 0:
            raise ValueError(f"{name} must hold one entry per row; got the scalar {value!r}.")
        if value.shape[0] != n_rows:
            raise _length_mismatch(name, n_rows, value.shape[0])
        value = da.from_array(value, chunks=(lengths, *value.shape[1:]))
    if value.ndim == 0:
        raise ValueError(f"{name} must hold one entry per row; got a zero-dimensional array.")
    value = _known_rows(value)
    if value.shape[0] != n_rows:
        raise _length_mismatch(name, n_rows, value.shape[0])
    value = value.rechunk({0: lengths, **{axis: -1 for axis in range(1, value.ndim)}})
    pieces = value.to_delayed(optimize_graph=False)
    return tuple(pieces.reshape(pieces.shape[0], -1)[:, 0])


def partition_inputs(X, y, groups=None) -> Partitions:
    """Check the inputs and cut them into the row partitions of ``X``.

    Raises
    ------
    TypeError
        If ``X`` is not a dask array or DataFrame.
    ValueError
        If ``X`` is not two-dimensional or the inputs have different numbers of rows.
    """
    import dask

    X = _check_features(X)
    frames: dict[str, Any] = {
        name: value
        for name, value in (("X", X), ("y", y), ("groups", groups))
        if value is not None and _is_dask_frame(value)
    }
    counted = dict(
        zip(
            frames,
            dask.compute(*(value.map_partitions(len) for value in frames.values())),
            strict=True,
        )
    )
    counted = {name: tuple(int(v) for v in lengths) for name, lengths in counted.items()}
    if "X" in counted:
        lengths = counted["X"]
        features = tuple(X.to_delayed(optimize_graph=False))
    else:
        X = _known_rows(X)
        lengths = tuple(int(v) for v in X.chunks[0])
        features = tuple(X.to_delayed(optimize_graph=False)[:, 0])
    targets = _column("y", y, lengths, counted.get("y"))
    agents = None if groups is None else _column("groups", groups, lengths, counted.get("groups"))
    return Partitions(features, targets, agents, lengths)
