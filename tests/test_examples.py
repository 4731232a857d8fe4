"""The gallery scripts run, in their ``--quick`` mode, and write what the docs show.

Each ``examples/plot_*.py`` is imported from its file and its ``main`` called with
``--quick --output <tmp>``: it must write every file it returns, with the same names as
the committed copies under ``docs/_static/examples/`` that the gallery pages display
(those come from the full runs; the command is on each page). The federated protocol
example is run by ``tests/test_federated_protocol.py``.
"""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

pytest.importorskip("matplotlib", reason="the [plot] extra (part of [dev]) draws the figures")
pytest.importorskip("tqdm", reason="the [plot] extra (part of [dev]) shows progress")

ROOT = Path(__file__).resolve().parents[1]
EXAMPLES = sorted((ROOT / "examples").glob("plot_*.py"))
STATIC = ROOT / "docs" / "_static" / "examples"
PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"


def _load(path: Path):
    spec = importlib.util.spec_from_file_location(f"example_{path.stem}", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_there_are_examples():
    assert len(EXAMPLES) >= 4


@pytest.mark.slow
@pytest.mark.parametrize("script", EXAMPLES, ids=lambda path: path.stem)
def test_example_runs_quick_and_writes_its_outputs(script, tmp_path, capsys):
    written = _load(script).main(["--quick", "--output", str(tmp_path)])
    assert written, f"{script.name} wrote nothing"
    for path in written:
        assert path.parent == tmp_path and path.stat().st_size > 0
        if path.suffix == ".png":
            assert path.read_bytes()[:8] == PNG_SIGNATURE
        committed = STATIC / path.name
        assert committed.is_file(), (
            f"{committed} is missing: run 'python examples/{script.name}' and commit it"
        )
    assert "wrote" in capsys.readouterr().out


@pytest.mark.parametrize("script", EXAMPLES, ids=lambda path: path.stem)
def test_gallery_page_shows_the_script_and_its_command(script):
    pages = "".join(path.read_text() for path in (ROOT / "docs" / "examples").glob("*.rst"))
    assert f"examples/{script.name}" in pages
    assert f"python examples/{script.name}" in pages
