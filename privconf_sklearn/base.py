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

For example, the scores of three blocks of rows, computed apart (each block could live
on another machine: only counts, clipping totals and the statistics the mechanism asks
for need to meet), give the release ``fit_calibrate`` makes on all the rows at once:

>>> import numpy as np
>>> from sklearn.naive_bayes import GaussianNB
>>> from privconf_sklearn import PrivateConformalClassifier
>>> from privconf_sklearn.datasets import make_two_gaussians
>>> from privconf_sklearn.mechanisms import ExponQ, ScoreArray
>>> X, y = make_two_gaussians(4000, random_state=0)
>>> model = GaussianNB().fit(X[:2000], y[:2000])
>>> def make():
...     return PrivateConformalClassifier(
...         model, mechanism=ExponQ(epsilon=1.0), conformity_score="lac", random_state=0
...     )
>>> blocks = [(X[i : i + 700], y[i : i + 700]) for i in range(2000, 4000, 700)]
>>> estimator = make()
>>> run = estimator.start_calibration()                 # 1. parameters, budget
>>> scorer = run.use_model()                            # 2. the model, no row read
>>> for _, y_block in blocks:
...     _ = scorer.encode_targets(y_block)              #    every target checked
>>> _ = run.reserve(sum(len(y_block) for _, y_block in blocks))   # 3. exact spend
>>> scorer = run.fix_score_range()                      # 4. the public range
>>> mapped = [scorer.unit_scores(X_block, y_block) for X_block, y_block in blocks]
>>> clipping = [m.clipping() for m in mapped]
>>> _ = run.release(                                    # 5. release and record
...     ScoreArray(np.concatenate([m.unit for m in mapped])),
...     clipping=(
...         sum(c[0] for c in clipping), sum(c[1] for c in clipping), max(c[2] for c in clipping)
...     ),
...     largest_covered=lambda t: max(
...         (v for m in mapped if (v := m.largest_covered(t)) is not None), default=None
...     ),
... )
>>> in_memory = make().fit_calibrate(X[2000:], y[2000:])
>>> estimator.threshold_ == in_memory.threshold_, estimator.calibration_ == in_memory.calibration_
(True, True)

``ScoreArray`` holds the concatenated scores here; any other
:class:`~privconf_sklearn.mechanisms.ScoreStatistics` that answers the mechanism's
questions exactly gives the same release (:func:`privconf_sklearn.dask.fit_calibrate`
sums per-block counts on a dask cluster and never gathers the scores).

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
