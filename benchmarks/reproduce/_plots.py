"""Figures of the reproductions (matplotlib, imported lazily: the ``[plot]`` extra)."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from ._paper002_tables import METRIC_NAMES, METRICS, VARYING_NAMES, TableResult
from .paper002 import METHODS

__all__ = ["plot_paper002_table"]

_PAPER_MARKERS = {"ExponQ": "X", "P-COQS": "P"}


def plot_paper002_table(result: TableResult, path: Path) -> Path:
    """Coverage, set size and singleton rate against the varied parameter.

    Our methods as mean +- one standard deviation over runs; the paper's ExponQ and
    P-COQS means as black markers.
    """
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    spec = result.spec
    values = np.asarray(spec.values, dtype=float)
    figure, axes = plt.subplots(1, 3, figsize=(15, 4.4), constrained_layout=True)
    shift = np.linspace(-0.06, 0.06, len(spec.methods))
    for axis, (index, name) in zip(axes, enumerate(METRICS), strict=True):
        for offset, key in zip(shift, spec.methods, strict=True):
            means = [result.cells[v, key].metrics[name].mean for v in spec.values]
            sds = [result.cells[v, key].metrics[name].sd for v in spec.values]
            axis.errorbar(
                values * np.exp(offset), means, yerr=sds, marker="o", markersize=3,
                capsize=2, linewidth=1, label=METHODS[key].label,
            )  # fmt: skip
        for column, marker in _PAPER_MARKERS.items():
            axis.scatter(
                values, [spec.paper[v][column][index][0] for v in spec.values], marker=marker,
                color="black", s=45, zorder=5, label=f"paper: {column}",
            )  # fmt: skip
        if name == "coverage":
            alphas = [spec.setting(v).alpha for v in spec.values]
            axis.plot(
                values, 1 - np.asarray(alphas), color="grey", linestyle=":", label="1 - alpha"
            )
        axis.set_xscale("log")
        axis.set_xlabel(VARYING_NAMES[spec.varying])
        axis.set_title(METRIC_NAMES[name])
    axes[-1].legend(loc="center left", bbox_to_anchor=(1.02, 0.5), fontsize=8)
    figure.suptitle(spec.title, fontsize=11)
    path.parent.mkdir(parents=True, exist_ok=True)
    figure.savefig(path, dpi=110)
    plt.close(figure)
    return path
