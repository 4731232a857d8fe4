"""The risk-control benchmark and table scripts run (quick mode) and report honestly."""

import pytest

from benchmarks import bench_risk_control, risk_control_table

pytest.importorskip("matplotlib", reason="the [plot] extra (part of [dev]) draws the figure")


@pytest.mark.slow
def test_table_runs_quick(tmp_path, capsys):
    rows = risk_control_table.main(["--quick", "--figure", str(tmp_path / "figure.png")])
    assert (tmp_path / "figure.png").exists()
    assert {row["data"] for row in rows} == {"synthetic", "digits"}
    for row in rows:
        assert row["trivial_warned"]  # every trivial release warned
        assert row["private_fnr"] <= 0.2 and row["crc_fnr"] <= 0.2
    assert "| synthetic | 400 | 1 |" in capsys.readouterr().out


@pytest.mark.slow
def test_timing_runs_quick(capsys):
    bench_risk_control.main(["--quick"])
    printed = capsys.readouterr().out
    assert "of MAPIE (vectorised risks)" in printed and "load average" in printed
