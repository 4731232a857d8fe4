"""Exact score statistics computed partition by partition on a dask cluster.

:class:`DaskScoreStatistics` answers the questions of
:class:`~privconf_sklearn.mechanisms.ScoreStatistics` from calibration scores that are
never gathered in one place: each answer is one (or a few) passes in which every
partition of the rows computes its scores on a worker and returns a small summary
(bin counts, a few counts, a histogram of integer keys), and the client adds the
summaries up. Counts add up exactly, so each answer is the one the in-memory
:class:`~privconf_sklearn.mechanisms.ScoreArray` gives, and
``calibrate_from_statistics`` makes the very release ``calibrate`` makes.

Scores are recomputed from the features in every pass (a model's outputs on one
partition at a time), so memory stays bounded by a few partitions per worker; the
number of passes is what a mechanism asks: one for ExponQ and DP-APS, a few for split
conformal and P-COQS (see :meth:`DaskScoreStatistics.kth_smallest` and
:class:`_DaskRankCounter`), as many per agent for the federated mechanisms (each agent
is a view of the rows with its id, :meth:`DaskScoreStatistics.agents`).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from ..base import CalibrationScorer
from ..mechanisms import (
    RankCounter,
    ScoreArray,
    ScoreStatistics,
    agent_labels,
    bin_counts,
    count_agent_ids,
    edge_counts,
)
from ._inputs import Partitions

__all__ = ["DaskScoreStatistics"]

#: At most this many scores are gathered on the client (8 MiB of float64); larger
#: order-statistic and rank questions are narrowed by histograms first.
FETCH_LIMIT = 2**20

#: Buckets per histogram pass of :meth:`DaskScoreStatistics.kth_smallest` (as a power of two).
KEY_BITS = 16

#: The dyadic grid of the rank counter's first pass (as in the in-memory counter).
DYADIC_DEPTH = 16
HISTOGRAM_MIN_SCORES = 2**17


# ------------------------------------------------------- per-partition summaries
def _partition_error(exc: Exception, rows: tuple[int, int]) -> Exception:
    """``exc`` (same type) naming the partition's rows of ``X``."""
    return type(exc)(
        f"{exc} [in rows {rows[0]}..{rows[1] - 1} of X: row numbers above count from row {rows[0]}]"
    )


def raw_score_range(
    scorer: CalibrationScorer, X, y, rows: tuple[int, int]
) -> tuple[float, float] | Exception | None:
    """``(min, max)`` of one partition's raw scores (None if empty), or its rows' error.

    Errors are returned, not raised, as by :func:`_clip_counts`.
    """
    try:
        raw = scorer.conformity_scores(X, scorer.encode_targets(y))
    except (TypeError, ValueError) as exc:
        return _partition_error(exc, rows)
    return (float(raw.min()), float(raw.max())) if raw.shape[0] else None


def _clip_counts(
    scorer: CalibrationScorer, X, y, rows: tuple[int, int]
) -> tuple[int, int, float | None] | Exception:
    """Clipping counts and largest clipped score of one partition, or the error its rows raise.

    The error is returned, not raised, so that the client can raise the one of the
    first partition (as in memory, the first bad rows), whichever worker finishes
    first. It keeps its type and names the partition's rows of ``X`` (row numbers
    inside the in-memory message count from the partition's first row).
    """
    try:
        return scorer.unit_scores(X, y).clipping()
    except (TypeError, ValueError) as exc:
        return _partition_error(exc, rows)


def _edge_counts(unit: np.ndarray, edges: np.ndarray) -> np.ndarray:
    return edge_counts(unit, edges)


def _bin_counts(unit: np.ndarray, n_bins: int) -> np.ndarray:
    if unit.shape[0] == 0:
        return np.zeros(n_bins, dtype=np.int64)
    return bin_counts(unit, n_bins)


def _keys(unit: np.ndarray) -> np.ndarray:
    """Integer keys ordered like scores in [0, 1] (``-0.0`` becomes ``0.0``)."""
    return (unit + 0.0).view(np.int64)


