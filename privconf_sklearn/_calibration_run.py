"""One calibration of a private conformal estimator, step by step, in its privacy order.

The steps are public so that calibration scores computed elsewhere (a dask cluster, a
database, another process) are released by the very code of an in-memory
``fit_calibrate``: :meth:`BasePrivateConformal.start_calibration
<privconf_sklearn.base.BasePrivateConformal.start_calibration>` returns a
:class:`CalibrationRun`, and the estimator's own ``fit`` and ``fit_calibrate`` and
:func:`privconf_sklearn.dask.fit_calibrate` all go through its steps:

1. ``start_calibration()``: every parameter validated, the conformity score and the
   mechanism resolved, the budget checked on the ledger for the most the configuration
   can cost. No data is read.
2. :meth:`CalibrationRun.use_model`: the fitted model checked against the score. No
   calibration row is read. The :class:`CalibrationScorer` it returns computes the
   scores of any block of rows (and checks the targets, as step 2b, before anything is
   spent).
3. :meth:`CalibrationRun.reserve`: the exact spend of the release, computed from public
   quantities (the number of rows, the agents' sizes), checked and spent on the ledger
   in one step. Only from here on may the calibration rows' scores be read.
4. :meth:`CalibrationRun.fix_score_range`: the public score range (natural bounds, the
   regressor's ``score_bounds``, or, breaking privacy, the data's range); the scorer it
   returns maps scores into [0, 1] (:class:`MappedScores`).
5. :meth:`CalibrationRun.release`: the mechanism releases from the exact statistics of
   the mapped scores; the estimator records the release (privacy under ``adjacency``,
   threshold in score units, warnings), checks that it spends exactly what was
   reserved, and sets every fitted attribute at once.

A step out of order raises ``RuntimeError``; a run releases once. Mondrian calibration
(one release per group) runs in memory only, through ``fit_calibrate``.
"""

from __future__ import annotations

import numbers
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from ._ledger import reserve
from ._validation import check_unit_scores
from .mechanisms import QuantileMechanism, ScoreArray, ScoreStatistics
from .privacy import PrivacyGuarantee
from .scores import BaseConformityScore, to_unit_range

__all__ = ["CalibrationRun", "CalibrationScorer", "MappedScores"]


@dataclass(frozen=True)
class MappedScores:
    """Calibration scores of some rows clipped to the public range and mapped to [0, 1].

    Attributes
    ----------
    clipped : ndarray of shape (n_rows,)
        The conformity scores, clipped to the public range ``[low, high]``.
    unit : ndarray of shape (n_rows,)
        Their images ``(s - low) / (high - low)`` in [0, 1], validated (finite, in range).
    below, above : ndarray of bool of shape (n_rows,) or None
        Which rows were clipped up to ``low`` or down to ``high``; None when the
        estimator clips nothing (classification scores must lie in their natural range).
    """

    clipped: np.ndarray
    unit: np.ndarray
    below: np.ndarray | None
    above: np.ndarray | None

    def clipping(self) -> tuple[int, int, float | None]:
        """Numbers of rows clipped below and above, and the largest clipped score.

        The ``clipping`` of :meth:`CalibrationRun.release`: sum the first two and take
        the maximum of the third over blocks of rows (None for no rows).
        """
        n_below = 0 if self.below is None else int(np.count_nonzero(self.below))
        n_above = 0 if self.above is None else int(np.count_nonzero(self.above))
        largest = float(self.clipped.max()) if self.clipped.shape[0] else None
        return n_below, n_above, largest

    def largest_covered(self, t: float) -> float | None:
        """The largest clipped score whose image is at most ``t``, or None if there is none.

        The ``largest_covered`` of :meth:`CalibrationRun.release`: take the maximum over
        blocks of rows.
        """
        covered = self.unit <= t
        return float(self.clipped[covered].max()) if covered.any() else None


