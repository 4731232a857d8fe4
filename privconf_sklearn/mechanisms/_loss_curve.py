"""The summed loss curve of conformal risk control, in exact integer units.

Conformal risk control (Angelopoulos, Bates, Fisch, Lei and Schuster 2024) reads the
calibration set only through ``S(lambda_j) = sum_i L_i(lambda_j)`` over a public grid of
candidates ``j = 1..m``, ordered from least to most conservative, with every row's loss
``L_i`` in ``[0, B]`` and non-increasing in ``j``. Here each loss is rounded **up** to a
multiple of ``B / Q`` (``Q`` the *resolution*) and stored as an integer number of units
``ceil(Q L / B)`` in ``{0, ..., Q}``: rounding up keeps every row non-increasing and
never lowers a loss, so a guarantee for the rounded losses holds for the true ones, and
integer curves keep the release's penalties exact (:mod:`._shaped`).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from fractions import Fraction
from typing import Any

import numpy as np

__all__ = [
    "MAX_CURVE_UNITS",
    "MAX_RESOLUTION",
    "LossCurve",
    "loss_units",
    "max_resolution",
]

#: ``(n + 1) Q`` stays at most ``2^46``: the shaped release's target numerators
#: (``64 (n + 1) level``, computed in float64) and penalty numerators (at most
#: ``6400 n Q`` in int64) are then exact.
MAX_CURVE_UNITS = 2**46

#: The finest resolution used by default: losses in steps of ``B / 2^24``.
MAX_RESOLUTION = 2**24


def max_resolution(n_samples: int) -> int:
    """The default resolution ``Q`` for ``n_samples`` rows.

    The largest power of two at most :data:`MAX_RESOLUTION` with ``(n + 1) Q <= 2^46``.

    Raises
    ------
    ValueError
        If ``n_samples + 1 > 2^46`` (no resolution fits).
    """
    n = int(n_samples)
    if n + 1 > MAX_CURVE_UNITS:
        raise ValueError(
            f"n_samples = {n} is too large for exact integer loss curves (at most "
            f"{MAX_CURVE_UNITS - 1} rows)."
        )
    return min(MAX_RESOLUTION, 1 << ((MAX_CURVE_UNITS // (n + 1)).bit_length() - 1))


def loss_units(losses, loss_bound: float, resolution: int) -> np.ndarray:
    """``ceil(Q L / B)`` of every loss, exactly, as int64 in ``{0, ..., Q}``.

    ``r = (L Q) / B`` is computed in float64; its relative error is below ``2^-51``,
    so ``ceil(r)`` can fall short of the exact ``ceil(Q L / B)`` only where ``r`` lies at
    or just below an integer. Those entries (``ceil(r) - r <= 1e-9 max(r, 1)``, which
    includes every exact multiple of ``B / Q``) are recomputed in exact rational
    arithmetic, once per distinct value; elsewhere ``ceil(r)`` is exact or one unit
    above it, which is conservative.

    Parameters
    ----------
    losses : ndarray of float
        Losses in ``[0, B]``, finite.
    loss_bound : float
        ``B`` > 0, with ``B Q`` finite.
    resolution : int
        ``Q`` >= 1.

    Returns
    -------
    ndarray of int64, shaped like ``losses``

    Raises
    ------
    ValueError
        If a loss is not finite or lies outside ``[0, B]`` (the message names values).
    """
    losses = np.asarray(losses, dtype=np.float64)
    bad = ~np.isfinite(losses) | (losses < 0) | (losses > loss_bound)
    if bad.any():
        raise ValueError(
            f"losses must be finite and lie in [0, loss_bound] = [0, {loss_bound!r}]; got "
            f"{np.unique(losses[bad])[:5].tolist()}."
        )
    quotient = (losses * float(resolution)) / loss_bound
    units = np.ceil(quotient)
    suspect = units - quotient <= 1e-9 * np.maximum(quotient, 1.0)
    if suspect.any():
        values, inverse = np.unique(losses[suspect], return_inverse=True)
        exact_bound = Fraction(loss_bound)
        ceilings = [-((-Fraction(v) * resolution) // exact_bound) for v in values.tolist()]
        units[suspect] = np.array(ceilings, dtype=np.float64)[inverse.ravel()]
    return np.minimum(units, resolution).astype(np.int64)


@dataclass(frozen=True)
class LossCurve:
    """``S_1, ..., S_m``: the summed integer losses of a calibration set per candidate.

    Candidates are ordered from least to most conservative (for prediction sets, from
    the smallest sets to the largest). Row ``i`` contributes ``l_i(j) = ceil(Q L_i(j) /
    B)`` units, non-increasing in ``j`` and in ``{0, ..., Q}``, so ``S_j`` is
    non-increasing and ``S_0 = n Q`` is its largest possible value.

    Curves of disjoint rows add (``curve_a + curve_b``): a calibration set held in
    blocks or partitions is summed block by block.

    Parameters
    ----------
    sums : ndarray of int64 of shape (m,)
        ``S_1, ..., S_m``.
    n_samples : int
        Number of rows ``n`` (public).
    resolution : int
        ``Q``, units per loss bound.
    loss_bound : float
        ``B``, the largest loss of one row.
    owner_diagnostics : dict, default={}
        Data-dependent counts, NOT covered by any privacy guarantee (for the data owner):
        ``n_rows_loss_increasing`` (rows whose loss grew with a more conservative
        candidate; their non-increasing envelope was used instead, which is at least
        the loss, so the guarantee still holds) and ``n_rows_top_loss_positive`` (rows
        with a positive loss at the most conservative candidate, where the guarantee
        assumes 0).

    Raises
    ------
    ValueError
        If the sums are not a non-empty, non-increasing int64 vector in ``[0, n Q]``,
        or ``(n + 1) Q > 2^46``.
    """

    sums: np.ndarray
    n_samples: int
    resolution: int
    loss_bound: float
    owner_diagnostics: dict[str, Any] = field(default_factory=dict)

    def __post_init__(self):
        sums = np.asarray(self.sums)
        n, q = int(self.n_samples), int(self.resolution)
        if n < 1 or q < 1 or (n + 1) * q > MAX_CURVE_UNITS:
            raise ValueError(
                f"a loss curve needs n_samples >= 1, resolution >= 1 and (n + 1) * "
                f"resolution <= 2^46; got n_samples = {n}, resolution = {q}."
            )
        if not (isinstance(self.loss_bound, float) and 0 < self.loss_bound < math.inf):
            raise ValueError(
                f"loss_bound must be a positive finite float; got {self.loss_bound!r}."
            )
        if sums.ndim != 1 or sums.size == 0 or not np.issubdtype(sums.dtype, np.integer):
            raise ValueError("sums must be a non-empty one-dimensional integer array.")
        sums = sums.astype(np.int64)
        if sums[0] > n * q or sums[-1] < 0 or (np.diff(sums) > 0).any():
            raise ValueError("sums must be non-increasing, between 0 and n_samples * resolution.")
        object.__setattr__(self, "sums", sums)
        object.__setattr__(self, "n_samples", n)
        object.__setattr__(self, "resolution", q)

    @property
    def n_candidates(self) -> int:
        """``m``."""
        return int(self.sums.shape[0])

    @property
    def curve(self) -> np.ndarray:
        """``S_0 = n Q, S_1, ..., S_m``, the input of :func:`._shaped.shaped_penalties`."""
        return np.concatenate([[self.n_samples * self.resolution], self.sums])

    @classmethod
    def from_units(cls, units: np.ndarray, resolution: int, loss_bound: float = 1.0) -> LossCurve:
        """The curve of integer losses ``units`` of shape (n, m), in ``{0, ..., Q}``.

        Rows that increase somewhere are replaced by their non-increasing envelope
        ``max_{j' >= j} l(j')`` (at least the loss, so still conservative) and counted in
        ``owner_diagnostics``, as are rows with a positive loss at the last candidate.
        """
        units = np.asarray(units, dtype=np.int64)
        if units.ndim != 2 or units.shape[0] < 1 or units.shape[1] < 1:
            raise ValueError(
                f"losses must be a two-dimensional array (n_samples, n_candidates) with "
                f"at least one row and one candidate; got shape {units.shape}."
            )
        envelope = np.maximum.accumulate(units[:, ::-1], axis=1)[:, ::-1]
        diagnostics = {
            "n_rows_loss_increasing": int((envelope != units).any(axis=1).sum()),
            "n_rows_top_loss_positive": int((units[:, -1] > 0).sum()),
        }
        return cls(envelope.sum(axis=0), units.shape[0], resolution, float(loss_bound), diagnostics)

    @classmethod
    def from_losses(
        cls, losses, loss_bound: float = 1.0, resolution: int | None = None
    ) -> LossCurve:
        """The curve of real losses of shape (n, m).

        :func:`loss_units`, then :meth:`from_units`.

        Parameters
        ----------
        losses : array-like of shape (n_samples, n_candidates)
            ``L_i(lambda_j)``, columns from least to most conservative candidate.
        loss_bound : float, default=1.0
            ``B``.
        resolution : int or None, default=None
            ``Q``; None takes :func:`max_resolution` of the number of rows.
        """
        losses = np.asarray(losses, dtype=np.float64)
        if losses.ndim != 2 or losses.shape[0] < 1:
            raise ValueError(
                f"losses must be a two-dimensional array (n_samples, n_candidates) with "
                f"at least one row; got shape {losses.shape}."
            )
        bound = float(loss_bound)
        q = max_resolution(losses.shape[0]) if resolution is None else int(resolution)
        if not (0 < bound and math.isfinite(bound * q)) or q < 1:
            raise ValueError(
                f"loss_bound must be positive with loss_bound * resolution finite, and "
                f"resolution >= 1; got loss_bound = {loss_bound!r}, resolution = {q}."
            )
        return cls.from_units(loss_units(losses, bound, q), q, bound)

    def __add__(self, other: LossCurve) -> LossCurve:
        """The curve of the union of two disjoint sets of rows (same grid and units)."""
        if not isinstance(other, LossCurve):
            return NotImplemented
        if (other.n_candidates, other.resolution, other.loss_bound) != (
            self.n_candidates,
            self.resolution,
            self.loss_bound,
        ):
            raise ValueError("only curves on the same grid, resolution and loss bound add up.")
        diagnostics = {
            key: self.owner_diagnostics.get(key, 0) + other.owner_diagnostics.get(key, 0)
            for key in {*self.owner_diagnostics, *other.owner_diagnostics}
        }
        return LossCurve(
            self.sums + other.sums,
            self.n_samples + other.n_samples,
            self.resolution,
            self.loss_bound,
            diagnostics,
        )
