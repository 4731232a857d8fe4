"""What a mechanism reads from its calibration scores: the score-statistics protocol.

Every mechanism of the library releases its threshold from a few exact statistics of
the scores in [0, 1], never from the individual scores themselves:

- ExponQ, DP-APS and the FedCP2-QQ agents: bin counts on a public grid
  (:meth:`ScoreStatistics.bin_counts`);
- split conformal and the FedCP-QQ agents: one order statistic
  (:meth:`ScoreStatistics.kth_smallest`);
- P-COQS: the exact counts ``#{s <= t}`` its noisy binary search asks for
  (:meth:`ScoreStatistics.rank_counter`), and the clipping counts of its owner
  diagnostics (:meth:`ScoreStatistics.count_outside`);
- the federated mechanisms: the same per agent (:meth:`ScoreStatistics.agents`), on a
  random subset of an agent's scores where the plan asks for one
  (:meth:`ScoreStatistics.subset`).

:class:`ScoreStatistics` is that list of questions. :class:`ScoreArray` answers them
from scores held in memory (what :meth:`QuantileMechanism.calibrate
<privconf_sklearn.mechanisms.QuantileMechanism.calibrate>` uses); another implementation
can answer them from scores spread over a cluster (:mod:`privconf_sklearn.dask`), and
:meth:`QuantileMechanism.calibrate_from_statistics
<privconf_sklearn.mechanisms.QuantileMechanism.calibrate_from_statistics>` then runs the
very code of the in-memory release: as long as the answers are exact, the release is
the same, noise draw for noise draw.
"""

from __future__ import annotations

import math
from abc import ABCMeta, abstractmethod
from bisect import bisect_right
from collections.abc import Sequence

import numpy as np

from .._validation import check_unit_scores
from ._binning import bin_counts

__all__ = [
    "RankCounter",
    "ScoreArray",
    "ScoreStatistics",
    "agent_labels",
    "check_agent_count",
    "check_agent_ids",
    "count_agent_ids",
    "distinct_agent_ids",
    "edge_counts",
]


class RankCounter(metaclass=ABCMeta):
    """Exact counts ``#{s <= t}`` for a bisection of an interval ``[lower, upper]``.

    The caller asks :meth:`count_at_most` at the midpoint of its current interval and
    then says with :meth:`narrow` which half it keeps, so that an implementation may
    forget the scores outside the interval and answer later questions from fewer
    scores (or from a table computed in advance). Whatever it does, every answer is
    the exact count over all the scores.
    """

    @abstractmethod
    def count_at_most(self, point: float) -> int:
        """``#{i : s_i <= point}`` for ``point`` inside the current interval."""

    @abstractmethod
    def narrow(self, keep_lower_half: bool, count: int) -> None:
        """The interval becomes its lower (or upper) half at the last point asked.

        ``count`` is the answer to that last question.
        """


