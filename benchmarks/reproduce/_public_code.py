"""What paper 002's experiments actually ran: the authors' public ExponQ and P-COQS.

Paper 002 (Romanus and Molinari) compares P-COQS with ExponQ using the Python code
published with the paper (github.com/SMAC-Group/pcoqs, ``paper_codes/``), whose ExponQ
functions are those of Angelopoulos et al.'s public code
(github.com/aangelopoulos/private_prediction_sets, ``core/private_conformal_utils.py``).
Neither is the mechanism this library implements (DESIGN.md corrections 1-5), so the
library's numbers cannot match theirs exactly. To show *which* differences explain the
gaps, this module re-implements, from a reading of that code (no code copied), the
behaviour it has:

ExponQ as published (:func:`public_exponq_threshold`)
    * edges ``linspace(0, 1, m)`` (``m`` edges); each score is moved to the first edge
      strictly above it (the top edge for 1);
    * ``q~`` of paper 000 Eq. (3) with the factor 2, clipped to ``1 - 1e-12`` instead
      of declaring the level infeasible (correction 4);
    * edge ``e_j`` drawn with probability proportional to
      ``exp(-epsilon * min(alpha, 1 - alpha) / 2 * w_j)``: the utility is scaled by
      ``alpha``, not by its sensitivity ``max(1/q~, 1/(1 - q~))`` (correction 1);
    * ``m*`` and ``gamma*`` picked by running that mechanism on ``n`` freshly simulated
      uniform scores for each of 50 candidate ``m`` log-spaced in ``[10^4, 10^6]`` and
      both roots of the ``gamma`` quadratic (clipped to ``[1e-12, 1 - 1e-12]``), keeping
      the pair whose *noisy* output is smallest (correction 5): ``m*`` is random.

P-COQS as published (:func:`public_pcoqs_threshold`)
    * ``N = ceil(log2(1 / 1e-10)) = 34`` queries ``max(0, floor(#{s <= mid} + Z))``,
      ``Z ~ N(0, N / (2 rho))``; a count below the target rank
      ``ceil((1 - alpha)(n + 1))`` moves the left end to ``mid + 1e-10``;
    * the release is the final midpoint **rounded to 2 decimals** (correction 3).

Their pipeline also rounds calibration scores (not test scores) to 4 decimals; the
runner applies that rounding before calling these functions.

The exponential mechanism is sampled exactly without materialising the ``m`` edges
(up to 10^6 per draw, 100 draws per calibration in the ``m*`` search): between two
consecutive occupied edges the counts below and above, hence the utility, are
constant, so the edges form at most ``2n + 1`` segments of equal weight. A segment is
drawn with probability proportional to its total mass (inverse CDF), then an edge
uniformly inside it. All randomness comes from a
:class:`privconf_sklearn._random.NoiseSource`.

These functions exist to explain published numbers. They are **not** private as
stated (DESIGN.md correction 7 measures a privacy loss of 1.54 at ``epsilon = 1``,
``n = 600``) and are not part of the library.
"""

from __future__ import annotations

import math

import numpy as np

from privconf_sklearn._random import NoiseSource

__all__ = [
    "PUBLIC_BIN_CANDIDATES",
    "edge_log_probabilities",
    "public_exponq_parameters",
    "public_exponq_threshold",
    "public_gamma_roots",
    "public_pcoqs_threshold",
    "public_qtilde",
]

#: Candidate numbers of edges of the public ``m*`` search: ``logspace(4, 6, 50)``
#: truncated to integers.
PUBLIC_BIN_CANDIDATES = np.logspace(4, 6, 50).astype(np.int64)
#: Clip of ``q~`` in the public code (DESIGN.md correction 4).
_Q_CAP = 1.0 - 1e-12
#: Clip of ``gamma`` in the public code.
_GAMMA_CLIP = (1e-12, 1.0 - 1e-12)
#: Final interval width of the published P-COQS (the paper's ``delta``).
_PCOQS_STEP = 1e-10


def public_qtilde(n: int, alpha: float, gamma, epsilon: float, n_edges) -> np.ndarray:
    """Inflated level of paper 000 Eq. (3) as published, capped at ``1 - 1e-12``.

    ``(n + 1)(1 - alpha) / (n (1 - gamma alpha)) + 2 log(m / (gamma alpha)) / (eps n)``
    with ``m`` the number of edges of ``linspace(0, 1, m)``.
    """
    gamma = np.asarray(gamma, dtype=np.float64)
    m = np.asarray(n_edges, dtype=np.float64)
    level = (n + 1) * (1 - alpha) / (n * (1 - gamma * alpha))
    level = level + 2.0 / (epsilon * n) * np.log(m / (gamma * alpha))
    return np.minimum(level, _Q_CAP)