def _key_histogram(unit: np.ndarray, lo: int, hi: int, shift: int) -> np.ndarray:
    """Counts of the keys in ``[lo, hi)`` in buckets of ``2**shift`` keys from ``lo``."""
    keys = _keys(unit)
    inside = keys[(keys >= lo) & (keys < hi)]
    return np.bincount((inside - lo) >> shift, minlength=((hi - lo - 1) >> shift) + 1)


def _keys_between(unit: np.ndarray, lo: int, hi: int) -> np.ndarray:
    keys = _keys(unit)
    return keys[(keys >= lo) & (keys < hi)]


def _count_at_most(unit: np.ndarray, points: tuple[float, ...]) -> list[int]:
    return [int(np.count_nonzero(unit <= p)) for p in points]


def _dyadic_histogram(unit: np.ndarray, lower: float, upper: float):
    histogram = bin_counts(unit, 2**DYADIC_DEPTH) if unit.shape[0] else None
    return histogram, int(np.count_nonzero(unit <= lower)), int(np.count_nonzero(unit <= upper))


def _scores_between(unit: np.ndarray, left: float, right: float) -> np.ndarray:
    return unit[(unit > left) & (unit <= right)]


def _count_outside(unit: np.ndarray, lower: float, upper: float) -> tuple[int, int]:
    return int(np.count_nonzero(unit < lower)), int(np.count_nonzero(unit > upper))


def _largest_covered(scorer: CalibrationScorer, X, y, t: float) -> float | None:
    return scorer.unit_scores(X, y).largest_covered(t)


@dataclass(frozen=True)
class _Selection:
    """Some rows of a partition: one agent's (``label``), at ``positions`` among them.

    ``positions`` index the agent's rows of the partition in row order (None: all).
    """

    label: Any
    positions: np.ndarray | None = None


def _on_scores(
    summary: Callable[..., Any], scorer: CalibrationScorer, X, y, groups, selection, *args
):
    """``summary(scores, *args)`` on a partition's scores in [0, 1] (the selected rows)."""
    unit = scorer.unit_scores(X, y).unit
    if selection is not None:
        rows = np.flatnonzero(np.asarray(groups) == selection.label)
        unit = unit[rows if selection.positions is None else rows[selection.positions]]
    return summary(unit, *args)


def _agent_counts(groups, rows: tuple[int, int]) -> tuple[np.ndarray, np.ndarray] | Exception:
    """The distinct agent ids of a partition and their counts, or the ids' error."""
    try:
        return count_agent_ids(groups)
    except ValueError as exc:
        return _partition_error(exc, rows)


def _total(counts: list[np.ndarray]) -> np.ndarray:
    """Element-wise sum of the partitions' count arrays (int64, exact)."""
    total = np.zeros(counts[0].shape[0], dtype=np.int64)
    for part in counts:
        total += part
    return total


def _sum_counts(*counts: np.ndarray) -> np.ndarray:
    """:func:`_total` of a few count arrays (one node of the reduction tree)."""
    return _total(list(counts))


#: Count arrays summed per node of the reduction tree on the workers.
REDUCTION_FAN_IN = 8


