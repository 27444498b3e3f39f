"""The documentation's Python examples as modules mypy can check, run by `make lint`.

`python -m tests.docs_examples` writes one module per page (`docs/**/*.md` and the README)
holding every Python block of the page in page order, the page's invisible setup blocks and
the blocks the docs tests do not run included, each on the page's own line numbers; then it
runs mypy once over the package and those modules and prints each error of an example at its
page and line (`docs/policies/money.md:178: error: ...`). The package is checked strictly
(as `pyproject.toml` says); the examples as a user's script is: every call and attribute
checked, no annotations asked for (`[[tool.mypy.overrides]]` for `docs_examples`).

So an example the docs tests cannot run (a Redis Cluster, a framework's own objects) still
fails `make test` when a public name, an argument or a return type it uses changes."""

from __future__ import annotations

import os
import re
import shutil
import sys
from dataclasses import dataclass
from pathlib import Path

from sybil import Sybil
from sybil.parsers.markdown import PythonCodeBlockParser, SkipParser

ROOT = Path(__file__).resolve().parent.parent
PAGES = [*sorted((ROOT / "docs").rglob("*.md")), ROOT / "README.md"]
PACKAGE = "docs_examples"
# What reads a page's Python blocks and its skip directives (tests/test_docs.py adds its own).
CODE_PARSERS = (PythonCodeBlockParser(), SkipParser())
# Every page's examples may use the suite's FakeProvider as `fake` (tests/test_docs.py puts it
# in each page's namespace). On line 1, which is a page's title, never code.
PRELUDE = "from policy_router.testing import FakeProvider; fake: FakeProvider"


@dataclass(frozen=True)
class Block:
    """One Python block of a page: the page line its code starts on, its code, whether the
    docs tests skip it."""

    line: int
    source: str
    skipped: bool


def python_blocks(page: Path) -> list[Block]:
    """The Python blocks of `page` in page order, visible and invisible, run or skipped."""
    document = Sybil(parsers=list(CODE_PARSERS)).parse(page)
    blocks, skip_next = [], False
    for example in document:
        if isinstance(example.parsed, tuple):  # a skip directive
            skip_next = example.parsed[0] == "next"
            continue
        # `example.line` is the fence's (or the invisible block's opening) line.
        blocks.append(Block(example.line + 1, str(example.parsed), skip_next))
        skip_next = False
    return blocks


def module_name(page: Path) -> str:
    """`docs/policies/money.md` → `docs__policies__money`."""
    stem = page.relative_to(ROOT).with_suffix("").as_posix()
    return re.sub(r"\W", "_", stem.replace("/", "__"))


def write_modules(directory: Path) -> dict[str, Path]:
    """Write the package of the examples under `directory`; return each module's file → page."""
    package = directory / PACKAGE
    shutil.rmtree(package, ignore_errors=True)
    package.mkdir(parents=True)
    (package / "__init__.py").write_text("")
    pages: dict[str, Path] = {}
    for page in PAGES:
        blocks = python_blocks(page)
        if not blocks:
            continue
        lines = [""] * (len(page.read_text().splitlines()) + 1)
        lines[0] = PRELUDE
        for block in blocks:
            for offset, text in enumerate(block.source.splitlines()):
                lines[block.line - 1 + offset] = text
        target = package / f"{module_name(page)}.py"
        target.write_text("\n".join(lines) + "\n")
        pages[str(target)] = page
    return pages


def main() -> int:
    from mypy import api

    directory = ROOT / ".venv" / "docs-examples"
    pages = write_modules(directory)
    os.environ["MYPYPATH"] = str(directory)
    out, err, status = api.run(["-p", "policy_router", "-p", PACKAGE])
    for path, page in pages.items():
        for prefix in (path, os.path.relpath(path, Path.cwd())):
            out = out.replace(prefix + ":", str(page.relative_to(ROOT)) + ":")
    sys.stdout.write(out)
    sys.stderr.write(err)
    return status


if __name__ == "__main__":
    raise SystemExit(main())