def public_gamma_roots(n: int, alpha: float, epsilon: float) -> tuple[float, float]:
    """Both roots of paper 000 Eq. (9), each clipped to ``[1e-12, 1 - 1e-12]``.

    ``alpha^2 g^2 - (alpha eps (n + 1)(1 - alpha) / 2 + 2 alpha) g + 1 = 0``; the larger
    root exceeds 1 and is clipped to ``1 - 1e-12`` (which then makes ``q~`` hit its cap).
    """
    a = alpha**2
    b = -(alpha * epsilon * (n + 1) * (1 - alpha) / 2 + 2 * alpha)
    disc = math.sqrt(b * b - 4 * a)
    roots = ((-b + disc) / (2 * a), (-b - disc) / (2 * a))
    return tuple(min(max(g, _GAMMA_CLIP[0]), _GAMMA_CLIP[1]) for g in roots)


def _edge_index(sorted_scores: np.ndarray, n_edges: np.ndarray) -> np.ndarray:
    """Index of the first edge of ``linspace(0, 1, m)`` strictly above each score.

    ``min(#{k : e_k <= s}, m - 1)`` (the top edge for ``s = 1``), for every row of
    ``n_edges`` (shape ``(r,)``) and every score (shape ``(n,)``): returns ``(r, n)``.
    Edges are ``k * (1 / (m - 1))`` as numpy's ``linspace`` computes them; the first
    guess ``floor(s (m - 1))`` is corrected by one step either way.
    """
    m = n_edges[:, None].astype(np.float64)
    step = 1.0 / (m - 1.0)
    below = np.floor(sorted_scores[None, :] * (m - 1.0))
    below += (below + 1.0) * step <= sorted_scores[None, :]
    below -= below * step > sorted_scores[None, :]
    return np.minimum(below + 1.0, m - 1.0).astype(np.int64)


def _segments(edge_index: np.ndarray, n_edges: np.ndarray):
    """Level-independent structure of the edge segments (see :func:`edge_log_probabilities`).

    Gap ``k`` (``k = 0..n``) holds the edges strictly between the ``(k-1)``-th and the
    ``k``-th sorted score (the ends for ``k = 0`` and ``k = n``); point ``i`` is the edge
    of the ``i``-th score, counted once, at the last of equal indices.
    """
    r, n = edge_index.shape
    top = n_edges[:, None]
    previous = np.concatenate([np.full((r, 1), -1), edge_index], axis=1)
    following = np.concatenate([edge_index, top], axis=1)
    gap_start = previous + 1
    gap_length = np.maximum(following - gap_start, 0)
    is_last = edge_index != following[:, 1:]
    position = np.arange(n)
    first = np.maximum.accumulate(np.where(edge_index != previous[:, :-1], position, 0), axis=1)
    # The public code's cumulative count at the top edge includes the scores binned there.
    point_below = np.where(edge_index == top - 1, n, first)
    return gap_start, gap_length, is_last, point_below


def _log_masses(structure, n: int, q: np.ndarray, scale: np.ndarray) -> np.ndarray:
    """Log-masses ``log(length) - scale * w`` of the gaps then the points, one row per run."""
    _, gap_length, is_last, point_below = structure
    q = q[:, None]
    k = np.arange(n + 1)
    gap_utility = np.maximum(k / q, (n - k) / (1.0 - q))
    point_utility = np.maximum(point_below / q, (n - 1 - k[:-1]) / (1.0 - q))
    with np.errstate(divide="ignore"):
        gap_mass = np.log(gap_length) - scale[:, None] * gap_utility
    point_mass = np.where(is_last, -scale[:, None] * point_utility, -np.inf)
    return np.concatenate([gap_mass, point_mass], axis=1)


def edge_log_probabilities(
    edge_index: np.ndarray, n_edges: np.ndarray, q: np.ndarray, scale: np.ndarray
):
    """Segments of equal utility and their log-masses, one row per mechanism run.

    Between two consecutive occupied edges the counts ``#{[s] < e_j}`` and
    ``#{[s] > e_j}``, hence the utility ``w_j = max(below / q, above / (1 - q))``, are
    constant; so are they on each occupied edge. The ``m`` edges therefore form at most
    ``2n + 1`` segments of equal probability each.

    Parameters
    ----------
    edge_index : ndarray of shape (r, n), sorted along axis 1
        Occupied edge index of each (binned) score.
    n_edges : ndarray of shape (r,)
        Number of edges ``m`` of each row.
    q : ndarray of shape (r,)
        Level of each row.
    scale : ndarray of shape (r,)
        Multiplier of the utility in the exponent (``epsilon min(alpha, 1 - alpha) / 2``
        in the public code).

    Returns
    -------
    start : ndarray of shape (r, 2n + 1), int64
        First edge of each segment: the ``n + 1`` gaps, then the ``n`` points.
    length : ndarray of shape (r, 2n + 1), int64
        Number of edges in each segment (0 for an empty one).
    log_mass : ndarray of shape (r, 2n + 1)
        ``log(length) - scale * w``; ``-inf`` for empty segments.
    """
    structure = _segments(edge_index, n_edges)
    gap_start, gap_length, is_last, _ = structure
    start = np.concatenate([gap_start, edge_index], axis=1)
    length = np.concatenate([gap_length, is_last.astype(np.int64)], axis=1)
    return start, length, _log_masses(structure, edge_index.shape[1], q, scale)


