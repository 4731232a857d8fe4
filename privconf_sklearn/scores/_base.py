"""The conformity-score interface: one class per score, as in MAPIE."""

from __future__ import annotations

from abc import ABCMeta, abstractmethod

import numpy as np
from sklearn.base import BaseEstimator

__all__ = ["BaseConformityScore", "ConformityScoreWarning"]


class ConformityScoreWarning(UserWarning):
    """A conformity score is a poor fit for the task (e.g. APS/RAPS on a binary target)."""


class BaseConformityScore(BaseEstimator, metaclass=ABCMeta):
    """A conformity score: estimator outputs and targets to reals, thresholds to sets.

    A score object knows which estimator method it needs, how to validate that
    method's output, how to score calibration pairs and how to turn a threshold into
    prediction sets. It never sees privacy parameters. Scores are small estimators so
    that their parameters can be tuned with ``score__<param>``.

    Attributes
    ----------
    natural_bounds : tuple of float or None
        Public range the score always lies in (e.g. ``(0, 1)`` for LAC and APS), or
        None when the score is unbounded and public bounds must be supplied. It may
        depend on public facts of the fitted estimator that :meth:`check_estimator`
        records (RAPS: the number of classes); it never depends on data.
    """

    #: The public range of scores whose range is fixed by their class.
    _natural_bounds: tuple[float, float] | None = None
    #: Accepted forms of the constructor parameters (scikit-learn constraints; see
    #: :mod:`privconf_sklearn._param_validation`); scores without parameters have none.
    _parameter_constraints: dict = {}

    @property
    def natural_bounds(self) -> tuple[float, float] | None:
        """Public range of the scores, or None when unbounded."""
        return self._natural_bounds

    @abstractmethod
    def check_estimator(self, estimator) -> None:
        """Raise ``TypeError`` if ``estimator`` lacks the method this score needs.

        Called once per calibration with the fitted estimator, before any score is
        computed. A score whose public range depends on the estimator (RAPS) records
        what it needs here.
        """

    @abstractmethod
    def estimator_outputs(self, estimator, X) -> np.ndarray:
        """The validated estimator outputs this score is computed from."""

    @abstractmethod
    def conformity_scores(
        self, outputs: np.ndarray, y: np.ndarray, *, random_state=None
    ) -> np.ndarray:
        """Scores of the pairs ``(x_i, y_i)`` given the outputs for ``x_i``."""

    @abstractmethod
    def predict_set(
        self, outputs: np.ndarray, threshold: float, *, random_state=None
    ) -> np.ndarray:
        """Prediction sets ``{y : score(x, y) <= threshold}`` from the outputs."""
