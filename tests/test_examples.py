"""The example scripts run from the command line and write what they are asked to.

Building the documentation runs every ``examples/plot_*.py`` script (sphinx-gallery),
and ``tests/test_docs.py`` builds it with the scripts in their ``--quick`` mode and
checks each page's figure and printed findings. Where the ``[docs]`` extra is not
installed (CI's oldest-versions environment), this file runs each script's ``main``
with ``--quick --output <tmp>`` instead, so that every environment runs every example
once. Always: each script is a gallery page (a titled docstring with its command) and
``--output`` writes the figure. The federated protocol example is run by
``tests/test_federated_protocol.py``.
"""

from __future__ import annotations

import ast
import importlib.util
from pathlib import Path

import pytest

pytest.importorskip("matplotlib", reason="the [plot] extra (part of [dev]) draws the figures")
pytest.importorskip("tqdm", reason="the [plot] extra (part of [dev]) shows progress")

ROOT = Path(__file__).resolve().parents[1]
EXAMPLES = sorted((ROOT / "examples").glob("plot_*.py"))
PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"
GALLERY_BUILD_RUNS_THEM = importlib.util.find_spec("sphinx_gallery") is not None


def _load(path: Path):
    spec = importlib.util.spec_from_file_location(f"example_{path.stem}", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_there_are_examples():
    assert len(EXAMPLES) >= 5


@pytest.mark.parametrize("script", sorted((ROOT / "examples").glob("*.py")), ids=lambda p: p.stem)
def test_script_is_a_gallery_page_with_its_command(script):
    docstring = ast.get_docstring(ast.parse(script.read_text(encoding="utf-8")), clean=False)
    lines = docstring.strip("\n").splitlines()
    assert len(lines) > 2 and set(lines[1]) == {"="} and len(lines[1]) == len(lines[0])
    assert f"python examples/{script.name}" in docstring


@pytest.mark.slow
@pytest.mark.skipif(
    GALLERY_BUILD_RUNS_THEM, reason="the docs build runs every example (tests/test_docs.py)"
)
@pytest.mark.parametrize("script", EXAMPLES, ids=lambda path: path.stem)
def test_example_runs_quick_and_writes_its_figure(script, tmp_path, capsys):
    written = _load(script).main(["--quick", "--output", str(tmp_path)])
    assert written, f"{script.name} wrote nothing"
    for path in written:
        assert path.parent == tmp_path and path.stat().st_size > 0
    figures = [path for path in written if path.suffix == ".png"]
    assert len(figures) == 1 and figures[0].read_bytes()[:8] == PNG_SIGNATURE
    assert "wrote" in capsys.readouterr().out
