"""The notebooks under notebooks/ run top to bottom against FakeProvider, so they never rot."""

from __future__ import annotations

from pathlib import Path

import pytest

nbformat = pytest.importorskip("nbformat", reason="the notebooks extra is not installed")
nbclient = pytest.importorskip("nbclient", reason="the notebooks extra is not installed")

NOTEBOOKS = sorted((Path(__file__).parent.parent / "notebooks").glob("*.ipynb"))


def test_there_are_three_notebooks() -> None:
    """The quickstart, the policies and the cost-and-latency notebooks are all there."""
    assert [p.name for p in NOTEBOOKS] == [
        "01-quickstart.ipynb",
        "02-policies.ipynb",
        "03-cost-and-latency.ipynb",
    ]


@pytest.mark.slow
@pytest.mark.parametrize("path", NOTEBOOKS, ids=[p.stem for p in NOTEBOOKS])
def test_notebook_runs_clean(path: Path) -> None:
    """Every cell executes without an error, in a fresh kernel."""
    notebook = nbformat.read(path, as_version=4)
    client = nbclient.NotebookClient(
        notebook,
        timeout=120,
        kernel_name="python3",
        resources={"metadata": {"path": str(path.parent)}},
    )
    client.execute()
    errors = [
        o
        for c in notebook.cells
        if c.cell_type == "code"
        for o in c.get("outputs", [])
        if o.get("output_type") == "error"
    ]
    assert errors == []
