"""Calibration on a dask cluster: ``fit_calibrate`` from block-wise exact statistics."""

from __future__ import annotations

from .._base import BasePrivateConformal, _check_y_given
from ._inputs import Partitions, partition_inputs
from ._statistics import BlockScorer, DaskScoreStatistics, _partition_error

__all__ = ["fit_calibrate"]


def _refuse_unsupported(estimator: BasePrivateConformal, plan) -> None:
    """Refuse what the block-wise path cannot release exactly (nothing read or spent yet)."""
    score = plan.score
    if plan.params["mondrian"] is not None:
        raise ValueError(
            f"privconf_sklearn.dask.fit_calibrate does not support Mondrian calibration "
            f"(mondrian={plan.params['mondrian']!r}); use estimator.fit_calibrate in memory."
        )
    if getattr(score, "randomized", False) is True:
        raise ValueError(
            f"privconf_sklearn.dask.fit_calibrate does not support the randomised "
            f"{type(score).__name__} score (randomized=True): its scores draw one uniform per "
            "row from random_state in row order, which partitions cannot reproduce. Use a "
            "non-randomised score (e.g. 'aps', 'lac', 'raps')."
        )


def _target_error(estimator: BasePrivateConformal, model, y, rows: tuple[int, int]):
    """None, or the error one partition's targets raise (naming its rows)."""
    try:
        estimator._encode_targets(y, model)
    except (TypeError, ValueError) as exc:
        return _partition_error(exc, rows)
    return None


def _check_targets(estimator: BasePrivateConformal, model, partitions: Partitions) -> None:
    """Validate every target as in memory (one pass over ``y``; no model, no score)."""
    import dask
    from dask import delayed

    errors = dask.compute(
        *(
            delayed(_target_error)(estimator, model, y, (start, start + length))
            for y, start, length in zip(
                partitions.targets, partitions.starts, partitions.lengths, strict=True
            )
        )
    )
    for error in errors:
        if error is not None:
            raise error


def fit_calibrate(estimator, X, y, groups=None):
    """Calibrate a private conformal estimator on dask data, exactly as in memory.

    The scores of the calibration rows are computed partition by partition on the dask
    workers (the active ``distributed`` client, or dask's default scheduler); only the
    exact statistics the mechanism releases from reach this process: bin counts on the
    public grid (ExponQ, DP-APS, FedCP2-QQ agents), counts ``#{s <= t}`` of the noisy
    binary search (P-COQS), one order statistic (SplitConformal, FedCP-QQ agents; for
    the federated mechanisms per agent, on the random subsets their plans draw). The
    mechanism then releases with
    :meth:`~privconf_sklearn.mechanisms.QuantileMechanism.calibrate_from_statistics`,
    the code :meth:`~privconf_sklearn.PrivateConformalClassifier.fit_calibrate` runs on
    scores in memory: for the same data and ``random_state``, the threshold, the
    :class:`~privconf_sklearn.mechanisms.Calibration` and the budget spent are the
    same.

    Parameters
    ----------
    estimator : PrivateConformalClassifier or PrivateConformalRegressor
        With a fitted model (``prefit=True``); calibrated in place.
    X : dask.array.Array or dask.dataframe.DataFrame of shape (n_samples, n_features)
        Calibration features. Any row chunking; column chunks are merged.
    y : dask array, dask Series or DataFrame, or array-like of shape (n_samples,)
        Calibration targets, cut into ``X``'s row partitions.
    groups : dask array, dask Series, array-like of shape (n_samples,) or None
        Agent id of each row, for the federated mechanisms (FedCP-QQ, FedCP2-QQ) only.

    Returns
    -------
    estimator : PrivateConformalClassifier or PrivateConformalRegressor
        The calibrated estimator.

    Raises
    ------
    TypeError
        If ``estimator`` is not a private conformal estimator or ``X`` is not dask data
        (and the in-memory errors for bad parameters).
    ValueError
        For Mondrian calibration and randomised scores (before any data is read or
        budget spent), and for the in-memory errors on bad data (NaN or unknown targets,
        bad agent ids, mismatched lengths, an empty calibration set).

    Notes
    -----
    Parameters, mechanism and budget are checked first; then every target is validated
    (one pass over ``y``) and, as in memory, the exact spend of the release is reserved
    on the ledger from public quantities (the number of rows, and the agent sizes from
    one pass over the agent ids) before any score is computed; every row is validated
    (one pass that also counts the clipped scores) before the mechanism asks anything;
    attributes are set only once the release is complete, so an error leaves the
    estimator as it was (an error in the scores, after the reservation, leaves the spend
    on the ledger). Each statistic recomputes the scores from ``X`` (nothing is
    persisted): ExponQ and DP-APS read the data twice, P-COQS and SplitConformal a few
    times more, the federated mechanisms once more per agent (and twice for the agent
    ids).
    """
    if not isinstance(estimator, BasePrivateConformal):
        raise TypeError(
            "estimator must be a PrivateConformalClassifier or PrivateConformalRegressor; "
            f"got {type(estimator).__name__}."
        )
    plan = estimator._plan()
    _check_y_given(y)
    model = estimator._check_prefit_estimator()
    _refuse_unsupported(estimator, plan)
    plan.mechanism._check_groups_given(groups is not None)
    partitions = partition_inputs(X, y, groups)
    if partitions.n_samples == 0:
        raise ValueError("The calibration set is empty: calibration needs at least one row.")
    score = plan.score
    score.check_estimator(model)
    _check_targets(estimator, model, partitions)
    unmapped = DaskScoreStatistics(BlockScorer(estimator, score, model, 0.0, 1.0), partitions)
    agent_sizes = None
    if partitions.groups is not None:  # one pass over the agent ids, no score computed
        agent_sizes = tuple(part.n_samples for part in unmapped.agents())
    plan = estimator._reserve_release(plan, partitions.n_samples, agent_sizes)

    def data_range() -> tuple[float, float]:
        return unmapped.raw_range()  # reads raw scores only

    low, high, public = estimator._public_range(score, data_range)
    statistics = DaskScoreStatistics(BlockScorer(estimator, score, model, low, high), partitions)
    n_below, n_above, largest = statistics.clip_counts()
    record = estimator._range_record(
        low, high, public, n_below, n_above, partitions.n_samples, largest
    )
    calibration = plan.mechanism.calibrate_from_statistics(
        statistics, plan.params["alpha"], random_state=estimator.random_state
    )
    return estimator._complete_release(
        plan, model, calibration, (low, high), record, statistics.largest_covered
    )
