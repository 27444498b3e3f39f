"""Every Python example in the documentation (`docs/` and the README) runs, in page order,
each page in a namespace of its own, against FakeProvider: OpenAI's base URL and key in the
environment point `Route("openai/...")` at it, through LiteLLM's real HTTP path. A page's
example that cannot run here (a real vendor, a framework's own service) is marked so in
the page (`<!-- skip: next -->`, with the reason said in its text) and is still compiled
(not type-checked). A public name an example uses that changes fails here."""

from __future__ import annotations

import ast
import unittest
from pathlib import Path

import pytest
from sybil import Sybil
from sybil.example import NotEvaluated
from sybil.parsers.markdown import PythonCodeBlockParser, SkipParser

from policy_router.testing import FakeProvider

ROOT = Path(__file__).resolve().parent.parent
PAGES = [*sorted((ROOT / "docs").rglob("*.md")), ROOT / "README.md"]
SYBIL = Sybil(parsers=[PythonCodeBlockParser(), SkipParser()])


def _run(page: Path, fake: FakeProvider, monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> int:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-docs-example-key")
    monkeypatch.setenv("OPENAI_BASE_URL", fake.base_url)
    monkeypatch.setenv("OPENAI_API_BASE", fake.base_url)
    monkeypatch.chdir(tmp_path)  # an example that writes a file writes it here
    document = SYBIL.parse(page)
    document.namespace.update(fake=fake)
    ran = 0
    for example in document:
        try:
            example.evaluate()
        except (unittest.SkipTest, NotEvaluated):
            continue
        except Exception as error:
            raise AssertionError(f"{page.relative_to(ROOT)}, line {example.line}: {error!r}") from error
        # What a reader sees: a fenced block (not a skip directive, not a page's invisible
        # setup block).
        ran += document.text[example.start : example.start + 3] == "```"
    return ran


@pytest.mark.parametrize("page", PAGES, ids=[str(p.relative_to(ROOT)) for p in PAGES])
def test_the_examples_of_a_page_run(
    page: Path, fake: FakeProvider, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    _run(page, fake, monkeypatch, tmp_path)


def test_the_site_runs_at_least_forty_examples(
    fake: FakeProvider, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    total = 0
    for page in PAGES[:-1]:  # the site's own pages
        with monkeypatch.context() as scoped:
            total += _run(page, fake, scoped, tmp_path)
    assert total >= 40, total


def _skipped_blocks(page: Path) -> list[tuple[int, str]]:
    """The Python blocks of `page` marked not run: (line, source)."""
    lines = page.read_text().splitlines()
    found, i = [], 0
    while i < len(lines):
        if lines[i].strip() == "<!-- skip: next -->":
            start = next(j for j in range(i + 1, len(lines)) if lines[j].startswith("```"))
            end = next(j for j in range(start + 1, len(lines)) if lines[j].startswith("```"))
            if lines[start].strip() == "```python":
                found.append((start + 1, "\n".join(lines[start + 1 : end])))
            i = end
        i += 1
    return found


@pytest.mark.parametrize("page", PAGES, ids=[str(p.relative_to(ROOT)) for p in PAGES])
def test_an_example_not_run_still_compiles_and_says_why(page: Path) -> None:
    """What is not run is at least valid Python, and its page says why it is not run."""
    text = page.read_text()
    for line, source in _skipped_blocks(page):
        # A notebook-style `await` at the top is how the pages show async code.
        compile(source, f"{page}:{line}", "exec", flags=ast.PyCF_ALLOW_TOP_LEVEL_AWAIT)
        said = text.splitlines()[max(0, line - 7) : line]
        assert any("Not run by the docs tests" in s for s in said), (page, line)
