"""The notebooks under notebooks/: stored with the outputs their code makes, and run top to
bottom against FakeProvider in `make test`, so they never rot (`make notebooks` re-runs them
and stores the outputs)."""

from __future__ import annotations

import concurrent.futures
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

nbformat = pytest.importorskip("nbformat", reason="the notebooks extra is not installed")
pytest.importorskip("nbclient", reason="the notebooks extra is not installed")

from .notebook_runner import NOTEBOOKS, code_digest, execute  # noqa: E402

IDS = [p.stem for p in NOTEBOOKS]
# Outputs that vary from run to run by nature; every other kind must be what the code makes.
_KINDS = ("text/html", "text/plain", "image/png", "application/vnd.jupyter.widget-view+json")


def kinds(cell: Any) -> list[tuple[str, ...]]:
    """What a cell shows, by output type (and stream name or MIME types), in order.

    Consecutive text on one stream is one output, as Jupyter shows it: the kernel sends a
    cell's stdout in as many messages as it had pauses, which a busy machine adds."""
    shown: list[tuple[str, ...]] = []
    for o in cell.get("outputs", []):
        if o.output_type == "stream":
            if not shown or shown[-1] != ("stream", o.name):
                shown.append(("stream", o.name))
        elif o.output_type in ("display_data", "execute_result"):
            shown.append((o.output_type, *sorted(k for k in o.data if k in _KINDS)))
        else:
            shown.append((o.output_type,))
    return shown


def test_there_are_four_notebooks() -> None:
    """The quickstart, policies, cost-and-latency and learning notebooks are all there."""
    assert [p.name for p in NOTEBOOKS] == [
        "01-quickstart.ipynb",
        "02-policies.ipynb",
        "03-cost-and-latency.ipynb",
        "04-routing-that-learns.ipynb",
    ]


@pytest.mark.parametrize("path", NOTEBOOKS, ids=IDS)
def test_stored_outputs_were_made_by_the_code_stored(path: Path) -> None:
    """Every code cell ran, in order, and no code cell changed since (`make notebooks`
    re-runs them); what is stored holds no error, nothing on stderr, no stray value."""
    notebook = nbformat.read(path, as_version=4)
    code = [c for c in notebook.cells if c.cell_type == "code"]
    assert notebook.metadata.get("policy_router", {}).get("code_sha256") == code_digest(notebook), (
        f"{path.name}: a code cell changed after its outputs were made; run `make notebooks`"
    )
    assert [c.execution_count for c in code] == list(range(1, len(code) + 1))
    shown = [k for c in code for k in kinds(c)]
    assert ("error",) not in shown and ("stream", "stderr") not in shown
    assert not any(
        "'true'" in "".join(o.get("data", {}).get("text/plain", ""))
        for c in code
        for o in c.outputs
    )


def test_the_cost_notebook_stores_its_plots_as_images() -> None:
    """Plots are PNG images inline, and the one the docs' notebooks page shows is the file
    it saved (the site serves `notebooks/images/` as `images/`)."""
    notebook = nbformat.read(NOTEBOOKS[2], as_version=4)
    images = [
        o for c in notebook.cells for o in c.get("outputs", []) if "image/png" in o.get("data", {})
    ]
    assert len(images) == 2
    saved = NOTEBOOKS[2].parent / "images" / "cost-and-spend.png"
    assert saved.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    page = NOTEBOOKS[2].parents[1] / "docs" / "notebooks.md"
    assert "](images/cost-and-spend.png)" in page.read_text()


def test_the_learning_notebook_plots_scores_over_time_and_the_docs_show_it() -> None:
    notebook = nbformat.read(NOTEBOOKS[3], as_version=4)
    images = [o for c in notebook.cells for o in c.get("outputs", []) if "image/png" in o.get("data", {})]
    assert len(images) == 1
    saved = NOTEBOOKS[3].parent / "images" / "scores-over-time.png"
    assert saved.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    page = NOTEBOOKS[3].parents[1] / "docs" / "production" / "metrics.md"
    assert "](../images/scores-over-time.png)" in page.read_text()


@pytest.fixture(scope="module")
def executed(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, concurrent.futures.Future[Any]]]:
    """Each notebook executed in a fresh kernel of its own, in a scratch folder (so the
    images it saves do not touch the repository), two at a time: a kernel spends most of its
    start waiting on imports, which another kernel's cells can use."""
    with concurrent.futures.ThreadPoolExecutor(2) as pool:
        found = {}
        for path in NOTEBOOKS:
            scratch = tmp_path_factory.mktemp(path.stem)
            shutil.copy(path, scratch / path.name)
            found[path.stem] = pool.submit(execute, scratch / path.name, scratch)
        yield found


@pytest.mark.slow
@pytest.mark.parametrize("path", NOTEBOOKS, ids=IDS)
def test_notebook_runs_clean_and_shows_what_is_stored(
    path: Path, executed: dict[str, concurrent.futures.Future[Any]]
) -> None:
    """Every cell executes without an error in a fresh kernel, and shows the same kinds of
    output as the stored copy: a cell that lost its plot or gained a warning makes the
    store stale."""
    fresh = executed[path.stem].result()
    stored = nbformat.read(path, as_version=4)
    for new, old in zip(fresh.cells, stored.cells, strict=True):
        if new.cell_type == "code":
            assert kinds(new) == kinds(old), f"{path.name}: {new.source[:60]!r}"