# ---------------------------------------------------------------- statistics
class DaskScoreStatistics(ScoreStatistics):
    """:class:`~privconf_sklearn.mechanisms.ScoreStatistics` of scores computed on dask workers.

    Parameters
    ----------
    scorer : CalibrationScorer
        Computes one partition's scores (:class:`~privconf_sklearn.base.CalibrationScorer`).
    partitions : Partitions
        The calibration rows, one lazy ``(X, y)`` piece per partition.

    Notes
    -----
    Every method runs one or more passes over the partitions with
    :func:`dask.compute` (the active ``distributed`` client, if any) and combines the
    per-partition summaries on the client. Only counts, histograms, and at most
    ``FETCH_LIMIT`` scores reach the client.
    """

    def __init__(self, scorer: CalibrationScorer, partitions: Partitions):
        self._scorer = scorer
        self._partitions = partitions
        #: The rows these statistics read: None (all), or one selection per partition.
        self._selections: list[_Selection] | None = None
        #: Rows read in each partition.
        self._counts = np.asarray(partitions.lengths, dtype=np.int64)

    def _view(self, selections: list[_Selection], counts: np.ndarray) -> DaskScoreStatistics:
        """The statistics of some rows (an agent's, or a subset of them)."""
        view = DaskScoreStatistics(self._scorer, self._partitions)
        view._selections, view._counts = selections, counts
        return view

    @property
    def n_samples(self) -> int:
        """Number of scores (rows read)."""
        return int(self._counts.sum())

    @property
    def has_groups(self) -> bool:
        """Whether agent ids were given."""
        return self._partitions.groups is not None

    def map_partitions(self, summary: Callable[..., Any], *args, with_rows: bool = False) -> list:
        """``summary(scorer, X_i, y_i, *args)`` for every partition ``i``, computed by dask.

        With ``with_rows``, each call gets the partition's ``(start, stop)`` row range too.
        """
        import dask
        from dask import delayed

        parts = self._partitions
        ranges = [
            ((start, start + length),) if with_rows else ()
            for start, length in zip(parts.starts, parts.lengths, strict=True)
        ]
        tasks = [
            delayed(summary)(self._scorer, X, y, *args, *rows)
            for X, y, rows in zip(parts.features, parts.targets, ranges, strict=True)
        ]
        return list(dask.compute(*tasks))

    def _score_tasks(self, summary: Callable[..., Any], *args) -> list:
        """One lazy ``summary(scores_i, *args)`` per partition ``i``."""
        from dask import delayed

        parts = self._partitions
        groups = parts.groups or (None,) * len(parts.lengths)
        selections: list[_Selection | None] = [None] * len(parts.lengths)
        if self._selections is not None:
            selections = list(self._selections)
        return [
            delayed(_on_scores)(summary, self._scorer, X, y, g, selection, *args)
            for X, y, g, selection in zip(
                parts.features, parts.targets, groups, selections, strict=True
            )
        ]

    def map_scores(self, summary: Callable[..., Any], *args) -> list:
        """``summary(scores_i, *args)`` on the scores of every partition ``i`` (rows read)."""
        import dask

        return list(dask.compute(*self._score_tasks(summary, *args)))

    def summed_scores(self, summary: Callable[..., np.ndarray], *args) -> np.ndarray:
        """The int64 sum of ``summary(scores_i, *args)`` (count arrays) over the partitions.

        Summed on the workers in a tree of :data:`REDUCTION_FAN_IN` arrays per node, so
        memory holds a few count arrays at a time, not one per partition (at 10^9 rows
        in 1000 partitions, ExponQ's grid of up to 2^24 bins would otherwise keep 1000
        arrays of 134 MB). Integer sums are exact in any order: the same total.
        """
        import dask
        from dask import delayed

        level = self._score_tasks(summary, *args)
        while len(level) > 1:
            level = [
                delayed(_sum_counts)(*level[i : i + REDUCTION_FAN_IN])
                for i in range(0, len(level), REDUCTION_FAN_IN)
            ]
        (total,) = dask.compute(delayed(_sum_counts)(level[0]))
        return total

    def checked_summaries(self, summary: Callable[..., Any]) -> list:
        """:meth:`map_partitions` of a summary that returns its partition's error.

        Raises the error of the first bad partition (as in memory, the first bad rows).
        """
        found = self.map_partitions(summary, with_rows=True)
        for part in found:
            if isinstance(part, Exception):
                raise part
        return found

    def raw_range(self) -> tuple[float, float]:
        """``(min, max)`` of the raw scores (one pass that validates every row)."""
        found = [r for r in self.checked_summaries(raw_score_range) if r is not None]
        return min(r[0] for r in found), max(r[1] for r in found)

    def clip_counts(self) -> tuple[int, int, float | None]:
        """Numbers of raw scores below and above the range, and the largest clipped score.

        One pass that validates every row; raises the error of the first bad partition.
        """
        counts = self.checked_summaries(_clip_counts)
        largest = [c[2] for c in counts if c[2] is not None]
        return (
            sum(c[0] for c in counts),
            sum(c[1] for c in counts),
            max(largest) if largest else None,
        )

    def bin_counts(self, n_bins: int) -> np.ndarray:
        """Sum of the partitions' :func:`bin_counts` (one pass)."""
        return self.summed_scores(_bin_counts, n_bins)

    def edge_counts(self, edges: np.ndarray) -> np.ndarray:
        """Sum of the partitions' :func:`edge_counts` (one pass)."""
        return self.summed_scores(_edge_counts, edges)

    def kth_smallest(self, k: int) -> float:
        """The ``k``-th smallest score, bit for bit.

        Scores in [0, 1] are ordered like the integers of their float64 bit patterns.
        While more than ``FETCH_LIMIT`` scores remain in the key range that holds the
        answer, one pass counts the keys in ``2**KEY_BITS`` equal buckets of that range
        and keeps the bucket of the ``k``-th; then one pass gathers the range's scores.
        A range of ``2**63`` keys is down to one key after four histogram passes.
        """
        lo, hi = 0, int(_keys(np.array([1.0]))[0]) + 1
        below, inside = 0, self.n_samples
        while inside > FETCH_LIMIT and hi - lo > 1:
            shift = max(0, (hi - lo - 1).bit_length() - KEY_BITS)
            histogram = self.summed_scores(_key_histogram, lo, hi, shift)
            cumulative = np.cumsum(histogram)
            bucket = int(np.searchsorted(cumulative, k - below))
            below += int(cumulative[bucket - 1]) if bucket else 0
            inside = int(histogram[bucket])
            lo, hi = lo + (bucket << shift), min(hi, lo + ((bucket + 1) << shift))
        if hi - lo == 1:
            return float(np.array([lo], dtype=np.int64).view(np.float64)[0])
        keys = np.concatenate(self.map_scores(_keys_between, lo, hi))
        rank = k - below - 1
        return float(np.partition(keys, rank)[rank : rank + 1].view(np.float64)[0])

    def rank_counter(self, lower: float, upper: float) -> RankCounter:
        """A counter that narrows by passes until its interval's scores fit on the client."""
        return _DaskRankCounter(self, lower, upper)

    def count_outside(self, lower: float, upper: float) -> tuple[int, int]:
        """``(#{s < lower}, #{s > upper})`` (one pass)."""
        counts = self.map_scores(_count_outside, lower, upper)
        return sum(c[0] for c in counts), sum(c[1] for c in counts)

    def largest_covered(self, t: float) -> float | None:
        """The largest clipped score whose image is at most ``t``, or None (one pass)."""
        found = [v for v in self.map_partitions(_largest_covered, t) if v is not None]
        return max(found) if found else None

    def subset(self, positions: np.ndarray) -> ScoreStatistics:
        """The scores at ``positions`` of an agent's rows (in row order).

        Only agents (:meth:`agents`) have subsets: the federated plans draw them.
        """
        if self._selections is None:
            raise ValueError("Subsets are drawn from one agent's scores (agents()).")
        positions = np.sort(np.asarray(positions, dtype=np.int64))
        ends = np.cumsum(self._counts)
        cuts = np.searchsorted(positions, np.concatenate(([0], ends)))
        selections, counts = [], []
        for i, selection in enumerate(self._selections):
            if selection.positions is not None:
                raise ValueError("No federated plan draws a subset of a subset.")
            local = positions[cuts[i] : cuts[i + 1]] - (ends[i] - self._counts[i])
            selections.append(_Selection(selection.label, local))
            counts.append(local.shape[0])
        return self._view(selections, np.asarray(counts, dtype=np.int64))

    def agents(self) -> list[ScoreStatistics]:
        """One view per agent, agents ordered by their sorted ids (one pass over the ids).

        Raises the in-memory errors for bad ids (NaN, booleans, ids that cannot be
        sorted, fewer than two agents), of the first bad partition.
        """
        import dask
        from dask import delayed

        parts = self._partitions
        if parts.groups is None:
            return super().agents()
        found = dask.compute(
            *(
                delayed(_agent_counts)(g, (start, start + length))
                for g, start, length in zip(parts.groups, parts.starts, parts.lengths, strict=True)
            )
        )
        for part in found:
            if isinstance(part, Exception):
                raise part
        labels = agent_labels(np.concatenate([ids for ids, _ in found]))[0]
        table = np.zeros((len(found), labels.shape[0]), dtype=np.int64)
        for i, (ids, counts) in enumerate(found):
            table[i, np.searchsorted(labels, ids)] = counts
        return [
            self._view([_Selection(label) for _ in found], table[:, j])
            for j, label in enumerate(labels)
        ]


