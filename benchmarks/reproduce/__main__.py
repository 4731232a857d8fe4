"""Command line: ``python -m benchmarks.reproduce TABLE [TABLE ...] [--runs N] [--quick]``.

Writes ``<TABLE>.md``, ``<TABLE>.csv`` and ``<TABLE>.png`` to ``benchmarks/results/``
(git-ignored) and prints the Markdown tables. See ``benchmarks/README.md``.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

from ._exponq_explain import CSV_HEADER as EXPONQ_CSV_HEADER
from ._exponq_explain import exponq_parameter_table
from ._paper002_driver import TABLE4, reproduce_paper002
from ._report import write_csv
from .paper002 import PAPER_MODEL_SEED, TABLES

EXPONQ_PARAMETERS = "paper002-exponq-parameters"
PAPER002 = [*TABLES, TABLE4, EXPONQ_PARAMETERS]
PAPER004 = ["paper004-fig4", "paper004-b2"]
GROUPS = {"paper002": PAPER002, "paper004": PAPER004, "all": [*PAPER002, *PAPER004]}
#: Runs per cell: paper 002's 1000; 200 for paper 004 (the paper: 20 random splits);
#: a handful with --quick (CI: the scripts run).
DEFAULT_RUNS, DEFAULT_RUNS_004, QUICK_RUNS = 1000, 200, 2
RESULTS = Path(__file__).resolve().parent.parent / "results"


def _names(requested: list[str]) -> list[str]:
    names: list[str] = []
    for name in requested:
        for item in GROUPS.get(name, [name]):
            if item not in names:
                names.append(item)
    return names


def _paper004(names: list[str], runs: int, args) -> list[str]:
    from ._paper004_report import report_b2, report_fig4
    from .paper004 import B2_METHODS, FIG4_METHODS, run_paper004

    keys = []
    if "paper004-fig4" in names:
        keys += [e.key for e in FIG4_METHODS]
    if "paper004-b2" in names:
        keys += [e.key for e in B2_METHODS]
    start = time.perf_counter()
    records = run_paper004(keys, runs, jobs=args.jobs)
    seconds = time.perf_counter() - start
    write_csv(args.out / "paper004_runs.csv", ["run", "experiment", "key", "threshold",
              "coverage", "length", "stated_lower_bound"],
              [[int(r[0]), int(r[1]), keys[int(r[1])], *r[2:]] for r in records])  # fmt: skip
    texts = []
    for name, report in (("paper004-fig4", report_fig4), ("paper004-b2", report_b2)):
        if name in names:
            text = report(records, keys, args.out, plots=not args.no_plots)
            text += f"\n\nWall time of all paper 004 runs: {seconds:.0f} s ({args.jobs} job(s))."
            texts.append(text)
    return texts


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m benchmarks.reproduce", description=__doc__.splitlines()[0]
    )
    choices = [*PAPER002, *PAPER004, *GROUPS]
    parser.add_argument(
        "tables",
        nargs="+",
        choices=choices,
        metavar="TABLE",
        help=f"one or more of: {', '.join(choices)}",
    )
    parser.add_argument(
        "--runs",
        type=int,
        default=None,
        help=f"Monte Carlo runs per cell (default {DEFAULT_RUNS} for paper 002, "
        f"as the paper; {DEFAULT_RUNS_004} for paper 004)",
    )
    parser.add_argument(
        "--quick",
        action="store_true",
        help=f"{QUICK_RUNS} runs per cell: checks that the scripts work",
    )
    parser.add_argument("--jobs", type=int, default=1, help="worker processes (default 1)")
    parser.add_argument("--out", type=Path, default=RESULTS, help="output folder")
    parser.add_argument(
        "--independent-model-noise",
        action="store_true",
        help="fresh model noise per run (the paper reuses random_state=42)",
    )
    parser.add_argument("--no-plots", action="store_true", help="skip the PNG figures")
    args = parser.parse_args(argv)  # fmt: skip
    if args.runs is not None and args.runs < 2:
        parser.error("--runs must be at least 2 (standard deviations need two runs).")
    runs = args.runs or (QUICK_RUNS if args.quick else DEFAULT_RUNS)
    runs_004 = args.runs or (QUICK_RUNS if args.quick else DEFAULT_RUNS_004)
    args.out.mkdir(parents=True, exist_ok=True)
    names = _names(args.tables)
    start = time.perf_counter()
    texts = reproduce_paper002(
        [n for n in names if n in PAPER002 and n != EXPONQ_PARAMETERS],
        runs,
        jobs=args.jobs,
        model_seed=None if args.independent_model_noise else PAPER_MODEL_SEED,
        out=args.out,
        plots=not args.no_plots,
    )
    if EXPONQ_PARAMETERS in names:
        markdown, rows = exponq_parameter_table(searches=5 if args.quick else 100)
        markdown = (
            "**ExponQ parameters: library against the public code** (alpha = 0.1)\n\n" + markdown
        )
        (args.out / f"{EXPONQ_PARAMETERS}.md").write_text(markdown + "\n")
        write_csv(args.out / f"{EXPONQ_PARAMETERS}.csv", EXPONQ_CSV_HEADER, rows)
        texts.append(markdown)
    wanted_004 = [n for n in names if n in PAPER004]
    if wanted_004:
        texts += _paper004(wanted_004, runs_004, args)
    for text in texts:
        print(text, end="\n\n")
    print(f"Done in {time.perf_counter() - start:.0f} s; results in {args.out}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
