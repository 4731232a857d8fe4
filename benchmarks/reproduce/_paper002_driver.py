"""Run the requested paper 002 tables, sharing runs between tables of the same model."""

from __future__ import annotations

import time
from pathlib import Path

from ._paper002_tables import (
    CSV_HEADER,
    TABLE4_CSV_HEADER,
    cell_of,
    collect,
    render,
    render_table4,
)
from ._report import Summary, write_csv
from .paper002 import (
    METHOD_KEYS,
    METHODS,
    RECORD_COLUMNS,
    TABLES,
    Setting,
    run_model,
)

__all__ = ["TABLE4", "reproduce_paper002"]

TABLE4 = "paper002-table4"
_TABLE4_SETTING = Setting(10000, 0.1, 1.0)
_TABLE4_METHODS = TABLES["paper002-table1"].methods
_TABLE4_MODELS = ("nb", "dp_nb")


def _plan(names: list[str]) -> dict[str, dict[Setting, set[str]]]:
    """Model kind -> setting -> method keys needed by the requested tables."""
    plan: dict[str, dict[Setting, set[str]]] = {}
    for name in names:
        if name == TABLE4:
            for model in _TABLE4_MODELS:
                plan.setdefault(model, {}).setdefault(_TABLE4_SETTING, set()).update(
                    _TABLE4_METHODS
                )
            continue
        spec = TABLES[name]
        for setting in spec.settings:
            plan.setdefault(spec.model, {}).setdefault(setting, set()).update(spec.methods)
    return plan


def reproduce_paper002(
    names: list[str], runs: int, *, jobs: int, model_seed, out: Path, plots: bool = True
) -> list[str]:
    """Run, summarise and write the requested tables; returns their Markdown.

    Writes ``<name>.md``, ``<name>.csv`` and ``<name>.png`` per table and
    ``paper002-<model>_runs.csv`` (one row per run, cell and method) to ``out``.
    """
    outputs: dict[str, tuple] = {}
    timings = {}
    for model, cells in _plan(names).items():
        settings = list(cells)
        method_lists = [tuple(k for k in METHOD_KEYS if k in cells[s]) for s in settings]
        start = time.perf_counter()
        records, accuracy = run_model(
            model, settings, method_lists, runs, model_seed=model_seed, jobs=jobs
        )
        timings[model] = time.perf_counter() - start
        outputs[model] = (settings, records, accuracy)
        write_csv(
            out / f"paper002-{model}_runs.csv",
            ["n_samples", "alpha", "epsilon_cal", *RECORD_COLUMNS],
            [
                [settings[int(r[1])].n_samples, settings[int(r[1])].alpha,
                 settings[int(r[1])].epsilon_cal, int(r[0]), int(r[1]),
                 METHOD_KEYS[int(r[2])], *r[3:]]
                for r in records
            ],
        )  # fmt: skip

    texts = []
    for name in names:
        if name == TABLE4:
            texts.append(_table4(outputs, out, timings))
            continue
        spec = TABLES[name]
        settings, records, accuracy = outputs[spec.model]
        result = collect(spec, settings, records, accuracy)
        markdown, csv_rows = render(result)
        markdown += (
            f"\n\nWall time of all {spec.model} runs in this invocation: "
            f"{timings[spec.model]:.0f} s ({jobs} job(s))."
        )
        (out / f"{name}.md").write_text(markdown + "\n")
        write_csv(out / f"{name}.csv", CSV_HEADER, csv_rows)
        if plots:
            from ._plots import plot_paper002_table

            plot_paper002_table(result, out / f"{name}.png")
        texts.append(markdown)
    return texts


def _table4(outputs, out: Path, timings) -> str:
    cells = {}
    for model in _TABLE4_MODELS:
        settings, records, accuracy = outputs[model]
        setting_id = settings.index(_TABLE4_SETTING)
        model_accuracy = Summary.of(accuracy[accuracy[:, 1] == _TABLE4_SETTING.n_samples, 2])
        for key in _TABLE4_METHODS:
            if key in METHODS:
                cells[model, key] = (cell_of(records, setting_id, key), model_accuracy)
    markdown, csv_rows = render_table4(cells)
    markdown = (
        "**Paper 002 Table 4: time per calibration** (n = 10000, 2400 calibration scores, "
        "eps_CP = 1, alpha = 0.1)\n\n" + markdown
    )
    (out / f"{TABLE4}.md").write_text(markdown + "\n")
    write_csv(out / f"{TABLE4}.csv", TABLE4_CSV_HEADER, csv_rows)
    return markdown
