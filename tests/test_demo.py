"""The main job: python -m privconf_sklearn demo."""

import subprocess
import sys

from privconf_sklearn.__main__ import main
from privconf_sklearn._demo import demo_mechanisms, run_demo


def test_run_demo_reports_every_mechanism():
    lines = []
    rows = run_demo(n_samples=3000, seed=0, print_fn=lines.append)
    assert [row["mechanism"] for row in rows] == [label for label, _ in demo_mechanisms(1.0)]
    for row in rows:
        assert 0 <= row["coverage"] <= 1 and 1 <= row["set_size"] <= 2
        assert 0 <= row["singleton_rate"] <= 1
    text = "\n".join(lines)
    assert "coverage" in text and "ExponQ" in text and "epsilon_model = 2" in text


def test_cli_demo(capsys):
    assert main(["demo", "--n-samples", "2000", "--seed", "1", "--score", "aps"]) == 0
    assert "score = aps" in capsys.readouterr().out


def test_module_entry_point():
    result = subprocess.run(
        [sys.executable, "-m", "privconf_sklearn", "demo", "--n-samples", "2000"],
        capture_output=True,
        text=True,
        check=False,
    )
    assert result.returncode == 0, result.stderr
    assert "SplitConformal" in result.stdout
