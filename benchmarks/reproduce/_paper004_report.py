"""Humbert et al. (2023)'s figures and tables from :mod:`benchmarks.reproduce.paper004`.

The paper publishes these experiments as figures only, so the numbers set beside ours
are the exact expected coverages the theory gives for continuous scores (FedCP-QQ:
``M(l*, k*)``, Theorem 3.2; centralized: ``ceil((N + 1)(1 - alpha)) / (N + 1)``),
flagged † when our mean is more than 3 standard errors away, and the paper's own
qualitative statements, each checked.
"""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np

from ._report import MEAN_GAP, MIN_RUNS_FOR_FLAGS, Summary, markdown_table, write_csv
from .paper004 import ALPHA, B2_METHODS, EXPERIMENTS, FIG4_SPLITS, RECORD_COLUMNS

__all__ = ["report_b2", "report_fig4"]

#: Methods whose stated lower bound is their exact expected coverage (continuous scores).
_EXACT = ("centralized", "FedCP-QQ")


def _column(records, keys, key, name):
    rows = records[records[:, 1] == keys.index(key)]
    return rows[:, RECORD_COLUMNS.index(name)]


def _table_rows(records, keys, experiments):
    rows, csv_rows, stats = [], [], {}
    for experiment in experiments:
        coverage = Summary.of(_column(records, keys, experiment.key, "coverage"))
        length = Summary.of(_column(records, keys, experiment.key, "length"))
        bounds = _column(records, keys, experiment.key, "stated_lower_bound")
        bound = float(np.mean(bounds)) if np.isfinite(bounds).all() else math.nan
        flag = ""
        if experiment.label in _EXACT and coverage.runs >= MIN_RUNS_FOR_FLAGS:
            if abs(coverage.mean - bound) > 3 * coverage.sd / math.sqrt(coverage.runs):
                flag = f" {MEAN_GAP}"
        m, n = experiment.split
        kind = "exact expected" if experiment.label in _EXACT else "lower bound"
        rows.append(
            [f"({m}, {n})", experiment.label, coverage.text() + flag,
             "" if math.isnan(bound) else f"{bound:.4f} ({kind})", length.text(),
             f"{np.mean(_column(records, keys, experiment.key, 'coverage') >= 1 - ALPHA):.0%}"]
        )  # fmt: skip
        csv_rows.append(
            [experiment.key, experiment.label, m, n, coverage.runs, coverage.mean, coverage.sd,
             bound, length.mean, length.sd, flag.strip()]
        )  # fmt: skip
        stats[experiment.key] = (coverage, length)
    header = ["(m, n)", "method", "coverage", "theory", "mean length", "runs >= 0.9"]
    return markdown_table(header, rows), csv_rows, stats


CSV_HEADER = [
    "experiment",
    "label",
    "m",
    "n",
    "runs",
    "coverage_mean",
    "coverage_sd",
    "theory",
    "length_mean",
    "length_sd",
    "flag",
]


def _check(text: str, holds: bool) -> str:
    return f"- {text}: **{'yes' if holds else 'NO'}**"


def report_fig4(records, keys, out: Path, plots: bool = True) -> str:
    """Figure 4-style coverage (and length) boxplots and their table."""
    experiments = [EXPERIMENTS[k] for k in keys if EXPERIMENTS[k].split in FIG4_SPLITS]
    table, csv_rows, stats = _table_rows(records, keys, experiments)
    claims = []
    for m, n in FIG4_SPLITS:
        qq, avg = stats[f"fedcp_qq_{m}x{n}"], stats[f"fedcp_avg_{m}x{n}"]
        central = stats[f"centralized_{m}x{n}"]
        claims.append(_check(f"({m}, {n}): FedCP-QQ mean coverage >= 0.90 "
                             f"({qq[0].mean:.4f})", qq[0].mean >= 1 - ALPHA))  # fmt: skip
        claims.append(
            _check(
                f"({m}, {n}): FedCP-Avg covers more and is longer than FedCP-QQ "
                f"({avg[0].mean:.4f} vs {qq[0].mean:.4f}; {avg[1].mean:.3f} vs "
                f"{qq[1].mean:.3f})",
                avg[0].mean > qq[0].mean and avg[1].mean > qq[1].mean,
            )
        )
        claims.append(
            f"- ({m}, {n}): FedCP-QQ minus centralized: coverage "
            f"{qq[0].mean - central[0].mean:+.4f}, sd {qq[0].sd:.4f} vs {central[0].sd:.4f}"
        )
    markdown = (
        "**Humbert et al. (2023) Sec. 5.1 data, Figure 4 style** (alpha = 0.1, N = 1000 "
        "calibration scores split into m agents of n; "
        f"{stats[experiments[0].key][0].runs} runs)\n\n"
        + table
        + "\n\nThe paper's statements (Sec. 5.1-5.2), checked on these runs:\n\n"
        + "\n".join(claims)
    )
    (out / "paper004-fig4.md").write_text(markdown + "\n")
    write_csv(out / "paper004-fig4.csv", CSV_HEADER, csv_rows)
    if plots:
        _boxplots(records, keys, [[e for e in experiments if e.split == s] for s in FIG4_SPLITS],
                  [f"m = {m}, n = {n}" for m, n in FIG4_SPLITS], out / "paper004-fig4.png",
                  "Humbert et al. 2023, Sec. 5.1 data: coverage and length")  # fmt: skip
    return markdown


