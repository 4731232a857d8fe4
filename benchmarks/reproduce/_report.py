"""Summaries of Monte Carlo runs, set beside published numbers, as Markdown and CSV.

A gap is flagged when our mean differs from the paper's by more than three standard
errors of the difference, ``sqrt(sd_ours^2 / R_ours + sd_paper^2 / R_paper)``, plus half
a unit of the paper's last printed digit (``5e-5``: its numbers are rounded to 4
decimals). Spreads are compared the same way, with the large-sample standard error of
a standard deviation ``sd * sqrt((kurtosis - 1) / (4 R))`` (``sd / sqrt(2 R)`` for
Gaussian data); the kurtosis is our runs', which under the hypothesis of no gap is also
the paper's. Coverages near 1 and small-sample cells are far from Gaussian (kurtosis
up to several hundred), and the Gaussian formula would flag their spreads spuriously.
"""

from __future__ import annotations

import csv
import math
from dataclasses import dataclass
from pathlib import Path

import numpy as np

__all__ = ["Summary", "compare", "summarise", "write_csv"]

#: Half a unit of the paper's 4th decimal.
PRINT_TOLERANCE = 5e-5
#: Standard errors a difference must exceed to be flagged.
GAP_SE = 3.0
MEAN_GAP, SD_GAP = "†", "‡"
#: Fewer runs than this are too few to flag anything (``--quick``).
MIN_RUNS_FOR_FLAGS = 20


@dataclass(frozen=True)
class Summary:
    """Mean, standard deviation (ddof = 1), kurtosis and median over ``runs`` runs.

    ``kurtosis`` is ``m4 / m2^2`` (3 for Gaussian data; 3 when the values are constant).
    """

    mean: float
    sd: float
    runs: int
    kurtosis: float = 3.0
    median: float = math.nan

    @classmethod
    def of(cls, values) -> Summary:
        values = np.asarray(values, dtype=np.float64)
        sd = float(values.std(ddof=1)) if values.size > 1 else math.nan
        centred = values - values.mean()
        m2 = float(np.mean(centred**2))
        kurtosis = float(np.mean(centred**4)) / m2**2 if m2 > 0 else 3.0
        return cls(float(values.mean()), sd, int(values.size), kurtosis, float(np.median(values)))

    def text(self, digits: int = 4) -> str:
        return f"{self.mean:.{digits}f} ({self.sd:.{digits}f})"


def summarise(values) -> Summary:
    """:meth:`Summary.of`."""
    return Summary.of(values)


def compare(ours: Summary, paper: tuple[float, float], paper_runs: int) -> str:
    """Flags of ``ours`` against the paper's ``(mean, sd)``: "", "†", "‡" or "†‡"."""
    paper_mean, paper_sd = paper
    if ours.runs < MIN_RUNS_FOR_FLAGS:
        return ""
    flags = ""
    se = math.sqrt(ours.sd**2 / ours.runs + paper_sd**2 / paper_runs)
    if abs(ours.mean - paper_mean) > GAP_SE * se + PRINT_TOLERANCE:
        flags += MEAN_GAP
    se_sd = math.sqrt(
        (ours.kurtosis - 1.0) / 4 * (ours.sd**2 / ours.runs + paper_sd**2 / paper_runs)
    )
    if abs(ours.sd - paper_sd) > GAP_SE * se_sd + PRINT_TOLERANCE:
        flags += SD_GAP
    return flags


def markdown_table(header: list[str], rows: list[list[str]]) -> str:
    """A GitHub Markdown table."""
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(row) + " |" for row in rows]
    return "\n".join(lines)


def write_csv(path: Path, header: list[str], rows: list[list]) -> None:
    """Write ``rows`` under ``header`` to ``path`` (parents created)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("w", newline="") as handle:
        writer = csv.writer(handle)
        writer.writerow(header)
        writer.writerows(rows)
