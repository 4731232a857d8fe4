"""Warnings that point at the user's line.

A warning's ``stacklevel`` must name the user's call, but the depth of the package's
own frames between that call and the warning varies: ``fit`` and ``fit_calibrate``,
a Mondrian or a dask calibration, a search that fits the estimator, a Pipeline around
it. :func:`warn_at_caller` therefore counts the frames instead of fixing a number: it
warns at the first frame outside this package and outside the libraries that call
estimators on the user's behalf (scikit-learn's searches, pipelines and cross-validation,
and joblib's sequential runs), so the warning's file and line are the user's
``fit``/``search.fit``/``cross_validate`` line. This is ``warnings.warn``'s
``skip_file_prefixes`` (Python >= 3.12) for the Python versions the package supports.
"""

from __future__ import annotations

import os
import sys
import warnings
from types import FrameType

import joblib
import sklearn

__all__ = ["warn_at_caller"]

#: Directories whose frames are never the user's line: this package, scikit-learn (its
#: searches, pipelines, cross-validation and scorers call the estimator), joblib (the
#: sequential backend of ``n_jobs=None`` runs those calls in-process).
_INTERNAL_PREFIXES = tuple(
    os.path.dirname(os.path.abspath(path)) + os.sep
    for path in (__file__, sklearn.__file__, joblib.__file__)
)


def _is_internal(filename: str) -> bool:
    return filename.startswith(_INTERNAL_PREFIXES)


def warn_at_caller(message: str, category: type[Warning]) -> None:
    """``warnings.warn(message, category)`` at the first frame outside the package.

    Parameters
    ----------
    message : str
        The warning's text.
    category : type
        A subclass of :class:`Warning`.

    Notes
    -----
    Frames of this package, scikit-learn and joblib are skipped. If every frame is one
    of theirs (a joblib worker process), the warning points at the function that called
    this one.
    """
    frame: FrameType | None = sys._getframe(1)
    level = 2  # 1 is this function; 2 is its caller, the frame of ``frame``
    while frame is not None and _is_internal(frame.f_code.co_filename):
        frame = frame.f_back
        level += 1
    warnings.warn(message, category, stacklevel=level if frame is not None else 2)
