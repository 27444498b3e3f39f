"""Run the notebooks under notebooks/ and store them with their outputs (`make notebooks`).

Each notebook is executed top to bottom in a fresh kernel, in its own folder (so an image it
saves lands beside it), and written back with its outputs and a digest of its code cells in
its metadata (`policy_router.code_sha256`): `tests/test_notebooks.py` fails when a code cell
changed after the outputs were made. Cell timings are not recorded, so a re-run changes
only what the code shows.
"""

from __future__ import annotations

import hashlib
import json
import sys
from pathlib import Path
from typing import Any

import nbclient
import nbformat

NOTEBOOKS = sorted((Path(__file__).parent.parent / "notebooks").glob("*.ipynb"))


def code_digest(notebook: Any) -> str:
    """The SHA-256 of a notebook's code cells, in order."""
    sources = [c.source for c in notebook.cells if c.cell_type == "code"]
    return hashlib.sha256(json.dumps(sources).encode()).hexdigest()


def execute(path: Path, workdir: Path) -> Any:
    """The notebook at `path`, executed in a fresh kernel with `workdir` as its folder."""
    notebook = nbformat.read(path, as_version=4)
    nbformat.validator.normalize(notebook)  # every cell gets its id
    nbclient.NotebookClient(
        notebook,
        timeout=180,
        kernel_name="python3",
        record_timing=False,
        resources={"metadata": {"path": str(workdir)}},
    ).execute()
    return notebook


def main(paths: list[Path]) -> int:
    for path in paths:
        notebook = execute(path, path.parent)
        notebook.metadata["policy_router"] = {"code_sha256": code_digest(notebook)}
        nbformat.write(notebook, path)
        print(f"{path.name}: executed, outputs stored")
    return 0


if __name__ == "__main__":
    sys.exit(main([Path(p) for p in sys.argv[1:]] or NOTEBOOKS))
