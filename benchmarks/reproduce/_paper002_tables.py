"""Paper 002's tables from the runs of :mod:`benchmarks.reproduce.paper002`.

Each table shows, per row and metric, the paper's ``mean (sd)`` next to ours for the
methods compared with it, then the extra columns (honest (epsilon, delta)-DP P-COQS,
its rank-inflated variant, DP-APS, split conformal). Flags: † our mean differs from
the paper's by more than 3 standard errors, ‡ our standard deviation does.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from ._paper002_numbers import PAPER_RUNS, PAPER_TABLE4
from ._report import MEAN_GAP, SD_GAP, Summary, compare, markdown_table
from .paper002 import METHOD_KEYS, METHODS, Setting, TableSpec

__all__ = ["TableResult", "collect", "render", "render_table4"]

#: Metric name -> column of the run records.
METRICS = {"coverage": 6, "size": 7, "singleton": 8}
METRIC_NAMES = {"coverage": "coverage", "size": "set size", "singleton": "singletons"}
VARYING_NAMES = {"epsilon_cal": "eps_CP", "n_samples": "n", "alpha": "alpha"}
#: Paper 002's model accuracy at n = 10000 (Tables 2, 9 and 4).
PAPER_ACCURACY = {"dp_nb": (0.7479, 0.0125), "dp_rf": (0.7941, 0.0173), "nb": (0.8253, 0.0092)}


@dataclass
class Cell:
    """One (row, method) cell: the three metrics, infeasible share, time per calibration."""

    metrics: dict[str, Summary]
    trivial: float
    seconds: Summary


@dataclass
class TableResult:
    """A reproduced table: its spec, cells by ``(value, method)``, accuracy by value."""

    spec: TableSpec
    cells: dict[tuple[float, str], Cell] = field(default_factory=dict)
    accuracy: dict[float, Summary] = field(default_factory=dict)
    flags: list[tuple[float, str, str, str]] = field(default_factory=list)


def cell_of(records: np.ndarray, setting_id: int, key: str) -> Cell:
    """Summaries of one setting and method from the run records."""
    mine = records[(records[:, 1] == setting_id) & (records[:, 2] == METHOD_KEYS.index(key))]
    metrics = {name: Summary.of(mine[:, column]) for name, column in METRICS.items()}
    return Cell(metrics, float(1.0 - mine[:, 5].mean()), Summary.of(mine[:, 4]))


def collect(
    spec: TableSpec, settings: list[Setting], records: np.ndarray, accuracy: np.ndarray
) -> TableResult:
    """Gather ``spec``'s cells from runs made with ``settings``, and flag the gaps."""
    result = TableResult(spec)
    for value in spec.values:
        setting = spec.setting(value)
        setting_id = settings.index(setting)
        for key in spec.methods:
            cell = cell_of(records, setting_id, key)
            result.cells[value, key] = cell
            column = METHODS[key].paper_column
            if column is None:
                continue
            for index, name in enumerate(METRICS):
                flag = compare(cell.metrics[name], spec.paper[value][column][index], PAPER_RUNS)
                if flag:
                    result.flags.append((value, key, name, flag))
        result.accuracy[value] = Summary.of(accuracy[accuracy[:, 1] == setting.n_samples, 2])
    return result


def _value_text(spec: TableSpec, value: float) -> str:
    return f"{int(value)}" if spec.varying == "n_samples" else f"{value:g}"


def _flagged(result: TableResult, value: float, key: str, name: str) -> str:
    cell = result.cells[value, key]
    flags = "".join(f for v, k, m, f in result.flags if (v, k, m) == (value, key, name))
    return cell.metrics[name].text() + (f" {flags}" if flags else "")


def render(result: TableResult) -> tuple[str, list[list]]:
    """Markdown of the table and its rows as CSV records."""
    spec = result.spec
    compared = {
        column: [k for k in spec.methods if METHODS[k].paper_column == column]
        for column in ("ExponQ", "P-COQS")
    }
    extra = [k for k in spec.methods if METHODS[k].paper_column is None]
    varying = VARYING_NAMES[spec.varying]
    header = [varying, "metric"]
    for column, keys in compared.items():
        header += [f"paper {column}"] + [METHODS[k].label for k in keys]
    rows = []
    for value in spec.values:
        for index, name in enumerate(METRICS):
            row = [_value_text(spec, value) if index == 0 else "", METRIC_NAMES[name]]
            for column, keys in compared.items():
                paper_mean, paper_sd = spec.paper[value][column][index]
                row.append(f"{paper_mean:.4f} ({paper_sd:.4f})")
                row += [_flagged(result, value, k, name) for k in keys]
            rows.append(row)
    parts = [f"**{spec.title}** ({_runs_text(result)})", markdown_table(header, rows)]

    extra_rows = []
    show_trivial = any(result.cells[v, k].trivial > 0 for v in spec.values for k in extra)
    for value in spec.values:
        names = [*METRICS, "trivial"] if show_trivial else list(METRICS)
        for index, name in enumerate(names):
            row = [_value_text(spec, value) if index == 0 else ""]
            row.append("trivial sets" if name == "trivial" else METRIC_NAMES[name])
            for key in extra:
                cell = result.cells[value, key]
                row.append(
                    f"{cell.trivial:.1%}" if name == "trivial" else cell.metrics[name].text()
                )
            extra_rows.append(row)
    parts.append(
        "Extra columns (not in the paper):\n\n"
        + markdown_table([varying, "metric"] + [METHODS[k].label for k in extra], extra_rows)
    )
    parts.append(_accuracy_text(result))

    csv_rows = []
    for (value, key), cell in result.cells.items():
        column = METHODS[key].paper_column
        paper = spec.paper[value][column] if column else None
        record = [spec.name, spec.varying, value, key, METHODS[key].label, column or ""]
        record += [cell.metrics["coverage"].runs]
        for index, name in enumerate(METRICS):
            summary = cell.metrics[name]
            record += [summary.mean, summary.sd]
            record += list(paper[index]) if paper else ["", ""]
            record.append(
                "".join(f for v, k, m, f in result.flags if (v, k, m) == (value, key, name))
            )
        record += [cell.trivial, cell.seconds.mean * 1e3, result.accuracy[value].mean]
        csv_rows.append(record)
    return "\n\n".join(parts), csv_rows