def _draw_edges(start, length, log_mass, noise: NoiseSource) -> np.ndarray:
    """One edge index per row: a segment by inverse CDF, then an edge uniformly in it."""
    rows = np.arange(log_mass.shape[0])
    cdf = np.cumsum(np.exp(log_mass - log_mass.max(axis=1, keepdims=True)), axis=1)
    # Row r's normalised CDF shifted by r is one increasing array: one binary search.
    cdf /= cdf[:, -1:]
    cdf += rows[:, None]
    found = np.searchsorted(cdf.ravel(), rows + noise.uniform(rows.shape[0]), side="right")
    segment = np.minimum(found - rows * log_mass.shape[1], log_mass.shape[1] - 1)
    offset = np.floor(noise.uniform(rows.shape[0]) * length[rows, segment]).astype(np.int64)
    return start[rows, segment] + offset


def _edge_values(edge: np.ndarray, n_edges: np.ndarray) -> np.ndarray:
    """Values of ``linspace(0, 1, m)[edge]`` (the top edge is exactly 1)."""
    return np.where(edge == n_edges - 1, 1.0, edge * (1.0 / (n_edges - 1.0)))


def public_exponq_parameters(n: int, alpha: float, epsilon: float, noise: NoiseSource):
    """``(m*, gamma*)`` chosen as the public code does, by a noisy search.

    ``n`` uniform scores are simulated; for each candidate ``m`` the mechanism is run
    once with each ``gamma`` root and the smaller output kept (ties: the second root);
    the first ``m`` with the smallest output wins, starting from ``(1 / alpha, 1)`` at
    output 1.
    """
    roots = np.array(public_gamma_roots(n, alpha, epsilon))
    m = PUBLIC_BIN_CANDIDATES
    index = _edge_index(np.sort(noise.uniform(n)), m)
    structure = _segments(index, m)
    gap_start, gap_length, is_last, _ = structure
    start = np.concatenate([gap_start, index], axis=1)
    length = np.concatenate([gap_length, is_last.astype(np.int64)], axis=1)
    scale = np.full(m.shape[0], epsilon * min(alpha, 1 - alpha) / 2)
    outputs = np.column_stack(
        [
            _edge_values(
                _draw_edges(
                    start,
                    length,
                    _log_masses(structure, n, public_qtilde(n, alpha, gamma, epsilon, m), scale),
                    noise,
                ),
                m,
            )
            for gamma in roots
        ]
    )
    pick = (outputs[:, 0] >= outputs[:, 1]).astype(np.int64)
    best = outputs[np.arange(m.shape[0]), pick]
    if not (best < 1.0).any():
        return int(1 / alpha), 1.0
    winner = int(np.argmin(best))
    return int(m[winner]), float(roots[pick[winner]])


def public_exponq_threshold(
    scores: np.ndarray, alpha: float, epsilon: float, noise: NoiseSource
) -> float:
    """Threshold of paper 002's ExponQ runs (the public code's behaviour, see module doc).

    Parameters
    ----------
    scores : ndarray of shape (n,)
        Calibration scores in [0, 1].
    alpha, epsilon : float
        Miscoverage level and the stated (not delivered) privacy parameter.
    noise : NoiseSource
        Randomness for the ``m*`` search and the draw.

    Returns
    -------
    float
        The released edge value.
    """
    n = scores.shape[0]
    n_edges, gamma = public_exponq_parameters(n, alpha, epsilon, noise)
    m = np.array([n_edges])
    q = public_qtilde(n, alpha, np.array([gamma]), epsilon, m)
    scale = np.array([epsilon * min(alpha, 1 - alpha) / 2])
    start, length, log_mass = edge_log_probabilities(_edge_index(np.sort(scores), m), m, q, scale)
    return float(_edge_values(_draw_edges(start, length, log_mass, noise), m)[0])


def public_pcoqs_threshold(
    scores: np.ndarray, alpha: float, rho: float, noise: NoiseSource
) -> float:
    """Threshold of paper 002's P-COQS runs (the published Python function's behaviour).

    34 noisy, floored and non-negative counts ``#{s <= mid}``; the final midpoint is
    rounded to 2 decimals (see module doc).
    """
    ordered = np.sort(scores)
    n = ordered.shape[0]
    n_queries = math.ceil(math.log2(1.0 / _PCOQS_STEP))
    sigma = math.sqrt(n_queries / (2.0 * rho))
    target = math.ceil((1 - alpha) * (n + 1))
    noise_values = noise.normal(sigma, n_queries)
    left, right = 0.0, 1.0
    for value in noise_values.tolist():
        middle = (left + right) / 2
        count = int(np.searchsorted(ordered, middle, side="right"))
        noisy = max(0, math.floor(count + value))
        if noisy < target:
            left = middle + _PCOQS_STEP
        else:
            right = middle
    return float(np.round((left + right) / 2, 2))