class _DaskRankCounter(RankCounter):
    """Exact ``#{s <= t}`` for a bisection, over passes on the cluster.

    The first pass counts the scores at most ``lower`` and ``upper`` and, on the
    public range [0, 1] with many scores, bins them on the dyadic grid
    ``k / 2**DYADIC_DEPTH`` (answering the bisection's first midpoints, as the
    in-memory counter does). As soon as the current interval ``(left, right]`` holds at
    most ``FETCH_LIMIT`` scores, one pass gathers them and the in-memory counter of
    :class:`~privconf_sklearn.mechanisms.ScoreArray` answers the rest; until then each
    query is one counting pass.
    """

    def __init__(self, statistics: DaskScoreStatistics, lower: float, upper: float):
        self._statistics = statistics
        self._left, self._right, self._point = lower, upper, lower
        self._local: RankCounter | None = None
        self._offset = 0
        self._cumulative: np.ndarray | None = None
        dyadic = lower == 0.0 and upper == 1.0 and statistics.n_samples >= HISTOGRAM_MIN_SCORES
        if dyadic:
            parts = statistics.map_scores(_dyadic_histogram, lower, upper)
            histograms = [h for h, _, _ in parts if h is not None]
            self._cumulative = np.cumsum(_total(histograms))
        else:
            parts = statistics.map_scores(_count_at_most, (lower, upper))
        self._at_most_left = sum(int(p[-2]) for p in parts)
        self._at_most_right = sum(int(p[-1]) for p in parts)

    def _gather_if_small(self) -> None:
        inside = self._at_most_right - self._at_most_left
        if self._local is None and 0 < inside <= FETCH_LIMIT:
            parts = self._statistics.map_scores(_scores_between, self._left, self._right)
            scores = np.concatenate(parts)
            self._local = ScoreArray(scores).rank_counter(self._left, self._right)
            self._offset = self._at_most_left  # the local counts start above ``left``
            self._cumulative = None

    def count_at_most(self, point: float) -> int:
        """``#{i : s_i <= point}`` for ``point`` in the current interval."""
        self._point = point
        if self._cumulative is not None:
            position = math.ldexp(point, DYADIC_DEPTH)  # exact: a power-of-two scaling
            if position == math.floor(position) and 1 <= position < 2**DYADIC_DEPTH:
                return int(self._cumulative[int(position) - 1])
            self._cumulative = None
        if self._local is None and self._at_most_right == self._at_most_left:
            return self._at_most_left  # no score in (left, right]: every point counts the same
        self._gather_if_small()
        if self._local is not None:
            return self._offset + self._local.count_at_most(point)
        return int(sum(c[0] for c in self._statistics.map_scores(_count_at_most, (point,))))

    def narrow(self, keep_lower_half: bool, count: int) -> None:
        """Keep the lower (or upper) half at the last point asked."""
        if keep_lower_half:
            self._right, self._at_most_right = self._point, count
        else:
            self._left, self._at_most_left = self._point, count
        if self._local is not None:
            self._local.narrow(keep_lower_half, count - self._offset)