class ScoreStatistics(metaclass=ABCMeta):
    """The exact statistics of calibration scores in [0, 1] that mechanisms release from.

    Implementations answer each question exactly, as if computed on all the scores at
    once; :class:`ScoreArray` holds the scores in memory. Mechanisms call these methods
    from :meth:`QuantileMechanism.calibrate_from_statistics
    <privconf_sklearn.mechanisms.QuantileMechanism.calibrate_from_statistics>`, only
    after they have fixed their parameters from public quantities (``n_samples``,
    ``alpha`` and their budget) and checked that the request is feasible: an infeasible
    request asks nothing.

    Scores are validated by whoever builds the statistics: values in [0, 1], finite.
    """

    @property
    @abstractmethod
    def n_samples(self) -> int:
        """Number of scores (public, as for every mechanism)."""

    @property
    def has_groups(self) -> bool:
        """Whether the scores carry agent ids (for the federated mechanisms)."""
        return False

    @abstractmethod
    def bin_counts(self, n_bins: int) -> np.ndarray:
        """Counts on the uniform grid ``j / n_bins``, exactly as :func:`bin_counts`.

        Parameters
        ----------
        n_bins : int
            Number of bins ``m``.

        Returns
        -------
        ndarray of shape (n_bins,), dtype int64
            ``counts[j - 1] = #{i : s_i in I_j}`` with ``I_1 = [0, 1/m]`` and
            ``I_j = ((j - 1)/m, j/m]`` (the floating-point comparisons with
            ``fl(j / m)``).
        """

    @abstractmethod
    def edge_counts(self, edges: np.ndarray) -> np.ndarray:
        """Counts in the bins of a public, strictly increasing grid with top edge 1.

        ``counts[j - 1] = #{i : e_{j-1} < s_i <= e_j}`` (``e_0 = -inf``): each score
        counts at the first edge at or above it, the floating-point comparisons of
        prediction time (:func:`edge_counts`). For non-uniform grids
        (:class:`~privconf_sklearn.mechanisms.LogGrid`).

        Parameters
        ----------
        edges : ndarray of float64 of shape (m,)

        Returns
        -------
        ndarray of shape (m,), dtype int64
        """

    @abstractmethod
    def kth_smallest(self, k: int) -> float:
        """The ``k``-th smallest score, ``1 <= k <= n_samples``, bit for bit."""

    @abstractmethod
    def rank_counter(self, lower: float, upper: float) -> RankCounter:
        """A fresh :class:`RankCounter` for a bisection of ``[lower, upper]``."""

    @abstractmethod
    def count_outside(self, lower: float, upper: float) -> tuple[int, int]:
        """``(#{s < lower}, #{s > upper})``."""

    @abstractmethod
    def subset(self, positions: np.ndarray) -> ScoreStatistics:
        """The statistics of the scores at ``positions`` (indices into the scores' order).

        The order of the scores is the order of the rows (for an agent from
        :meth:`agents`: the order of that agent's rows). Used for the random subsets of
        the federated plans; ``positions`` are distinct.
        """

    def agents(self) -> list[ScoreStatistics]:
        """One :class:`ScoreStatistics` per agent, agents ordered by their sorted ids.

        Raises
        ------
        ValueError
            If the scores carry no agent ids, or the ids are not valid (NaN, booleans,
            ids that cannot be sorted, fewer than two agents; see :func:`agent_labels`).
        """
        raise ValueError("These scores carry no agent ids (groups).")

    def batch_bin_counts(self, parts: Sequence[ScoreStatistics], n_bins: int) -> list[np.ndarray]:
        """``[part.bin_counts(n_bins) for part in parts]``, perhaps in one go.

        ``parts`` come from :meth:`agents` (or their :meth:`subset`) of these
        statistics; an implementation that reads its scores in passes answers them all
        in one pass.
        """
        return [part.bin_counts(n_bins) for part in parts]

    def batch_kth_smallest(
        self, parts: Sequence[ScoreStatistics], ranks: Sequence[int]
    ) -> list[float]:
        """``[part.kth_smallest(k) for part, k in zip(parts, ranks)]``, perhaps in one go."""
        return [part.kth_smallest(k) for part, k in zip(parts, ranks, strict=True)]


# ------------------------------------------------------------------ agents
def edge_counts(scores: np.ndarray, edges: np.ndarray) -> np.ndarray:
    """Counts of scores in the bins of a public grid: ``#{i : e_{j-1} < s_i <= e_j}``.

    The binning of :meth:`ScoreStatistics.edge_counts` (``e_0 = -inf``): each score
    counts at the first edge at or above it, the comparison ``score <= e_j`` of
    prediction time. Counts of blocks of scores add up to the counts of all of them.

    Parameters
    ----------
    scores : ndarray of float64 of shape (n_scores,)
        Scores in [0, 1].
    edges : ndarray of float64 of shape (m,)
        A strictly increasing grid with top edge 1.

    Returns
    -------
    ndarray of shape (m,), dtype int64
    """
    index = np.searchsorted(edges, scores, side="left")
    return np.bincount(index, minlength=edges.shape[0])[: edges.shape[0]].astype(np.int64)