def report_b2(records, keys, out: Path, plots: bool = True) -> str:
    """Appendix B.2: FedCP2-QQ at epsilon in {10, 5, 1}, m = 5, n = 200."""
    experiments = [e for e in B2_METHODS if e.key in keys]
    table, csv_rows, stats = _table_rows(records, keys, experiments)
    claims = []
    for suffix, what in (("_data", "range from data (paper)"), ("", "public range")):
        means = [stats[f"b2_fedcp2_qq_{eps}{suffix}"][0].mean for eps in ("10", "5", "1")]
        claims.append(_check(f"FedCP2-QQ, {what}: mean coverage >= 0.90 at every epsilon "
                             f"({', '.join(f'{v:.4f}' for v in means)})",
                             min(means) >= 1 - ALPHA))  # fmt: skip
        claims.append(_check(f"FedCP2-QQ, {what}: more conservative as epsilon decreases",
                             means[0] <= means[1] <= means[2]))  # fmt: skip
    markdown = (
        "**Humbert et al. (2023) Appendix B.2: FedCP2-QQ** (Sec. 5.1 data, m = 5 agents of "
        f"n = 200, B = 100 bins, alpha = 0.1; {stats[experiments[0].key][0].runs} runs)\n\n"
        + table
        + "\n\nThe paper's statements (Appendix B.2), checked on these runs:\n\n"
        + "\n".join(claims)
    )
    (out / "paper004-b2.md").write_text(markdown + "\n")
    write_csv(out / "paper004-b2.csv", CSV_HEADER, csv_rows)
    if plots:
        _boxplots(records, keys, [experiments], ["m = 5, n = 200"], out / "paper004-b2.png",
                  "Humbert et al. (2023) Appendix B.2: FedCP2-QQ, eps in {10, 5, 1}")  # fmt: skip
    return markdown


def _boxplots(records, keys, groups, titles, path: Path, title: str) -> None:
    """Coverage (top) and length (bottom) boxplots, white circles at the means."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    width = max(4.5, 1.1 * max(len(g) for g in groups))
    figure, axes = plt.subplots(
        2, len(groups), figsize=(width * len(groups), 7.5), squeeze=False,
        constrained_layout=True,
    )  # fmt: skip
    for column, (group, subtitle) in enumerate(zip(groups, titles, strict=True)):
        labels = [e.label.replace(", ", "\n", 1) for e in group]
        for row, name in enumerate(("coverage", "length")):
            axis = axes[row, column]
            data = [_column(records, keys, e.key, name) for e in group]
            axis.boxplot(
                data, showmeans=True,
                meanprops={"marker": "o", "markerfacecolor": "white", "markeredgecolor": "black"},
            )  # fmt: skip
            axis.set_xticks(range(1, len(group) + 1), labels, fontsize=8, rotation=20)
            if name == "coverage":
                axis.axhline(1 - ALPHA, color="grey", linestyle="--", linewidth=1)
                axis.set_title(subtitle)
            axis.set_ylabel(name if column == 0 else "")
    figure.suptitle(title, fontsize=11)
    path.parent.mkdir(parents=True, exist_ok=True)
    figure.savefig(path, dpi=110)
    plt.close(figure)
