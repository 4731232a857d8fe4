"""Public grids of candidate thresholds on [0, 1]: uniform, or finer near 0 (log-spaced).

A binned mechanism releases one edge of a public grid. The uniform grid ``e_j = j / m``
has the same absolute resolution everywhere. Regression scores under loose public
bounds (``|y - f(x)|`` with bounds taken from the target's documented range) often sit
in the bottom of the range, and an interval's width is judged relative to itself: the
log-spaced grid ``e_j = r (exp(j / m * log(1 + 1 / r)) - 1)`` has relative resolution
about ``log(1 + 1 / r) / m`` above ``r`` and absolute resolution about
``r log(1 + 1 / r) / m`` near 0, where ``r`` is a public resolution (a share of the
range). Both are fixed before any data are read; a mechanism's privacy and coverage
analyses hold for any public grid whose top edge is 1 (they count edges, not their
positions), so a grid never weakens a certificate: it only moves where the edges are.
"""

from __future__ import annotations

import numbers

import numpy as np
from sklearn.base import BaseEstimator

__all__ = ["LogGrid", "check_grid"]


class LogGrid(BaseEstimator):
    """Edges ``e_j = r (exp(j L / m) - 1)``, ``L = log(1 + 1 / r)``, ``j = 1..m`` (``e_m = 1``).

    Parameters
    ----------
    resolution : float
        ``r``, a public share of the score range in (0, 1): below it the grid is about
        uniform, above it about log-spaced. For absolute residuals under bounds
        ``(0, H)``, ``r = 0.01`` makes edges about 1% of ``H`` apart near 0 and a constant
        ratio apart above ``0.01 H``.

    Examples
    --------
    >>> from privconf_sklearn.mechanisms import LogGrid
    >>> edges = LogGrid(resolution=0.01).edges(4)
    >>> edges.round(4).tolist()
    [0.0217, 0.0905, 0.3086, 1.0]
    """

    def __init__(self, resolution: float = 0.01):
        self.resolution = resolution

    def _checked_resolution(self) -> float:
        value = self.resolution
        if (
            isinstance(value, bool)
            or not isinstance(value, numbers.Real)
            or not 0.0 < float(value) < 1.0
        ):
            raise ValueError(f"LogGrid resolution must be a real number in (0, 1); got {value!r}.")
        return float(value)

    def edges(self, n_bins: int) -> np.ndarray:
        """The ``m`` edges, strictly increasing, the last exactly 1.

        Parameters
        ----------
        n_bins : int
            Number of edges ``m >= 1``.

        Returns
        -------
        ndarray of float64 of shape (n_bins,)
        """
        r = self._checked_resolution()
        edges = r * np.expm1(np.arange(1, n_bins + 1) * (np.log1p(1.0 / r) / n_bins))
        edges[-1] = 1.0
        edges = np.minimum(edges, 1.0)
        if n_bins > 1 and not np.all(np.diff(edges) > 0):
            raise ValueError(
                f"LogGrid(resolution={r!r}) with {n_bins} edges has edges closer than "
                "float64 can separate; use fewer bins or a larger resolution."
            )
        return edges


def check_grid(grid):
    """``"uniform"`` or a :class:`LogGrid`; anything else is an error naming ``grid``."""
    if isinstance(grid, str) and grid == "uniform":
        return grid
    if isinstance(grid, LogGrid):
        grid._checked_resolution()
        return grid
    raise ValueError(f"grid must be 'uniform' or a LogGrid instance; got {grid!r}.")