def check_agent_ids(groups: np.ndarray) -> None:
    """Refuse NaN or infinite agent ids and booleans (any block of the rows).

    Raises
    ------
    ValueError
        If ``groups`` holds NaN or infinite labels, or booleans.
    """
    if groups.dtype.kind == "f" and not np.isfinite(groups).all():
        bad = groups[~np.isfinite(groups)][:3].tolist()
        raise ValueError(f"groups must hold finite agent ids; got {bad}.")
    if groups.dtype.kind == "b":
        raise ValueError("groups must hold agent ids (ints or strings), not booleans.")
    if groups.dtype.kind == "O" and any(
        isinstance(g, float) and not np.isfinite(g) for g in groups.tolist()
    ):
        raise ValueError("groups must hold finite agent ids; got NaN or infinite values.")


def distinct_agent_ids(groups: np.ndarray, **unique_options):
    """:func:`numpy.unique` of agent ids, refusing ids that cannot be sorted.

    Raises
    ------
    ValueError
        If the ids cannot be sorted (e.g. ints mixed with strings).
    """
    try:
        return np.unique(groups, **unique_options)
    except TypeError as exc:
        raise ValueError(
            "groups must hold sortable agent ids of one type (e.g. all int or all str)."
        ) from exc


def check_agent_count(labels: np.ndarray) -> None:
    """Refuse fewer than two distinct agents."""
    if labels.shape[0] < 2:
        raise ValueError(
            "Federated calibration needs at least two agents; groups has a single "
            f"distinct value {labels.tolist()!r}."
        )


def count_agent_ids(groups) -> tuple[np.ndarray, np.ndarray]:
    """The sorted distinct agent ids among some rows, and how many rows each has.

    The check :func:`agent_labels` makes on every id, for any block of the rows (a
    block may hold a single agent): an implementation of :class:`ScoreStatistics` that
    reads the ids block by block adds the blocks' counts up, then checks the whole
    list of ids with :func:`agent_labels`.

    Parameters
    ----------
    groups : array-like of shape (n_rows,)
        Agent id of each row.

    Returns
    -------
    labels, counts : ndarray
        As :func:`numpy.unique` with ``return_counts``.

    Raises
    ------
    ValueError
        If ``groups`` holds NaN or infinite labels, booleans, or labels that cannot be
        sorted.
    """
    groups = np.asarray(groups)
    check_agent_ids(groups)
    return distinct_agent_ids(groups, return_counts=True)


