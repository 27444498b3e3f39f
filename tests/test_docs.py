"""Every Python example in the documentation (`docs/` and the README) runs, in page order,
each page in a namespace of its own, against FakeProvider: OpenAI's base URL and key in the
environment point `Route("openai/...")` at it, through LiteLLM's real HTTP path. A page's
example that cannot run here (a real vendor, a framework's own service) is marked so in
the page (`<!-- skip: next -->`, with the reason said in its text); `make lint` type-checks
every example, those included (`tests/docs_examples.py`). A public name an example uses
that changes fails here. Output a page shows, in a fenced block after `<!-- output -->`, is
what the example before it printed (times in seconds may differ; lines may wrap)."""

from __future__ import annotations

import ast
import contextlib
import io
import re
import unittest
from collections.abc import Iterator
from pathlib import Path

import pytest
from sybil import Document, Example, Region, Sybil
from sybil.example import NotEvaluated

from policy_router.testing import FakeProvider

from ._redis import RedisServer
from .docs_examples import CODE_PARSERS, PAGES, PRELUDE, ROOT, python_blocks, write_modules

# Where the page says what the example before printed, and the key that example's output is
# kept under in the page's namespace.
OUTPUT = re.compile(r"^<!-- output -->\n+```[a-z]*\n(?P<shown>.*?)^```$", re.S | re.M)
PRINTED = "__printed__"
SECONDS = re.compile(r"\b\d+(\.\d+)? s\b")


def _normal(text: str) -> str:
    return " ".join(SECONDS.sub("# s", text).split())


def _compare(example: Example) -> str | None:
    printed = example.namespace.get(PRINTED, "")
    if _normal(printed) == _normal(example.parsed):
        return None
    return f"the page shows:\n{example.parsed}\nbut the example before it printed:\n{printed}"


def _outputs(document: Document) -> Iterator[Region]:
    for match in OUTPUT.finditer(document.text):
        yield Region(match.start(), match.end(), match.group("shown"), _compare)


SYBIL = Sybil(parsers=[*CODE_PARSERS, _outputs])


def _run(page: Path, fake: FakeProvider, monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> int:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-docs-example-key")
    monkeypatch.setenv("OPENAI_BASE_URL", fake.base_url)
    monkeypatch.setenv("OPENAI_API_BASE", fake.base_url)
    monkeypatch.chdir(tmp_path)  # an example that writes a file writes it here
    # A page may give the server a responder (the LangChain page does); the next page starts
    # without it.
    monkeypatch.setattr(fake, "responder", fake.responder)
    document = SYBIL.parse(page)
    document.namespace.update(fake=fake)
    ran = 0
    for example in document:
        printed = io.StringIO()
        try:
            with contextlib.redirect_stdout(printed):
                example.evaluate()
        except (unittest.SkipTest, NotEvaluated):
            continue
        except Exception as error:
            where = f"{page.relative_to(ROOT)}, line {example.line}"
            raise AssertionError(f"{where}: {type(error).__name__}: {error}") from error
        if example.region.evaluator is not _compare:
            document.namespace[PRINTED] = printed.getvalue()
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


@pytest.mark.parametrize("page", PAGES, ids=[str(p.relative_to(ROOT)) for p in PAGES])
def test_an_example_not_run_still_compiles_and_says_why(page: Path) -> None:
    """What is not run is at least valid Python, and its page says why it is not run."""
    lines = page.read_text().splitlines()
    for block in python_blocks(page):
        if not block.skipped:
            continue
        # A notebook-style `await` at the top is how the pages show async code.
        compile(block.source, f"{page}:{block.line}", "exec", flags=ast.PyCF_ALLOW_TOP_LEVEL_AWAIT)
        said = lines[max(0, block.line - 8) : block.line]
        assert any("Not run by the docs tests" in s for s in said), (page, block.line)


def test_the_type_checked_examples_stand_on_their_pages_lines(tmp_path: Path) -> None:
    """`make lint` type-checks every block, skipped ones included, in modules whose lines are
    the page's: an error mypy reports there is at the page's own line."""
    written = write_modules(tmp_path)
    assert {page for page in written.values()} == {p for p in PAGES if python_blocks(p)}
    skipped = 0
    for module, page in written.items():
        code = Path(module).read_text().splitlines()
        shown = page.read_text().splitlines()
        assert code[0] == PRELUDE
        for block in python_blocks(page):
            skipped += block.skipped
            for offset, text in enumerate(block.source.splitlines()):
                assert code[block.line - 1 + offset] == text, (page, block.line + offset)
                assert shown[block.line - 1 + offset] == text
    assert skipped >= 4  # the Redis, Redis Cluster, OpenTelemetry and frameworks blocks


def _policy_files() -> list[tuple[str, str, str]]:
    """Every policy file or LiteLLM proxy config a page shows: (page, language, text)."""
    import tomllib

    import yaml

    found = []
    for page in PAGES:
        for lang, text in re.findall(r"^```(yaml|toml)\n(.*?)^```$", page.read_text(), re.S | re.M):
            data = yaml.safe_load(text) if lang == "yaml" else tomllib.loads(text)
            if isinstance(data, dict) and ("groups" in data or "model_list" in data):
                found.append((str(page.relative_to(ROOT)), lang, text))
    return found


@pytest.mark.parametrize(("page", "lang", "text"), _policy_files(), ids=lambda v: str(v)[:40])
def test_every_policy_file_a_page_shows_passes_check(
    page: str, lang: str, text: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
    redis_server: RedisServer,
) -> None:
    """`policy-router check` finds no problem in a policy file a page shows, as a reader
    would run it: its secrets set in the environment, its Redis up, its price tables the
    money page's own table, at the paths it names."""
    from policy_router.cli.main import main

    money = (ROOT / "docs" / "policies" / "money.md").read_text()
    table = re.search(r"^```toml\n(.*?)^```$", money, re.S | re.M)
    assert table is not None
    monkeypatch.setenv("OPENAI_API_KEY", "sk-docs-example-key")  # a reader's own key
    for name in set(re.findall(r"os\.environ/(\w+)", text)):
        # Each variable its own secret, as a reader has them (two tenants with one key are refused).
        monkeypatch.setenv(name, redis_server.url if "REDIS" in name else f"sk-docs-example-{name.lower()}")
    for path in re.findall(r"^\s+\w+: (\S+\.toml)\s*$", text, re.M):
        target = tmp_path / path
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(table.group(1))
    file = tmp_path / f"policy.{lang}"
    file.write_text(text)
    monkeypatch.chdir(tmp_path)
    assert main(["check", str(file)]) == 0, page


PUBLIC_MODULES = [
    "policy_router", "policy_router.server", "policy_router.testing", "policy_router.integrations.litellm",
    "policy_router.integrations.langchain", "policy_router.integrations.otel",
]


@pytest.mark.parametrize("module", PUBLIC_MODULES)
def test_the_api_reference_documents_every_public_name(module: str) -> None:
    """Every name a public module exports (`__all__`) has its entry in the API reference,
    generated from its docstring."""
    import importlib

    reference = "".join(p.read_text() for p in (ROOT / "docs" / "reference").glob("*.md"))
    names = importlib.import_module(module).__all__
    missing = [n for n in names if f"::: {module}.{n}\n" not in reference + "\n" and f"::: policy_router.{n}\n" not in reference + "\n"]
    assert missing == [], f"docs/reference/api.md lacks {missing} of {module}"