#: Header of the CSV rows of :func:`render`.
CSV_HEADER = [
    "table",
    "varying",
    "value",
    "method",
    "label",
    "paper_column",
    "runs",
    *[
        f"{name}_{part}"
        for name in METRICS
        for part in ("mean", "sd", "paper_mean", "paper_sd", "flags")
    ],
    "trivial_fraction",
    "ms_per_calibration",
    "model_accuracy",
]


def _runs_text(result: TableResult) -> str:
    runs = next(iter(result.cells.values())).metrics["coverage"].runs
    return f"{runs} runs; paper: {PAPER_RUNS}"


def _accuracy_text(result: TableResult) -> str:
    spec = result.spec
    paper_default = PAPER_ACCURACY[spec.model]
    if spec.varying != "n_samples":
        ours = next(iter(result.accuracy.values()))
        flag = compare(ours, paper_default, PAPER_RUNS)
        return (
            f"Model test accuracy (n = 10000): ours {ours.text()}"
            f"{' ' + flag if flag else ''}, paper {paper_default[0]:.4f} ({paper_default[1]:.4f})."
        )
    rows = []
    for value in spec.values:
        ours = result.accuracy[value]
        paper = spec.paper[value].get("accuracy")
        flag = compare(ours, paper, PAPER_RUNS) if paper else ""
        rows.append(
            [
                _value_text(spec, value),
                ours.text() + (f" {flag}" if flag else ""),
                f"{paper[0]:.4f} ({paper[1]:.4f})" if paper else "",
            ]
        )
    return "Model test accuracy:\n\n" + markdown_table(["n", "ours", "paper"], rows)


def render_table4(cells: dict[tuple[str, str], tuple[Cell, Summary]]) -> tuple[str, list[list]]:
    """Paper 002 Table 4: metrics and time per calibration, ours beside the paper's.

    ``cells`` maps ``(model, method key)`` to the cell at ``n = 10000``,
    ``epsilon_CP = 1``, ``alpha = 0.1`` and the model's accuracy.
    """
    header = [
        "model",
        "method",
        "coverage",
        "set size",
        "singletons",
        "accuracy",
        "ms per calibration (ours): mean (sd), median",
        "paper: coverage, set size, accuracy",
        "paper: ms per calibration",
    ]
    rows, csv_rows = [], []
    for (model, key), (cell, accuracy) in cells.items():
        column = METHODS[key].paper_column
        paper = PAPER_TABLE4.get((model, column)) if column else None
        metrics = [cell.metrics[name] for name in METRICS]
        texts = []
        for index, summary in enumerate(metrics):
            flag = compare(summary, paper[index], PAPER_RUNS) if paper else ""
            texts.append(summary.text() + (f" {flag}" if flag else ""))
        seconds = cell.seconds
        rows.append(
            [
                "DP naive Bayes" if model == "dp_nb" else "naive Bayes",
                METHODS[key].label,
                *texts,
                accuracy.text(),
                f"{seconds.mean * 1e3:.3f} ({seconds.sd * 1e3:.3f}), median "
                f"{seconds.median * 1e3:.3f}",
                f"{paper[0][0]:.4f}, {paper[1][0]:.4f}, {paper[3][0]:.4f}" if paper else "",
                f"{paper[4][0] * 1e3:.1f} ({paper[4][1] * 1e3:.1f})" if paper else "",
            ]
        )
        csv_rows.append(
            [model, key, *[v for s in metrics for v in (s.mean, s.sd)], accuracy.mean,
             seconds.mean * 1e3, seconds.sd * 1e3, seconds.median * 1e3,
             paper[4][0] * 1e3 if paper else ""]
        )  # fmt: skip
    legend = (
        f"Flags: {MEAN_GAP} mean more than 3 standard errors from the paper's; "
        f"{SD_GAP} standard deviation likewise. The paper's times are compared only in the "
        "last two columns: they time the authors' code, ours the library's `calibrate` "
        "(for the 'as published' rows: our vectorised re-implementation of their method, "
        "not their code)."
    )
    return markdown_table(header, rows) + "\n\n" + legend, csv_rows


#: CSV header of :func:`render_table4`.
TABLE4_CSV_HEADER = [
    "model",
    "method",
    "coverage_mean",
    "coverage_sd",
    "size_mean",
    "size_sd",
    "singleton_mean",
    "singleton_sd",
    "accuracy",
    "ms_mean",
    "ms_sd",
    "ms_median",
    "paper_ms",
]
