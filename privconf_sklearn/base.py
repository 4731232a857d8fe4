"""The estimators' base class and the public steps of a calibration.

:class:`BasePrivateConformal` is the base class of
:class:`~privconf_sklearn.PrivateConformalClassifier` and
:class:`~privconf_sklearn.PrivateConformalRegressor`. A calibration runs in five steps,
in the order that makes its privacy accounting hold; ``fit_calibrate`` runs them on
data in memory, :func:`privconf_sklearn.dask.fit_calibrate` on a dask cluster, and
anyone can run them on calibration scores computed elsewhere:

1. :meth:`BasePrivateConformal.start_calibration`: parameters validated, the budget
   checked for the most the configuration can cost; no data read. Returns a
   :class:`CalibrationRun`.
2. :meth:`CalibrationRun.use_model`: the fitted model checked against the conformity
   score. Its :class:`CalibrationScorer` computes the scores of any block of rows, and
   checks the targets (:meth:`CalibrationScorer.encode_targets`) before anything is
   spent.
3. :meth:`CalibrationRun.reserve`: the release's exact spend, from public quantities
   (the number of rows, the agents' sizes), reserved on the ledger atomically. Scores
   may be read only from here on.
4. :meth:`CalibrationRun.fix_score_range`: the public score range; the scorer it
   returns maps scores into [0, 1] (:class:`MappedScores`).
5. :meth:`CalibrationRun.release`: the mechanism releases from the exact statistics of
   the mapped scores (a :class:`~privconf_sklearn.mechanisms.ScoreStatistics`), the
   estimator records the release and sets its fitted attributes.

For example, with the scores of two blocks of rows computed separately::

    run = estimator.start_calibration()
    scorer = run.use_model()
    blocks = [(X_1, y_1), (X_2, y_2)]
    for _, y_i in blocks:
        scorer.encode_targets(y_i)                # every target checked, nothing spent
    run.reserve(sum(len(y_i) for _, y_i in blocks))
    scorer = run.fix_score_range()
    mapped = [scorer.unit_scores(X_i, y_i) for X_i, y_i in blocks]
    unit = np.concatenate([m.unit for m in mapped])   # or exact statistics of the blocks
    counts = [m.clipping() for m in mapped]
    largest = [c[2] for c in counts if c[2] is not None]
    run.release(
        ScoreArray(unit),
        clipping=(sum(c[0] for c in counts), sum(c[1] for c in counts), max(largest)),
        largest_covered=lambda t: max(
            (v for m in mapped if (v := m.largest_covered(t)) is not None), default=None
        ),
    )

A step out of order raises ``RuntimeError``, and the release must spend exactly what
was reserved.
"""

from ._base import BasePrivateConformal, register_card_builder
from ._calibration_run import CalibrationRun, CalibrationScorer, MappedScores

__all__ = [
    "BasePrivateConformal",
    "CalibrationRun",
    "CalibrationScorer",
    "MappedScores",
    "register_card_builder",
]
