"""Calibration on a dask cluster: ``fit_calibrate`` from block-wise exact statistics."""

from __future__ import annotations

from ..base import BasePrivateConformal, CalibrationRun, CalibrationScorer
from ._inputs import Partitions, partition_inputs
from ._statistics import DaskScoreStatistics, _partition_error

__all__ = ["fit_calibrate"]


def _refuse_unsupported(run: CalibrationRun) -> None:
    """Refuse what the block-wise path cannot release exactly (nothing read or spent yet)."""
    mondrian = run.params["mondrian"]
    if mondrian is not None:
        raise ValueError(
            f"privconf_sklearn.dask.fit_calibrate does not support Mondrian calibration "
            f"(mondrian={mondrian!r}); use estimator.fit_calibrate in memory."
        )
    if getattr(run.score, "randomized", False) is True:
        raise ValueError(
            f"privconf_sklearn.dask.fit_calibrate does not support the randomised "
            f"{type(run.score).__name__} score (randomized=True): its scores draw one uniform "
            "per row from random_state in row order, which partitions cannot reproduce. Use "
            "a non-randomised score (e.g. 'aps', 'lac', 'raps')."
        )


def _target_error(scorer: CalibrationScorer, y, rows: tuple[int, int]):
    """None, or the error one partition's targets raise (naming its rows)."""
    try:
        scorer.encode_targets(y)
    except (TypeError, ValueError) as exc:
        return _partition_error(exc, rows)
    return None


def _check_targets(scorer: CalibrationScorer, partitions: Partitions) -> None:
    """Validate every target as in memory (one pass over ``y``; no model, no score)."""
    import dask
    from dask import delayed

    errors = dask.compute(
        *(
            delayed(_target_error)(scorer, y, (start, start + length))
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
    The steps are those of the in-memory ``fit_calibrate``, the public steps of
    :class:`~privconf_sklearn.base.CalibrationRun`: parameters, mechanism and budget
    are checked first (``start_calibration``), then the model against the score
    (``use_model``); every target is validated (one pass over ``y``) and the exact spend
    of the release is reserved on the ledger from public quantities (``reserve``: the
    number of rows, and the agent sizes from one pass over the agent ids) before any
    score is computed; the public score range is fixed (``fix_score_range``); every row
    is validated (one pass that also counts the clipped scores) before the mechanism
    asks anything; attributes are set only once the release is complete (``release``),
    so an error leaves the estimator as it was (an error in the scores, after the
    reservation, leaves the spend on the ledger). The workers compute the scores with
    the run's :class:`~privconf_sklearn.base.CalibrationScorer`. Each statistic
    recomputes the scores from ``X`` (nothing is persisted): ExponQ and DP-APS read the
    data twice, P-COQS and SplitConformal a few times more, the federated mechanisms
    once more per agent (and twice for the agent ids).
    """
    if not isinstance(estimator, BasePrivateConformal):
        raise TypeError(
            "estimator must be a PrivateConformalClassifier or PrivateConformalRegressor; "
            f"got {type(estimator).__name__}."
        )
    run = estimator.start_calibration()
    run.require_targets(y)
    scorer = run.use_model()
    _refuse_unsupported(run)
    run.check_groups_given(groups is not None)
    partitions = partition_inputs(X, y, groups)
    if partitions.n_samples == 0:
        raise ValueError("The calibration set is empty: calibration needs at least one row.")
    _check_targets(scorer, partitions)
    raw = DaskScoreStatistics(scorer, partitions)
    agent_sizes = None
    if partitions.groups is not None:  # one pass over the agent ids, no score computed
        agent_sizes = tuple(part.n_samples for part in raw.agents())
    run.reserve(partitions.n_samples, agent_sizes)
    statistics = DaskScoreStatistics(run.fix_score_range(raw.raw_range), partitions)
    return run.release(
        statistics,
        clipping=statistics.clip_counts(),
        largest_covered=statistics.largest_covered,
    )