@dataclass(frozen=True)
class CalibrationScorer:
    """The calibration scores of any block of rows, exactly as ``fit_calibrate`` computes them.

    Returned by :meth:`CalibrationRun.use_model` (raw scores) and
    :meth:`CalibrationRun.fix_score_range` (scores mapped to [0, 1]); it holds no
    ledger and can be sent to other processes (dask workers). Each method reads only
    the rows it is given, so blocks of rows may be scored anywhere, in any order: the
    scores of a block are the scores of those rows in memory (for scores that draw no
    random numbers: a randomised score draws one uniform per row in row order).

    Attributes
    ----------
    estimator : BasePrivateConformal
        The private conformal estimator: its target checks and its clipping.
    score : BaseConformityScore
        The resolved conformity score.
    model : estimator
        The fitted model.
    random_state : None, int, RandomState or Generator
        The estimator's ``random_state`` (used by randomised scores only).
    score_range : tuple of float or None
        The public range ``(low, high)`` mapped to [0, 1]; None until
        :meth:`CalibrationRun.fix_score_range` fixed it.
    """

    estimator: Any
    score: BaseConformityScore
    model: Any
    random_state: Any = None
    score_range: tuple[float, float] | None = None

    def encode_targets(self, y) -> np.ndarray:
        """Check ``y`` as the estimator does and put it in the form the score expects.

        Raises the in-memory errors (unknown labels, NaN targets, ...).
        """
        return self.estimator._encode_targets(y, self.model)

    def conformity_scores(self, X, targets: np.ndarray) -> np.ndarray:
        """The raw conformity scores (float64) of rows ``X`` with encoded ``targets``."""
        outputs = self.score.estimator_outputs(self.model, X)
        scores = self.score.conformity_scores(outputs, targets, random_state=self.random_state)
        return np.asarray(scores, dtype=np.float64)

    def map_to_unit(self, scores: np.ndarray) -> MappedScores:
        """Raw scores clipped to the public range and mapped to [0, 1], validated.

        Raises
        ------
        RuntimeError
            If the score range is not fixed yet.
        ValueError
            For scores outside a range the estimator does not clip to (classification),
            or not finite.
        """
        if self.score_range is None:
            raise RuntimeError(
                "The score range is not fixed: use the scorer CalibrationRun.fix_score_range "
                "returns."
            )
        low, high = self.score_range
        clipped, below, above = self.estimator._clip_to_range(self.score, scores, low, high)
        unit = to_unit_range(clipped, low, high)
        if unit.shape[0]:
            unit = check_unit_scores(unit)
        return MappedScores(clipped, unit, below, above)

    def unit_scores(self, X, y) -> MappedScores:
        """:meth:`map_to_unit` of the rows ``(X, y)`` (targets checked, model's outputs)."""
        return self.map_to_unit(self.conformity_scores(X, self.encode_targets(y)))


def _no_data_range() -> tuple[float, float]:
    raise ValueError(
        "This estimator takes its score range from the calibration data (score_bounds="
        "None): pass data_range, the (min, max) of the raw scores, to fix_score_range."
    )


