"""Why the library's ExponQ differs from paper 002's: the parameters side by side.

For each calibration size and budget of paper 002's tables, the library's
deterministic ``(m*, gamma*, q~)`` and its exponent scale ``epsilon / (2 Delta_q)``
(``Delta_q = max(1/q~, 1/(1 - q~))``, DESIGN.md correction 1) are set beside what the
public code uses: ``m*`` from its noisy search (median and range over ``searches``
draws), the ``q~`` that goes with it, and the scale ``epsilon min(alpha, 1 - alpha) / 2``.
The last column is the privacy the public mechanism delivers by the monotone
exponential-mechanism bound, ``scale * Delta_q`` (add/remove adjacency with n public;
twice that under replace-one), which exceeds the stated epsilon as soon as
``1 - q~ < alpha / 2``; when ``q~`` hits its cap ``1 - 1e-12`` it is about ``1e11``
times epsilon.
"""

from __future__ import annotations

import numpy as np

from privconf_sklearn._random import NoiseSource
from privconf_sklearn.mechanisms import ExponQ

from ._public_code import public_exponq_parameters, public_qtilde
from ._report import markdown_table
from .paper002 import split_sizes

__all__ = ["exponq_parameter_table"]


def exponq_parameter_table(
    sizes=(100, 500, 2000, 10000),
    budgets=(0.1, 0.5, 1.0, 3.0, 10.0),
    alpha: float = 0.1,
    searches: int = 200,
    seed: int = 0,
) -> tuple[str, list[list]]:
    """Markdown table (and CSV rows) of both implementations' parameters."""
    noise = NoiseSource(np.random.default_rng(seed))
    header = [
        "n (n_cal)",
        "eps",
        "library m*",
        "library q~",
        "library scale",
        "public m* median [min, max]",
        "public q~ at median m*",
        "public scale",
        "public delivers (add/remove)",
    ]
    rows, csv_rows = [], []
    for n in sizes:
        n_cal = split_sizes(n)[1]
        for epsilon in budgets:
            resolved = ExponQ(epsilon=epsilon, scaling="paper").resolve_parameters(n_cal, alpha)
            m_lib, q_lib = resolved.n_bins, resolved.level
            if m_lib is None:
                library = ["infeasible", f"{q_lib:.4f} >= 1", ""]
                scale_lib = np.nan
            else:
                scale_lib = epsilon / (2 * max(1 / q_lib, 1 / (1 - q_lib)))
                library = [f"{m_lib}", f"{q_lib:.4f}", f"{scale_lib:.4g}"]
            draws = [
                public_exponq_parameters(n_cal, alpha, epsilon, noise) for _ in range(searches)
            ]
            m_public = np.array([m for m, _ in draws])
            median = int(np.median(m_public))
            gamma = draws[int(np.argmin(np.abs(m_public - median)))][1]
            q_public = float(public_qtilde(n_cal, alpha, gamma, epsilon, median))
            scale_public = epsilon * min(alpha, 1 - alpha) / 2
            delivered = scale_public * max(1 / q_public, 1 / (1 - q_public))
            rows.append(
                [f"{n} ({n_cal})", f"{epsilon:g}", *library,
                 f"{median} [{m_public.min()}, {m_public.max()}]", f"{q_public:.4f}",
                 f"{scale_public:.4g}", f"{delivered:.3g}"]
            )  # fmt: skip
            csv_rows.append(
                [n, n_cal, epsilon, m_lib or "", q_lib, scale_lib, median, m_public.min(),
                 m_public.max(), q_public, scale_public, delivered]
            )  # fmt: skip
    return markdown_table(header, rows), csv_rows


#: CSV header of :func:`exponq_parameter_table`.
CSV_HEADER = [
    "n",
    "n_cal",
    "epsilon",
    "library_m",
    "library_q",
    "library_scale",
    "public_m_median",
    "public_m_min",
    "public_m_max",
    "public_q",
    "public_scale",
    "public_delivered_epsilon",
]