def agent_labels(groups: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The sorted distinct agent ids of ``groups``, each row's agent and each agent's size.

    Returns
    -------
    labels, inverse, counts : ndarray
        As :func:`numpy.unique` with ``return_inverse`` and ``return_counts``.

    Raises
    ------
    ValueError
        If ``groups`` holds NaN or infinite labels, booleans, labels that cannot be
        sorted, or fewer than two distinct agents.
    """
    check_agent_ids(groups)
    labels, inverse, counts = distinct_agent_ids(groups, return_inverse=True, return_counts=True)
    check_agent_count(labels)
    return labels, inverse.reshape(-1), counts


def split_by_agent(scores: np.ndarray, groups: np.ndarray) -> list[np.ndarray]:
    """The scores of each agent (rows in their order), agents ordered by sorted label."""
    _, inverse, counts = agent_labels(groups)
    order = np.argsort(inverse, kind="stable")
    return np.split(scores[order], np.cumsum(counts)[:-1])


# --------------------------------------------------------------- in memory
class ScoreArray(ScoreStatistics):
    """:class:`ScoreStatistics` of scores held in memory.

    Parameters
    ----------
    scores : array-like of shape (n_samples,)
        Scores in [0, 1] (validated: one-dimensional, not empty, finite, in range).
    groups : array-like of shape (n_samples,), default=None
        Agent id of each score, for the federated mechanisms.

    Examples
    --------
    >>> import numpy as np
    >>> from privconf_sklearn.mechanisms import ExponQ, ScoreArray
    >>> scores = np.random.default_rng(0).uniform(size=5000)
    >>> statistics = ScoreArray(scores)
    >>> statistics.bin_counts(4).tolist(), statistics.kth_smallest(1) == float(scores.min())
    ([1276, 1231, 1223, 1270], True)
    >>> mechanism = ExponQ(epsilon=1.0)
    >>> a = mechanism.calibrate_from_statistics(statistics, 0.1, random_state=0)
    >>> b = mechanism.calibrate(scores, 0.1, random_state=0)
    >>> a.threshold == b.threshold
    True
    """

    def __init__(self, scores, groups=None):
        scores = check_unit_scores(scores)
        if groups is not None:
            groups = np.asarray(groups)
            if groups.ndim != 1 or groups.shape[0] != scores.shape[0]:
                raise ValueError(
                    f"groups must be one-dimensional with one entry per score "
                    f"({scores.shape[0]}); got shape {groups.shape}."
                )
        self._scores = scores
        self._groups = groups

    @classmethod
    def _checked(cls, scores: np.ndarray, groups: np.ndarray | None = None) -> ScoreArray:
        """Wrap scores (and groups) the caller has validated already."""
        statistics = cls.__new__(cls)
        statistics._scores = scores
        statistics._groups = groups
        return statistics

    @property
    def scores(self) -> np.ndarray:
        """The scores (read them, do not modify them)."""
        return self._scores

    @property
    def groups(self) -> np.ndarray | None:
        """The agent id of each score, or None (read them, do not modify them)."""
        return self._groups

    @property
    def n_samples(self) -> int:
        """Number of scores."""
        return int(self._scores.shape[0])

    @property
    def has_groups(self) -> bool:
        """Whether agent ids were given."""
        return self._groups is not None

    def bin_counts(self, n_bins: int) -> np.ndarray:
        """:func:`~privconf_sklearn.mechanisms.expon_q.bin_counts` of the scores."""
        return bin_counts(self._scores, n_bins)

    def edge_counts(self, edges: np.ndarray) -> np.ndarray:
        """:func:`edge_counts` of the scores."""
        return edge_counts(self._scores, edges)

    def kth_smallest(self, k: int) -> float:
        """``np.partition(scores, k - 1)[k - 1]``."""
        return float(np.partition(self._scores, k - 1)[k - 1])

    def rank_counter(self, lower: float, upper: float) -> RankCounter:
        """A counter that keeps the scores of the current interval only."""
        return _RankCounter(self._scores, lower, upper)

    def count_outside(self, lower: float, upper: float) -> tuple[int, int]:
        """``(#{s < lower}, #{s > upper})``."""
        scores = self._scores
        return int(np.count_nonzero(scores < lower)), int(np.count_nonzero(scores > upper))

    def subset(self, positions: np.ndarray) -> ScoreArray:
        """The scores at ``positions``."""
        return ScoreArray._checked(self._scores[positions])

    def agents(self) -> list[ScoreStatistics]:
        """Each agent's scores (:func:`agent_labels` checks the ids)."""
        if self._groups is None:
            return super().agents()
        return [ScoreArray._checked(part) for part in split_by_agent(self._scores, self._groups)]


# --------------------------------------------------- the in-memory rank counter
#: Below this many remaining scores the counter switches to a sorted Python list and
#: :func:`bisect.bisect_right`, cheaper than numpy calls on tiny arrays.
_SMALL_ACTIVE_SET = 64

#: On the public range [0, 1] with at least this many scores, the first queries are
#: answered from one histogram of the scores on the dyadic grid ``k / 2**DYADIC_DEPTH``.
HISTOGRAM_MIN_SCORES = 2**17
DYADIC_DEPTH = 16

#: Scores per block when the counter selects the scores of an interval.
_BLOCK = 2**16


def _select(scores: np.ndarray, left: float, right: float) -> tuple[int, np.ndarray]:
    """``#{s <= left}`` and a copy of the scores in ``(left, right]``, block by block."""
    below = 0
    parts = []
    at_most_left = np.empty(min(_BLOCK, scores.shape[0]), dtype=bool)
    inside = np.empty_like(at_most_left)
    for start in range(0, scores.shape[0], _BLOCK):
        block = scores[start : start + _BLOCK]
        low, keep = at_most_left[: block.shape[0]], inside[: block.shape[0]]
        np.less_equal(block, left, out=low)
        below += int(np.count_nonzero(low))
        np.less_equal(block, right, out=keep)
        keep &= ~low
        parts.append(block[keep])
    return below, np.concatenate(parts) if parts else scores[:0].copy()


def dyadic_position(point: float) -> int | None:
    """``j`` with ``point = j / 2**DYADIC_DEPTH`` and ``1 <= j < 2**DYADIC_DEPTH``, or None."""
    position = math.ldexp(point, DYADIC_DEPTH)  # exact: a power-of-two scaling
    if position == math.floor(position) and 1 <= position < 2**DYADIC_DEPTH:
        return int(position)
    return None


class _RankCounter(RankCounter):
    """Exact counts ``#{s <= t}`` for a bisection, on a shrinking subset of the scores.

    Only scores inside the current interval ``(left, right]`` are kept; those at or
    below ``left`` are a stored count. Each query scans the remaining scores once, and
    the subset halves with the interval (for scores without heavy ties), so the whole
    search reads about ``2n`` values instead of ``N n``.

    On the public range [0, 1] with many scores, the midpoints of the first
    ``DYADIC_DEPTH`` halvings are the dyadic points ``k / 2**16`` (exact in floating
    point), so one pass binning the scores on that grid (:func:`bin_counts`, exact for
    a power-of-two grid) answers those queries, and one more pass keeps the scores of
    the interval the search has reached. The counts, hence the search, are the same
    either way.
    """

    def __init__(self, scores: np.ndarray, lower: float, upper: float):
        self._scores = scores
        self._left, self._right = lower, upper
        self._point = lower
        self._sorted: list[float] | None = None
        self._at_most: np.ndarray | None = None
        self._split = 0
        self._cumulative: np.ndarray | None = None
        if lower == 0.0 and upper == 1.0 and scores.shape[0] >= HISTOGRAM_MIN_SCORES:
            self._cumulative = np.cumsum(bin_counts(scores, 2**DYADIC_DEPTH))
            self.below = 0
            self._array = scores[:0]
            return
        self.below, self._array = _select(scores, lower, upper)
        self._switch_if_small()

    def _switch_if_small(self) -> None:
        if self._sorted is None and self._array.shape[0] <= _SMALL_ACTIVE_SET:
            self._sorted = sorted(self._array.tolist())

    def _from_histogram(self, point: float) -> int | None:
        """``#{s <= point}`` from the dyadic histogram, or None once off its grid."""
        if self._cumulative is None:
            return None
        position = dyadic_position(point)
        if position is not None:
            return int(self._cumulative[position - 1])
        # Past the grid: keep the scores of the current interval and count from them.
        self._cumulative = None
        self.below, self._array = _select(self._scores, self._left, self._right)
        self._switch_if_small()
        return None

    def count_at_most(self, point: float) -> int:
        """``#{i : s_i <= point}`` for ``point`` in the current interval."""
        self._point = point
        count = self._from_histogram(point)
        if count is not None:
            return count
        if self._sorted is not None:
            self._split = bisect_right(self._sorted, point)
            return self.below + self._split
        self._at_most = self._array <= point
        return self.below + int(np.count_nonzero(self._at_most))

    def narrow(self, keep_lower_half: bool, count: int) -> None:
        """Drop the half of the interval the search left (``count`` from the last query)."""
        if keep_lower_half:
            self._right = self._point
        else:
            self._left = self._point
            self.below = count
        if self._cumulative is not None:
            return
        if self._sorted is not None:
            if keep_lower_half:
                self._sorted = self._sorted[: self._split]
            else:
                self._sorted = self._sorted[self._split :]
            return
        at_most = self._at_most
        assert at_most is not None  # set by the query this narrowing follows
        self._array = self._array[at_most if keep_lower_half else ~at_most]
        self._switch_if_small()