class CalibrationRun:
    """The steps of one calibration of a private conformal estimator, in their order.

    Not built directly: :meth:`BasePrivateConformal.start_calibration
    <privconf_sklearn.base.BasePrivateConformal.start_calibration>` returns one, with
    the parameters validated and the budget checked. The steps (see
    :mod:`privconf_sklearn.base`) are :meth:`use_model`, :meth:`reserve`,
    :meth:`fix_score_range` and :meth:`release`; each checks that the ones it depends on
    ran, so that no score is read before the exact spend is reserved.

    Attributes
    ----------
    estimator : BasePrivateConformal
        The estimator being calibrated (its fitted attributes are set by
        :meth:`release`).
    params : dict
        Its validated parameters (``alpha``, ``adjacency``, ``mondrian``, ...).
    score : BaseConformityScore
        A fresh conformity score from ``conformity_score``.
    mechanism : QuantileMechanism
        A copy of ``mechanism``.
    planned : PrivacyGuarantee
        The most this calibration can cost, under ``adjacency``; checked on the ledger.
    declared_groups : tuple or None
        The public list of Mondrian groups declared with
        ``PrivateGroupSizes(group_ids=...)``, or None.
    """

    def __init__(
        self,
        estimator,
        params: dict,
        score: BaseConformityScore,
        mechanism: QuantileMechanism,
        ledger,
        planned: PrivacyGuarantee,
        declared_groups: tuple | None,
    ):
        self.estimator = estimator
        self.params = params
        self.score = score
        self.mechanism = mechanism
        self.planned = planned
        self.declared_groups = declared_groups
        self._ledger = ledger
        self._model: Any = None
        self._reserved: PrivacyGuarantee | None = None
        self._n_samples: int | None = None
        self._range: tuple[float, float, bool] | None = None
        self._released = False

    # ------------------------------------------------------------------ state
    @property
    def model(self):
        """The fitted model (None before :meth:`use_model`)."""
        return self._model

    @property
    def reserved(self) -> PrivacyGuarantee | None:
        """The guarantee reserved on the ledger (None before :meth:`reserve`).

        It is the one the release records: :meth:`release` refuses a release that
        records anything else.
        """
        return self._reserved

    @property
    def score_range(self) -> tuple[float, float] | None:
        """The public score range ``(low, high)`` (None before :meth:`fix_score_range`)."""
        return None if self._range is None else self._range[:2]

    @staticmethod
    def _require(condition: bool, message: str) -> None:
        """Refuse a step out of order (``RuntimeError``)."""
        if not condition:
            raise RuntimeError(f"CalibrationRun: {message}.")

    # ------------------------------------------------------------------ checks
    def require_targets(self, y) -> None:
        """Refuse ``y=None``: calibration needs the true labels or targets."""
        if y is None:
            raise ValueError(
                "This estimator requires y to be passed, but the target y is None: "
                "calibration needs the true labels or targets."
            )

    def check_groups_given(self, given: bool) -> None:
        """Refuse agent ids for a central mechanism, or none for a federated one.

        Raises
        ------
        ValueError
            If ``given`` does not match ``mechanism.requires_groups``.
        """
        self.mechanism._check_groups_given(given)

    # ------------------------------------------------------------------ steps
    def use_model(self, model=None) -> CalibrationScorer:
        """Step 2: check the fitted model against the conformity score; read no row.

        Parameters
        ----------
        model : estimator, default=None
            The fitted model; None takes the estimator's ``estimator`` (``prefit=True``),
            checked to be fitted.

        Returns
        -------
        CalibrationScorer
            The raw conformity scores of any block of rows (no score range yet).

        Raises
        ------
        sklearn.exceptions.NotFittedError
            If ``model`` is None and the estimator's model is not fitted.
        TypeError, ValueError
            If the score cannot use this model (e.g. no ``predict_proba``).
        """
        self._require(self._reserved is None, "use_model comes before reserve")
        if model is None:
            model = self.estimator._check_prefit_estimator()
        self.score.check_estimator(model)
        self.estimator._warn_about_score(self.score, model)
        self._model = model
        return CalibrationScorer(self.estimator, self.score, model, self.estimator.random_state)

    def reserve(
        self, n_samples: int, agent_sizes: tuple[int, ...] | None = None
    ) -> PrivacyGuarantee:
        """Step 3: reserve the release's exact spend from public quantities; read no row.

        From the mechanism's coverage certificate at ``(n_samples, alpha)`` (and, for a
        federated mechanism, the agents' sizes): its guarantee under ``adjacency`` when
        the request is feasible; zero loss when it is not (the release is then the top of
        the range, chosen without reading a row). The spend is checked and recorded on
        the ledger in one step, so of two calibrations racing for the last budget of one
        ledger, the one refused raises here, having read nothing. The reservation is
        final: if anything fails afterwards, the spend stays on the ledger (which has no
        refund; the failure itself may depend on the rows it read).

        Parameters
        ----------
        n_samples : int
            Number of calibration rows (public).
        agent_sizes : tuple of int, default=None
            Rows of each agent, agents ordered by their sorted ids (federated mechanisms
            only; public, as in the federated protocol). Read from the agent ids only.

        Returns
        -------
        PrivacyGuarantee
            What was reserved, under ``adjacency``.

        Raises
        ------
        ValueError
            For a bad ``n_samples``, agent sizes given to a central mechanism (missing
            for a federated one, not adding up to ``n_samples``, or not ``n_agents`` of
            them).
        RuntimeError
            If the ledger cannot cover the spend (its own error), if this run has
            reserved already, or for Mondrian calibration (one release per group: in
            memory only, through ``fit_calibrate``).
        """
        self._require(
            self.params["mondrian"] is None,
            "a Mondrian calibration reserves and releases per group, in memory (fit_calibrate)",
        )
        self._require(self._model is not None, "reserve comes after use_model")
        self._require(self._reserved is None, "a run reserves once")
        n_samples = _check_n_samples(n_samples)
        mechanism, alpha = self.mechanism, self.params["alpha"]
        self.check_groups_given(agent_sizes is not None)
        if agent_sizes is None:
            certificate = mechanism.coverage_certificate(n_samples, alpha)
        else:
            agent_sizes = _check_agent_sizes(agent_sizes, n_samples, mechanism)
            certificate = mechanism.coverage_certificate(  # type: ignore[call-arg]
                n_samples, alpha, agent_sizes=agent_sizes
            )
        # A central run's planned guarantee is the mechanism's, under the adjacency.
        guarantee = (
            self.planned
            if certificate.feasible
            else PrivacyGuarantee.untouched(
                "Infeasible request, decided from public quantities: no data read."
            ).under(self.params["adjacency"])
        )
        self._n_samples = n_samples
        return self._reserve_exactly(guarantee)

    def _reserve_exactly(self, release: PrivacyGuarantee) -> PrivacyGuarantee:
        """Spend ``release`` on the ledger now, atomically (also for Mondrian groups)."""
        reserve(self._ledger, *release.accountant_spend())
        self._reserved = release
        return release

    def fix_score_range(
        self, data_range: Callable[[], tuple[float, float]] | None = None
    ) -> CalibrationScorer:
        """Step 4: the public score range the scores are mapped from.

        The natural bounds of a classification score, the regressor's ``score_bounds``;
        with ``score_bounds=None`` the range of the data, which breaks the privacy
        guarantee (a ``PrivacyLeakWarning``, and the release records it).

        Parameters
        ----------
        data_range : callable, default=None
            Returns ``(min, max)`` of the raw conformity scores of all calibration rows
            (:meth:`CalibrationScorer.conformity_scores`); called only by an estimator
            that takes its range from the data.

        Returns
        -------
        CalibrationScorer
            The scorer of :meth:`use_model`, now mapping scores into [0, 1].
        """
        self._require(self._reserved is not None, "fix_score_range comes after reserve")
        self._require(self._range is None, "the score range is fixed once")
        low, high, public = self.estimator._public_range(
            self.score, _no_data_range if data_range is None else data_range
        )
        self._range = (low, high, bool(public))
        return CalibrationScorer(
            self.estimator, self.score, self._model, self.estimator.random_state, (low, high)
        )

    def _range_record(self, below, above, n_samples: int, clipped):
        """The estimator's record of how scores were mapped (warns if any were clipped)."""
        assert self._range is not None
        low, high, public = self._range
        return self.estimator._range_record(low, high, public, below, above, n_samples, clipped)

    def _start_release(self) -> None:
        self._require(self._range is not None, "release comes after fix_score_range")
        self._require(not self._released, "a run releases once")
        self._released = True

    def release(
        self,
        statistics: ScoreStatistics,
        *,
        clipping: tuple[int, int, float | None],
        largest_covered: Callable[[float], float | None],
    ):
        """Step 5: release from the mapped scores' exact statistics, and record it.

        In order: the record of the clipping (a ``ScoreBoundsWarning`` if scores were
        clipped); the mechanism's release
        (:meth:`~privconf_sklearn.mechanisms.QuantileMechanism.calibrate` on a
        :class:`~privconf_sklearn.mechanisms.ScoreArray`'s scores, otherwise
        :meth:`~privconf_sklearn.mechanisms.QuantileMechanism.calibrate_from_statistics`:
        for exact statistics and the same ``random_state``, the same release); the
        estimator-level records and the guarantee under ``adjacency`` (marked as not
        holding if the range came from the data); the threshold in score units; the
        warnings; the check that the release records exactly the reserved spend; then
        every fitted attribute at once.

        Parameters
        ----------
        statistics : ScoreStatistics
            Exact statistics of all ``n_samples`` mapped scores
            (:attr:`MappedScores.unit`), with the agent ids for a federated mechanism.
        clipping : tuple (int, int, float or None)
            Over all rows, the numbers of scores clipped up and down
            (:meth:`MappedScores.clipping`, summed) and the largest clipped score
            (the maximum, None for no rows).
        largest_covered : callable
            ``largest_covered(t)``: the largest clipped score whose image is at most
            ``t``, or None (:meth:`MappedScores.largest_covered`, the maximum over
            blocks). Asked only for a non-private release, whose threshold in score
            units is then that calibration score exactly.

        Returns
        -------
        estimator : BasePrivateConformal
            The calibrated estimator.

        Raises
        ------
        RuntimeError
            If a step is missing, the run released already, or the release does not
            record the reserved spend (it is then discarded; the reservation stays).
        ValueError
            If ``statistics`` does not hold the reserved number of scores.
        """
        self._start_release()
        if statistics.n_samples != self._n_samples:
            raise ValueError(
                f"statistics holds {statistics.n_samples} scores but {self._n_samples} "
                "rows were reserved."
            )
        n_below, n_above, largest = clipping
        record = self._range_record(n_below, n_above, self._n_samples, largest)
        alpha, random_state = self.params["alpha"], self.estimator.random_state
        if isinstance(statistics, ScoreArray):  # also mechanisms that need the scores
            calibration = self.mechanism.calibrate(
                statistics.scores, alpha, groups=statistics.groups, random_state=random_state
            )
        else:
            calibration = self.mechanism.calibrate_from_statistics(
                statistics, alpha, random_state=random_state
            )
        return self.estimator._complete_release(self, calibration, record, largest_covered)

    def _check_reserved(self, calibration) -> None:
        """Refuse a release whose recorded spend is not the one reserved before reading data.

        The reservation is computed from public quantities: it equals the record for
        every mechanism whose ``coverage_certificate`` is feasible exactly when its
        release reads data (the contract of
        :class:`~privconf_sklearn.mechanisms.QuantileMechanism`). A mechanism breaking
        it would otherwise leave the ledger wrong; the release is discarded (nothing is
        set) and the reservation stays on the ledger.

        Raises
        ------
        RuntimeError
            If ``calibration.privacy`` spends anything else than :attr:`reserved`.
        """
        recorded = calibration.privacy.accountant_spend()
        reserved = None if self._reserved is None else self._reserved.accountant_spend()
        if recorded != reserved:
            raise RuntimeError(
                f"Privacy accounting mismatch: {calibration.mechanism}'s release records "
                f"(epsilon, delta) = {recorded}, but {reserved} was reserved on the ledger "
                "from public quantities before the data were read (its coverage_certificate "
                "must be feasible exactly when its release reads data). The release is "
                "discarded; the reservation stays on the ledger."
            )


def _check_n_samples(n_samples) -> int:
    if isinstance(n_samples, bool) or not isinstance(n_samples, numbers.Integral) or n_samples < 1:
        raise ValueError(
            f"n_samples must be a positive integer (the number of calibration rows); got "
            f"{n_samples!r}."
        )
    return int(n_samples)


def _check_agent_sizes(agent_sizes, n_samples: int, mechanism: QuantileMechanism) -> tuple:
    sizes = tuple(agent_sizes)
    if any(isinstance(s, bool) or not isinstance(s, numbers.Integral) or s < 1 for s in sizes):
        raise ValueError(f"agent_sizes must be positive integers; got {sizes!r}.")
    if sum(sizes) != n_samples:
        raise ValueError(f"agent_sizes {sizes!r} do not add up to n_samples = {n_samples}.")
    n_agents = mechanism.get_params().get("n_agents")
    if n_agents is not None and len(sizes) != n_agents:
        raise ValueError(f"groups define {len(sizes)} agents but n_agents = {n_agents}.")
    return tuple(int(s) for s in sizes)
