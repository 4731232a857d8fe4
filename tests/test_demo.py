"""The main job: python -m privconf_sklearn demo.

The demo's report is checked against the estimators it returns, recomputed on the same
test rows (its split is documented: 60% train, 24% calibration, 16% test of
``make_two_gaussians(n_samples, random_state=0)``), so no tolerance is guessed: every
printed number must be exactly what the fitted estimator gives.
"""

import subprocess
import sys

import numpy as np
import pytest

from privconf_sklearn.__main__ import main

# The demo has no public Python API besides the command line; run_demo returns the
# fitted estimators, which the report is checked against.
from privconf_sklearn._demo import demo_mechanisms, run_demo
from privconf_sklearn.datasets import make_two_gaussians
from privconf_sklearn.metrics import mean_set_size, set_coverage, singleton_rate


def test_run_demo_reports_what_its_estimators_give():
    lines = []
    n_samples = 3000
    rows = run_demo(n_samples=n_samples, seed=0, print_fn=lines.append)
    assert [row["mechanism"] for row in rows] == [label for label, _ in demo_mechanisms(1.0)]
    X, y = make_two_gaussians(n_samples, random_state=0)
    first_test_row = int(0.6 * n_samples) + int(0.24 * n_samples)
    X_test, y_test = X[first_test_row:], y[first_test_row:]
    for row in rows:
        estimator = row["estimator"]
        sets = estimator.predict_set(X_test)
        assert row["coverage"] == set_coverage(y_test, sets, estimator.classes_)
        assert row["set_size"] == mean_set_size(sets)
        assert row["singleton_rate"] == singleton_rate(sets)
        assert row["threshold"] == estimator.threshold_
        assert row["coverage_lower_bound"] == estimator.calibration_.coverage_lower_bound
        privacy = estimator.calibration_.privacy
        if privacy.notion == "none":
            assert np.isinf(row["epsilon_total"])
        else:  # model (epsilon_model = 2) plus calibration, as the accountant adds them
            assert np.isclose(row["epsilon_total"], 2.0 + privacy.accountant_spend()[0])
    text = "\n".join(lines)
    assert "coverage" in text and "ExponQ" in text and "epsilon_model = 2" in text
    for row in rows:
        printed = next(line for line in lines if line.startswith(row["mechanism"] + " "))
        assert f"{row['coverage']:.4f}" in printed and f"{row['set_size']:.4f}" in printed


def test_cli_demo(capsys):
    assert main(["demo", "--n-samples", "2000", "--seed", "1", "--score", "aps"]) == 0
    assert "score = aps" in capsys.readouterr().out


@pytest.mark.slow
def test_module_entry_point():
    result = subprocess.run(
        [sys.executable, "-m", "privconf_sklearn", "demo", "--n-samples", "2000"],
        capture_output=True,
        text=True,
        check=False,
    )
    assert result.returncode == 0, result.stderr
    assert "SplitConformal" in result.stdout
