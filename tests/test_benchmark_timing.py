"""The benchmarks' shared timing: contenders alternate, ratios are taken per round."""

import numpy as np

from benchmarks import bench_calibration, bench_predict_set
from benchmarks._timing import Rounds, alternate, load_average, peak_memory


def test_contenders_alternate_and_warmup_is_not_timed():
    calls = []
    timing = alternate(
        {"A": lambda: calls.append("A"), "B": lambda: calls.append("B")},
        3,
        warmup=1,
        before={"B": lambda: calls.append("clear")},
    )
    assert calls == ["A", "clear", "B"] * 4
    assert [len(timing.times[name]) for name in ("A", "B")] == [3, 3]


def test_ratios_are_per_round():
    timing = Rounds({"ours": [1.0, 4.0, 3.0], "base": [2.0, 2.0, 1.0]})
    assert timing.ratios("ours", "base") == [0.5, 2.0, 3.0]
    assert timing.ratio("ours", "base") == (2.0, 0.5, 3.0)
    assert timing.ratio_text("ours", "base") == "2.00x (0.50-3.00)"
    assert timing.best("ours") == 1.0 and timing.median("base") == 2.0
    assert "load average" in load_average()


def test_peak_memory_sees_numpy_allocations():
    assert peak_memory(lambda: np.ones(2**20)) >= 8 * 2**20


def test_textbook_baselines_give_the_same_sets_and_scores(capsys):
    """The baselines of bench_predict_set compute what our scores compute."""
    bench_predict_set.report(bench_predict_set.run([(300, 10), (300, 40)], 1, False))
    printed = capsys.readouterr().out
    assert printed.count("1.0000 of rows") == 8
    assert "max abs difference" in printed


def test_calibration_benchmark_runs(capsys):
    bench_calibration.report(bench_calibration.run([2400], {2400: 2}))
    printed = capsys.readouterr().out
    assert printed.count("| 2,400 |") == len(bench_calibration.CASES)
